"""Online MedSTC: partial_fit, fit_stream, fit(learning_method="online"), the stochastic SVM step."""
import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file
from sklearn.exceptions import ConvergenceWarning

import stc
import stc.readers
from stc import MedSTC
from stc._learning.dictionary import initial_dictionary
from stc._learning.supervised.labelled_online import SVM_CHUNK, stochastic_svm_step
from stc._learning.supervised.svm import CuttingPlaneSVM, primal_objective

# rho in absolute units: fit measures w_bar on all of X, fit_stream on its first batch
SMALL = dict(n_topics=4, rho=0.01, rho_units="absolute", random_state=0,
             learning_method="online", batch_size=150)


@pytest.fixture(scope="module")
def labelled(newsgroups):
    train, test = newsgroups
    rows = np.random.RandomState(0).permutation(train.data.shape[0])[:600]  # sorted by class
    return train.data[rows], train.target[rows], test


def batches_of(X, y, size=150):
    return [(X[i:i + size], y[i:i + size]) for i in range(0, X.shape[0], size)]


def assert_same_fit(a, b):
    for name in ("components_", "coef_", "joint_coef_", "online_responsibilities_",
                 "online_code_sums_", "term_counts_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.refit_C_ == b.refit_C_ and a.n_docs_seen_ == b.n_docs_seen_


# ---- the three ways of learning online agree

def test_partial_fit_loop_equals_fit_stream(labelled):
    X, y, _ = labelled
    classes = np.unique(y)
    # a one-shot stream takes the refit steps in its pass, as partial_fit does
    streamed = MedSTC(**SMALL, n_passes=1, topic_averaging=0.0).fit_stream(
        iter(batches_of(X, y)), classes=classes)
    looped = MedSTC(**SMALL)
    for Xb, yb in batches_of(X, y):
        looped.partial_fit(Xb, yb, classes=classes)
    assert_same_fit(streamed, looped)
    assert looped.n_batch_iter_ == 4 and looped.n_docs_seen_ == 600
    np.testing.assert_array_equal(streamed.predict(X[:50]), looped.predict(X[:50]))


class Schedule:
    """The batches an online fit draws (pass by pass, then the refit's), for fit_stream."""

    def __init__(self, X, y, orders, size):
        self.X, self.y, self.orders, self.size, self.passes = X, y, orders, size, 0

    def __len__(self):
        return -(-self.X.shape[0] // self.size)

    def __iter__(self):
        order = self.orders[self.passes]
        self.passes += 1
        for first in range(0, order.size, self.size):
            rows = order[first:first + self.size]
            yield self.X[rows], self.y[rows]


def test_fit_stream_equals_online_fit_on_its_schedule(labelled):
    """fit(online) is fit_stream over the shuffled batches fit draws from random_state.

    Both take the refit steps in one more pass over the batches, with the final topics.
    """
    X, y, _ = labelled
    params = dict(SMALL, n_passes=2, topic_averaging=0.5, total_samples=X.shape[0])
    fitted = MedSTC(**params).fit(X, y)
    # replay the draws of fit's random state: an order, the starting topics, an order
    rng = np.random.RandomState(0)
    first_order = rng.permutation(X.shape[0])
    replay = np.random.RandomState(0)
    replay.permutation(X.shape[0])
    initial_dictionary(X[first_order[:150]], 4, rng)
    # the refit pass's order: a new draw from random_state=0, the first order again
    orders = [first_order, rng.permutation(X.shape[0]), first_order]
    streamed = MedSTC(**dict(params, random_state=replay)).fit_stream(
        Schedule(X, y, orders, 150), classes=np.unique(y))
    assert_same_fit(fitted, streamed)
    np.testing.assert_array_equal(fitted.objective_, streamed.objective_)
    # the refit saw every document once, coded as transform codes it
    assert fitted.online_refit_docs_ == X.shape[0]
    theta = fitted.transform(X)
    assert np.isclose(fitted.online_refit_square_norms_, np.sum(theta * theta), rtol=1e-12)


# ---- the stochastic SVM step

def test_one_step_is_the_pegasos_update():
    """Step t: W <- (1 - 1/t) W + C / (t |B|) sum_{violated d} (e_{y_d} - e_{yhat_d}) theta_d."""
    rng = np.random.default_rng(1)
    theta, y = rng.random((SVM_CHUNK, 3)), rng.integers(0, 4, SVM_CHUNK)
    W0 = rng.normal(size=(4, 3))
    start = W0.copy()
    C, cost, t = 2.0, 1.0, 4
    W, steps = stochastic_svm_step(W0, theta, y, C, cost, t - 1)
    np.testing.assert_array_equal(W0, start)  # a new array is returned
    expected = (1 - 1 / t) * W0
    for d in range(SVM_CHUNK):
        scores = W0 @ theta[d] + cost * (np.arange(4) != y[d])
        y_hat = int(np.argmax(scores))
        if scores[y_hat] - scores[y[d]] > 0:
            expected[y[d]] += C / (t * SVM_CHUNK) * theta[d]
            expected[y_hat] -= C / (t * SVM_CHUNK) * theta[d]
    norm = np.linalg.norm(expected)
    expected *= min(1.0, np.sqrt(2 * C * cost) / norm)
    np.testing.assert_allclose(W, expected, rtol=1e-13, atol=1e-15)
    assert steps == t


def test_average_is_the_mean_of_the_iterates():
    rng = np.random.default_rng(2)
    theta, y = rng.random((3 * SVM_CHUNK, 3)), rng.integers(0, 3, 3 * SVM_CHUNK)
    average, W, iterates = np.zeros((3, 3)), np.zeros((3, 3)), []
    for first in range(0, 3 * SVM_CHUNK, SVM_CHUNK):
        W, _ = stochastic_svm_step(W, theta[first:first + SVM_CHUNK], y[first:first + SVM_CHUNK],
                                   5.0, 1.0, len(iterates))
        iterates.append(W)
    W_all, steps = stochastic_svm_step(np.zeros((3, 3)), theta, y, 5.0, 1.0, 0, average)
    np.testing.assert_array_equal(W_all, iterates[-1])
    np.testing.assert_allclose(average, np.mean(iterates, axis=0), rtol=1e-13)


def test_stochastic_step_converges_to_the_cutting_plane_solution():
    """Passes of the step over a fixed problem approach the 1-slack SVM's optimum of (4)'s block."""
    rng = np.random.default_rng(0)
    n, K, n_classes = 800, 5, 3
    centres = 2.0 * rng.random((n_classes, K))
    y = rng.integers(0, n_classes, n)
    theta = np.abs(centres[y] + 0.4 * rng.normal(size=(n, K)))
    C, cost = 50.0, 1.0
    reference = CuttingPlaneSVM(C=C, cost=cost, tol=1e-6).fit(theta, y)
    best = reference.objective_
    W, steps, gaps = np.zeros((n_classes, K)), 0, []
    average = np.zeros_like(W)
    for _ in range(30):
        W, steps = stochastic_svm_step(W, theta, y, C, cost, steps, average)
        gaps.append(primal_objective(average, theta, y, C, cost) - best)
    assert steps == 30 * n // SVM_CHUNK
    assert min(gaps) >= -1e-9 * best  # nothing beats the certified optimum
    # the mean of the iterates keeps the early ones: it converges more slowly than the last
    assert gaps[-1] < 0.05 * gaps[0] and gaps[-1] < 0.03 * best
    assert primal_objective(W, theta, y, C, cost) - best < 0.005 * best
    predicted = np.argmax(theta @ average.T, axis=1)
    assert np.mean(predicted == reference.predict(theta)) > 0.98


# ---- classes

def test_classes_are_required_on_the_first_call(labelled):
    X, y, _ = labelled
    with pytest.raises(ValueError, match="classes must be given on the first call"):
        MedSTC(**SMALL).partial_fit(X[:100], y[:100])
    with pytest.raises(ValueError, match="classes must be given"):
        MedSTC(**SMALL).fit_stream(batches_of(X, y))
    model = MedSTC(**SMALL).partial_fit(X[:100], y[:100], classes=np.unique(y))
    model.partial_fit(X[100:200], y[100:200])  # later calls may omit them
    with pytest.raises(ValueError, match="differs from the classes of the first call"):
        model.partial_fit(X[200:300], y[200:300], classes=np.unique(y)[:2])
    unseen = y[200:300].copy()
    unseen[3] = 99
    with pytest.raises(ValueError, match="y holds labels not in classes"):
        model.partial_fit(X[200:300], unseen)
    with pytest.raises(ValueError, match="one label per document"):
        model.partial_fit(X[200:300], y[200:299])
    with pytest.raises(ValueError, match="at least 2 classes"):
        MedSTC(**SMALL).partial_fit(X[:100], np.zeros(100), classes=[0])
    with pytest.raises(ValueError, match="labels of batch 2 holds labels not in classes"):
        MedSTC(**SMALL).fit_stream([(X[:100], y[:100]), (X[100:200], unseen)],
                                   classes=np.unique(y[:100]))
    with pytest.raises(TypeError, match="pairs"):
        MedSTC(**SMALL).fit_stream([X[:100]], classes=np.unique(y))


def test_partial_fit_refuses_a_batch_fit(labelled):
    X, y, _ = labelled
    model = MedSTC(n_topics=3, max_iter=2, tol=0.0, random_state=0, learning_method="online",
                   batch_size=100, n_passes=1).fit(X[:200], y[:200])
    assert model.n_docs_seen_ == 200 and not hasattr(model, "hinge_")
    model.set_params(learning_method="batch")
    with pytest.warns(ConvergenceWarning):
        model.fit(X[:200], y[:200])  # forgets the online state
    assert not hasattr(model, "n_docs_seen_") and len(model.hinge_) == 2
    with pytest.raises(ValueError, match="learning_method='batch'"):
        model.partial_fit(X[:100], y[:100])


# ---- files, threads, accuracy

def test_save_load_predicts_and_continues_bit_identically(labelled, tmp_path):
    X, y, test = labelled
    classes = np.unique(y)
    model = MedSTC(**SMALL)
    for Xb, yb in batches_of(X[:300], y[:300]):
        model.partial_fit(Xb, yb, classes=classes)
    model.save(tmp_path / "online.stc")
    loaded = stc.load(tmp_path / "online.stc")
    np.testing.assert_array_equal(loaded.decision_function(test.data),
                                  model.decision_function(test.data))
    for Xb, yb in batches_of(X[300:], y[300:]):
        model.partial_fit(Xb, yb)
        loaded.partial_fit(Xb, yb)
    # the file keeps the Newton start of STC's simplex step (online_multipliers_) too
    for name in ("components_", "coef_", "joint_coef_", "objective_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    assert loaded.n_docs_seen_ == model.n_docs_seen_ == 600
    assert loaded.objective_.shape == (model.n_iter_,) == (4,)
    fitted = MedSTC(**SMALL, n_passes=2).fit(X, y)
    fitted.save(tmp_path / "fit.stc")
    np.testing.assert_array_equal(stc.load(tmp_path / "fit.stc").predict(test.data),
                                  fitted.predict(test.data))


def test_refit_c_may_change_between_partial_fit_calls(labelled):
    # refit_C=None after a refitting call failed half-way ("float() argument ... NoneType")
    X, y, _ = labelled
    model = MedSTC(**SMALL).partial_fit(X[:150], y[:150], classes=np.unique(y))
    model.set_params(refit_C=None).partial_fit(X[150:300], y[150:300])
    assert model.refit_C_ is None and np.array_equal(model.coef_, model.joint_coef_)
    assert model.n_docs_seen_ == 300
    model.set_params(refit_C="auto").partial_fit(X[300:450], y[300:450])
    assert model.refit_C_ > 0 and not np.array_equal(model.coef_, model.joint_coef_)


def test_threads_do_not_change_the_fit(labelled):
    X, y, _ = labelled
    one = MedSTC(**SMALL, n_passes=2, n_jobs=1).fit(X, y)
    two = MedSTC(**SMALL, n_passes=2, n_jobs=2).fit(X, y)
    assert_same_fit(one, two)


def test_online_fit_classifies_the_embedded_corpus(newsgroups):
    """Online MedSTC on the embedded 3-class corpus: close to batch MedSTC's test accuracy."""
    train, test = newsgroups
    online = MedSTC(n_topics=10, random_state=0, learning_method="online").fit(train.data,
                                                                                train.target)
    assert online.score(test.data, test.target) > 0.85
    assert online.n_docs_seen_ == 2 * train.data.shape[0]  # n_passes=2
    assert online.online_total_samples_ == train.data.shape[0]
    assert online.refit_C_ > 0 and online.coef_.shape == (3, 10)
    assert online.joint_coef_ is not online.coef_


# ---- a labelled file read in batches (stc.readers.iter_batches(..., labels=True))

@pytest.mark.parametrize("batch_size", [1, 70, 150, 10 ** 6])
def test_labelled_svmlight_batches_are_the_whole_file(tmp_path, labelled, batch_size):

    X, y, _ = labelled
    X, y = X[:300], y[:300]
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=True)
    whole = stc.readers.read_svmlight(path)
    reader = stc.readers.iter_batches(path, batch_size, labels=True)
    for _ in range(2):  # re-iterable
        pairs = list(reader)
        assert all(isinstance(p, tuple) and len(p) == 2 for p in pairs)
        assert [p[0].shape[0] for p in pairs] == [min(batch_size, 300 - i)
                                                 for i in range(0, 300, batch_size)]
        stacked = sp.vstack([p[0] for p in pairs], format="csr")
        assert stacked.shape == whole.data.shape and (stacked != whole.data).nnz == 0
        labels = np.concatenate([p[1] for p in pairs])
        assert labels.dtype == np.int64
        np.testing.assert_array_equal(labels, whole.target)
        np.testing.assert_array_equal(labels, y)
    # without labels: the counts alone, as before
    assert all(sp.issparse(b) for b in stc.readers.iter_batches(path, batch_size))
    assert all(sp.issparse(b) for b in stc.readers.iter_batches(path, batch_size, labels=None))


@pytest.mark.parametrize("labels_as", ["file", "sequence"])
def test_labelled_matrix_market_batches_are_the_whole_file(tmp_path, labelled, labels_as):

    X, y, _ = labelled
    X, y = X[:200], y[:200]
    path, labels_path = tmp_path / "train.mtx", tmp_path / "labels.txt"
    scipy.io.mmwrite(str(path), X)
    labels_path.write_text("".join(f"{label}\n" for label in y))
    labels = labels_path if labels_as == "file" else list(y)
    pairs = list(stc.readers.iter_batches(path, 64, labels=labels))
    whole = stc.readers.read_matrix_market(path, labels=labels_path)
    stacked = sp.vstack([p[0] for p in pairs], format="csr")
    assert (stacked != whole.data).nnz == 0 and stacked.shape == whole.data.shape
    np.testing.assert_array_equal(np.concatenate([p[1] for p in pairs]), whole.target)
    np.testing.assert_array_equal(whole.target, y)


def test_fit_stream_of_a_labelled_file_equals_in_memory(tmp_path, labelled):

    X, y, test = labelled
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=True)
    classes = np.unique(y)
    reader = stc.readers.iter_batches(path, 150, n_features=X.shape[1], labels=True)
    from_file = MedSTC(**SMALL).fit_stream(reader, classes=classes)
    in_memory = MedSTC(**SMALL).fit_stream(batches_of(X, y), classes=classes)
    assert_same_fit(from_file, in_memory)
    np.testing.assert_array_equal(from_file.objective_, in_memory.objective_)
    np.testing.assert_array_equal(from_file.predict(test.data[:100]),
                                  in_memory.predict(test.data[:100]))


def test_labels_asked_of_a_file_without_them(tmp_path, labelled):

    X, y, _ = labelled
    mtx, svm = tmp_path / "train.mtx", tmp_path / "train.svm"
    scipy.io.mmwrite(str(mtx), X[:20])
    dump_svmlight_file(X[:20], y[:20], str(svm), zero_based=True)
    with pytest.raises(ValueError, match="labels=True.*holds no labels"):
        stc.readers.iter_batches(mtx, 5, labels=True)
    with pytest.raises(ValueError, match="20 documents but labels"):
        stc.readers.iter_batches(mtx, 5, labels=list(y[:19]))
    with pytest.raises(TypeError, match="labels must be"):
        stc.readers.iter_batches(mtx, 5, labels=3)
    with pytest.raises(ValueError, match="n_features=7"):
        stc.readers.iter_batches(mtx, 5, n_features=7)
    with pytest.raises(ValueError, match="carries its own labels: give labels=True"):
        stc.readers.iter_batches(svm, 5, labels=list(y[:20]))
    with pytest.raises(TypeError, match="labels must be True or False"):
        stc.readers.iter_svmlight_batches(svm, 5, labels="yes")
    # a stream of counts without labels is refused by fit_stream, naming what it needs
    with pytest.raises(TypeError, match="pairs"):
        MedSTC(**SMALL).fit_stream(stc.readers.iter_batches(svm, 5), classes=np.unique(y))


# ---- step 1: one label-free sweep where the codes only start step 2

def _supervision_with_a_classifier(X, y, n_topics):
    from stc._learning.supervised.labelled_online import OnlineSupervision

    supervision = OnlineSupervision(int(y.max()) + 1, 3e4, 3600.0, "auto", X.shape[0], 2)
    supervision.coef = np.random.default_rng(0).normal(size=(int(y.max()) + 1, n_topics))
    return supervision


@pytest.mark.parametrize("with_classifier", [False, True])
def test_step_one_makes_the_given_sweeps_or_codes_as_transform(labelled, with_classifier):
    from stc._learning.coding import code_new_documents
    from stc._learning.supervised.labelled_online import LABEL_FREE_SWEEPS, code_labelled_batch

    X, y, _ = labelled
    X, y = X[:120], y[:120]
    model = MedSTC(**SMALL).partial_fit(X, y, classes=np.unique(y))
    problem, beta = model._coding_problem(), model.components_
    supervision = _supervision_with_a_classifier(X, y, beta.shape[0])
    if not with_classifier:
        supervision.coef = None
    for sweeps in (LABEL_FREE_SWEEPS, 3, None):
        coded = code_labelled_batch(problem, X, y, beta, supervision,
                                    label_free_sweeps=sweeps)
        expected_problem = problem if sweeps is None else problem.with_max_iter(sweeps)
        theta, _, result = code_new_documents(expected_problem, X, beta)
        # label-free codes of the batch's own columns: the same numbers
        np.testing.assert_array_equal(coded.free_theta, theta)
        if sweeps is not None:  # a document may converge before the cap
            assert np.all(result.n_iter <= sweeps) and np.any(result.n_iter == sweeps)
        if not with_classifier:  # no eta yet: the label-free codes are the batch's codes
            np.testing.assert_array_equal(coded.theta, theta)


def test_refit_within_a_pass_trains_on_converged_label_free_codes(labelled, monkeypatch):
    """partial_fit (and a one-shot stream's last pass) refits on step 1's codes: those are
    coded to convergence, as transform codes; a learning pass with a refit pass after it
    makes one sweep."""
    import stc._learning.supervised.labelled_online as online

    seen = []
    real = online.code_labelled_batch

    def spy(*args, **kwargs):
        seen.append(args[6] if len(args) > 6 else kwargs.get("label_free_sweeps"))
        return real(*args, **kwargs)

    monkeypatch.setattr(online, "code_labelled_batch", spy)
    X, y, _ = labelled
    MedSTC(**SMALL).partial_fit(X[:150], y[:150], classes=np.unique(y))
    assert seen == [None]
    seen.clear()
    MedSTC(**SMALL, n_passes=1).fit(X, y)  # refit in its own pass after the learning pass
    assert seen == [online.LABEL_FREE_SWEEPS] * 4


def test_a_batch_without_a_word_is_skipped(labelled):
    # eta's stochastic step on its all-zero codes moved coef_ by about 26,000
    X, y, _ = labelled
    classes = np.unique(y)
    plain = MedSTC(**SMALL).partial_fit(X[:150], y[:150], classes=classes)
    skipping = MedSTC(**SMALL).partial_fit(X[:150], y[:150], classes=classes)
    skipping.partial_fit(sp.csr_matrix((4, X.shape[1])), y[:4])
    for name in ("components_", "coef_", "joint_coef_"):
        np.testing.assert_array_equal(getattr(skipping, name), getattr(plain, name))
    assert skipping.n_docs_seen_ == 150
