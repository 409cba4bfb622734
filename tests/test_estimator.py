"""The STC estimator: scikit-learn conventions, input checks, determinism, real-data sanity."""
import inspect
import pickle
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

from stc import STC, DataWarning, MedSTC
from stc.datasets import load_newsgroups_split

from conftest import brief_fit


def small_counts(n_docs=40, n_terms=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.poisson(0.6, size=(n_docs, n_terms)).astype(float)
    return sp.csr_matrix(X)


def test_defaults_are_the_knee_of_the_measured_frontier():
    """The documented defaults (benchmarks/results_sparsity.md, K = 50: the sparsest setting
    within 2 accuracy points of the best), kept in one place, the __init__ signatures."""
    ours = inspect.signature(STC).parameters
    assert {name: ours[name].default for name in
            ("rho", "rho_units", "theta_penalty", "lambda_", "gamma", "code_penalty")} == dict(
        rho=0.02, rho_units="relative", theta_penalty="l1", lambda_=0.1, gamma=None,
        code_penalty="l1")
    theirs = inspect.signature(MedSTC).parameters
    assert {name: theirs[name].default for name in
            ("rho", "rho_units", "theta_penalty", "lambda_", "gamma", "C", "refit_C")} == dict(
        rho=0.02, rho_units="relative", theta_penalty="l2", lambda_=30.0, gamma=None, C=3e4,
        refit_C="auto")
    # an estimator made without arguments has exactly those values
    assert STC().get_params() == {name: p.default for name, p in ours.items()}
    assert MedSTC().get_params() == {name: p.default for name, p in theirs.items()}


# The checks fit briefly, and on their generic data (normal draws shifted to be
# non-negative, not counts) partial_fit leaves a few documents at the sweep cap; some of
# that data has fewer terms than the 3 topics.
@parametrize_with_checks([STC(n_topics=3, max_iter=5, random_state=0)])
@brief_fit
@pytest.mark.filterwarnings(
    r"ignore:\d+ documents stopped at inner_max_iter=:sklearn.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings(r"ignore:n_topics=3 is more than the:stc.DataWarning")
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def exactly(message):
    """A pattern matching ``message`` and nothing else."""
    return "^" + re.escape(message) + "$"


# Text instead of counts: scikit-learn's "could not convert string to float: 'hello world'".
TEXT_INSTEAD_OF_COUNTS = ("X must hold counts (numbers), got {}: STC learns from a "
                          "document-term count matrix; read text with stc.readers.load_corpus (a "
                          "folder of text files) or count words with scikit-learn's "
                          "CountVectorizer")


@pytest.mark.parametrize("X, error, message", [
    (sp.csr_matrix(np.array([[1.0, -1.0]])), ValueError, "Negative values"),
    (np.array([[1.0, np.nan]]), ValueError, "NaN"),
    (np.array([[1.0, np.inf]]), ValueError, "infinity|infinite"),
    (np.zeros((0, 3)), ValueError, "0 sample"),
    (np.zeros((3, 0)), ValueError, "0 feature"),
    (["hello world", "goodbye moon"], TypeError,
     exactly(TEXT_INSTEAD_OF_COUNTS.format("a list of str"))),
    ([["hello", "world"]], TypeError, exactly(TEXT_INSTEAD_OF_COUNTS.format("a list of str"))),
    ((b"hello world",), TypeError, exactly(TEXT_INSTEAD_OF_COUNTS.format("a tuple of bytes"))),
    ("hello world", TypeError, exactly(TEXT_INSTEAD_OF_COUNTS.format("a str"))),
    (np.array(["hello world"]), TypeError,
     exactly(TEXT_INSTEAD_OF_COUNTS.format("an array of strings (<U11)"))),
])
def test_bad_input_is_refused(X, error, message):
    with pytest.raises(error, match=message):
        STC(n_topics=2, max_iter=2).fit(X)


@brief_fit
def test_text_given_to_a_fitted_model_is_refused():
    model = STC(n_topics=2, max_iter=2).fit(small_counts())
    with pytest.raises(TypeError, match=exactly(TEXT_INSTEAD_OF_COUNTS.format("a list of str"))):
        model.transform(["hello world"])


@pytest.mark.parametrize("X, n_topics, message", [
    ([[1, 2], [3, 4]], 5, "n_topics=5 is more than the 2 terms and 2 documents of X, too few "
                          "to learn that many distinct topics (some would repeat others); use "
                          "at most 2 topics"),
    (np.ones((40, 3)), 4, "n_topics=4 is more than the 3 terms of X, too few to learn that "
                          "many distinct topics (some would repeat others); use at most 3 "
                          "topics"),
    (np.ones((1, 30)), 2, "n_topics=2 is more than the 1 document of X, too few to learn that "
                          "many distinct topics (some would repeat others); use at most 1 "
                          "topic"),
])
@brief_fit
def test_more_topics_than_terms_or_documents_is_warned_about_once(X, n_topics, message):
    # STC(n_topics=5).fit([[1, 2], [3, 4]]) returned five topics, three of them identical
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DataWarning)
        STC(n_topics=n_topics, max_iter=2, random_state=0).fit(X)
    warned = [w for w in caught if issubclass(w.category, DataWarning)]
    assert [str(w.message) for w in warned] == [message]
    assert warned[0].filename == __file__  # the user's line


@brief_fit
def test_as_many_topics_as_terms_and_documents_is_not_warned_about():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        STC(n_topics=2, max_iter=2, random_state=0).fit([[1, 2], [3, 4]])


@pytest.mark.parametrize("params, message", [
    (dict(n_topics=0), "n_topics"),
    (dict(lambda_=-1.0), "lambda_"),
    (dict(rho=-0.1), "rho"),
    (dict(gamma=0.0), "gamma"),
    (dict(lambda_=0.0), "gamma"),
    (dict(theta_penalty="l3"), "theta_penalty"),
    (dict(code_penalty="l0"), "code_penalty"),
    (dict(loss="nope"), "not registered"),
    (dict(max_iter=0), "max_iter"),
    (dict(n_jobs=0), "n_jobs"),
])
def test_bad_parameters_are_refused(params, message):
    with pytest.raises(ValueError, match=message):
        STC(**params).fit(small_counts())


def test_wrong_parameter_types_are_refused():
    with pytest.raises(TypeError, match="n_topics"):
        STC(n_topics=2.5).fit(small_counts())
    with pytest.raises(TypeError, match="loss"):
        STC(loss=3).fit(small_counts())


@brief_fit
def test_vocabulary_size_must_match_at_transform():
    model = STC(n_topics=2, max_iter=3, random_state=0).fit(small_counts(n_terms=30))
    with pytest.raises(ValueError, match="features"):
        model.transform(small_counts(n_terms=31))


def test_bernoulli_refuses_counts_above_one():
    with pytest.raises(ValueError, match="bernoulli"):
        STC(n_topics=2, loss="bernoulli").fit(small_counts() * 3)


@brief_fit
def test_poisson_accepts_non_integer_counts():
    X = small_counts() * 0.37
    theta = STC(n_topics=2, max_iter=3, random_state=0).fit_transform(X)
    assert np.all(np.isfinite(theta))


@brief_fit
def test_empty_documents_get_zero_codes():
    X = small_counts().tolil()
    X[3, :] = 0
    X[7, :] = 0
    X = X.tocsr()
    model = STC(n_topics=3, max_iter=5, random_state=0).fit(X)
    theta = model.transform(X)
    assert np.all(np.isfinite(theta))
    assert np.all(theta[[3, 7]] == 0)
    assert np.isfinite(model.score(X))


@brief_fit
def test_unseen_terms_are_ignored_at_transform():
    X = small_counts().tolil()
    X[:, 5] = 0  # term 5 never occurs in training
    model = STC(n_topics=3, max_iter=5, random_state=0).fit(X.tocsr())
    assert np.all(model.components_[:, 5] == 0)
    Y = small_counts(n_docs=5, seed=1)
    codes = model.word_codes(Y)
    rows_of_term5 = np.flatnonzero(Y.indices == 5)
    assert rows_of_term5.size > 0
    assert codes[rows_of_term5].nnz == 0
    assert np.all(np.isfinite(model.transform(Y)))


@brief_fit
def test_fitted_attributes_and_topics_on_simplex():
    X = small_counts()
    model = STC(n_topics=4, max_iter=10, random_state=0).fit(X)
    assert model.components_.shape == (4, X.shape[1])
    assert np.all(model.components_ >= 0)
    np.testing.assert_allclose(model.components_.sum(axis=1), 1.0, rtol=1e-12)
    assert model.n_features_in_ == X.shape[1]
    assert model.objective_.shape == (model.n_iter_,)
    assert np.all(np.diff(model.objective_) <= 1e-12 * np.abs(model.objective_[:-1]))


@pytest.mark.parametrize("theta_penalty", ["l2", "l1"])
@brief_fit
def test_word_codes_follow_csr_order(theta_penalty):
    X = small_counts()
    model = STC(n_topics=3, max_iter=5, random_state=0, theta_penalty=theta_penalty).fit(X)
    codes = model.word_codes(X)
    assert codes.shape == (X.nnz, 3)
    dense = codes.toarray()
    theta = model.transform(X)
    # theta is the minimiser given the document's word codes, in CSR order (gamma = lambda):
    # l2, footnote 3, the shrunken average; l1, eq. (3), the truncated average.
    lam = model.lambda_
    for d in range(5):
        rows = slice(X.indptr[d], X.indptr[d + 1])
        m = X.indptr[d + 1] - X.indptr[d]
        mean = dense[rows].mean(axis=0)
        if theta_penalty == "l2":
            expected = np.maximum(lam * m * mean / (lam + lam * m), 0)
        else:
            expected = np.maximum(mean - lam / (2 * lam * m), 0)
        np.testing.assert_allclose(theta[d], expected, rtol=1e-12, atol=1e-14)


@brief_fit
def test_fit_transform_and_score_are_consistent():
    X = small_counts()
    model = STC(n_topics=3, max_iter=5, random_state=0)
    theta = model.fit_transform(X)
    np.testing.assert_array_equal(theta, model.transform(X))
    assert model.score(X) < 0


@brief_fit
def test_same_seed_identical_for_one_and_two_threads():
    train, test = load_newsgroups_split()
    X, Y = train.data[:300], test.data[:100]
    one = STC(n_topics=8, max_iter=5, random_state=3, n_jobs=1).fit(X)
    two = STC(n_topics=8, max_iter=5, random_state=3, n_jobs=2).fit(X)
    np.testing.assert_array_equal(one.components_, two.components_)
    np.testing.assert_array_equal(one.objective_, two.objective_)
    np.testing.assert_array_equal(one.transform(Y), two.transform(Y))


@brief_fit
def test_pickle_round_trip_gives_identical_transform():
    X = small_counts()
    model = STC(n_topics=3, max_iter=5, random_state=0).fit(X)
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(model.transform(X), clone.transform(X))


@brief_fit
def test_topics_stay_distinct_on_real_data():
    """The uniform start of the reference code collapses all topics into one;
    ours must learn topics that differ (low cosine similarity, few shared top words)."""
    train, _ = load_newsgroups_split()
    K = 10
    model = STC(n_topics=K, max_iter=15, random_state=0, n_jobs=2).fit(train.data)
    beta = model.components_
    unit = beta / np.linalg.norm(beta, axis=1, keepdims=True)
    cosine = unit @ unit.T
    mean_cosine = cosine[np.triu_indices(K, 1)].mean()
    assert mean_cosine < 0.5, mean_cosine
    top = model.top_words(train.vocabulary, 20)
    shared = [len(set(top[a]) & set(top[b])) / 20 for a in range(K) for b in range(a + 1, K)]
    assert np.mean(shared) < 0.3, np.mean(shared)
    theta = model.transform(train.data)
    # The codes separate the three groups: a nearest-centroid rule beats chance clearly.
    centroids = np.array([theta[train.target == c].mean(axis=0) for c in range(3)])
    unit_theta = theta / np.maximum(np.linalg.norm(theta, axis=1, keepdims=True), 1e-300)
    unit_centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)
    accuracy = np.mean(np.argmax(unit_theta @ unit_centroids.T, axis=1) == train.target)
    assert accuracy > 0.7, accuracy


@brief_fit
def test_top_words_checks_vocabulary_length():
    model = STC(n_topics=2, max_iter=2, random_state=0).fit(small_counts(n_terms=30))
    with pytest.raises(ValueError, match="vocabulary"):
        model.top_words(np.array(["w"] * 29))
    words = model.top_words(np.array([f"w{i}" for i in range(30)]), 3)
    assert len(words) == 2 and all(len(w) == 3 for w in words)


# ---------------------------------------------------------------------------
# One error type per kind of mistake; warnings at the end of a fit
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("estimator", [STC, MedSTC])
@pytest.mark.parametrize("params, error", [
    (dict(n_jobs=2 ** 40), ValueError),
    (dict(n_jobs=0), ValueError),
    (dict(n_jobs=1.5), TypeError),
    (dict(tol=np.nan), ValueError),
    (dict(rho=np.inf), ValueError),
    (dict(lambda_="0.1"), TypeError),
    (dict(max_iter=True), TypeError),
    (dict(theta_penalty=1), TypeError),
    (dict(random_state=-1), ValueError),
    (dict(verbose=-1), ValueError),
])
def test_each_kind_of_mistake_has_one_error_type(estimator, params, error):
    name = next(iter(params))
    X = small_counts()
    y = np.arange(X.shape[0]) % 2
    with pytest.raises(error, match=name):
        estimator(n_topics=2, max_iter=2, **params).fit(X, y)


@pytest.mark.parametrize("params, error", [(dict(C=0.0), ValueError), (dict(cost=-1), ValueError),
                                           (dict(refit_C="big"), ValueError),
                                           (dict(refit_C=[1.0]), TypeError),
                                           (dict(svm_max_iter=0), ValueError),
                                           (dict(total_samples=0), ValueError),
                                           (dict(batch_size=0), ValueError)])
def test_medstc_parameters_go_through_the_same_table(params, error):
    X = small_counts()
    with pytest.raises(error, match=next(iter(params))):
        MedSTC(n_topics=2, max_iter=2, **params).fit(X, np.arange(X.shape[0]) % 2)


@pytest.mark.parametrize("X", [sp.csr_matrix((4, 6)), np.zeros((3, 5))])
def test_a_corpus_without_any_word_is_refused(X):
    with pytest.raises(ValueError, match="every document is empty"):
        STC(n_topics=2, max_iter=2).fit(X)
    with pytest.raises(ValueError, match="every document is empty"):
        MedSTC(n_topics=2, max_iter=2).fit(X, np.arange(X.shape[0]) % 2)


def test_predict_before_fit_is_not_fitted_error():
    from sklearn.exceptions import NotFittedError

    for method in ("predict", "decision_function", "transform"):
        with pytest.raises(NotFittedError):
            getattr(MedSTC(), method)(small_counts())


def test_stopping_at_max_iter_warns_and_converging_does_not():
    from sklearn.exceptions import ConvergenceWarning
    import warnings

    X = small_counts()
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        STC(n_topics=2, max_iter=2, tol=0, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = STC(n_topics=2, max_iter=500, tol=1e-3, random_state=0).fit(X)
    assert model.n_iter_ < 500


@pytest.mark.parametrize("method", ["fit", "fit_transform"])
def test_a_fits_warning_points_at_the_users_line(method):
    # fit_transform runs through scikit-learn's output wrapper: the warning
    # still names this file, not a line inside stc or scikit-learn
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="max_iter=2") as record:
        getattr(STC(n_topics=2, max_iter=2, tol=0, random_state=0), method)(small_counts())
    assert [warning.filename for warning in record] == [__file__]


@brief_fit
def test_documents_at_the_sweep_cap_warn():
    from sklearn.exceptions import ConvergenceWarning

    # the exact coding step of each outer iteration (sweeps_per_iteration=None) is
    # expected to meet inner_tol; one that stops at inner_max_iter says so
    with pytest.warns(ConvergenceWarning, match="inner_max_iter=1"):
        STC(n_topics=3, max_iter=2, inner_max_iter=1, inner_tol=0, random_state=0,
            sweeps_per_iteration=None).fit(small_counts())


@brief_fit
def test_verbose_prints_progress_to_stderr(capsys):
    STC(n_topics=2, max_iter=3, tol=0, random_state=0, verbose=1).fit(small_counts())
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("iter")]
    assert out == "" and len(lines) == 3
    assert all("objective" in line and "elapsed" in line and "left" in line for line in lines)
    assert lines[-1].startswith("iter   3/3")


@brief_fit
def test_ctrl_c_stops_after_the_current_iteration_and_keeps_the_model():
    """SIGINT during fit: the iteration under way completes, then the fit stops with a
    warning; the model is fitted (topics on the simplex, codes usable)."""
    import os
    import signal

    from stc import FitInterruptedWarning
    from stc.losses import PoissonLoss, PythonLoss

    class InterruptingPoisson(PythonLoss):
        """The Poisson deviance; sends SIGINT to this process on its n-th loss call."""

        mean_domain = (0.0, np.inf)

        def __init__(self, interrupt_at=None):
            self.interrupt_at, self.calls, self.poisson = interrupt_at, 0, PoissonLoss()

        def loss(self, y, mean):
            self.calls += 1
            if self.calls == self.interrupt_at:
                os.kill(os.getpid(), signal.SIGINT)
            return self.poisson.loss(y, mean)

        def gradient(self, y, mean):
            return self.poisson.gradient(y, mean)

        def hessian(self, y, mean):
            return self.poisson.hessian(y, mean)

    X = small_counts(60, 40)
    counter = InterruptingPoisson()
    STC(n_topics=3, max_iter=1, tol=0, random_state=0, loss=counter).fit(X)
    per_iteration = counter.calls  # loss calls in one outer iteration
    loss = InterruptingPoisson(interrupt_at=per_iteration + 2)  # inside iteration 2
    with pytest.warns(FitInterruptedWarning, match="interrupted after 2 iterations"):
        model = STC(n_topics=3, max_iter=50, tol=0, random_state=0, loss=loss).fit(X)
    assert model.interrupted_ and model.n_iter_ == 2 and model.objective_.shape == (2,)
    np.testing.assert_allclose(model.components_.sum(axis=1), 1.0)
    assert np.all(np.isfinite(model.transform(X)))
    full = STC(n_topics=3, max_iter=2, tol=0, random_state=0,
               loss=InterruptingPoisson()).fit(X)
    assert not full.interrupted_
    np.testing.assert_array_equal(model.objective_, full.objective_)


def _objective_with_decreases(decreases, start=1e5):
    """An objective path whose relative decreases (f[i-1] - f[i]) / f[i] are ``decreases``."""
    objective = [start]
    for drop in decreases:
        objective.append(objective[-1] / (1 + drop))
    return objective


def test_interrupted_warning_counts_its_iterations_in_words():
    from types import SimpleNamespace

    from stc import FitInterruptedWarning
    from stc._learning.progress import warn_if_unfinished

    for done, words in ((1, "after 1 iteration;"), (2, "after 2 iterations;")):
        with pytest.warns(FitInterruptedWarning, match=re.escape(words)):
            warn_if_unfinished(SimpleNamespace(n_iter_=done), True, True, 0)


def test_remaining_iterations_extrapolate_a_geometric_decrease():
    from stc._learning.progress import remaining_iterations
    from stc._learning.training import relative_decrease_below

    # relative decrease 0.05 * 0.8^t at iteration t: the stopping rule (tol = 1e-4) stops
    # at t = 28 (0.05 * 0.8^28 = 9.3e-5, 0.05 * 0.8^27 = 1.2e-4)
    path = _objective_with_decreases([0.05 * 0.8 ** t for t in range(2, 100)])
    converged = relative_decrease_below(1e-4)
    stop = next(n for n in range(1, len(path)) if converged(path[:n]))
    assert stop == 28
    for n in (5, 10, 20, 27):
        assert remaining_iterations(path[:n], tol=1e-4, max_iter=1000) == stop - n
    assert remaining_iterations(path[:10], tol=1e-4, max_iter=15) == 5  # max_iter first
    assert remaining_iterations(path[:stop], tol=1e-4, max_iter=1000) == 0
    # with +-30 % noise on the decreases, once eleven are known the predicted last iteration
    # stays within two of the true one (a rate from the last two decreases is off by up
    # to 11 here, or not falling at all)
    noise = np.random.default_rng(0).uniform(0.7, 1.3, size=100)
    noisy = _objective_with_decreases([0.05 * 0.8 ** t * noise[t] for t in range(2, 100)])
    stop = next(n for n in range(1, len(noisy)) if converged(noisy[:n]))
    for n in range(12, stop):
        assert abs(n + remaining_iterations(noisy[:n], tol=1e-4, max_iter=1000) - stop) <= 2


def test_remaining_iterations_say_unknown_until_meaningful():
    from stc._learning.progress import remaining_iterations

    path = _objective_with_decreases([0.05 * 0.8 ** t for t in range(2, 20)])
    assert remaining_iterations(path[:4], tol=1e-4, max_iter=100) is None  # 3 decreases
    assert remaining_iterations(path[:5], tol=1e-4, max_iter=100) == 28 - 5
    rising = path[:8] + [path[7] * 1.01]  # the last iteration increased the objective
    assert remaining_iterations(rising, tol=1e-4, max_iter=100) is None
    assert remaining_iterations(rising + [rising[-1] * 0.999], 1e-4, 100) is not None
    flat = _objective_with_decreases([1e-2 * (1 + 0.1 * (t % 2)) for t in range(8)])
    assert remaining_iterations(flat, tol=1e-4, max_iter=100) is None  # not falling
    assert remaining_iterations(path[:3], tol=0, max_iter=100) == 97  # runs to max_iter
    assert remaining_iterations(path[:12], tol=1e-4, max_iter=12) == 0


@brief_fit
def test_feature_names_and_set_output_fit_a_pipeline():
    """Topic columns are named (stc0, stc1, ...); set_output and ColumnTransformer work."""
    from sklearn.compose import ColumnTransformer

    X = small_counts()
    model = STC(n_topics=3, max_iter=3, random_state=0).fit(X)
    np.testing.assert_array_equal(model.get_feature_names_out(), ["stc0", "stc1", "stc2"])
    assert model.set_output(transform="default") is model
    combined = ColumnTransformer([("topics", STC(n_topics=3, max_iter=3, random_state=0),
                                   list(range(X.shape[1])))]).fit(X.toarray())
    np.testing.assert_array_equal(combined.get_feature_names_out(),
                                  ["topics__stc0", "topics__stc1", "topics__stc2"])
    np.testing.assert_array_equal(combined.transform(X.toarray()), model.transform(X))
    pd = pytest.importorskip("pandas")
    frame = STC(n_topics=3, max_iter=3, random_state=0).set_output(transform="pandas").fit(
        X).transform(X)
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == ["stc0", "stc1", "stc2"]
