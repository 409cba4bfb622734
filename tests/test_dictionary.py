"""Tests for dictionary learning (paper Sec. 2.3).

With the word codes fixed, F(beta) = sum_j l(y_j, s_j . beta[:, n_j]) over X's
non-zeros is minimised with every topic beta_k on the probability simplex.
Checked here: monotone decrease of F for both solvers, feasibility, the MM
step's formula and surrogate optimality, the optimum reached against scipy,
and monotone decrease of the full STC objective. The simplex projection and
the MM multiplier equation are tested in test_simplex.py.
"""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

import stc
from stc._learning.dictionary import (CorpusLayout, dictionary_loss, simplex_multiplier,
                                      update_dictionary)
from stc.datasets import load_newsgroups
from stc.losses import BernoulliLoss, GaussianLoss, PoissonLoss

from conftest import brief_fit
from stc._core._word_codes import SparseWordCodes


def rows(codes):
    """Dense (nnz, K) codes as the statistics kernels read them (one block: any grouping will do)."""
    return SparseWordCodes.from_dense([0, codes.shape[0]], codes)

# ---------------------------------------------------------------------------
# update_dictionary
# ---------------------------------------------------------------------------
def random_problem(seed, n_docs=30, n_features=25, n_topics=4, kind="counts", density=0.3,
                   unused=(), code_scale=1.0, zero_codes=0.0):
    """CSR data, a layout, word codes aligned with the non-zeros and a starting dictionary."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n_docs, n_features)) < density
    mask[:, 0] |= ~mask.any(axis=1)
    mask[rng.integers(0, n_docs, n_features), np.arange(n_features)] = True
    mask[:, list(unused)] = False
    if kind == "counts":
        values = rng.poisson(2.0, (n_docs, n_features)) + 1.0
    elif kind == "binary":
        values = np.ones((n_docs, n_features))
    else:
        values = rng.uniform(0.2, 3.0, (n_docs, n_features))
    X = sp.csr_matrix(np.where(mask, values, 0.0))
    X.indices = X.indices.astype(np.intc)
    X.indptr = X.indptr.astype(np.intc)
    codes = rng.uniform(0.1, 1.0, (X.nnz, n_topics)) * code_scale
    codes[rng.random(codes.shape) < zero_codes] = 0.0
    codes[~codes.any(axis=1), 0] = 0.5 * code_scale  # no word with an all-zero code
    beta = rng.dirichlet(np.ones(n_features), n_topics)
    return X, CorpusLayout(X), codes, beta

def reference_F(loss, X, codes, beta):
    """F(beta) with a plain loop over the stored entries."""
    total = 0.0
    for j, (n, y) in enumerate(zip(X.indices, X.data)):
        total += float(loss.loss(y, float(codes[j] @ beta[:, n])))
    return total

def assert_on_simplex(beta):
    assert np.all(beta >= 0.0)
    np.testing.assert_allclose(beta.sum(axis=1), 1.0, rtol=0, atol=1e-12)

def test_layout_and_dictionary_loss():
    X, layout, codes, beta = random_problem(0)
    assert layout.n_features == X.shape[1]
    # the CSC view lists every entry once, term by term
    assert np.array_equal(np.sort(layout.col_entries), np.arange(X.nnz))
    for n in range(X.shape[1]):
        entries = layout.col_entries[layout.col_ptr[n]:layout.col_ptr[n + 1]]
        assert np.all(X.indices[entries] == n)
    for loss in (PoissonLoss(), GaussianLoss()):
        value, means = dictionary_loss(loss, layout, codes, beta)
        np.testing.assert_allclose(means, np.sum(codes * beta[:, X.indices].T, axis=1),
                                   rtol=1e-13)
        assert value == pytest.approx(reference_F(loss, X, codes, beta), rel=1e-12)

def test_mm_statistics_is_F_and_the_ratio_sums_in_one_pass():
    """The fused pass equals F (dictionary_loss) and the MM sums of y_j / mean_j . s_j."""
    from stc._core._sparse_ops import mm_statistics

    X, layout, codes, beta = random_problem(3, zero_codes=0.2)
    codes[:3] = 0.0  # entries with mean 0: ratio 0, infinite loss where y > 0
    loss = PoissonLoss()
    value, sums = mm_statistics(loss, layout.col_ptr, layout.col_entries, layout.data, rows(codes),
                                np.ascontiguousarray(beta.T))
    means = np.sum(codes * beta[:, X.indices].T, axis=1)
    ratio = np.divide(X.data, means, out=np.zeros_like(means), where=means > 0)
    expected = np.zeros((X.shape[1], beta.shape[0]))
    np.add.at(expected, X.indices, ratio[:, None] * codes)
    np.testing.assert_allclose(sums, expected, rtol=1e-12, atol=1e-300)
    assert value == np.inf
    codes[:3] = 1.0
    value, _ = mm_statistics(loss, layout.col_ptr, layout.col_entries, layout.data, rows(codes),
                             np.ascontiguousarray(beta.T), with_ratio_sums=False)
    assert value == pytest.approx(reference_F(loss, X, codes, beta), rel=1e-12)
    assert value == pytest.approx(dictionary_loss(loss, layout, codes, beta)[0], rel=1e-12)


@pytest.mark.parametrize("n_jobs", [1, 3])
def test_mm_kernels_in_beta_layout_match_the_term_major_ones_bit_for_bit(n_jobs):
    """The batch fit's MM kernels ((K, N) layout) against `word_code_sums`, `mm_statistics`
    and `mm_update_rows`: same sums, same a, same rows and multipliers, bit for bit.

    More terms than one block of the (K, N) kernels (64), terms with 0 to 9 entries
    (the 4-entry groups and their tails), zero codes, an unused term and a collapsed topic.
    """
    from stc._core._simplex import mm_exact_rows, mm_update_rows
    from stc._core._sparse_ops import (mm_first_statistics, mm_statistics,
                                       mm_step_statistics, word_code_sums)

    X, layout, codes, beta = random_problem(5, n_docs=40, n_features=150, n_topics=7,
                                            density=0.12, unused=(3, 70), zero_codes=0.4)
    codes[:, 6] = 0.0  # topic 6 collapses: a = 0
    codes[:2] = 0.0    # entries with mean 0: ratio 0
    loss = PoissonLoss()
    means = np.sum(codes * beta[:, X.indices].T, axis=1)
    ratio = np.divide(X.data, means, out=np.zeros_like(means), where=means > 0)
    plain, weighted = word_code_sums(layout.col_ptr, layout.col_entries, rows(codes), ratio, n_jobs,
                                     with_plain=True)
    a, c = np.empty_like(beta), np.empty_like(beta)
    mm_first_statistics(layout.col_ptr, layout.col_entries, rows(codes), ratio, beta, a, c, n_jobs)
    assert np.array_equal(c, plain.T) and np.array_equal(a, beta * weighted.T)

    old_nu, new_nu = np.full(7, np.nan), np.full(7, np.nan)
    old = mm_update_rows(beta, weighted, plain.T.copy(), old_nu, 100, n_jobs)
    new = mm_exact_rows(beta, a, c, new_nu, 100, n_jobs)
    assert np.array_equal(new, old) and np.array_equal(new_nu, old_nu, equal_nan=True)
    assert np.isnan(new_nu[6]) and np.array_equal(new[6], beta[6])

    value, sums = mm_statistics(loss, layout.col_ptr, layout.col_entries, layout.data, rows(codes),
                                np.ascontiguousarray(new.T), n_jobs)
    next_a = np.empty_like(beta)
    assert mm_step_statistics(loss, layout.col_ptr, layout.col_entries, layout.col_data, rows(codes),
                              new, next_a, n_jobs) == value
    assert np.array_equal(next_a, new * sums.T)
    assert mm_step_statistics(loss, layout.col_ptr, layout.col_entries, layout.col_data, rows(codes),
                              new, None, n_jobs) == value
    with pytest.raises(ValueError, match="not beta itself"):
        mm_exact_rows(beta, a, c, new_nu, 100, n_jobs, out=beta)


@pytest.mark.parametrize("n_jobs", [1, 3])
def test_mm_kernels_read_a_batchs_columns_out_of_the_whole_vocabulary(n_jobs):
    """Online learning's batch: the layout's terms are some columns of a larger beta. With
    ``columns`` the kernels read them in place: the same sums, a and F, bit for bit, as
    with those columns gathered into a (K, terms) array first."""
    from stc._core._sparse_ops import mm_first_statistics, mm_step_statistics

    X, layout, codes, beta_batch = random_problem(6, n_docs=30, n_features=90, n_topics=5,
                                                  density=0.15, zero_codes=0.3)
    rng = np.random.default_rng(6)
    columns = np.sort(rng.choice(400, size=90, replace=False)).astype(np.intp)
    beta = rng.gamma(1.0, size=(5, 400))
    beta[:, columns] = beta_batch  # the batch's terms among the vocabulary
    loss = PoissonLoss()
    means = np.sum(codes * beta_batch[:, X.indices].T, axis=1)
    ratio = np.divide(X.data, means, out=np.zeros_like(means), where=means > 0)
    expected = [np.empty_like(beta_batch) for _ in range(3)]
    mm_first_statistics(layout.col_ptr, layout.col_entries, rows(codes), ratio, beta_batch,
                        expected[0], expected[1], n_jobs)
    value = mm_step_statistics(loss, layout.col_ptr, layout.col_entries, layout.col_data,
                               rows(codes), beta_batch, expected[2], n_jobs)
    got = [np.empty_like(beta_batch) for _ in range(3)]
    mm_first_statistics(layout.col_ptr, layout.col_entries, rows(codes), ratio, beta, got[0], got[1],
                        n_jobs, columns)
    assert mm_step_statistics(loss, layout.col_ptr, layout.col_entries, layout.col_data, rows(codes),
                              beta, got[2], n_jobs, columns) == value
    for a, b in zip(got, expected):
        assert np.array_equal(a, b)
    out = np.empty_like(beta_batch)
    # online learning's steps need a only: without the loss, the same a and F is NaN
    assert np.isnan(mm_step_statistics(loss, layout.col_ptr, layout.col_entries,
                                       layout.col_data, rows(codes), beta, out, n_jobs, columns,
                                       with_loss=False))
    assert np.array_equal(out, expected[2])
    for bad, match in [(columns[:-1], "90 entries"), (columns.astype(np.int32), "intp"),
                       (np.where(columns == columns[-1], 400, columns), r"\[0, 400\)")]:
        with pytest.raises(ValueError, match=match):
            mm_step_statistics(loss, layout.col_ptr, layout.col_entries, layout.col_data, rows(codes),
                               beta, out, n_jobs, bad)
        with pytest.raises(ValueError, match=match):
            mm_first_statistics(layout.col_ptr, layout.col_entries, rows(codes), ratio, beta, out,
                                got[1], n_jobs, bad)
    with pytest.raises(ValueError, match=r"beta must be \(5, 90\)"):
        mm_step_statistics(loss, layout.col_ptr, layout.col_entries, layout.col_data, rows(codes),
                           beta, out, n_jobs)


CASES = [
    ("poisson", "mm", "counts"),
    ("poisson", "pg", "counts"),
    ("gaussian", "pg", "reals"),
    ("bernoulli", "pg", "binary"),
]
LOSSES = {"poisson": PoissonLoss(), "gaussian": GaussianLoss(), "bernoulli": BernoulliLoss()}

@pytest.mark.parametrize("loss_name,method,kind", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_update_dictionary_never_increases_F(loss_name, method, kind, seed):
    loss = LOSSES[loss_name]
    scale = 0.5 if loss_name == "bernoulli" else 3.0
    X, layout, codes, beta = random_problem(seed, kind=kind, code_scale=scale, zero_codes=0.2)
    if loss_name == "bernoulli":
        _, means = dictionary_loss(loss, layout, codes, beta)
        codes *= 0.8 / max(means.max(), 0.8)  # every mean starts inside (0, 1)
    value, _ = dictionary_loss(loss, layout, codes, beta)
    assert np.isfinite(value)
    history = [value]
    for _ in range(25):
        new_beta, new_value, n_steps = update_dictionary(loss, layout, codes, beta,
                                                         method=method, max_iter=1, tol=0.0)
        assert n_steps in (0, 1)
        assert_on_simplex(new_beta)
        assert new_value == pytest.approx(reference_F(loss, X, codes, new_beta), rel=1e-11)
        if n_steps == 0:
            assert np.array_equal(new_beta, beta)
        beta = new_beta
        history.append(new_value)
    history = np.array(history)
    assert np.all(np.isfinite(history))
    assert np.all(np.diff(history) <= 0.0)
    assert history[-1] < history[0]
    # many steps at once: same guarantee, and the input is never modified
    beta0 = beta.copy()
    final_beta, final_value, n_steps = update_dictionary(loss, layout, codes, beta,
                                                         method=method, max_iter=50, tol=0.0)
    assert np.array_equal(beta, beta0)
    assert final_value <= history[-1]
    assert_on_simplex(final_beta)
    if loss_name == "poisson":
        # every observed word keeps a positive mean: F stays finite
        _, means = dictionary_loss(loss, layout, codes, final_beta)
        assert np.all(means > 0)
    if loss_name == "bernoulli":
        _, means = dictionary_loss(loss, layout, codes, final_beta)
        assert np.all((means > 0) & (means < 1))

def test_auto_method_picks_mm_for_poisson_and_pg_otherwise():
    X, layout, codes, beta = random_problem(3, kind="counts")
    for loss, method in ((PoissonLoss(), "mm"), (GaussianLoss(), "pg")):
        auto = update_dictionary(loss, layout, codes, beta, method="auto", max_iter=5, tol=0.0)
        explicit = update_dictionary(loss, layout, codes, beta, method=method, max_iter=5,
                                     tol=0.0)
        assert np.array_equal(auto[0], explicit[0]) and auto[1] == explicit[1]
    with pytest.raises(ValueError, match="method"):
        update_dictionary(PoissonLoss(), layout, codes, beta, method="newton")

def test_mm_step_zeroes_unused_terms_and_keeps_collapsed_topics():
    unused = (2, 9, 17)
    X, layout, codes, beta = random_problem(4, unused=unused)
    assert np.all(np.bincount(X.indices, minlength=X.shape[1])[list(unused)] == 0)
    codes[:, 1] = 0.0  # topic 1 is not used by any word: nothing is known about it
    beta = np.full_like(beta, 1.0 / X.shape[1])
    new_beta, value, n_steps = update_dictionary(PoissonLoss(), layout, codes, beta,
                                                 method="mm", max_iter=1, tol=0.0)
    assert n_steps == 1
    used = [k for k in range(beta.shape[0]) if k != 1]
    assert np.all(new_beta[np.ix_(used, list(unused))] == 0.0)
    assert np.all(new_beta[np.ix_(used, [n for n in range(X.shape[1]) if n not in unused])] > 0)
    assert np.array_equal(new_beta[1], beta[1])
    assert_on_simplex(new_beta)
    assert value < dictionary_loss(PoissonLoss(), layout, codes, beta)[0]

def test_thread_count_does_not_change_the_dictionary():
    X, layout, codes, beta = random_problem(5, n_docs=200, n_features=120, density=0.1)
    for loss, method in ((PoissonLoss(), "mm"), (PoissonLoss(), "pg"), (GaussianLoss(), "pg")):
        one = update_dictionary(loss, layout, codes, beta, method=method, max_iter=20, tol=0,
                                n_jobs=1)
        two = update_dictionary(loss, layout, codes, beta, method=method, max_iter=20, tol=0,
                                n_jobs=2)
        assert np.array_equal(one[0], two[0]) and one[1] == two[1] and one[2] == two[2]

def scipy_optimum(loss, X, codes, n_topics, start):
    """min F(beta) over beta_k in the simplex, by SLSQP with the analytic gradient."""
    n_features = X.shape[1]
    b = codes  # (nnz, K)

    def unpack(z):
        return z.reshape(n_topics, n_features)

    def fun(z):
        beta = unpack(z)
        means = np.sum(b * beta[:, X.indices].T, axis=1)
        value = loss.loss(X.data, means)
        return float(np.sum(value)) if np.all(np.isfinite(value)) else 1e30

    def grad(z):
        beta = unpack(z)
        means = np.maximum(np.sum(b * beta[:, X.indices].T, axis=1), 1e-300)
        g = loss.gradient(X.data, means)
        out = np.zeros((n_topics, n_features))
        np.add.at(out.T, X.indices, b * g[:, None])
        return out.ravel()

    constraints = [{"type": "eq", "fun": (lambda z, k=k: unpack(z)[k].sum() - 1.0),
                    "jac": (lambda z, k=k: np.eye(n_topics)[k].repeat(n_features))}
                   for k in range(n_topics)]
    res = minimize(fun, start.ravel(), jac=grad, method="SLSQP",
                   bounds=[(1e-14, 1.0)] * start.size, constraints=constraints,
                   options={"ftol": 1e-15, "maxiter": 5000})
    return res.fun, unpack(res.x)

def tiny_problem(seed, unused=(), code_scale=1.0):
    rng = np.random.default_rng(seed)
    n_docs, n_features = 10, 6
    dense = rng.poisson(2.0, (n_docs, n_features)) + 0.0
    dense[rng.random(dense.shape) < 0.35] = 0.0
    dense[rng.integers(0, n_docs, n_features), np.arange(n_features)] += 1.0  # every term occurs
    dense[:, list(unused)] = 0.0
    X = sp.csr_matrix(dense)
    X.indices = X.indices.astype(np.intc)
    X.indptr = X.indptr.astype(np.intc)
    codes = rng.uniform(0.2, 1.5, (X.nnz, 2)) * code_scale
    return X, CorpusLayout(X), codes

@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_mm_reaches_the_constrained_optimum(seed):
    X, layout, codes = tiny_problem(seed)
    loss = PoissonLoss()
    start = np.full((2, X.shape[1]), 1.0 / X.shape[1])
    reference, ref_beta = scipy_optimum(loss, X, codes, 2, start)
    beta, value, _ = update_dictionary(loss, layout, codes, start, method="mm", max_iter=20000,
                                       tol=0.0)
    assert value <= reference * (1 + 1e-5)
    assert value >= reference * (1 - 1e-5)  # scipy is a genuine optimum: no better point
    assert_on_simplex(beta)
    # the projected gradient reaches the same optimum
    beta_pg, value_pg, _ = update_dictionary(loss, layout, codes, start, method="pg",
                                             max_iter=20000, tol=0.0)
    assert value_pg == pytest.approx(reference, rel=1e-5)

@pytest.mark.parametrize("seed", [0, 1])
def test_pg_reaches_the_constrained_optimum_gaussian(seed):
    X, layout, codes = tiny_problem(seed)
    loss = GaussianLoss()
    start = np.full((2, X.shape[1]), 1.0 / X.shape[1])
    reference, _ = scipy_optimum(loss, X, codes, 2, start)
    _, value, _ = update_dictionary(loss, layout, codes, start, method="pg", max_iter=20000,
                                    tol=0.0)
    assert value == pytest.approx(reference, rel=1e-5)

def test_mm_reaches_the_optimum_with_an_unused_term_and_large_codes():
    """Codes whose means overshoot the data: the optimum puts weight on the unused term.

    Moving weight onto a term that never occurs lowers every mean at no cost.
    The MM step's multiplier is then clamped at -c_spare (0 for an unused
    term) and the spare mass goes there (`mm_update_row`), which reaches the
    same optimum as projected gradient and scipy.
    """
    X, layout, codes = tiny_problem(0, unused=(5,), code_scale=20.0)
    loss = PoissonLoss()
    start = np.full((2, X.shape[1]), 1.0 / X.shape[1])
    reference, ref_beta = scipy_optimum(loss, X, codes, 2, start)
    assert np.all(ref_beta[:, 5] > 0.1)  # the optimum does use the unused term
    beta_pg, value_pg, _ = update_dictionary(loss, layout, codes, start, method="pg",
                                             max_iter=20000, tol=0.0)
    assert value_pg == pytest.approx(reference, rel=1e-5)
    beta_mm, value_mm, _ = update_dictionary(loss, layout, codes, start, method="mm",
                                             max_iter=20000, tol=0.0)
    assert value_mm == pytest.approx(reference, rel=1e-10)
    assert value_mm <= reference * (1 + 1e-12)
    assert_on_simplex(beta_mm)
    np.testing.assert_allclose(beta_mm[:, 5], ref_beta[:, 5], rtol=1e-4)


def test_mm_step_minimises_its_surrogate_when_the_codes_overshoot():
    """KKT of the MM surrogate sum_n (c_n beta_n - a_n log beta_n) on the simplex.

    beta_n = a_n / (c_n + nu) where a_n > 0, and c_n + nu >= 0 where a_n = 0,
    with equality wherever such an entry gets weight (the spare mass).
    """
    from stc._core._simplex import mm_update_rows

    rng = np.random.default_rng(3)
    n = 12
    beta = rng.dirichlet(np.ones(n), 3)
    beta[:, [2, 7]] = 0.0  # a = 0 there
    weighted = rng.uniform(0.1, 1.0, (n, 3))
    code_sums = rng.uniform(5.0, 50.0, (3, n))  # c >> a: nu* << 0
    code_sums[0, 7] = 0.0  # topic 0: a term that never occurs
    code_sums[1, 2] = 1.0  # topic 1: a used term with a = 0 and a small c
    multipliers = np.full(3, np.nan)
    new = mm_update_rows(beta, weighted, code_sums, multipliers)
    assert_on_simplex(new)
    a = beta * weighted.T
    for k in range(3):
        positive = a[k] > 0
        nu = multipliers[k]
        np.testing.assert_allclose(new[k, positive], a[k, positive] / (code_sums[k, positive] + nu),
                                   rtol=1e-12)
        assert np.all(code_sums[k, ~positive] + nu >= -1e-12 * code_sums[k].max())
        spare = ~positive & (new[k] > 0)
        np.testing.assert_allclose(code_sums[k, spare] + nu, 0.0, atol=1e-12 * code_sums[k].max())
    assert multipliers[0] == 0.0 and new[0, 7] > 0.5  # the unused term takes the spare mass
    assert multipliers[1] == -1.0 and new[1, 2] > 0.5
    # topic 2: either nu* >= -c_spare and the zeros stay, or the clamp applies
    c_spare = code_sums[2, [2, 7]].min()
    assert ((multipliers[2] > -c_spare and np.all(new[2, [2, 7]] == 0.0))
            or multipliers[2] == -c_spare)


# ---------------------------------------------------------------------------
# The corpus objective of a full fit
# ---------------------------------------------------------------------------
def count_matrix(seed, n_docs=60, n_features=40):
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.6, (n_docs, n_features)).astype(float)
    dense[:, 0] += dense.sum(axis=1) == 0
    return sp.csr_matrix(dense)

@pytest.mark.parametrize("loss,theta_penalty,code_penalty", [
    (loss, tp, cp)
    for loss in ("poisson", "gaussian", "bernoulli")
    for tp, cp in (("l2", "l1"), ("l1", "l2"), ("l2", "l2"), ("l1", "l1"))
])
@brief_fit
def test_fit_objective_never_increases_small_data(loss, theta_penalty, code_penalty):
    X = count_matrix(0)
    if loss == "bernoulli":
        X = X.sign()
    model = stc.STC(n_topics=5, max_iter=15, tol=0, random_state=0, loss=loss,
                    theta_penalty=theta_penalty, code_penalty=code_penalty).fit(X)
    objective = model.objective_
    assert objective.shape == (model.n_iter_,) and model.n_iter_ >= 2
    assert np.all(np.isfinite(objective))
    assert np.all(np.diff(objective) <= 1e-12 * np.abs(objective[:-1])), np.diff(objective)
    assert_on_simplex(model.components_)

@brief_fit
def test_fit_objective_never_increases_newsgroups():
    X = load_newsgroups("train").data[:300]
    model = stc.STC(n_topics=10, max_iter=15, tol=0, random_state=0).fit(X)
    objective = model.objective_
    assert model.n_iter_ >= 5
    assert np.all(np.isfinite(objective))
    assert np.all(np.diff(objective) <= 1e-12 * np.abs(objective[:-1])), np.diff(objective)
    assert objective[-1] < objective[0]
    assert_on_simplex(model.components_)
    # terms that never occur in these documents carry no weight
    unused = np.asarray(X.sum(axis=0)).ravel() == 0
    assert unused.any() and np.all(model.components_[:, unused] == 0.0)



def test_compiled_mm_update_matches_its_formula():
    """`mm_update_rows` = a / (c + nu) row by row, nu solving the multiplier equation.

    Written out with numpy: a = beta * sum_j s_jk y_j / mean_j, c = sum_j s_jk
    over each term's entries, nu from `simplex_multiplier`; a collapsed topic
    (all its codes zero) is returned unchanged.
    """
    from stc._core._simplex import mm_update_rows
    from stc._core._sparse_ops import word_code_sums

    X, layout, codes, beta = random_problem(12, n_docs=60, n_features=40, n_topics=5,
                                            unused=(3, 30), zero_codes=0.3)
    codes[:, 2] = 0.0  # collapsed topic
    codes[~codes.any(axis=1), 0] = 0.5  # every observed word keeps a positive mean
    _, means = dictionary_loss(PoissonLoss(), layout, codes, beta)
    ratio = layout.data / means
    weighted = np.zeros((X.shape[1], 5))
    plain = np.zeros((X.shape[1], 5))
    np.add.at(weighted, layout.indices, codes * ratio[:, None])
    np.add.at(plain, layout.indices, codes)
    pair = word_code_sums(layout.col_ptr, layout.col_entries, rows(codes), ratio, with_plain=True)
    np.testing.assert_allclose(pair[0], plain, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(pair[1], weighted, rtol=1e-13, atol=1e-15)
    # the same sums as the single-sum function (the same order; the compiler
    # may round the weighted products differently)
    assert np.array_equal(pair[0], word_code_sums(layout.col_ptr, layout.col_entries, rows(codes),
                                                  np.empty(0)))
    np.testing.assert_allclose(pair[1], word_code_sums(layout.col_ptr, layout.col_entries, rows(codes),
                                                       ratio), rtol=1e-14, atol=0)
    a = beta * weighted.T
    c = plain.T
    nu = simplex_multiplier(a.T, c.T)
    assert np.isnan(nu[2]) and np.all(np.isfinite(np.delete(nu, 2)))
    expected = beta.copy()
    for k in (0, 1, 3, 4):
        row = np.where(a[k] > 0, a[k] / (c[k] + nu[k]), 0.0)
        assert row.sum() == pytest.approx(1.0, rel=1e-10)
        expected[k] = row / row.sum()
    multipliers = np.full(5, np.nan)
    got = mm_update_rows(beta, pair[1], np.ascontiguousarray(pair[0].T), multipliers)
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-15)
    np.testing.assert_allclose(multipliers, nu, rtol=1e-12)
    # warm starts (good, poor, outside the bracket) reach the same multipliers
    for start in (nu * (1 + 1e-3), nu * 0.5 + 1.0, np.full(5, -1e30)):
        warm = start.copy()
        again = mm_update_rows(beta, pair[1], np.ascontiguousarray(pair[0].T), warm)
        np.testing.assert_allclose(warm, nu, rtol=1e-12)
        np.testing.assert_allclose(again, got, rtol=1e-12, atol=1e-15)
    assert np.array_equal(got[2], beta[2])
    assert np.all(got[:, [3, 30]][[0, 1, 3, 4]] == 0.0)  # unused terms get no weight
    with pytest.raises(ValueError, match="weighted_sums"):
        mm_update_rows(beta, pair[1].T.copy(), np.ascontiguousarray(pair[0].T), multipliers)
