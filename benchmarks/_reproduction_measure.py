"""reproduce_paper.py's measuring part: the models, one fit and its measures, the run.

Every fit is cached with its record (sparsity, accuracy, times on the test split)
and, for the fits that Fig. 3 and 4 draw, their average codes; `_reproduction_report`
draws and writes the report from these alone.
"""
import os
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

import _sparsity_measure as sparsity
from _common import (LDA_THRESHOLDS, REPO_ROOT, Cache, corpus_key, lda_exp_log_theta,
                     lda_word_zero_shares, log, predicted_classes, read_corpus, svm_accuracy,
                     word_zero_share)
from _machine import load1

PROTOCOL = 1
DEFAULT_CACHE = os.path.join(REPO_ROOT, "benchmarks", ".cache", "reproduction")

# name -> (kind, estimator parameters besides n_topics/random_state/n_jobs/max_iter)
# STC and MedSTC run at the paper's parameterisation, spelled out so that the
# reproduction does not move when the estimators' defaults do.
PAPER_STC, PAPER_MEDSTC = sparsity.PAPER_STC, sparsity.PAPER_MEDSTC
# STC-knee: the knee of the sparsity-accuracy frontier (bench_sparsity.py), not in the paper.
KNEE_STC = dict(rho=0.02, rho_units="relative", lambda_=0.1, theta_penalty="l1")
MODELS = {
    "STC": ("stc", dict(PAPER_STC)),
    "STC-knee": ("stc", dict(KNEE_STC)),
    "gaussSTC": ("stc", dict(PAPER_STC, code_penalty="l2")),
    "MedSTC": ("medstc", dict(PAPER_MEDSTC)),
    "gaussMedSTC": ("medstc", dict(PAPER_MEDSTC, code_penalty="l2")),
    "LDA": ("lda", {}),
    "NMF": ("nmf", {}),
}
# The fits whose word and document codes Fig. 3 and 4 draw (seed 0, --figure-topics).
FIGURE_MODELS = ("STC", "STC-knee", "MedSTC", "LDA")
# Six categories for Fig. 3 and 4, spread over the newsgroup hierarchy.
FIGURE_CATEGORIES = ("comp.graphics", "rec.autos", "sci.med", "sci.space",
                     "soc.religion.christian", "talk.politics.guns")
FULL = dict(topics=(20, 50, 100), seeds=5, figure_topics=50, max_iter=None,
            lda_max_iter=10, nmf_max_iter=200, medstc_refit_C="auto", frontier_topics=50)
QUICK = dict(topics=(3, 4), seeds=1, figure_topics=4, max_iter=3, lda_max_iter=1,
             nmf_max_iter=10, medstc_refit_C=None, frontier_topics=4)


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

@dataclass
class Fits:
    """What a run gathered: records by (model, K, seed) for the run's K, the figure data
    by model, the fits --cached-only lacks, the corpus (None if nothing was fitted) and
    the number of fits made."""
    records: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    missing: list = field(default_factory=list)
    corpus: object = None
    computed: int = 0


def corpus_subset(quick):
    """Every 4th document of the embedded corpus with --quick, as bench_sparsity.py's."""
    return sparsity.QUICK["subset"] if quick else None


def open_cache(args):
    """The cache of this run's fits (of its corpus)."""
    # The file names hash PROTOCOL twice (in the corpus key and as the cache's protocol):
    # the names the cached fits have always had.
    key = dict(corpus_key(args.quick, corpus_subset(args.quick)), protocol=PROTOCOL)
    return Cache(args.cache, key, PROTOCOL, refresh=args.refresh)


def fit_jobs(args, grid, topics, figure_K):
    """(model, K, seed) of every fit of the run, then the figures' fits if at another K.

    Seed by seed, so that a run stopped early has every K and model at the first seeds.
    """
    seeds = args.seeds or grid["seeds"]
    jobs = [(name, K, seed) for seed in range(seeds) for K in topics for name in args.models]
    if figure_K not in topics:
        jobs += [(name, figure_K, 0) for name in FIGURE_MODELS if name in args.models]
    return jobs


def run_fits(args, grid, cache):
    """Every fit of the run, from ``cache`` or fitted (and cached)."""
    topics = list(args.topics or grid["topics"])
    figure_K = args.figure_topics or grid["figure_topics"]
    fits = Fits()
    for name, K, seed in fit_jobs(args, grid, topics, figure_K):
        keep = K == figure_K and seed == 0 and name in FIGURE_MODELS
        key = dict(model=name, K=K, seed=seed, grid={k: v for k, v in grid.items()
                                                     if k not in ("topics", "seeds")})
        cached = cache.get(key)
        if keep and cached is not None and cached["figure"] is None and not args.cached_only:
            cached = None  # fitted before its figure data was wanted: fit again
        if cached is None and args.cached_only:
            fits.missing.append((name, K, seed))
            continue
        if cached is None:
            cached = fit_and_cache(args, grid, fits, cache, key, keep)
        if K in topics:
            fits.records[(name, K, seed)] = cached["record"]
        if keep and cached["figure"] is not None:
            fits.figures[name] = cached["figure"]
    return fits


def fit_and_cache(args, grid, fits, cache, key, keep):
    if fits.corpus is None:  # read only when something is to be fitted
        fits.corpus = read_corpus(args.quick, args.data, corpus_subset(args.quick))
        attach_labels(fits.corpus, args.quick)
    name, K, seed = key["model"], key["K"], key["seed"]
    log(f"{name} K={K} seed={seed}")
    record, figure = fit_and_measure(name, K, seed, fits.corpus, grid, args.threads, keep)
    cached = dict(record=record, figure=figure)
    cache.put(key, cached)
    fits.computed += 1
    return cached


def attach_labels(corpus, quick):
    """The categories of Fig. 3 and 4 (all three groups of the embedded corpus)."""
    if quick:
        corpus.figure_categories = np.arange(len(corpus.target_names))
    else:
        corpus.figure_categories = np.array([corpus.target_names.index(c)
                                             for c in FIGURE_CATEGORIES])


def read_frontier(args, grid):
    """bench_sparsity's cached points at ``frontier_topics`` (none computed here)."""
    frontier_grid = sparsity.QUICK if args.quick else sparsity.FULL
    cache = Cache(args.frontier_cache, corpus_key(args.quick, frontier_grid["subset"]),
                  sparsity.PROTOCOL)
    rows = {}
    for point in sparsity.grid_points(frontier_grid, grid["frontier_topics"]):
        record = cache.get(point)
        if record is not None:
            rows.setdefault(point["model"], []).append(dict(point, **record))
    return rows


# ---------------------------------------------------------------------------
# One fit and its measures
# ---------------------------------------------------------------------------

def estimator(name, K, seed, grid, threads):
    from sklearn.decomposition import NMF, LatentDirichletAllocation

    from stc import STC, MedSTC

    kind, params = MODELS[name]
    params = dict(params)
    if kind in ("stc", "medstc"):
        if grid["max_iter"] is not None:
            params["max_iter"] = grid["max_iter"]
        if kind == "medstc":
            params["refit_C"] = grid["medstc_refit_C"]
        cls = STC if kind == "stc" else MedSTC
        return cls(n_topics=K, random_state=seed, n_jobs=threads, **params)
    if kind == "lda":
        return LatentDirichletAllocation(n_components=K, learning_method="batch",
                                         max_iter=grid["lda_max_iter"], random_state=seed,
                                         n_jobs=threads)
    return NMF(n_components=K, beta_loss="kullback-leibler", solver="mu", init="nndsvda",
               max_iter=grid["nmf_max_iter"], random_state=seed)


def fit_and_measure(name, K, seed, corpus, grid, threads, keep_figures=False):
    """One fit: sparsity, accuracy and times on the test split (and figure data)."""
    kind, _ = MODELS[name]
    model = estimator(name, K, seed, grid, threads)
    fit_time = timed_fit(model, kind, corpus)
    features_te, doc_topic, code_time = code_test_split(model, kind, corpus)
    record = dict(fit_time=fit_time, code_time=code_time,
                  doc_zero=float(np.mean(features_te == 0)))
    add_word_code_zeros(record, model, kind, corpus, features_te, doc_topic)
    add_accuracy(record, model, kind, corpus, features_te, threads)
    figures = None
    if keep_figures and kind in ("stc", "medstc", "lda"):
        figures = figure_data(name, model, corpus, doc_topic)
    record["load_at_end"] = load1()
    return record, figures


def timed_fit(model, kind, corpus):
    """Seconds to fit ``model`` on the training split (MedSTC with the labels)."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NMF / SVM convergence warnings at few iterations
        if kind == "medstc":
            model.fit(corpus.Xtr, corpus.ytr)
        else:
            model.fit(corpus.Xtr)
    return time.perf_counter() - start


def code_test_split(model, kind, corpus):
    """(document codes of the test split, LDA's unnormalised ones or None, seconds taken)."""
    doc_topic = None
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "lda":
            doc_topic = model.transform(corpus.Xte, normalize=False)
            features_te = doc_topic / doc_topic.sum(axis=1, keepdims=True)
        else:
            features_te = model.transform(corpus.Xte)
    return features_te, doc_topic, time.perf_counter() - start


def add_word_code_zeros(record, model, kind, corpus, features_te, doc_topic):
    """The share of zero word codes on the test split (LDA's: posteriors under thresholds)."""
    if kind in ("stc", "medstc"):
        record["word_zero"] = word_zero_share(model.word_codes(corpus.Xte), corpus.seen_entries)
    elif kind == "lda":
        shares = lda_word_zero_shares(model, corpus.Xte, doc_topic, corpus.seen_entries,
                                      LDA_THRESHOLDS)
        record["word_zero"], record["word_zero_1e-6"] = shares
        record["doc_zero"] = float(np.mean(features_te < LDA_THRESHOLDS[0]))
    else:  # NMF: a word's code is its document's code (the paper's footnote 7)
        words_per_doc = np.bincount(np.repeat(np.arange(corpus.Xte.shape[0]),
                                              np.diff(corpus.Xte.indptr))[corpus.seen_entries],
                                    minlength=corpus.Xte.shape[0])
        zeros = np.count_nonzero(features_te == 0, axis=1)
        n_topics = features_te.shape[1]
        record["word_zero"] = float(words_per_doc @ zeros / max(words_per_doc.sum() * n_topics,
                                                                1))


def add_accuracy(record, model, kind, corpus, features_te, threads):
    """Test accuracy, and the classifier's share of the training and test times.

    MedSTC classifies with its own classifier; the others with a LinearSVC on their
    document codes, whose final fit counts in the training time and whose
    prediction counts in the test time.
    """
    if kind == "medstc":
        start = time.perf_counter()
        predicted = predicted_classes(model, features_te, model.coef_)
        record["code_time"] += time.perf_counter() - start
        record["accuracy"] = float(np.mean(predicted == corpus.yte))
        record["train_time"] = record["fit_time"]
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        features_tr = model.transform(corpus.Xtr)
    svm = svm_accuracy(features_tr, corpus.ytr, features_te, corpus.yte, threads,
                       with_times=True)
    record.update(svm)
    record["train_time"] = record["fit_time"] + svm["svm_refit_time"]
    record["code_time"] += svm["svm_predict_time"]


# ---------------------------------------------------------------------------
# The data of Fig. 3 and 4
# ---------------------------------------------------------------------------

def figure_data(name, model, corpus, lda_doc_topic=None):
    """Average word codes of the representative words (Fig. 3), per-category codes (Fig. 4)."""
    from stc.inspection import average_document_codes, average_word_codes, representative_words

    categories = corpus.figure_categories
    chosen = np.isin(corpus.ytr, categories)
    words = representative_words(corpus.Xtr[chosen], corpus.ytr[chosen], n_per_class=3)
    topics = model.components_
    labels = [" ".join(corpus.vocabulary[j] for j in np.argsort(-row, kind="stable")[:3])
              for row in topics]
    if lda_doc_topic is None:
        word_codes = average_word_codes(model, corpus.Xtr, words)
        classes, class_codes = average_document_codes(model, corpus.Xtr[chosen],
                                                      corpus.ytr[chosen])
    else:
        word_codes = lda_average_word_posteriors(model, corpus.Xtr, words)
        classes, class_codes = None, None
    data = dict(words=[corpus.vocabulary[j] for j in words], word_codes=word_codes.tolist(),
                topic_labels=labels)
    if class_codes is not None:
        totals = class_codes.sum(axis=1, keepdims=True)
        data.update(categories=[corpus.target_names[c] for c in classes],
                    class_codes=(class_codes / np.where(totals > 0, totals, 1)).tolist())
    return data


def lda_average_word_posteriors(lda, X, words):
    """LDA's average normalised per-word topic posterior of each word (the paper's Fig. 3)."""
    exp_theta = lda_exp_log_theta(lda.transform(X, normalize=False))
    exp_beta = np.asarray(lda.exp_dirichlet_component_)
    rows_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    out = np.zeros((len(words), exp_beta.shape[0]))
    for i, word in enumerate(words):
        rows = rows_of[X.indices == word]
        if rows.size:
            phi = exp_theta[rows] * exp_beta[:, word]
            out[i] = np.mean(phi / phi.sum(axis=1, keepdims=True), axis=0)
    return out
