"""Side-by-side speed of two revisions of stc on the full 20 Newsgroups corpus.

Usage::

    python benchmarks/compare_revisions.py OLD NEW [--rounds 3] [--topics 50]
        [--threads 2] [--max-iter N] [--data DIR] [--build-dir DIR]
        [--output FILE [--append]]

OLD and NEW are git revisions of this repository (exported with ``git
archive`` into ``--build-dir`` and built there with ``python setup.py
build_ext --inplace``) or directories holding an already built checkout.

Every measurement runs in a fresh subprocess that imports stc from one of the
two trees, and the two trees alternate within each round (old, new, then new,
old in the next round, ...), so a change of the machine's load hits both. Per
tree and round:

* ``STC(n_topics=K, random_state=0, n_jobs=threads, rho=0.01, rho_units="absolute",
  theta_penalty="l2").fit(train)``: wall time (the paper's setting, the defaults when
  the comparisons in results_stc.md were measured; a tree older than ``rho_units``
  gets no ``rho_units``, its only units being absolute);
* ``transform(test)`` with that model: wall time;
* the coding kernel on the test documents, all codes started at 1, on 1 and on
  ``threads`` threads: ns per word-code update made, per core, measured by the
  tree's own ``benchmarks/bench_stc.py`` (``kernel_throughput``);
* ``MedSTC(n_topics=K, random_state=0, n_jobs=threads, rho=0.01,
  rho_units="absolute").fit(train, labels)``: wall time.

Fits and transform also report the CPU time of all threads (``time.process_time``),
which a busy machine inflates less than wall time.

The table gives the best of the rounds for each tree. It also reports whether
the two trees compute the same thing: STC's fitted objective path
(``objective_``) and test document codes bit for bit, MedSTC's objective path
and coefficients to a relative 1e-9 (``MEDSTC_RTOL``: its SVM's summation order
changed in 414ebc8), and the same number of kernel updates.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from _common import (PAPER_MEDSTC, PAPER_STC, REPO_ROOT, add_data_option, default_data, log,
                     repo_relative, shown_path)
from _machine import code_revision, load1, machine_lines, source_fingerprint, uptime_line

RESULT_MARK = "COMPARE-RESULT "


# ---------------------------------------------------------------------------
# Worker: one measurement, in a subprocess that imports stc from one tree
# ---------------------------------------------------------------------------

def digest(array):
    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(array, dtype=np.float64).tobytes()).hexdigest()


def max_iter_override(args):
    return {} if args.max_iter is None else {"max_iter": args.max_iter}


def parameters_of_the_tree(estimator, params):
    """``params`` without those the tree's ``estimator`` does not have (an older tree)."""
    accepted = estimator().get_params()
    return {name: value for name, value in params.items() if name in accepted}


def measure_stc(args):
    from bench_stc import kernel_throughput  # the tree's own benchmark

    from stc import STC
    from stc.datasets import load_20newsgroups_split

    train, test = load_20newsgroups_split(args.data)
    model = STC(n_topics=args.topics, random_state=0, n_jobs=args.threads,
                **parameters_of_the_tree(STC, PAPER_STC), **max_iter_override(args))
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(train.data)
    fit_time, fit_cpu = time.perf_counter() - start, time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    theta = model.transform(test.data)
    transform_time, transform_cpu = time.perf_counter() - start, time.process_time() - cpu
    counts = [1] if args.threads == 1 else [1, args.threads]
    _, rows = kernel_throughput(model, test.data, counts, 1)
    return dict(
        stc_fit=fit_time, stc_fit_cpu=fit_cpu, stc_transform=transform_time,
        stc_transform_cpu=transform_cpu,
        stc_objective=[float(v).hex() for v in model.objective_],
        stc_theta=digest(theta),
        kernel={str(row["threads"]): dict(ns=row["ns_per_made_core"], time=row["time"],
                                          made=int(row["made"]))
                for row in rows})


def measure_medstc(args):
    import numpy as np

    from stc import MedSTC
    from stc.datasets import load_20newsgroups_split

    train, _ = load_20newsgroups_split(args.data)
    model = MedSTC(n_topics=args.topics, random_state=0, n_jobs=args.threads,
                   **parameters_of_the_tree(MedSTC, PAPER_MEDSTC), **max_iter_override(args))
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(train.data, train.target)
    fit_time, fit_cpu = time.perf_counter() - start, time.process_time() - cpu
    return dict(medstc_fit=fit_time, medstc_fit_cpu=fit_cpu,
                medstc_objective=[float(v).hex() for v in model.objective_],
                medstc_coef=digest(model.coef_),
                medstc_coef_values=[float(v).hex() for v in np.ravel(model.coef_)])


def worker(args):
    # Import the tree's stc and benchmark code, not this checkout's.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path[:0] = [args.tree, os.path.join(args.tree, "benchmarks")]
    for name in ("_common", "_machine"):  # this checkout's copies, imported above
        sys.modules.pop(name, None)
    import stc

    if os.path.dirname(os.path.dirname(os.path.abspath(stc.__file__))) != os.path.abspath(args.tree):
        raise SystemExit(f"stc was imported from {stc.__file__}, not from the tree")
    result = {"stc": measure_stc, "medstc": measure_medstc}[args.worker](args)
    print(RESULT_MARK + json.dumps(result), flush=True)


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def prepare_tree(spec, build_dir):
    """A built tree for ``spec``: a directory as given, or a git revision exported and built."""
    if os.path.isdir(spec):
        tree = os.path.abspath(spec)
        return tree, code_revision(os.path.join(tree, "stc"))
    commit = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short=12", spec],
                            capture_output=True, text=True, check=True).stdout.strip()
    tree = os.path.join(build_dir, commit)
    if not os.path.isdir(tree):
        os.makedirs(tree)
        archive = subprocess.run(["git", "-C", REPO_ROOT, "archive", commit],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        log(f"building {spec} ({commit})")
        subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-j", "2"],
                       cwd=tree, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return tree, f"{spec} ({commit})" if spec != commit else commit


def run_worker(tree, what, args):
    command = [sys.executable, os.path.abspath(__file__), "--worker", what, "--tree", tree,
               "--data", args.data, "--topics", str(args.topics),
               "--threads", str(args.threads)]
    if args.max_iter is not None:
        command += ["--max-iter", str(args.max_iter)]
    env = dict(os.environ, PYTHONPATH=tree)
    load = load1()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tree)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"measurement {what} failed in {tree}")
    line = [text for text in done.stdout.splitlines() if text.startswith(RESULT_MARK)][-1]
    result = json.loads(line[len(RESULT_MARK):])
    result["load"] = load
    return result


def identical(first, second, keys):
    return all(first[key] == second[key] for key in keys)


# MedSTC is compared to a relative tolerance, not bit for bit: since 414ebc8 its SVM sums
# in a fixed order instead of BLAS's, which moves its fit by ~1e-13 against older trees.
MEDSTC_RTOL = 1e-9


def close(first, second, key, rtol=MEDSTC_RTOL):
    """The hex-encoded float lists ``first[key]`` and ``second[key]`` agree to ``rtol``."""
    import numpy as np

    a = np.array([float.fromhex(v) for v in first[key]])
    b = np.array([float.fromhex(v) for v in second[key]])
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= rtol * np.max(np.abs(a))))


def render(args, labels, fingerprints, runs, load_start, load_end, checks):
    names = ("old", "new")
    # paths of this machine are shown from the repository root
    shown_args = [repo_relative(arg) if os.path.isabs(arg) and os.path.exists(arg) else arg
                  for arg in sys.argv[1:]]
    lines = [f"## Side by side: {labels[0]} vs. {labels[1]}", "",
             "Command: `python benchmarks/compare_revisions.py " + " ".join(shown_args) + "`",
             "", "Machine:", ""]
    lines += machine_lines(f"threads used (n_jobs): {args.threads}")
    lines += [f"- {name}: {label}, `stc/` sources sha256 {fingerprints[i]}"
              for i, (name, label) in enumerate(zip(names, labels))]
    lines += [f"- `uptime` at start: `{load_start}`", f"- `uptime` at end: `{load_end}`", ""]
    lines += ["Same results: " + "; ".join(f"{text}: {'yes' if ok else 'NO'}"
                                            for text, ok in checks) + ".", ""]

    def series(i, pick):
        return [pick(run) for run in runs[i]]

    measures = [("STC fit, K=%d, wall (s)" % args.topics, lambda r: r["stc"]["stc_fit"], 1),
                ("STC fit, CPU of all threads (s)", lambda r: r["stc"]["stc_fit_cpu"], 1),
                ("STC transform of the test split, wall (s)",
                 lambda r: r["stc"]["stc_transform"], 2),
                ("STC transform, CPU of all threads (s)",
                 lambda r: r["stc"]["stc_transform_cpu"], 2)]
    for threads in ([1] if args.threads == 1 else [1, args.threads]):
        measures.append((f"kernel, {threads} thread{'s' if threads > 1 else ''} "
                         "(ns per update made per core)",
                         lambda r, t=str(threads): r["stc"]["kernel"][t]["ns"], 2))
    measures.append(("MedSTC fit, K=%d, wall (s)" % args.topics,
                     lambda r: r["medstc"]["medstc_fit"], 1))
    measures.append(("MedSTC fit, CPU of all threads (s)",
                     lambda r: r["medstc"]["medstc_fit_cpu"], 1))
    lines += [f"Best of {args.rounds} interleaved rounds (the last two columns list every round, "
              "in round order):", "",
              "| measurement | old | new | new / old | old, all rounds | new, all rounds |",
              "|---|---|---|---|---|---|"]
    for text, pick, digits in measures:
        old, new = series(0, pick), series(1, pick)
        lines.append(f"| {text} | {min(old):.{digits}f} | {min(new):.{digits}f} | "
                     f"{min(new) / min(old):.3f} | "
                     f"{', '.join(f'{v:.{digits}f}' for v in old)} | "
                     f"{', '.join(f'{v:.{digits}f}' for v in new)} |")
    loads = [run[key]["load"] for i in range(2) for run in runs[i] for key in ("stc", "medstc")]
    lines += ["", f"1-minute load average before each measurement: {min(loads):.2f} to "
              f"{max(loads):.2f} (2 cores).", ""]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old", nargs="?", help="git revision or built directory")
    parser.add_argument("new", nargs="?", help="git revision or built directory")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-iter", type=int, default=None,
                        help="outer iterations of both fits (default: the estimators')")
    add_data_option(parser)
    parser.add_argument("--build-dir", default=None,
                        help="where revisions are exported and built (default: a temporary "
                             "directory, removed at the end)")
    parser.add_argument("--output", default=None, help="markdown file to write the table to")
    parser.add_argument("--append", action="store_true", help="append to --output")
    parser.add_argument("--worker", choices=("stc", "medstc"), help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.data = os.path.abspath(default_data() if args.data is None else args.data)
    if args.worker:
        return worker(args)
    if args.old is None or args.new is None:
        parser.error("give OLD and NEW")

    build_dir = args.build_dir or tempfile.mkdtemp(prefix="stc-compare-")
    try:
        trees, labels = zip(*(prepare_tree(spec, build_dir) for spec in (args.old, args.new)))
        fingerprints = [source_fingerprint(os.path.join(tree, "stc"))[0] for tree in trees]
        load_start = uptime_line()
        runs = ([], [])
        for round_ in range(args.rounds):
            order = (0, 1) if round_ % 2 == 0 else (1, 0)
            for i in order:
                run = {}
                for what in ("stc", "medstc"):
                    run[what] = run_worker(trees[i], what, args)
                    log(f"round {round_ + 1} {('old', 'new')[i]} {what}: "
                        + ", ".join(f"{k} {v:.2f}" for k, v in run[what].items()
                                    if isinstance(v, float)))
                runs[i].append(run)
        load_end = uptime_line()
    finally:
        if args.build_dir is None:
            shutil.rmtree(build_dir, ignore_errors=True)

    first_old, first_new = runs[0][0], runs[1][0]
    checks = [
        ("STC objective_ path", identical(first_old["stc"], first_new["stc"], ["stc_objective"])),
        ("STC transform(test)", identical(first_old["stc"], first_new["stc"], ["stc_theta"])),
        ("kernel updates made, old vs. new and 1 vs. more threads",
         len({row["made"] for run in (first_old, first_new)
              for row in run["stc"]["kernel"].values()}) == 1),
        (f"MedSTC objective_ path (to {MEDSTC_RTOL:g} relative)",
         close(first_old["medstc"], first_new["medstc"], "medstc_objective")),
        (f"MedSTC coef_ (to {MEDSTC_RTOL:g} relative)",
         close(first_old["medstc"], first_new["medstc"], "medstc_coef_values")),
        ("every round of a tree the same",
         all(identical(run[what], runs[i][0][what], keys)
             for i in range(2) for run in runs[i]
             for what, keys in (("stc", ["stc_objective", "stc_theta"]),
                                ("medstc", ["medstc_objective", "medstc_coef"])))),
    ]
    text = render(args, labels, fingerprints, runs, load_start, load_end, checks)
    print(text, end="")
    if args.output:
        with open(args.output, "a" if args.append else "w", encoding="utf-8") as handle:
            handle.write(("\n" if args.append and handle.tell() else "") + text)
        log(f"wrote {shown_path(args.output)}")


if __name__ == "__main__":
    main()
