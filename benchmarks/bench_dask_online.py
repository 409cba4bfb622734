"""Online STC on a Dask LocalCluster: per-worker throughput against the in-process kernel.

Usage::

    python benchmarks/bench_dask_online.py [--data DIR] [--topics 50] [--batch-size B]
        [--workers 1,2] [--repeats 2] [--setting defaults|paper] [--processes]
        [--output benchmarks/results_dask_online.md]

One online pass (``n_passes=1``) over the 20 Newsgroups training split, at
STC's defaults (or with ``--setting paper`` the paper's ``rho=0.01,
rho_units="absolute", theta_penalty="l2"``) and the online defaults
otherwise, K topics, random_state=0:

* in process: ``STC(learning_method="online", n_jobs=1).fit(X)``, with the
  time spent in the kernels (coding and MM sums: `stc._learning.stochastic_dictionary.code_batch` and
  `stc._learning.stochastic_dictionary.CodedBatch.responsibilities_at`) summed as well;
* on a LocalCluster of W workers with one thread each: ``STC(..., n_jobs=1).fit``
  of the corpus as a dask array of W CSR row blocks (one per worker), through
  `stc._learning.learners.dask_online.DaskOnlineTraining` so that the time each worker spends in
  the same kernels (its busy time) can be read as well.

Throughput is documents per second per worker, two ways:

* wall: D / (wall time of the pass x W), against D / wall time in process.
  This includes the client's dictionary step, during which the workers wait
  (the next round's codes need its topics), and Dask's round trips;
* kernel time: D / (the slowest worker's busy time x W), against D / the
  in-process time in the kernels: what a worker's kernels do per second,
  against the same work in process.

The settings are interleaved (in process, W = 1, W = 2, then again) and each
is reported as its median over ``--repeats`` runs, so that a change in the
machine's load hits all of them alike; the load average is printed for
every run.
"""
import argparse
import os
import sys
import time
import warnings
from dataclasses import replace

import numpy as np

from _common import (REPO_ROOT, add_data_option, add_setting_option, load_corpus, log,
                     resolve_setting)
from _machine import load_average, machine_section, publish, uptime_line

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_dask_online.md")


def dask_rows(X, n_blocks):
    import dask.array as da

    bounds = np.linspace(0, X.shape[0], n_blocks + 1).astype(int)
    return da.concatenate([da.from_array(X[a:b], chunks=(b - a, X.shape[1]), asarray=False)
                           for a, b in zip(bounds[:-1], bounds[1:])], axis=0)


def in_process(X, params):
    """One in-process fit: (wall seconds, model, seconds inside the kernels).

    The kernel seconds are the time spent in `stc._learning.stochastic_dictionary.code_batch` (coding
    and the batch's MM sums) and `stc._learning.stochastic_dictionary.CodedBatch.responsibilities_at`
    (the sums of the further MM steps): the work a Dask worker does, whose
    busy time `DaskOnlineTraining` measures around the same two calls.
    """
    from unittest import mock

    import stc._learning.stochastic_dictionary
    from stc import STC

    kernel = [0.0]

    def timed(function):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                kernel[0] += time.perf_counter() - start
        return wrapper

    start = time.perf_counter()
    with warnings.catch_warnings(), \
            mock.patch.object(stc._learning.stochastic_dictionary, "code_batch",
                              timed(stc._learning.stochastic_dictionary.code_batch)), \
            mock.patch.object(stc._learning.stochastic_dictionary.CodedBatch, "responsibilities_at",
                              timed(stc._learning.stochastic_dictionary.CodedBatch.responsibilities_at)):
        warnings.simplefilter("ignore")
        model = STC(**params).fit(X)
    return time.perf_counter() - start, model, kernel[0]


def on_cluster(X, params, n_workers, processes):
    from distributed import Client, LocalCluster

    from stc import STC
    from stc._learning.learners import LearningSteps
    from stc._learning.learners.dask_online import DaskOnlineTraining

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=processes,
                               dashboard_address=":0")
        client = Client(cluster)
        try:
            model = STC(**params)
            options = model._learning_options()  # batch_size="auto" resolved
            start = time.perf_counter()
            training = DaskOnlineTraining(
                client, dask_rows(X, n_workers), model._checked_loss(), model._use_count_scale,
                options.n_topics, options.random_state, options.n_jobs,
                batch_size=options.batch_size, learning_offset=options.learning_offset,
                learning_decay=options.learning_decay, max_steps=options.dictionary_max_iter,
                init=options.init, steps=LearningSteps())
            setup = time.perf_counter() - start
            start = time.perf_counter()
            training.run(replace(options, n_passes=1, topic_averaging=0.0, verbose=0))
            wall = time.perf_counter() - start
        finally:
            client.close()
            cluster.close()
    return setup, wall, training


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(parser)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="online batch_size (default: STC's default)")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--processes", action="store_true",
                        help="workers in separate processes (LocalCluster(processes=True))")
    add_setting_option(parser, "defaults", {"paper": DEFAULT_OUTPUT, "defaults": DEFAULT_OUTPUT})
    args = parser.parse_args(argv)
    setting, described = resolve_setting(args)
    start_uptime = uptime_line()
    train, test, summary = load_corpus(args.data)
    del test
    X = train.data
    n_docs = X.shape[0]
    params = dict(n_topics=args.topics, random_state=0, n_jobs=1, learning_method="online",
                  n_passes=1, **setting)
    if args.batch_size is not None:
        params["batch_size"] = args.batch_size
    workers = [int(w) for w in args.workers.split(",")]
    runs = {"in process": [], **{w: [] for w in workers}}
    for repeat in range(args.repeats):
        load = load_average()
        wall, model, kernel = in_process(X, params)
        log(f"repeat {repeat + 1}: in process {wall:.1f} s, kernels {kernel:.1f} s "
            f"(load {load})")
        runs["in process"].append(dict(wall=wall, busy=kernel, setup=0.0, load=load,
                                       objective=float(model.objective_[0])))
        for w in workers:
            load = load_average()
            setup, wall, training = on_cluster(X, params, w, args.processes)
            log(f"repeat {repeat + 1}: {w} workers {wall:.1f} s, setup {setup:.1f} s, busy "
                f"{training.busy_seconds.round(1).tolist()} s (load {load})")
            runs[w].append(dict(wall=wall, busy=float(training.busy_seconds.max()), setup=setup,
                                load=load, objective=None))
    reference_rate = n_docs / np.median([r["wall"] for r in runs["in process"]])
    kernel_rate = n_docs / np.median([r["busy"] for r in runs["in process"]])
    rows = ["| setting | setup (s) | pass wall (s) | time in the kernels (s): in process, "
            "or the slowest worker's busy time | docs/s per worker (wall) | vs in process "
            "| docs/s per worker (kernel time) | vs in process | load averages (1 min) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for key, records in runs.items():
        n_workers = 1 if key == "in process" else key
        wall = float(np.median([r["wall"] for r in records]))
        busy = float(np.median([r["busy"] for r in records]))
        setup = float(np.median([r["setup"] for r in records]))
        rate, busy_rate = n_docs / (wall * n_workers), n_docs / (busy * n_workers)
        loads = ", ".join(r["load"].split()[0] for r in records)
        name = "in process, 1 thread" if key == "in process" else f"{key} worker(s) x 1 thread"
        rows.append(f"| {name} | {setup:.1f} | {wall:.1f} | {busy:.1f} | {rate:.0f} | "
                    f"{rate / reference_rate:.2f} | {busy_rate:.0f} | "
                    f"{busy_rate / kernel_rate:.2f} | {loads} |")
    command = "python benchmarks/bench_dask_online.py " + " ".join(argv or sys.argv[1:])
    from stc import STC

    batch_size = params.get("batch_size", f"default ({STC().batch_size})")
    text = "\n".join([
        "# Online STC on a Dask LocalCluster: per-worker throughput", "",
        f"One online pass over the 20 Newsgroups training split ({n_docs} documents), "
        f"K = {args.topics}, {described}, batch_size {batch_size}, one thread per worker, "
        "workers "
        f"{'in separate processes' if args.processes else 'as threads of one process'}; "
        f"median of {args.repeats} interleaved runs per setting. The machine is a shared "
        "2-core VM.", "",
        f"Command: `{command.strip()}`", "",
        *machine_section("threads per worker: 1", start_uptime),
        f"Data: {summary}", "",
        *rows, "",
    ])
    publish(text, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
