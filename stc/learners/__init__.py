"""The ways of learning topics, one module each, called the same way by the estimators.

* `batch`: the whole corpus in memory, coding and dictionary steps alternated
  (MedSTC adds its own coding step and its SVM step); ``learn``.
* `online`: mini-batches in passes, ``learn`` (``fit``, shuffled),
  ``learn_stream`` (``fit_stream``, as given) and ``learn_batch``
  (``partial_fit``, one batch, and every batch of the others).
* `dask_batch`, `dask_online`: the same over a dask array's partitions, on
  the current dask.distributed client; ``learn`` (both with MedSTC's
  steps too, `stc.supervised.dask_steps`).

A learner takes the coding problem (`stc.coding.CodingProblem`; for a dask
array a `stc.learners.partitions.DeferredProblem`, as w_bar, the mean count,
is known only to the partitions), the data, the starting state and the
`LearningOptions`, and returns the `LearnedTopics`, which the estimator
keeps as its fitted attributes. A learner is given no estimator; the steps
it runs are `stc.training`'s (batch) and `stc.stochastic_dictionary`'s
(mini-batches); each learner holds its engine (the Dask learners their
partitions' tasks, on `stc.learners.partitions`). A new way of learning is a
module here and one line of `stc._stc.LEARNERS`.
"""
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LearningOptions:
    """The estimator's parameters a learner reads (besides those of the coding problem)."""

    n_topics: int
    random_state: object = None
    # batch learning's starting topics: "random" (document draws), "nndsvd" or "auto"
    init: str = "auto"
    max_iter: int = 100
    tol: float = 1e-4
    dictionary_max_iter: int = 3
    # batch learning: coding sweeps per document per outer iteration (None: the problem's rule)
    sweeps_per_iteration: int = None
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
