"""Speed of user-defined losses in the coding step (STC.transform).

Fits one dictionary with the built-in Poisson loss on the embedded corpus
(``stc.datasets.load_newsgroups("train")``), then codes the same documents
with that fixed dictionary under each candidate loss, switched with
``set_params(loss=...)``:

* ``poisson``                 built-in compiled Poisson, closed-form coordinate update;
* ``poisson_newton``          the same Poisson loss compiled in a user module
                              (docs/examples/compiled_loss), generic nogil Newton solver;
* ``pseudo_huber_compiled``   compiled pseudo-Huber (user module, generic Newton);
* ``pseudo_huber_word_by_word``  the same loss with a coordinate solver of its own
                              (``PseudoHuberBlockLoss``), through the default block
                              (a method call per word);
* ``pseudo_huber_block``      the same solver through the loss's own block method
                              (``_solve_block``: one call per topic, the solver inlined),
                              which must give the word-by-word row's theta bit for bit;
* ``pseudo_huber``            pure-Python pseudo-Huber (docs/examples/python_loss.py),
                              numpy coding sweep with the vectorised Newton solver.

The two Poisson rows use the paper's setting (lambda_=0.1, rho=0.01 in absolute
units, the l2 penalty on theta; the package defaults when docs/custom_losses.md's
table was measured), and so does the fit that gives the dictionary; the two
pseudo-Huber rows use the settings of the docs example (lambda_=1e-4, rho=1e-5,
the same units and theta penalty), so each pair does identical work apart from
the implementation.
Wall time and CPU time (all threads) are reported, best of ``--repeats``
runs for compiled losses (one run for the pure-Python loss unless
``--python-repeats`` says otherwise), with the mean number of coding sweeps
per document (from an untimed call of ``stc._learning.coding.code_new_documents`` that codes as
``transform`` does and is checked to give the same theta) and the largest
difference of theta within each pair.

Usage:  python benchmarks/bench_custom_loss.py [--n-docs N] [--topics K] [--repeats R]
"""
import argparse
import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import stc
import stc.datasets
import stc.losses
from _common import REPO_ROOT, code_as_transform
from _machine import cpu_model, load_average

EXAMPLES = Path(REPO_ROOT) / "docs" / "examples"


def build_compiled_example(build_dir):
    """Copy docs/examples/compiled_loss to build_dir, build it in place, import it."""
    target = Path(build_dir) / "compiled_loss"
    shutil.copytree(EXAMPLES / "compiled_loss", target,
                    ignore=shutil.ignore_patterns("build", "*.so", "*.pyd", "*.c"))
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=target,
                   check=True, stdout=subprocess.DEVNULL)
    sys.path.insert(0, str(target))
    import pseudo_huber  # noqa: E402  (the module just built)

    return pseudo_huber


def time_transform(model, X, repeats):
    """Best wall and CPU time of model.transform(X) over ``repeats`` runs, theta, sweeps."""
    best_wall = best_cpu = np.inf
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        theta = model.transform(X)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    # The sweeps per document of the same coding, counted outside the timing.
    theta_counted, result = code_as_transform(model, X)
    sweeps = result.n_iter
    if not np.array_equal(theta, theta_counted):
        raise RuntimeError("the counted coding differs from transform's: the benchmark no "
                           "longer codes as transform does")
    return best_wall, best_cpu, theta, float(np.mean(sweeps))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-docs", type=int, default=None,
                        help="code only the first N training documents (default: all)")
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--fit-iter", type=int, default=10,
                        help="outer iterations of the Poisson fit that gives the dictionary")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python-repeats", type=int, default=1)
    args = parser.parse_args(argv)

    print(f"date: {datetime.datetime.now().isoformat(timespec='minutes')}")
    print(f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs, {platform.system()} "
          f"{platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}")
    print(f"OpenMP: {stc.openmp_enabled()}; load average before: {load_average()}")

    with tempfile.TemporaryDirectory() as tmp:
        compiled = build_compiled_example(tmp)
        sys.path.insert(0, str(EXAMPLES))
        import python_loss  # noqa: E402, F401  (imported for its effect: registers "pseudo_huber")

        stc.losses.register("poisson_newton", compiled.PoissonNewtonLoss)
        stc.losses.register("pseudo_huber_compiled", compiled.PseudoHuberLoss)
        stc.losses.register("pseudo_huber_word_by_word", compiled.PseudoHuberWordByWordLoss)
        stc.losses.register("pseudo_huber_block", compiled.PseudoHuberBlockLoss)

        train = stc.datasets.load_newsgroups("train")
        X = train.data if args.n_docs is None else train.data[:args.n_docs]
        print(f"data: {X.shape[0]} documents, {X.shape[1]} terms, {X.nnz} non-zeros; "
              f"{args.topics} topics")

        start = time.perf_counter()
        paper = dict(rho_units="absolute", theta_penalty="l2")
        model = stc.STC(n_topics=args.topics, loss="poisson", max_iter=args.fit_iter,
                        random_state=0, rho=0.01, **paper).fit(X)
        print(f"dictionary: built-in poisson fit, {model.n_iter_} iterations, "
              f"{time.perf_counter() - start:.1f} s")
        poisson_params = dict(lambda_=0.1, rho=0.01, **paper)
        huber_params = dict(lambda_=1e-4, rho=1e-5, **paper)
        candidates = [
            # (label, registered name, params, threads, repeats, reference label)
            ("poisson (built-in, closed form)", "poisson", poisson_params, 1, args.repeats, None),
            ("poisson_newton (compiled, Newton)", "poisson_newton", poisson_params, 1,
             args.repeats, "poisson (built-in, closed form)"),
            ("pseudo_huber_compiled (compiled, Newton)", "pseudo_huber_compiled", huber_params, 1,
             args.repeats, None),
            ("pseudo_huber (pure Python, numpy)", "pseudo_huber", huber_params, 1,
             args.python_repeats, "pseudo_huber_compiled (compiled, Newton)"),
            ("pseudo_huber_word_by_word (own solver)", "pseudo_huber_word_by_word",
             huber_params, 1, args.repeats, "pseudo_huber_compiled (compiled, Newton)"),
            ("pseudo_huber_block (own solver, block)", "pseudo_huber_block", huber_params, 1,
             args.repeats, "pseudo_huber_word_by_word (own solver)"),
        ]
        threads = os.cpu_count() or 1
        if threads > 1:
            candidates += [
                (f"poisson (built-in), {threads} threads", "poisson", poisson_params, -1,
                 args.repeats, "poisson (built-in, closed form)"),
                (f"poisson_newton, {threads} threads", "poisson_newton", poisson_params, -1,
                 args.repeats, "poisson_newton (compiled, Newton)"),
                (f"pseudo_huber_compiled, {threads} threads", "pseudo_huber_compiled",
                 huber_params, -1, args.repeats, "pseudo_huber_compiled (compiled, Newton)"),
            ]

        results = {}
        for label, name, params, n_jobs, repeats, reference in candidates:
            model.set_params(loss=name, n_jobs=n_jobs, **params)
            wall, cpu, theta, sweeps = time_transform(model, X, repeats)
            results[label] = (wall, cpu, theta, sweeps)
            print(f"  timed {label}: {wall:.2f} s", flush=True)
        block, word_by_word = (results[label][2] for label in (
            "pseudo_huber_block (own solver, block)", "pseudo_huber_word_by_word (own solver)"))
        if block.tobytes() != word_by_word.tobytes():
            raise RuntimeError("the pseudo-Huber block method changed theta: it must give "
                               "the default block's bits")

    print()
    header = (f"{'loss (STC.transform)':42s} {'threads':>7s} {'wall s':>8s} {'cpu s':>8s} "
              f"{'sweeps':>7s} {'ratio wall':>10s} {'ratio cpu':>9s}  {'max |dtheta|':>12s}  "
              f"relative to")
    print(header)
    print("-" * len(header))
    for label, name, params, n_jobs, repeats, reference in candidates:
        wall, cpu, theta, sweeps = results[label]
        if reference is None:
            wall_ratio, cpu_ratio, diff, ref = "1.00", "1.00", "", "-"
        else:
            ref_wall, ref_cpu, ref_theta, _ = results[reference]
            wall_ratio, cpu_ratio = f"{wall / ref_wall:.2f}", f"{cpu / ref_cpu:.2f}"
            diff = f"{np.abs(theta - ref_theta).max():.1e}"
            ref = reference
        n_threads = 1 if n_jobs == 1 else threads
        print(f"{label:42s} {n_threads:7d} {wall:8.2f} {cpu:8.2f} {sweeps:7.1f} {wall_ratio:>10s} "
              f"{cpu_ratio:>9s}  {diff:>12s}  {ref}")
    print()
    print("wall s, cpu s: best of the repeats; cpu s adds up all threads (on a busy machine "
          "wall time also counts waiting for a core). sweeps: mean coding sweeps per document. "
          "max |dtheta|: largest difference of theta from the reference row.")
    print(f"Poisson rows: {poisson_params}; pseudo-Huber rows: {huber_params}.")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
