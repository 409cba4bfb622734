"""Batch learning over a dask array's partitions, on the current dask.distributed client.

The loop is batch learning's (`stc.training.alternate`); its steps are
`stc.distributed.DaskTraining`'s: the workers code their partitions and
return only the dictionary step's sums. w_bar (the mean count of a stored
entry, which rho in relative units needs) is the whole array's, gathered
from the partitions, so the coding problem comes as ``problem_for(w_bar)``.
MedSTC runs the same learner with its own coding step and its SVM step
(``steps``: `stc.supervised.distributed`), as it runs `stc.learners.batch`.
"""
import numpy as np

from stc.distributed import DaskTraining
from stc.learners import LearnedTopics
from stc.progress import DaskProgress
from stc.training import alternate, relative_decrease_below


def learn(problem_for, X, options, *, client, loss, steps=None):
    """Learn from dask array ``X`` of CSR row blocks on ``client``; returns the `LearnedTopics`.

    ``loss`` reads the blocks (`stc._validation.as_count_matrix`) before the
    problem is known. The starting topics are drawn from
    ``options.random_state`` as `stc.dictionary.initial_dictionary` draws them.
    ``steps(training)``, if given, is called with the `DaskTraining` once its
    partitions exist and returns (coding step, extra step, describe): they
    replace STC's coding step, run after the dictionary step (MedSTC's SVM
    step) and add text to the progress lines, as in `stc.learners.batch.learn`.
    """
    training = DaskTraining(client, X, loss, problem_for, options.n_topics,
                            options.random_state, options.n_jobs,
                            sweeps=options.sweeps_per_iteration)
    coding_step, extra_step, describe = training.coding_step, None, None
    if steps is not None:
        coding_step, extra_step, describe = steps(training)
    progress = (DaskProgress(options.tol, options.max_iter, len(training.parts), describe)
                if options.verbose else None)
    objective, converged, interrupted = alternate(
        None, coding_step=coding_step,
        dictionary_step=lambda state, means: training.dictionary_step(
            state, means, options.dictionary_max_iter),
        extra_step=extra_step, converged=relative_decrease_below(options.tol),
        max_iter=options.max_iter, progress=progress)
    return LearnedTopics(training.beta, training.term_counts, np.asarray(objective),
                         len(objective), interrupted, converged=converged,
                         capped_documents=training.capped_documents,
                         count_scale=training.count_scale)
