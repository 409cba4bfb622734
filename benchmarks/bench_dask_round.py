"""The cost of one round of online STC on Dask, measured here and projected to more workers.

Usage::

    python benchmarks/bench_dask_round.py [--data DIR] [--topics 100] [--batch-size 2048]
        [--workers 1,2] [--repeats 2] [--sampled-documents 20480] [--threads]
        [--per-worker 2048,8192] [--bandwidth 1e9] [--output benchmarks/results_dask_round.md]

A round of `stc._learning.learners.dask_online.DaskOnlineTraining` is ``dictionary_max_iter``
round trips (`DaskOnlineTraining.trip`): the first sends the topic columns of
the round's terms (once; the workers copy them to each other), each worker
codes its slice, the slices' two MM sums are added up on the workers in a
tree and the client receives the round's (and the next slices' terms); each
further MM step of the client's dictionary step sends the new columns and
receives one sum. The client takes
`stc._learning.stochastic_dictionary.stochastic_dictionary_step` over the
round's terms.

Measured, one online pass with K topics and the given batch size, on a
LocalCluster of W workers with one thread each (separate processes unless
``--threads``), on two corpora: the 20 Newsgroups training split at STC's
defaults, and a corpus sampled by ``stc.datasets.make_stc_corpus`` (N =
20,000, bench_scaling.py's sampling and model weights). Nothing in the
library is changed: the benchmark wraps the training object's round, its
round trips and the dictionary step, and splits each round's wall time into

* coding: per round trip, the slowest worker's time inside the kernels (the
  busy seconds the workers report), summed over the round trips;
* overhead: per round trip, its wall time minus that (scheduling, latency,
  serialisation, the copies and merges between the workers, the idle wait
  for the slowest worker);
* client step: the dictionary step's time minus its round trips (thread CPU
  time alongside);
* client other: the rest of the round on the client (the round's terms and
  their topic columns, the new terms);

and counts the bytes of the arrays the client sends and receives. The first
round (it also draws the starting topics) is left out; the tables give the
median over the other rounds, then over runs.

Projected: a round on an English-Wikipedia-sized corpus (3.5M documents,
100,000 terms, 192 stored entries per document, K = 100) at 8, 32 and 128
workers, from the coding cost per entry x topic measured here, the client's
step timed here at that size (N = 100,000, K = 100, over the round's terms),
the client's per-element cost of taking columns timed here, the bytes of the
round's arrays (8 bytes x K x the round's terms per array), a network
bandwidth per link (``--bandwidth``) and the measured overhead per task. A
batch's number of distinct terms comes from a Zipf model of document
frequencies fitted to 20 Newsgroups' batches (see `union_model`); the rounds
before this one and with a term-sharded step are projected beside it.
"""
import argparse
import os
import pickle
import sys
import time
import warnings
from dataclasses import replace
from unittest import mock

import numpy as np

from _common import REPO_ROOT, add_data_option, load_corpus, log
from _machine import load_average, machine_section, publish, uptime_line

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_dask_round.md")

# bench_scaling.py's sampling and model weights
DOCUMENT_LENGTH, TOPICS_PER_DOCUMENT, SAMPLED_FEATURES = 100, 3, 20000
SAMPLED_PARAMS = dict(lambda_=TOPICS_PER_DOCUMENT / DOCUMENT_LENGTH, gamma=10.0, rho=0.01,
                      rho_units="absolute", theta_penalty="l1")

# English Wikipedia as gensim's corpus has it (results_scaling.md): 192 stored entries
# per document over a 100,000-term vocabulary
WIKI_DOCS, WIKI_TERMS, WIKI_ENTRIES, WIKI_TOPICS = 3_500_000, 100_000, 192, 100
# Newton iterations per MM step of the term-sharded step (restructuring 2): warm-started
# from the previous batch's multipliers (`stochastic_dictionary.simplex_minimiser`)
NEWTON_ROUNDS = 5


def dask_rows(X, n_blocks):
    import dask.array as da

    bounds = np.linspace(0, X.shape[0], n_blocks + 1).astype(int)
    return da.concatenate([da.from_array(X[a:b], chunks=(b - a, X.shape[1]), asarray=False)
                           for a, b in zip(bounds[:-1], bounds[1:])], axis=0)


def nbytes(value):
    return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def payload_bytes(value):
    """Bytes of the arrays in ``value`` (tuples, lists, named tuples, sparse matrices);
    other objects by their pickled size. Counted without pickling the arrays: the meter
    runs inside the timed round."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (tuple, list)):
        return sum(payload_bytes(v) for v in value)
    if hasattr(value, "indptr"):
        return value.data.nbytes + value.indices.nbytes + value.indptr.nbytes
    if value is None:
        return 0
    return nbytes(value)


class RoundMeter:
    """Wraps a DaskOnlineTraining's round, round trips and dictionary step; keeps the times."""

    def __init__(self, training):
        self.training = training
        self.rounds = []
        self.current = None
        self._trip = training.trip
        self._round = training._round
        training.trip = self.trip
        training._round = self.round

    def round(self, selected, following):
        self.current = dict(trips=[], step=0.0, step_cpu=0.0, step_trips=0.0,
                            n_docs=sum(s[0] for s in selected),
                            terms=[int(np.size(s[1])) for s in selected])
        start = time.perf_counter()
        result = self._round(selected, following)
        self.current["wall"] = time.perf_counter() - start
        self.rounds.append(self.current)
        self.current = None
        return result

    def trip(self, function, terms, columns, args):
        start = time.perf_counter()
        total = self._trip(function, terms, columns, args)
        wall = time.perf_counter() - start
        if self.current is not None:
            busy = [a.busy if hasattr(a, "busy") else a for a in total.answers]
            self.current["trips"].append(dict(
                name=function.__name__, wall=wall, busy=busy,
                # the client's traffic: the shared columns out once, the round's sums back
                sent=payload_bytes((terms, columns)) + sum(payload_bytes(a) for a in args),
                returned=payload_bytes((total.terms, total.plain, total.responsibilities)),
                union=int(np.size(terms))))
            if self.current.get("in_step"):
                self.current["step_trips"] += wall
        return total

    def step(self, function):
        def wrapper(*args, **kwargs):
            self.current["in_step"] = True
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.current["step"] += time.perf_counter() - start
                self.current["step_cpu"] += time.thread_time() - cpu
                self.current["in_step"] = False
        return wrapper

    def breakdown(self):
        """Per round (the first left out): a dict of seconds and bytes."""
        rows = []
        for r in self.rounds[1:]:
            coding = sum(max(t["busy"]) for t in r["trips"])
            trips = sum(t["wall"] for t in r["trips"])
            step = r["step"] - r["step_trips"]
            rows.append(dict(
                wall=r["wall"], coding=coding, overhead=trips - coding, step=step,
                # the step's CPU time includes its round trips' waiting on the client thread
                step_cpu=r["step_cpu"], other=r["wall"] - trips - step,
                busy_sum=sum(sum(t["busy"]) for t in r["trips"]),
                sent=sum(t["sent"] for t in r["trips"]),
                returned=sum(t["returned"] for t in r["trips"]),
                n_trips=len(r["trips"]), n_docs=r["n_docs"], terms=max(r["terms"]),
                union=r["trips"][0]["union"]))
        return rows


def one_run(X, params, n_workers, processes):
    from distributed import Client, LocalCluster

    import stc._learning.learners.dask_online as dask_online
    from stc import STC
    from stc._learning.learners import LearningSteps

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=processes,
                               dashboard_address=":0")
        client = Client(cluster)
        try:
            model = STC(**params)
            training = dask_online.DaskOnlineTraining(
                client, dask_rows(X, n_workers), model._checked_loss(),
                model._use_count_scale, model.n_topics, model.random_state, model.n_jobs,
                batch_size=model.batch_size, learning_offset=model.learning_offset,
                learning_decay=model.learning_decay, max_steps=model.dictionary_max_iter,
                init=model.init, steps=LearningSteps())
            meter = RoundMeter(training)
            start = time.perf_counter()
            with mock.patch.object(dask_online, "stochastic_dictionary_step",
                                   meter.step(dask_online.stochastic_dictionary_step)):
                training.run(replace(model._learning_options(), n_passes=1,
                                     topic_averaging=0.0, verbose=0))
            wall = time.perf_counter() - start
            latency = noop_trips(training.parts)
        finally:
            client.close()
            cluster.close()
    return wall, meter.breakdown(), latency


def _noop(partition):
    return None


def noop_trips(parts, trips=20, tasks=200):
    """(seconds per round trip of one empty task per worker, seconds per empty task of a
    batch of ``tasks``): Dask's own cost, without data or work."""
    walls = []
    for _ in range(trips):
        start = time.perf_counter()
        parts.run(_noop)
        walls.append(time.perf_counter() - start)
    start = time.perf_counter()
    parts.gather([parts.submit(i % len(parts), _noop) for i in range(tasks)])
    return float(np.median(walls)), (time.perf_counter() - start) / tasks


def median_of(rows, key):
    return float(np.median([r[key] for r in rows]))


# ---- the projection's inputs measured here

def union_model(document_frequencies, n_terms, entries_per_document, exponent):
    """Expected distinct terms of a batch of B documents, a function of B.

    A term of rank n (from 1) is in a document with probability
    q_n = min(1, c n^-exponent), c such that the q_n add up to the stored entries
    per document; documents independent: E[terms of B documents] = sum_n 1 - (1 - q_n)^B.
    """
    del document_frequencies
    ranks = np.arange(1, n_terms + 1, dtype=float) ** -exponent
    low, high = 1e-9, 1e9
    for _ in range(200):  # c by bisection
        c = np.sqrt(low * high)
        if np.minimum(1.0, c * ranks).sum() > entries_per_document:
            high = c
        else:
            low = c
    q = np.minimum(1.0, c * ranks)
    return lambda B: float(np.sum(-np.expm1(B * np.log1p(-np.minimum(q, 1 - 1e-15)))))


def fit_exponent(X, batch_sizes, rng):
    """The Zipf exponent whose `union_model` best matches X's batches' distinct terms."""
    entries = X.nnz / X.shape[0]
    observed = []
    for B in batch_sizes:
        rows = rng.choice(X.shape[0], size=min(B, X.shape[0]), replace=False)
        observed.append(np.unique(X[rows].indices).size)
    best = None
    for exponent in np.arange(0.5, 1.51, 0.02):
        model = union_model(None, X.shape[1], entries, exponent)
        error = sum((np.log(model(B)) - np.log(o)) ** 2 for B, o in zip(batch_sizes, observed))
        if best is None or error < best[0]:
            best = (error, exponent, [model(B) for B in batch_sizes])
    return best[1], observed, best[2]


def time_client_step(n_terms, n_topics, union, max_steps, repeats=3):
    """CPU seconds of the client's dictionary step over ``union`` of ``n_terms`` terms."""
    from types import SimpleNamespace

    from stc._learning.stochastic_dictionary import stochastic_dictionary_step

    rng = np.random.default_rng(0)
    beta = rng.random((n_topics, n_terms))
    beta /= beta.sum(axis=1, keepdims=True)
    terms = np.sort(rng.choice(n_terms, size=union, replace=False))

    def sums():
        return SimpleNamespace(plain=rng.random((n_topics, union)) * 5,
                               responsibilities=rng.random((n_topics, union)) * 5)

    later = rng.random((n_topics, union)) * 5
    statistics = stochastic_dictionary_step(beta, None, 0.5, 2048, terms, sums(),
                                            lambda b, t: later, max_steps=max_steps, n_jobs=1)
    times = []
    for _ in range(repeats):
        s = sums()
        start = time.thread_time()
        stochastic_dictionary_step(beta, statistics, 0.1, 2048, terms, s, lambda b, t: later,
                                   max_steps=max_steps, n_jobs=1)
        times.append(time.thread_time() - start)
    return float(np.median(times))


def time_client_columns(n_topics, union, slice_terms, repeats=5):
    """CPU seconds per element and array of taking a slice's topic columns or adding its sums
    into the round's (K x the slice's terms each)."""
    rng = np.random.default_rng(1)
    components = rng.random((n_topics, WIKI_TERMS))
    where = np.sort(rng.choice(union, size=slice_terms, replace=False))
    terms = np.sort(rng.choice(WIKI_TERMS, size=slice_terms, replace=False))
    total = np.zeros((n_topics, union))
    columns = rng.random((n_topics, slice_terms))
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        np.take(components, terms, axis=1)
        total[:, where] += columns
        times.append(time.thread_time() - start)
    return float(np.median(times)) / (2 * n_topics * slice_terms)


def project(measured, args, exponent, max_steps, w_high):
    """The projection's table rows and the numbers quoted under it."""
    K = WIKI_TOPICS
    union_of = union_model(None, WIKI_TERMS, WIKI_ENTRIES, exponent)
    pair_seconds = measured["pair_seconds"]
    per_task = measured["task_overhead"]
    latency = measured["trip_latency"]
    element = measured["column_element"]
    step_cache = {}
    rows = []
    scenarios = [("fixed", args.batch_size, lambda W: args.batch_size)]
    scenarios += [("grows", size, lambda W, size=size: size * W) for size in args.per_worker]
    for scenario, size, batch_of in scenarios:
        for W in (8, 32, 128):
            B = batch_of(W)
            union = int(round(union_of(B)))
            slice_terms = union_of(B / W)
            coding = pair_seconds * (B / W) * WIKI_ENTRIES * K
            if union not in step_cache:
                step_cache[union] = time_client_step(WIKI_TERMS, K, union, max_steps)
            step = step_cache[union]
            levels = np.ceil(np.log2(W))
            union_bytes = 8 * K * union
            # the round as it runs (tree-summed): per trip the client takes the round's
            # columns once and sends them once (the workers copy them down a tree of
            # log2 W levels); the slices' sums come up the tree, the round's to the client:
            # max_steps arrays down, two sums then one per further step up
            arrays = 2 * max_steps + 1
            columns = element * K * union * max_steps
            transfer = union_bytes * arrays / args.bandwidth
            tree = levels * (union_bytes * arrays / args.bandwidth + 2 * max_steps * latency)
            # per trip a task per worker and W - 1 merges
            overhead = max_steps * (latency + per_task * max(2 * W - 1 - w_high, 0))
            serial = step + columns + transfer + tree + overhead
            total = coding + serial
            # before: the client took each worker's columns and added each worker's sums
            sent = 8 * K * slice_terms * max_steps
            back = 8 * K * slice_terms * (1 + max_steps) + 16 * slice_terms
            before_serial = (step + element * W * K * slice_terms * (2 * max_steps + 1)
                             + W * (sent + back) / args.bandwidth
                             + max_steps * (latency + per_task * max(W - w_high, 0)))
            # next restructuring: the step sharded by terms over the workers: each sends
            # its slice's sums to the terms' owners (in parallel, over its own link),
            # the owners take the step over their terms; per MM step the topics'
            # normalisers (K numbers) are summed over the workers, NEWTON_ROUNDS times
            exchange = 8 * K * slice_terms * arrays / args.bandwidth
            sharded_serial = (max_steps * (NEWTON_ROUNDS + 1) * levels * latency
                              + max_steps * (latency + per_task * max(W - w_high, 0)))
            sharded_parallel = coding + exchange + step / W
            rows.append(dict(scenario=scenario, size=size, W=W, B=B, union=union,
                             slice_terms=slice_terms, coding=coding, step=step,
                             columns=columns, transfer=transfer, tree=tree, overhead=overhead,
                             total=total, serial_share=serial / total,
                             pass_hours=total * WIKI_DOCS / B / 3600,
                             before_share=before_serial / (coding + before_serial),
                             sharded_share=sharded_serial / (sharded_parallel + sharded_serial),
                             sharded_round=sharded_parallel + sharded_serial))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_option(parser)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sampled-documents", type=int, default=20480,
                        help="documents of the sampled corpus (0: leave it out)")
    parser.add_argument("--threads", action="store_true",
                        help="workers as threads of the client's process (default: processes)")
    parser.add_argument("--per-worker", default="2048",
                        help="documents per worker and round of the projection's growing "
                             "batches, comma-separated (the share falls as they grow)")
    parser.add_argument("--bandwidth", type=float, default=1e9,
                        help="the client's network bandwidth in bytes/s, for the projection")
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    args.per_worker = [int(size) for size in args.per_worker.split(",")]
    start_uptime = uptime_line()
    processes = not args.threads
    workers = [int(w) for w in args.workers.split(",")]
    train, _, summary = load_corpus(args.data)
    corpora = [("20 Newsgroups train", train.data, dict())]
    if args.sampled_documents:
        from stc.datasets import make_stc_corpus

        log(f"sampling D={args.sampled_documents} N={SAMPLED_FEATURES} K={args.topics}")
        sample = make_stc_corpus(args.sampled_documents, SAMPLED_FEATURES, args.topics,
                                 document_length=DOCUMENT_LENGTH,
                                 topics_per_document=TOPICS_PER_DOCUMENT, random_state=0)
        corpora.append((f"sampled, D={args.sampled_documents} N={SAMPLED_FEATURES}",
                        sample.data, SAMPLED_PARAMS))
    from stc import STC

    max_steps = STC().dictionary_max_iter
    runs = {}
    for repeat in range(args.repeats):
        for name, X, setting in corpora:
            params = dict(n_topics=args.topics, random_state=0, n_jobs=1,
                          learning_method="online", n_passes=1, batch_size=args.batch_size,
                          **setting)
            for W in workers:
                load = load_average()
                wall, rows, (trip, task) = one_run(X, params, W, processes)
                log(f"repeat {repeat + 1}: {name}, {W} worker(s): pass {wall:.1f} s, "
                    f"round {median_of(rows, 'wall'):.3f} s (load {load})")
                runs.setdefault((name, W), []).append(dict(rows=rows, load=load, wall=wall,
                                                           trip=trip, task=task))
    header = ["| corpus | workers | round (s) | coding: slowest worker (s) | all workers' "
              "busy (s) | overhead (s) | client step (s), its CPU (s) | client other (s) | "
              "serial share | MB from / to the client | terms of the round / of a slice | ns "
              "per entry x topic | load (1 min) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    table = []
    measured = {}
    for (name, W), records in runs.items():
        def med(key):
            return float(np.median([median_of(r["rows"], key) for r in records]))
        X = dict((n, x) for n, x, _ in corpora)[name]
        entries = X.nnz / X.shape[0] * med("n_docs")
        pair_ns = med("busy_sum") / (entries * args.topics) * 1e9
        serial = (med("overhead") + med("step") + med("other")) / med("wall")
        loads = ", ".join(r["load"].split()[0] for r in records)
        table.append(f"| {name} | {W} | {med('wall'):.3f} | {med('coding'):.3f} | "
                     f"{med('busy_sum'):.3f} | {med('overhead'):.3f} | {med('step'):.3f}, "
                     f"{med('step_cpu'):.3f} | {med('other'):.3f} | {serial:.0%} | "
                     f"{med('sent') / 1e6:.2f} / {med('returned') / 1e6:.2f} | "
                     f"{med('union'):.0f} / {med('terms'):.0f} | {pair_ns:.1f} | {loads} |")
        measured[(name, W)] = dict(pair_ns=pair_ns, trip=float(np.median([r["trip"] for r in records])),
                                   task=float(np.median([r["task"] for r in records])))
    trips = ", ".join(f"{W} worker(s) {measured[(corpora[-1][0], W)]['trip'] * 1e3:.1f} ms"
                      for W in workers)
    tasks = ", ".join(f"{W} worker(s) {measured[(corpora[-1][0], W)]['task'] * 1e3:.2f} ms"
                      for W in workers)
    noop = [f"Empty tasks on the same clusters (Dask's own cost, the sampled corpus's runs, "
            f"median): one per worker, {trips} per round trip; 200 submitted together, "
            f"{tasks} per task."]
    # the projection's inputs
    sampled_name = corpora[-1][0]
    pair_seconds = measured[(sampled_name, min(workers))]["pair_ns"] * 1e-9
    w_high = max(workers)
    latency = measured[(sampled_name, w_high)]["trip"]
    per_task = measured[(sampled_name, w_high)]["task"]
    log("fitting the batches' distinct terms")
    exponent, observed, fitted = fit_exponent(train.data, [64, 256, 1024, 2048],
                                              np.random.default_rng(0))
    element = time_client_columns(WIKI_TOPICS, 60000, 20000)
    log("timing the client's step at N = 100,000")
    proj = project(dict(pair_seconds=pair_seconds, task_overhead=per_task,
                        trip_latency=latency, column_element=element),
                   args, exponent, max_steps, w_high)
    prow = ["| batch per round | workers | batch | terms of the round | terms of a slice | "
            "coding, per worker (s) | client step (s) | client columns (s) | client "
            "transfers (s) | tree (s) | overhead (s) | round (s) | serial share | pass (h) | "
            "serial share, before: the client adds | serial share: term-sharded step | round: "
            "term-sharded (s) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in proj:
        label = (f"fixed, {p['size']}" if p["scenario"] == "fixed"
                 else f"{p['size']} per worker")
        prow.append(f"| {label} | {p['W']} | {p['B']} | {p['union']} | {p['slice_terms']:.0f} "
                    f"| {p['coding']:.3f} | {p['step']:.3f} | {p['columns']:.3f} | "
                    f"{p['transfer']:.3f} | {p['tree']:.3f} | {p['overhead']:.3f} | "
                    f"{p['total']:.3f} | {p['serial_share']:.0%} | {p['pass_hours']:.2f} | "
                    f"{p['before_share']:.0%} | {p['sharded_share']:.0%} | "
                    f"{p['sharded_round']:.3f} |")
    mode = "separate processes" if processes else "threads of the client's process"
    command = "python benchmarks/bench_dask_round.py " + " ".join(argv or sys.argv[1:])
    text = "\n".join([
        "# The cost of a round of online STC on Dask, measured and projected", "",
        f"One online pass, K = {args.topics}, batch_size {args.batch_size}, "
        f"dictionary_max_iter {max_steps} (so {max_steps} round trips per round), on a "
        f"LocalCluster of W workers of one thread each, workers in {mode}; each setting run "
        f"{args.repeats} times, interleaved. 20 Newsgroups at STC's defaults; the sampled "
        "corpus (`make_stc_corpus(D, 20000, K, document_length=100, topics_per_document=3, "
        "random_state=0)`) with bench_scaling.py's model weights (`lambda_=0.03, gamma=10, "
        "rho=0.01, rho_units='absolute', theta_penalty='l1'`). Per round, the median over "
        "the rounds after the first, then over the runs. The machine is a shared 2-core VM.",
        "",
        f"Command: `{command.strip()}`", "",
        *machine_section(f"threads per worker: 1; workers in {mode}", start_uptime),
        f"Data: {summary}", "",
        "## Measured, per round", "",
        *header, *table, "",
        *noop, "",
        "Columns: coding is the sum over the round's trips of the slowest worker's time in "
        "the kernels; overhead is the trips' wall time minus that (Dask's scheduling and "
        "latency, (de)serialisation, the copies of the columns and the merges of the sums "
        "between the workers, and the wait for the slowest worker); the client step is the "
        "dictionary step without its round trips (the thread CPU time includes the trips' "
        "waiting); client other is the rest of the round on the client (the round's terms, "
        "taking their topic columns, the new terms). Serial share: (overhead + client) / "
        "round. MB: the arrays the client sends (the round's terms and their topic columns, "
        "once a trip, and the tasks' arguments) and receives (the round's sums, added up on "
        "the workers), summed over the round's trips. ns per entry x topic: all workers' "
        "busy time over the round's stored entries x K.", "",
        "## Projected: English Wikipedia, K = 100", "",
        f"3.5M documents, 100,000 terms, 192 stored entries per document. Inputs: the "
        f"kernels {pair_seconds * 1e9:.1f} ns per entry x topic (the sampled corpus's "
        f"{min(workers)}-worker busy time above, wall time on the loaded VM, all "
        f"{max_steps} MM sums included; Wikipedia has about three tokens per entry, the "
        f"sampled corpus one); CPU times (thread_time, one thread) timed here: the client's "
        f"dictionary step at N = 100,000, K = 100 over the round's terms ({max_steps} MM "
        f"steps); taking columns or adding sums {element * 1e9:.2f} ns per element and "
        f"array. Dask's own cost, measured by empty tasks on the {w_high}-worker cluster: "
        f"{latency * 1e3:.1f} ms per round trip, plus {per_task * 1e3:.2f} ms per task beyond "
        f"{w_high} (tasks submitted together). Bandwidth {args.bandwidth / 1e9:g} GB/s a "
        f"link. Distinct terms of a batch of B documents: a Zipf model of document "
        f"frequencies, P(term of rank n in a document) proportional to n^-{exponent:.2f} "
        f"(the exponent fitted to 20 Newsgroups' random batches of 64 / 256 / 1024 / 2048 "
        f"documents: {', '.join(map(str, observed))} terms observed, "
        f"{', '.join(f'{f:.0f}' for f in fitted)} modelled), 192 per document.", "",
        f"The round as it runs: per trip the client takes the round's topic columns once and "
        f"sends them once, the workers copy them down a tree of log2 W levels, the slices' "
        f"sums come up the tree (a task per worker and W - 1 merges a trip) and the client "
        f"receives the round's: {max_steps} arrays of 8 bytes x K x the round's terms down "
        f"and {max_steps + 1} up, through the client's link once and through each level of "
        f"the tree (the tree column, upper bound: every level moves arrays the size of the "
        f"round's terms). Serial: the client's step, columns and transfers, the tree and the "
        f"overhead; the coding is the only part that shrinks with workers. For comparison, "
        f"two other rounds: before this one, the client took each worker's columns and "
        f"added each worker's sums (W times arrays of a slice's terms through its link), "
        f"and a term-sharded step (each worker owns a range of terms, receives the slices' "
        f"sums over them from the other workers over its own link, and takes the dictionary "
        f"step over them; per MM step {NEWTON_ROUNDS} Newton iterations each sum the K "
        f"topics' normalisers over the workers, a tree of log2 W latencies).", "",
        *prow, "",
    ])
    publish(text, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
