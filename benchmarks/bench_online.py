"""Online (mini-batch) STC against batch STC on the full 20 Newsgroups corpus, in one run.

Usage::

    python benchmarks/bench_online.py [--data DIR] [--topics 20,50,100] [--threads 2]
                                      [--batch-size B] [--passes P] [--rounds 2]
                                      [--dictionary-steps S]
                                      [--setting paper|defaults]
                                      [--output benchmarks/results_online.md]

Both models use ``STC(n_topics=K, random_state=0, n_jobs=threads, rho=0.01,
rho_units="absolute", theta_penalty="l2")`` (the paper's setting, the defaults when
results_online.md was measured) with the other parameters at their defaults, or with
``--setting defaults`` STC's defaults (results_online_defaults.md); the
online one adds
``learning_method="online"`` (and ``batch_size`` / ``n_passes`` when given;
by default the online defaults). Measured:

* held-out objective: objective (2) of coding the test documents with the
  learned topics (``objective(X_test)``), and its relative gap to batch;
* document completion, log-likelihood per held-out token (every second stored
  entry of a test document held out, the rest coded): ``STC.score``'s rule, and the
  plain rule p(n | d) = theta_d . beta_n / sum_k theta_dk with no pseudo-count or
  background (``plain_completion``; a held-out entry that p gives 0, e.g. a term
  never seen in training, is left out for every model alike, and counted);
* NPMI of every topic's 10 top words over the training documents
  (`stc.inspection.coherence`), averaged over the topics;
* STC + SVM accuracy: ``LinearSVC`` on the document codes (train codes from
  ``transform``), C chosen by 3-fold CV on the training codes;
* passes over the training corpus (online: ``n_passes``; batch: ``n_iter_``
  outer iterations, each codes every document once);
* fit time: ``--rounds`` untraced fits of each model, interleaved (batch,
  online, batch, online, ...) with the load average at each, and their
  median; the speed ratio compares the medians;
* peak memory of ``fit``: ``tracemalloc`` peak above the start, in a further
  fit of each model (numpy reports its buffers to tracemalloc). The batch
  model's peak is reached in its first iteration (word codes, layout and
  dictionary-step buffers are all allocated then), so its traced fit stops
  after 2 iterations; the online one's traced fit makes 1 pass (every batch
  allocates alike).

Targets (issue): completion log-likelihood within 1 % under both rules, NPMI
within 0.01, accuracy within 1 point, at most 3 passes, fit at least 2x faster;
the held-out objective and the peak memory are reported beside them.
"""
import argparse
import os
import sys
import time
import tracemalloc
import warnings

import numpy as np

from _common import (REPO_ROOT, add_data_option, add_setting_option, load_corpus, log,
                     resolve_setting)
from _machine import load_average, online_vs_batch_page, publish, uptime_line, verdict

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_online.md")
DEFAULTS_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_online_defaults.md")


def svm_accuracy(train_codes, y_train, test_codes, y_test):
    from sklearn.model_selection import GridSearchCV
    from sklearn.preprocessing import StandardScaler
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import LinearSVC

    search = GridSearchCV(make_pipeline(StandardScaler(), LinearSVC(dual=False, max_iter=5000)),
                          {"linearsvc__C": [0.01, 0.1, 1.0, 10.0]}, cv=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(train_codes, y_train)
    return float(search.score(test_codes, y_test)), search.best_params_["linearsvc__C"]


def traced_peak_mb(make_model, X):
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make_model().fit(X)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (peak - base) / 2 ** 20


def timed_fit(params, X, verbose):
    from stc import STC

    load = load_average().split()[0]
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = STC(**params, verbose=verbose).fit(X)
    return model, time.perf_counter() - start, load


def plain_completion(model, X, chunk=100_000):
    """Log-likelihood per held-out token with p(n | d) = theta_d . beta_n / sum_k theta_dk.

    Returns (the mean, the share of held-out tokens left out because p = 0).
    """
    from stc._learning.completion import split_entries

    observed, held_out = split_entries(X)
    theta = model.transform(observed)
    mass = theta.sum(axis=1)
    held_out = held_out.tocoo()
    total = counted = left_out = 0.0
    for first in range(0, held_out.nnz, chunk):
        rows = held_out.row[first:first + chunk]
        cols = held_out.col[first:first + chunk]
        weights = held_out.data[first:first + chunk]
        p = np.einsum("ik,ki->i", theta[rows], model.components_[:, cols])
        p = np.divide(p, mass[rows], out=np.zeros_like(p), where=mass[rows] > 0)
        kept = p > 0
        total += float(np.sum(weights[kept] * np.log(p[kept])))
        counted += float(weights[kept].sum())
        left_out += float(weights[~kept].sum())
    return total / counted, left_out / (counted + left_out)


def evaluate(name, model, fit_times, loads, trace_params, params, train, test):
    from stc import STC
    from stc.inspection import coherence

    log(f"{name}: coding train and test")
    held_out = model.objective(test.data)
    accuracy, C = svm_accuracy(model.transform(train.data), train.target,
                               model.transform(test.data), test.target)
    plain, left_out = plain_completion(model, test.data)
    log(f"{name}: traced fit for peak memory")
    peak = traced_peak_mb(lambda: STC(**dict(params, **trace_params)), train.data)
    return dict(name=name, fit_time=float(np.median(fit_times)), fit_times=fit_times,
                loads=loads, held_out=held_out, accuracy=accuracy, C=C, passes=model.n_iter_,
                peak=peak, score=model.score(test.data), plain=plain, left_out=left_out,
                npmi=float(np.mean(coherence(model, train.data, measure="npmi"))))


def compare(args, setting, train, test):
    """Batch and online fits at ``args.topics`` topics, timed alternately; their evaluations."""
    common = dict(n_topics=args.topics, random_state=0, n_jobs=args.threads, **setting)
    online_params = dict(common, learning_method="online")
    if args.batch_size is not None:
        online_params["batch_size"] = args.batch_size
    if args.passes is not None:
        online_params["n_passes"] = args.passes
    if args.dictionary_steps is not None:
        online_params["dictionary_max_iter"] = args.dictionary_steps
    # Timed fits interleaved, so that a change in the machine's load hits both alike.
    fits = {"batch": ([], [], None), "online": ([], [], None)}
    for round_number in range(1, args.rounds + 1):
        for name, params in (("batch", common), ("online", online_params)):
            log(f"K = {args.topics}, {name}: fit {round_number}/{args.rounds}")
            model, seconds, load = timed_fit(params, train.data, args.verbose)
            log(f"{name}: {seconds:.1f} s (load {load})")
            times, loads, first = fits[name]
            fits[name] = (times + [seconds], loads + [load], first or model)
    batch = evaluate("batch", fits["batch"][2], *fits["batch"][:2], dict(max_iter=2), common,
                     train, test)
    online = evaluate("online", fits["online"][2], *fits["online"][:2], dict(n_passes=1),
                      online_params, train, test)
    return batch, online, online_params


def table_rows(K, batch, online):
    rows = []
    for r in (batch, online):
        rows.append(f"| {K} | {r['name']} | {r['fit_time']:.1f} | "
                    f"{', '.join(f'{t:.1f}' for t in r['fit_times'])} | {', '.join(r['loads'])} "
                    f"| {r['passes']} | {r['score']:.4f} | {r['plain']:.4f} "
                    f"({100 * r['left_out']:.2f} %) | {r['npmi']:.4f} | {r['accuracy']:.4f} "
                    f"({r['C']:g}) | {r['held_out']:.6e} | {r['peak']:.0f} |")
    return rows


def target_rows(K, batch, online):
    score_gap = (online["score"] - batch["score"]) / abs(batch["score"])
    plain_gap = (online["plain"] - batch["plain"]) / abs(batch["plain"])
    npmi_gap = online["npmi"] - batch["npmi"]
    points = 100 * (online["accuracy"] - batch["accuracy"])
    speedup = batch["fit_time"] / online["fit_time"]
    return [
        f"| K = {K}: completion, STC.score's rule, within 1 % | {100 * score_gap:+.2f} % | "
        f"{verdict(score_gap >= -0.01)} |",
        f"| K = {K}: completion, plain rule, within 1 % | {100 * plain_gap:+.2f} % | "
        f"{verdict(plain_gap >= -0.01)} |",
        f"| K = {K}: NPMI within 0.01 | {npmi_gap:+.4f} | {verdict(npmi_gap >= -0.01)} |",
        f"| K = {K}: accuracy within 1 point | {points:+.2f} points | "
        f"{verdict(points >= -1.0)} |",
        f"| K = {K}: at most 3 passes | {online['passes']} | {verdict(online['passes'] <= 3)} |",
        f"| K = {K}: fit at least 2x faster | {speedup:.2f}x | {verdict(speedup >= 2.0)} |",
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(parser)
    parser.add_argument("--topics", default="50",
                        help="numbers of topics, comma-separated (default: 50)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="online batch_size (default: STC's default)")
    parser.add_argument("--passes", type=int, default=None,
                        help="online n_passes (default: STC's default)")
    parser.add_argument("--dictionary-steps", type=int, default=None,
                        help="dictionary_max_iter (default: STC's default)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="timed fits of each model, interleaved (batch, online, batch, ...)")
    add_setting_option(parser, "paper", {"paper": DEFAULT_OUTPUT, "defaults": DEFAULTS_OUTPUT})
    parser.add_argument("--verbose", type=int, default=0)
    args = parser.parse_args(argv)
    setting, described = resolve_setting(args)
    start_uptime = uptime_line()
    train, test, summary = load_corpus(args.data)
    rows = [
        "| K | model | fit (s), median | fits (s) | load (1 min) at each fit | passes "
        "| completion, STC.score | completion, plain (left out) | NPMI | STC + LinearSVC "
        "accuracy (C) | held-out objective | fit peak memory (MiB, tracemalloc) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    targets = []
    for K in [int(k) for k in str(args.topics).split(",")]:
        args_k = argparse.Namespace(**dict(vars(args), topics=K))
        batch, online, online_params = compare(args_k, setting, train, test)
        rows += table_rows(K, batch, online)
        targets += target_rows(K, batch, online)
    from stc import STC

    defaults = STC().get_params()
    online_setting = {k: online_params.get(k, defaults[k]) for k in
                      ("batch_size", "n_passes", "learning_decay", "learning_offset",
                       "dictionary_max_iter", "topic_averaging", "init")}
    command = "python benchmarks/bench_online.py " + " ".join(argv or sys.argv[1:])
    setting = (f"K = {args.topics}, random_state=0, " + described
               + ", other parameters at their defaults; online: "
               + ", ".join(f"{k} = {v}" for k, v in online_setting.items()))
    text = online_vs_batch_page("Online vs. batch STC on 20 Newsgroups", setting, args.rounds,
                                command, args.threads, start_uptime, summary, rows, targets)
    publish(text, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
