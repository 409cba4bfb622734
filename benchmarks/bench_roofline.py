"""How far STC's hot steps are from this machine's limits: a roofline per step.

Usage::

    python benchmarks/bench_roofline.py [--data DIR] [--topics 20 50 100] [--threads 2]
                                        [--max-iter 30] [--output benchmarks/results_roofline.md]

For every K it fits STC at its defaults (``--max-iter`` outer iterations; the
topics and codes of a fitted model are what the steps see in a fit) on the full
20 Newsgroups training set, then times, best of three on ``--threads`` threads:

* **sweep**: one warm coding sweep of the training documents (``stc._learning.coding.code_documents``
  with ``max_iter=1``), the step every outer iteration of a fit makes;
* **transform**: coding the test documents from scratch as ``STC.transform`` does
  (``stc._learning.coding.code_known_terms``);
* **MM step**: one majorisation-minimisation step of the dictionary
  (``stc._learning.dictionary.update_dictionary`` with ``max_iter=1``).

It counts each step's work: word-code updates (coordinate solves, as the kernel
reports them), the share of them that needs the closed form's square root and
divisions (the non-zero codes), and the bytes the step must move through memory
(the sparse word codes read and written, the topic weights gathered per stored
entry). In the same run it measures the machine's bounds: memory
bandwidth (a copy of 512 MiB split over ``--threads`` threads, read + write) and,
on data in the L1 cache at the kernels' own vector level
(``stc._simd._throughput.throughput``), the time per element of square roots, divisions
and multiplication passes, and of a dependent chain of additions, which the
kernels' ordered sums over words pay.

Each bound is the time one resource alone needs for the step's work on
``--threads`` cores; the step's bound is the largest of them (a lower bound: the
resources can overlap, never add up to less). The ratio measured / bound says how
far the step is from the hardware; the table names the resource that bounds it.
"""
import argparse
import os
import sys
import threading
import time
import warnings

import numpy as np

from _common import REPO_ROOT, add_data_option, coding_problem, count_matrix, load_corpus, log
from _machine import machine_info, uptime_line

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_roofline.md")
# Elementwise passes over a topic's word arrays per word-code update (in L1): the Poisson
# kernel (reads y, b, the rest of the means, writes codes and curvatures), the coupling
# sums (codes, curvatures), the means without topic k and back: five, each costing at
# least what an L1-resident multiplication pass costs per element.
L1_PASSES_PER_UPDATE = 5


def best_of(function, rounds=3):
    best, value = np.inf, None
    for _ in range(rounds):
        start = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - start)
    return best, value


# ---------------------------------------------------------------------------
# The machine's bounds, measured in this run
# ---------------------------------------------------------------------------

def copy_bandwidth(threads, total_bytes=512 * 2 ** 20):
    """Bytes per second read + written by ``threads`` threads copying arrays (numpy, no GIL)."""
    n = total_bytes // 8 // threads
    sources = [np.ones(n) for _ in range(threads)]
    targets = [np.zeros(n) for _ in range(threads)]

    def copy_all():
        workers = [threading.Thread(target=np.copyto, args=(t, s))
                   for t, s in zip(targets, sources)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    seconds, _ = best_of(copy_all, rounds=5)
    return 2 * n * 8 * threads / seconds


def machine_bounds(threads):
    """Bandwidth of ``threads`` copying; per-element times of the kernels' own vector level."""
    from stc._simd import _throughput

    bounds = {"bandwidth": copy_bandwidth(threads)}
    bounds.update({op: _throughput.throughput(op) for op in ("sqrt", "div", "mul", "chain")})
    return bounds


# ---------------------------------------------------------------------------
# The steps and their work
# ---------------------------------------------------------------------------

def step_bounds(work, bounds, threads):
    """Time each resource alone needs for ``work`` on ``threads`` cores."""
    updates, solved = work["updates"], work["solved"]
    return {
        "memory": work["bytes"] / bounds["bandwidth"],
        # every update divides once (the coupling's curvature term); a non-zero code
        # also takes the closed form's square root and two divisions
        "divider": (updates * bounds["div"] + solved * (bounds["sqrt"] + 2 * bounds["div"]))
        / threads,
        "L1 passes": updates * L1_PASSES_PER_UPDATE * bounds["mul"] / threads,
        # the two ordered sums over a topic's words (slope, curvature) run side by side
        "ordered sums": updates * bounds["chain"] / threads,
    }


def measure(K, train, test, threads, max_iter):
    from stc import STC
    from stc._core._word_codes import SparseWordCodes
    from stc._learning.coding import code_documents, code_known_terms, transposed
    from stc._learning.dictionary import CorpusLayout, update_dictionary

    Xtr, Xte = count_matrix(train.data), count_matrix(test.data)
    log(f"K={K}: fitting STC (max_iter={max_iter})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fit stopped at max_iter warns
        model = STC(n_topics=K, random_state=0, n_jobs=threads, max_iter=max_iter).fit(Xtr)
    problem = coding_problem(model)
    beta = model.components_
    beta_t = transposed(beta)
    _, codes, _ = code_known_terms(problem, Xtr, beta, keep_word_codes=True, n_jobs=threads,
                                   beta_t=beta_t)
    theta = np.zeros((Xtr.shape[0], K))
    code_documents(problem, Xtr, beta, codes, theta, n_jobs=threads, beta_t=beta_t)
    one_sweep = problem.with_max_iter(1)
    word_bytes = Xtr.nnz * K * 8
    # as a fit stores them: the non-zero codes, 8 bytes of value and 4 of topic each
    sparse = SparseWordCodes.from_dense(Xtr.indptr, codes, threads)
    sparse_bytes = sparse.count_nonzero() * 12 + Xtr.nnz * 16
    rows = {}

    def sweep():
        c, t = sparse.copy(), theta.copy()
        start = time.perf_counter()
        result = code_documents(one_sweep, Xtr, beta, c, t, n_jobs=threads, with_start=False,
                                beta_t=beta_t)
        return time.perf_counter() - start, result, c

    timings = [sweep() for _ in range(3)]
    seconds, result, swept = min(timings, key=lambda r: r[0])
    updates = float(result.word_code_updates(Xtr).sum())
    rows["sweep"] = (seconds, {
        "updates": updates, "solved": updates * (1.0 - swept.zero_fraction()),
        # sparse word codes read and written, topic weights gathered for every stored entry
        "bytes": 2 * sparse_bytes + word_bytes})

    seconds, (_, _, result) = best_of(lambda: code_known_terms(
        problem, Xte, beta, n_jobs=threads, beta_t=beta_t))
    updates = float(result.passes @ np.diff(Xte.indptr))
    test_codes = code_known_terms(problem, Xte, beta, keep_word_codes=True, n_jobs=threads,
                                  beta_t=beta_t)[1]
    rows["transform"] = (seconds, {
        "updates": updates, "solved": updates * float(np.mean(test_codes > 0)),
        "bytes": Xte.nnz * K * 8})

    layout = CorpusLayout(Xtr)
    means = result_means = code_documents(problem.with_max_iter(0), Xtr, beta, codes.copy(),
                                          theta.copy(), n_jobs=threads, beta_t=beta_t).means
    del result_means
    seconds, _ = best_of(lambda: update_dictionary(problem.loss, layout, sparse, beta,
                                                   max_iter=1, tol=0.0, n_jobs=threads,
                                                   means=means))
    rows["MM step"] = (seconds, {
        # the sparse codes gathered term by term (read and written), then one pass over
        # them for the first sums and one for the step's loss and sums; a dozen passes
        # over (K, N) arrays (beta, sums, candidates)
        "updates": 0.0, "solved": 0.0,
        "bytes": 4 * sparse_bytes + 12 * beta.size * 8,
        "entries": 2.0 * sparse.count_nonzero()})
    return rows, sparse.zero_fraction(), Xtr.nnz


def render(args, bounds, results, command):
    lines = ["# Roofline of STC's hot steps", "",
             "The current tables, with the command and machine that made them; earlier runs "
             "are in git history.", "",
             f"Command: `{command}`", "", "Machine:", ""]
    lines += machine_info(f"threads used (n_jobs, bandwidth copy): {args.threads}")
    lines += [f"- `uptime` at end: `{uptime_line()}`", "",
              "## The machine's bounds (measured in this run)", "",
              "| bound | value |", "|---|---|",
              f"| memory bandwidth, {args.threads} threads copying (read + write) | "
              f"{bounds['bandwidth'] / 1e9:.1f} GB/s |",
              f"| square root at the kernels' vector level, L1 data, one thread | "
              f"{bounds['sqrt'] * 1e9:.2f} ns per element |",
              f"| division | {bounds['div'] * 1e9:.2f} ns per element |",
              f"| multiplication pass (two loads, one store) | {bounds['mul'] * 1e9:.2f} ns per "
              f"element |",
              f"| dependent addition chain (an ordered sum) | {bounds['chain'] * 1e9:.2f} ns per "
              f"element |", "",
              "## The steps", "",
              "| K | step | measured (ms) | word-code updates | non-zero share | bytes moved (MB) "
              "| memory bound (ms) | divider bound (ms) | L1-pass bound (ms) | ordered-sum bound "
              "(ms) | bound (ms) | measured / bound | bounded by |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for K, (rows, zeros, nnz) in results.items():
        for name, (seconds, work) in rows.items():
            parts = step_bounds(work, bounds, args.threads)
            if name == "MM step":  # no solves: a multiplication and a division per entry
                parts["L1 passes"] = work["entries"] * bounds["mul"] / args.threads
                parts["divider"] = work["entries"] * bounds["div"] / args.threads
                parts["ordered sums"] = 0.0
            limit = max(parts, key=parts.get)
            share = work["solved"] / work["updates"] if work["updates"] else float("nan")
            lines.append(
                f"| {K} | {name} | {seconds * 1e3:.0f} | {work['updates']:.3g} | "
                f"{share:.3f} | {work['bytes'] / 1e6:.0f} | {parts['memory'] * 1e3:.0f} | "
                f"{parts['divider'] * 1e3:.0f} | {parts['L1 passes'] * 1e3:.0f} | "
                f"{parts['ordered sums'] * 1e3:.0f} | {parts[limit] * 1e3:.0f} | "
                f"{seconds / parts[limit]:.1f} | {limit} |")
    lines += ["", "Notes:", "",
              f"- STC at its defaults, fitted for {args.max_iter} outer iterations; the sweep "
              "starts from the fitted codes. Word-code updates as the kernel counts them "
              "(a block Newton step on theta_k passes over the topic's words again).",
              "- Bytes: the sweep reads and writes the sparse word codes (12 bytes per non-zero "
              "code, 16 per stored entry) and gathers K topic weights per stored entry; "
              "transform gathers the weights; the MM step gathers the sparse codes term by "
              "term, reads them twice and passes over (K, N) arrays about twelve times.",
              "- Each bound is one resource alone; the step's bound is the largest. "
              f"L1 passes: {L1_PASSES_PER_UPDATE} per update at the multiplication pass's rate. "
              "The per-element times are the kernels' own vector loops "
              "(`stc._simd._throughput.throughput`) at the level in use.", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_option(parser)
    parser.add_argument("--topics", type=int, nargs="+", default=[20, 50, 100])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-iter", type=int, default=30)
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    command = "python benchmarks/bench_roofline.py " + " ".join(argv or sys.argv[1:])
    train, test, _ = load_corpus(args.data)
    log("measuring the machine's bounds")
    bounds = machine_bounds(args.threads)
    results = {K: measure(K, train, test, args.threads, args.max_iter) for K in args.topics}
    text = render(args, bounds, results, command.strip())
    print(text)
    with open(args.output, "w", encoding="utf-8") as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
