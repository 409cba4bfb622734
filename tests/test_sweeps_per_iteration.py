"""Batch learning with a fixed number of coding sweeps per outer iteration.

``sweeps_per_iteration=k`` codes every document with at most k sweeps per outer
iteration, warm-started; None runs the paper's exact coding step (every
document until ``inner_tol``). Both decrease objective (2) in every iteration.
"""
import warnings

import numpy as np
import pytest

from stc import STC, MedSTC
from stc._learning.coding import code_documents
from stc._learning.coding import iteration_problem
from stc._learning.learners.batch import initial_state
from stc._learning.training import CodingStep
from stc.datasets import load_newsgroups_split

from conftest import brief_fit


@pytest.fixture(scope="module")
def corpus():
    train, _ = load_newsgroups_split()
    return train.data[:400]


@brief_fit
@pytest.mark.parametrize("sweeps", [1, 2, None])
def test_the_objective_decreases_in_every_iteration(corpus, sweeps):
    model = STC(n_topics=8, max_iter=12, random_state=0, sweeps_per_iteration=sweeps)
    model.fit(corpus)
    assert np.all(np.diff(model.objective_) <= 1e-12 * np.abs(model.objective_[1:]))


@brief_fit
def test_the_recorded_objective_is_that_of_the_fitted_codes(corpus):
    """Each iteration's value is objective (2) at its codes and topics, with one sweep too."""
    model = STC(n_topics=6, max_iter=3, random_state=0, sweeps_per_iteration=1)
    X = model._validate_X(corpus, reset=True, loss=model._checked_loss())
    problem = model._set_count_scale(X)
    state = initial_state(X, problem.loss, 6, 0)
    from stc._learning.learners import LearningOptions
    from stc._learning.learners.batch import learn
    from stc._learning.coding import stc_objective

    learned = learn(problem, X, LearningOptions(n_topics=6, random_state=0, max_iter=3,
                                                sweeps_per_iteration=1), state=state)
    value = stc_objective(problem, X, learned.components, state.codes, state.theta)
    assert value == pytest.approx(learned.objective[-1], rel=1e-9)


def test_a_coding_step_makes_the_given_number_of_sweeps_and_reports_no_capped_documents(
        corpus):
    model = STC(n_topics=6, random_state=0)
    X = model._validate_X(corpus, reset=True, loss=model._checked_loss())
    problem = model._set_count_scale(X)
    for sweeps in (1, 3):
        state = initial_state(X, problem.loss, 6, 0)
        step = CodingStep(problem, sweeps=sweeps)
        step(state, 1)
        assert state.capped_documents == 0
        # the same call as the step's: every non-empty document made at most `sweeps` sweeps
        state = initial_state(X, problem.loss, 6, 0)
        result = code_documents(iteration_problem(problem, sweeps), X, state.beta, state.codes,
                                state.theta)
        assert result.n_iter.max() == sweeps
    assert iteration_problem(problem, None) is problem
    assert iteration_problem(problem, 10 ** 6).max_iter == problem.max_iter


def test_one_sweep_per_iteration_fits_without_warnings_about_capped_documents(corpus):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "documents stopped at inner_max_iter" warning
        STC(n_topics=5, max_iter=200, tol=1e-3, random_state=0).fit(corpus)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "1"])
def test_bad_sweeps_per_iteration_is_refused(corpus, bad):
    with pytest.raises((ValueError, TypeError), match="sweeps_per_iteration"):
        STC(n_topics=3, sweeps_per_iteration=bad).fit(corpus)


def test_a_single_sweep_without_the_start_objective_codes_the_same(corpus):
    """with_start=False skips the objective at the start codes of a one-sweep call: the
    codes, means and objective are the same bits, the start values NaN; a call of more
    sweeps needs that objective for its stopping rule and still computes it."""
    model = STC(n_topics=5, random_state=0)
    X = model._validate_X(corpus, reset=True, loss=model._checked_loss())
    problem = model._set_count_scale(X)
    for sweeps in (1, 3):
        step_problem = iteration_problem(problem, sweeps)
        outcomes = []
        for with_start in (True, False):
            state = initial_state(X, problem.loss, 5, 0)
            result = code_documents(step_problem, X, state.beta, state.codes, state.theta,
                                    with_start=with_start)
            outcomes.append((state.codes, state.theta, result))
        (codes, theta, full), (codes_, theta_, skipped) = outcomes
        assert (np.asarray(codes).tobytes() == np.asarray(codes_).tobytes()
                and theta.tobytes() == theta_.tobytes())
        for name in ("objective", "loss", "means", "n_iter", "passes"):
            assert getattr(full, name).tobytes() == getattr(skipped, name).tobytes()
        assert np.all(np.isfinite(full.start_objective))
        if sweeps == 1:
            assert np.all(np.isnan(skipped.start_objective))
            assert np.all(np.isnan(skipped.start_loss))
        else:
            assert skipped.start_objective.tobytes() == full.start_objective.tobytes()


@brief_fit
@pytest.mark.parametrize("sweeps", [1, 2, None])
def test_medstc_objective_never_increases_whatever_the_sweeps(sweeps):
    """MedSTC's safeguard judges the step the sweeps made: objective (4) never increases."""
    train, _ = load_newsgroups_split()
    X, y = train.data[::8], train.target[::8]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no capped-documents warning for a few sweeps
        warnings.filterwarnings("ignore", "MedSTC stopped at max_iter")
        model = MedSTC(n_topics=6, max_iter=6, random_state=0,
                       sweeps_per_iteration=sweeps).fit(X, y)
    assert model.sweeps_per_iteration == sweeps
    assert np.all(np.diff(model.objective_) <= 1e-12 * np.abs(model.objective_[1:]))


@pytest.mark.parametrize("bad", [0, -1, 1.5, "1"])
def test_medstc_refuses_bad_sweeps_per_iteration(bad):
    train, _ = load_newsgroups_split()
    with pytest.raises((ValueError, TypeError), match="sweeps_per_iteration"):
        MedSTC(n_topics=3, sweeps_per_iteration=bad).fit(train.data[::20], train.target[::20])
