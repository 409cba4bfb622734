"""Scaling of online STC on corpora sampled from STC's own model (stc.datasets.make_stc_corpus).

Usage::

    nice python benchmarks/bench_scaling.py --documents 100000 --topics 50,100 \\
        [--features 20000] [--threads 1,2] [--workers 2] [--passes 1] [--output ...]

Each measured point is cached as JSON under ``benchmarks/.cache/scaling`` (keyed
by the setting and the sources' fingerprint) and the report
(``benchmarks/results_scaling.md``) lists every cached point with its sources, so
that the grid can be measured in several runs of a few minutes each. The
generated corpora are cached there too (``.npz``).

The corpus: ``make_stc_corpus(D, N, K, document_length=100, topics_per_document=3,
random_state=0)`` (true topics from a Dirichlet(0.1), K true topics = K fitted).
A point is an online fit of ``n_passes`` passes, ``STC(n_topics=K, random_state=0,
learning_method="online", batch_size=2048, lambda_=0.03, gamma=10, rho=0.01,
rho_units="absolute", theta_penalty="l1", learning_offset=1.0)``: the weights are
the sampling model's own (so the fit is the MAP estimate of the model the corpus
came from; with the estimator's defaults of the time, the paper's 20 Newsgroups
setting, the topics were not recovered: cosine 0.16 at D = 1e5, K = 50), tau0 is
the online default of the time, and batches of 2048 documents keep the per-batch
K x N work small beside the coding:

* in process with ``n_jobs`` threads: wall time per pass and the peak of
  ``tracemalloc`` during the same fit (numpy reports its buffers to
  tracemalloc; an online fit allocates a few dozen arrays per batch, so the
  tracing costs little time);
* on a LocalCluster of W one-thread workers (threads of one process), the
  corpus as W CSR row blocks: wall time per pass (the partitions' setup is
  reported apart);
* topic recovery: mean cosine similarity of the learned topics to the true
  ones under the best one-to-one matching (`stc.datasets.topic_recovery`).
"""
import argparse
import json
import os
import sys
import time
import tracemalloc
import warnings

import numpy as np
import scipy.sparse as sp

from _common import REPO_ROOT, log
from _machine import load_average, machine_section, publish, source_fingerprint, uptime_line

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_scaling.md")
CACHE = os.path.join(REPO_ROOT, "benchmarks", ".cache", "scaling")
DOCUMENT_LENGTH = 100.0
TOPICS_PER_DOCUMENT = 3


def corpus(n_documents, n_features, n_topics):
    """The sampled corpus (cached): (CSR counts, true topics, seconds to sample or None)."""
    from stc.datasets import make_stc_corpus

    os.makedirs(CACHE, exist_ok=True)
    path = os.path.join(CACHE, f"corpus_D{n_documents}_N{n_features}_K{n_topics}.npz")
    if os.path.exists(path):
        stored = np.load(path)
        X = sp.csr_matrix((stored["data"], stored["indices"], stored["indptr"]),
                          shape=tuple(stored["shape"]))
        return X, stored["components"], float(stored["seconds"])
    log(f"sampling D={n_documents} N={n_features} K={n_topics}")
    start = time.perf_counter()
    sample = make_stc_corpus(n_documents, n_features, n_topics,
                             document_length=DOCUMENT_LENGTH,
                             topics_per_document=TOPICS_PER_DOCUMENT, random_state=0)
    seconds = time.perf_counter() - start
    X = sample.data
    np.savez(path, data=X.data, indices=X.indices, indptr=X.indptr, shape=np.array(X.shape),
             components=sample.components, seconds=seconds)
    return X, sample.components, seconds


# The sampling model's own weights (make_stc_corpus's gamma and rho, and the l1 prior
# on theta with lambda = topics per document / document length): the fit is then the
# MAP estimate of the model the corpus came from. rho is the sampler's weight as it is
# (absolute units).
MODEL_PARAMS = dict(lambda_=TOPICS_PER_DOCUMENT / DOCUMENT_LENGTH, gamma=10.0, rho=0.01,
                    rho_units="absolute", theta_penalty="l1",
                    # the online default when the cached points were measured
                    learning_offset=1.0)
BATCH_SIZE = 2048


def online_params(n_topics, n_jobs, n_passes):
    return dict(n_topics=n_topics, random_state=0, learning_method="online", n_jobs=n_jobs,
                n_passes=n_passes, batch_size=BATCH_SIZE, **MODEL_PARAMS)


def fit_in_process(X, n_topics, n_jobs, n_passes):
    from stc import STC

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        start = time.perf_counter()
        model = STC(**online_params(n_topics, n_jobs, n_passes)).fit(X)
        wall = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    return wall, peak, model.components_


def fit_on_cluster(X, n_topics, n_workers, n_passes):
    import dask.array as da
    from distributed import Client, LocalCluster

    from stc import STC

    bounds = np.linspace(0, X.shape[0], n_workers + 1).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=False,
                               dashboard_address=None)
        client = Client(cluster)
        try:
            blocks = [da.from_array(X[a:b], chunks=(b - a, X.shape[1]), asarray=False)
                      for a, b in zip(bounds[:-1], bounds[1:])]
            start = time.perf_counter()
            model = STC(**online_params(n_topics, 1, n_passes)).fit(da.concatenate(blocks))
            wall = time.perf_counter() - start
        finally:
            client.close()
            cluster.close()
    return wall, model.components_


def measure(kind, n_documents, n_features, n_topics, parallel, n_passes, fingerprint):
    """One cached point: kind 'threads' (in process, n_jobs=parallel) or 'workers'."""
    from stc.datasets import topic_recovery

    os.makedirs(CACHE, exist_ok=True)
    key = (f"{kind}{parallel}_D{n_documents}_N{n_features}_K{n_topics}_p{n_passes}"
           f"_b{BATCH_SIZE}")
    path = os.path.join(CACHE, f"{key}_{fingerprint}.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
        if record["fingerprint"] == fingerprint:
            return record
    X, true_topics, sampling = corpus(n_documents, n_features, n_topics)
    load_before = load_average()
    log(f"{key}: fitting ({X.nnz} stored entries)")
    if kind == "threads":
        wall, peak, topics = fit_in_process(X, n_topics, parallel, n_passes)
    else:
        wall, topics = fit_on_cluster(X, n_topics, parallel, n_passes)
        peak = None
    record = dict(key=key, kind=kind, parallel=parallel, documents=n_documents,
                  features=n_features, topics=n_topics, passes=n_passes, nnz=int(X.nnz),
                  tokens=float(X.sum()), sampling_seconds=sampling, wall=wall,
                  seconds_per_pass=wall / n_passes, peak_mib=None if peak is None else
                  peak / 2 ** 20, recovery=topic_recovery(topics, true_topics).mean_similarity,
                  load_before=load_before, load_after=load_average(), fingerprint=fingerprint,
                  date=time.strftime("%Y-%m-%dT%H:%M:%S"))
    log(f"{key}: {wall:.1f} s, recovery {record['recovery']:.3f}")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    return record


def report(fingerprint):
    records = []
    for name in sorted(os.listdir(CACHE)):
        if name.endswith(".json"):
            with open(os.path.join(CACHE, name), encoding="utf-8") as handle:
                record = json.load(handle)
            records.append(record)
    records.sort(key=lambda r: (r["topics"], r["documents"], r["kind"], r["parallel"],
                                r["passes"], r["date"]))
    rows = ["| D | K | nnz | tokens | run on | passes | s per pass | ns per entry x topic "
            "| fit peak (MiB, tracemalloc) | topic recovery (cosine) | load before / after "
            "| sources |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        where = (f"in process, {r['parallel']} thread(s)" if r["kind"] == "threads"
                 else f"{r['parallel']} dask worker(s) x 1 thread")
        per_entry = 1e9 * r["seconds_per_pass"] / (r["nnz"] * r["topics"])
        peak = "" if r["peak_mib"] is None else f"{r['peak_mib']:.0f}"
        rows.append(f"| {r['documents']:.0e} | {r['topics']} | {r['nnz']:.3g} | "
                    f"{r['tokens']:.3g} | {where} | {r['passes']} | "
                    f"{r['seconds_per_pass']:.1f} | {per_entry:.1f} | {peak} | "
                    f"{r['recovery']:.3f} | {r['load_before'].split()[0]} / "
                    f"{r['load_after'].split()[0]} | {r['fingerprint']} |")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", default="100000")
    parser.add_argument("--features", type=int, default=20000)
    parser.add_argument("--topics", default="50,100")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--workers", default="2")
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    start_uptime = uptime_line()
    fingerprint = source_fingerprint(os.path.join(REPO_ROOT, "stc"))[0]
    for n_documents in [int(float(d)) for d in args.documents.split(",") if d]:
        for n_topics in [int(k) for k in args.topics.split(",") if k]:
            for threads in [int(t) for t in args.threads.split(",") if t]:
                measure("threads", n_documents, args.features, n_topics, threads, args.passes,
                        fingerprint)
            for workers in [int(w) for w in args.workers.split(",") if w]:
                measure("workers", n_documents, args.features, n_topics, workers, args.passes,
                        fingerprint)
    command = "python benchmarks/bench_scaling.py " + " ".join(argv or sys.argv[1:])
    text = "\n".join([
        "# Scaling of online STC on corpora sampled from STC's model", "",
        f"Corpora: `make_stc_corpus(D, N={args.features}, K, document_length="
        f"{DOCUMENT_LENGTH:g}, topics_per_document={TOPICS_PER_DOCUMENT}, random_state=0)`; "
        f"fits: `STC(n_topics=K, random_state=0, learning_method='online', batch_size="
        f"{BATCH_SIZE}, " + ", ".join(f"{k}={v!r}" for k, v in MODEL_PARAMS.items())
        + ")`, online defaults otherwise. Every measured point is listed with the sources "
        "it ran on (points come from several runs: the load columns say how busy the shared "
        "2-core VM was).", "",
        f"Command of the last run: `{command.strip()}`", "",
        *machine_section("threads: per row", start_uptime, last_run=True),
        *report(fingerprint), "",
    ])
    publish(text, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
