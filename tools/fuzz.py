"""Run the fuzz suite's long profile and report how many cases each property ran.

Usage (from the repository root, in an environment with ``pip install -e '.[test]'``)::

    python tools/fuzz.py [pytest options, e.g. -x or -k solvers]

It runs tests/test_fuzz_*.py with ``STC_FUZZ=long`` (the sizes are in
tests/fuzz_profile.py: over 10^5 coordinate problems, simplex rows and MM
rows, and a few hundred STC/MedSTC fits in subprocesses), then prints one
line per property with the number of cases that ran and passed the
property's filters, and the total. The short profile of the same tests runs
with every ``pytest``. Expect tens of minutes on two cores; the exit status
is pytest's.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv):
    with tempfile.TemporaryDirectory() as tmp:
        counts_path = Path(tmp) / "counts.jsonl"
        env = dict(os.environ, STC_FUZZ="long", STC_FUZZ_COUNTS=str(counts_path))
        tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_fuzz_*.py"))
        status = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                  *tests, *argv], cwd=ROOT, env=env)
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
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
