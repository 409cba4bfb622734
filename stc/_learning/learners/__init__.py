"""The ways of learning topics, one module each, called the same way by the estimators.

* `batch`: the whole corpus in memory, coding and dictionary steps alternated
  (MedSTC adds its own coding step and its SVM step); ``learn``.
* `online`: mini-batches in passes, ``learn`` (``fit``, shuffled),
  ``learn_stream`` (``fit_stream``, as given, the first ones joined) and ``learn_batch``
  (``partial_fit``, one batch, and every batch of the others).
* `dask_batch`, `dask_online`: the same over a dask array's partitions, on
  the current dask.distributed client; ``learn``.

Every learner is called ``learn(problem, data, options, steps)``: the coding
problem (`stc._learning.coding.CodingProblem`; for a dask array a
`stc._learning.learners.partitions.DeferredProblem`, as w_bar, the mean count, is known
only to the partitions), the data, the `LearningOptions` and the
`LearningSteps`, and returns the `LearnedTopics`, which the estimator keeps
as its fitted attributes. A learner is given no estimator: what an estimator
adds to the way of learning (MedSTC: its labels, its coding step and its
classifier step) comes through the `LearningSteps` alone. Each learner holds
its engine (the Dask learners their partitions' tasks, on
`stc._learning.learners.partitions`). A new way of learning is a module here and one
line of `stc._estimators.stc.LEARNERS`.
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
    online: object = None      # `stc._learning.learners.online.OnlineState`, for online learning


class LearningSteps:
    """What a learner needs from an estimator: the steps it runs and how the fit ends.

    This class is STC's steps: each method's default (None) lets the
    learner run its own step. MedSTC's are its subclasses
    (`stc._learning.supervised.labelled_batch`, `labelled_online`, `labelled_dask`),
    one per way of learning. ``engine`` is what the learner runs the steps
    on: the `stc._learning.training.TrainingState` in memory, the partitions'
    `stc._learning.learners.dask_batch.DaskTraining` or
    `stc._learning.learners.dask_online.DaskOnlineTraining` on a dask array.

    * batch learning (`batch`, `dask_batch`) alternates `coding_step`,
      `dictionary_step` and `extra_step` (`stc._learning.training.alternate`);
    * online learning in memory (`online`) learns from each mini-batch by
      `batch_step`, its coding, dictionary and extra steps in one (a
      mini-batch's codes live only within it);
    * online learning on Dask (`dask_online`) codes each round's slices on
      the workers with `coding_step` and, after the dictionary step, runs
      `extra_step` on what they report.
    """

    # The class index of each document of data in memory (MedSTC), which the
    # online learner cuts with the rows of every mini-batch; None: no labels.
    labels = None
    # What the batches of ``fit_stream`` yield, for its error messages.
    stream_items = "count matrices"
    # Whether online learning (in memory, fit_stream, Dask) joins the first pass's first batches
    # (rounds) into one step (`online.first_step_documents`): measured for STC's topics;
    # MedSTC's classifier step learns its batches as given.
    joins_first_batches = True

    def start(self, engine):
        """Called by the Dask learners once ``engine`` holds the partitions (MedSTC: labels)."""

    def coding_step(self, engine):
        """The coding step, or None for STC's.

        Batch learning: ``step(state, iteration)`` returning (the objective's
        terms besides the loss, the means); Dask online: the coder of a
        round's slices (``coder`` of `stc._learning.learners.dask_online._online_code`).
        """
        return None

    def dictionary_step(self, engine):
        """Batch learning's ``step(state, means)`` returning the loss after it; None: STC's."""
        return None

    def extra_step(self, engine):
        """The step after the dictionary step (MedSTC's classifier), or None for none.

        Batch learning: ``step(state, iteration)`` returning the objective's
        terms it adds; Dask online: ``step(reports)``, the slices' reports.
        """
        return None

    def describe(self, iteration):
        """Text the batch learners add to an iteration's progress line."""
        return ""

    def batch_step(self):
        """Online learning's step of one mini-batch in memory, or None for STC's.

        ``step(problem, batch, state, options, rng, pass_number)`` codes the
        batch, takes the dictionary and extra steps and returns its
        `BatchOutcome`; STC's is `stc._learning.learners.online.stc_batch_step`.
        """
        return None

    def stream_batch(self, given, number, checked_counts):
        """``fit_stream``'s ``number``-th item ``given`` as the batch step reads it.

        ``checked_counts(X)`` returns the validated counts of ``X``. STC's:
        the counts; MedSTC's: (counts, class indices) of an (X, y) pair.
        """
        if given is None:
            raise TypeError(f"batches must yield count matrices; batch {number} is None")
        return checked_counts(given)

    def finish(self, model, fitted, data, problem):
        """After the learner: what the estimator adds to ``fitted`` (MedSTC: the classifier).

        ``data`` is what the learner learned from (``fit_stream``: a function
        yielding its validated batches again).
        """
