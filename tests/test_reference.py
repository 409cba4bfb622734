"""Every compiled kernel the package calls, against its numpy reference (`stc._core.reference`).

`KERNELS` lists each public function of the compiled modules with its
reference and the test that runs both on small random problems (here, or an
existing test elsewhere, named); `test_every_compiled_function_is_listed`
fails when a compiled module gains a function that is neither listed nor
exempt (`EXEMPT`, with the reason). Agreement is bit for bit where the
reference does the same arithmetic in the same order, else to a tolerance
that says how far apart two correct orders of summation can be.
"""
import importlib

import numpy as np
import pytest
import scipy.sparse as sp

from stc._core import _coding, _dense, _segments, _simplex, _sparse_ops, reference
from stc._core._word_codes import SparseWordCodes
from stc._learning.coding import CodingProblem, ShiftedMean, transposed
from stc._learning.dictionary import CorpusLayout
from stc._learning.supervised import _qp
from stc.losses import GaussianLoss, PoissonLoss

COMPILED_MODULES = ["stc._core._coding", "stc._core._segments", "stc._core._dense",
                    "stc._core._sparse_ops", "stc._core._simplex", "stc._learning.supervised._qp",
                    "stc._core._word_codes", "stc._core._openmp", "stc._simd._dispatch",
                    "stc._simd._throughput"]

# compiled function -> (its reference, the test that checks that they agree)
KERNELS = {
    "_coding.code_documents": (reference.code_documents, "test_code_documents"),
    "_coding.code_shifted_documents": (reference.code_documents, "test_code_documents"),
    "_coding.code_new_documents": (reference.code_new_documents, "test_code_new_documents"),
    "_coding.theta_from_codes": (reference.theta_update, "test_theta_from_codes"),
    "_segments.segment_objectives": (reference.segment_objectives, "test_segments"),
    "_segments.segment_curvatures": (reference.segment_curvatures, "test_segments"),
    "_segments.segment_losses": (reference.segment_losses, "test_segments"),
    "_segments.move_along_segments": (reference.move_along_segments, "test_segments"),
    "_dense.row_products": (reference.row_products, "test_dense_products"),
    "_dense.matvec": (reference.matvec, "test_dense_products"),
    "_dense.vecmat": (reference.vecmat, "test_dense_products"),
    "_dense.dot": (reference.dot, "test_dense_products"),
    "_dense.loss_augmented_argmax": (reference.loss_augmented_argmax,
                                     "test_dense.py::test_fused_oracle_is_numpy_s_argmax_bit_for_bit"),
    "_sparse_ops.word_means": (reference.word_means, "test_word_statistics"),
    "_sparse_ops.word_code_sums": (reference.word_code_sums, "test_word_statistics"),
    "_sparse_ops.mm_statistics": (reference.mm_statistics, "test_mm_statistics"),
    "_sparse_ops.mm_step_statistics": (reference.mm_step_statistics, "test_mm_statistics"),
    "_sparse_ops.mm_first_statistics": (reference.mm_first_statistics, "test_mm_statistics"),
    "_simplex.project_rows_onto_simplex": (reference.project_rows_onto_simplex,
                                           "test_projection"),
    "_simplex.project_onto_simplex": (reference.project_onto_simplex, "test_projection"),
    "_simplex.simplex_multipliers": (reference.simplex_multipliers, "test_mm_rows"),
    "_simplex.mm_update_rows": (reference.mm_update_rows, "test_mm_rows"),
    "_simplex.mm_exact_rows": (reference.mm_exact_rows, "test_mm_rows"),
    "_simplex.mm_minimiser_rows": (reference.mm_exact_rows, "test_mm_rows"),
    "_simplex.online_block_start": (reference.online_block_step, "test_online_block"),
    "_simplex.online_block_solve": (reference.online_block_step, "test_online_block"),
    "_simplex.online_block_finish": (reference.online_block_step, "test_online_block"),
    "_qp.face_step": (reference.face_step, "test_face_step"),
    "_qp.solve_simplex_qp": (reference.solve_simplex_qp, "test_simplex_qp"),
    # the methods of the word codes that the kernels and the estimators use: the
    # reference is the dense (nnz, K) array
    "_word_codes.SparseWordCodes": (np.asarray, "test_sparse_word_codes"),
}

# Compiled names without a numerical reference.
EXEMPT = {
    # the online step's named arrays (a container); its three kernels are listed
    "_simplex.OnlineBlock",
    # thread count and OpenMP availability, no numerics (tests/test_init.py)
    "_openmp.openmp_enabled", "_openmp.resolve_n_jobs",
    # choosing the vector level of the kernels (tests/test_simd.py: every level gives the
    # same bits), and the benchmark's probes of each level's instructions
    "_dispatch.levels", "_dispatch.compiled_levels", "_dispatch.level", "_dispatch.set_level",
    "_dispatch.best_level", "_throughput.throughput",
}


def compiled_functions():
    """'module.name' of every public function and class defined in the compiled modules."""
    names = set()
    for path in COMPILED_MODULES:
        module = importlib.import_module(path)
        short = path.rsplit(".", 1)[1]
        for name in dir(module):
            value = getattr(module, name)
            if (not name.startswith("_") and callable(value)
                    and getattr(value, "__module__", None) == path):
                names.add(f"{short}.{name}")
    return names


def test_every_compiled_function_is_listed():
    """A new compiled function needs a reference here (or a reason in EXEMPT)."""
    found = compiled_functions()
    assert found - set(KERNELS) - EXEMPT == set(), "compiled functions without a reference"
    assert set(KERNELS) | EXEMPT <= found, "listed functions that no longer exist"
    assert not set(KERNELS) & EXEMPT


def test_every_listed_check_exists():
    for name, (ref, check) in KERNELS.items():
        assert callable(ref), name
        path, _, test = check.rpartition("::")
        module = importlib.import_module(path[:-3]) if path else globals()
        assert callable(module[test] if isinstance(module, dict) else getattr(module, test))


# ---------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------
SEEDS = [0, 1, 2]


def corpus(seed, n_docs=9, n_features=14, n_topics=3):
    """(CSR X with int32 indices and one empty document, beta (K, N), dense codes, theta)."""
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((n_docs, n_features)) < 0.4,
                     rng.poisson(1.5, (n_docs, n_features)) + 1.0, 0.0)
    dense[3] = 0.0
    X = sp.csr_matrix(dense)
    X.indices, X.indptr = X.indices.astype(np.intc), X.indptr.astype(np.intc)
    beta = rng.dirichlet(np.full(n_features, 0.8), n_topics)
    codes = np.where(rng.random((X.nnz, n_topics)) < 0.3, 0.0,
                     rng.gamma(2.0, size=(X.nnz, n_topics)))
    theta = rng.gamma(2.0, size=(n_docs, n_topics))
    theta[np.diff(X.indptr) == 0] = 0.0  # as coding leaves documents without words
    return X, beta, codes, theta


def problem(seed, max_iter=3):
    penalties = [("l1", "l1"), ("l2", "l1"), ("l2", "l2")][seed % 3]
    return CodingProblem(PoissonLoss(), 0.3, 0.4, 0.08, *penalties, max_iter=max_iter, tol=-1.0)


def layout_of(X, codes):
    layout = CorpusLayout(X)
    return layout, SparseWordCodes.from_dense(X.indptr, codes)


# ---------------------------------------------------------------------------
# Coding (`_coding`)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shifted", [False, True])
def test_code_documents(seed, shifted):
    """A few sweeps from the same codes agree to rounding (the kernel sums per document,
    the reference per topic over all documents; tests/test_coding.py compares more cases
    through `stc._learning.coding`)."""
    X, beta, codes, theta = corpus(seed)
    params = problem(seed).params
    rng = np.random.default_rng(seed)
    linear = rng.normal(scale=0.1, size=theta.shape) if shifted else None
    active = rng.random(X.shape[0]) < 0.7 if shifted else None
    codes_r, theta_r, means_r = codes.copy(), theta.copy(), np.zeros(X.nnz)
    expected = reference.code_documents(PoissonLoss(), params, X, beta, codes_r, theta_r,
                                        means_r, linear, active)
    codes_c, theta_c, means_c = codes.copy(), theta.copy(), np.zeros(X.nnz)
    if shifted:
        got = _coding.code_shifted_documents(
            PoissonLoss(), params, X, transposed(beta), codes_c, theta_c, means_c,
            ShiftedMean(linear, active.view(np.uint8)))
    else:
        got = _coding.code_documents(PoissonLoss(), params, X, transposed(beta), codes_c,
                                     theta_c, means_c)
    for mine, theirs in zip(got[:5], expected[:5]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)
    assert got[5] is None and expected[5] is None
    for mine, theirs in ((codes_c, codes_r), (theta_c, theta_r), (means_c, means_r)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_code_new_documents(seed):
    X, beta, _, theta = corpus(seed)
    params = problem(seed, max_iter=4).params
    codes_r, theta_r, means_r = np.empty((X.nnz, 3)), np.empty_like(theta), np.zeros(X.nnz)
    expected = reference.code_new_documents(PoissonLoss(), params, X, beta, codes_r, theta_r,
                                            means_r)
    codes_c, theta_c, means_c = np.empty((X.nnz, 3)), np.empty_like(theta), np.zeros(X.nnz)
    got = _coding.code_new_documents(PoissonLoss(), params, X, transposed(beta), codes_c,
                                     theta_c, means_c)
    for mine, theirs in zip(got[:5], expected[:5]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)
    for mine, theirs in ((codes_c, codes_r), (theta_c, theta_r), (means_c, means_r)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("penalty", [0, 1])
def test_theta_from_codes(penalty):
    """Bit for bit: the same formula."""
    rng = np.random.default_rng(penalty)
    for mean_code, linear, n_words in zip(rng.gamma(1.0, size=50), rng.normal(size=50),
                                          rng.integers(1, 30, 50)):
        assert _coding.theta_from_codes(mean_code, linear, n_words, 0.3, 0.4, penalty) == \
            reference.theta_update(mean_code, linear, n_words, 0.3, 0.4, penalty)


@pytest.mark.parametrize("seed", SEEDS)
def test_segments(seed):
    X, beta, old_codes, old_theta = corpus(seed)
    rng = np.random.default_rng(seed + 10)
    old_theta[3] = rng.gamma(2.0, size=old_theta.shape[1])  # empty: not part of (2)
    new_codes = old_codes * rng.uniform(0.0, 2.0, size=old_codes.shape)
    new_theta = old_theta * rng.uniform(0.0, 2.0, size=old_theta.shape)
    params = problem(seed).params
    rows = np.array([0, 2, 3, 5, 8], dtype=np.intp)
    steps = np.array([0.0, 0.25, 1.0, 0.5, 0.75])
    old, new = (old_codes, old_theta), (new_codes, new_theta)
    got = _segments.segment_objectives(PoissonLoss(), params, X, transposed(beta), old, new,
                                     rows, steps)
    expected = reference.segment_objectives(PoissonLoss(), params, X, beta, old, new, rows,
                                            steps)
    for mine, theirs in zip(got, expected):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(_segments.segment_curvatures(params, X, old, new, rows),
                               reference.segment_curvatures(params, X, old, new, rows),
                               rtol=1e-12)
    old_means = reference.word_means(X.indices, old_codes, beta.T)
    new_means = reference.word_means(X.indices, new_codes, beta.T)
    for mine, theirs in zip(
            _segments.segment_losses(PoissonLoss(), X, old_means, new_means, rows, steps),
            reference.segment_losses(PoissonLoss(), X, old_means, new_means, rows, steps)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-13)
    codes, theta, means = new_codes.copy(), new_theta.copy(), np.zeros(X.nnz)
    _segments.move_along_segments(X, transposed(beta), old, (codes, theta), means, rows, steps)
    moved = reference.move_along_segments(X, beta, old, new, rows, steps)
    np.testing.assert_array_equal(codes, moved[0])  # the same products, one rounding each
    np.testing.assert_array_equal(theta, moved[1])
    touched = np.repeat(np.isin(np.arange(X.shape[0]), rows), np.diff(X.indptr))
    np.testing.assert_allclose(means[touched], moved[2], rtol=1e-13)


# ---------------------------------------------------------------------------
# Dense products (`_dense`; the fused oracle: tests/test_dense.py)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_dense_products(seed):
    rng = np.random.default_rng(seed)
    A, B = rng.normal(size=(7, 11)), rng.normal(size=(5, 11))
    x, v = rng.normal(size=11), rng.normal(size=7)
    np.testing.assert_allclose(_dense.row_products(A, B), reference.row_products(A, B),
                               rtol=0, atol=1e-13)
    np.testing.assert_allclose(_dense.matvec(A, x), reference.matvec(A, x), rtol=0, atol=1e-13)
    np.testing.assert_allclose(_dense.vecmat(v, A), reference.vecmat(v, A), rtol=0, atol=1e-13)
    assert _dense.dot(x, v[:1].repeat(11)) == pytest.approx(reference.dot(x, v[:1].repeat(11)),
                                                            rel=1e-13, abs=1e-13)


# ---------------------------------------------------------------------------
# Dictionary statistics (`_sparse_ops`)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_word_statistics(seed):
    X, beta, codes, _ = corpus(seed)
    layout, rows = layout_of(X, codes)
    np.testing.assert_allclose(_sparse_ops.word_means(X.indices, rows, transposed(beta)),
                               reference.word_means(X.indices, codes, beta.T), rtol=1e-14)
    weights = np.random.default_rng(seed).random(X.nnz)
    plain, weighted = _sparse_ops.word_code_sums(layout.col_ptr, layout.col_entries, rows,
                                                 weights, with_plain=True)
    expected = reference.word_code_sums(layout.col_ptr, layout.col_entries, codes, weights,
                                        with_plain=True)
    np.testing.assert_allclose(plain, expected[0], rtol=1e-14)
    np.testing.assert_allclose(weighted, expected[1], rtol=1e-14)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("loss", [PoissonLoss(), GaussianLoss()], ids=lambda l: l.name)
def test_mm_statistics(seed, loss):
    X, beta, codes, _ = corpus(seed)
    layout, rows = layout_of(X, codes)
    ptr, entries = layout.col_ptr, layout.col_entries
    value, sums = _sparse_ops.mm_statistics(loss, ptr, entries, X.data, rows, transposed(beta))
    expected = reference.mm_statistics(loss, ptr, entries, X.data, codes, beta.T)
    assert value == pytest.approx(expected[0], rel=1e-13)
    np.testing.assert_allclose(sums, expected[1], rtol=1e-13)
    a = np.empty_like(beta)
    value = _sparse_ops.mm_step_statistics(loss, ptr, entries, layout.col_data, rows, beta, a)
    expected = reference.mm_step_statistics(loss, ptr, entries, layout.col_data, codes, beta)
    assert value == pytest.approx(expected[0], rel=1e-13)
    np.testing.assert_allclose(a, expected[1], rtol=1e-13)
    ratios = np.random.default_rng(seed).random(X.nnz)
    a, c = np.empty_like(beta), np.empty_like(beta)
    _sparse_ops.mm_first_statistics(ptr, entries, rows, ratios, beta, a, c)
    expected = reference.mm_first_statistics(ptr, entries, codes, ratios, beta)
    np.testing.assert_allclose(a, expected[0], rtol=1e-13)
    np.testing.assert_allclose(c, expected[1], rtol=1e-13)


# ---------------------------------------------------------------------------
# The simplex (`_simplex`)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_projection(seed):
    """Condat's algorithm against the sort-based projection (tests/test_simplex.py: more)."""
    V = np.random.default_rng(seed).normal(size=(6, 13))
    np.testing.assert_allclose(_simplex.project_rows_onto_simplex(V, 2.0),
                               reference.project_rows_onto_simplex(V, 2.0), atol=1e-14)
    np.testing.assert_allclose(_simplex.project_onto_simplex(V[0]),
                               reference.project_onto_simplex(V[0]), atol=1e-14)


def mm_problem(seed, n_topics=4, n_features=15):
    """beta, a (with zeros, a collapsed topic and an overshooting one) and c."""
    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.ones(n_features), n_topics)
    a = np.where(rng.random((n_topics, n_features)) < 0.6, rng.gamma(1.0, size=beta.shape), 0.0)
    a[1] = 0.0  # collapsed: kept
    c = rng.uniform(0.5, 3.0, size=beta.shape)
    # the codes overshoot the data where a > 0: the spare mass case (nu = -c_spare)
    c[2] = np.where(a[2] > 0.0, 50.0 * c[2], c[2])
    return beta, a, c


@pytest.mark.parametrize("seed", SEEDS)
def test_mm_rows(seed):
    beta, a, c = mm_problem(seed)
    expected, nu = reference.mm_exact_rows(beta, a, c)
    for kernel in (_simplex.mm_exact_rows, _simplex.mm_minimiser_rows):
        multipliers = np.full(beta.shape[0], np.nan)
        np.testing.assert_allclose(kernel(beta, a, c, multipliers), expected, rtol=1e-12,
                                   atol=1e-15)
        np.testing.assert_allclose(multipliers, nu, rtol=1e-10, atol=1e-12)
    sums = np.divide(a, beta).T.copy()
    multipliers = np.full(beta.shape[0], np.nan)
    np.testing.assert_allclose(_simplex.mm_update_rows(beta, sums, c, multipliers),
                               reference.mm_update_rows(beta, sums, c)[0], rtol=1e-12,
                               atol=1e-15)
    np.testing.assert_allclose(_simplex.simplex_multipliers(a, c),
                               reference.simplex_multipliers(a, c), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_online_block(seed):
    """The three parts of the online step against the reference's one step."""
    rng = np.random.default_rng(seed)
    beta, A, C = mm_problem(seed, n_features=20)
    A[1] = rng.gamma(1.0, size=20)  # the online statistics are positive
    terms = np.array([1, 4, 5, 11, 17], dtype=np.intp)
    plain = rng.uniform(0.0, 3.0, size=(beta.shape[0], terms.size))
    batch = rng.uniform(0.0, 3.0, size=(beta.shape[0], terms.size))
    expected = reference.online_block_step(beta, A, C, terms, plain, batch, 0.3, 7.0)
    beta, A, C = beta.copy(), A.copy(), C.copy()
    multipliers = np.full(beta.shape[0], np.nan)
    block = _simplex.OnlineBlock(terms, beta.shape[0], beta.shape[1], 0.3, 7.0)
    _simplex.online_block_start(beta, A, C, block, plain)
    _simplex.online_block_solve(beta, A, C, multipliers, block, batch)
    _simplex.online_block_finish(beta, block)
    for mine, theirs in zip((beta, A, C, multipliers), expected):
        np.testing.assert_allclose(mine, theirs, rtol=1e-11, atol=1e-15)


# ---------------------------------------------------------------------------
# The SVM's dual QP (`stc._learning.supervised._qp`)
# ---------------------------------------------------------------------------
def qp_problem(seed, m=5, width=8):
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(m, width))
    return G @ G.T, rng.normal(size=m) + 1.0  # positive definite: one optimum


@pytest.mark.parametrize("seed", SEEDS)
def test_face_step(seed):
    H, c = qp_problem(seed)
    alpha = np.array([0.4, 0.0, 0.3, 0.2, 0.1])
    g = c - H @ alpha
    expected = reference.face_step(H, g, alpha)
    moved = _qp.face_step(H, g, alpha)
    assert moved == (expected is not None)
    if moved:
        np.testing.assert_allclose(alpha, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_simplex_qp(seed):
    H, c = qp_problem(seed)
    alpha = np.full(c.size, 2.0 / c.size)
    _qp.solve_simplex_qp(H, c, alpha, 2.0, 1e-12, 1000)
    expected, value = reference.solve_simplex_qp(H, c, 2.0)
    assert c @ alpha - 0.5 * alpha @ H @ alpha == pytest.approx(value, rel=1e-10, abs=1e-11)
    np.testing.assert_allclose(alpha, expected, atol=1e-6)


# ---------------------------------------------------------------------------
# The word codes (`_word_codes.SparseWordCodes`): the dense array is the reference
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_sparse_word_codes(seed):
    X, _, codes, _ = corpus(seed)
    rows = SparseWordCodes.from_dense(X.indptr, codes)
    assert np.array_equal(rows.toarray(), codes) and np.array_equal(np.asarray(rows), codes)
    assert rows.count_nonzero() == np.count_nonzero(codes)
    assert rows.zero_fraction() == 1.0 - np.count_nonzero(codes) / codes.size
    assert all(np.array_equal(rows.row(j), codes[j]) for j in range(X.nnz))
    order = np.random.default_rng(seed).permutation(X.nnz)
    assert np.array_equal(rows.gathered(order).toarray(), codes[order])
    changed = codes[::-1].copy()
    rows.assign(changed)
    assert np.array_equal(rows.copy().toarray(), changed)
    start = SparseWordCodes(X.indptr, codes.shape[1], 0.5)
    assert np.array_equal(start.toarray(), np.full(codes.shape, 0.5))
