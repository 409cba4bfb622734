"""Tests for the hierarchical sparse-coding step (paper Sec. 2.3, problem (2) with beta fixed).

Covers the document-code closed forms (eq. (3) and footnote 3), the optimality
(KKT) conditions of converged document solves, monotone decrease of the
document objective, agreement of the compiled kernel with the numpy sweep,
determinism across thread counts, empty documents, and the returned
objective against an independent evaluation of objective (2).
"""
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from stc._core._coding import theta_from_codes
from stc._core.reference import common_start_value, theta_update
from stc._learning.coding import (CodingProblem, code_documents, code_new_documents, initial_codes,
                                  stc_objective)
from stc.losses import BernoulliLoss, GaussianLoss, PoissonLoss, PythonLoss

from conftest import NumpyPoisson

L1, L2 = 0, 1
PENALTY_CODES = {"l1": L1, "l2": L2}


# ---------------------------------------------------------------------------
# Problem builders and an independent objective
# ---------------------------------------------------------------------------
def random_corpus(seed, n_docs=8, n_features=20, density=0.4, kind="counts", empty=()):
    """CSR document-term matrix (int32 indices, sorted) with the given rows left empty."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n_docs, n_features)) < density
    mask[:, 0] |= ~mask.any(axis=1)  # every row non-empty unless asked otherwise
    if kind == "counts":
        values = rng.poisson(1.5, (n_docs, n_features)) + 1.0
    elif kind == "binary":
        values = np.ones((n_docs, n_features))
    elif kind == "proportions":
        values = rng.uniform(0.15, 0.9, (n_docs, n_features))
    else:  # non-negative reals
        values = rng.uniform(0.2, 4.0, (n_docs, n_features))
    dense = np.where(mask, values, 0.0)
    dense[list(empty)] = 0.0
    X = sp.csr_matrix(dense)
    X.sort_indices()
    X.indices = X.indices.astype(np.intc)
    X.indptr = X.indptr.astype(np.intc)
    return X


def random_dictionary(seed, n_topics, n_features):
    rng = np.random.default_rng(seed + 1000)
    return rng.dirichlet(np.full(n_features, 0.8), n_topics)


def document_objectives(loss, X, beta, codes, theta, lam, gamma, rho, theta_penalty,
                        code_penalty, linear=None):
    """Objective (2) of each document, written out term by term with loops.

    Returns (total, loss part) per document:
    sum_n l(w_n, s_n . beta_n) + lam pen(theta) + sum_n (gamma ||s_n - theta||^2
    + rho pen(s_n)) - linear . theta.
    """
    n_docs = X.shape[0]
    totals, losses = np.zeros(n_docs), np.zeros(n_docs)
    for d in range(n_docs):
        lo, hi = X.indptr[d], X.indptr[d + 1]
        th = theta[d]
        recon = 0.0
        rest = 0.0
        for j in range(lo, hi):
            s = codes[j]
            mean = float(np.dot(s, beta[:, X.indices[j]]))
            recon += float(loss.loss(X.data[j], mean))
            rest += gamma * float(np.sum((s - th) ** 2))
            rest += rho * float(np.sum(s) if code_penalty == "l1" else np.sum(s * s))
        rest += lam * float(np.sum(th) if theta_penalty == "l1" else np.sum(th * th))
        if linear is not None:
            rest -= float(np.dot(linear[d], th))
        totals[d] = recon + rest
        losses[d] = recon
    return totals, losses


def objective_gradients(loss, X, beta, codes, theta, lam, gamma, rho, theta_penalty,
                        code_penalty, linear=None):
    """Partial derivatives of the document objective wrt every s_nk and theta_k."""
    n_docs = X.shape[0]
    doc = np.repeat(np.arange(n_docs), np.diff(X.indptr))
    b = beta[:, X.indices].T  # (nnz, K): beta_kn of each stored word
    means = np.sum(codes * b, axis=1)
    grad_loss = loss.gradient(X.data, means)
    code_pen = rho if code_penalty == "l1" else 2.0 * rho * codes
    d_codes = b * grad_loss[:, None] + 2.0 * gamma * (codes - theta[doc]) + code_pen
    coupling = np.zeros_like(theta)
    np.add.at(coupling, doc, codes - theta[doc])
    d_theta = (lam if theta_penalty == "l1" else 2.0 * lam * theta) - 2.0 * gamma * coupling
    if linear is not None:
        d_theta = d_theta - linear
    scale_codes = (np.abs(b * grad_loss[:, None]) + 2.0 * gamma * np.abs(codes - theta[doc])
                   + np.abs(code_pen) + 1.0)
    scale_theta = np.abs(lam if theta_penalty == "l1" else 2 * lam * theta) + 2 * gamma * (
        np.abs(coupling)) + (0.0 if linear is None else np.abs(linear)) + 1.0
    return d_codes, d_theta, scale_codes, scale_theta


class NumpyGaussian(PythonLoss):
    name = "numpy-gaussian"

    def loss(self, y, mean):
        return 0.5 * (np.asarray(y, float) - mean) ** 2

    def gradient(self, y, mean):
        return np.asarray(mean, float) - y

    def hessian(self, y, mean):
        return np.ones(np.broadcast(y, mean).shape)


def data_kind(loss_name):
    return {"poisson": "counts", "gaussian": "reals", "bernoulli": "proportions"}[loss_name]


class Delegate(PythonLoss):
    """A PythonLoss that forwards to a compiled loss: sends it down the numpy sweep."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.name = compiled.name
        self.mean_domain = compiled.mean_domain

    def loss(self, y, mean):
        return self.compiled.loss(y, mean)

    def gradient(self, y, mean):
        return self.compiled.gradient(y, mean)

    def hessian(self, y, mean):
        return self.compiled.hessian(y, mean)

    def solve_coordinate(self, y, b, mean_rest, quad, lin, x_start=0.0):
        return self.compiled.solve_coordinate(y, b, mean_rest, quad, lin, x_start)


# None: the problem's default (theta_k moved with its word codes by block Newton
# steps); 0: the paper's plain alternation of word-code and document-code steps
NEWTON_MODES = [None, 0]


def problem_of(loss, lam, gamma, rho, theta_penalty, code_penalty, max_iter=50, tol=1e-4,
               newton_steps=None):
    extra = {} if newton_steps is None else {"newton_steps": newton_steps}
    return CodingProblem(loss, lam, gamma, rho, theta_penalty, code_penalty, max_iter, tol,
                         **extra)


def code_result(loss, X, beta, codes, theta, newton_steps=None, *, theta_linear=None,
                active=None, n_jobs=None, **params):
    """`code_documents` (warm start) on the problem given by loose parameters."""
    return code_documents(problem_of(loss, newton_steps=newton_steps, **params), X, beta, codes,
                          theta, theta_linear=theta_linear, active=active, n_jobs=n_jobs)


def code(loss, X, beta, codes, theta, newton_steps=None, **params):
    """Warm-start coding; returns (objective, loss part, sweeps, means) per document."""
    result = code_result(loss, X, beta, codes, theta, newton_steps, **params)
    return result.objective, result.loss, result.n_iter, result.means



LOSSES = {"poisson": PoissonLoss(), "gaussian": GaussianLoss(), "bernoulli": BernoulliLoss()}
PENALTY_PAIRS = [("l1", "l1"), ("l1", "l2"), ("l2", "l1"), ("l2", "l2")]


def start_values(X, n_topics, loss_name):
    # Bernoulli: start with means inside (0, 1)
    return initial_codes(X, n_topics, 0.5 if loss_name == "bernoulli" else 1.0)


# ---------------------------------------------------------------------------
# Document code: eq. (3), footnote 3, with a linear term
# ---------------------------------------------------------------------------
def theta_problem(t, s, lam, gamma, linear, penalty):
    pen = lam * t if penalty == L1 else lam * t * t
    return pen + gamma * np.sum((s - t) ** 2) - linear * t


@settings(max_examples=300, deadline=None)
@given(
    s=st.lists(st.one_of(st.just(0.0), st.floats(0.0, 10.0, allow_subnormal=False)),
               min_size=1, max_size=25),
    lam=st.one_of(st.just(0.0), st.floats(0.0, 5.0, allow_subnormal=False)),
    gamma=st.floats(0.01, 5.0),
    linear=st.one_of(st.just(0.0), st.floats(-10.0, 10.0, allow_subnormal=False)),
    penalty=st.sampled_from([L1, L2]),
)
def test_theta_update_minimises_the_theta_problem(s, lam, gamma, linear, penalty):
    s = np.array(s)
    m = s.size
    ours = theta_from_codes(s.mean(), linear, m, lam, gamma, penalty)
    vectorised = theta_update(np.array([s.mean()]), np.array([linear]), np.array([m]),
                                   lam, gamma, penalty)
    np.testing.assert_allclose(vectorised, [ours], rtol=1e-14, atol=0)
    assert ours >= 0.0
    upper = s.max() + abs(linear) / (2 * gamma * m) + 1.0
    res = minimize_scalar(theta_problem, bounds=(0.0, upper), method="bounded",
                          args=(s, lam, gamma, linear, penalty),
                          options={"xatol": 1e-12 * upper})
    best = min(res.fun, theta_problem(0.0, s, lam, gamma, linear, penalty))
    value = theta_problem(ours, s, lam, gamma, linear, penalty)
    scale = lam * upper * upper + gamma * np.sum(s * s) + abs(linear) * upper + 1.0
    assert value <= best + 1e-12 * scale
    # strongly convex (curvature >= 2 gamma m): the minimiser itself is close
    reference = res.x if res.fun <= theta_problem(0.0, s, lam, gamma, linear, penalty) else 0.0
    assert abs(ours - reference) <= 1e-6 * upper


def test_theta_update_is_the_papers_formula():
    rng = np.random.default_rng(3)
    sbar = rng.uniform(0, 3, 200)
    n = rng.integers(1, 50, 200).astype(float)
    lam, gamma = 0.7, 0.3
    # eq. (3): truncated averaging
    np.testing.assert_allclose(theta_update(sbar, 0.0, n, lam, gamma, L1),
                               np.maximum(0.0, sbar - lam / (2 * gamma * n)), rtol=1e-14)
    # footnote 3: theta = gamma / (lam / |I| + gamma) * sbar
    np.testing.assert_allclose(theta_update(sbar, 0.0, n, lam, gamma, L2),
                               gamma / (lam / n + gamma) * sbar, rtol=1e-14)
    for i in range(0, 200, 17):
        for penalty in (L1, L2):
            assert theta_from_codes(sbar[i], 0.0, n[i], lam, gamma, penalty) == pytest.approx(
                float(theta_update(sbar[i:i + 1], 0.0, n[i:i + 1], lam, gamma, penalty)[0]),
                rel=1e-14, abs=0)


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
@pytest.mark.parametrize("theta_penalty,code_penalty", PENALTY_PAIRS)
@pytest.mark.parametrize("with_linear", [False, True])
@pytest.mark.parametrize("newton_steps", NEWTON_MODES)
def test_theta_after_coding_is_closed_form_of_returned_codes(loss_name, theta_penalty,
                                                            code_penalty, with_linear,
                                                            newton_steps):
    X = random_corpus(11, n_docs=12, kind=data_kind(loss_name))
    K = 3
    beta = random_dictionary(11, K, X.shape[1])
    codes, theta = start_values(X, K, loss_name)
    rng = np.random.default_rng(5)
    linear = rng.normal(scale=0.5, size=(X.shape[0], K)) if with_linear else None
    lam, gamma = 0.4, 0.3
    code(LOSSES[loss_name], X, beta, codes, theta, newton_steps, lam=lam, gamma=gamma, rho=0.05,
         theta_penalty=theta_penalty, code_penalty=code_penalty, max_iter=7, tol=1e-6,
         theta_linear=linear)
    lengths = np.diff(X.indptr)
    for d in range(X.shape[0]):
        sbar = codes[X.indptr[d]:X.indptr[d + 1]].mean(axis=0)
        lin = linear[d] if with_linear else np.zeros(K)
        expected = theta_update(sbar, lin, lengths[d], lam, gamma,
                                     PENALTY_CODES[theta_penalty])
        np.testing.assert_allclose(theta[d], expected, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------
# KKT conditions of converged document solves
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("loss_name", sorted(LOSSES))
@pytest.mark.parametrize("theta_penalty,code_penalty", PENALTY_PAIRS)
@pytest.mark.parametrize("newton_steps", NEWTON_MODES)
def test_kkt_conditions_at_convergence(loss_name, theta_penalty, code_penalty, newton_steps):
    X = random_corpus(2, n_docs=6, n_features=15, kind=data_kind(loss_name))
    K = 3
    beta = random_dictionary(2, K, X.shape[1])
    codes, theta = start_values(X, K, loss_name)
    params = dict(lam=0.3, gamma=0.5, rho=0.05, theta_penalty=theta_penalty,
                  code_penalty=code_penalty)
    loss = LOSSES[loss_name]
    _, _, n_iter, means = code(loss, X, beta, codes, theta, newton_steps, max_iter=50000,
                               tol=0.0, **params)
    assert np.all(n_iter < 50000), "the solve did not converge"
    np.testing.assert_allclose(means, np.sum(codes * beta[:, X.indices].T, axis=1),
                               rtol=1e-12, atol=1e-15)
    if loss_name == "bernoulli":
        assert np.all((means > 0) & (means < 1))
    assert np.all(codes >= 0) and np.all(theta >= 0)
    d_codes, d_theta, scale_codes, scale_theta = objective_gradients(loss, X, beta, codes, theta,
                                                                     **params)
    positive = codes > 0
    # s > 0: stationary; s = 0: the objective does not decrease into s > 0
    assert np.all(np.abs(d_codes[positive]) <= 1e-6 * scale_codes[positive])
    assert np.all(d_codes[~positive] >= -1e-6 * scale_codes[~positive])
    # theta is set in closed form last: its conditions hold to rounding
    assert np.all(np.abs(d_theta[theta > 0]) <= 1e-10 * scale_theta[theta > 0])
    assert np.all(d_theta[theta == 0] >= -1e-10 * scale_theta[theta == 0])


@pytest.mark.parametrize("newton_steps", NEWTON_MODES)
def test_kkt_conditions_with_linear_term_and_sparse_solution(newton_steps):
    """Larger rho gives many exact zeros; a linear term b_d . theta enters the theta step."""
    X = random_corpus(4, n_docs=10, n_features=25, density=0.5)
    K = 5
    beta = random_dictionary(4, K, X.shape[1])
    codes, theta = initial_codes(X, K)
    linear = np.random.default_rng(0).normal(scale=0.3, size=(X.shape[0], K))
    params = dict(lam=0.2, gamma=0.4, rho=0.6, theta_penalty="l1", code_penalty="l1")
    loss = PoissonLoss()
    _, _, n_iter, _ = code(loss, X, beta, codes, theta, newton_steps, max_iter=50000, tol=0.0,
                           theta_linear=linear, **params)
    assert np.all(n_iter < 50000)
    assert np.mean(codes == 0) > 0.2, "expected a sparse solution for this test to bite"
    d_codes, d_theta, scale_codes, scale_theta = objective_gradients(
        loss, X, beta, codes, theta, linear=linear, **params)
    positive = codes > 0
    assert np.all(np.abs(d_codes[positive]) <= 1e-6 * scale_codes[positive])
    assert np.all(d_codes[~positive] >= -1e-6 * scale_codes[~positive])
    assert np.all(np.abs(d_theta[theta > 0]) <= 1e-10 * scale_theta[theta > 0])
    assert np.all(d_theta[theta == 0] >= -1e-10 * scale_theta[theta == 0])


# ---------------------------------------------------------------------------
# Monotone decrease of the document objective
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("loss", [PoissonLoss(), GaussianLoss(), BernoulliLoss(), NumpyPoisson(),
                                  NumpyGaussian()], ids=lambda loss: type(loss).__name__)
@pytest.mark.parametrize("theta_penalty,code_penalty", [("l1", "l1"), ("l2", "l2"), ("l2", "l1")])
@pytest.mark.parametrize("newton_steps", NEWTON_MODES + [1, 3])
def test_document_objective_never_increases(loss, theta_penalty, code_penalty, newton_steps):
    name = {"NumpyPoisson": "poisson", "NumpyGaussian": "gaussian"}.get(type(loss).__name__,
                                                                         loss.name)
    kind = "binary" if name == "bernoulli" else data_kind(name)
    X = random_corpus(7, n_docs=15, n_features=30, kind=kind)
    K = 4
    beta = random_dictionary(7, K, X.shape[1])
    codes, theta = start_values(X, K, name)
    if name == "bernoulli":
        codes *= 0.5
    params = dict(lam=0.2, gamma=0.3, rho=0.1, theta_penalty=theta_penalty,
                  code_penalty=code_penalty)
    history = [document_objectives(loss, X, beta, codes, theta, **params)[0]]
    for _ in range(40):
        objective, _, n_iter, _ = code(loss, X, beta, codes, theta, newton_steps, max_iter=1,
                                       tol=0.0, **params)
        assert np.all(n_iter == 1)
        assert np.all(np.isfinite(objective))
        history.append(objective)
    history = np.array(history)
    rises = history[1:] - history[:-1]
    assert np.all(rises <= 1e-12 * np.abs(history[:-1])), rises.max()
    assert np.all(history[-1] < history[0])  # and it does move


@pytest.mark.parametrize("newton_steps", NEWTON_MODES)
def test_warm_start_continues_the_same_iteration(newton_steps):
    """k sweeps then m sweeps from the result equal k + m sweeps at once."""
    X = random_corpus(8, n_docs=10)
    beta = random_dictionary(8, 3, X.shape[1])
    params = dict(lam=0.2, gamma=0.3, rho=0.1, theta_penalty="l2", code_penalty="l1", tol=0.0)
    codes_a, theta_a = initial_codes(X, 3)
    codes_b, theta_b = initial_codes(X, 3)
    code(PoissonLoss(), X, beta, codes_a, theta_a, newton_steps, max_iter=3, **params)
    obj_a, _, _, _ = code(PoissonLoss(), X, beta, codes_a, theta_a, newton_steps, max_iter=4,
                          **params)
    obj_b, _, _, _ = code(PoissonLoss(), X, beta, codes_b, theta_b, newton_steps, max_iter=7,
                          **params)
    np.testing.assert_allclose(codes_a, codes_b, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(theta_a, theta_b, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(obj_a, obj_b, rtol=1e-13)


@pytest.mark.parametrize("newton_steps", NEWTON_MODES)
def test_stopping_rule_relative_decrease(newton_steps):
    """A document stops at the first sweep whose relative decrease is <= tol."""
    X = random_corpus(9, n_docs=20)
    beta = random_dictionary(9, 3, X.shape[1])
    params = dict(lam=0.2, gamma=0.3, rho=0.1, theta_penalty="l1", code_penalty="l1")
    codes, theta = initial_codes(X, 3)
    tol = 1e-3
    history = [document_objectives(PoissonLoss(), X, beta, codes, theta, **params)[0]]
    for _ in range(200):
        objective, _, _, _ = code(PoissonLoss(), X, beta, codes, theta, newton_steps, max_iter=1,
                                  tol=0.0, **params)
        history.append(objective)
    history = np.array(history)
    codes, theta = initial_codes(X, 3)
    _, _, n_iter, _ = code(PoissonLoss(), X, beta, codes, theta, newton_steps, max_iter=200,
                           tol=tol, **params)
    for d in range(X.shape[0]):
        decrease = history[:-1, d] - history[1:, d]
        stop = np.flatnonzero(decrease <= tol * np.abs(history[:-1, d]))
        expected = stop[0] + 1 if stop.size else 200
        assert n_iter[d] == expected


# ---------------------------------------------------------------------------
# Compiled kernel vs numpy sweep; thread-count determinism
# ---------------------------------------------------------------------------
def compare_paths(compiled_loss, python_loss, X, K, newton_steps, max_iter, tol, rtol, atol,
                  same_iterations, theta_linear=None, **params):
    codes_c, theta_c = initial_codes(X, K)
    codes_p, theta_p = initial_codes(X, K)
    beta = random_dictionary(21, K, X.shape[1])
    args = dict(max_iter=max_iter, tol=tol, theta_linear=theta_linear, **params)
    obj_c, loss_c, it_c, means_c = code(compiled_loss, X, beta, codes_c, theta_c, newton_steps,
                                        **args)
    obj_p, loss_p, it_p, means_p = code(python_loss, X, beta, codes_p, theta_p, newton_steps,
                                        **args)
    if same_iterations:
        np.testing.assert_array_equal(it_c, it_p)
    np.testing.assert_allclose(codes_p, codes_c, rtol=rtol, atol=atol)
    np.testing.assert_allclose(theta_p, theta_c, rtol=rtol, atol=atol)
    np.testing.assert_allclose(obj_p, obj_c, rtol=rtol, atol=atol)
    np.testing.assert_allclose(loss_p, loss_c, rtol=rtol, atol=atol)
    np.testing.assert_allclose(means_p, means_c, rtol=rtol, atol=atol)
    return it_c, codes_c, codes_p, obj_c, obj_p


@pytest.mark.parametrize("theta_penalty,code_penalty", PENALTY_PAIRS)
@pytest.mark.parametrize("with_linear", [False, True])
def test_compiled_kernel_matches_numpy_path_plain_alternation(theta_penalty, code_penalty,
                                                              with_linear):
    """The paper's sweeps (newton_steps=0): the same 25 sweeps on both paths."""
    X = random_corpus(21, n_docs=40, n_features=50, density=0.25, empty=(3, 17))
    K = 5
    linear = (np.random.default_rng(1).normal(scale=0.1, size=(X.shape[0], K))
              if with_linear else None)
    it_c, codes_c, codes_p, _, _ = compare_paths(
        PoissonLoss(), NumpyPoisson(), X, K, 0, 25, 0.0, 1e-9, 1e-9, True, theta_linear=linear,
        lam=0.3, gamma=0.4, rho=0.08, theta_penalty=theta_penalty, code_penalty=code_penalty)
    assert it_c.max() == 25  # the same number of sweeps, not an early stop
    assert np.array_equal(codes_c == 0, codes_p == 0)  # Proposition 1 zeros on both paths


@pytest.mark.parametrize("theta_penalty,code_penalty", PENALTY_PAIRS)
@pytest.mark.parametrize("max_iter", [1, 3])
def test_compiled_kernel_matches_numpy_path_block_sweeps(theta_penalty, code_penalty, max_iter):
    """Default sweeps (theta_k moved with its word codes), a fixed number of sweeps."""
    X = random_corpus(21, n_docs=40, n_features=50, density=0.25, empty=(3, 17))
    compare_paths(PoissonLoss(), NumpyPoisson(), X, 5, None, max_iter, -1.0, 1e-9, 1e-9, True,
                  lam=0.3, gamma=0.4, rho=0.08, theta_penalty=theta_penalty,
                  code_penalty=code_penalty)


@pytest.mark.parametrize("theta_penalty,code_penalty", PENALTY_PAIRS)
def test_compiled_kernel_matches_numpy_path_at_convergence(theta_penalty, code_penalty):
    """Run to convergence: documents may stop one sweep apart (rounding), same optimum.

    At a minimum the objective is flat: equal objectives (1e-11) pin the codes
    down only to about the square root of that.
    """
    X = random_corpus(21, n_docs=40, n_features=50, density=0.25, empty=(3, 17))
    _, _, _, obj_c, obj_p = compare_paths(
        PoissonLoss(), NumpyPoisson(), X, 5, None, 200, 0.0, 1e-5, 1e-5, False,
        lam=0.3, gamma=0.4, rho=0.08, theta_penalty=theta_penalty, code_penalty=code_penalty)
    np.testing.assert_allclose(obj_p, obj_c, rtol=1e-11, atol=1e-12)


def test_compiled_kernel_matches_numpy_path_small_newton_cap():
    """A cap of 2 Newton steps: the fallback to the start's side is taken alike on both paths.

    (With a rounding-level block tolerance this fallback used to be decided
    by the sign of a slope that is noise at the minimiser; the blocks now stop
    at BLOCK_NEWTON_RTOL, before that.)
    """
    X = random_corpus(21, n_docs=40, n_features=50, density=0.25, empty=(3, 17))
    compare_paths(PoissonLoss(), NumpyPoisson(), X, 5, 2, 3, -1.0, 1e-6, 1e-6, True,
                  lam=0.3, gamma=0.4, rho=0.08, theta_penalty="l2", code_penalty="l2")


@pytest.mark.parametrize("loss", [PoissonLoss(), GaussianLoss()], ids=lambda l: l.name)
@pytest.mark.parametrize("newton_steps", NEWTON_MODES)
def test_numpy_sweep_with_compiled_loss_matches_kernel(loss, newton_steps):
    """The numpy sweep is the same algorithm: with the same closed form it agrees to rounding."""
    X = random_corpus(22, n_docs=30, n_features=40, density=0.3, kind=data_kind(loss.name))
    compare_paths(loss, Delegate(loss), X, 4, newton_steps, 3, -1.0, 1e-11, 1e-13, True,
                  lam=0.3, gamma=0.4, rho=0.08, theta_penalty="l2", code_penalty="l1")


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_results_do_not_depend_on_thread_count(loss_name):
    X = random_corpus(31, n_docs=300, n_features=80, density=0.1, kind=data_kind(loss_name),
                      empty=(0, 150, 299))
    K = 6
    beta = random_dictionary(31, K, X.shape[1])
    params = dict(lam=0.2, gamma=0.3, rho=0.05, theta_penalty="l2", code_penalty="l1",
                  max_iter=40, tol=1e-6)
    results = []
    for n_jobs in (1, 2, -1, None):
        codes, theta = start_values(X, K, loss_name)
        out = code(LOSSES[loss_name], X, beta, codes, theta, n_jobs=n_jobs, **params)
        results.append((codes, theta) + tuple(out))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a, b)


# ---------------------------------------------------------------------------
# Empty documents; the returned objective
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("loss", [PoissonLoss(), NumpyPoisson()], ids=["compiled", "numpy"])
@pytest.mark.parametrize("newton_steps", NEWTON_MODES)
def test_empty_documents(loss, newton_steps):
    empty = (0, 4, 5, 11)
    X = random_corpus(41, n_docs=12, empty=empty)
    assert np.all(np.diff(X.indptr)[list(empty)] == 0)
    K = 3
    beta = random_dictionary(41, K, X.shape[1])
    codes, theta = initial_codes(X, K)
    assert np.all(theta[list(empty)] == 0)
    theta[list(empty)] = 2.5  # a stale warm start must not survive
    linear = np.full((X.shape[0], K), 0.05)
    params = dict(lam=0.3, gamma=0.4, rho=0.05, theta_penalty="l1", code_penalty="l1",
                  max_iter=20, tol=1e-8)
    objective, recon, n_iter, means = code(loss, X, beta, codes, theta, newton_steps,
                                           theta_linear=linear, **params)
    for arr in (objective, recon, means, codes, theta):
        assert np.all(np.isfinite(arr))
    assert np.all(theta[list(empty)] == 0.0)
    assert np.all(objective[list(empty)] == 0.0) and np.all(recon[list(empty)] == 0.0)
    assert np.all(n_iter[list(empty)] == 0)
    # the other documents are coded exactly as without the empty rows
    keep = np.setdiff1d(np.arange(X.shape[0]), empty)
    X_kept = X[keep]
    X_kept.indices = X_kept.indices.astype(np.intc)
    X_kept.indptr = X_kept.indptr.astype(np.intc)
    codes_k, theta_k = initial_codes(X_kept, K)
    objective_k, _, _, _ = code(loss, X_kept, beta, codes_k, theta_k, newton_steps,
                                theta_linear=linear[keep], **params)
    np.testing.assert_array_equal(codes_k, codes)
    np.testing.assert_array_equal(theta_k, theta[keep])
    np.testing.assert_array_equal(objective_k, objective[keep])


@pytest.mark.parametrize("loss", [PoissonLoss(), NumpyPoisson()], ids=["compiled", "numpy"])
def test_corpus_without_any_word(loss):
    X = sp.csr_matrix((5, 7))
    X.indices = X.indices.astype(np.intc)
    X.indptr = X.indptr.astype(np.intc)
    codes, theta = initial_codes(X, 3)
    assert codes.shape == (0, 3)
    objective, recon, n_iter, means = code(
        loss, X, np.full((3, 7), 1 / 7), codes, theta, lam=0.1, gamma=0.1, rho=0.1,
        theta_penalty="l2", code_penalty="l1", max_iter=5, tol=0.0)
    assert np.all(objective == 0) and np.all(recon == 0) and np.all(n_iter == 0)
    assert means.shape == (0,) and np.all(theta == 0)


@pytest.mark.parametrize("loss", [PoissonLoss(), GaussianLoss(), BernoulliLoss(), NumpyPoisson()],
                         ids=lambda loss: type(loss).__name__)
@pytest.mark.parametrize("theta_penalty,code_penalty", PENALTY_PAIRS)
@pytest.mark.parametrize("with_linear", [False, True])
@pytest.mark.parametrize("newton_steps", NEWTON_MODES)
def test_returned_objective_is_objective_2(loss, theta_penalty, code_penalty, with_linear,
                                           newton_steps):
    name = "poisson" if isinstance(loss, NumpyPoisson) else loss.name
    X = random_corpus(51, n_docs=10, n_features=20, kind=data_kind(name), empty=(6,))
    K = 3
    beta = random_dictionary(51, K, X.shape[1])
    codes, theta = start_values(X, K, name)
    linear = (np.random.default_rng(2).normal(scale=0.4, size=(X.shape[0], K))
              if with_linear else None)
    params = dict(lam=0.25, gamma=0.35, rho=0.07, theta_penalty=theta_penalty,
                  code_penalty=code_penalty)
    objective, recon, _, means = code(loss, X, beta, codes, theta, newton_steps, max_iter=6,
                                      tol=1e-9, theta_linear=linear, **params)
    expected, expected_loss = document_objectives(loss, X, beta, codes, theta, linear=linear,
                                                  **params)
    np.testing.assert_allclose(objective, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(recon, expected_loss, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(means, np.sum(codes * beta[:, X.indices].T, axis=1),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("loss", [PoissonLoss(), GaussianLoss(), NumpyPoisson()],
                         ids=lambda loss: type(loss).__name__)
@pytest.mark.parametrize("theta_penalty,code_penalty", PENALTY_PAIRS)
def test_stc_objective_is_objective_2_at_any_codes(loss, theta_penalty, code_penalty):
    """The corpus objective (2) at arbitrary (not coded) codes, against the loop above."""
    name = "poisson" if isinstance(loss, NumpyPoisson) else loss.name
    X = random_corpus(53, n_docs=9, n_features=15, kind=data_kind(name), empty=(3,))
    K = 3
    beta = random_dictionary(53, K, X.shape[1])
    rng = np.random.default_rng(53)
    codes = rng.uniform(0.0, 2.0, (X.nnz, K)) * (rng.random((X.nnz, K)) < 0.7)
    theta = rng.uniform(0.0, 2.0, (X.shape[0], K))
    params = dict(lam=0.25, gamma=0.35, rho=0.07, theta_penalty=theta_penalty,
                  code_penalty=code_penalty)
    expected, _ = document_objectives(loss, X, beta, codes, theta, **params)
    expected[3] = 0.0  # an empty document has no codes: its theta is not part of (2)
    value = stc_objective(problem_of(loss, **params), X, beta, codes, theta)
    assert value == pytest.approx(float(np.sum(expected)), rel=1e-12)


def test_returned_objective_is_exact_on_an_unbounded_problem():
    """l1 on theta and a linear term far above lam + rho |I_d| + sum_n beta_kn: the
    coding problem is unbounded below and theta runs off; the returned objective,
    loss part and means are still those of the returned codes."""
    X = random_corpus(52, n_docs=12, n_features=20, kind="counts")
    K = 3
    beta = random_dictionary(52, K, X.shape[1])
    codes, theta = start_values(X, K, "poisson")
    linear = np.zeros((X.shape[0], K))
    linear[:, 0] = 1e4
    linear[:, 1] = -1e4
    params = dict(lam=0.1, gamma=0.1, rho=0.01, theta_penalty="l1", code_penalty="l1")
    objective, recon, _, means = code(PoissonLoss(), X, beta, codes, theta,
                                             max_iter=8, tol=0, theta_linear=linear, **params)
    assert theta[:, 0].min() > 1e3  # far from any bounded minimiser
    expected, expected_loss = document_objectives(PoissonLoss(), X, beta, codes, theta,
                                                  linear=linear, **params)
    np.testing.assert_allclose(objective, expected, rtol=1e-9)
    np.testing.assert_allclose(recon, expected_loss, rtol=1e-9)
    np.testing.assert_allclose(means, np.sum(codes * beta[:, X.indices].T, axis=1), rtol=1e-12)


def test_bernoulli_coding_keeps_means_inside_the_domain():
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(np.sign(rng.poisson(0.6, (60, 40))).astype(float))
    X.indices = X.indices.astype(np.intc)
    X.indptr = X.indptr.astype(np.intc)
    beta = np.random.default_rng(0).dirichlet(np.ones(40), 5)
    codes, theta = initial_codes(X, 5, 0.3)
    loss = BernoulliLoss()
    objective, _, _, means = code(loss, X, beta, codes, theta, lam=0.1, gamma=0.1,
                                         rho=0.01, theta_penalty="l1", code_penalty="l1",
                                         max_iter=50, tol=1e-4)
    assert np.all(np.isfinite(objective))  # holds
    recomputed = np.sum(codes * beta[:, X.indices].T, axis=1)
    assert np.all((means > 0) & (means < 1))  # fails: some means are exactly 1.0
    assert np.all((recomputed > 0) & (recomputed < 1))
    assert np.all(np.isfinite(loss.loss(X.data, means)))
    assert not np.any(np.isnan(loss.gradient(X.data, means)))


# ---------------------------------------------------------------------------
# Coding without keeping word codes (codes=None), as transform does
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("loss", [PoissonLoss(), BernoulliLoss(), NumpyPoisson()],
                         ids=lambda loss: type(loss).__name__)
def test_new_documents_are_coded_alike_with_and_without_word_codes(loss):
    """Cold start: the same theta and objective whether the word codes are kept or not,
    and the same as a warm start from every document's common start value."""
    kind = "proportions" if isinstance(loss, BernoulliLoss) else "counts"
    X = random_corpus(41, n_docs=25, n_features=30, density=0.3, kind=kind, empty=(4, 11))
    K = 4
    beta = random_dictionary(41, K, X.shape[1])
    problem = problem_of(loss, 0.2, 0.3, 0.05, "l2", "l1", max_iter=30, tol=1e-8)
    theta_a, codes_a, out_a = code_new_documents(problem, X, beta, keep_word_codes=True)
    theta_b, codes_b, out_b = code_new_documents(problem, X, beta)
    assert codes_b is None and codes_a.shape == (X.nnz, K)
    starts = common_start_value(loss, X, beta, None, problem.params)
    codes_c, theta_c = initial_codes(X, K)
    codes_c *= np.repeat(starts, np.diff(X.indptr))[:, None]
    theta_c *= starts[:, None]
    out_c = code_documents(problem, X, beta, codes_c, theta_c)
    for theta, out in ((theta_b, out_b), (theta_c, out_c)):
        np.testing.assert_array_equal(out_a.n_iter, out.n_iter)
        np.testing.assert_array_equal(theta_a, theta)
        np.testing.assert_array_equal(out_a.objective, out.objective)
        np.testing.assert_array_equal(out_a.loss, out.loss)
        np.testing.assert_array_equal(out_a.means, out.means)
    np.testing.assert_array_equal(codes_a, codes_c)
    assert np.all(theta_a[[4, 11]] == 0) and np.all(out_a.n_iter[[4, 11]] == 0)
    assert out_a.n_iter.max() > 1  # the documents were actually coded, not just started


@pytest.mark.parametrize("loss", [PoissonLoss(), NumpyPoisson()], ids=["compiled", "numpy"])
def test_passes_count_word_code_updates(loss):
    """Plain alternation: one pass per topic per sweep; block Newton: at least that many."""
    X = random_corpus(43, n_docs=20, n_features=30, density=0.3, empty=(2,))
    K = 3
    beta = random_dictionary(43, K, X.shape[1])
    params = dict(lam=0.2, gamma=0.3, rho=0.05, theta_penalty="l2", code_penalty="l1",
                  max_iter=4, tol=-1.0)
    words = np.diff(X.indptr)
    for newton_steps in (0, None):
        codes, theta = initial_codes(X, K)
        result = code_result(loss, X, beta, codes, theta, newton_steps, **params)
        made = result.word_code_updates(X)
        plain = K * words * result.n_iter
        if newton_steps == 0:
            np.testing.assert_array_equal(made, plain)
        else:
            assert np.all(made >= plain) and np.any(made > plain)
        assert made[2] == 0


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
@pytest.mark.parametrize("theta_penalty,code_penalty", [("l2", "l1"), ("l1", "l2")])
def test_auto_start_is_the_best_common_value(loss_name, theta_penalty, code_penalty):
    """A new document starts at argmin_c of its objective with all codes = c.

    Checked against scipy's bounded scalar minimiser, on the compiled kernel
    (max_iter=0 returns the start) and on its numpy reference.
    """
    from scipy.optimize import minimize_scalar

    X = random_corpus(44, n_docs=12, n_features=25, density=0.3, kind=data_kind(loss_name),
                      empty=(5,))
    K = 4
    beta = random_dictionary(44, K, X.shape[1])
    loss = LOSSES[loss_name]
    lam, rho = 3.0, 0.05
    problem = problem_of(loss, lam, lam, rho, theta_penalty, code_penalty, max_iter=0, tol=0.0)
    theta = code_new_documents(problem, X, beta)[0]  # max_iter=0: the start itself
    twin = common_start_value(loss, X, beta, None, problem.params)
    sums = beta.sum(axis=0)
    upper = loss.mean_domain[1]
    for d in range(X.shape[0]):
        span = slice(X.indptr[d], X.indptr[d + 1])
        if span.start == span.stop:
            assert np.all(theta[d] == 0)
            continue
        assert np.all(theta[d] == theta[d, 0])  # one common value
        y, B = X.data[span], sums[X.indices[span]]
        n_codes = B.size * K

        def g(c):
            pen = c if theta_penalty == "l1" else c * c
            code_pen = c if code_penalty == "l1" else c * c
            return np.sum(loss.loss(y, c * B)) + lam * K * pen + rho * n_codes * code_pen

        high = 0.5 * upper / B.max() if np.isfinite(upper) else 100.0
        best = minimize_scalar(g, bounds=(1e-12, high), method="bounded",
                               options={"xatol": 1e-12})
        assert theta[d, 0] == pytest.approx(best.x, rel=1e-2, abs=1e-9)  # optimum may be 0
        assert g(theta[d, 0]) <= g(best.x) + 1e-6 * abs(g(best.x))
        assert twin[d] == pytest.approx(theta[d, 0], rel=1e-12)


@pytest.mark.parametrize("loss", [PoissonLoss(), NumpyPoisson()], ids=["compiled", "numpy"])
def test_inactive_documents_are_left_as_they_are(loss):
    """active=False: codes untouched, objective and means those of the current codes;
    the active documents are coded exactly as if they were coded alone."""
    X = random_corpus(43, n_docs=30, n_features=25, density=0.3, kind="counts", empty=(5,))
    K = 4
    beta = random_dictionary(43, K, X.shape[1])
    rng = np.random.default_rng(43)
    params = dict(lam=0.2, gamma=0.3, rho=0.05, theta_penalty="l2", code_penalty="l1",
                  max_iter=20, tol=1e-8, theta_linear=rng.normal(size=(X.shape[0], K)))
    codes, theta = initial_codes(X, K, 1.0)
    codes *= rng.uniform(0.5, 1.5, size=codes.shape)
    active = rng.random(X.shape[0]) < 0.5
    active[[0, 5]] = False, True
    c_all, t_all = codes.copy(), theta.copy()
    obj_all, loss_all, it_all, means_all = code(loss, X, beta, c_all, t_all, **params)
    c, t = codes.copy(), theta.copy()
    result = code_result(loss, X, beta, c, t, active=active, **params)
    obj, loss_part, it, means = result.objective, result.loss, result.n_iter, result.means
    start = np.column_stack([result.start_objective, result.start_loss])
    entries = np.repeat(active, np.diff(X.indptr))
    # inactive: nothing moves, the objective is the one at the current codes
    np.testing.assert_array_equal(c[~entries], codes[~entries])
    np.testing.assert_array_equal(t[~active], theta[~active])
    assert np.all(it[~active] == 0)
    np.testing.assert_array_equal(obj[~active], start[~active, 0])
    np.testing.assert_array_equal(loss_part[~active], start[~active, 1])
    c0, t0 = codes.copy(), theta.copy()
    ref_obj, ref_loss, _, ref_means = code(loss, X, beta, c0, t0, **dict(params, max_iter=0))
    np.testing.assert_allclose(obj[~active], ref_obj[~active], rtol=1e-13)
    np.testing.assert_allclose(means[~entries], (codes * beta.T[X.indices]).sum(1)[~entries],
                               rtol=1e-12)
    # active: the same as coding everything (documents are independent)
    np.testing.assert_array_equal(c[entries], c_all[entries])
    np.testing.assert_array_equal(t[active], t_all[active])
    np.testing.assert_array_equal(obj[active], obj_all[active])
    np.testing.assert_array_equal(means[entries], means_all[entries])
    assert it[active & (np.diff(X.indptr) > 0)].min() >= 1


def test_active_is_validated():
    X = random_corpus(44, n_docs=6, n_features=8, density=0.5, kind="counts")
    beta = random_dictionary(44, 2, X.shape[1])
    params = dict(lam=0.2, gamma=0.3, rho=0.05, theta_penalty="l2", code_penalty="l1",
                  max_iter=5, tol=1e-8)
    codes, theta = initial_codes(X, 2, 1.0)
    with pytest.raises(ValueError, match="active must be a boolean array"):
        code(PoissonLoss(), X, beta, codes, theta, active=np.ones(5, bool), **params)
    with pytest.raises(ValueError, match="active must be a boolean array"):
        code(PoissonLoss(), X, beta, codes, theta, active=np.ones(6, int), **params)
