"""The ways of learning topics, one module each, all called the same way by the estimators.

=================  ==================================================  =====================
module             learns                                              entry point
=================  ==================================================  =====================
`batch`            the whole corpus in memory, coding and dictionary   ``learn``
                   steps alternated (MedSTC adds its own steps)
`online`           mini-batches in passes: ``fit`` (shuffled),         ``learn``,
                   ``fit_stream`` (as given), ``partial_fit`` (one)    ``learn_stream``,
                                                                       ``learn_batch``
`dask_batch`       batch learning over a dask array's partitions       ``learn``
`dask_online`      online learning over a dask array's partitions      ``learn``
=================  ==================================================  =====================

A learner takes the coding problem (`stc.coding.CodingProblem`, or for a
dask array a function of the mean count, which only the partitions know),
the data, the starting state and the `LearningOptions`, and returns the
`LearnedTopics`; the estimator stores them as its fitted attributes. A
learner never reads or writes an estimator: the steps it runs are
`stc.training`'s (batch), `stc.online`'s (mini-batches) and
`stc.distributed`'s (the workers' side).
"""
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LearningOptions:
    """The estimator's parameters a learner reads (besides those of the coding problem)."""

    n_topics: int
    random_state: object = None
    max_iter: int = 100
    tol: float = 1e-4
    dictionary_max_iter: int = 3
    n_jobs: object = None
    verbose: int = 0
    # the user's rho and its units: only to explain a loss that became infinite
    rho: float = None
    rho_units: str = "absolute"
    # online learning (MedSTC has none of them)
    batch_size: int = None
    learning_decay: float = None
    learning_offset: float = None
    n_passes: int = None
    topic_averaging: float = None


@dataclass
class LearnedTopics:
    """What a learner returns: the estimator's fitted attributes, and how the fit ended."""

    components: np.ndarray     # topics (K, N), rows on the simplex
    term_counts: np.ndarray    # tokens of each term learned from (N,)
    objective: np.ndarray      # per outer iteration (batch) or per pass (online)
    n_iter: int
    interrupted: bool          # stopped by Ctrl-C
    converged: bool = True     # online learning makes a fixed number of passes
    capped_documents: int = 0  # documents whose last coding stopped at inner_max_iter
    count_scale: float = None  # w_bar, when the learner measured it (dask arrays)
    online: object = None      # `stc.learners.online.OnlineState`, for online learning
