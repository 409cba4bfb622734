"""Online MedSTC against batch MedSTC on the full 20 Newsgroups corpus, in one run.

Usage::

    python benchmarks/bench_medstc_online.py [--data DIR] [--topics 20,50,100] [--threads 2]
        [--batch-size B] [--passes P] [--rounds 2]
        [--output benchmarks/results_medstc_online.md]

For each K of ``--topics``, both models are ``MedSTC(n_topics=K, random_state=0,
n_jobs=threads)`` with the other
parameters at their defaults; the online one adds ``learning_method="online"`` (and
``batch_size`` / ``n_passes`` when given). Measured:

* test accuracy: ``score`` on the test split (test documents coded without labels);
* fit time: ``--rounds`` untraced fits of each model, interleaved (batch, online,
  batch, ...) with the load average at each, and their median; the speed ratio
  compares the medians (also in the process's CPU time over all threads, which a
  busy machine disturbs less);
* peak memory of ``fit``: ``tracemalloc`` peak above the start, in a further fit of
  each model (numpy reports its buffers to tracemalloc). The batch model's peak is
  reached in its first iterations (word codes, layout, dictionary-step buffers and
  the shifted-mean step's saved codes), so its traced fit stops after 2 iterations
  without the refit (which codes without keeping word codes); the online one's traced
  fit makes 1 pass and its refit pass (every batch allocates alike).

Targets (issue 22, item 2, at K = 50; issue 47 at K = 20, 50 and 100): test accuracy
within 1 point of batch MedSTC, fit at least 3x faster, peak memory at most a quarter
of batch's.
"""
import argparse
import os
import sys
import time
import tracemalloc
import warnings

import numpy as np

from _common import REPO_ROOT, add_data_option, load_corpus, log
from _machine import load_average, online_vs_batch_page, publish, uptime_line, verdict

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_medstc_online.md")


def fitted(params, train):
    from stc import MedSTC

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fit that stops at max_iter still counts
        return MedSTC(**params).fit(train.data, train.target)


def traced_peak_mb(params, train):
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fitted(params, train)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (peak - base) / 2 ** 20


def compare(K, args, train, test):
    """Batch and online MedSTC at K topics: (table rows, target rows, the online setting)."""
    from stc import MedSTC

    common = dict(n_topics=K, random_state=0, n_jobs=args.threads)
    online_params = dict(common, learning_method="online")
    if args.batch_size is not None:
        online_params["batch_size"] = args.batch_size
    if args.passes is not None:
        online_params["n_passes"] = args.passes
    runs = {"batch": dict(params=common, times=[], cpu=[], loads=[], model=None,
                          trace=dict(max_iter=2, refit_C=None)),
            "online": dict(params=online_params, times=[], cpu=[], loads=[], model=None,
                           trace=dict(n_passes=1))}
    # Timed fits interleaved, so that a change in the machine's load hits both alike.
    for round_number in range(1, args.rounds + 1):
        for name, run in runs.items():
            log(f"K = {K}, {name}: fit {round_number}/{args.rounds}")
            run["loads"].append(load_average().split()[0])
            start, cpu = time.perf_counter(), time.process_time()
            model = fitted(run["params"], train)
            run["times"].append(time.perf_counter() - start)
            run["cpu"].append(time.process_time() - cpu)
            run["model"] = run["model"] or model
            log(f"K = {K}, {name}: {run['times'][-1]:.1f} s (load {run['loads'][-1]})")
    for name, run in runs.items():
        run["accuracy"] = run["model"].score(test.data, test.target)
        log(f"K = {K}, {name}: test accuracy {run['accuracy']:.4f}; traced fit for peak memory")
        run["peak"] = traced_peak_mb(dict(run["params"], **run["trace"]), train)
        run["time"] = float(np.median(run["times"]))
        run["cpu_time"] = float(np.median(run["cpu"]))
    batch, online = runs["batch"], runs["online"]
    defaults = MedSTC().get_params()
    online_setting = {k: online_params.get(k, defaults[k]) for k in
                      ("batch_size", "n_passes", "learning_decay", "learning_offset",
                       "dictionary_max_iter", "topic_averaging", "sweeps_per_iteration")}
    points = 100 * (online["accuracy"] - batch["accuracy"])
    speedup = batch["time"] / online["time"]
    memory_ratio = online["peak"] / batch["peak"]
    cpu_speedup = batch["cpu_time"] / online["cpu_time"]
    rows = [f"| {K} | {name} | {run['time']:.1f} | "
            f"{', '.join(f'{t:.1f}' for t in run['times'])} | {run['cpu_time']:.1f} | "
            f"{', '.join(run['loads'])} | {run['accuracy']:.4f} | "
            f"{run['model'].refit_C_:.4g} | {run['peak']:.0f} |" for name, run in runs.items()]
    targets = [
        f"| K = {K}: test accuracy within 1 point | {points:+.2f} points | "
        f"{verdict(points >= -1.0)} |",
        f"| K = {K}: fit at least 3x faster (wall clock) | {speedup:.2f}x | "
        f"{verdict(speedup >= 3.0)} |",
        f"| K = {K}: (the same in CPU time, less sensitive to the load) | {cpu_speedup:.2f}x | "
        f"{verdict(cpu_speedup >= 3.0)} |",
        f"| K = {K}: peak memory at most 1/4 | {memory_ratio:.3f} | "
        f"{verdict(memory_ratio <= 0.25)} |",
    ]
    return rows, targets, online_setting, defaults


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(parser)
    parser.add_argument("--topics", default="50",
                        help="numbers of topics, comma-separated (e.g. 20,50,100)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--passes", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=2,
                        help="timed fits of each model, interleaved (batch, online, batch, ...)")
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    topics = [int(k) for k in args.topics.split(",")]

    start_uptime = uptime_line()
    train, test, summary = load_corpus(args.data)
    rows = ["| K | model | fit (s), median | fits (s) | fit CPU time (s, all threads), median "
            "| load (1 min) at each fit | test accuracy "
            "| refit_C_ | fit peak memory (MiB, tracemalloc) |",
            "|---|---|---|---|---|---|---|---|---|"]
    targets = []
    for K in topics:
        k_rows, k_targets, online_setting, defaults = compare(K, args, train, test)
        rows += k_rows
        targets += k_targets
    command = "python benchmarks/bench_medstc_online.py " + " ".join(argv or sys.argv[1:])
    setting = (f"K = {', '.join(map(str, topics))}, random_state=0, MedSTC's defaults "
               f"otherwise (batch: max_iter = {defaults['max_iter']}, tol = "
               f"{defaults['tol']:g}, refit on the label-free training codes); "
               "online: " + ", ".join(f"{k} = {v}" for k, v in online_setting.items()))
    text = online_vs_batch_page("Online vs. batch MedSTC on 20 Newsgroups", setting,
                                args.rounds, command, args.threads, start_uptime, summary,
                                rows, targets)
    publish(text, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
