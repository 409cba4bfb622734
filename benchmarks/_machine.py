"""What the benchmark scripts record about the machine and the code they measured."""
import datetime
import hashlib
import os
import platform
import subprocess
import sys

import numpy as np
import scipy

from _common import REPO_ROOT


def load1():
    """The 1-minute load average (NaN where unavailable)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def load_average():
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "n/a"


def uptime_line():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"load average: {load_average()}"


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def source_fingerprint(package_dir):
    """Short sha256 of the package's .py/.pyx/.pxd sources and their newest mtime.

    The package may be edited while a benchmark runs; this pins which code was measured.
    """
    digest = hashlib.sha256()
    newest = 0.0
    for root, dirs, files in os.walk(package_dir):
        dirs.sort()
        for name in sorted(files):
            if name.endswith((".py", ".pyx", ".pxd")):
                path = os.path.join(root, name)
                digest.update(os.path.relpath(path, package_dir).encode())
                with open(path, "rb") as handle:
                    digest.update(handle.read())
                newest = max(newest, os.path.getmtime(path))
    stamp = datetime.datetime.fromtimestamp(newest).astimezone().isoformat(timespec="seconds")
    return digest.hexdigest()[:12], stamp


def code_revision(package_dir):
    """Where the measured package came from, without naming any machine's paths.

    The git commit of the checkout holding it (with a mark when its sources
    differ from that commit) and its path from this repository's root.
    """
    def git(*args):
        try:
            return subprocess.run(["git", "-C", package_dir, *args], capture_output=True,
                                  text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    commit = git("rev-parse", "--short=12", "HEAD")
    if commit is None:
        revision = "not in a git checkout"
    else:
        changed = git("status", "--porcelain", "--untracked-files=no", "--", ".")
        revision = f"git commit {commit}" + (" with uncommitted changes" if changed else "")
    where = os.path.relpath(package_dir, REPO_ROOT)
    if where.startswith(".."):
        where = "a checkout other than this one"
    return f"{revision}, package at {where}"


def machine_lines(threads_line):
    """Markdown bullet lines: date, machine, thread pools, versions (stc's not included)."""
    import sklearn
    import threadpoolctl

    pools = ", ".join(f"{p['internal_api']}={p['num_threads']}"
                      for p in threadpoolctl.threadpool_info()) or "none"
    return [
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- platform: {platform.platform()}",
        f"- CPU: {cpu_model()}",
        f"- os.cpu_count(): {os.cpu_count()}",
        f"- {threads_line}",
        f"- native thread pools (threadpoolctl): {pools}",
        f"- python {platform.python_version()}, numpy {np.__version__}, "
        f"scipy {scipy.__version__}, scikit-learn {sklearn.__version__}",
    ]


def _imports(module):
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def stc_lines():
    """Markdown bullet lines on the imported stc: OpenMP, version, measured sources."""
    import stc

    package_dir = os.path.dirname(os.path.abspath(stc.__file__))
    fingerprint, newest = source_fingerprint(package_dir)
    # compare_revisions.py measures older trees too: the level's module under its older
    # name, or none (no vector levels)
    simd = next((sys.modules[name] for name in ("stc._simd._dispatch", "stc._core._simd")
                 if _imports(name)), None)
    levels = (f"{simd.level()} (supported: {', '.join(simd.levels())}; "
              f"STC_SIMD_LEVEL={os.environ.get('STC_SIMD_LEVEL', 'unset')})"
              if simd is not None else "none (scalar kernels only)")
    return [
        f"- stc.openmp_enabled(): {stc.openmp_enabled()}",
        f"- stc kernels' vector level: {levels}",
        f"- stc {stc.__version__} measured: {code_revision(package_dir)}; sources sha256 "
        f"{fingerprint}, newest source file {newest}",
    ]


def machine_info(threads_line):
    """Markdown bullet lines: date, machine, thread pools, versions, measured sources."""
    return machine_lines(threads_line) + stc_lines()


def machine_section(threads_line, start_uptime, last_run=False):
    """A report's "Machine:" block, closed by the load at the run's start and end."""
    start, end = ("at start of the last run", "at its end") if last_run else ("at start", "at end")
    return ["Machine:", "", *machine_info(threads_line),
            f"- `uptime` {start}: `{start_uptime}`", f"- `uptime` {end}: `{uptime_line()}`", ""]


def verdict(ok):
    """A target's cell: met or not."""
    return "met" if ok else "NOT met"


def online_vs_batch_page(title, setting, rounds, command, threads, start_uptime, summary,
                         rows, targets):
    """The page of an online-vs-batch benchmark: setting, command, machine, table, targets.

    ``setting`` describes both models (ends before the sentence on the rounds);
    ``rows`` is the table of measured models, ``targets`` the rows of the
    targets table (target | measured | `verdict`).
    """
    return "\n".join([
        f"# {title}", "",
        setting + f". Each model was fitted {rounds} times, interleaved (batch, online, batch, "
        "...); the fit time is the median and the ratio compares medians. The machine is a "
        "shared 2-core VM: the load averages say how busy it was.", "",
        f"Command: `{command.strip()}`", "",
        *machine_section(f"threads used (n_jobs): {threads}", start_uptime),
        f"Data: {summary}", "",
        *rows, "",
        "| target | measured | |", "|---|---|---|", *targets, "",
    ])


def publish(text, path):
    """Print a report and write it to its results file."""
    print(text)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
