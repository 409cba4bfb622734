"""Scaling of online STC on corpora sampled from STC's own model (stc.datasets.make_stc_corpus).

Usage::

    nice python benchmarks/bench_scaling.py --documents 100000 --topics 50,100 \\
        [--features 20000] [--threads 1,2] [--workers 2] [--passes 1] [--output ...] \\
        [--medstc 2] [--classes 10]

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

``--medstc T`` adds labelled points (section "Online MedSTC ..." of the report):
``make_stc_corpus(D + 10,000, ..., n_classes=10)`` (labels by a random linear
classifier of the true codes, `--classes`), the first D documents written once to
an SVMlight file in the cache, the last 10,000 held out. The fit,
``MedSTC(learning_method="online", n_jobs=T, <the same model parameters>)
.fit_stream(stc.readers.iter_batches(file, 2048, labels=True), classes=...)``, reads the
file batch by batch (MedSTC's defaults for C, cost and refit_C): the corpus is never
in memory, and the traced peak is that of the whole fit, reading included. Each
pass over the file is timed (``n_passes`` learning passes, then the refit's pass,
which codes every batch with the final topics); accuracy is on the held-out
documents.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO_ROOT, log  # noqa: E402
from _machine import (load_average, machine_section, publish, source_fingerprint,  # noqa: E402
                      uptime_line)

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
                               dashboard_address=":0")
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


TEST_DOCUMENTS = 10_000


def labelled_corpus(n_documents, n_features, n_topics, n_classes):
    """The labelled corpus (cached): (SVMlight file of the D training documents, held-out part).

    The held-out part is a dict: X and y of the last TEST_DOCUMENTS documents, the
    true topics, and the seconds taken to sample and to write the file.
    """
    from sklearn.datasets import dump_svmlight_file

    from stc.datasets import make_stc_corpus

    os.makedirs(CACHE, exist_ok=True)
    stem = os.path.join(CACHE, f"labelled_D{n_documents}_N{n_features}_K{n_topics}"
                               f"_c{n_classes}")
    if os.path.exists(stem + ".npz") and os.path.exists(stem + ".svm"):
        stored = np.load(stem + ".npz")
        held_out = dict(X=sp.csr_matrix((stored["data"], stored["indices"], stored["indptr"]),
                                        shape=tuple(stored["shape"])),
                        y=stored["y"], components=stored["components"],
                        sampling_seconds=float(stored["sampling_seconds"]),
                        writing_seconds=float(stored["writing_seconds"]))
        return stem + ".svm", held_out
    log(f"sampling D={n_documents} + {TEST_DOCUMENTS} labelled, N={n_features} K={n_topics}")
    start = time.perf_counter()
    sample = make_stc_corpus(n_documents + TEST_DOCUMENTS, n_features, n_topics,
                             document_length=DOCUMENT_LENGTH,
                             topics_per_document=TOPICS_PER_DOCUMENT, n_classes=n_classes,
                             random_state=0)
    sampling = time.perf_counter() - start
    log(f"writing {stem}.svm")
    start = time.perf_counter()
    dump_svmlight_file(sample.data[:n_documents], sample.target[:n_documents],
                       stem + ".svm.part", zero_based=True)
    os.replace(stem + ".svm.part", stem + ".svm")  # a file in the cache is a whole one
    writing = time.perf_counter() - start
    X = sample.data[n_documents:]
    np.savez(stem + ".npz", data=X.data, indices=X.indices, indptr=X.indptr,
             shape=np.array(X.shape), y=sample.target[n_documents:],
             components=sample.components, sampling_seconds=sampling,
             writing_seconds=writing)
    return stem + ".svm", dict(X=X, y=sample.target[n_documents:],
                               components=sample.components, sampling_seconds=sampling,
                               writing_seconds=writing)


class TimedPasses:
    """Batches of a re-iterable reader; the wall time of each complete pass over them."""

    def __init__(self, batches):
        self.batches, self.seconds = batches, []

    def __iter__(self):
        start = time.perf_counter()
        yield from self.batches
        self.seconds.append(time.perf_counter() - start)


def fit_medstc_online(path, n_features, n_topics, n_classes, n_jobs, n_passes):
    """Online MedSTC over the file read in batches: (wall, seconds per pass, peak, model)."""
    import stc.readers
    from stc import MedSTC

    reader = TimedPasses(stc.readers.iter_batches(path, BATCH_SIZE, n_features=n_features,
                                             labels=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        start = time.perf_counter()
        model = MedSTC(**online_params(n_topics, n_jobs, n_passes)).fit_stream(
            reader, classes=np.arange(n_classes))
        wall = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    return wall, reader.seconds, peak, model


def measure_medstc(n_documents, n_features, n_topics, n_classes, n_jobs, n_passes,
                   fingerprint):
    """One cached labelled point: online MedSTC reading the corpus in batches."""
    from stc.datasets import topic_recovery

    key = (f"medstc{n_jobs}_D{n_documents}_N{n_features}_K{n_topics}_c{n_classes}"
           f"_p{n_passes}_b{BATCH_SIZE}")
    path = os.path.join(CACHE, f"{key}_{fingerprint}.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    svm_path, held_out = labelled_corpus(n_documents, n_features, n_topics, n_classes)
    load_before = load_average()
    log(f"{key}: fitting from {os.path.basename(svm_path)}")
    wall, passes, peak, model = fit_medstc_online(svm_path, n_features, n_topics, n_classes,
                                                  n_jobs, n_passes)
    start = time.perf_counter()
    accuracy = float(np.mean(model.predict(held_out["X"]) == held_out["y"]))
    predicting = time.perf_counter() - start
    record = dict(key=key, kind="medstc", parallel=n_jobs, documents=n_documents,
                  features=n_features, topics=n_topics, classes=n_classes, passes=n_passes,
                  file_mib=os.path.getsize(svm_path) / 2 ** 20,
                  sampling_seconds=held_out["sampling_seconds"],
                  writing_seconds=held_out["writing_seconds"], wall=wall,
                  pass_seconds=passes, peak_mib=peak / 2 ** 20, accuracy=accuracy,
                  majority=float(np.max(np.bincount(held_out["y"])) / held_out["y"].size),
                  test_documents=int(held_out["y"].size), predict_seconds=predicting,
                  recovery=topic_recovery(model.components_,
                                          held_out["components"]).mean_similarity,
                  load_before=load_before, load_after=load_average(), fingerprint=fingerprint,
                  date=time.strftime("%Y-%m-%dT%H:%M:%S"))
    log(f"{key}: {wall:.1f} s (passes {', '.join(f'{s:.1f}' for s in passes)}), peak "
        f"{record['peak_mib']:.0f} MiB, accuracy {accuracy:.4f}, recovery "
        f"{record['recovery']:.3f}")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    return record


def cached_records(kind_is_medstc):
    records = []
    for name in sorted(os.listdir(CACHE)) if os.path.isdir(CACHE) else []:
        if name.endswith(".json"):
            with open(os.path.join(CACHE, name), encoding="utf-8") as handle:
                record = json.load(handle)
            if (record["kind"] == "medstc") == kind_is_medstc:
                records.append(record)
    return records


def medstc_report():
    """The rows of the labelled MedSTC points."""
    records = sorted(cached_records(True), key=lambda r: (r["topics"], r["documents"],
                                                          r["parallel"], r["date"]))
    rows = ["| D | K | classes | file (MiB) | threads | learning passes | s per learning "
            "pass | s refit pass | fit peak (MiB, tracemalloc) | held-out accuracy "
            "(majority class) | topic recovery (cosine) | load before / after | sources |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        learning = r["pass_seconds"][:r["passes"]]
        refit = r["pass_seconds"][r["passes"]:]
        rows.append(f"| {r['documents']:.0e} | {r['topics']} | {r['classes']} | "
                    f"{r['file_mib']:.0f} | {r['parallel']} | {r['passes']} | "
                    f"{np.mean(learning):.1f} | {refit[0] if refit else float('nan'):.1f} | "
                    f"{r['peak_mib']:.0f} | {r['accuracy']:.4f} ({r['majority']:.3f}) | "
                    f"{r['recovery']:.3f} | {r['load_before'].split()[0]} / "
                    f"{r['load_after'].split()[0]} | {r['fingerprint']} |")
    return rows


MEDSTC_BEGIN = "<!-- bench_scaling.py --medstc: begin -->"
MEDSTC_END = "<!-- bench_scaling.py --medstc: end -->"


def medstc_section(command, start_uptime, n_features, n_classes):
    return "\n".join([
        MEDSTC_BEGIN, "",
        "## Online MedSTC on labelled sampled corpora, read from a file in batches", "",
        f"Corpora: `make_stc_corpus(D + {TEST_DOCUMENTS}, N={n_features}, K, document_length="
        f"{DOCUMENT_LENGTH:g}, topics_per_document={TOPICS_PER_DOCUMENT}, n_classes="
        f"{n_classes}, random_state=0)` (labels: argmax of a random linear classifier of the "
        f"true codes), the first D documents written to an SVMlight file, the last "
        f"{TEST_DOCUMENTS} held out. Fits: `MedSTC(n_topics=K, random_state=0, "
        f"learning_method='online', batch_size={BATCH_SIZE}, n_jobs=threads, n_passes=passes, "
        + ", ".join(f"{k}={v!r}" for k, v in MODEL_PARAMS.items())
        + f").fit_stream(stc.readers.iter_batches(file, {BATCH_SIZE}, n_features=N, labels=True), "
        "classes=...)`, MedSTC's defaults otherwise (C, cost, refit_C): the corpus is read "
        "from the file batch by batch in every pass and is never in memory. The peak is "
        "tracemalloc's over the whole fit (reading and parsing the batches included); a "
        "learning pass codes, learns the topics and both classifiers' stochastic steps; the "
        "refit pass codes every batch with the final topics for the refitted classifier.", "",
        f"Command of the last run: `{command.strip()}`", "",
        *machine_section("threads: per row", start_uptime, last_run=True),
        *medstc_report(), "", MEDSTC_END])


def write_medstc_section(section, output):
    """Put the section in the results file in place of its last version (or at the end)."""
    text = ""
    if os.path.exists(output):
        with open(output, encoding="utf-8") as handle:
            text = handle.read()
    if MEDSTC_BEGIN in text and MEDSTC_END in text:
        head, rest = text.split(MEDSTC_BEGIN, 1)
        text = head + section + rest.split(MEDSTC_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    print(section)
    with open(output, "w", encoding="utf-8") as handle:
        handle.write(text)


def report(fingerprint):
    records = cached_records(False)
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
    parser.add_argument("--medstc", default="",
                        help="threads of labelled online MedSTC points (e.g. 2); only these "
                             "points are measured and only their section of the report "
                             "is rewritten")
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args(argv)
    start_uptime = uptime_line()
    fingerprint = source_fingerprint(os.path.join(REPO_ROOT, "stc"))[0]
    command = "python benchmarks/bench_scaling.py " + " ".join(argv or sys.argv[1:])
    if args.medstc:
        for n_documents in [int(float(d)) for d in args.documents.split(",") if d]:
            for n_topics in [int(k) for k in args.topics.split(",") if k]:
                for threads in [int(t) for t in args.medstc.split(",") if t]:
                    measure_medstc(n_documents, args.features, n_topics, args.classes,
                                   threads, args.passes, fingerprint)
        write_medstc_section(medstc_section(command, start_uptime, args.features,
                                            args.classes), args.output)
        return 0
    for n_documents in [int(float(d)) for d in args.documents.split(",") if d]:
        for n_topics in [int(k) for k in args.topics.split(",") if k]:
            for threads in [int(t) for t in args.threads.split(",") if t]:
                measure("threads", n_documents, args.features, n_topics, threads, args.passes,
                        fingerprint)
            for workers in [int(w) for w in args.workers.split(",") if w]:
                measure("workers", n_documents, args.features, n_topics, workers, args.passes,
                        fingerprint)
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
    previous = published_medstc_section(args.output)
    publish(text, args.output)
    if cached_records(True):  # the labelled points' section, from their cached points
        write_medstc_section(medstc_section(command, start_uptime, args.features,
                                            args.classes), args.output)
    elif previous:  # no cached points here: keep the section as it was published
        write_medstc_section(previous, args.output)
    return 0


def published_medstc_section(output):
    """The labelled points' section of the results file as it stands (None if absent)."""
    if not os.path.exists(output):
        return None
    with open(output, encoding="utf-8") as handle:
        text = handle.read()
    if MEDSTC_BEGIN not in text or MEDSTC_END not in text:
        return None
    return MEDSTC_BEGIN + text.split(MEDSTC_BEGIN, 1)[1].split(MEDSTC_END, 1)[0] + MEDSTC_END


if __name__ == "__main__":
    sys.exit(main())
