"""The learners of `stc._learning.learners` called directly: the estimator only dispatches to them.

A learner given the estimator's coding problem, data and options returns the topics the
estimator fits, bit for bit (the estimator adds nothing but validation and storage).
"""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from stc import STC
from stc._learning.learners import LearnedTopics, LearningOptions, LearningSteps, batch, online


@pytest.fixture(scope="module")
def corpus(newsgroups):
    return newsgroups[0].data[:300]


def problem_and_options(model, X):
    """The coding problem and the learner options of ``model`` for training data ``X``."""
    return model._use_count_scale(float(X.data.mean())), model._learning_options()


def assert_same_fit(learned, model):
    assert isinstance(learned, LearnedTopics)
    np.testing.assert_array_equal(learned.components, model.components_)
    np.testing.assert_array_equal(learned.objective, model.objective_)
    np.testing.assert_array_equal(learned.term_counts, model.term_counts_)
    assert learned.n_iter == model.n_iter_


def test_batch_learner_is_the_batch_fit(corpus):
    model = STC(n_topics=4, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "STC stopped at max_iter=", ConvergenceWarning)
        model.fit(corpus)
    problem, options = problem_and_options(STC(n_topics=4, max_iter=3, random_state=0), corpus)
    learned = batch.learn(problem, corpus, options)
    assert_same_fit(learned, model)
    assert not learned.converged and learned.online is None


def test_online_learners_are_the_online_fits(corpus):
    params = dict(n_topics=4, learning_method="online", batch_size=80, n_passes=2,
                  random_state=0)
    model = STC(**params).fit(corpus)
    problem, options = problem_and_options(STC(**params), corpus)
    learned = online.learn(problem, corpus, options)
    assert_same_fit(learned, model)
    np.testing.assert_array_equal(learned.online.statistics.responsibilities,
                                  model.online_responsibilities_)
    # 4 batches a pass, the first pass's joined into one step (300 documents: fewer than
    # online.first_step_documents(4))
    assert online.first_batches_joined(80, 4, 4) == 4
    assert learned.online.n_batch_iter == model.n_batch_iter_ == 1 + 4

    batches = [corpus[i:i + 100] for i in range(0, corpus.shape[0], 100)]
    streamed = STC(**params).fit_stream(batches)
    # w_bar of the first step: the first batches joined (here all: fewer documents than
    # online.FIRST_STEP_DOCUMENTS)
    assert corpus.shape[0] < online.FIRST_STEP_DOCUMENTS
    problem, options = problem_and_options(STC(**params), corpus)
    learned = online.learn_stream(lambda: problem, lambda: batches, options,
                                  n_batches=len(batches))
    assert_same_fit(learned, streamed)


def test_one_batch_is_partial_fit(corpus):
    model = STC(n_topics=4, random_state=0).partial_fit(corpus[:100]).partial_fit(corpus[100:])
    problem, options = problem_and_options(STC(n_topics=4, random_state=0), corpus[:100])
    state = online.OnlineState()
    for X in (corpus[:100], corpus[100:]):
        online.learn_batch(problem, X, options, state=state, rng=np.random.RandomState(0))
    np.testing.assert_array_equal(state.components, model.components_)
    np.testing.assert_array_equal(state.term_counts, model.term_counts_)
    assert state.n_batch_iter == model.n_batch_iter_ == 2


class CountingSteps(LearningSteps):
    """STC's steps plus an extra step that adds a constant to each iteration's objective."""

    def __init__(self):
        self.iterations = []

    def extra_step(self, engine):
        def step(state, iteration):
            self.iterations.append(iteration)
            return 1.0
        return step

    def describe(self, iteration):
        return f" extra {iteration}"


def test_batch_learner_runs_the_steps_it_is_given(corpus, capsys):
    """The learner takes its steps from `LearningSteps` alone: the extra step enters the
    objective and the progress lines, and STC's coding and dictionary steps are unchanged."""
    model = STC(n_topics=4, max_iter=3, tol=0.0, random_state=0)
    problem, options = problem_and_options(model, corpus)
    plain = batch.learn(problem, corpus, options)
    steps = CountingSteps()
    verbose = LearningOptions(**{**options.__dict__, "verbose": 1})
    counted = batch.learn(problem, corpus, verbose, steps)
    assert steps.iterations == [1, 2, 3]
    np.testing.assert_array_equal(counted.components, plain.components)
    np.testing.assert_array_equal(counted.objective, plain.objective + 1.0)
    assert "extra 3" in capsys.readouterr().err


def test_options_are_the_estimators_parameters():
    options = STC(n_topics=7, max_iter=5, batch_size=64, rho=0.3)._learning_options()
    assert options == LearningOptions(n_topics=7, max_iter=5, batch_size=64, rho=0.3,
                                      rho_units="relative", learning_decay=0.51,
                                      learning_offset=1.0, n_passes=3, topic_averaging=0.5,
                                      sweeps_per_iteration=1)
