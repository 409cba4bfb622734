"""Classification on 20 Newsgroups: MedSTC vs. STC + SVM vs. LDA + SVM (paper Fig. 5/6).

Usage::

    python benchmarks/bench_medstc.py [--quick | --topics K ...] [--cv]
        [--C C] [--cost COST] [--lambda L] [--refit-C RC|auto|none] [--max-iter N]
        (default: MedSTC's) [--rho R] [--rho-units U] (default: the paper's 0.01, absolute)
        [--threads 2] [--data DIR] [--output benchmarks/results_medstc.md]
        [--append] [--skip-stc] [--skip-lda] [--skip-medstc]

For every number of topics K (default 20, 30, ..., 110; ``--quick``: 20, 50,
100), on the full corpus (stop words removed, 11,269 train / 7,505 test
documents; read from ``../shared/data/20news`` relative to the repository root
unless ``--data`` says otherwise), it runs in the same process:

1. MedSTC (``stc.MedSTC``) fitted on the training documents and
   their labels; the test documents are coded without labels and classified
   by argmax_y eta_y . theta. Reported: test accuracy, fit time, predict time,
   final training accuracy (``train_accuracy_[-1]``), outer iterations
   ``n_iter_`` and whether ``objective_`` ever increased.
2. STC + linear SVM: ``STC`` at the paper's setting (``rho=0.01``,
   ``rho_units="absolute"``, ``theta_penalty="l2"``, the defaults when
   results_medstc.md was measured) learned without labels on train and test stacked
   (as the paper does for its unsupervised baselines), then
   ``sklearn.svm.LinearSVC`` on the training codes, its C chosen by 3-fold
   stratified cross-validation on the training codes only.
3. LDA + linear SVM: ``LatentDirichletAllocation(n_components=K,
   learning_method="batch", random_state=0)`` on train and test stacked, then
   LinearSVC on the training document-topic proportions (C by 3-fold CV on
   the training features).

``--cv`` first cross-validates MedSTC's C (and optionally lambda_ and rho, and
always refit_C over ``--cv-refit-C``, evaluated on top of each fit) on
the TRAINING documents only at K=``--cv-topics`` (default 50), with a
stratified ``--cv-folds``-fold split (default 2), prints the table and the
chosen values, and uses them for the main runs (if any K are requested in the
same call). Without ``--topics``/``--quick`` it only runs the CV.

Progress lines go to stderr; the markdown tables, with the command and machine
information, are written to ``--output`` after every finished step, so an
interrupted run keeps what it finished, and printed at the end.
"""
import argparse
import itertools
import os
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

from _common import PAPER_MEDSTC, PAPER_STC, REPO_ROOT, add_data_option, load_corpus, log, shown_path
from _machine import load1, machine_info, uptime_line

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_medstc.md")
SVM_C_GRID = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)


class WarningLog:
    """Collects the warnings raised inside a ``with`` block (and prints them)."""

    def __init__(self, label):
        self.label = label
        self.messages = []

    def __enter__(self):
        self._ctx = warnings.catch_warnings(record=True)
        self._records = self._ctx.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        for rec in self._records:
            self.messages.append(f"{rec.category.__name__}: {rec.message}")
        for text, count in self.summary():
            log(f"WARNING ({self.label}) x{count}: {text}")
        return False

    def summary(self):
        counts = {}
        for msg in self.messages:
            key = msg if len(msg) < 160 else msg[:157] + "..."
            counts[key] = counts.get(key, 0) + 1
        return sorted(counts.items(), key=lambda kv: -kv[1])


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

def medstc_params(args, K, **over):
    params = dict(n_topics=K, C=args.C, cost=args.cost, lambda_=args.lambda_, rho=args.rho,
                  rho_units=args.rho_units, refit_C=args.refit_C, max_iter=args.max_iter, tol=args.tol, n_jobs=args.threads, random_state=0,
                  verbose=args.verbose)
    params.update(over)
    return params


def objective_increases(objective):
    """(number of increases, largest relative increase) of a per-iteration objective."""
    obj = np.asarray(objective, dtype=float)
    if obj.size < 2:
        return 0, 0.0
    diff = np.diff(obj)
    up = diff > 0
    rel = float(np.max(diff[up] / np.abs(obj[1:][up]))) if np.any(up) else 0.0
    return int(np.count_nonzero(up)), rel


def fit_medstc(params, Xtr, ytr, Xte, yte, label, keep_model=False):
    from stc import MedSTC

    model = MedSTC(**params)
    log(f"{label}: MedSTC fit {Xtr.shape[0]} docs, C={params['C']:g}, "
        f"cost={params['cost']:g}, lambda_={params['lambda_']:g}, rho={params['rho']:g}, "
        f"refit_C={params['refit_C']}, max_iter={params['max_iter']} (load {load1():.2f})")
    with WarningLog(label + " MedSTC fit") as wfit:
        start = time.perf_counter()
        model.fit(Xtr, ytr)
        fit_time = time.perf_counter() - start
    with WarningLog(label + " MedSTC predict") as wpred:
        start = time.perf_counter()
        pred = model.predict(Xte)
        predict_time = time.perf_counter() - start
    acc = float(np.mean(pred == yte))
    n_up, rel_up = objective_increases(model.objective_)
    res = dict(acc=acc, fit_time=fit_time, predict_time=predict_time,
               train_acc=float(model.train_accuracy_[-1]), n_iter=int(model.n_iter_),
               max_iter=int(model.max_iter), n_up=n_up, rel_up=rel_up,
               objective=np.asarray(model.objective_, dtype=float),
               hinge=float(model.hinge_[-1]), refit_train_acc=model.refit_train_accuracy_,
               warnings=wfit.summary() + wpred.summary())
    if keep_model:
        res["model"] = model
    log(f"{label}: MedSTC acc {acc:.4f}, fit {fit_time:.1f}s, predict {predict_time:.1f}s, "
        f"n_iter {res['n_iter']}, train acc {res['train_acc']:.3f}, objective increases "
        f"{n_up} (max rel {rel_up:.2e}), objective {np.array2string(res['objective'], precision=6)}")
    return res


def linear_svm(Ftr, ytr, Fte, yte, threads, label):
    """LinearSVC with C from 3-fold stratified CV on the training features."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import LinearSVC

    with WarningLog(label + " LinearSVC") as wlog:
        start = time.perf_counter()
        search = GridSearchCV(LinearSVC(dual=False, max_iter=5000),
                              {"C": list(SVM_C_GRID)},
                              cv=StratifiedKFold(3, shuffle=True, random_state=0),
                              n_jobs=threads, refit=True)
        search.fit(Ftr, ytr)
        svm_time = time.perf_counter() - start
        start = time.perf_counter()
        acc = float(search.score(Fte, yte))
        predict_time = time.perf_counter() - start
    cv_scores = search.cv_results_["mean_test_score"]
    log(f"{label}: LinearSVC C={search.best_params_['C']:g} (CV "
        + ", ".join(f"{c:g}:{s:.3f}" for c, s in zip(SVM_C_GRID, cv_scores))
        + f"), test acc {acc:.4f}, CV+refit {svm_time:.1f}s")
    return dict(acc=acc, svm_C=float(search.best_params_["C"]),
                cv_score=float(search.best_score_), svm_time=svm_time,
                svm_predict_time=predict_time, warnings=wlog.summary())


def run_stc_svm(K, Xall, ntr, ytr, yte, threads):
    from stc import STC

    model = STC(n_topics=K, random_state=0, n_jobs=threads, **PAPER_STC)
    log(f"K={K}: STC fit_transform on train+test ({Xall.shape[0]} docs, load {load1():.2f})")
    with WarningLog(f"K={K} STC") as wlog:
        start = time.perf_counter()
        theta = model.fit_transform(Xall)
        fit_time = time.perf_counter() - start
    n_up, rel_up = objective_increases(model.objective_)
    log(f"K={K}: STC {fit_time:.1f}s, n_iter {model.n_iter_}, objective increases {n_up}")
    res = dict(fit_time=fit_time, n_iter=int(model.n_iter_), max_iter=int(model.max_iter),
               n_up=n_up, rel_up=rel_up, doc_sparsity=float(np.mean(theta == 0)))
    res.update(linear_svm(theta[:ntr], ytr, theta[ntr:], yte, threads, f"K={K} STC"))
    res["warnings"] = wlog.summary() + res["warnings"]
    return res


def run_lda_svm(K, Xall, ntr, ytr, yte, threads):
    from sklearn.decomposition import LatentDirichletAllocation

    lda = LatentDirichletAllocation(n_components=K, learning_method="batch", random_state=0,
                                    n_jobs=threads)
    log(f"K={K}: LDA fit_transform on train+test ({Xall.shape[0]} docs, load {load1():.2f})")
    with WarningLog(f"K={K} LDA") as wlog:
        start = time.perf_counter()
        props = lda.fit_transform(Xall)
        fit_time = time.perf_counter() - start
    log(f"K={K}: LDA {fit_time:.1f}s, {lda.n_iter_} iterations")
    res = dict(fit_time=fit_time, n_iter=int(lda.n_iter_), max_iter=int(lda.max_iter))
    res.update(linear_svm(props[:ntr], ytr, props[ntr:], yte, threads, f"K={K} LDA"))
    res["warnings"] = wlog.summary() + res["warnings"]
    return res


def refit_accuracies(model, Xfit, yfit, Xval, yval, refit_Cs):
    """Validation accuracy of MedSTC's final step (``refit_C``) for every C in ``refit_Cs``.

    ``model`` was fitted with ``refit_C=None``; refitting eta on its label-free
    training codes with the cutting-plane SVM is exactly what ``fit`` does with
    ``refit_C=c`` (the test ``test_refit_C_is_the_svm_on_label_free_training_codes``
    checks it), so one fit serves every value.
    """
    from stc._learning.supervised.svm import CuttingPlaneSVM

    params = model.get_params()
    theta_fit, theta_val = model.transform(Xfit), model.transform(Xval)
    accs = {}
    for c in refit_Cs:
        svm = CuttingPlaneSVM(C=c, cost=params["cost"], tol=params["svm_tol"],
                              max_iter=params["svm_max_iter"]).fit(theta_fit, yfit)
        accs[c] = float(np.mean(svm.predict(theta_val) == yval))
    return accs


def run_cv(args, Xtr, ytr):
    """Stratified k-fold CV of MedSTC's (C, lambda_, rho, refit_C) on the training documents."""
    from sklearn.model_selection import StratifiedKFold

    K = args.cv_topics
    folds = list(StratifiedKFold(args.cv_folds, shuffle=True, random_state=0).split(
        np.zeros(Xtr.shape[0]), ytr))
    rows = []
    grid = list(itertools.product(args.cv_lambdas, args.cv_rhos, args.cv_C))
    refit_grid = [None] + list(args.cv_refit_C)
    log(f"CV: K={K}, {args.cv_folds} folds, {len(grid)} settings x refit_C in {refit_grid}, "
        f"max_iter={args.cv_max_iter}")
    for lam, rho, C in grid:
        fold_res = []
        for f, (tr, va) in enumerate(folds):
            params = medstc_params(args, K, C=C, lambda_=lam, rho=rho, refit_C=None,
                                   max_iter=args.cv_max_iter)
            res = fit_medstc(params, Xtr[tr], ytr[tr], Xtr[va], ytr[va],
                             f"CV C={C:g} lambda={lam:g} rho={rho:g} fold {f + 1}",
                             keep_model=True)
            res["refit_accs"] = refit_accuracies(res.pop("model"), Xtr[tr], ytr[tr], Xtr[va],
                                                 ytr[va], args.cv_refit_C)
            res["refit_accs"][None] = res["acc"]
            fold_res.append(res)
        for refit_C in refit_grid:
            accs = [r["refit_accs"][refit_C] for r in fold_res]
            rows.append(dict(C=C, lambda_=lam, rho=rho, refit_C=refit_C, cost=args.cost,
                             accs=accs, mean=float(np.mean(accs)), std=float(np.std(accs)),
                             fit_time=float(np.mean([r["fit_time"] for r in fold_res])),
                             train_acc=float(np.mean([r["train_acc"] for r in fold_res])),
                             n_iter=[r["n_iter"] for r in fold_res],
                             n_up=sum(r["n_up"] for r in fold_res),
                             rel_up=max(r["rel_up"] for r in fold_res),
                             warnings=[w for r in fold_res for w in r["warnings"]]))
            log(f"CV C={C:g} lambda={lam:g} rho={rho:g} refit_C={refit_C}: mean acc "
                f"{rows[-1]['mean']:.4f} (folds {', '.join(f'{a:.4f}' for a in accs)})")
        yield rows, None
    best = max(rows, key=lambda r: r["mean"])
    log(f"CV chosen: C={best['C']:g}, lambda_={best['lambda_']:g}, rho={best['rho']:g}, "
        f"refit_C={best['refit_C']} (mean acc {best['mean']:.4f})")
    yield rows, best


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

def warning_lines(prefix, summary):
    return [f"- {prefix}: {text} (x{count})" for text, count in summary]


def render_cv(args, rows, best, train_docs):
    K = args.cv_topics
    lines = [f"## MedSTC cross-validation on the training set (K={K})", "",
             f"{args.cv_folds}-fold stratified split of the {train_docs} training documents "
             f"(`StratifiedKFold(shuffle=True, random_state=0)`); each setting fitted on "
             f"{args.cv_folds - 1}/{args.cv_folds} of them and scored on the held-out part "
             f"(coded without labels). cost={args.cost:g}, max_iter={args.cv_max_iter}, "
             f"tol={args.tol:g}, random_state=0.", "",
             "refit_C = none is the loop's eta; a number is the final step refitting eta on "
             "the label-free training codes.", "",
             "| C | lambda_ | rho | refit_C | equiv. LinearSVC C' = C/(cost*D) | mean val. acc "
             "| std | fold accs | mean train acc (loop) | n_iter_ per fold | mean fit (s) "
             "| objective increases |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    n_fit = train_docs * (args.cv_folds - 1) // args.cv_folds
    for r in rows:
        mark = " **(chosen)**" if best is not None and r is best else ""
        lines.append(
            f"| {r['C']:g}{mark} | {r['lambda_']:g} | {r['rho']:g} | "
            f"{'none' if r['refit_C'] is None else format(r['refit_C'], 'g')} | "
            f"{r['C'] / (r['cost'] * n_fit):.3g} | {r['mean']:.4f} | {r['std']:.4f} | "
            f"{', '.join(f'{a:.4f}' for a in r['accs'])} | {r['train_acc']:.3f} | "
            f"{', '.join(map(str, r['n_iter']))} | {r['fit_time']:.1f} | "
            f"{r['n_up']}" + (f" (max rel {r['rel_up']:.1e})" if r['n_up'] else "") + " |")
    lines.append("")
    if best is not None:
        lines += [f"Chosen: C={best['C']:g}, cost={best['cost']:g}, "
                  f"lambda_={best['lambda_']:g}, rho={best['rho']:g}, "
                  f"refit_C={best['refit_C']} (mean validation accuracy {best['mean']:.4f}).", ""]
    else:
        lines += ["(CV incomplete.)", ""]
    warns = []
    for r in rows:
        if r["refit_C"] is not None:
            continue  # the same fits as the refit_C = none row
        summary = {}
        for text, count in r["warnings"]:
            summary[text] = summary.get(text, 0) + count
        warns += warning_lines(f"C={r['C']:g} lambda_={r['lambda_']:g} rho={r['rho']:g}",
                               sorted(summary.items(), key=lambda kv: -kv[1]))
    if warns:
        lines += ["Warnings during CV:", ""] + warns + [""]
    return lines


def render_main(args, rows):
    lines = ["## Test accuracy vs. number of topics (paper Fig. 5/6)", "",
             f"MedSTC: `MedSTC(n_topics=K, C={args.C:g}, cost={args.cost:g}, "
             f"lambda_={args.lambda_:g}, rho={args.rho:g}, rho_units='{args.rho_units}', "
             f"refit_C={args.refit_C}, "
             f"max_iter={args.max_iter}, tol={args.tol:g}, n_jobs={args.threads}, random_state=0)` on the training split; "
             "test documents coded without labels. STC+SVM: `STC(n_topics=K, random_state=0, "
             "rho=0.01, rho_units='absolute', theta_penalty='l2')` (defaults otherwise) on "
             "train+test; LDA+SVM: `LatentDirichletAllocation(n_components=K, "
             "learning_method='batch', random_state=0)` (max_iter=10 default) on train+test; both "
             "followed by `LinearSVC(dual=False)` with C from 3-fold CV on the training features "
             f"over {{{', '.join(f'{c:g}' for c in SVM_C_GRID)}}}.", "",
             "| K | MedSTC acc | STC+SVM acc | LDA+SVM acc |",
             "|---|---|---|---|"]
    for r in rows:
        cells = [str(r["K"])]
        for key in ("med", "stc", "lda"):
            cells.append(f"{r[key]['acc']:.4f}" if r.get(key) else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")

    if any(r.get("med") for r in rows):
        lines += ["MedSTC details:", "",
                  "| K | test acc | fit (s) | predict test (s) | final train acc (loop) "
                  "| train acc of refitted eta | n_iter_ "
                  "| final hinge R_h | objective_ ever increased | 1-min load at start |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            m = r.get("med")
            if not m:
                continue
            n_iter = f"{m['n_iter']}" + (" (hit max_iter)" if m["n_iter"] >= m["max_iter"] else "")
            up = "no" if m["n_up"] == 0 else f"YES, {m['n_up']}x (max rel {m['rel_up']:.1e})"
            lines.append(f"| {r['K']} | {m['acc']:.4f} | {m['fit_time']:.1f} | "
                         f"{m['predict_time']:.2f} | {m['train_acc']:.3f} | "
                         f"{'-' if m['refit_train_acc'] is None else format(m['refit_train_acc'], '.3f')} | "
                         f"{n_iter} | "
                         f"{m['hinge']:.4g} | {up} | {r['load']:.2f} |")
        lines.append("")

    for key, name in (("stc", "STC"), ("lda", "LDA")):
        if not any(r.get(key) for r in rows):
            continue
        extra = "n_iter_ | objective_ ever increased | doc-code sparsity" if key == "stc" \
            else "EM iterations"
        lines += [f"{name} + LinearSVC details:", "",
                  f"| K | test acc | {name} fit+code train+test (s) | {extra} | LinearSVC C "
                  "| CV acc | SVM CV+refit (s) | SVM predict (s) | total (s) |",
                  "|---|---|---|---|" + ("---|---|" if key == "stc" else "")
                  + "---|---|---|---|"]
        for r in rows:
            m = r.get(key)
            if not m:
                continue
            if key == "stc":
                up = "no" if m["n_up"] == 0 else f"YES, {m['n_up']}x (max rel {m['rel_up']:.1e})"
                mid = f"{m['n_iter']}/{m['max_iter']} | {up} | {m['doc_sparsity']:.3f}"
            else:
                mid = f"{m['n_iter']}/{m['max_iter']}"
            lines.append(f"| {r['K']} | {m['acc']:.4f} | {m['fit_time']:.1f} | {mid} | "
                         f"{m['svm_C']:g} | {m['cv_score']:.4f} | {m['svm_time']:.1f} | "
                         f"{m['svm_predict_time']:.3f} | "
                         f"{m['fit_time'] + m['svm_time'] + m['svm_predict_time']:.1f} |")
        lines.append("")

    notes = []
    for r in rows:
        if r.get("med"):
            notes.append(f"- K={r['K']}: MedSTC objective_ = "
                         + ", ".join(f"{v:.6e}" for v in r["med"]["objective"]))
    warns = []
    for r in rows:
        for key, name in (("med", "MedSTC"), ("stc", "STC+SVM"), ("lda", "LDA+SVM")):
            if r.get(key):
                warns += warning_lines(f"K={r['K']} {name}", r[key]["warnings"])
    if notes:
        lines += ["MedSTC objective (4) per outer iteration:", ""] + notes + [""]
    lines += ["Warnings:", ""] + (warns or ["- none"]) + [""]
    return lines


def render(args, info, data_info, load_start, cv_state, rows, done):
    lines = ["# MedSTC vs. STC+SVM vs. LDA+SVM on 20 Newsgroups", "",
             "Command: `python benchmarks/bench_medstc.py " + " ".join(sys.argv[1:]) + "`", "",
             "Machine:", ""] + info + [
        f"- `uptime` at start: `{load_start}`",
        f"- `uptime` {'at end' if done else 'at last update (run not finished)'}: "
        f"`{uptime_line()}`", "", f"Data: {data_info}", ""]
    if cv_state is not None:
        lines += render_cv(args, *cv_state)
    if rows:
        lines += render_main(args, rows)
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_option(parser)
    parser.add_argument("--topics", type=int, nargs="+", default=None,
                        help="numbers of topics K (default: 20 30 ... 110)")
    parser.add_argument("--quick", action="store_true", help="K in {20, 50, 100}")
    parser.add_argument("--threads", type=int, default=2)
    from stc import MedSTC
    # MedSTC's own defaults (the cross-validated ones), unless overridden here; rho and its
    # units are the paper's, with which results_medstc.md was measured.
    defaults = MedSTC().get_params()
    for flag, key in (("--C", "C"), ("--cost", "cost"), ("--lambda", "lambda_")):
        parser.add_argument(flag, dest=key, type=float, default=float(defaults[key]),
                            help=f"MedSTC {key} (default {defaults[key]:g}, the estimator's)")
    parser.add_argument("--tol", type=float, default=PAPER_MEDSTC["tol"],
                        help=f"MedSTC tol (default {PAPER_MEDSTC['tol']:g}, the estimator's "
                             "before its own default, with which results_medstc.md was measured)")
    parser.add_argument("--rho", type=float, default=PAPER_MEDSTC["rho"],
                        help=f"MedSTC rho (default {PAPER_MEDSTC['rho']:g}, the paper's)")
    parser.add_argument("--rho-units", dest="rho_units", choices=("absolute", "relative"),
                        default=PAPER_MEDSTC["rho_units"],
                        help=f"MedSTC rho_units (default {PAPER_MEDSTC['rho_units']}, the paper's)")
    parser.add_argument("--refit-C", dest="refit_C", type=lambda v: None if v == "none" else v if v == "auto" else float(v),
                        default=defaults["refit_C"],
                        help=f"MedSTC refit_C, 'auto' or 'none' (default {defaults['refit_C']}, the estimator's)")
    parser.add_argument("--max-iter", type=int, default=defaults["max_iter"],
                        help=f"MedSTC max_iter (default {defaults['max_iter']}, the estimator's)")
    parser.add_argument("--verbose", type=int, default=0, help="MedSTC verbose level")
    parser.add_argument("--cv", action="store_true",
                        help="cross-validate MedSTC's C (lambda_, rho) on the training set first")
    parser.add_argument("--cv-topics", type=int, default=50)
    parser.add_argument("--cv-folds", type=int, default=2)
    parser.add_argument("--cv-C", type=float, nargs="+", default=[300.0, 1000.0, 3000.0, 10000.0])
    parser.add_argument("--cv-lambdas", type=float, nargs="+", default=[0.1])
    parser.add_argument("--cv-rhos", type=float, nargs="+", default=[0.01])
    parser.add_argument("--cv-refit-C", type=float, nargs="*", default=[1e5, 3e5, 1e6, 3e6, 1e7],
                        help="refit_C values tried on top of each setting (besides none)")
    parser.add_argument("--cv-max-iter", type=int, default=15)
    parser.add_argument("--skip-medstc", action="store_true")
    parser.add_argument("--skip-stc", action="store_true")
    parser.add_argument("--skip-lda", action="store_true")
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    parser.add_argument("--append", action="store_true",
                        help="append to --output instead of overwriting it")
    args = parser.parse_args(argv)
    if args.topics is None:
        args.topics = [20, 50, 100] if args.quick else ([] if args.cv else list(range(20, 111, 10)))

    load_start = uptime_line()
    info = machine_info("threads used (MedSTC/STC n_jobs, LDA n_jobs, CV n_jobs): "
                        f"{args.threads}")
    log(f"uptime: {load_start}")
    train, test, data_info = load_corpus(args.data)
    Xtr, Xte, ytr, yte = train.data, test.data, train.target, test.target
    log(data_info)

    previous = ""
    if args.append and os.path.exists(args.output):
        with open(args.output, encoding="utf-8") as handle:
            previous = handle.read()
        if previous:
            previous += "\n---\n\n"

    cv_state, rows = None, []

    def write(done=False):
        text = render(args, info, data_info, load_start, cv_state, rows, done)
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(previous + text)
        return text

    if args.cv:
        for cv_rows, best in run_cv(args, Xtr, ytr):
            cv_state = (cv_rows, best, Xtr.shape[0])
            write()
        args.C, args.lambda_, args.rho = best["C"], best["lambda_"], best["rho"]
        args.refit_C = best["refit_C"]

    Xall = sp.vstack([Xtr, Xte], format="csr")
    ntr = Xtr.shape[0]
    for K in args.topics:
        row = dict(K=K, load=load1())
        rows.append(row)
        if not args.skip_medstc:
            row["med"] = fit_medstc(medstc_params(args, K), Xtr, ytr, Xte, yte, f"K={K}")
            write()
        if not args.skip_stc:
            row["stc"] = run_stc_svm(K, Xall, ntr, ytr, yte, args.threads)
            write()
        if not args.skip_lda:
            row["lda"] = run_lda_svm(K, Xall, ntr, ytr, yte, args.threads)
            write()

    text = write(done=True)
    print(text, end="", flush=True)
    log(f"wrote {shown_path(args.output)}")


if __name__ == "__main__":
    main()
