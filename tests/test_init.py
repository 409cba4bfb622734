"""The starting topics of batch learning: the document draws, NNDSVD, and "auto" between them.

NNDSVD's truncated SVD runs in LAPACK, so its bits are not pinned
(tests/test_pinned_results.py); it is checked against an NNDSVD built here from
numpy's exact SVD on a matrix of known rank, where the randomized SVD is exact
too, and by what a fit from it must satisfy.
"""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

import stc
from stc import STC, MedSTC
from stc._learning.dictionary import (NNDSVD_MIN_TOPICS, initial_dictionary, nndsvd_dictionary,
                                      resolved_init)

from stc._learning.learners import online
from stc._learning.learners.online import online_start
from conftest import brief_fit


def reference_nndsvd_topics(X, n_topics):
    """NNDSVD's topics from numpy's full SVD: each the larger non-negative part of a pair."""
    U, _, Vt = np.linalg.svd(X, full_matrices=False)
    topics = []
    for k in range(n_topics):
        u, v = U[:, k], Vt[k]
        if k == 0:
            topics.append(np.abs(v))
            continue
        positive = np.linalg.norm(np.maximum(u, 0)) * np.linalg.norm(np.maximum(v, 0))
        negative = np.linalg.norm(np.minimum(u, 0)) * np.linalg.norm(np.minimum(v, 0))
        topics.append(np.maximum(v, 0) if positive >= negative else np.maximum(-v, 0))
    return np.array(topics)


def test_nndsvd_topics_are_the_non_negative_parts_of_the_singular_vectors():
    rng = np.random.default_rng(0)
    W, H = rng.gamma(1.0, size=(40, 4)), rng.gamma(0.5, size=(4, 30))
    H[:, -3:] = 0.0  # three terms that never occur
    X = W @ H  # rank 4: the randomized SVD finds the exact singular vectors
    beta = nndsvd_dictionary(sp.csr_matrix(X), 4, random_state=0, corpus_share=0.0)
    observed = X.sum(axis=0) > 0
    np.testing.assert_allclose(beta.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(beta[:, ~observed] == 0) and np.all(beta[:, observed] > 0)
    # where the reference is positive, beta is the reference normalised (the zeros
    # of the reference get X's mean entry before the normalisation)
    reference = reference_nndsvd_topics(X, 4)[:, observed]
    fill = X.sum() / X.size
    filled = np.where(reference > 1e-9, reference, fill)
    np.testing.assert_allclose(beta[:, observed], filled / filled.sum(axis=1, keepdims=True),
                               rtol=1e-6, atol=1e-9)


def test_the_corpus_share_keeps_every_observed_term_positive(newsgroups):
    train, _ = newsgroups
    X = train.data[:300]
    beta = nndsvd_dictionary(X, 5, random_state=0)
    counts = np.asarray(X.sum(axis=0)).ravel()
    assert np.all(beta[:, counts > 0] > 0) and np.all(beta[:, counts == 0] == 0)
    np.testing.assert_allclose(beta.sum(axis=1), 1.0, rtol=1e-12)
    # the same seed, the same topics (in one process)
    assert np.array_equal(beta, nndsvd_dictionary(X, 5, random_state=0))


def test_more_topics_than_directions_falls_back_to_the_draws():
    X = sp.csr_matrix(np.array([[1.0, 2.0, 0.0, 1.0], [0.0, 1.0, 3.0, 0.0]]))
    np.testing.assert_array_equal(nndsvd_dictionary(X, 3, random_state=0),
                                  initial_dictionary(X, 3, 0))


@brief_fit
def test_a_fit_from_nndsvd_decreases_the_objective_and_ignores_the_thread_count(newsgroups):
    train, _ = newsgroups
    X = train.data[::5]
    fits = []
    for n_jobs in (1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fits.append(STC(n_topics=6, max_iter=8, random_state=0, n_jobs=n_jobs,
                            init="nndsvd").fit(X))
    one, two = fits
    assert np.all(np.diff(one.objective_) <= 1e-12 * np.abs(one.objective_[1:]))
    assert np.array_equal(one.components_, two.components_)
    assert np.array_equal(one.objective_, two.objective_)
    drawn = STC(n_topics=6, max_iter=8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        drawn.fit(X)
    assert not np.array_equal(drawn.components_, one.components_)


@brief_fit
def test_medstc_starts_from_nndsvd_too(newsgroups):
    train, _ = newsgroups
    X, y = train.data[::6], train.target[::6]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        svd = MedSTC(n_topics=4, max_iter=2, random_state=0, init="nndsvd").fit(X, y)
        drawn = MedSTC(n_topics=4, max_iter=2, random_state=0).fit(X, y)
    assert drawn.init == "auto"  # the draws at 4 topics
    assert not np.array_equal(svd.components_, drawn.components_)
    assert np.all(np.diff(svd.objective_) <= 1e-9 * np.abs(svd.objective_[1:]))


def test_online_learning_starts_from_the_data_it_has_first(newsgroups, monkeypatch):
    """"auto" resolves for online learning as for batch learning (NNDSVD from 50 topics,
    draws of the first batch below); "nndsvd" is of the whole corpus in fit, of the first
    batch in partial_fit and fit_stream (its first step: its first batches joined until
    they hold FIRST_STEP_DOCUMENTS documents, here the first alone)."""
    monkeypatch.setattr(online, "FIRST_STEP_DOCUMENTS", 100)
    train, _ = newsgroups
    X = train.data[:200]
    assert resolved_init("auto", 49) == "random"
    assert resolved_init("auto", 50) == resolved_init("auto", 500) == "nndsvd"
    assert resolved_init("nndsvd", 3) == "nndsvd"
    options = STC(n_topics=3, learning_method="online", init="nndsvd",
                  random_state=0)._learning_options()
    np.testing.assert_array_equal(online_start(X, options, check_random_state(0)),
                                  nndsvd_dictionary(X, 3, 0))
    options = STC(n_topics=3, learning_method="online", random_state=0)._learning_options()
    np.testing.assert_array_equal(online_start(X, options, check_random_state(0)),
                                  initial_dictionary(X, 3, 0))
    params = dict(n_topics=3, learning_method="online", batch_size=100, n_passes=1,
                  random_state=0, topic_averaging=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for init in ("auto", "random", "nndsvd"):
            fitted = STC(init=init, **params).fit(X)
            streamed = STC(init=init, **params).fit_stream([X[:100], X[100:]])
            stepped = STC(init=init, **params).partial_fit(X[:100]).partial_fit(X[100:])
            np.testing.assert_array_equal(streamed.components_, stepped.components_)
            if init == "auto":
                auto = fitted.components_, streamed.components_
            elif init == "random":
                np.testing.assert_array_equal(fitted.components_, auto[0])
                np.testing.assert_array_equal(streamed.components_, auto[1])
            else:
                assert not np.array_equal(fitted.components_, auto[0])
                assert not np.array_equal(streamed.components_, auto[1])
    # the in-memory fit starts from all of X, the stream from its first batch
    assert not np.array_equal(auto[0], auto[1])


def test_a_bad_init_is_refused_by_name():
    with pytest.raises(ValueError, match="init must be one of 'auto', 'random', 'nndsvd'"):
        STC(init="svd").fit(sp.csr_matrix(np.ones((3, 4))))


@brief_fit
def test_a_model_file_keeps_init(tmp_path, newsgroups):
    """A file keeps the parameter; files written before it were fitted from the draws and
    load with init='random', so that a refit of the loaded model starts as the original."""
    from test_persistence import _file_from_before

    train, _ = newsgroups
    model = STC(n_topics=3, max_iter=2, random_state=0, init="nndsvd")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(train.data[:200])
    model.save(tmp_path / "today.stc")
    assert stc.load(tmp_path / "today.stc").init == "nndsvd"
    assert stc.load(_file_from_before(model, tmp_path, "init")).init == "random"


def test_auto_is_nndsvd_from_the_threshold_on_and_the_draws_below():
    assert NNDSVD_MIN_TOPICS == 50  # docs/quality.md and the docstrings say 50
    assert resolved_init("auto", NNDSVD_MIN_TOPICS - 1) == "random"
    assert resolved_init("auto", NNDSVD_MIN_TOPICS) == "nndsvd"
    assert resolved_init("auto", 500) == "nndsvd"
    for given in ("random", "nndsvd"):
        assert resolved_init(given, 2) == resolved_init(given, 500) == given


@pytest.mark.slow  # six fits at K = 49 and 50
@brief_fit
def test_a_default_fit_starts_as_auto_says(newsgroups):
    """At the default init, a batch fit at K = 50 is the NNDSVD fit, one at K = 49 the draws'."""
    train, _ = newsgroups
    X = train.data[:300]
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for K in (NNDSVD_MIN_TOPICS - 1, NNDSVD_MIN_TOPICS):
            for init in ("auto", "random", "nndsvd"):
                fits[K, init] = STC(n_topics=K, max_iter=1, random_state=0,
                                    init=init).fit(X).components_
    below, at = NNDSVD_MIN_TOPICS - 1, NNDSVD_MIN_TOPICS
    assert np.array_equal(fits[below, "auto"], fits[below, "random"])
    assert np.array_equal(fits[at, "auto"], fits[at, "nndsvd"])
    assert not np.array_equal(fits[at, "auto"], fits[at, "random"])


