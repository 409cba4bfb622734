"""Fixed-order products (stc._core._dense) and the compiled QP of the SVM (stc._learning.supervised._qp).

The products must equal numpy's up to rounding, exactly where no rounding
happens (small integers), and give the same bits for any thread count. The QP
must return the maximiser: the KKT conditions of the simplex-constrained
quadratic. And MedSTC's fits must not depend on which BLAS kernel the CPU gets.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stc._core import reference
from stc._core._dense import dot, loss_augmented_argmax, matvec, row_products, vecmat
from stc._learning.supervised._qp import solve_simplex_qp


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 9), st.integers(0, 7), st.integers(0, 13), st.integers(0, 2 ** 31))
def test_products_match_numpy(n, m, width, seed):
    rng = np.random.default_rng(seed)
    A, B = rng.normal(size=(n, width)), rng.normal(size=(m, width))
    x, v = rng.normal(size=width), rng.normal(size=n)
    scale = 1e-14 * (1 + width)
    np.testing.assert_allclose(row_products(A, B), A @ B.T, rtol=0, atol=scale * 10)
    np.testing.assert_allclose(matvec(A, x), A @ x, rtol=0, atol=scale * 10)
    np.testing.assert_allclose(vecmat(v, A), v @ A, rtol=0, atol=scale * 10 * (1 + n))
    assert dot(x, x) == pytest.approx(float(x @ x), rel=1e-13, abs=1e-300)
    # small integers: every partial sum is exact, whatever the order
    Ai, Bi = np.round(10 * A), np.round(10 * B)
    np.testing.assert_array_equal(row_products(Ai, Bi), Ai @ Bi.T)


def test_products_are_the_same_bits_for_any_thread_count():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(501, 37)), rng.normal(size=(9, 37))
    one = row_products(A, B, n_jobs=1)
    assert row_products(A, B, n_jobs=2).tobytes() == one.tobytes()
    assert row_products(A, B, n_jobs=-1).tobytes() == one.tobytes()


def reference_oracle(X, W, y_index, cost):
    """The oracle as numpy writes it, from the same dot products as the fused kernel's."""
    return reference.loss_augmented_argmax(X, W, y_index, cost, products=row_products)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 30), st.integers(1, 6), st.integers(0, 9), st.sampled_from([0.0, 0.5, 3.0]),
       st.sampled_from(["none", "ties", "nan"]), st.integers(0, 2 ** 31))
def test_fused_oracle_is_numpy_s_argmax_bit_for_bit(n, n_classes, width, cost, special, seed):
    """Same labels and same hinge bits as the score matrix + argmax, ties and NaN included."""
    rng = np.random.default_rng(seed)
    X, W = rng.normal(size=(n, width)), rng.normal(size=(n_classes, width))
    y_index = rng.integers(0, n_classes, size=n)
    if special == "ties" and n:
        X[rng.integers(n)] = 0.0  # every score of the row equal: the true label wins
        W[-1] = W[0]  # two classes always tied: the first index wins
    if special == "nan" and n and width:
        X[rng.integers(n), 0] = np.nan  # numpy's argmax: the first NaN
    expected = reference_oracle(X, W, y_index, cost)
    for n_jobs in (1, 2):
        ybar, hinge = loss_augmented_argmax(X, W, y_index, cost, n_jobs=n_jobs)
        np.testing.assert_array_equal(ybar, expected[0])
        assert hinge.tobytes() == expected[1].tobytes()
        assert np.all((hinge > 0) | np.isnan(hinge) | ((hinge == 0) & (ybar == y_index)))


def test_fused_oracle_refuses_bad_labels_and_shapes():
    X, W = np.ones((3, 2)), np.ones((4, 2))
    with pytest.raises(ValueError, match="y_index"):
        loss_augmented_argmax(X, W, np.array([0, 1, 4]), 1.0)
    with pytest.raises(ValueError, match="y_index"):
        loss_augmented_argmax(X, W, np.array([0, 1]), 1.0)
    with pytest.raises(ValueError, match="columns"):
        loss_augmented_argmax(X, np.ones((4, 3)), np.array([0, 1, 2]), 1.0)


def test_products_refuse_mismatched_shapes():
    with pytest.raises(ValueError, match="as many columns"):
        row_products(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="vecmat needs shapes"):
        vecmat(np.zeros(3), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="one size"):
        dot(np.zeros(3), np.zeros(4))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 14), st.integers(1, 6), st.floats(1e-3, 1e3), st.integers(0, 2 ** 31))
def test_qp_solution_satisfies_kkt(m, rank, C, seed):
    """max c.a - a'Ha/2 on {a >= 0, sum a = C}: g = c - Ha is largest, and equal, on the support."""
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(m, rank))  # more cuts than dimensions: H is singular
    H = G @ G.T
    c = rng.uniform(0.0, 2.0, m)
    alpha = np.zeros(m)
    alpha[0] = C
    tol = 1e-10 * C * (1.0 + float(np.abs(c).max()))
    _, stuck = solve_simplex_qp(H, c, alpha, C, tol, 10000)
    assert np.all(alpha >= 0) and alpha.sum() == pytest.approx(C, rel=1e-10)
    g = c - H @ alpha
    # the duality gap C max(g) - a.g bounds the suboptimality; it is what the solver certifies
    gap = C * g.max() - alpha @ g
    assert gap <= tol or stuck
    assert gap <= 1e-7 * C * (1.0 + np.abs(g).max())
    # a feasible vertex never does better than the returned point
    value = c @ alpha - 0.5 * alpha @ H @ alpha
    vertices = C * c - 0.5 * C * C * np.diag(H)
    assert vertices.max() <= value + 1e-9 * (1.0 + abs(value))


# Both MedSTC pinned cases of tests/test_pinned_results.py, fingerprinted in hex.
FINGERPRINTS = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, sys.argv[1])
import test_pinned_results as pinned
from stc.datasets import load_newsgroups_split
train, test = load_newsgroups_split()
out = {}
for name in ("medstc_default", "medstc_l1"):
    model, X, y, X_test = pinned.cases(train, test, None)[name]
    model.fit(X, y)
    out[name] = [float(v).hex() for v in model.objective_] + [
        pinned.weighted_sum(model.coef_).hex(),
        pinned.theta_fingerprint(model.transform(X_test)).hex()]
print(json.dumps(out))
"""

def avx512_dispatch_targets():
    """numpy's dispatch targets that use AVX-512 (their names change between numpy versions,
    and numpy warns at import about a name it does not dispatch)."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__
    return [name for name in __cpu_dispatch__ if name.startswith("AVX512") or name == "X86_V4"]


def older_kernels_env():
    """The environment with OpenBLAS's and numpy's run-time dispatch forced below AVX-512
    (.ci/run does the same for a whole second run of the suite). A machine that pins
    OpenBLAS's kernel already (some do, where the detected kernel is unsafe) keeps it."""
    forced = {"NPY_DISABLE_CPU_FEATURES": " ".join(avx512_dispatch_targets())}
    if "OPENBLAS_CORETYPE" not in os.environ:
        forced["OPENBLAS_CORETYPE"] = "Haswell"
    return {**os.environ, **forced}


@pytest.mark.slow  # MedSTC fits in two fresh processes
def test_medstc_fits_do_not_depend_on_the_cpus_blas_kernel():
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    runs = []
    for env in (dict(os.environ), older_kernels_env()):
        done = subprocess.run([sys.executable, "-c", FINGERPRINTS, tests_dir], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout))
    assert runs[0] == runs[1]
