"""Valid input at extreme scales: a fit works, or it fails saying what is wrong.

Counts of 1e-20, Gaussian data of 1e200, and lambda_ or rho of 1e300 used to
be refused with "the poisson loss is not finite ... mean lies outside the
loss's domain", which names a symptom. Now the data's scale or the parameter
is named (and tests/test_fuzz_fits.py runs the same cases, and random ones, in
subprocesses).
"""
import importlib.util
import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import stc.losses
from stc import STC, DataWarning, MedSTC
from stc._learning.learners.partitions import Partition

from conftest import brief_fit

# The paper's parameterisation: rho is the weight of objective (2) as given, and theta
# has the l2 penalty (these cases were written for it).
PAPER = dict(rho_units="absolute", theta_penalty="l2")

# Before the fit stops with the ValueError these tests expect, the coding step sums an
# infinite objective and an infinite loss (inf - inf in stc/_learning/training.py's CodingStep), and
# numpy warns; the error then says what is wrong. The warning is noise, not the point.
infinite_loss_noise = pytest.mark.filterwarnings(
    "ignore:invalid value encountered in scalar subtract:RuntimeWarning")


def counts(seed=0, shape=(30, 50)):
    return sp.csr_matrix(np.random.default_rng(seed).poisson(1.0, shape).astype(float))


@infinite_loss_noise
def test_tiny_counts_name_the_scale_of_the_data():
    with pytest.raises(ValueError, match=r"X's values are tiny \(median 1e-20\).*Rescale X"):
        STC(n_topics=2, max_iter=5, random_state=0).fit(sp.csr_matrix(np.full((2, 2), 1e-20)))
    # the same counts rescaled fit
    model = STC(n_topics=2, max_iter=5, random_state=0).fit(sp.csr_matrix(np.full((2, 2), 1.0)))
    assert np.all(np.isfinite(model.objective_))


@infinite_loss_noise
@pytest.mark.parametrize("parameter", ["rho"])
def test_a_huge_penalty_is_named(parameter):
    with pytest.raises(ValueError, match=rf"{parameter}=1e\+300 is 1e\+300 times the median "
                                         rf"value of X.*Lower {parameter}"):
        STC(n_topics=2, max_iter=5, random_state=0, **PAPER, **{parameter: 1e300}).fit(counts())


@infinite_loss_noise
def test_a_huge_rho_in_relative_units_is_named():
    # the default units: the user's rho, and the weight objective (2) got, rho sqrt(2 gamma w_bar)
    with pytest.raises(ValueError, match=r"rho=1e\+300 \(relative units\) gave objective \(2\) "
                                         r"the weight rho sqrt\(2 gamma w_bar\) = \S+, w_bar = "
                                         r"\S+ .*times the median value of X.*Lower rho"):
        STC(n_topics=2, max_iter=5, random_state=0, rho=1e300).fit(counts())


def test_huge_lambda_fits():
    """lambda_ = gamma = 1e300: the fit keeps every mean positive, its results are sound."""
    model = STC(n_topics=2, max_iter=3, random_state=0, lambda_=1e300, **PAPER).fit(counts())
    assert np.all(np.isfinite(model.objective_))
    assert np.all(np.diff(model.objective_) <= 1e-9 * np.abs(model.objective_[:-1]))
    np.testing.assert_allclose(model.components_.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    theta = model.transform(counts())
    assert np.all(np.isfinite(theta)) and np.all(theta >= 0)


def test_data_too_large_for_the_loss_is_refused_up_front():
    with pytest.raises(ValueError, match=r"X's values reach 5e\+200: the gaussian loss is not "
                                         r"finite for data that large.*rescale X"):
        STC(n_topics=2, max_iter=3, random_state=0, loss="gaussian").fit(counts() * 1e200)
    with pytest.raises(ValueError, match="rescale X"):
        MedSTC(n_topics=2, max_iter=3, random_state=0, loss="gaussian").fit(
            counts() * 1e200, np.arange(30) % 2)


# ---------------------------------------------------------------------------
# Codes that run off to infinity (MedSTC's shifted mean with the l1 penalty on
# theta, an unbounded coding problem): the numpy sweep does what the kernel does
# ---------------------------------------------------------------------------
def runoff_problem():
    """Coding problem (2) minus linear . theta with linear > lambda_: theta_k is unbounded."""
    from test_coding import random_corpus, random_dictionary
    X = random_corpus(21, n_docs=40, n_features=50, density=0.25)
    beta = random_dictionary(21, 5, X.shape[1])
    linear = np.abs(np.random.default_rng(1).normal(scale=2.0, size=(X.shape[0], 5)))
    params = dict(lam=0.3, gamma=0.4, rho=0.08, theta_penalty="l1", code_penalty="l1", tol=-1.0,
                  theta_linear=linear)
    return X, beta, params


def test_runaway_codes_numpy_sweep_matches_the_kernel():
    """Same coordinate solver on both paths: the same codes, even where they ran off."""
    from test_coding import Delegate, code_result, initial_codes
    from stc.losses import PoissonLoss
    X, beta, params = runoff_problem()
    results = []
    for loss in (PoissonLoss(), Delegate(PoissonLoss())):
        codes, theta = initial_codes(X, beta.shape[0])
        result = code_result(loss, X, beta, codes, theta, max_iter=10, **params)
        results.append((codes, theta, result.objective, result.means, result.n_iter))
    assert results[0][1].max() > 1e12  # theta ran off
    for compiled, numpy in zip(*results):
        np.testing.assert_allclose(numpy, compiled, rtol=1e-9, atol=1e-12)


def test_runaway_codes_numpy_poisson_codes_like_the_kernel(numpy_poisson):
    """The numpy Poisson twin used to fail there blaming the loss (lin=nan)."""
    from test_coding import code_result, initial_codes
    from stc.losses import PoissonLoss
    X, beta, params = runoff_problem()
    for loss in (PoissonLoss(), numpy_poisson):
        codes, theta = initial_codes(X, beta.shape[0])
        result = code_result(loss, X, beta, codes, theta, max_iter=1, **params)
        assert theta.max() > 1e12  # theta ran off (rounding decides how far)
        assert np.all(np.isfinite(codes)) and np.all(np.isfinite(theta))
        assert np.all(result.objective <= result.start_objective)


def pseudo_huber_example():
    """docs/examples/python_loss.py's loss, without the example's global registration."""
    path = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "examples", "python_loss.py")
    spec = importlib.util.spec_from_file_location("python_loss_example", path)
    module = importlib.util.module_from_spec(spec)
    saved = dict(stc.losses._REGISTRY)
    try:
        spec.loader.exec_module(module)
    finally:
        stc.losses._REGISTRY.clear()
        stc.losses._REGISTRY.update(saved)
    return module.PseudoHuberLoss()


@brief_fit
def test_medstc_python_loss_l1_theta_fits():
    """Fuzz finding: a pure-Python loss, theta_penalty="l1" (compiled losses fitted)."""
    X = np.random.default_rng(0).poisson(2.0, (8, 20)).astype(float)
    model = MedSTC(n_topics=3, loss=pseudo_huber_example(), lambda_=0.01, theta_penalty="l1", C=3.0,
                   max_iter=4, random_state=0).fit(X, np.arange(8) % 4)
    assert np.all(np.isfinite(model.objective_))
    assert np.all(np.diff(model.objective_) <= 1e-9 * np.abs(model.objective_[:-1]))
    theta = model.transform(X)
    assert np.all(np.isfinite(theta)) and np.all(theta >= 0)



# ---------------------------------------------------------------------------
# Errors name the user's argument (issue 20, finding 4)
# ---------------------------------------------------------------------------
def test_a_huge_C_is_refused_naming_C():
    X, y = counts(), np.arange(30) % 2
    with pytest.raises(ValueError, match=r"MedSTC: C must be a real number in \(0, 1e\+300\), "
                                         r"got 1e\+300"):
        MedSTC(n_topics=2, C=1e300, max_iter=2, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"MedSTC: refit_C must be .*\(0, 1e\+300\)"):
        MedSTC(n_topics=2, refit_C=1e300, max_iter=2, random_state=0).fit(X, y)


def test_one_huge_count_names_the_users_rho():
    """The default relative rho: the message says rho=0.02 and the weight it became."""
    X = counts().toarray()
    X[0, 0] = 1e300
    with pytest.warns(DataWarning), pytest.raises(
            ValueError, match=r"rho=0\.02 \(relative units\) gave objective \(2\) the weight "
                              r"rho sqrt\(2 gamma w_bar\) = 2\.87\d*e\+146.*rho_units='absolute'"):
        STC(n_topics=2, max_iter=5, random_state=0).fit(X)


@brief_fit
def test_one_dominant_count_warns():
    X = counts().toarray()
    X[0, 0] = 1e15
    with pytest.warns(DataWarning, match=r"one entry of X \(1e\+15\) holds 100% of its total "
                                         r"count.*rho_units='absolute'"):
        STC(n_topics=2, max_iter=2, random_state=0).fit(X)
    # absolute units do not depend on w_bar: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        STC(n_topics=2, max_iter=2, random_state=0, **PAPER).fit(X)
        STC(n_topics=2, max_iter=2, random_state=0).fit(counts())


@brief_fit
def test_changed_fitted_arrays_are_refused():
    X, y = counts(), np.arange(30) % 2
    model = STC(n_topics=2, max_iter=2, random_state=0).fit(X)
    model.components_[0, 0] = np.nan
    for method in (model.transform, model.score):
        with pytest.raises(ValueError, match=r"STC\.components_ contains NaN or infinite values "
                                             r"\(1 entries\).*refit"):
            method(X)
    # topics that cannot be topics (an IndexError or a silent result before)
    model = STC(n_topics=2, max_iter=2, random_state=0).fit(X)
    topics = model.components_
    for changed, message in ((topics[:, :10], r"has 10 columns, but the model was fitted on 50 "
                                              r"terms \(n_features_in_\)"),
                             (topics.tolist(), "must be a 2-D numeric numpy array, got list"),
                             (-topics, r"holds negative weights \(min -")):
        model.components_ = changed
        with pytest.raises(ValueError, match=rf"^STC\.components_ {message}"):
            model.transform(X)
    model = MedSTC(n_topics=2, max_iter=2, random_state=0).fit(X, y)
    coef = model.coef_.copy()
    model.coef_[1, 0] = np.inf
    with pytest.raises(ValueError, match=r"MedSTC\.coef_ contains NaN or infinite values"):
        model.predict(X)
    model.coef_ = coef[:, :1]
    with pytest.raises(ValueError, match=r"^MedSTC\.coef_ has shape \(2, 1\), but the model "
                                         r"has 2 classes and 2 topics"):
        model.predict(X)


@pytest.mark.parametrize("sparse", [False, True])
def test_bad_values_of_X_are_named(sparse):
    X = counts().toarray()
    X[0, :3] = np.nan
    with pytest.raises(ValueError, match=r"^X contains NaN \(3 entries\); counts must be finite "
                                         r"and non-negative$"):
        STC(n_topics=2, max_iter=2).fit(sp.csr_matrix(X) if sparse else X)
    X[0, :3] = np.inf
    with pytest.raises(ValueError, match=r"^X contains infinite values \(3 entries\)"):
        STC(n_topics=2, max_iter=2).fit(sp.csr_matrix(X) if sparse else X)
    X = counts().toarray().astype(np.complex128)
    with pytest.raises(ValueError, match=r"^Complex data not supported: X has complex dtype "
                                         r"complex128; counts must be real$"):
        STC(n_topics=2, max_iter=2).fit(sp.csr_matrix(X) if sparse else X)


def broken_matrices():
    """Sparse matrices whose index arrays do not fit their shape (30, 50): (name, matrix, fault)."""
    X = counts()
    shifted = X.copy()
    shifted.indices = shifted.indices - 1  # -1 would wrap to the last column
    past_end = X.copy()
    past_end.indptr[3] = 10 ** 6
    by_column = sp.csc_matrix(X)
    by_column.indices = by_column.indices + 1
    by_entry = sp.coo_matrix(X)
    by_entry.col = by_entry.col + 1
    return [("csr indices", shifted, r"a column index is outside \[0, 50\)"),
            ("csr indptr", past_end, "indptr must start at 0 and never decrease"),
            ("csc indices", by_column, r"a row index is outside \[0, 30\)"),
            ("coo col", by_entry, r"a column index is outside \[0, 50\)")]


@pytest.mark.parametrize("name, X, fault", broken_matrices(),
                         ids=[name for name, _, _ in broken_matrices()])
@brief_fit
def test_a_sparse_matrix_with_broken_indices_is_refused(name, X, fault):
    # scipy's conversions and the kernels index with them unchecked: this crashed the
    # process (double free, segfault) or, in transform, read the wrong column
    fitted = STC(n_topics=2, max_iter=2, random_state=0).fit(counts())
    calls = [STC(n_topics=2, max_iter=2, random_state=0).fit, fitted.transform, fitted.score,
             STC(n_topics=2, learning_method="online", random_state=0).partial_fit,
             lambda X: MedSTC(n_topics=2, max_iter=2).fit(X, np.arange(30) % 2)]
    for call in calls:
        with pytest.raises(ValueError, match=rf"^X is not a valid .* matrix of shape \(30, 50\): "
                                             rf"{fault}"):
            call(X)
    with pytest.raises(ValueError, match=rf"^a block of the dask array is not a valid .*{fault}"):
        Partition(X, stc.losses.get_loss("poisson"), 50)


@pytest.mark.parametrize("options", [dict(init="random"), dict(init="nndsvd"),
                                     dict(learning_method="online")], ids=str)
def test_topics_larger_than_memory_are_refused_at_once(options):
    # 10**12 x 50 doubles (364 TiB) exceed any machine's memory: refused before
    # drawing the topics one by one (10**9 kept a fit busy for minutes)
    with pytest.raises(ValueError, match=r"^n_topics=1000000000000 is too large: the topics "
                                         r"alone \(1000000000000 x 50 terms in float64, "
                                         r"3\.73e\+05 GiB\) exceed this machine's memory \(check "
                                         r"the data's number of terms too\)$"):
        STC(n_topics=10 ** 12, **options).fit(counts())
    with pytest.raises(ValueError, match="^n_topics=1000000000000 is too large"):
        STC(n_topics=10 ** 12).partial_fit(counts())


def test_data_too_wide_for_the_topics_is_refused_at_once():
    # a typo'd index in an SVMlight file (2e9) made X 2e9 columns wide: the corpus's
    # dense column sums ran for a minute before the topics were refused
    wide = sp.csr_matrix((np.array([1.0, 1.0, 2.0]), np.array([1, 2 * 10 ** 9, 3]),
                          np.array([0, 2, 3])), shape=(2, 2 * 10 ** 9 + 1))
    with pytest.raises(ValueError, match=r"^n_topics=10000 is too large: the topics alone "
                                         r"\(10000 x 2000000001 terms"):
        STC(n_topics=10 ** 4, init="random").fit(wide)


def test_labels_that_are_none_are_named():
    y = np.array([None, "a", "b"] * 10, dtype=object)
    with pytest.raises(ValueError, match=r"^y contains None \(10 of 30 labels\)"):
        MedSTC(n_topics=2, max_iter=2).fit(counts(), y)


def test_labels_and_classes_that_are_nan_are_named():
    # a NaN among partial_fit's classes became a class of its own, with a NaN score
    y = np.arange(30) % 2
    with pytest.raises(ValueError, match=r"^classes contains NaN \(1 of 3 labels\): a missing "
                                         r"label is not a class"):
        MedSTC(learning_method="online").partial_fit(counts(), y, classes=[np.nan, 0, 1])
    with pytest.raises(ValueError, match=r"^y contains NaN \(15 of 30 labels\)"):
        MedSTC(n_topics=2, max_iter=2).fit(counts(), np.where(y == 0, np.nan, 1.0))


def test_integers_beyond_float64_are_judged_by_value():
    # np.isfinite of such a Python int raised TypeError without naming the parameter
    with pytest.raises(ValueError, match=r"^STC: n_jobs must be None or an integer in "
                                         r"\[-2147483647, 2147483647\] other than 0, got 1180"):
        STC(n_jobs=2 ** 70).fit(counts())
    with pytest.raises(ValueError, match=r"^STC: tol must be a real number in \[0, inf\], got 1"):
        STC(tol=10 ** 400).fit(counts())


def test_streams_that_are_not_streams_are_named():
    # they failed with "'NoneType' object is not iterable" or sklearn's "Expected 2D array"
    with pytest.raises(TypeError, match="^batches must be an iterable of count matrices, got "
                                        "NoneType$"):
        STC().fit_stream(None)
    with pytest.raises(TypeError, match="^batches must yield count matrices; batch 2 is None$"):
        STC(n_topics=2, n_passes=1).fit_stream([counts(), None])
    with pytest.raises(TypeError, match=r"^batches must be an iterable of \(X_batch, y_batch\) "
                                        "pairs, got NoneType$"):
        MedSTC().fit_stream(None, classes=[0, 1])


def test_text_given_as_x_is_named():
    # it failed with numpy's "could not convert string to float: np.str_('a')"
    with pytest.raises(TypeError, match=r"^X must hold counts \(numbers\), got an array of "
                                        r"strings \(<U1\)"):
        STC().fit(np.array([["a", "b"], ["c", "d"]]))
