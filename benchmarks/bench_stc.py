"""Benchmark STC against scikit-learn's batch LDA on the full 20 Newsgroups corpus.

Usage::

    python benchmarks/bench_stc.py [--data DIR] [--topics 20 50 100]
                                   [--threads 2] [--output benchmarks/results_stc.md]
                                   [--append] [--verbose 1] [--skip-lda] [--skip-throughput]

For every number of topics K it fits, on the same train/test matrices
(stop words removed, 11,269 train / 7,505 test documents; the corpus is read
from ``../shared/data/20news`` relative to the repository root unless
``--data`` says otherwise):

* ``STC(n_topics=K, random_state=0, n_jobs=threads, rho=0.01,
  rho_units="absolute", theta_penalty="l2")`` (the paper's setting, the defaults
  when results_stc.md was measured; all other parameters at their defaults): fit time on train, outer iterations ``n_iter_``, time to
  code the test documents, word-code and document-code sparsity on test, and
  the final objective ``objective_[-1]``;
* ``LatentDirichletAllocation(n_components=K, learning_method="batch",
  random_state=0, n_jobs=threads)``: fit time on train, transform time on
  test, and the word-code sparsity of the paper (Sec. 4): for every observed
  (document, word) entry the per-word topic posterior
  ``phi_dnk ~ exp(E[log theta_dk]) exp(E[log beta_kn])``, entries under 1e-3
  counted as zero.

A second table gives the throughput of STC's coding kernel for one K (50 by
default): coordinate updates of word codes per second while coding the test
documents with 1 and with ``threads`` threads (``stc._learning.coding.code_documents``, all
codes started at 1).

The tables (with the command and machine information) are printed and
written to ``--output`` (overwritten). Progress lines go to stderr.
"""
import argparse
import os
import sys
import time

import numpy as np
import scipy.sparse as sp
from scipy.special import psi

from _common import (PAPER_STC, REPO_ROOT, add_data_option, coding_problem, count_matrix,
                     known_entries, known_terms_only, load_corpus, log, shown_path)
from _machine import load1, load_average, machine_info, uptime_line

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results_stc.md")
LDA_ZERO_THRESHOLD = 1e-3


# ---------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------

def run_stc(K, Xtr, Xte, threads, max_iter, verbose):
    from stc import STC

    params = dict(n_topics=K, random_state=0, n_jobs=threads, verbose=verbose, **PAPER_STC)
    if max_iter is not None:
        params["max_iter"] = max_iter
    model = STC(**params)
    log(f"STC K={K}: fit ({Xtr.shape[0]} docs, load {load_average()})")
    start = time.perf_counter()
    model.fit(Xtr)
    fit_time = time.perf_counter() - start
    log(f"STC K={K}: fit {fit_time:.1f}s, {model.n_iter_} outer iterations")

    start = time.perf_counter()
    theta = model.transform(Xte)
    transform_time = time.perf_counter() - start
    log(f"STC K={K}: transform {transform_time:.2f}s")
    # The word codes for the sparsity columns (not timed): the same coding,
    # also keeping the (nnz, K) word codes, which `transform` does not need.
    word_codes = model.word_codes(Xte)
    n_entries = word_codes.shape[0]
    word_sparsity = 1.0 - word_codes.nnz / (n_entries * K) if n_entries else 0.0
    known = known_entries(model, count_matrix(Xte))
    assert known.size == n_entries  # one word-code row per stored entry
    known_nonzeros = np.diff(word_codes.indptr)[known].sum()
    word_sparsity_known = 1.0 - known_nonzeros / (known.sum() * K) if known.any() else 0.0
    doc_sparsity = float(np.mean(theta == 0))

    objective = np.asarray(model.objective_)
    last_decrease = ((objective[-2] - objective[-1]) / abs(objective[-1])
                     if objective.size > 1 else float("nan"))
    result = dict(
        K=K, fit_time=fit_time, n_iter=int(model.n_iter_), max_iter=int(model.max_iter),
        transform_time=transform_time, word_sparsity=word_sparsity,
        word_sparsity_known=word_sparsity_known, unseen_share=float(1.0 - known.mean()),
        doc_sparsity=doc_sparsity, objective=float(objective[-1]),
        objective_first=float(objective[0]), last_decrease=float(last_decrease),
        converged=bool(objective.size > 1 and last_decrease <= model.tol),
        tol=float(model.tol), objective_trace=objective,
    )
    return model, result


def lda_word_code_sparsity(lda, X, gamma, threshold=LDA_ZERO_THRESHOLD, mask=None,
                           chunk=200_000):
    """Share of per-word topic posteriors phi_dn. under ``threshold``.

    phi_dnk is proportional to exp(E[log theta_dk]) * exp(E[log beta_kn]),
    with E[log theta_dk] = psi(gamma_dk) - psi(sum_k gamma_dk) from the
    unnormalised variational Dirichlet parameters ``gamma`` of the documents
    and exp(E[log beta]) = ``lda.exp_dirichlet_component_`` (computed from
    ``components_``) -- the same update sklearn's E-step uses. Averaged over
    the observed (document, word) entries of CSR ``X`` (restricted to
    ``mask`` when given).
    """
    X = sp.csr_matrix(X)
    exp_theta = np.exp(psi(gamma) - psi(gamma.sum(axis=1))[:, np.newaxis])
    exp_beta = np.asarray(lda.exp_dirichlet_component_)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    cols = X.indices
    if mask is not None:
        rows, cols = rows[mask], cols[mask]
    n_topics = exp_beta.shape[0]
    zeros = 0
    for lo in range(0, rows.size, chunk):
        r, c = rows[lo:lo + chunk], cols[lo:lo + chunk]
        phi = exp_theta[r] * exp_beta[:, c].T
        phi /= phi.sum(axis=1, keepdims=True)
        zeros += int(np.count_nonzero(phi < threshold))
    return zeros / (rows.size * n_topics) if rows.size else 0.0


def run_lda(K, Xtr, Xte, threads, known_mask):
    from sklearn.decomposition import LatentDirichletAllocation

    lda = LatentDirichletAllocation(n_components=K, learning_method="batch",
                                    random_state=0, n_jobs=threads)
    log(f"LDA K={K}: fit (load {load_average()})")
    start = time.perf_counter()
    lda.fit(Xtr)
    fit_time = time.perf_counter() - start
    log(f"LDA K={K}: fit {fit_time:.1f}s, {lda.n_iter_} iterations")

    # The timed call returns the unnormalised variational parameters gamma
    # (same E-step as transform(X); transform only divides by the row sums).
    start = time.perf_counter()
    gamma = lda.transform(Xte, normalize=False)
    transform_time = time.perf_counter() - start
    log(f"LDA K={K}: transform {transform_time:.1f}s")

    sparsity = lda_word_code_sparsity(lda, Xte, gamma)
    sparsity_known = (lda_word_code_sparsity(lda, Xte, gamma, mask=known_mask)
                      if known_mask is not None else float("nan"))
    return dict(fit_time=fit_time, n_iter=int(lda.n_iter_), max_iter=int(lda.max_iter),
                transform_time=transform_time, word_sparsity=sparsity,
                word_sparsity_known=sparsity_known)


def kernel_throughput(model, Xte, thread_counts, repeats):
    """Time warm-start coding (``stc._learning.coding.code_documents``) of the test documents from
    all-ones codes; updates = K * sum_d nnz_d * iters_d (plus the block Newton passes: made)."""
    from stc._learning.coding import code_documents, initial_codes

    K = model.components_.shape[0]
    # Terms never seen in training have zero weight in every topic; like
    # STC.transform, code the documents without them.
    X = known_terms_only(model, Xte)
    problem = coding_problem(model)
    doc_lengths = np.diff(X.indptr)  # distinct observed words per document
    rows = []
    for t in thread_counts:
        best = None
        load_before = load1()
        for _ in range(repeats):
            codes, theta = initial_codes(X, K)
            start = time.perf_counter()
            result = code_documents(problem, X, model.components_, codes, theta, n_jobs=t)
            elapsed = time.perf_counter() - start
            if best is None or elapsed < best[0]:
                best = (elapsed, np.asarray(result.n_iter),
                        int(result.word_code_updates(X).sum()))
        elapsed, iters, made = best
        updates = int(np.sum(doc_lengths.astype(np.int64) * iters)) * K
        sweeps = int(np.sum(iters))
        nonempty = doc_lengths > 0
        rows.append(dict(threads=t, time=elapsed, updates=updates, load=load_before,
                         mean_sweeps=sweeps / max(1, np.count_nonzero(doc_lengths)),
                         capped=float(np.mean(iters[nonempty] >= model.inner_max_iter)),
                         ns_per_update_core=elapsed * t * 1e9 / updates,
                         made=made, ns_per_made_core=elapsed * t * 1e9 / made,
                         updates_per_s=updates / elapsed))
        log(f"kernel K={K} threads={t}: {elapsed:.2f}s, {updates:.3e} updates")
    return K, rows


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

def fmt(value, digits=3):
    return f"{value:.{digits}f}"


def render(args, info, data_info, stc_rows, lda_rows, throughput, load_start, load_end):
    lines = ["# STC vs. LDA on 20 Newsgroups", "",
             "Command: `python benchmarks/bench_stc.py " + " ".join(sys.argv[1:]) + "`", ""]
    lines += ["Machine:", ""] + info + [
        f"- `uptime` at start: `{load_start}`",
        f"- `uptime` at end: `{load_end}`",
        "",
        f"Data: {data_info}",
        "",
    ]

    header = ["K", "STC fit (s)", "STC n_iter_", "STC transform (s)",
              "STC word-code sparsity", "STC doc-code sparsity", "STC objective_[-1]"]
    if lda_rows:
        header += ["LDA fit (s)", "LDA transform (s)", "LDA word-code sparsity"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for res in stc_rows:
        n_iter = f"{res['n_iter']}" + ("" if res["converged"] else f" (max_iter={res['max_iter']}, not converged)")
        cells = [str(res["K"]), fmt(res["fit_time"], 1), n_iter,
                 fmt(res["transform_time"], 2), fmt(res["word_sparsity"]),
                 fmt(res["doc_sparsity"]), f"{res['objective']:.6e}"]
        if lda_rows:
            lda = lda_rows.get(res["K"])
            cells += ([fmt(lda["fit_time"], 1), fmt(lda["transform_time"], 2),
                       fmt(lda["word_sparsity"])] if lda else ["-", "-", "-"])
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")

    if throughput is not None:
        K, rows = throughput
        lines += [f"STC coding kernel on the test documents, K={K} "
                  f"(`stc._learning.coding.code_documents` from all-ones codes, best of {args.repeats}):", ""]
        lines.append("| threads | time (s) | word-code updates (sweeps x K x words) "
                     "| coordinate updates made | mean sweeps/doc | docs at inner_max_iter "
                     "| ns per sweep update per core | ns per update made per core "
                     "| speedup vs 1 thread | 1-min load before |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        base = rows[0]["time"]
        for row in rows:
            lines.append(f"| {row['threads']} | {row['time']:.2f} | {row['updates']:.4e} | "
                         f"{row['made']:.4e} | "
                         f"{row['mean_sweeps']:.2f} | {100 * row['capped']:.1f}% | "
                         f"{row['ns_per_update_core']:.2f} | {row['ns_per_made_core']:.2f} | "
                         f"{base / row['time']:.2f} | {row['load']:.2f} |")
        lines.append("")

    lines += ["Notes:", ""]
    lines.append(
        "- STC: `STC(n_topics=K, random_state=0, n_jobs=threads, rho=0.01, "
        "rho_units='absolute', theta_penalty='l2')` (the paper's setting), other parameters at "
        "their defaults" + (f" except max_iter={args.max_iter}" if args.max_iter else "")
        + ". Transform time is one call of `transform(test)` (document codes only; the "
        "word codes for the sparsity columns come from a second, untimed coding).")
    lines.append(
        "- STC word-code sparsity: 1 - nnz/(rows*K) of `word_codes(test)` (rows = observed "
        "(document, word) entries). Entries of terms never seen in training have all-zero "
        "codes and are included; doc-code sparsity: share of zeros in `transform(test)`.")
    if lda_rows:
        lines.append(
            "- LDA: `LatentDirichletAllocation(n_components=K, learning_method='batch', "
            "random_state=0, n_jobs=threads)` (max_iter=10, the scikit-learn default). "
            "Transform time is `transform(test, normalize=False)` (same E-step as "
            "`transform`). Word-code sparsity: phi_dnk ~ exp(psi(gamma_dk) - psi(sum_k "
            "gamma_dk)) * exp_dirichlet_component_[k, n] (gamma: unnormalised doc-topic "
            f"parameters), normalised over k, entries < {LDA_ZERO_THRESHOLD:g} counted as zero, "
            "averaged over observed entries.")
    if throughput is not None:
        lines.append(
            "- Kernel: sweep updates = K * sum_d (distinct words of d) * (sweeps of d); "
            "coordinate updates made counts every word-code update the kernel made "
            "(a sweep passes over a topic's words once per block-Newton step on theta_k, "
            "so more than once in some blocks), as reported by the kernel. The theta "
            "updates and the objective evaluations (one per sweep) are not counted but "
            "are inside the timing. ns per update per core = time * threads / updates. "
            "Terms unseen in training are dropped first, as `transform` does.")
    for res in stc_rows:
        trace = res["objective_trace"]
        lda = lda_rows.get(res["K"]) if lda_rows else None
        parts = [f"- K={res['K']}: STC objective {res['objective_first']:.6e} (iter 1) -> "
                 f"{res['objective']:.6e} (iter {res['n_iter']}); last relative decrease "
                 f"{res['last_decrease']:.2e} (tol {res['tol']:g}); word-code sparsity "
                 f"restricted to terms seen in training ({100 * (1 - res['unseen_share']):.1f}% "
                 f"of test entries): STC {res['word_sparsity_known']:.3f}"]
        if lda:
            parts.append(f", LDA {lda['word_sparsity_known']:.3f}; LDA ran "
                         f"{lda['n_iter']}/{lda['max_iter']} iterations")
        if trace.size > 2:
            marks = sorted({1, 2, 5, 10, 20, 30, 50, 75, 100, trace.size} & set(range(1, trace.size + 1)))
            parts.append("; objective at iter " + ", ".join(
                f"{i}: {trace[i - 1]:.5e}" for i in marks))
        lines.append("".join(parts) + ".")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_option(parser)
    parser.add_argument("--topics", type=int, nargs="+", default=[20, 50, 100],
                        help="numbers of topics K (default: 20 50 100)")
    parser.add_argument("--threads", type=int, default=2,
                        help="threads for STC and jobs for LDA (default: 2)")
    parser.add_argument("--max-iter", type=int, default=None,
                        help="override STC's max_iter (default: STC's default)")
    parser.add_argument("--verbose", type=int, default=0, help="STC verbose level")
    parser.add_argument("--skip-lda", action="store_true", help="do not run LDA")
    parser.add_argument("--throughput-topics", type=int, default=50,
                        help="K of the kernel throughput table (default: 50; fitted "
                             "separately when not among --topics)")
    parser.add_argument("--skip-throughput", action="store_true",
                        help="do not measure the kernel throughput")
    parser.add_argument("--repeats", type=int, default=3,
                        help="kernel timings per thread count, best kept (default: 3)")
    parser.add_argument("--output", default=DEFAULT_OUTPUT,
                        help="markdown file the tables are written to (overwritten)")
    parser.add_argument("--append", action="store_true",
                        help="append to --output instead of overwriting it (to add the "
                             "results of a run over other K)")
    args = parser.parse_args(argv)

    load_start = uptime_line()
    info = machine_info(f"threads used (STC n_jobs, LDA n_jobs): {args.threads}")
    train, test, data_info = load_corpus(args.data)
    Xtr, Xte = train.data, test.data

    stc_rows, lda_rows, models = [], {}, {}
    for K in args.topics:
        model, res = run_stc(K, Xtr, Xte, args.threads, args.max_iter, args.verbose)
        stc_rows.append(res)
        if K == args.throughput_topics:
            models[K] = model
        if not args.skip_lda:
            mask = known_entries(model, count_matrix(Xte))
            lda_rows[K] = run_lda(K, Xtr, Xte, args.threads, mask)
        del model

    throughput = None
    if not args.skip_throughput:
        K = args.throughput_topics
        model = models.get(K)
        if model is None:
            model, _ = run_stc(K, Xtr, Xte, args.threads, args.max_iter, args.verbose)
        counts = [1] if args.threads == 1 else [1, args.threads]
        throughput = kernel_throughput(model, Xte, counts, args.repeats)

    text = render(args, info, data_info, stc_rows, lda_rows, throughput, load_start,
                  uptime_line())
    print(text, end="")
    with open(args.output, "a" if args.append else "w", encoding="utf-8") as handle:
        if args.append and handle.tell() > 0:
            handle.write("\n---\n\n")
        handle.write(text)
    log(f"wrote {shown_path(args.output)}")


if __name__ == "__main__":
    main()
