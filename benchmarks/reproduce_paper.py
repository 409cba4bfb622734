"""The paper's Sec. 4 reproduced: docs/reproduction.md and its figures, end to end.

Usage::

    python benchmarks/reproduce_paper.py [--data DIR] [--topics 20 50 100] [--seeds 5]
        [--threads 2] [--cache DIR] [--output docs/reproduction.md] [--quick] [--refresh]

It fits, on the training split of 20 Newsgroups, for every K and random seed:
STC and gaussSTC (l2 penalty on the word codes) followed by a LinearSVC, MedSTC and
gaussMedSTC (their own classifier), scikit-learn's LDA (batch variational Bayes) and
NMF (Kullback-Leibler loss, multiplicative updates) followed by a LinearSVC, and
measures on the test split the share of zero word codes, the accuracy, the training
time (fit plus the final LinearSVC fit) and the test time (coding the test split plus
predicting). For one fit of each at ``--figure-topics`` it keeps the average word codes
of the representative words (paper Fig. 3) and the average document code per category
(Fig. 4). The sparsity-accuracy frontier of Fig. 2 (left) is `bench_sparsity.py`'s,
read from its cache (run it first; missing points are left out of the figure).

Every fit is cached as one JSON file under ``--cache``; a re-run fits only what is
missing, and re-drawing the figures and the report from a full cache takes seconds.
Figures go beside the report (``reproduction/*.png`` next to ``--output``); matplotlib
is needed (``pip install 'stc[plot]'``).

``--quick``: the embedded three-group corpus (every 4th document), K = 3 and 4, one
seed, few iterations (the test suite runs it; its numbers mean nothing).
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_sparsity as frontier  # noqa: E402
from _common import REPO_ROOT, add_data_option, log, shown_path  # noqa: E402
from _machine import load1, machine_info  # noqa: E402

PROTOCOL = 1
DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "docs", "reproduction.md")
DEFAULT_CACHE = os.path.join(REPO_ROOT, "benchmarks", ".cache", "reproduction")

# name -> (kind, estimator parameters besides n_topics/random_state/n_jobs/max_iter)
# STC and MedSTC run at the paper's parameterisation, spelled out so that the
# reproduction does not move when the estimators' defaults do.
PAPER_STC, PAPER_MEDSTC = frontier.PAPER_STC, frontier.PAPER_MEDSTC
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
TITLES = {"STC": "STC, the paper's setting: average word code as shares",
          "STC-knee": "STC-knee: average word code as shares",
          "LDA": "LDA: average per-word posterior"}
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
# Fits and measurements
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
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NMF / SVM convergence warnings at few iterations
        if kind == "medstc":
            model.fit(corpus.Xtr, corpus.ytr)
        else:
            model.fit(corpus.Xtr)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "lda":
            doc_topic = model.transform(corpus.Xte, normalize=False)
            features_te = doc_topic / doc_topic.sum(axis=1, keepdims=True)
        else:
            features_te = model.transform(corpus.Xte)
    code_time = time.perf_counter() - start
    record = dict(fit_time=fit_time, code_time=code_time,
                  doc_zero=float(np.mean(features_te == 0)))
    if kind in ("stc", "medstc"):
        record["word_zero"] = frontier.word_zero_share(model.word_codes(corpus.Xte),
                                                       corpus.seen_entries)
    elif kind == "lda":
        shares = frontier.lda_word_zero_shares(model, corpus.Xte, doc_topic,
                                               corpus.seen_entries, frontier.LDA_THRESHOLDS)
        record["word_zero"], record["word_zero_1e-6"] = shares
        record["doc_zero"] = float(np.mean(features_te < frontier.LDA_THRESHOLDS[0]))
    else:  # NMF: a word's code is its document's code (the paper's footnote 7)
        words_per_doc = np.bincount(np.repeat(np.arange(corpus.Xte.shape[0]),
                                              np.diff(corpus.Xte.indptr))[corpus.seen_entries],
                                    minlength=corpus.Xte.shape[0])
        zeros = np.count_nonzero(features_te == 0, axis=1)
        record["word_zero"] = float(words_per_doc @ zeros / max(words_per_doc.sum() * K, 1))
    if kind == "medstc":
        start = time.perf_counter()
        predicted = model.classes_[np.argmax(features_te @ model.coef_.T, axis=1)]
        record["code_time"] += time.perf_counter() - start
        record["accuracy"] = float(np.mean(predicted == corpus.yte))
        record["train_time"] = fit_time
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            features_tr = model.transform(corpus.Xtr)
        svm = frontier.svm_accuracy(features_tr, corpus.ytr, features_te, corpus.yte, threads,
                                    with_times=True)
        record.update(svm)
        record["train_time"] = fit_time + svm["svm_refit_time"]
        record["code_time"] += svm["svm_predict_time"]
    figures = None
    if keep_figures and kind in ("stc", "medstc", "lda"):
        figures = figure_data(name, model, corpus, doc_topic if kind == "lda" else None)
    record["load_at_end"] = load1()
    return record, figures


def figure_data(name, model, corpus, lda_doc_topic=None):
    """Average word codes of the representative words (Fig. 3), per-category codes (Fig. 4)."""
    from stc.inspect import average_document_codes, average_word_codes, representative_words

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
    from scipy.special import psi

    doc_topic = lda.transform(X, normalize=False)
    exp_theta = np.exp(psi(doc_topic) - psi(doc_topic.sum(axis=1))[:, np.newaxis])
    exp_beta = np.asarray(lda.exp_dirichlet_component_)
    rows_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    out = np.zeros((len(words), exp_beta.shape[0]))
    for i, word in enumerate(words):
        rows = rows_of[X.indices == word]
        if rows.size:
            phi = exp_theta[rows] * exp_beta[:, word]
            out[i] = np.mean(phi / phi.sum(axis=1, keepdims=True), axis=0)
    return out


# ---------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------

def summarise(records, name, K, key):
    values = [r[key] for (n, k, _), r in records.items() if n == name and k == K and key in r]
    return (float(np.mean(values)), float(np.std(values)), len(values)) if values else None


def line_plot(ax, records, names, topics, key, errorbars=True):
    for name in names:
        points = [(K, summarise(records, name, K, key)) for K in topics]
        points = [(K, s) for K, s in points if s is not None]
        if not points:
            continue
        xs = [K for K, _ in points]
        means = [s[0] for _, s in points]
        stds = [s[1] for _, s in points] if errorbars else None
        ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3, label=name)
    ax.set_xlabel("number of topics K")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def new_figure(width, height):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def figure_2(records, topics, frontier_rows, frontier_K, corpus_name, path):
    fig = new_figure(12, 4.8)
    left, right = fig.subplots(1, 2)
    lda = sorted(frontier_rows.get("lda", []), key=lambda r: r["word_zero"])
    for i, threshold in enumerate(frontier.LDA_THRESHOLDS):
        left.plot([r["word_zero_by_threshold"][i] for r in lda], [r["accuracy"] for r in lda],
                  "^--", label=f"LDA + SVM over alpha (zeros < {threshold:g})")
    for penalty in ("l2", "l1"):
        rows = sorted([r for r in frontier_rows.get("stc", []) if r["rho_units"] == "relative"
                       and r["theta_penalty"] == penalty and r["lambda_"] == 0.1],
                      key=lambda r: r["word_zero"])
        if rows:
            left.plot([r["word_zero"] for r in rows], [r["accuracy"] for r in rows], "o-",
                      label=f"STC + SVM over rho, theta {penalty}")
    recoded = sorted([r for r in frontier_rows.get("stc-recoded", [])
                      if r["topics_of"]["label"] != "paper"], key=lambda r: r["word_zero"])
    if recoded:
        fitted = recoded[0]["topics_of"]
        topics_rho = fitted["rho"]
        # the fit's own codes start the curve
        recoded = [r for r in frontier_rows.get("stc", []) if r["label"] == fitted["label"]
                   and all(r[k] == fitted[k] for k in ("rho", "rho_units", "theta_penalty",
                                                       "lambda_"))] + recoded
        left.plot([r["word_zero"] for r in recoded], [r["accuracy"] for r in recoded], "D:",
                  label=f"STC + SVM, topics fitted at rho {topics_rho:g}, coded at larger rho")
    med = sorted(frontier_rows.get("medstc", []), key=lambda r: r["word_zero"])
    if med:
        left.plot([r["word_zero"] for r in med], [r["accuracy"] for r in med], "s-",
                  label="MedSTC over rho (C, lambda_ as in results_sparsity.md)")
    left.set_xlim(0, 1)
    left.set_xlabel("share of zero word codes (test)")
    left.set_ylabel("test accuracy")
    left.set_title(f"(L) sparsity against accuracy, K = {frontier_K}", fontsize=10)
    left.grid(True, alpha=0.3)
    left.legend(fontsize=7)
    line_plot(right, records, ["STC", "STC-knee", "gaussSTC", "MedSTC", "LDA", "NMF"], topics,
              "word_zero")
    right.set_ylabel("share of zero word codes (test)")
    right.set_ylim(0, 1)
    right.set_title("(R) word-code sparsity against K (LDA: posterior < 1e-3)", fontsize=10)
    fig.suptitle(f"Fig. 2, {corpus_name}")
    fig.savefig(path, dpi=110)


def heat_map(ax, values, rows, columns, title, fig):
    image = ax.imshow(values, aspect="auto", cmap="viridis", vmin=0, interpolation="nearest")
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_xticks(range(len(columns)), columns, rotation=90, fontsize=6)
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, shrink=0.8)


def word_shares(word_codes):
    """Each word's average code as shares of its sum (LDA's posteriors already are)."""
    codes = np.asarray(word_codes, dtype=np.float64)
    totals = codes.sum(axis=1, keepdims=True)
    return codes / np.where(totals > 0, totals, 1.0)


def topics_for_mass(shares, mass=0.9):
    """Per word: the fewest topics whose shares add up to ``mass``."""
    ordered = -np.sort(-shares, axis=1)
    return np.argmax(np.cumsum(ordered, axis=1) >= mass - 1e-12, axis=1) + 1


def figure_3(panels, path):
    """``panels``: (title, figure data) pairs, drawn side by side."""
    # Every model's rows as shares, and the same rule for which topics are drawn.
    shown = []
    for title, data in panels:
        codes = word_shares(data["word_codes"])
        shown.append((title, data, codes, np.flatnonzero(np.any(codes >= 0.05, axis=0))))
    width = sum(active.size for *_, active in shown)
    fig = new_figure(max(10, 0.22 * width + 6 * len(shown)), 7.5)
    axes = fig.subplots(1, len(shown), width_ratios=[max(a.size, 1) for *_, a in shown])
    for ax, (title, data, codes, active) in zip(np.atleast_1d(axes), shown):
        heat_map(ax, codes[:, active], data["words"],
                 [f"T{k}: {data['topic_labels'][k]}" for k in active],
                 f"{title} (topics >= 0.05 for a word)", fig)
    fig.suptitle("Fig. 3: average word codes of representative words")
    fig.savefig(path, dpi=110)


def figure_4(stc_data, med_data, path):
    fig = new_figure(14, 6.5)
    top, bottom = fig.subplots(2, 1)
    for ax, data, name in ((top, stc_data, "STC"), (bottom, med_data, "MedSTC")):
        codes = np.asarray(data["class_codes"])
        heat_map(ax, codes, data["categories"],
                 [f"T{k}: {label}" for k, label in enumerate(data["topic_labels"])],
                 f"{name}: average normalised document code per category", fig)
    fig.suptitle("Fig. 4: average document code theta per category")
    fig.savefig(path, dpi=110)


def figure_5(records, topics, path):
    fig = new_figure(7, 4.8)
    ax = fig.subplots()
    line_plot(ax, records, ["MedSTC", "STC", "STC-knee", "gaussSTC", "gaussMedSTC", "LDA", "NMF"],
              topics, "accuracy")
    ax.set_ylabel("test accuracy (mean and std over seeds)")
    ax.set_title("Fig. 5: accuracy (STC, gaussSTC, LDA, NMF with a LinearSVC)", fontsize=10)
    fig.savefig(path, dpi=110)


def figure_6(records, topics, path):
    fig = new_figure(12, 4.5)
    left, right = fig.subplots(1, 2)
    names = ["MedSTC", "STC", "STC-knee", "gaussSTC", "gaussMedSTC", "LDA", "NMF"]
    line_plot(left, records, names, topics, "train_time")
    left.set_ylabel("seconds")
    left.set_yscale("log")
    left.set_title("(L) training time (fit + final LinearSVC)", fontsize=10)
    line_plot(right, records, names, topics, "code_time")
    right.set_ylabel("seconds")
    right.set_yscale("log")
    right.set_title("(R) test time (code the test split + predict)", fontsize=10)
    fig.suptitle("Fig. 6: time")
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------

def mean_of(records, name, K, key):
    s = summarise(records, name, K, key)
    return None if s is None else s[0]


def verdict_fig2(records, topics):
    lines = []
    for K in topics:
        stc, lda = mean_of(records, "STC", K, "word_zero"), mean_of(records, "LDA", K, "word_zero")
        nmf, gauss = mean_of(records, "NMF", K, "word_zero"), mean_of(records, "gaussSTC", K,
                                                                       "word_zero")
        med = mean_of(records, "MedSTC", K, "word_zero")
        if None in (stc, lda, nmf, gauss, med):
            continue
        knee = mean_of(records, "STC-knee", K, "word_zero")
        lines.append(f"- K = {K}: zero word codes STC {stc:.3f}"
                     + (f" (STC-knee {knee:.3f})" if knee is not None else "")
                     + f", gaussSTC {gauss:.3f}, MedSTC "
                     f"{med:.3f}, LDA {lda:.3f} (posterior < 1e-3), NMF {nmf:.3f}. STC sparser "
                     f"than LDA: {'yes' if stc > lda else 'no'}; than NMF: "
                     f"{'yes' if stc > nmf else 'no'}; than gaussSTC: "
                     f"{'yes' if stc > gauss else 'no'}.")
    return lines


def frontier_verdict(frontier_rows, K):
    """Fig. 2 (left): the most accurate STC codes at least as sparse as LDA's."""
    lda = [r for r in frontier_rows.get("lda", []) if r["alpha"] is None]
    stc = frontier_rows.get("stc", []) + frontier_rows.get("stc-recoded", [])
    if not lda or not stc:
        return []
    sparse = [r for r in stc if r["word_zero"] >= lda[0]["word_zero"]]
    if not sparse:
        return [f"- On the frontier (K = {K}): no STC point is as sparse as LDA."]
    best = max(sparse, key=lambda r: r["accuracy"])
    return [f"- On the frontier (K = {K}, `benchmarks/results_sparsity.md`): the most "
            f"accurate STC codes at least as sparse as LDA's ({lda[0]['word_zero']:.3f} zeros, "
            f"LDA + SVM {lda[0]['accuracy']:.3f}): {frontier.describe(best)}. STC can be "
            f"sparser than LDA at a higher accuracy: "
            f"{'yes' if best['accuracy'] > lda[0]['accuracy'] else 'no'}."]


def verdict_fig3(figures):
    """Per model: topics over 1e-3 and topics holding 90 % of a word's average code."""
    lines = []
    for name in ("STC", "STC-knee", "LDA"):
        if name in figures:
            shares = word_shares(figures[name]["word_codes"])
            lines.append(f"- {name}: topics with a share >= 1e-3 "
                         f"{np.count_nonzero(shares >= 1e-3, axis=1).mean():.1f}, fewest "
                         f"topics holding 90 % of the mass {topics_for_mass(shares).mean():.1f} "
                         f"(mean over the representative words, K = {shares.shape[1]}).")
    if {"STC", "LDA"} <= figures.keys():
        stc, lda = (topics_for_mass(word_shares(figures[n]["word_codes"])).mean()
                    for n in ("STC", "LDA"))
        exact = np.count_nonzero(np.asarray(figures["STC"]["word_codes"]) > 0, axis=1).mean()
        lines.append(f"- STC's average codes are sparser than LDA's (by the 90 % count): "
                     f"{'yes' if stc < lda else 'no'}. A word's STC code is sparse in each "
                     f"document, but averaged over the documents it is non-zero on {exact:.1f} "
                     "topics: different documents put the word on different topics.")
    return lines


def profile_similarity(class_codes):
    """Mean cosine similarity between the categories' average codes (lower: more distinct)."""
    codes = np.asarray(class_codes)
    unit = codes / np.maximum(np.linalg.norm(codes, axis=1, keepdims=True), 1e-300)
    sims = unit @ unit.T
    upper = np.triu_indices(codes.shape[0], 1)
    return float(sims[upper].mean())


def verdict_fig4(stc_data, med_data):
    stc_sim, med_sim = (profile_similarity(stc_data["class_codes"]),
                        profile_similarity(med_data["class_codes"]))
    return [f"- Mean cosine similarity between two categories' average codes (lower means "
            f"more distinct): STC {stc_sim:.3f}, MedSTC {med_sim:.3f}. MedSTC's are more "
            f"discriminative: {'yes' if med_sim < stc_sim else 'no'}."]


def above(records, a, b, K):
    """Whether model a is more accurate than b at K; flags a gap within the seeds' spread."""
    (ma, sa, na), (mb, sb, nb) = (summarise(records, n, K, "accuracy") for n in (a, b))
    word = "yes" if ma > mb else "no"
    if min(na, nb) >= 2 and abs(ma - mb) <= max(sa, sb):
        word += f" ({ma - mb:+.3f}, within one standard deviation over the seeds)"
    return word


def verdict_fig5(records, topics):
    lines = []
    for K in topics:
        acc = {name: mean_of(records, name, K, "accuracy") for name in MODELS}
        if None in acc.values():
            continue
        order = sorted(acc, key=lambda n: -acc[n])
        lines.append(f"- K = {K}: " + ", ".join(f"{n} {acc[n]:.3f}" for n in order) +
                     f". MedSTC best: {'yes' if order[0] == 'MedSTC' else 'no'}; STC + SVM above "
                     f"LDA + SVM: {above(records, 'STC', 'LDA', K)}; above NMF + SVM: "
                     f"{above(records, 'STC', 'NMF', K)}; STC above gaussSTC: "
                     f"{above(records, 'STC', 'gaussSTC', K)}; MedSTC above gaussMedSTC: "
                     f"{above(records, 'MedSTC', 'gaussMedSTC', K)}.")
    return lines


def verdict_fig6(records, topics):
    lines = []
    for K in topics:
        t = {name: (mean_of(records, name, K, "train_time"), mean_of(records, name, K,
                                                                      "code_time"))
             for name in ("STC", "LDA", "MedSTC")}
        if any(None in v for v in t.values()):
            continue
        lines.append(f"- K = {K}: training STC {t['STC'][0]:.1f} s, LDA {t['LDA'][0]:.1f} s, "
                     f"MedSTC {t['MedSTC'][0]:.1f} s; test STC {t['STC'][1]:.2f} s, LDA "
                     f"{t['LDA'][1]:.2f} s, MedSTC {t['MedSTC'][1]:.2f} s. STC trains faster "
                     f"than LDA: {'yes' if t['STC'][0] < t['LDA'][0] else 'no'} "
                     f"({t['LDA'][0] / t['STC'][0]:.1f}x); codes faster: "
                     f"{'yes' if t['STC'][1] < t['LDA'][1] else 'no'} "
                     f"({t['LDA'][1] / t['STC'][1]:.1f}x).")
    return lines


def load_range(records):
    loads = [r["load_at_end"] for r in records.values() if "load_at_end" in r]
    return f"{min(loads):.1f} to {max(loads):.1f}" if loads else "not recorded"


def render(args, grid, corpus_line, records, figures, images, frontier_rows):
    topics = list(args.topics or grid["topics"])
    seeds = args.seeds or grid["seeds"]
    lines = [
        "# The paper's experiments (Sec. 4), reproduced",
        "",
        "Generated by `python benchmarks/reproduce_paper.py "
        f"{' '.join(args.argv)}` (after `python benchmarks/bench_sparsity.py`, whose cached "
        "frontier is Fig. 2, left); do not edit by hand.",
        "",
        f"Data: {corpus_line}",
        "",
        f"Models, all fitted on the training split with random_state "
        f"{'0' if seeds == 1 else f'0 to {seeds - 1}'} for K in {', '.join(map(str, topics))}: "
        + ", ".join(n + (" (" + ", ".join(f"{k}={v!r}" for k, v in p.items()) + ")" if p else "")
                    for n, (_, p) in MODELS.items()) + " "
        "(STC and MedSTC parameters not listed are the package's defaults). STC-knee is not "
        "in the paper: STC at the knee of the sparsity-accuracy frontier (`bench_sparsity.py`, "
        "K = 50), shown beside the paper's setting. STC, STC-knee, gaussSTC, "
        "LDA and NMF are followed by a LinearSVC on their document codes, its normalisation "
        "(none, l1, standardised) and C chosen by 3-fold CV on the training features. "
        "Word-code zeros are counted on the test split over the entries whose term occurs in "
        "training (LDA: normalised per-word posterior under 1e-3; NMF: a word's code is its "
        "document's code, as in the paper's footnote 7).",
        "",
        "Machine:",
        "",
    ] + machine_info(f"threads: {args.threads}") + [
        f"- load when the fits ran (1-minute average at the end of each fit): "
        f"{load_range(records)}; the machine is a shared 2-core VM, so times are "
        "comparable only between fits made at similar load",
        ""]
    sections = [
        ("Fig. 2: sparsity of the codes",
         "The paper: STC's word codes are much sparser than LDA's and NMF's (which are "
         "dense), gaussSTC's are denser than STC's, and LDA's prior alpha cannot make its "
         "codes sparse without losing accuracy.", "fig2",
         verdict_fig2(records, topics) + frontier_verdict(frontier_rows,
                                                          grid["frontier_topics"])),
        ("Fig. 3: word codes of representative words",
         "The paper: each word's STC code has a few clearly non-zero topics, LDA's many small "
         "non-zeros.", "fig3",
         verdict_fig3(figures)),
        ("Fig. 4: average document code per category",
         "The paper: the categories' average codes differ, and MedSTC's differ more than "
         "STC's.", "fig4",
         verdict_fig4(figures["STC"], figures["MedSTC"]) if {"STC", "MedSTC"} <= figures.keys()
         else []),
        ("Fig. 5: accuracy",
         "The paper: MedSTC is the most accurate; STC + SVM beats LDA + SVM and NMF + SVM, "
         "especially at large K; the l1 penalty on the word codes beats the l2 one (STC above "
         "gaussSTC, MedSTC above gaussMedSTC).", "fig5", verdict_fig5(records, topics)),
        ("Fig. 6: time",
         "The paper: STC trains much faster than LDA and codes new documents much faster.",
         "fig6", verdict_fig6(records, topics)),
    ]
    for title, claim, key, verdict in sections:
        lines += [f"## {title}", "", claim, ""]
        if key in images:
            lines += [f"![{title}]({images[key]})", ""]
        lines += (verdict or ["- Not measured in this run."]) + [""]
    lines += ["## Numbers", "", "| model | K | seeds | zero word codes | accuracy | train (s) | "
              "test (s) |", "|---|---|---|---|---|---|---|"]
    for name in MODELS:
        for K in topics:
            row = [summarise(records, name, K, key) for key in
                   ("word_zero", "accuracy", "train_time", "code_time")]
            if row[0] is None:
                continue
            # one seed has no spread to show: its value stands alone
            lines.append(f"| {name} | {K} | {row[0][2]} | " + " | ".join(
                (f"{m:.3f}" if key < 2 else f"{m:.2f}")
                + ("" if n < 2 else f" ± {s:.3f}" if key < 2 else f" ± {s:.2f}")
                for key, (m, s, n) in enumerate(row)) + " |")
    return "\n".join(lines) + "\n"


def missing_lines(missing, models):
    """The fits a --cached-only render lacks, one line per K and seed."""
    by_run = {}
    for name, K, seed in missing:
        by_run.setdefault((K, seed), []).append(name)
    return [f"- K = {K}, seed {seed}: " + (
        "every model" if set(names) == set(models) else ", ".join(names))
        for (K, seed), names in sorted(by_run.items())]


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_option(parser)
    parser.add_argument("--topics", type=int, nargs="+", default=None,
                        help="numbers of topics (default: 20 50 100; --quick: 3 4)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="random initialisations per model and K (default: 5; --quick: 1)")
    parser.add_argument("--figure-topics", type=int, default=None,
                        help="K of the fits kept for Fig. 3 and 4 (default: 50; --quick: 4)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--threads", type=int, default=2, help="threads (default: 2)")
    parser.add_argument("--cache", default=DEFAULT_CACHE,
                        help="directory of cached fits (default: benchmarks/.cache/reproduction)")
    parser.add_argument("--frontier-cache", default=frontier.DEFAULT_CACHE,
                        help="bench_sparsity.py's cache (default: benchmarks/.cache/sparsity)")
    parser.add_argument("--output", default=DEFAULT_OUTPUT,
                        help="the report (default: docs/reproduction.md); figures go to "
                             "reproduction/ beside it")
    parser.add_argument("--quick", action="store_true",
                        help="embedded corpus, K = 3 and 4, one seed, few iterations")
    parser.add_argument("--refresh", action="store_true", help="refit even cached fits")
    parser.add_argument("--cached-only", action="store_true",
                        help="fit nothing: draw and report what the cache holds, and list "
                             "the fits that are missing")
    args = parser.parse_args(argv)
    args.argv = list(argv)
    return args


def read_frontier(args, grid):
    """bench_sparsity's cached points at ``frontier_topics`` (none computed here)."""
    corpus_key = dict(name="embedded" if args.quick else "20news",
                      subset=(frontier.QUICK if args.quick else frontier.FULL)["subset"])
    cache = frontier.Cache(args.frontier_cache, corpus_key)
    rows = {}
    for point in frontier.grid_points(frontier.QUICK if args.quick else frontier.FULL,
                                      grid["frontier_topics"]):
        record = cache.get(point)
        if record is not None:
            rows.setdefault(point["model"], []).append(dict(point, **record))
    return rows


def main(argv=None):
    """Fit what is not cached, then draw the figures and write the report.

    Returns the number of fits computed (0 when everything came from the cache).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    grid = QUICK if args.quick else FULL
    topics = list(args.topics or grid["topics"])
    seeds = args.seeds or grid["seeds"]
    figure_K = args.figure_topics or grid["figure_topics"]
    cache = frontier.Cache(args.cache, dict(name="embedded" if args.quick else "20news",
                                            subset=frontier.QUICK["subset"] if args.quick
                                            else None, protocol=PROTOCOL),
                           refresh=args.refresh)
    corpus = None
    computed = 0
    records, figures, missing = {}, {}, []
    # Seed by seed, so that a run stopped early has every K and model at the first seeds.
    jobs = [(name, K, seed) for seed in range(seeds) for K in topics for name in args.models]
    if figure_K not in topics:
        jobs += [(name, figure_K, 0) for name in FIGURE_MODELS if name in args.models]
    for name, K, seed in jobs:
        keep = K == figure_K and seed == 0 and name in FIGURE_MODELS
        key = dict(model=name, K=K, seed=seed, grid={k: v for k, v in grid.items()
                                                     if k not in ("topics", "seeds")})
        cached = cache.get(key)
        if keep and cached is not None and cached["figure"] is None and not args.cached_only:
            cached = None  # fitted before its figure data was wanted: fit again
        if cached is None and args.cached_only:
            missing.append((name, K, seed))
            continue
        if cached is None:
            if corpus is None:
                corpus = frontier.read_corpus(args.quick, args.data,
                                              frontier.QUICK["subset"] if args.quick else None)
                attach_labels(corpus, args.quick)
            log(f"{name} K={K} seed={seed}")
            record, figure = fit_and_measure(name, K, seed, corpus, grid, args.threads, keep)
            cached = dict(record=record, figure=figure)
            cache.put(key, cached)
            computed += 1
        if K in topics:
            records[(name, K, seed)] = cached["record"]
        if keep and cached["figure"] is not None:
            figures[name] = cached["figure"]
    out_dir = os.path.dirname(os.path.abspath(args.output))
    image_dir = os.path.join(out_dir, "reproduction")
    os.makedirs(image_dir, exist_ok=True)
    corpus_name = "embedded corpus (quick)" if args.quick else "20 Newsgroups"
    images = {}

    def draw(key, function, *inputs):
        path = os.path.join(image_dir, f"{key}.png")
        function(*inputs, path)
        images[key] = f"reproduction/{key}.png"

    frontier_rows = read_frontier(args, grid)
    draw("fig2", figure_2, records, topics, frontier_rows, grid["frontier_topics"],
         corpus_name)
    if {"STC", "LDA"} <= figures.keys():
        draw("fig3", figure_3, [(TITLES[n], figures[n]) for n in ("STC", "STC-knee", "LDA")
                                if n in figures])
    if {"STC", "MedSTC"} <= figures.keys():
        draw("fig4", figure_4, figures["STC"], figures["MedSTC"])
    draw("fig5", figure_5, records, topics)
    draw("fig6", figure_6, records, topics)
    corpus_line = corpus.summary if corpus is not None else (
        "as in the cached fits: " + ("the embedded three-group corpus" if args.quick else
                                     "20 Newsgroups (`--data`, by default ../shared/data/20news "
                                     "from the repository root), its full train and test splits"))
    with open(args.output, "w", encoding="utf-8") as handle:
        handle.write(render(args, grid, corpus_line, records, figures, images, frontier_rows))
        if missing:
            handle.write("\n## Not measured\n\nRendered with `--cached-only`; these fits of the "
                         f"run ({len(missing)}) are not in the cache:\n\n"
                         + "\n".join(missing_lines(missing, args.models)) + "\n")
    log(f"wrote {shown_path(args.output)} and {len(images)} figures; {computed} fits computed")
    return computed


def attach_labels(corpus, quick):
    """The categories of Fig. 3 and 4 (all three groups of the embedded corpus)."""
    if quick:
        corpus.figure_categories = np.arange(len(corpus.target_names))
    else:
        corpus.figure_categories = np.array([corpus.target_names.index(c)
                                             for c in FIGURE_CATEGORIES])


if __name__ == "__main__":
    main()
