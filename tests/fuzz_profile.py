"""Sizes of the fuzz suite (tests/test_fuzz_*.py): a short profile by default, a long one on demand.

The short profile runs with every `pytest` (a few seconds per test). The long
profile, selected with the environment variable ``STC_FUZZ=long`` (see
tools/fuzz.py, which also reports the counts), runs each property on many
more examples: at least 10^5 cases in all. With ``STC_FUZZ_COUNTS=path`` the
number of cases each property ran (after filtering) is appended to ``path``
as JSON when the process ends.
"""
import atexit
import json
import os

from hypothesis import HealthCheck, settings

LONG = os.environ.get("STC_FUZZ", "short") == "long"


def fuzz_settings(short, long):
    """Hypothesis settings for a property: ``short`` examples, or ``long`` in the long profile."""
    return settings(max_examples=long if LONG else short, deadline=None, derandomize=not LONG,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


_COUNTS = {}


def count(label, n=1):
    """Record that ``n`` cases of ``label`` ran (tools/fuzz.py reports these)."""
    _COUNTS[label] = _COUNTS.get(label, 0) + n


def _write_counts():
    path = os.environ.get("STC_FUZZ_COUNTS")
    if path and _COUNTS:
        with open(path, "a") as handle:
            handle.write(json.dumps(_COUNTS) + "\n")


atexit.register(_write_counts)
