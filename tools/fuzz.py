"""Run the fuzz suite's long profile and report how many cases each property ran.

Usage (from the repository root, in an environment with ``pip install -e '.[test]'``)::

    python tools/fuzz.py [--seconds N] [pytest options, e.g. -x or -k solvers]

It runs tests/test_fuzz_*.py with ``STC_FUZZ=long`` (the sizes are in
tests/fuzz_profile.py: over 10^5 coordinate problems, simplex rows and MM
rows, and a few hundred STC/MedSTC fits in subprocesses), then prints one
line per property with the number of cases that ran and passed the
property's filters, and the total. The short profile of the same tests runs
with every ``pytest``. Expect tens of minutes on two cores; the exit status
is pytest's. With ``--seconds N`` the run is stopped after N seconds (pytest
gets SIGINT, as from Ctrl-C): the counts are then those of the cases that
ran, and the report says it was stopped.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _take_sigint():
    # A background job of a non-interactive shell starts with SIGINT ignored, and Python
    # then installs no KeyboardInterrupt handler: give pytest the default disposition so
    # that --seconds can stop it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def main(argv):
    seconds = None
    if argv[:1] == ["--seconds"]:
        seconds, argv = float(argv[1]), argv[2:]
    stopped = False
    with tempfile.TemporaryDirectory() as tmp:
        counts_path = Path(tmp) / "counts.jsonl"
        env = dict(os.environ, STC_FUZZ="long", STC_FUZZ_COUNTS=str(counts_path))
        tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_fuzz_*.py"))
        process = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p",
                                    "no:cacheprovider", *tests, *argv], cwd=ROOT, env=env,
                                   preexec_fn=_take_sigint if os.name == "posix" else None)
        try:
            status = process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            stopped = True
            process.send_signal(signal.SIGINT)  # pytest stops and writes its counts
            status = process.wait()
        totals = {}
        if counts_path.exists():
            for line in counts_path.read_text().splitlines():
                for label, n in json.loads(line).items():
                    totals[label] = totals.get(label, 0) + n
    width = max((len(label) for label in totals), default=10)
    print(f"\n{'property':<{width}}  cases")
    for label in sorted(totals):
        print(f"{label:<{width}}  {totals[label]:>8,}")
    print(f"{'total':<{width}}  {sum(totals.values()):>8,}")
    if stopped:
        print(f"(stopped after --seconds {seconds:g}: the counts are those of the cases that ran)")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
