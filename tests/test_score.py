"""STC.score: document completion, a held-out score that compares hyper-parameters.

The old score (minus objective (2)) contains the penalties, so a grid search
on it always picked the smallest lambda_. The new one holds out every second
stored entry of each document, codes the rest, and scores the held-out words:
for counts, their mean log-likelihood per token under the multinomial
p(n | d) = 0.99 pi_d . beta_n + 0.01 u_n (pi_d: the document's topic
proportions with a pseudo-count added to every topic; u: smoothed training
term frequencies); otherwise minus the mean held-out loss.
"""
import copy

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.model_selection import GridSearchCV, KFold

from stc import STC, MedSTC
from stc._learning.completion import BACKGROUND_WEIGHT, TOPIC_PSEUDO_COUNT, split_entries

from conftest import brief_fit


def alternate_halves(X):
    """Observed and held-out halves, built entry by entry (an independent reference)."""
    observed = sp.lil_matrix(X.shape)
    held_out = sp.lil_matrix(X.shape)
    for d in range(X.shape[0]):
        row = X.getrow(d)
        for position, (n, w) in enumerate(zip(row.indices, row.data)):
            (held_out if position % 2 else observed)[d, n] = w
    return observed.tocsr(), held_out.tocsr()


@pytest.fixture(scope="module")
def small(newsgroups):
    train, test = newsgroups
    X = train.data[::6]
    model = STC(n_topics=4, max_iter=5, random_state=0).fit(X)
    return model, test.data[::5]


@brief_fit
def test_split_alternates_the_entries_of_each_document(small):
    _, X = small
    observed, held_out = split_entries(X)
    ref_observed, ref_held_out = alternate_halves(X)
    assert (observed != ref_observed).nnz == 0 and (held_out != ref_held_out).nnz == 0
    assert observed.nnz + held_out.nnz == X.nnz
    assert np.array_equal((observed + held_out).toarray(), X.toarray())


def test_score_is_the_held_out_multinomial_log_likelihood(small):
    model, X = small
    observed, held_out = alternate_halves(X)
    theta = model.transform(observed)
    beta = model.components_
    counts = model.term_counts_
    u = (counts + 1) / (counts.sum() + counts.size)
    assert np.all(u > 0) and u.sum() == pytest.approx(1.0)
    # the completion distribution of every document: a probability vector over the terms
    K = theta.shape[1]
    assert TOPIC_PSEUDO_COUNT > 0
    topical = np.empty((theta.shape[0], beta.shape[1]))
    for d, code in enumerate(theta):
        if code.sum() > 0:
            proportions = (code / code.sum() + TOPIC_PSEUDO_COUNT) / (1 + K * TOPIC_PSEUDO_COUNT)
            assert proportions.sum() == pytest.approx(1.0, rel=1e-12)
            topical[d] = proportions @ beta
        else:
            topical[d] = u
    p = (1 - BACKGROUND_WEIGHT) * topical + BACKGROUND_WEIGHT * u
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    H = held_out.tocoo()
    expected = np.sum(H.data * np.log(p[H.row, H.col])) / H.data.sum()
    assert model.score(X) == pytest.approx(expected, rel=1e-12)
    assert expected < 0


@brief_fit
def test_term_counts_are_the_training_column_sums(newsgroups):
    train, _ = newsgroups
    X = train.data[:200]
    batch = STC(n_topics=3, max_iter=2, random_state=0).fit(X)
    np.testing.assert_array_equal(batch.term_counts_, np.asarray(X.sum(axis=0)).ravel())
    online = STC(n_topics=3, random_state=0)
    online.partial_fit(X[:120])
    online.partial_fit(X[120:])
    np.testing.assert_allclose(online.term_counts_, np.asarray(X.sum(axis=0)).ravel())


@brief_fit
def test_term_counts_count_each_document_once_whatever_the_passes(newsgroups):
    """Online learning's later passes read the same documents again; counted, they would
    make score's background depend on n_passes (its add-one smoothing shrinks with them)."""
    train, _ = newsgroups
    X, y = train.data[::5][:200], train.target[::5][:200]
    column_sums = np.asarray(X.sum(axis=0)).ravel()
    params = dict(n_topics=3, learning_method="online", batch_size=64, n_passes=3,
                  random_state=0)
    np.testing.assert_allclose(STC(**params).fit(X).term_counts_, column_sums)
    np.testing.assert_allclose(STC(**params).fit_stream([X[:100], X[100:]]).term_counts_,
                               column_sums)
    np.testing.assert_allclose(MedSTC(**params).fit(X, y).term_counts_, column_sums)


@brief_fit
def test_score_of_a_non_count_loss_is_minus_the_held_out_loss(newsgroups):
    train, test = newsgroups
    model = STC(n_topics=3, loss="gaussian", max_iter=3, random_state=0).fit(train.data[::8])
    X = test.data[::7]
    observed, held_out = alternate_halves(X)
    theta = model.transform(observed)
    H = held_out.tocoo()
    means = np.sum(theta[H.row] * model.components_[:, H.col].T, axis=1)
    expected = -np.mean(0.5 * (H.data - means) ** 2)
    assert model.score(X) == pytest.approx(expected, rel=1e-12)


def test_score_does_not_depend_on_the_thread_count(small):
    model, X = small
    one = model.set_params(n_jobs=1).score(X)
    two = model.set_params(n_jobs=2).score(X)
    model.set_params(n_jobs=None)
    assert one == two


@brief_fit
def test_grid_search_over_lambda_no_longer_picks_the_smallest(newsgroups):
    train, _ = newsgroups
    X = train.data[::6]
    grid = {"lambda_": [1e-3, 0.1, 10.0]}
    estimator = STC(n_topics=5, max_iter=5, random_state=0)
    folds = KFold(2, shuffle=True, random_state=0)
    search = GridSearchCV(estimator, grid, cv=folds).fit(X)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores))
    # measured: -9.72, -9.65, -9.69 (nats per held-out token): an interior optimum
    assert search.best_params_["lambda_"] != 1e-3, scores
    # the trap it replaces: minus the objective always picks the smallest lambda_
    trap = GridSearchCV(estimator, grid, cv=folds,
                        scoring=lambda model, X, y=None: -model.objective(X)).fit(X)
    assert trap.best_params_["lambda_"] == 1e-3


@brief_fit
def test_medstc_scores_accuracy(newsgroups):
    train, test = newsgroups
    model = MedSTC(n_topics=3, max_iter=2, random_state=0).fit(train.data[::4],
                                                               train.target[::4])
    X, y = test.data[::4], test.target[::4]
    assert model.score(X, y) == np.mean(model.predict(X) == y)


def test_score_refuses_what_it_cannot_score(small):
    model, X = small
    single = sp.csr_matrix((np.ones(3), ([0, 1, 2], [0, 5, 9])), shape=(3, X.shape[1]))
    with pytest.raises(ValueError, match="two or more stored entries"):
        model.score(single)
    old = copy.deepcopy(model)  # as a model file written before score used term_counts_
    del old.term_counts_
    with pytest.raises(ValueError, match="term_counts_"):
        old.score(X)


@brief_fit
def test_bernoulli_models_have_no_held_out_score():
    """Held-out entries are stored ones (all 1 for binary data): minus their loss would
    favour codes that predict 1 everywhere and was -inf at a mean of 0; score refuses."""
    rng = np.random.default_rng(0)
    X = sp.csr_matrix((rng.random((12, 15)) < 0.4).astype(float))
    model = STC(n_topics=2, loss="bernoulli", max_iter=2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="no held-out score for the bernoulli loss"):
        model.score(X)
    # a grid search on the default score says so too, not a silent -inf
    search = GridSearchCV(STC(n_topics=2, loss="bernoulli", max_iter=2, random_state=0),
                          {"lambda_": [0.1, 1.0]}, cv=KFold(2), error_score="raise")
    with pytest.raises(ValueError, match="scorer of your own"):
        search.fit(X)
