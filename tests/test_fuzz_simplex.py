"""Fuzz: the simplex kernels (projection, MM multiplier, MM row update) at any scale.

* `project_rows_onto_simplex`: entries from 1e-300 to 1e300 in size, common
  offsets, ties, any radius below 1e300; the result is on the simplex, the
  same for any thread count, and is the projection: its threshold tau
  satisfies sum max(v - tau, 0) = radius, checked in exact rational
  arithmetic on the (exactly representable) inputs.
* `simplex_multipliers`: the root of sum a / (c + nu) = 1, checked with
  mpmath at 200 bits (the function is decreasing: its value just below and
  just above the returned nu must bracket 1).
* `mm_update_rows`: finite rows on the simplex that satisfy the KKT
  conditions of the MM surrogate, whatever the scales of a and c.

Sizes: tests/fuzz_profile.py (short by default; STC_FUZZ=long via tools/fuzz.py).
"""
from fractions import Fraction

import mpmath
import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from fuzz_profile import count, fuzz_settings
from stc._core._simplex import mm_update_rows, project_rows_onto_simplex, simplex_multipliers

MP = mpmath.mp.clone()
MP.prec = 200


@st.composite
def rows(draw, max_rows=4, max_size=40):
    n_rows = draw(st.integers(1, max_rows))
    n = draw(st.integers(1, max_size))
    exponent = draw(st.floats(-300, 300))
    unit = st.floats(-1.0, 1.0, allow_subnormal=False)
    V = draw(arrays(np.float64, (n_rows, n), elements=unit)) * 10.0 ** exponent
    if draw(st.booleans()):  # ties
        V = np.round(V / 10.0 ** exponent * 4) / 4 * 10.0 ** exponent
    if draw(st.booleans()):  # a common offset far larger than the spread
        V = V + draw(st.sampled_from([-1.0, 1.0])) * 10.0 ** draw(st.floats(-300, 300))
    assume(np.all(np.isfinite(V)))
    return V


def exact_threshold_bracket(v, x, radius):
    """sum max(v - t, 0) at t = tau -/+ a little, in exact rationals, around the result's tau."""
    support = x > 0
    # tau = v_i - x_i on the support (equal there up to rounding); check the
    # defining equation in exact arithmetic at its smallest and largest value
    taus = [Fraction(float(vi)) - Fraction(float(xi)) for vi, xi in zip(v[support], x[support])]
    values = [Fraction(float(vi)) for vi in v]

    def excess(t):
        return sum((vi - t for vi in values if vi > t), Fraction(0))

    return excess(min(taus)), excess(max(taus))


@fuzz_settings(short=100, long=40000)
@given(rows(), st.floats(-300, 299).map(lambda e: 10.0 ** e))
def test_projection_is_exact_at_any_scale(V, radius):
    X = project_rows_onto_simplex(V, radius, n_jobs=1)
    assert np.array_equal(X, project_rows_onto_simplex(V, radius, n_jobs=2))
    assert np.all(np.isfinite(X)) and np.all(X >= 0)
    for v, x in zip(V, X):
        # on the simplex, to the rounding of n terms of size radius
        assert abs(x.sum() - radius) <= 4 * x.size * np.finfo(float).eps * radius
        if not np.any(x > 0):
            raise AssertionError("no entry left: the radius was lost")
        # the threshold is where sum max(v - tau, 0) = radius: between the
        # support's tau values the exact excess brackets the radius to rounding
        high, low = exact_threshold_bracket(v, x, radius)
        slack = Fraction(8 * x.size) * Fraction(np.finfo(float).eps) * (
            Fraction(radius) + Fraction(float(np.abs(v).max())))
        assert low - slack <= Fraction(radius) <= high + slack
        count("simplex projection (row)")


@st.composite
def multiplier_rows(draw, max_rows=4, max_size=30):
    n_rows = draw(st.integers(1, max_rows))
    n = draw(st.integers(1, max_size))
    ea, ec = draw(st.floats(-100, 100)), draw(st.floats(-100, 100))
    a = draw(arrays(np.float64, (n_rows, n), elements=st.floats(0.0, 1.0))) * 10.0 ** ea
    a[:, 0] += 10.0 ** ea  # every row has a positive entry
    if draw(st.booleans()):
        a[draw(arrays(np.bool_, (n_rows, n)))] = 0.0
        a[:, 0] = np.maximum(a[:, 0], 10.0 ** ea)
    c = draw(arrays(np.float64, (n_rows, n), elements=st.floats(0.0, 1.0))) * 10.0 ** ec
    if draw(st.booleans()):  # spreads of many orders of magnitude within a row
        c = c * 10.0 ** draw(arrays(np.float64, (n_rows, n), elements=st.floats(-20, 20)))
    assume(np.all(np.isfinite(a)) and np.all(np.isfinite(c)))
    return a, c


def multiplier_function(a, c, nu):
    return MP.fsum(MP.mpf(ai) / (MP.mpf(ci) + nu) for ai, ci in zip(a, c) if ai > 0) - 1


@fuzz_settings(short=100, long=30000)
@given(multiplier_rows())
def test_simplex_multiplier_is_the_root(rows_):
    a, c = rows_
    nu = simplex_multipliers(a, c)
    for a_k, c_k, nu_k in zip(a, c, nu):
        positive = a_k > 0
        c_min = c_k[positive].min()
        assert np.isfinite(nu_k) and nu_k > -c_min - np.spacing(c_min)
        # the decreasing function changes sign within the rounding of nu
        width = MP.mpf(1e-12) * (abs(MP.mpf(nu_k)) + MP.mpf(a_k.sum())) + MP.mpf(
            4 * np.spacing(max(abs(nu_k), c_min)))
        above = multiplier_function(a_k, c_k, MP.mpf(nu_k) + width)
        assert above <= 0
        below_nu = MP.mpf(nu_k) - width
        if below_nu > -MP.mpf(c_min):
            assert multiplier_function(a_k, c_k, below_nu) >= 0
        count("MM multiplier (row)")


@fuzz_settings(short=100, long=30000)
@given(multiplier_rows(), st.booleans(), st.integers(0, 2 ** 32 - 1))
def test_mm_update_satisfies_the_surrogate_kkt(rows_, spare_term, seed):
    a, c = rows_
    n_topics, n = a.shape
    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.ones(n), n_topics)
    beta[a == 0] = 0.0
    beta[:, 0] = np.maximum(beta[:, 0], 1e-3)
    beta /= beta.sum(axis=1, keepdims=True)
    weighted = np.where(beta > 0, a / np.where(beta > 0, beta, 1.0), 0.0)
    assume(np.all(np.isfinite(weighted)))
    code_sums = np.ascontiguousarray(c)
    if spare_term:
        code_sums[:, -1] = 0.0  # a term that never occurs (when its a is 0 too)
    multipliers = np.full(n_topics, np.nan)
    a_used = beta * weighted
    new = mm_update_rows(beta, np.ascontiguousarray(weighted.T), code_sums, multipliers, n_jobs=1)
    assert np.array_equal(new, mm_update_rows(beta, np.ascontiguousarray(weighted.T), code_sums,
                                              np.full(n_topics, np.nan), n_jobs=2))
    assert np.all(np.isfinite(new)) and np.all(new >= 0)
    np.testing.assert_allclose(new.sum(axis=1), 1.0, rtol=0, atol=1e-13 * n)
    for k in range(n_topics):
        positive = a_used[k] > 0
        nu = multipliers[k]
        scale = c[k].max() + abs(nu) + 1.0
        # beta_n = a_n / (c_n + nu) where a_n > 0 (up to the final renormalisation);
        # c_n + nu can be 0, which the isfinite check below skips
        with np.errstate(divide="ignore", invalid="ignore"):
            expected = a_used[k, positive] / (code_sums[k, positive] + nu)
        if np.all(np.isfinite(expected)) and np.all(code_sums[k, positive] + nu > 1e-12 * scale):
            np.testing.assert_allclose(new[k, positive], expected / expected.sum() * new[k, positive].sum(),
                                       rtol=1e-8)
        # c_n + nu >= 0 where a_n = 0, = 0 wherever such an entry took weight
        zero = ~positive
        assert np.all(code_sums[k, zero] + nu >= -1e-12 * scale)
        took = zero & (new[k] > 0)
        assert np.all(np.abs(code_sums[k, took] + nu) <= 1e-12 * scale)
        count("MM row update (row)")
