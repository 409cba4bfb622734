"""The coding kernels' vector levels: every level gives the scalar loops' bits.

`stc._simd._dispatch` picks, on import, the best level this CPU supports (capped by
STC_SIMD_LEVEL). Vectorising across a topic's words keeps each word's IEEE
operations and the order of every sum, so the levels must agree bit for bit: on
random batches of coordinate problems (including the inputs the fast path hands
back to the scalar loop), on a coding call of the embedded corpus and, in
test_pinned_results.py, on the pinned fits.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stc
from stc._core import _coding
from stc._learning.coding import CodingProblem, code_documents, code_new_documents, initial_codes
from stc._simd import _dispatch as simd
from stc.losses import GaussianLoss, PoissonLoss

LOSSES = {"poisson": PoissonLoss(), "gaussian": GaussianLoss()}


def at_level(level, function, *args, **kwargs):
    previous = simd.set_level(level)
    try:
        return function(*args, **kwargs)
    finally:
        simd.set_level(previous)


def test_the_best_supported_level_is_in_use_and_scalar_is_always_there():
    assert simd.levels()[0] == "scalar"
    assert set(simd.levels()) <= set(simd.compiled_levels()) <= set(simd.LEVEL_NAMES)
    if os.environ.get(simd.ENVIRONMENT_VARIABLE) is None:
        assert simd.level() == simd.levels()[-1]


@pytest.mark.parametrize("cap, expected", [("scalar", "scalar"), ("BASELINE", "baseline"),
                                           ("avx512", None)])
def test_the_environment_variable_caps_the_level(cap, expected):
    if expected == "baseline" and "baseline" not in simd.levels():
        pytest.skip("no vector level on this platform")
    env = dict(os.environ, **{simd.ENVIRONMENT_VARIABLE: cap})
    shown = subprocess.run([sys.executable, "-c", "from stc._simd import _dispatch; "
                            "print(_dispatch.level())"], env=env, capture_output=True, text=True,
                           check=True).stdout.strip()
    # a cap above what the CPU runs gives the best level it runs
    assert shown == (expected or simd.levels()[-1])


def test_a_bad_level_is_refused_by_name():
    env = dict(os.environ, **{simd.ENVIRONMENT_VARIABLE: "sse9"})
    done = subprocess.run([sys.executable, "-c", "import stc._simd._dispatch"], env=env,
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "STC_SIMD_LEVEL must be one of scalar, baseline, avx2, avx512; got 'sse9'" in done.stderr
    with pytest.raises(ValueError, match="level must be one of"):
        simd.set_level("fast")
    unsupported = [name for name in simd.LEVEL_NAMES if name not in simd.levels()]
    for name in unsupported:
        with pytest.raises(ValueError, match="not supported here"):
            simd.set_level(name)


def test_a_bad_level_is_refused_at_import_stc():
    # import stc used to succeed; `from stc import STC` then ended an 18-line traceback
    env = dict(os.environ, **{simd.ENVIRONMENT_VARIABLE: "avx9"})
    done = subprocess.run([sys.executable, "-c", "import stc"], env=env, capture_output=True,
                          text=True)
    assert done.returncode != 0
    assert done.stderr.splitlines()[-1] == ("ValueError: STC_SIMD_LEVEL must be one of scalar, "
                                            "baseline, avx2, avx512; got 'avx9'")
    assert len(done.stderr.splitlines()) <= 7


def test_show_config_names_the_level_in_use(capsys):
    stc.show_config()
    shown = capsys.readouterr().out
    assert f"simd level             {simd.level()}" in shown
    assert stc._config.configuration()["simd levels supported"] == list(simd.levels())


# Coordinate problems as the sweep makes them, and the inputs the fast path refuses:
# zero and tiny topic weights, huge and tiny means, NaN.
weights = st.one_of(st.sampled_from([0.0, -0.0, 1e-300, 1e-160, np.nan, 1e200]),
                    st.floats(1e-8, 1.0))
counts = st.one_of(st.sampled_from([0.0, 1.0, 2.0, 1e-300, np.nan]), st.floats(0.0, 50.0))
rests = st.one_of(st.sampled_from([0.0, 1e-300, 1e300, np.inf, np.nan]), st.floats(0.0, 5.0))


@pytest.mark.parametrize("name", sorted(LOSSES))
@settings(max_examples=300, deadline=None)
@given(problems=st.lists(st.tuples(counts, weights, rests, st.floats(0.0, 3.0)), min_size=0,
                         max_size=40),
       quad=st.floats(1e-3, 10.0), lin=st.floats(-5.0, 5.0), clean=st.booleans())
def test_every_level_solves_a_batch_with_the_scalar_bits(name, problems, quad, lin, clean):
    loss = LOSSES[name]
    if clean:  # mostly the fast path: keep only ordinary problems
        problems = [p for p in problems if all(np.isfinite(p)) and 1e-8 <= p[1] and p[2] < 1e3]
    y, b, rest, start = (np.array(column, dtype=np.float64).reshape(-1)
                         for column in (zip(*problems) if problems else ([], [], [], [])))
    with np.errstate(all="ignore"):
        try:
            reference = at_level("scalar", loss.solve_block, y, b, rest, quad, lin, start)
        except ValueError:  # a batch the loss refuses (NaN from finite inputs) at every level
            for level in simd.levels()[1:]:
                with pytest.raises(ValueError):
                    at_level(level, loss.solve_block, y, b, rest, quad, lin, start)
            return
        for level in simd.levels()[1:]:
            solved = at_level(level, loss.solve_block, y, b, rest, quad, lin, start)
            assert solved.tobytes() == reference.tobytes(), level


@settings(max_examples=200, deadline=None)
@given(codes=st.lists(st.sampled_from([0.0, 0.0, 0.0, -0.0, 1e-300, 2.5, np.nan]), max_size=40),
       zero_prefix=st.integers(0, 20))
def test_every_level_tells_all_zero_codes_as_numpy_does(codes, zero_prefix):
    """The check behind the coupling sums' shortcut: -0.0 is zero, NaN and tiny codes not."""
    s = np.array([0.0] * zero_prefix + codes, dtype=np.float64)
    expected = bool(np.all(s == 0.0))
    for level in simd.levels():
        assert at_level(level, _coding._codes_all_zero, s) == expected, level


@pytest.mark.parametrize("n_words", [1, 7, 255, 256, 257, 700])
def test_long_batches_cross_the_chunks_with_the_scalar_bits(n_words):
    """The Poisson kernel packs the words it solves per chunk of 256."""
    rng = np.random.default_rng(n_words)
    y = rng.integers(1, 4, n_words).astype(float)
    b = rng.uniform(1e-4, 0.1, n_words)
    b[rng.random(n_words) < 0.1] = 0.0
    rest = rng.uniform(0.0, 0.5, n_words)
    loss = LOSSES["poisson"]
    for lin in (-0.3, 0.02, 0.2):
        reference = at_level("scalar", loss.solve_block, y, b, rest, 0.5, lin)
        assert 0 < np.count_nonzero(reference) or lin > 0
        for level in simd.levels()[1:]:
            assert at_level(level, loss.solve_block, y, b, rest, 0.5, lin).tobytes() \
                == reference.tobytes()


@pytest.mark.parametrize("loss_name", ["poisson", "gaussian"])
def test_coding_the_embedded_corpus_gives_the_same_bits_at_every_level(newsgroups, loss_name):
    """Word codes, document codes, means and objectives of warm and new coding calls."""
    train, _ = newsgroups
    X = train.data[:300]
    rng = np.random.default_rng(0)
    beta = rng.random((12, X.shape[1])) ** 4
    if loss_name == "poisson":  # topics on the simplex; unnormalised for the squared error
        beta /= beta.sum(axis=1, keepdims=True)
    # a rho at which most word codes are exactly zero and many are not
    problem = CodingProblem(LOSSES[loss_name], 0.3, 0.3, 0.5 if loss_name == "poisson" else 0.1,
                            max_iter=6)

    def code():
        codes, theta = initial_codes(X, 12)
        warm = code_documents(problem, X, beta, codes, theta, n_jobs=2)
        new_theta, new_codes, new = code_new_documents(problem, X, beta, keep_word_codes=True,
                                                       n_jobs=2)
        return [codes, theta, warm.means, warm.objective, warm.passes, new_theta, new_codes,
                new.objective]

    reference = at_level("scalar", code)
    assert np.mean(reference[0] == 0) > 0.2  # the zero shortcut is exercised
    for level in simd.levels()[1:]:
        for got, expected in zip(at_level(level, code), reference):
            assert np.asarray(got).tobytes() == np.asarray(expected).tobytes(), level
