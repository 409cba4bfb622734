"""rho in relative units: a reparameterisation of objective (2) whose zeros follow rho alone."""
import copy
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from stc import STC, MedSTC, load
from stc.datasets import load_newsgroups_split
from stc.inspection import code_sparsity


@pytest.fixture(scope="module")
def corpus():
    train, test = load_newsgroups_split()
    return train.data[::3], train.target[::3], test.data[::3]


# The paper's parameterisation; the tests below start from it and change what they study
# (the invariances of relative units are those of the l2 penalty on theta, footnote 3;
# the exact coding step of each outer iteration makes five iterations near-converged codes).
PAPER = dict(rho=0.01, rho_units="absolute", theta_penalty="l2", sweeps_per_iteration=None)


def fit(X, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # few outer iterations on purpose
        return STC(n_topics=8, max_iter=5, random_state=0, **{**PAPER, **params}).fit(X)


def test_relative_rho_is_the_papers_objective_with_a_rescaled_rho(corpus):
    X, _, _ = corpus
    gamma, mean_count = 0.1, float(X.sum() / X.nnz)
    absolute = fit(X, rho=0.02)
    relative = fit(X, rho=0.02 / np.sqrt(2 * gamma * mean_count), rho_units="relative")
    assert absolute.effective_rho_ == 0.02 and absolute.rho_units == "absolute"
    assert relative.count_scale_ == pytest.approx(mean_count, rel=1e-14)
    assert relative.effective_rho_ == pytest.approx(0.02, rel=1e-14)
    # the same problem (2): the same path up to the last bit of rho
    np.testing.assert_allclose(relative.objective_, absolute.objective_, rtol=1e-12)
    np.testing.assert_allclose(relative.components_, absolute.components_, rtol=1e-9, atol=1e-15)


def test_absolute_units_leave_rho_untouched(corpus):
    X, _, _ = corpus
    model = fit(X, rho=0.02)
    assert model.rho_units == "absolute" and model.effective_rho_ == model.rho == 0.02


def test_default_units_are_relative(corpus):
    X, _, _ = corpus
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        default = STC(n_topics=8, max_iter=5, random_state=0).fit(X)
    explicit = fit(X, rho=0.02, rho_units="relative", theta_penalty="l1", sweeps_per_iteration=1)
    assert default.rho_units == "relative"
    assert default.effective_rho_ == pytest.approx(
        0.02 * np.sqrt(2 * 0.1 * float(X.sum() / X.nnz)), rel=1e-14)
    assert np.array_equal(default.objective_, explicit.objective_)
    assert np.array_equal(default.components_, explicit.components_)


def test_scaling_counts_and_gamma_scales_the_codes_and_keeps_their_zeros(corpus):
    # Exact invariance of the Poisson objective: counts c X, gamma = lambda_ divided by c and
    # the same rho give c times the codes. In relative units rho needs no change by hand.
    X, _, _ = corpus
    model = fit(X, rho=0.05, rho_units="relative")
    scaled = copy.deepcopy(model).set_params(lambda_=model.lambda_ / 4.0)
    scaled.count_scale_ = 4.0 * model.count_scale_  # what fit on 4 X records
    theta, theta_4x = model.transform(X), scaled.transform(4.0 * X)
    assert np.count_nonzero(theta == 0) > 0
    np.testing.assert_allclose(theta_4x, 4.0 * theta, rtol=1e-6, atol=1e-12)
    zeros, zeros_4x = model.word_codes(X).toarray() == 0, scaled.word_codes(4.0 * X).toarray() == 0
    assert np.array_equal(zeros, zeros_4x)


def test_fitting_scaled_counts_with_relative_rho_gives_the_same_problem(corpus):
    X, _, _ = corpus
    model = fit(X, rho=0.05, rho_units="relative")
    scaled = fit(4.0 * X, rho=0.05, rho_units="relative", lambda_=model.lambda_ / 4.0)
    assert scaled.effective_rho_ == pytest.approx(model.effective_rho_, rel=1e-14)
    # objective (2) of 4 X at 4 times the codes is 4 times that of X; the fits start from
    # the same codes (not scaled), so they agree closely, not exactly
    np.testing.assert_allclose(scaled.objective_[-1], 4.0 * model.objective_[-1], rtol=1e-3)


def test_zero_share_follows_relative_rho_whatever_lambda(corpus):
    X, _, X_test = corpus

    def zeros(**params):
        return code_sparsity(fit(X, **params), X_test)["word_zero_share"]

    relative = {(rho, lam): zeros(rho=rho, lambda_=lam, rho_units="relative")
                for rho in (0.01, 0.1) for lam in (0.1, 10.0)}
    absolute = {lam: zeros(rho=0.1, lambda_=lam) for lam in (0.1, 10.0)}
    for rho in (0.01, 0.1):
        assert abs(relative[rho, 0.1] - relative[rho, 10.0]) < 0.02
    assert relative[0.1, 0.1] > relative[0.01, 0.1] + 0.2  # the knob moves the zeros
    assert absolute[0.1] > absolute[10.0] + 0.2  # the same absolute rho does not


def test_medstc_reads_rho_in_relative_units(corpus):
    X, y, _ = corpus
    model = MedSTC(n_topics=4, max_iter=2, lambda_=30.0, rho=0.05, rho_units="relative",
                   refit_C=None, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    assert model.effective_rho_ == pytest.approx(0.05 * np.sqrt(2 * 30.0 * model.count_scale_),
                                                 rel=1e-14)


def test_relative_model_file_round_trip(corpus, tmp_path):
    X, _, X_test = corpus
    model = fit(X, rho=0.05, rho_units="relative")
    model.save(tmp_path / "model.stc")
    loaded = load(tmp_path / "model.stc")
    assert loaded.rho_units == "relative" and loaded.count_scale_ == model.count_scale_
    assert np.array_equal(loaded.transform(X_test), model.transform(X_test))


def test_unknown_units_are_refused(corpus):
    X, _, _ = corpus
    with pytest.raises(ValueError, match="rho_units"):
        STC(rho_units="percent").fit(X)


def test_online_w_bar_comes_from_the_first_step_or_from_all_of_X(corpus):
    X, _, _ = corpus
    first, second = X[:150], X[150:300]
    model = STC(n_topics=4, rho=0.05, rho_units="relative", random_state=0)
    model.partial_fit(first)
    assert model.count_scale_ == pytest.approx(float(first.sum() / first.nnz), rel=1e-14)
    model.partial_fit(second)  # later batches keep it: the objective stays the same
    assert model.count_scale_ == pytest.approx(float(first.sum() / first.nnz), rel=1e-14)
    assert model.effective_rho_ == pytest.approx(
        0.05 * np.sqrt(2 * 0.1 * model.count_scale_), rel=1e-14)
    # fit_stream: w_bar of its first step, its first batches joined (here both)
    streamed = STC(n_topics=4, rho=0.05, rho_units="relative", n_passes=1,
                   random_state=0).fit_stream([first, second])
    assert streamed.count_scale_ == pytest.approx(float(X[:300].sum() / X[:300].nnz), rel=1e-14)
    assert streamed.n_batch_iter_ == 1
    # online fit of a matrix in memory: w_bar of the whole matrix, as a batch fit takes it
    online = STC(n_topics=4, learning_method="online", batch_size=150, n_passes=1,
                 random_state=0).fit(X[:300])
    assert online.count_scale_ == pytest.approx(float(X[:300].sum() / X[:300].nnz), rel=1e-14)


# A dask array in relative units: tests/test_distributed.py.
