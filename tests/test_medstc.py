"""MedSTC: labels, prediction, the shifted mean through the shared kernel, objective (4)."""
import numpy as np
import pytest

from stc._core.numpy_coding import theta_closed_form
from stc.coding import initial_codes, sparse_code
from stc.datasets import load_newsgroups_split
from stc.supervised import MedSTC
from stc.supervised.medstc import shift_for_labels


@pytest.fixture(scope="module")
def corpus():
    train, test = load_newsgroups_split()
    rng = np.random.default_rng(0)  # the splits are ordered by group: sample across groups
    tr = np.sort(rng.choice(train.data.shape[0], 400, replace=False))
    te = np.sort(rng.choice(test.data.shape[0], 200, replace=False))
    return train.data[tr], train.target[tr], test.data[te], test.target[te]


def test_fit_predict_with_string_labels(corpus):
    X, y, Xt, yt = corpus
    names = np.array(["graphics", "hockey", "space"])[y]
    model = MedSTC(n_topics=6, C=10.0, max_iter=5, random_state=0, n_jobs=2).fit(X, names)
    assert list(model.classes_) == ["graphics", "hockey", "space"]
    pred = model.predict(Xt)
    assert set(pred) <= set(model.classes_)
    assert model.decision_function(Xt).shape == (Xt.shape[0], 3)
    # well above chance (1/3) on held-out documents
    assert model.score(Xt, np.array(["graphics", "hockey", "space"])[yt]) > 0.6


def test_non_contiguous_integer_labels_and_two_classes(corpus):
    X, y, Xt, yt = corpus
    keep = y < 2
    labels = np.where(y[keep] == 0, 7, 42)
    model = MedSTC(n_topics=4, max_iter=3, random_state=0).fit(X[keep], labels)
    assert set(model.predict(Xt)) <= {7, 42}


def test_objective_4_never_increases_and_is_recorded(corpus):
    X, y, _, _ = corpus
    model = MedSTC(n_topics=6, C=10.0, max_iter=8, tol=0, random_state=0).fit(X, y)
    assert model.objective_.shape == (model.n_iter_,) == model.hinge_.shape
    rises = np.diff(model.objective_) / np.abs(model.objective_[:-1])
    assert np.all(rises <= 1e-9), rises


def test_shift_enters_theta_closed_form_through_the_kernel(corpus):
    """With a linear term b_d, theta is the footnote-3 (l2) / eq.-3 (l1) form of the shifted mean."""
    X, y, _, _ = corpus
    model = MedSTC(n_topics=5, max_iter=2, random_state=0).fit(X, y)
    beta = model.components_
    Xv = model._validate_X(X, reset=False)
    codes, theta = initial_codes(Xv, 5)
    shift = shift_for_labels(model.coef_, theta, y, model.C, model.delta)
    for penalty in ("l1", "l2"):
        c, t = codes.copy(), theta.copy()
        sparse_code(model._loss, Xv, beta, c, t, lam=0.1, gamma=0.1, rho=0.01,
                    theta_penalty=penalty, code_penalty="l1", max_iter=3, tol=0,
                    theta_linear=shift)
        lengths = np.diff(Xv.indptr)
        mean_code = np.add.reduceat(c, Xv.indptr[:-1])[lengths > 0] / lengths[lengths > 0, None]
        expected = theta_closed_form(mean_code, shift[lengths > 0], lengths[lengths > 0, None],
                                     0.1, 0.1, 0 if penalty == "l1" else 1)
        np.testing.assert_allclose(t[lengths > 0], expected, rtol=1e-12, atol=1e-12)


def test_bad_labels_are_refused(corpus):
    X, y, _, _ = corpus
    with pytest.raises(ValueError, match="2 classes"):
        MedSTC(n_topics=2, max_iter=2).fit(X, np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="one label per document"):
        MedSTC(n_topics=2, max_iter=2).fit(X, y[:-1])
    with pytest.raises(ValueError, match="C must be"):
        MedSTC(n_topics=2, C=0.0).fit(X, y)
