"""bench_sparsity.py's measuring part: the grids, one measured point, the whole run.

Each point is a plain dict (its cache key); measuring it fits a model on the
training split and records the sparsity of its codes of the test split, its
accuracy and its times. `_sparsity_report` turns the records into tables and plots.
"""
import os
import time

import numpy as np

import _common
from _common import (LDA_THRESHOLDS, REPO_ROOT, lda_word_zero_shares, log, predicted_classes,
                     read_corpus, svm_accuracy, word_zero_share)
from _machine import source_fingerprint, uptime_line

# Bump when a measurement changes meaning: cached points of another protocol are recomputed.
PROTOCOL = 1

DEFAULT_CACHE = os.path.join(REPO_ROOT, "benchmarks", ".cache", "sparsity")

# The grids of the full run (relative rho; see bench_sparsity.py's docstring).
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
# The paper's setting with the parameters the defaults still share spelled out too
# (they are part of the points' cache keys).
PAPER_STC = dict(_common.PAPER_STC, lambda_=0.1)
# MedSTC's parameters in the paper's parameterisation (its defaults before the
# sparsity work), spelled out so that no point moves when the defaults do.
PAPER_MEDSTC = dict(_common.PAPER_MEDSTC, lambda_=30.0, C=3e4, theta_penalty="l2")


# ---------------------------------------------------------------------------
# The grid
# ---------------------------------------------------------------------------

def grid_points(grid, K):
    """Every point of the run for K topics, as plain dicts (the cache keys).

    Ordered so that an interrupted run has the most telling points first: the
    paper's setting, the l2 STC curve at the first lambda_, LDA, MedSTC, then the
    other STC curves.
    """
    if K not in grid.get("full_grid_topics", (K,)):
        grid = dict(grid, **grid["reduced"])
    first_lambda, first_penalty = grid["stc_lambda"][0], grid["theta_penalties"][0]
    paper, medstc_paper = paper_stc_point(grid, K), paper_medstc_point(grid, K)
    return ([paper] + stc_curve(grid, K, first_lambda, first_penalty, grid["stc_rho"])
            + stc_recoded_points(K, paper, grid["recoded_rho"])
            + lda_points(grid, K) + medstc_points(grid, K)
            + [medstc_paper, medstc_default_point(grid, K)]
            + medstc_recoded_points(K, medstc_paper, grid["recoded_rho"])
            + other_stc_curves(grid, K)
            + medstc_recoded_points(K, medstc_paper, grid.get("medstc_recoded_auto_rho", ()),
                                    refit="auto")
            + medstc_recoded_points(K, medstc_paper, grid.get("medstc_recoded_cv_rho", ()),
                                    refit="cv",
                                    refit_factors=list(grid.get("medstc_recoded_cv_factors",
                                                                ())))
            + most_accurate_recoded_points(grid, K))


def stc_point(grid, K, rho, lambda_, penalty):
    return dict(model="stc", K=K, seed=grid["seed"], max_iter=grid["stc_max_iter"], rho=rho,
                rho_units="relative", lambda_=lambda_, theta_penalty=penalty, label="")


def stc_curve(grid, K, lambda_, penalty, rhos):
    return [stc_point(grid, K, rho, lambda_, penalty) for rho in rhos]


def paper_stc_point(grid, K):
    return dict(model="stc", K=K, seed=grid["seed"], max_iter=grid["stc_max_iter"],
                label="paper", **PAPER_STC)


def other_stc_curves(grid, K):
    """The other theta penalties at the first lambda_, then the other lambda_."""
    first_lambda = grid["stc_lambda"][0]
    points = []
    for penalty in grid["theta_penalties"][1:]:
        points += stc_curve(grid, K, first_lambda, penalty, grid["stc_rho"])
    for lambda_ in grid["stc_lambda"][1:]:
        for penalty in grid.get("other_lambda_penalties", grid["theta_penalties"]):
            points += stc_curve(grid, K, lambda_, penalty,
                                grid.get("other_lambda_rho", grid["stc_rho"]))
    return points


def stc_recoded_points(K, topics, rhos, label=""):
    """The topics of the STC point ``topics``, documents coded at each relative rho."""
    return [dict(model="stc-recoded", K=K, topics_of=topics, rho=rho, rho_units="relative",
                 label=label) for rho in rhos]


def most_accurate_recoded_points(grid, K):
    if not grid.get("most_accurate_recoded_rho"):
        return []
    # the same fit as that grid point; keep_model keeps its model file for the codings
    topics = dict(stc_point(grid, K, *grid["most_accurate"]), keep_model=True)
    return stc_recoded_points(K, topics, grid["most_accurate_recoded_rho"], "most accurate")


def lda_points(grid, K):
    return [dict(model="lda", K=K, seed=grid["seed"], max_iter=grid["lda_max_iter"],
                 alpha=alpha, label="default" if alpha is None else "")
            for alpha in grid["lda_alpha"]]


def medstc_points(grid, K):
    """MedSTC over rho, C and lambda_ cross-validated (or taken from another rho's CV)."""
    points = []
    cv_rho = grid["medstc_cv_rho"]
    for penalty in grid["medstc_theta_penalties"]:
        for rho in grid["medstc_rho"]:
            pairs = tuple(grid.get("medstc_cv_extra", {}).get(rho, ())) + tuple(grid["medstc_cv"])
            point = dict(model="medstc", K=K, seed=grid["seed"],
                         max_iter=grid["medstc_max_iter"], rho=rho, rho_units="relative",
                         theta_penalty=penalty, refit_C=grid["medstc_refit_C"],
                         cv=[list(pair) for pair in pairs], label="")
            if cv_rho is not None and rho not in cv_rho:
                point["cv_at_rho"] = cv_rho[0]  # C and lambda_ chosen there
            points.append(point)
    return points


def paper_medstc_point(grid, K):
    # label "defaults": the cache key of the days when this was MedSTC's default
    return dict(model="medstc", K=K, seed=grid["seed"], max_iter=grid["medstc_max_iter"],
                rho=0.01, rho_units="absolute", theta_penalty="l2",
                refit_C=grid["medstc_refit_C"], cv=None, label="defaults")


def medstc_default_point(grid, K):
    """MedSTC's defaults (the knee): C, lambda_ and refit_C as the estimator sets them."""
    return dict(model="medstc", K=K, seed=grid["seed"], max_iter=grid["medstc_max_iter"],
                rho=0.02, rho_units="relative", theta_penalty="l2", refit_C="auto",
                cv=[[3e4, 30.0]], label="defaults")


def medstc_recoded_points(K, topics, rhos, **refit):
    """MedSTC's ``topics``, documents coded at each relative rho, the classifier refitted
    (``refit``: how its C is chosen, if not the model's fixed refit_C)."""
    return [dict(model="medstc-recoded", K=K, topics_of=topics, rho=rho, rho_units="relative",
                 **refit, label="") for rho in rhos]


def describe_point(point):
    return ", ".join(f"{k}={v}" for k, v in point.items()
                     if k not in ("model", "K", "seed", "label", "cv") and v is not None)


# ---------------------------------------------------------------------------
# Measuring one point
# ---------------------------------------------------------------------------

def measure_grid(args, grid, topics, cache):
    """Every point of the run for ``topics``, from the cache or measured (and cached).

    Returns (done, missing, corpus): the (point, record, computed) triples,
    ``computed`` False for a point read from the cache; the points that
    ``--cached-only`` left unmeasured; the corpus, None if nothing was measured.
    """
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
                if corpus is None:  # read only when something is to be measured
                    corpus = read_corpus(args.quick, args.data, grid["subset"])
                record = measure_point(point, corpus, args.threads, cache)
                cache.put(point, record)
            done.append((point, record, computed))
    return done, missing, corpus


def measure_point(point, corpus, threads, cache):
    """The record of one point, with the corpus, the load and the sources it was measured on."""
    log(f"K={point['K']} {point['model']} {describe_point(point)}")
    record = run_point(point, corpus, threads, cache)
    record["corpus"] = corpus.fingerprint
    record["load_at_end"] = uptime_line()
    record["stc_sources"] = source_fingerprint(package_dir())[0]
    log(f"  zeros {record['word_zero']:.3f}, accuracy {record['accuracy']:.4f}, "
        f"fit {record['fit_time']:.1f}s")
    return record


def run_point(point, corpus, threads, cache):
    if point["model"] == "lda":
        return run_lda(point, corpus, threads)
    run = {"stc": run_stc, "stc-recoded": run_stc_recoded, "medstc": run_medstc,
           "medstc-recoded": run_medstc_recoded}[point["model"]]
    return run(point, corpus, threads, cache)


def package_dir():
    import stc

    return os.path.dirname(os.path.abspath(stc.__file__))


# ---------------------------------------------------------------------------
# STC
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# LDA
# ---------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------
# MedSTC
# ---------------------------------------------------------------------------

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
    accuracy = float(np.mean(predicted_classes(model, theta_te, coef) == corpus.yte))
    return dict(transform_time=transform_time, n_iter=int(model.n_iter_),
                word_zero=word_zero_share(model.word_codes(corpus.Xte), corpus.seen_entries),
                doc_zero=float(np.mean(theta_te == 0)), accuracy=accuracy)


def cv_refit_C(model, theta, y_index, candidates):
    """The candidate C whose refitted classifier scores best in 3-fold CV on ``theta``."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    from stc._learning.supervised.svm import CuttingPlaneSVM

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
    from stc._learning.supervised.svm import CuttingPlaneSVM
    from stc._estimators.medstc import auto_refit_C

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
    best, cv = chosen_C_and_lambda(point, corpus, threads, cache)
    model = medstc_model(point, best["C"], best["lambda_"], threads)
    start = time.perf_counter()
    model.fit(corpus.Xtr, corpus.ytr)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    theta_te = model.transform(corpus.Xte)
    transform_time = time.perf_counter() - start
    accuracy = float(np.mean(predicted_classes(model, theta_te, model.coef_) == corpus.yte))
    return dict(C=best["C"], lambda_=best["lambda_"], rho_absolute=model.effective_rho_, cv=cv,
                fit_time=fit_time, transform_time=transform_time, n_iter=int(model.n_iter_),
                word_zero=word_zero_share(model.word_codes(corpus.Xte), corpus.seen_entries),
                doc_zero=float(np.mean(theta_te == 0)), accuracy=accuracy)


def chosen_C_and_lambda(point, corpus, threads, cache):
    """The (C, lambda_) pair of ``point["cv"]`` of best validation accuracy, and every
    pair's accuracy (none with a single pair: nothing to choose).

    Each pair's accuracy is cached as a point of its own, measured at
    ``point["cv_at_rho"]`` if given, so the rho that reuse a choice cost nothing.
    """
    cv = []
    at_rho = point.get("cv_at_rho", point["rho"])
    for C, lambda_ in point["cv"] if len(point["cv"]) > 1 else ():
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
        return max(cv, key=lambda row: row["validation_accuracy"]), cv
    return dict(C=point["cv"][0][0], lambda_=point["cv"][0][1]), cv
