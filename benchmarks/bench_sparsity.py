"""The sparsity-accuracy frontier on 20 Newsgroups: STC, MedSTC and LDA.

Usage::

    python benchmarks/bench_sparsity.py [--data DIR] [--topics 50] [--threads 2]
        [--models stc lda medstc] [--cache DIR] [--output FILE] [--plots DIR]
        [--quick] [--cached-only] [--refresh]

For every K it measures, on the test split, for every point of a grid:

* STC: ``rho`` over a log grid in relative units (``rho`` / sqrt(2 gamma w_bar),
  see docs/algorithms.md, "Sparsity"), times ``lambda_`` (= ``gamma``), times the
  penalty on theta (``l2``, ``l1``); plus the paper's setting (``rho = 0.01``,
  ``lambda_ = 0.1``, absolute units, theta penalty ``l2``);
* MedSTC: the same ``rho`` and theta-penalty axes; ``C`` and ``lambda_`` are chosen
  by 2-fold cross-validation on the training split (stratified) at the rho of
  ``medstc_cv_rho`` and reused at the others; plus the paper's setting;
* LDA (scikit-learn, batch variational Bayes): its document-topic prior ``alpha``
  over a log grid (``None`` is scikit-learn's default 1/K).

Measured per point: the share of zero word codes of the test documents (STC and
MedSTC: exact zeros; LDA: entries of the paper's normalised per-word topic posterior
phi_dnk ~ exp(E[log theta_dk]) exp(E[log beta_kn]) under 1e-3 and under 1e-6), counted
over the observed entries whose term occurs in the training split; the share of zero
document codes (LDA: normalised document-topic proportions under the threshold);
test accuracy; fit time; time to code the test split. STC and LDA are fitted on the
training split only, and their accuracy is that of a LinearSVC on the document codes
whose normalisation (none, per-document l1, standardised) and C are chosen together by
3-fold cross-validation on the training features only. MedSTC classifies with its own
classifier.

Every point is cached as one JSON file under ``--cache`` (keyed by the point, the
corpus and ``PROTOCOL``), so a re-run computes only missing points, and re-rendering
the tables and plots from a complete cache takes seconds and never loads the corpus.
The tables (with the command and the machine) go to ``--output``; one PNG per K
(sparsity on x, accuracy on y, a curve per model) goes to ``--plots``, if matplotlib
is installed (``pip install 'stc[plot]'``).

``--quick`` runs the whole pipeline on the embedded three-group corpus with a few
points, one small K and few iterations (well under a minute; the test suite runs it).
"""
import argparse
import hashlib
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
from _common import REPO_ROOT, add_data_option, count_matrix, load_corpus, log, shown_path  # noqa: E402
from _machine import machine_info, source_fingerprint, uptime_line  # noqa: E402

# Bump when a measurement changes meaning: cached points of another protocol are recomputed.
PROTOCOL = 1

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_sparsity.md")
DEFAULT_PLOTS = os.path.join(REPO_ROOT, "benchmarks")
DEFAULT_CACHE = os.path.join(REPO_ROOT, "benchmarks", ".cache", "sparsity")

LDA_THRESHOLDS = (1e-3, 1e-6)
SVM_C_GRID = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)
SVM_NORMALISATIONS = ("none", "l1", "standardised")
TARGET_STC_ACCURACY = 0.70
TARGET_MEDSTC = (0.80, 0.80)     # (zero share of word codes, accuracy)
MOONSHOT_MEDSTC = (0.88, 0.81)

# The grids of the full run (relative rho; see the module docstring).
FULL = dict(
    topics=(50, 20, 100),
    stc_rho=(0.003, 0.01, 0.02, 0.035, 0.05, 0.1, 0.3, 1.0),
    stc_lambda=(0.1, 1.0),
    theta_penalties=("l2", "l1"),
    # The curves at the other lambda_: the l1 penalty only, on fewer rho.
    other_lambda_penalties=("l1",),
    other_lambda_rho=(0.003, 0.01, 0.02, 0.05, 0.1),
    stc_max_iter=100,
    recoded_rho=(0.02, 0.05, 0.1, 0.3, 1.0, 3.0),
    # The most accurate STC setting's topics (rho, lambda_, theta penalty), coded at high rho
    most_accurate=(0.01, 0.1, "l1"),
    most_accurate_recoded_rho=(0.3, 1.0),
    # MedSTC's paper-setting topics coded at these rho with the refit's C set by "auto"
    # (which follows the scale of the codes) instead of the fixed refit_C
    medstc_recoded_auto_rho=(0.02, 0.05, 0.1, 0.3, 1.0),
    # ... and with the refit's C chosen by 3-fold CV on the training codes, from "auto"'s C
    # times these factors
    medstc_recoded_cv_rho=(0.3, 1.0),
    medstc_recoded_cv_factors=(0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0),
    lda_alpha=(1e-3, 1e-2, 1e-1, None, 1.0),
    lda_max_iter=10,
    medstc_rho=(0.001, 0.05, 0.1, 0.02, 0.01),
    medstc_theta_penalties=("l2",),
    medstc_cv=((1e4, 10.0), (3e4, 30.0), (1e5, 100.0)),
    # Cross-validate C and lambda_ at these rho only; the other rho reuse the pair chosen
    # at the first of them (a MedSTC fit takes minutes: 7 per cross-validated point).
    medstc_cv_rho=(0.001, 0.02, 0.05),
    # At rho 0.05 the CV chose the grid's smallest pair: one pair below it as well.
    medstc_cv_extra={0.05: ((3e3, 3.0),)},
    medstc_max_iter=20,
    medstc_refit_C=3e6,   # MedSTC's default before refit_C="auto" (which gives 2.996e6 at K = 50)
    seed=0,
    subset=None,
    # K other than these get the `reduced` grid: the l1 curve, LDA at two priors, and
    # MedSTC at two rho with the paper's C and lambda_ (a K = 100 MedSTC fit takes
    # minutes; cross-validating it at every K was beyond the compute of one session).
    full_grid_topics=(50,),
    reduced=dict(
        stc_rho=(0.003, 0.01, 0.02, 0.035, 0.05, 0.1),
        stc_lambda=(0.1,),
        theta_penalties=("l1",),
        recoded_rho=(),
        most_accurate_recoded_rho=(),
        medstc_recoded_auto_rho=(),
        medstc_recoded_cv_rho=(),
        lda_alpha=(None, 1.0),
        medstc_rho=(0.05,),
        medstc_cv=((3e4, 30.0),),
        medstc_cv_rho=None,
        medstc_cv_extra={},
    ),
)
QUICK = dict(
    topics=(4,),
    stc_rho=(0.01, 0.1),
    stc_lambda=(0.1,),
    theta_penalties=("l2",),
    stc_max_iter=3,
    recoded_rho=(0.3,),
    lda_alpha=(None,),
    lda_max_iter=2,
    medstc_rho=(0.05,),
    medstc_theta_penalties=("l2",),
    medstc_cv=((30.0, 0.1),),
    medstc_cv_rho=None,   # cross-validate at every rho
    medstc_max_iter=2,
    medstc_refit_C=None,  # the refit SVM at 3e6 takes seconds on codes this small
    seed=0,
    subset=4,             # every 4th document of the embedded corpus (all 3 groups)
)
MODEL_KINDS = ("stc", "stc-recoded", "lda", "medstc", "medstc-recoded")
PROTOCOL_TEXT = (
    "Protocol: STC and LDA are fitted on the training split only; the test split is coded "
    "with `transform`. Word-code zeros: share of zero entries of the test word codes, over "
    "the observed entries whose term occurs in the training split (STC, MedSTC: exact "
    "zeros; LDA: the paper's normalised per-word topic posterior under the threshold). "
    "Document-code zeros: exact zeros (LDA: normalised proportions under the threshold). "
    "Accuracy: STC and LDA with a LinearSVC on the document codes, its normalisation (none, "
    "per-document l1, standardised) and C chosen together by 3-fold CV on the training "
    "features; MedSTC with its own classifier, its C and lambda_ chosen by 2-fold CV on the "
    "training split (in the full run at K = 50 at rho 0.001, 0.02 and 0.05; the other rho "
    "reuse the choice made at 0.001). "
    "rho in relative units is rho / sqrt(2 gamma w_bar), w_bar the mean "
    "count of an observed training entry (docs/algorithms.md, \"Sparsity\"). Fit and "
    "coding times with the stated threads.")
# The paper's setting with the parameters the defaults still share spelled out too
# (they are part of the points' cache keys).
PAPER_STC = dict(_common.PAPER_STC, lambda_=0.1)
# MedSTC's parameters in the paper's parameterisation (its defaults before the
# sparsity work), spelled out so that no point moves when the defaults do.
PAPER_MEDSTC = dict(_common.PAPER_MEDSTC, lambda_=30.0, C=3e4, theta_penalty="l2")


# ---------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------

class Corpus:
    """Train and test counts and labels, and the test entries whose term occurs in training."""

    def __init__(self, name, train, test, summary):
        self.name, self.summary = name, summary
        self.vocabulary = np.asarray(train.vocabulary, dtype=object)
        self.target_names = list(train.target_names)
        self.Xtr, self.ytr = count_matrix(train.data), np.asarray(train.target)
        self.Xte, self.yte = count_matrix(test.data), np.asarray(test.target)
        seen = np.asarray(self.Xtr.sum(axis=0)).ravel() > 0
        self.seen_entries = seen[self.Xte.indices]
        self.mean_count = float(self.Xtr.data.mean())  # w_bar: sum of counts / nnz

    @property
    def fingerprint(self):
        """What the cache key needs to tell this corpus from another."""
        return dict(name=self.name, train=[int(self.Xtr.shape[0]), int(self.Xtr.nnz)],
                    test=[int(self.Xte.shape[0]), int(self.Xte.nnz)],
                    tokens=float(self.Xtr.sum() + self.Xte.sum()))


def read_corpus(quick, data, subset=None):
    if quick:
        from stc.datasets import load_newsgroups_split

        train, test = load_newsgroups_split()
        if subset is not None:
            for bunch in (train, test):
                bunch.data, bunch.target = bunch.data[::subset], bunch.target[::subset]
        summary = (f"the embedded three-group corpus: train {train.data.shape[0]} docs, test "
                   f"{test.data.shape[0]} docs, {train.data.shape[1]} terms")
        return Corpus("embedded", train, test, summary)
    train, test, summary = load_corpus(data)
    return Corpus("20news", train, test, summary)


# ---------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------

def word_zero_share(word_codes, seen_entries):
    """Share of zero entries of the word codes (CSR, one row per entry) of seen terms."""
    active = np.diff(word_codes.indptr)[seen_entries]
    return 1.0 - active.sum() / max(active.size * word_codes.shape[1], 1)


def svm_accuracy(Ftr, ytr, Fte, yte, threads, with_times=False):
    """Test accuracy of a LinearSVC whose normalisation and C are cross-validated together.

    3-fold stratified CV on the training features only, over the normalisations
    none / per-document l1 / standardised (zero mean, unit variance per topic) and
    ``SVM_C_GRID``. ``with_times`` adds the time of the final fit on all training
    features (``svm_refit_time``) and of predicting the test features
    (``svm_predict_time``).
    """
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import Normalizer, StandardScaler
    from sklearn.svm import LinearSVC

    normalisers = {"none": "passthrough", "l1": Normalizer(norm="l1"),
                   "standardised": StandardScaler()}
    pipeline = Pipeline([("normalise", "passthrough"),
                         ("svm", LinearSVC(dual=False, max_iter=5000))])
    grid = {"normalise": [normalisers[name] for name in SVM_NORMALISATIONS],
            "svm__C": list(SVM_C_GRID)}
    search = GridSearchCV(pipeline, grid, cv=StratifiedKFold(3, shuffle=True, random_state=0),
                          n_jobs=threads)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LinearSVC convergence at the largest C values
        search.fit(Ftr, ytr)
    chosen = search.best_params_["normalise"]
    name = next(n for n in SVM_NORMALISATIONS if normalisers[n] is chosen)
    start = time.perf_counter()
    accuracy = float(search.score(Fte, yte))
    result = dict(accuracy=accuracy, svm_normalisation=name,
                  svm_C=float(search.best_params_["svm__C"]),
                  svm_cv_score=float(search.best_score_))
    if with_times:
        result.update(svm_refit_time=float(search.refit_time_),
                      svm_predict_time=time.perf_counter() - start)
    return result


def fit_stc(point, corpus, threads, cache):
    """The STC model of ``point``, fitted on the training split; (model, fit time).

    The paper's setting (and a point marked ``keep_model``) is also kept as a model
    file beside the cache, for the points that code with its topics
    (`run_stc_recoded`).
    """
    from stc import STC, load

    path = cache.model_path(point)
    if os.path.exists(path):
        model = load(path)
        model.set_params(n_jobs=threads)
        return model, model.fit_time_
    model = STC(n_topics=point["K"], lambda_=point["lambda_"], rho=point["rho"],
                rho_units=point["rho_units"], theta_penalty=point["theta_penalty"],
                max_iter=point["max_iter"], random_state=point["seed"], n_jobs=threads)
    model.fit(corpus.Xtr)
    if point["label"] == "paper" or point.get("keep_model"):
        model.save(path)
    return model, model.fit_time_


def measure_stc(model, corpus, threads):
    """Zeros, accuracy and coding time of a fitted STC on the test split."""
    start = time.perf_counter()
    theta_te = model.transform(corpus.Xte)
    transform_time = time.perf_counter() - start
    theta_tr = model.transform(corpus.Xtr)
    record = dict(rho_absolute=objective_rho(model),
                  transform_time=transform_time, n_iter=int(model.n_iter_),
                  word_zero=word_zero_share(model.word_codes(corpus.Xte), corpus.seen_entries),
                  doc_zero=float(np.mean(theta_te == 0)))
    record.update(svm_accuracy(theta_tr, corpus.ytr, theta_te, corpus.yte, threads))
    return record


def objective_rho(model):
    """The rho objective (2) codes with, from the parameters and ``count_scale_``."""
    params = model.get_params()
    if params["rho_units"] == "absolute":
        return float(params["rho"])
    gamma = params["lambda_"] if params["gamma"] is None else params["gamma"]
    return float(params["rho"] * np.sqrt(2.0 * gamma * model.count_scale_))


def run_stc(point, corpus, threads, cache):
    model, fit_time = fit_stc(point, corpus, threads, cache)
    return dict(measure_stc(model, corpus, threads), fit_time=fit_time)


def run_stc_recoded(point, corpus, threads, cache):
    """The topics of one setting, documents coded with another (relative) rho.

    ``transform`` codes with the estimator's current parameters, so setting rho
    after ``fit`` changes only the coding of new documents, not the topics.
    """
    model, fit_time = fit_stc(point["topics_of"], corpus, threads, cache)
    model.set_params(rho=point["rho"], rho_units=point["rho_units"])
    return dict(measure_stc(model, corpus, threads), fit_time=fit_time)


def lda_word_zero_shares(lda, X, doc_topic, seen_entries, thresholds, chunk=200_000):
    """Shares of per-word topic posteriors under each threshold (the paper's measure).

    phi_dnk is proportional to exp(E[log theta_dk]) exp(E[log beta_kn]), with
    E[log theta_dk] from the unnormalised variational parameters ``doc_topic`` and
    exp(E[log beta]) = ``lda.exp_dirichlet_component_`` (the update of scikit-learn's
    E-step), normalised over k for every observed entry of CSR ``X``.
    """
    from scipy.special import psi

    exp_theta = np.exp(psi(doc_topic) - psi(doc_topic.sum(axis=1))[:, np.newaxis])
    exp_beta = np.asarray(lda.exp_dirichlet_component_)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[seen_entries]
    cols = X.indices[seen_entries]
    zeros = np.zeros(len(thresholds), dtype=np.int64)
    for lo in range(0, rows.size, chunk):
        phi = exp_theta[rows[lo:lo + chunk]] * exp_beta[:, cols[lo:lo + chunk]].T
        phi /= phi.sum(axis=1, keepdims=True)
        for i, threshold in enumerate(thresholds):
            zeros[i] += np.count_nonzero(phi < threshold)
    total = max(rows.size * exp_beta.shape[0], 1)
    return [float(z / total) for z in zeros]


def run_lda(point, corpus, threads):
    from sklearn.decomposition import LatentDirichletAllocation

    lda = LatentDirichletAllocation(n_components=point["K"], doc_topic_prior=point["alpha"],
                                    learning_method="batch", max_iter=point["max_iter"],
                                    random_state=point["seed"], n_jobs=threads)
    start = time.perf_counter()
    lda.fit(corpus.Xtr)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    doc_topic = lda.transform(corpus.Xte, normalize=False)
    transform_time = time.perf_counter() - start
    proportions_te = doc_topic / doc_topic.sum(axis=1, keepdims=True)
    proportions_tr = lda.transform(corpus.Xtr)
    shares = lda_word_zero_shares(lda, corpus.Xte, doc_topic, corpus.seen_entries,
                                  LDA_THRESHOLDS)
    record = dict(fit_time=fit_time, transform_time=transform_time, n_iter=int(lda.n_iter_),
                  word_zero_by_threshold=shares, word_zero=shares[0],
                  doc_zero_by_threshold=[float(np.mean(proportions_te < t))
                                         for t in LDA_THRESHOLDS])
    record["doc_zero"] = record["doc_zero_by_threshold"][0]
    record.update(svm_accuracy(proportions_tr, corpus.ytr, proportions_te, corpus.yte, threads))
    return record


def medstc_model(point, C, lambda_, threads):
    from stc import MedSTC

    return MedSTC(n_topics=point["K"], C=C, lambda_=lambda_, rho=point["rho"],
                  rho_units=point["rho_units"], refit_C=point["refit_C"],
                  theta_penalty=point["theta_penalty"], max_iter=point["max_iter"],
                  random_state=point["seed"], n_jobs=threads)


def medstc_validation_accuracy(point, corpus, C, lambda_, threads):
    """Mean accuracy of 2-fold stratified cross-validation on the training split."""
    from sklearn.model_selection import StratifiedKFold

    scores = []
    folds = StratifiedKFold(2, shuffle=True, random_state=0)
    for fit_rows, val_rows in folds.split(corpus.Xtr, corpus.ytr):
        model = medstc_model(point, C, lambda_, threads)
        model.fit(corpus.Xtr[fit_rows], corpus.ytr[fit_rows])
        scores.append(float(model.score(corpus.Xtr[val_rows], corpus.ytr[val_rows])))
    return float(np.mean(scores))


def fit_medstc_paper(point, corpus, threads, cache):
    """MedSTC at the paper's setting (``point`` without a CV grid); kept as a model file."""
    from stc import MedSTC, load

    path = cache.model_path(point)
    if os.path.exists(path):
        model = load(path)
        model.set_params(n_jobs=threads)
        return model
    model = MedSTC(n_topics=point["K"], max_iter=point["max_iter"], refit_C=point["refit_C"],
                   random_state=point["seed"], n_jobs=threads, **PAPER_MEDSTC)
    model.fit(corpus.Xtr, corpus.ytr)
    model.save(path)
    return model


def measure_medstc(model, corpus, coef=None):
    """Zeros, accuracy (argmax of ``coef`` . theta, MedSTC's own classifier by default)."""
    start = time.perf_counter()
    theta_te = model.transform(corpus.Xte)
    transform_time = time.perf_counter() - start
    coef = model.coef_ if coef is None else coef
    accuracy = float(np.mean(model.classes_[np.argmax(theta_te @ coef.T, axis=1)] == corpus.yte))
    return dict(transform_time=transform_time, n_iter=int(model.n_iter_),
                word_zero=word_zero_share(model.word_codes(corpus.Xte), corpus.seen_entries),
                doc_zero=float(np.mean(theta_te == 0)), accuracy=accuracy)


def cv_refit_C(model, theta, y_index, candidates):
    """The candidate C whose refitted classifier scores best in 3-fold CV on ``theta``."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    from stc.supervised import CuttingPlaneSVM

    svm = CuttingPlaneSVM(cost=model.cost, tol=model.svm_tol, max_iter=model.svm_max_iter)
    search = GridSearchCV(svm, {"C": list(candidates)},
                          cv=StratifiedKFold(3, shuffle=True, random_state=0))
    return float(search.fit(theta, y_index).best_params_["C"])


def run_medstc_recoded(point, corpus, threads, cache):
    """MedSTC's topics at the paper's setting, documents coded with another (relative) rho.

    The classifier is refitted on the training documents coded that way, as MedSTC's
    own final step does with its training rho: with the model's ``refit_C``; for a
    point with ``refit="auto"`` with the C that ``refit_C="auto"`` gives those codes;
    for ``refit="cv"`` with the C of ``refit_factors`` times that one chosen by CV.
    """
    from stc.supervised import CuttingPlaneSVM
    from stc.supervised.medstc import auto_refit_C

    model = fit_medstc_paper(point["topics_of"], corpus, threads, cache)
    model.set_params(rho=point["rho"], rho_units=point["rho_units"])
    coef, refit_C = model.coef_, model.refit_C
    if refit_C is not None:
        theta_tr = model.transform(corpus.Xtr)
        y_index = np.searchsorted(model.classes_, corpus.ytr)
        if point.get("refit") == "auto":
            refit_C = auto_refit_C(theta_tr)
        elif point.get("refit") == "cv":
            refit_C = cv_refit_C(model, theta_tr, y_index,
                                 [f * auto_refit_C(theta_tr) for f in point["refit_factors"]])
        svm = CuttingPlaneSVM(C=refit_C, cost=model.cost, tol=model.svm_tol,
                              max_iter=model.svm_max_iter).fit(theta_tr, y_index)
        coef = svm.coef_
    return dict(measure_medstc(model, corpus, coef), fit_time=model.fit_time_,
                rho_absolute=objective_rho(model), C=model.C, lambda_=model.lambda_,
                refit_C_used=None if refit_C is None else float(refit_C))


def run_medstc(point, corpus, threads, cache):
    if point["cv"] is None:  # the paper's setting
        model = fit_medstc_paper(point, corpus, threads, cache)
        return dict(measure_medstc(model, corpus), fit_time=model.fit_time_, C=model.C,
                    lambda_=model.lambda_, rho_absolute=model.effective_rho_, cv=[])
    cv = []
    at_rho = point.get("cv_at_rho", point["rho"])
    for C, lambda_ in point["cv"] if len(point["cv"]) > 1 else ():  # one pair: nothing to choose
        sub = {key: value for key, value in point.items() if key != "cv_at_rho"}
        sub.update(rho=at_rho, cv=None, C=C, lambda_=lambda_, model="medstc-cv")
        record = cache.get(sub)
        if record is None:
            log(f"  MedSTC CV C={C:g} lambda_={lambda_:g} at rho={at_rho:g}")
            record = dict(validation_accuracy=medstc_validation_accuracy(
                sub, corpus, C, lambda_, threads))
            cache.put(sub, record)
        cv.append(dict(C=C, lambda_=lambda_, validation_accuracy=record["validation_accuracy"]))
    if cv:
        best = max(cv, key=lambda row: row["validation_accuracy"])
    else:
        best = dict(C=point["cv"][0][0], lambda_=point["cv"][0][1])
    model = medstc_model(point, best["C"], best["lambda_"], threads)
    start = time.perf_counter()
    model.fit(corpus.Xtr, corpus.ytr)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    theta_te = model.transform(corpus.Xte)
    transform_time = time.perf_counter() - start
    accuracy = float(np.mean(model.classes_[np.argmax(theta_te @ model.coef_.T, axis=1)]
                             == corpus.yte))
    return dict(C=best["C"], lambda_=best["lambda_"], rho_absolute=model.effective_rho_, cv=cv,
                fit_time=fit_time, transform_time=transform_time, n_iter=int(model.n_iter_),
                word_zero=word_zero_share(model.word_codes(corpus.Xte), corpus.seen_entries),
                doc_zero=float(np.mean(theta_te == 0)), accuracy=accuracy)


# ---------------------------------------------------------------------------
# The grid and the cache
# ---------------------------------------------------------------------------

def grid_points(grid, K):
    """Every point of the run for K topics, as plain dicts (the cache keys).

    Ordered so that an interrupted run has the most telling points first: the
    paper's setting, the l2 STC curve at the first lambda_, LDA, MedSTC, then the
    other STC curves.
    """
    seed = grid["seed"]
    if K not in grid.get("full_grid_topics", (K,)):
        grid = dict(grid, **grid["reduced"])

    def stc(rho, lambda_, penalty):
        return dict(model="stc", K=K, seed=seed, max_iter=grid["stc_max_iter"], rho=rho,
                    rho_units="relative", lambda_=lambda_, theta_penalty=penalty, label="")

    first_lambda, first_penalty = grid["stc_lambda"][0], grid["theta_penalties"][0]
    paper = dict(model="stc", K=K, seed=seed, max_iter=grid["stc_max_iter"], label="paper",
                 **PAPER_STC)
    points = [paper]
    points += [stc(rho, first_lambda, first_penalty) for rho in grid["stc_rho"]]
    points += [dict(model="stc-recoded", K=K, topics_of=paper, rho=rho, rho_units="relative",
                    label="") for rho in grid["recoded_rho"]]
    for alpha in grid["lda_alpha"]:
        points.append(dict(model="lda", K=K, seed=seed, max_iter=grid["lda_max_iter"],
                           alpha=alpha, label="default" if alpha is None else ""))
    for penalty in grid["medstc_theta_penalties"]:
        cv_rho = grid["medstc_cv_rho"]
        for rho in grid["medstc_rho"]:
            pairs = tuple(grid.get("medstc_cv_extra", {}).get(rho, ())) + tuple(grid["medstc_cv"])
            point = dict(model="medstc", K=K, seed=seed, max_iter=grid["medstc_max_iter"],
                         rho=rho, rho_units="relative", theta_penalty=penalty,
                         refit_C=grid["medstc_refit_C"],
                         cv=[list(pair) for pair in pairs], label="")
            if cv_rho is not None and rho not in cv_rho:
                point["cv_at_rho"] = cv_rho[0]  # C and lambda_ chosen there
            points.append(point)
    # label "defaults": the cache key of the days when this was MedSTC's default
    medstc_paper = dict(model="medstc", K=K, seed=seed, max_iter=grid["medstc_max_iter"],
                           rho=0.01, rho_units="absolute", theta_penalty="l2",
                           refit_C=grid["medstc_refit_C"], cv=None, label="defaults")
    points.append(medstc_paper)
    # MedSTC's defaults (the knee): C, lambda_ and refit_C as the estimator sets them.
    points.append(dict(model="medstc", K=K, seed=seed, max_iter=grid["medstc_max_iter"],
                       rho=0.02, rho_units="relative", theta_penalty="l2", refit_C="auto",
                       cv=[[3e4, 30.0]], label="defaults"))
    points += [dict(model="medstc-recoded", K=K, topics_of=medstc_paper, rho=rho,
                    rho_units="relative", label="") for rho in grid["recoded_rho"]]
    for penalty in grid["theta_penalties"][1:]:  # the other penalties at the first lambda_
        points += [stc(rho, first_lambda, penalty) for rho in grid["stc_rho"]]
    for lambda_ in grid["stc_lambda"][1:]:
        for penalty in grid.get("other_lambda_penalties", grid["theta_penalties"]):
            points += [stc(rho, lambda_, penalty)
                       for rho in grid.get("other_lambda_rho", grid["stc_rho"])]
    points += [dict(model="medstc-recoded", K=K, topics_of=medstc_paper, rho=rho,
                    rho_units="relative", refit="auto", label="")
               for rho in grid.get("medstc_recoded_auto_rho", ())]
    points += [dict(model="medstc-recoded", K=K, topics_of=medstc_paper, rho=rho,
                    rho_units="relative", refit="cv",
                    refit_factors=list(grid["medstc_recoded_cv_factors"]), label="")
               for rho in grid.get("medstc_recoded_cv_rho", ())]
    if grid.get("most_accurate_recoded_rho"):
        # the same fit as that grid point; keep_model keeps its model file for the codings
        topics = dict(stc(*grid["most_accurate"]), keep_model=True)
        points += [dict(model="stc-recoded", K=K, topics_of=topics, rho=rho,
                        rho_units="relative", label="most accurate")
                   for rho in grid["most_accurate_recoded_rho"]]
    return points


class Cache:
    """One JSON file per measured point, named by a hash of the point, corpus and protocol."""

    def __init__(self, directory, corpus_key, refresh=False):
        self.directory, self.corpus_key, self.refresh = directory, corpus_key, refresh
        os.makedirs(directory, exist_ok=True)

    def _path(self, point):
        key = json.dumps(dict(point=point, corpus=self.corpus_key, protocol=PROTOCOL),
                         sort_keys=True)
        return os.path.join(self.directory, hashlib.sha256(key.encode()).hexdigest()[:20] + ".json")

    def model_path(self, point):
        """Where the fitted model of ``point`` is kept (an stc model file)."""
        return self._path(point)[:-len(".json")] + ".stc"

    def get(self, point):
        path = self._path(point)
        if self.refresh or not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)["record"]

    def put(self, point, record):
        path = self._path(point)
        with open(path + ".part", "w", encoding="utf-8") as handle:
            json.dump(dict(point=point, corpus=self.corpus_key, protocol=PROTOCOL,
                           record=record), handle, indent=1)
        os.replace(path + ".part", path)  # a killed run leaves no half-written point


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

def fmt(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


def pareto(rows):
    """Rows no other row beats in both word-code zero share and accuracy."""
    return [r for r in rows if not any(o["word_zero"] >= r["word_zero"] and
                                       o["accuracy"] >= r["accuracy"] and
                                       (o["word_zero"], o["accuracy"]) !=
                                       (r["word_zero"], r["accuracy"]) for o in rows)]


def stc_table(rows):
    lines = ["| rho (units) | rho of (2) | lambda_ = gamma | theta penalty | word-code zeros | "
             "doc-code zeros | accuracy | SVM features, C (CV acc.) | fit (s) | n_iter | "
             "code test (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    front = pareto(rows)
    for r in sorted(rows, key=lambda r: (r["theta_penalty"], r["lambda_"], r["word_zero"])):
        star = " *" if r in front else ""
        lines.append(
            f"| {r['rho']:g} ({r['rho_units']}{', ' + r['label'] if r['label'] else ''}) | "
            f"{r['rho_absolute']:.4g} | {r['lambda_']:g} | {r['theta_penalty']} | "
            f"{fmt(r['word_zero'])}{star} | {fmt(r['doc_zero'])} | {fmt(r['accuracy'], 4)} | "
            f"{r['svm_normalisation']}, {r['svm_C']:g} ({fmt(r['svm_cv_score'])}) | "
            f"{r['fit_time']:.1f} | {r['n_iter']} | {r['transform_time']:.2f} |")
    return lines


def topics_name(r):
    """Whose topics a recoded STC point codes with."""
    t = r["topics_of"]
    if t["label"] == "paper":
        return "the paper's setting"
    return (f"rho {t['rho']:g} ({t['rho_units']}), theta {t['theta_penalty']}, "
            f"lambda_ {t['lambda_']:g} ({r['label']})")


def recoded_table(rows):
    lines = ["| topics of | rho used to code (relative) | rho of (2) | word-code zeros | "
             "doc-code zeros | accuracy | SVM features, C (CV acc.) | code test (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["label"], r["word_zero"])):
        lines.append(f"| {topics_name(r)} | {r['rho']:g} | {r['rho_absolute']:.4g} | "
                     f"{fmt(r['word_zero'])} | "
                     f"{fmt(r['doc_zero'])} | {fmt(r['accuracy'], 4)} | "
                     f"{r['svm_normalisation']}, {r['svm_C']:g} ({fmt(r['svm_cv_score'])}) | "
                     f"{r['transform_time']:.2f} |")
    return lines


def refit_name(r):
    """The C of a recoded MedSTC point's refitted classifier."""
    if r["topics_of"]["refit_C"] is None:
        return "none (the loop's classifier)"
    if r.get("refit") == "auto":
        return f"{r['refit_C_used']:.4g} (auto)"
    if r.get("refit") == "cv":
        return f"{r['refit_C_used']:.4g} (CV)"
    return f"{r['topics_of']['refit_C']:g} (fixed)"


def medstc_recoded_table(rows):
    lines = ["| refit C | rho used to code (relative) | rho of (2) | word-code zeros | "
             "doc-code zeros | accuracy | code test (s) |", "|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r.get("refit", ""), r["word_zero"])):
        lines.append(f"| {refit_name(r)} | {r['rho']:g} | {r['rho_absolute']:.4g} | "
                     f"{fmt(r['word_zero'])} | "
                     f"{fmt(r['doc_zero'])} | {fmt(r['accuracy'], 4)} | "
                     f"{r['transform_time']:.2f} |")
    return lines


def lda_table(rows):
    lines = ["| alpha | word-code zeros < 1e-3 | < 1e-6 | doc-code zeros < 1e-3 | < 1e-6 | "
             "accuracy | SVM features, C (CV acc.) | fit (s) | n_iter | code test (s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["word_zero"]):
        alpha = "1/K (default)" if r["alpha"] is None else f"{r['alpha']:g}"
        w, d = r["word_zero_by_threshold"], r["doc_zero_by_threshold"]
        lines.append(f"| {alpha} | {fmt(w[0])} | {fmt(w[1])} | {fmt(d[0])} | {fmt(d[1])} | "
                     f"{fmt(r['accuracy'], 4)} | {r['svm_normalisation']}, {r['svm_C']:g} "
                     f"({fmt(r['svm_cv_score'])}) | {r['fit_time']:.1f} | {r['n_iter']} | "
                     f"{r['transform_time']:.2f} |")
    return lines


def medstc_table(rows):
    lines = ["| rho (units) | theta penalty | C, lambda_ chosen (val. acc. of each) | "
             "rho of (2) | word-code zeros | doc-code zeros | accuracy | fit (s) | n_iter | "
             "code test (s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    front = pareto(rows)
    for r in sorted(rows, key=lambda r: (r["theta_penalty"], r["word_zero"])):
        # the paper's point (the only one in absolute units) keeps the cache label
        # "defaults" it had when it was the default; the table calls it what it is
        is_paper = is_paper_medstc(r)
        cv = "; ".join(f"{c['C']:g}/{c['lambda_']:g}: {c['validation_accuracy']:.3f}"
                       for c in r["cv_results"]) or ("the paper's, no CV" if is_paper
                                                     else "fixed, no CV")
        star = " *" if r in front else ""
        label = "paper" if is_paper else r["label"]
        lines.append(f"| {r['rho']:g} ({r['rho_units']}{', ' + label if label else ''}) | "
                     f"{r['theta_penalty']} | {r['C']:g}, {r['lambda_']:g} "
                     f"({cv}) | {r['rho_absolute']:.4g} | {fmt(r['word_zero'])}{star} | "
                     f"{fmt(r['doc_zero'])} | {fmt(r['accuracy'], 4)} | {r['fit_time']:.1f} | "
                     f"{r['n_iter']} | {r['transform_time']:.2f} |")
    return lines


def target_lines(by_model):
    """The issue's targets, checked on the measured points of one K."""
    lines = []
    lda = [r for r in by_model.get("lda", []) if r["alpha"] is None]
    stc = by_model.get("stc", []) + by_model.get("stc-recoded", [])
    if lda and stc:
        ref = lda[0]
        need = max(ref["accuracy"], TARGET_STC_ACCURACY)
        met = [r for r in stc if r["word_zero"] >= ref["word_zero"] and r["accuracy"] >= need]
        lines.append(f"- STC: word-code zeros >= LDA's ({ref['word_zero']:.3f} under 1e-3, "
                     f"default alpha) and accuracy >= max(LDA + SVM {ref['accuracy']:.4f}, "
                     f"{TARGET_STC_ACCURACY}): " + (
                         "met by " + ", ".join(describe(r) for r in met) if met else
                         "not met; best accuracy at that sparsity: " + best_at(
                             stc, ref["word_zero"])))
        beat = [r for r in stc if r["word_zero"] >= ref["word_zero"]
                and r["accuracy"] >= ref["accuracy"]]
        lines.append("- STC at least as sparse as LDA *and* at least as accurate as LDA + SVM: "
                     + (", ".join(describe(r) for r in beat) if beat else "none"))
    med = by_model.get("medstc", []) + by_model.get("medstc-recoded", [])
    if med:
        for name, (zeros, acc) in (("target", TARGET_MEDSTC), ("moonshot", MOONSHOT_MEDSTC)):
            met = [r for r in med if r["word_zero"] >= zeros and r["accuracy"] >= acc]
            lines.append(f"- MedSTC {name} (word-code zeros >= {zeros}, accuracy >= {acc}): " + (
                "met by " + ", ".join(describe(r) for r in met) if met else
                "not met; best accuracy with >= " f"{zeros} zeros: " + best_at(med, zeros)))
    return lines


def describe(r):
    if r["model"] == "stc-recoded":
        return (f"STC, the topics of {topics_name(r)} coded at rho={r['rho']:g} (relative): "
                f"zeros {r['word_zero']:.3f}, accuracy {r['accuracy']:.4f}")
    if r["model"] == "medstc-recoded":
        return (f"MedSTC, the paper setting's topics coded at rho={r['rho']:g} (relative), "
                f"classifier refitted with C {refit_name(r)}: zeros {r['word_zero']:.3f}, "
                f"accuracy {r['accuracy']:.4f}")
    setting = (f"{r['model']} rho={r['rho']:g} ({r['rho_units']}), theta {r['theta_penalty']}"
               + (f", lambda_={r['lambda_']:g}" if "lambda_" in r else "")
               + (f", C={r['C']:g}" if "C" in r else ""))
    return f"{setting}: zeros {r['word_zero']:.3f}, accuracy {r['accuracy']:.4f}"


def best_at(rows, zeros):
    candidates = [r for r in rows if r["word_zero"] >= zeros]
    if not candidates:
        return f"no point reached {zeros:.3f} zeros"
    return describe(max(candidates, key=lambda r: r["accuracy"]))


def is_paper_medstc(r):
    """Whether a measured MedSTC point is the paper's setting (the only absolute-units one)."""
    return r["rho_units"] == "absolute"


def is_stc_default(r):
    """Whether a measured STC point is STC() at the package's defaults."""
    from stc import STC

    defaults = STC().get_params()
    return (r["label"] != "paper" and r["rho_units"] == defaults["rho_units"]
            and r["rho"] == defaults["rho"] and r["theta_penalty"] == defaults["theta_penalty"]
            and r["lambda_"] == defaults["lambda_"])


def plot_frontier(K, by_model, path, corpus_name):
    """Sparsity (x) against accuracy (y), one curve per model family, for one K."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 9), layout="constrained")
    ax = fig.add_subplot()
    # up to 20 distinct colours: the dark half of tab20, then the light half
    tab20 = colormaps["tab20"].colors
    ax.set_prop_cycle(color=list(tab20[0::2]) + list(tab20[1::2]))
    curves = []
    for r_pen in sorted({r["theta_penalty"] for r in by_model.get("stc", [])}):
        for lam in sorted({r["lambda_"] for r in by_model.get("stc", [])
                           if r["rho_units"] == "relative"}):
            rows = [r for r in by_model["stc"] if r["theta_penalty"] == r_pen
                    and r["lambda_"] == lam and r["rho_units"] == "relative"]
            curves.append((f"STC + SVM, theta {r_pen}, lambda_ {lam:g}", rows, "o-"))
    for label, name in (("", "the paper's topics"), ("most accurate",
                                                      "the most accurate setting's topics")):
        rows = [r for r in by_model.get("stc-recoded", []) if r["label"] == label]
        if rows:
            curves.append((f"STC + SVM, {name} coded at other rho", rows, "D:"))
    for r_pen in sorted({r["theta_penalty"] for r in by_model.get("medstc", [])}):
        rows = [r for r in by_model["medstc"] if r["theta_penalty"] == r_pen
                and r["rho_units"] == "relative"]
        curves.append((f"MedSTC, theta {r_pen}, over rho (C, lambda_ as in the table)",
                       rows, "s-"))
    for refit, name in (("", "fixed C"), ("auto", "C auto"), ("cv", "C by CV")):
        rows = [r for r in by_model.get("medstc-recoded", []) if r.get("refit", "") == refit]
        if rows:
            curves.append((f"MedSTC, the paper setting's topics coded at other rho "
                           f"(classifier refitted, {name})", rows, "P:"))
    lda = by_model.get("lda", [])
    for i, threshold in enumerate(LDA_THRESHOLDS):
        rows = [dict(r, word_zero=r["word_zero_by_threshold"][i]) for r in lda]
        curves.append((f"LDA + SVM, zeros < {threshold:g} (over alpha)", rows, "^--"))
    for label, rows, style in curves:
        rows = sorted(rows, key=lambda r: r["word_zero"])
        if rows:
            ax.plot([r["word_zero"] for r in rows], [r["accuracy"] for r in rows], style,
                    label=label, markersize=5)
    # the settings a user meets first: the paper's and the package's defaults
    markers = [
        ("STC, the paper's setting", "k*", 14,
         [r for r in by_model.get("stc", []) if r["label"] == "paper"]),
        ("STC, the defaults", "kX", 11,
         [r for r in by_model.get("stc", []) if is_stc_default(r)]),
        ("MedSTC, the paper's setting", "ks", 9,
         [r for r in by_model.get("medstc", []) if is_paper_medstc(r)]),
        ("MedSTC, the defaults", "kP", 11,
         [r for r in by_model.get("medstc", []) if r["rho_units"] == "relative"
          and r["label"] == "defaults"]),
    ]
    for label, style, size, rows in markers:
        if rows:
            ax.plot([rows[0]["word_zero"]], [rows[0]["accuracy"]], style, markersize=size,
                    markerfacecolor="none" if style != "k*" else "k", label=label)
    ax.set_xlabel("share of zero word codes on the test split")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"Sparsity against accuracy, {corpus_name}, K = {K}")
    ax.set_xlim(-0.02, 1.0)  # a little room for the markers of dense codes
    ax.grid(True, alpha=0.3)
    fig.legend(fontsize=8, loc="outside lower center", ncols=2)
    fig.savefig(path, dpi=110)


def render(args, corpus_line, machine, records, plots):
    lines = ["# Sparsity against accuracy: STC, MedSTC and LDA", "",
             f"Command: `python benchmarks/bench_sparsity.py {' '.join(args.argv)}`", "",
             "Machine (of the run that wrote this file; cached points keep their own "
             "times):", ""] + machine + ["", f"Data: {corpus_line}", "", PROTOCOL_TEXT, ""]
    for K in sorted({p["K"] for p, _ in records}):
        by_model = {}
        for point, record in records:
            if point["K"] == K:
                row = dict(point, **record)
                row["cv_results"] = record.get("cv")
                by_model.setdefault(point["model"], []).append(row)
        lines += [f"## K = {K}", ""]
        if K in plots:
            lines += [f"![sparsity against accuracy, K = {K}]({os.path.basename(plots[K])})", ""]
        lines += ["Targets:", ""] + target_lines(by_model) + [""]
        if "stc" in by_model:
            lines += ["### STC + LinearSVC", "", "`*`: on the frontier (no other STC point "
                      "has both more zeros and a higher accuracy).", ""] + stc_table(
                          by_model["stc"]) + [""]
        if "stc-recoded" in by_model:
            lines += ["### STC + LinearSVC, learned topics, documents coded at other rho",
                      "", "The topics of the paper's setting (the row labelled paper in the "
                      "table above) or of another setting of that table; "
                      "train and test documents coded by `transform` after "
                      "`set_params(rho=..., rho_units=\"relative\")`.", ""] + recoded_table(
                          by_model["stc-recoded"]) + [""]
        if "lda" in by_model:
            lines += ["### LDA + LinearSVC", ""] + lda_table(by_model["lda"]) + [""]
        if "medstc" in by_model:
            lines += ["### MedSTC", ""] + medstc_table(by_model["medstc"]) + [""]
        if "medstc-recoded" in by_model:
            factors = FULL["medstc_recoded_cv_factors"]
            lines += ["### MedSTC, the paper setting's topics, documents coded at other rho", "",
                      "MedSTC at the paper's setting (the row without CV above); train and test "
                      "documents coded by `transform` after `set_params(rho=..., "
                      "rho_units=\"relative\")`, and the classifier refitted on the training "
                      "codes with `stc.supervised.CuttingPlaneSVM(C=refit_C, cost=cost)`, as "
                      "MedSTC's own final step does: with the fixed refit_C the model was "
                      "fitted with, with the C `refit_C=\"auto\"` gives the new codes "
                      "(5e6 / mean_d ||theta_d||^2), or with a C chosen by 3-fold CV on the "
                      f"training codes from that C times {min(factors):g} to "
                      f"{max(factors):g}.", ""] + medstc_recoded_table(
                          by_model["medstc-recoded"]) + [""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_option(parser)
    parser.add_argument("--topics", type=int, nargs="+", default=None,
                        help="numbers of topics K (default: 50; --quick: 4)")
    parser.add_argument("--models", nargs="+", default=list(MODEL_KINDS), choices=MODEL_KINDS,
                        help="models to measure (default: all); stc-recoded: the topics of "
                             "the paper's setting (and at K = 50 of the most accurate one), "
                             "documents coded at other rho")
    parser.add_argument("--threads", type=int, default=2, help="threads for every model "
                        "and for the cross-validations (default: 2)")
    parser.add_argument("--cache", default=DEFAULT_CACHE,
                        help="directory of the cached points (default: benchmarks/.cache/sparsity)")
    parser.add_argument("--output", default=DEFAULT_OUTPUT,
                        help="Markdown results file (default: benchmarks/results_sparsity.md)")
    parser.add_argument("--plots", default=DEFAULT_PLOTS,
                        help="directory of the PNG per K (default: benchmarks/)")
    parser.add_argument("--quick", action="store_true",
                        help="embedded corpus, a few points, K = 4, few iterations")
    parser.add_argument("--cached-only", action="store_true",
                        help="measure nothing: report the cached points and list the missing")
    parser.add_argument("--refresh", action="store_true",
                        help="recompute every point even if it is cached")
    args = parser.parse_args(argv)
    args.argv = list(argv)
    return args


def main(argv=None):
    """Run (or read from the cache) every point; write tables and plots.

    Returns the list of (point, record, computed) triples, ``computed`` False for a
    point read from the cache.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    grid = QUICK if args.quick else FULL
    topics = args.topics or list(grid["topics"])
    corpus_key = dict(name="embedded" if args.quick else "20news", subset=grid["subset"])
    cache = Cache(args.cache, corpus_key, refresh=args.refresh)
    corpus = None
    done, missing = [], []
    for K in topics:
        for point in grid_points(grid, K):
            if point["model"] not in args.models:
                continue
            record = cache.get(point)
            computed = record is None
            if computed and args.cached_only:
                missing.append(point)
                continue
            if computed:
                if corpus is None:
                    corpus = read_corpus(args.quick, args.data, grid["subset"])
                log(f"K={K} {point['model']} {describe_point(point)}")
                if point["model"] == "stc":
                    record = run_stc(point, corpus, args.threads, cache)
                elif point["model"] == "stc-recoded":
                    record = run_stc_recoded(point, corpus, args.threads, cache)
                elif point["model"] == "medstc-recoded":
                    record = run_medstc_recoded(point, corpus, args.threads, cache)
                elif point["model"] == "lda":
                    record = run_lda(point, corpus, args.threads)
                else:
                    record = run_medstc(point, corpus, args.threads, cache)
                record["corpus"] = corpus.fingerprint
                record["load_at_end"] = uptime_line()
                record["stc_sources"] = source_fingerprint(package_dir())[0]
                cache.put(point, record)
                log(f"  zeros {record['word_zero']:.3f}, accuracy {record['accuracy']:.4f}, "
                    f"fit {record['fit_time']:.1f}s")
            done.append((point, record, computed))
    corpus_line = (corpus.summary if corpus is not None else
                   "as recorded in the cached points: " + json.dumps(done[0][1]["corpus"])
                   if done else "none")
    plots = {}
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        log("matplotlib is not installed (pip install 'stc[plot]'): no plots")
    else:
        os.makedirs(args.plots, exist_ok=True)
        for K in topics:
            by_model = {}
            for point, record, _ in done:
                if point["K"] == K:
                    by_model.setdefault(point["model"], []).append(dict(point, **record))
            plots[K] = os.path.join(args.plots, f"sparsity_accuracy_K{K}"
                                    f"{'_quick' if args.quick else ''}.png")
            plot_frontier(K, by_model, plots[K], "embedded corpus (quick)" if args.quick
                          else "20 Newsgroups")
    machine = machine_info(f"threads (models and cross-validation): {args.threads}")
    text = render(args, corpus_line, machine, [(p, r) for p, r, _ in done], plots)
    if missing:
        text += ("\n\n## Not measured\n\nThis report was rendered with `--cached-only`; these "
                 f"{len(missing)} points of the grid were not measured:\n\n"
                 + "\n".join(f"- K={point['K']} {point['model']}: {describe_point(point)}"
                              for point in missing))
    os.makedirs(os.path.dirname(os.path.abspath(args.output)) or ".", exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    print(text)
    log(f"wrote {shown_path(args.output)}; {sum(c for _, _, c in done)} of {len(done)} "
        f"points computed, the rest from {shown_path(args.cache)}")
    return done


def package_dir():
    import stc

    return os.path.dirname(os.path.abspath(stc.__file__))


def describe_point(point):
    return ", ".join(f"{k}={v}" for k, v in point.items()
                     if k not in ("model", "K", "seed", "label", "cv") and v is not None)


if __name__ == "__main__":
    main()
