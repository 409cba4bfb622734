"""The coding kernel's shortcut for topics a document does not use.

A topic with theta_k = 0 and every word code 0 whose codes would all stay 0
is skipped: the loss plugin's `_codes_stay_zero` test replaces the solve
(`stc._core._coding.update_topic_block`). The shortcut must never change a
result: the test may only answer True where the solver returns 0 for every
word, and coding with and without it gives the same bits.
"""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from stc import STC
from stc._core import _coding
from stc.datasets import load_newsgroups_split
from stc.losses import GaussianLoss, PoissonLoss

@settings(max_examples=300, deadline=None)
@given(y=st.lists(st.floats(0.5, 20.0), min_size=1, max_size=12),
       b_scale=st.floats(1e-6, 1.0), rest_scale=st.floats(1e-4, 50.0),
       quad=st.floats(1e-3, 10.0), lin=st.floats(-2.0, 2.0), zero_b=st.integers(0, 3),
       seed=st.integers(0, 2 ** 16))
def test_poisson_test_answers_true_only_where_the_solver_gives_zeros(y, b_scale, rest_scale,
                                                                     quad, lin, zero_b, seed):
    rng = np.random.default_rng(seed)
    y = np.asarray(y)
    b = b_scale * rng.random(y.size)
    b[:zero_b] = 0.0  # words the topic gives no weight
    rest = rest_scale * rng.random(y.size)
    loss = PoissonLoss()
    zeros = np.zeros(y.size)
    solved = loss.solve_coordinates(y, b, rest, quad, lin, zeros)
    stays = loss.codes_stay_zero(y, b, zeros, rest, quad, lin)
    if stays:
        assert np.all(solved == 0.0)
    # the test is the solver's own zero case: with lin >= 0 it misses no all-zero
    # topic whose words all have a0 = rest (b + lin) - y b > 0
    a0 = rest * (b + lin) - y * b
    expected = lin >= 0.0 and bool(np.all((b <= 0.0) | (a0 > 0.0)))
    assert stays == expected


def test_a_code_that_is_not_zero_is_never_skipped():
    loss = PoissonLoss()
    y, b, rest = np.array([1.0, 2.0]), np.array([0.1, 0.1]), np.array([100.0, 100.0])
    assert loss.codes_stay_zero(y, b, np.zeros(2), rest, 1.0, 0.5)
    assert not loss.codes_stay_zero(y, b, np.array([0.0, 1e-300]), rest, 1.0, 0.5)
    assert not loss.codes_stay_zero(y, b, np.zeros(2), rest, 1.0, -0.5)  # lin < 0
    assert not loss.codes_stay_zero(y, b, np.zeros(2), np.array([100.0, np.nan]), 1.0, 0.5)


def test_losses_without_the_test_never_claim_it():
    loss = GaussianLoss()  # no override: the topic is always solved
    assert not loss.codes_stay_zero(np.ones(3), np.ones(3), np.zeros(3), np.full(3, 9.0),
                                    1.0, 1.0)


@pytest.fixture(scope="module")
def sparse_state():
    """A briefly fitted model and the warm codes of its corpus: many unused topics."""
    train, _ = load_newsgroups_split()
    with warnings.catch_warnings():  # stopped at max_iter on purpose
        warnings.simplefilter("ignore", ConvergenceWarning)
        # a large rho: sparse codes after a few iterations
        model = STC(n_topics=20, rho=0.1, max_iter=5, random_state=0).fit(train.data[:600])
    X = model._validate_X(train.data[:600], reset=False, loss=model._checked_loss())
    problem = model._coding_problem()
    from stc.coding import code_new_documents

    theta, codes, _ = code_new_documents(problem, X, model.components_, keep_word_codes=True)
    return X, model.components_, codes, theta, problem


def unused_topics(X, codes, theta):
    """Number of (document, topic) pairs with theta 0 and every word code 0."""
    doc_of_entry = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    used = np.zeros_like(theta, dtype=bool)
    np.logical_or.at(used, doc_of_entry, codes != 0)
    return int(np.count_nonzero((theta == 0) & ~used))


def run_kernel(problem, X, beta, codes, theta, skip, warm, linear=None, n_jobs=1, **changes):
    params = dict(problem.params, skip_unused=int(skip), **changes)
    codes, theta = codes.copy(), theta.copy()
    means = np.zeros(X.nnz)
    if warm:
        arrays = _coding.code_documents(problem.loss, params, X.indptr, X.indices, X.data,
                                        beta, codes, theta, means, linear, None, n_jobs)
    else:
        arrays = _coding.code_new_documents(problem.loss, params, X.indptr, X.indices, X.data,
                                            beta, codes, theta, means, n_jobs)
    assert arrays[-1] is None  # no loss failure
    return [codes, theta, means, *arrays[:-1]]


@pytest.mark.parametrize("warm", [True, False])
@pytest.mark.parametrize("changes", [
    {}, {"theta_penalty": 1}, {"code_penalty": 1}, {"newton_steps": 0},
    {"theta_penalty": 1, "newton_steps": 0}, {"max_iter": 3}])
def test_coding_gives_the_same_bits_with_and_without_the_shortcut(sparse_state, warm, changes):
    X, beta, codes, theta, problem = sparse_state
    assert unused_topics(X, codes, theta) > 0.15 * theta.size  # the shortcut has work to do
    with_skip = run_kernel(problem, X, beta, codes, theta, True, warm, **changes)
    without = run_kernel(problem, X, beta, codes, theta, False, warm, **changes)
    for a, b in zip(with_skip, without):
        np.testing.assert_array_equal(a, b)
    # and the same bits on two threads
    for a, b in zip(run_kernel(problem, X, beta, codes, theta, True, warm, n_jobs=2, **changes),
                    without):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shift", [0.5, -0.5, 5.0])
def test_the_shortcut_leaves_a_supervised_shift_to_the_full_update(sparse_state, shift):
    """MedSTC's linear term b_d . theta_d: a topic it pulls up (pen'(0) < b_dk) is solved."""
    X, beta, codes, theta, problem = sparse_state
    rng = np.random.default_rng(0)
    linear = shift * rng.random(theta.shape) * problem.lambda_ * 2
    with_skip = run_kernel(problem, X, beta, codes, theta, True, True, linear=linear)
    without = run_kernel(problem, X, beta, codes, theta, False, True, linear=linear)
    for a, b in zip(with_skip, without):
        np.testing.assert_array_equal(a, b)
