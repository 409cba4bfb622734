"""Tests for the simplex kernels (`stc._core._simplex`).

The exact Euclidean projection onto {x >= 0, sum x = radius} (Condat's
algorithm) against a sort-based reference and its variational inequality,
also at extreme scales; the multiplier equation of the MM dictionary step;
and the SVM's projection onto the capped simplex, which uses the same
kernel. The MM row update itself is tested with the dictionary step
(test_dictionary.py).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from stc._core._simplex import project_onto_simplex, project_rows_onto_simplex
from stc._core.reference import project_onto_simplex as reference_projection
from stc._learning.dictionary import simplex_multiplier
from stc._learning.supervised import svm as svm_module


# ---------------------------------------------------------------------------
# Simplex projection
# ---------------------------------------------------------------------------

@st.composite
def vectors(draw, max_size=200):
    n = draw(st.integers(1, max_size))
    scale = 10.0 ** draw(st.floats(-3, 3))
    unit = st.floats(-1.0, 1.0, allow_subnormal=False)
    v = draw(arrays(np.float64, n, elements=unit))
    if draw(st.booleans()):  # ties and repeated values
        v = np.round(v * 4) / 4
    return v * scale

radii = st.floats(-3, 3).map(lambda e: 10.0 ** e)

@settings(max_examples=300, deadline=None)
@given(v=vectors(), radius=radii)
def test_projection_matches_sort_based_reference(v, radius):
    ours = project_onto_simplex(v, radius)
    scale = max(1.0, radius, np.abs(v).max())
    np.testing.assert_allclose(ours, reference_projection(v, radius), rtol=0, atol=1e-10 * scale)
    # on the simplex
    assert ours.shape == v.shape
    assert np.all(ours >= 0.0)
    assert abs(ours.sum() - radius) <= 1e-12 * scale * v.size
    # idempotent
    again = project_onto_simplex(ours, radius)
    np.testing.assert_allclose(again, ours, rtol=0, atol=1e-12 * scale)
    # the input is not modified
    assert np.all(np.isfinite(v))

@settings(max_examples=100, deadline=None)
@given(v=vectors(), radius=radii, data=st.data())
def test_projection_is_the_nearest_simplex_point(v, radius, data):
    """Variational inequality: (v - p) . (q - p) <= 0 for every q on the simplex."""
    p = project_onto_simplex(v, radius)
    weights = data.draw(arrays(np.float64, v.size, elements=st.floats(0.0, 1.0)))
    q = radius * (weights / weights.sum() if weights.sum() > 0 else np.full(v.size, 1 / v.size))
    scale = max(1.0, radius, np.abs(v).max())
    assert np.dot(v - p, q - p) <= 1e-9 * scale * scale
    # vertices of the simplex too
    for i in data.draw(st.lists(st.integers(0, v.size - 1), max_size=5)):
        vertex = np.zeros(v.size)
        vertex[i] = radius
        assert np.dot(v - p, vertex - p) <= 1e-9 * scale * scale

@settings(max_examples=50, deadline=None)
@given(n_rows=st.integers(1, 60), n_cols=st.integers(1, 200), radius=radii,
       seed=st.integers(0, 2**32 - 1), log_scale=st.floats(-3, 3))
def test_rows_in_parallel_equal_row_by_row(n_rows, n_cols, radius, seed, log_scale):
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(n_rows, n_cols)) * 10.0 ** log_scale
    V_before = V.copy()
    serial = project_rows_onto_simplex(V, radius, n_jobs=1)
    parallel = project_rows_onto_simplex(V, radius, n_jobs=2)
    every = project_rows_onto_simplex(V, radius, n_jobs=-1)
    one_by_one = np.array([project_onto_simplex(row, radius) for row in V])
    assert np.array_equal(serial, parallel)
    assert np.array_equal(serial, every)
    assert np.array_equal(serial, one_by_one)
    assert np.array_equal(V, V_before)  # a new array is returned
    assert serial.flags.c_contiguous and serial.dtype == np.float64

def test_projection_special_cases():
    # already on the simplex: unchanged
    p = np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(project_onto_simplex(p, 1.0), p, atol=1e-16)
    # a constant vector: uniform
    np.testing.assert_allclose(project_onto_simplex(np.full(7, -3.0), 2.0), np.full(7, 2 / 7))
    # one dominant entry: a vertex
    np.testing.assert_array_equal(project_onto_simplex(np.array([0.0, 5.0, 1.0]), 1.0),
                                  [0.0, 1.0, 0.0])
    # a single entry is the radius
    assert project_onto_simplex(np.array([-17.0]), 3.0)[0] == 3.0
    # decreasing and increasing orders (exercise the restart and cleanup passes)
    v = np.arange(50, dtype=float) / 7.0
    for w in (v, v[::-1], np.concatenate([v, v])):
        np.testing.assert_allclose(project_onto_simplex(w, 4.0), reference_projection(w, 4.0),
                                   atol=1e-13)
    # integer and list input
    np.testing.assert_allclose(project_rows_onto_simplex([[1, 2, 3]], 1.0), [[0.0, 0.0, 1.0]])
    np.testing.assert_allclose(project_rows_onto_simplex([[1, 2, 2.5]], 1.0), [[0.0, 0.25, 0.75]])

@pytest.mark.parametrize("bad", [
    np.array([0.1, np.nan, 0.3]), np.array([np.inf, 0.0]), np.array([-np.inf, 1.0]),
])
def test_projection_refuses_non_finite_input(bad):
    with pytest.raises(ValueError):
        project_onto_simplex(bad, 1.0)
    with pytest.raises(ValueError):
        project_rows_onto_simplex(np.vstack([np.zeros_like(bad), bad]), 1.0)

@pytest.mark.parametrize("radius", [0.0, -1.0, -1e-300, np.nan])
def test_projection_refuses_non_positive_radius(radius):
    with pytest.raises(ValueError):
        project_onto_simplex(np.array([0.5, 0.5]), radius)
    with pytest.raises(ValueError):
        project_rows_onto_simplex(np.ones((2, 3)), radius)

def test_projection_refuses_bad_shapes():
    with pytest.raises(ValueError):
        project_rows_onto_simplex(np.zeros((2, 0)), 1.0)
    with pytest.raises(ValueError):
        project_rows_onto_simplex(np.zeros((2, 2, 2)), 1.0)
    with pytest.raises(ValueError):
        project_onto_simplex(np.zeros((2, 2)), 1.0)

# ---------------------------------------------------------------------------
# The MM multiplier
# ---------------------------------------------------------------------------
def multiplier_residual(a, c, nu):
    positive = a > 0
    denom = c + nu
    assert np.all(denom[positive] > 0)  # beta = a / (c + nu) is positive where a is
    return np.where(positive, a / np.where(positive, denom, 1.0), 0.0).sum(axis=0) - 1.0

@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 40), k=st.integers(1, 6), seed=st.integers(0, 2**32 - 1),
       zero_share=st.floats(0.0, 0.8), log_a=st.floats(-4, 4), log_ratio=st.floats(-6, 0.5))
def test_simplex_multiplier_solves_its_equation(n, k, seed, zero_share, log_a, log_ratio):
    """c up to ~3 a (c >> a: see the tests of the bracket end and of large c below)."""
    log_c = log_a + log_ratio
    rng = np.random.default_rng(seed)
    a = rng.exponential(size=(n, k)) * 10.0 ** log_a
    a[rng.random((n, k)) < zero_share] = 0.0
    # at least two terms with a > 0 and distinct c in every column (the case of a
    # single c value puts the root on the end of the bracket: see the test below)
    rows = np.array([rng.choice(n, 2, replace=False) for _ in range(k)]).T
    a[rows, np.arange(k)] = rng.exponential(size=(2, k)) * 10.0 ** log_a + 1e-300
    c = rng.exponential(size=(n, k)) * 10.0 ** log_c
    c[rng.random((n, k)) < 0.2] = 0.0
    c[rows[0], np.arange(k)] = 0.5 * c[rows[1], np.arange(k)] + 10.0 ** log_c
    nu = simplex_multiplier(a, c)
    assert nu.shape == (k,)
    np.testing.assert_allclose(multiplier_residual(a, c, nu), 0.0, rtol=0, atol=1e-10)

def test_simplex_multiplier_known_values():
    # a single positive a: nu = a - c; a constant c: nu = sum(a) - c
    a = np.array([[0.0, 0.3], [2.0, 0.5], [0.0, 0.2]])
    c = np.array([[5.0, 1.0], [0.5, 1.0], [7.0, 1.0]])
    nu = simplex_multiplier(a, c)
    np.testing.assert_allclose(nu, [1.5, 0.0], atol=1e-12)
    # two terms: a1 / (c1 + nu) + a2 / (c2 + nu) = 1 solved by hand (c1 = 0, c2 = 1, a = 1, 1):
    # nu^2 - nu - 1 = 0 -> nu = (1 + sqrt 5) / 2
    nu = simplex_multiplier(np.array([[1.0], [1.0]]), np.array([[0.0], [1.0]]))
    assert nu[0] == pytest.approx((1 + np.sqrt(5)) / 2, rel=1e-13)

@pytest.mark.parametrize("a,c", [
    ([[2e-6]], [[1e-3]]),
    ([[3e-5], [5e-5]], [[1e-3], [1e-3]]),
])
def test_simplex_multiplier_root_at_bracket_end(a, c):
    a, c = np.array(a), np.array(c)
    nu = simplex_multiplier(a, c)
    np.testing.assert_allclose(multiplier_residual(a, c, nu), 0.0, rtol=0, atol=1e-10)

def test_simplex_multiplier_large_c_small_a():
    a = np.array([[0.16299404], [0.0673583]])
    c = np.array([[2408.39298954], [2816.78597908]])
    a, c = np.array(a), np.array(c)
    nu = simplex_multiplier(a, c)
    np.testing.assert_allclose(multiplier_residual(a, c, nu), 0.0, rtol=0, atol=1e-10)

# ---------------------------------------------------------------------------
# Precision at extreme scales
# ---------------------------------------------------------------------------
def test_projection_keeps_the_radius_at_extreme_scales():
    # tau = y - radius used to round to y: both entries came out 0
    np.testing.assert_array_equal(project_onto_simplex([1e308, -1e308]), [1.0, 0.0])
    np.testing.assert_array_equal(project_onto_simplex([1e308, 1e308, -1e308]), [0.5, 0.5, 0.0])
    np.testing.assert_array_equal(project_onto_simplex([-1e308, -1e308], 3.0), [1.5, 1.5])
    # equal entries far from 0: the running means used to lose 1/300 of the radius
    p = project_onto_simplex(np.full(300, -8e12))
    np.testing.assert_allclose(p, 1.0 / 300, rtol=1e-14)
    assert p.sum() == pytest.approx(1.0, abs=1e-14)
    # a radius far below the entries' spacing from 0
    v = 1e15 + np.array([0.0, 0.25, 0.5, 4.0])
    np.testing.assert_allclose(project_onto_simplex(v, 0.5), [0.0, 0.0, 0.0, 0.5], atol=0)


@settings(max_examples=200, deadline=None)
@given(v=vectors(max_size=50), radius=radii, log_offset=st.floats(0, 300),
       sign=st.sampled_from([-1.0, 1.0]))
def test_projection_is_invariant_to_a_common_offset(v, radius, log_offset, sign):
    """P(v + c 1) = P(v) (sum x = radius fixed), whatever the size of c."""
    offset = sign * 10.0 ** log_offset
    shifted = v + offset
    if not np.all(np.isfinite(shifted)):
        return
    ours = project_onto_simplex(shifted, radius)
    assert np.all(ours >= 0.0)
    assert abs(ours.sum() - radius) <= 1e-12 * radius * v.size
    # the offset erases the detail of v below ulp(offset): compare with the
    # projection of what remains of v after adding and removing it
    seen = (shifted - shifted.max())
    reference = reference_projection(seen, radius)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-10 * max(radius, 1.0))


@pytest.mark.parametrize("radius", [np.inf, 1e301])
def test_projection_refuses_radii_it_cannot_keep(radius):
    with pytest.raises(ValueError, match="radius"):
        project_onto_simplex(np.array([0.5, 0.5]), radius)


# ---------------------------------------------------------------------------
# The SVM's projection onto the capped simplex {x >= 0, sum x <= radius}
# ---------------------------------------------------------------------------
@settings(max_examples=50, deadline=None)
@given(
    v=arrays(np.float64, st.integers(1, 12), elements=st.floats(-10, 10, allow_nan=False)),
    radius=st.floats(0.1, 100.0),
)
def test_capped_projection_is_euclidean_projection(v, radius):
    capped = svm_module._project_capped(v, radius)
    assert np.all(capped >= 0) and capped.sum() <= radius * (1 + 1e-12)
    if np.maximum(v, 0).sum() <= radius:
        np.testing.assert_array_equal(capped, np.maximum(v, 0))
    else:
        assert capped.sum() == pytest.approx(radius, rel=1e-12)
        np.testing.assert_allclose(capped, reference_projection(v, radius), atol=1e-12 * radius)
