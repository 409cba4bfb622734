"""Fuzz: small STC and MedSTC fits with random data and hyper-parameters, in subprocesses.

Hypothesis draws batches of cases (data shape and scale, loss, penalties,
lambda_, gamma, rho, C, cost, refit_C, iteration caps; some with corrupted
input); tests/fuzz_fit_worker.py runs a batch in a fresh interpreter under a
time limit, so a hang or a crash fails the test with the case that caused
it instead of stopping the suite. Every fit must leave topics on the
simplex, finite non-negative codes, an objective that never rises, and be
bit-identical with 2 threads; every corrupted input must be refused with a
ValueError or TypeError. A valid input may also be refused with a
ValueError (extreme scales: see test_extreme_inputs_fit_or_say_why).

Sizes: tests/fuzz_profile.py (short by default; STC_FUZZ=long via tools/fuzz.py).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from fuzz_profile import count, fuzz_settings

WORKER = Path(__file__).resolve().parent / "fuzz_fit_worker.py"
SECONDS_PER_CASE = 30  # a limit for a hang, far above any of these fits' time


def log_uniform(low, high):
    return st.floats(low, high).map(lambda e: float(10.0 ** e))


@st.composite
def fit_cases(draw):
    kind = draw(st.sampled_from(["stc", "stc", "medstc"]))
    loss = "poisson" if kind == "medstc" else draw(st.sampled_from(["poisson", "gaussian",
                                                                     "bernoulli"]))
    params = dict(
        n_topics=draw(st.integers(1, 4)),
        lambda_=draw(log_uniform(-3, 2)),
        gamma=draw(st.one_of(st.none(), log_uniform(-3, 2))),
        rho=draw(log_uniform(-4, 1)),
        loss=loss,
        theta_penalty=draw(st.sampled_from(["l1", "l2"])),
        code_penalty=draw(st.sampled_from(["l1", "l2"])),
        max_iter=draw(st.integers(1, 6)),
        inner_max_iter=draw(st.integers(1, 30)),
        random_state=draw(st.integers(0, 1000)),
    )
    if kind == "medstc":
        params.update(C=draw(log_uniform(0, 12)), cost=draw(log_uniform(-1, 4)),
                      refit_C=draw(st.one_of(st.none(), log_uniform(0, 12))),
                      svm_max_iter=draw(st.integers(20, 200)))
    return dict(
        kind=kind, params=params, seed=draw(st.integers(0, 2 ** 32 - 1)),
        n_docs=draw(st.integers(4, 30)), n_features=draw(st.integers(3, 50)),
        rate=draw(st.floats(0.2, 3.0)), n_classes=draw(st.integers(2, 4)),
        corrupt=draw(st.one_of(st.none(), st.none(), st.none(), st.sampled_from(
            ["nan", "inf", "negative", "three_d", "no_rows", "strings"]
            + (["labels_short", "one_class"] if kind == "medstc" else [])))),
        threads=draw(st.booleans()),
    )


def run_batch(cases, tmp_path):
    """Run ``cases`` in a fresh interpreter; return its results (one dict per case)."""
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases))
    try:
        done = subprocess.run([sys.executable, str(WORKER), str(path)], capture_output=True,
                              text=True, timeout=SECONDS_PER_CASE * len(cases),
                              env={**os.environ, "OMP_NUM_THREADS": "2"})
    except subprocess.TimeoutExpired as exc:
        lines = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        started = [json.loads(line)["start"] for line in lines.splitlines() if '"start"' in line]
        raise AssertionError(f"fit hung: case {cases[started[-1]] if started else cases[0]}")
    assert done.returncode == 0, f"worker died ({done.returncode}): {done.stderr[-2000:]}"
    results = [json.loads(line) for line in done.stdout.splitlines() if '"case"' in line]
    assert len(results) == len(cases), done.stderr[-2000:]
    return results


def test_random_fits_are_sound_or_refused_clearly(tmp_path_factory):
    @fuzz_settings(short=2, long=60)
    @given(st.lists(fit_cases(), min_size=5, max_size=5))
    def run(cases):
        results = run_batch(cases, tmp_path_factory.mktemp("fits"))
        for case, result in zip(cases, results):
            assert result["status"] in ("fitted", "refused"), (case, result)
            assert not result.get("failures"), (case, result)
            if case["corrupt"]:
                assert result["status"] == "refused", (case, result)
            count(f"{case['kind']} fit, {'bad input' if case['corrupt'] else result['status']}")

    run()


def test_extreme_inputs_fit_or_say_why(tmp_path):
    """The issue's reproducers, each under the time limit: they finish, and fit or say why."""
    base = dict(kind="stc", seed=0, n_docs=30, n_features=50, rate=1.0, n_classes=3,
                threads=False)
    cases = [
        dict(base, kind="medstc", params=dict(C=1e12, n_topics=3, max_iter=3, random_state=0)),
        dict(base, kind="medstc", params=dict(refit_C=1e12, n_topics=3, max_iter=3,
                                              random_state=0)),
        dict(base, kind="medstc", params=dict(n_topics=3, lambda_=0.1, max_iter=5,
                                              random_state=0)),
        dict(base, kind="medstc", n_docs=22, params=dict(
            n_topics=2, lambda_=0.014, gamma=2.9, rho=0.005, theta_penalty="l1", max_iter=2,
            random_state=0, C=3e4, cost=476.7)),
        dict(base, params=dict(n_topics=2, lambda_=1e300, max_iter=3, random_state=0)),
        dict(base, params=dict(n_topics=2, rho=1e300, max_iter=3, random_state=0)),
        dict(base, data_scale=1e-20, params=dict(n_topics=2, max_iter=3, random_state=0)),
        dict(base, data_scale=1e200, params=dict(n_topics=2, max_iter=3, random_state=0,
                                                 loss="gaussian")),
    ]
    results = run_batch(cases, tmp_path)
    for case, result in zip(cases, results):
        assert result["status"] in ("fitted", "refused"), (case, result)
        assert not result.get("failures"), (case, result)
        if result["status"] == "refused":
            # the refusal names what is wrong, not a symptom deep inside
            assert "outside the loss's domain" not in result["error"], (case, result)
