"""Online learning over a dask array's partitions, on the current dask.distributed client.

`stc.distributed.DaskOnlineTraining` runs the passes: every round takes a
slice of each partition, the workers code their slices and the client takes
the stochastic dictionary step of `stc.online`. w_bar is the whole array's,
as for `stc.learners.dask_batch`, so the coding problem comes as
``problem_for(w_bar)``. Online MedSTC runs the same rounds with its labels
(``labels``: `stc.supervised.distributed.DaskOnlineLabels`), as it runs
`stc.learners.online` with its own batch step.
"""
import numpy as np

from stc.distributed import DaskOnlineTraining
from stc.learners import LearnedTopics
from stc.learners.online import OnlineState
from stc.progress import OnlineProgressPrinter, StopRequest


def learn(problem_for, X, options, *, client, loss, labels=None):
    """Learn online from dask array ``X`` of CSR row blocks on ``client``; returns the `LearnedTopics`.

    ``labels.attach(training)``, if given, is called with the
    `DaskOnlineTraining` once its partitions exist: it sends each partition
    its labels, and the rounds then code the slices with them and take
    ``labels``' classifier step after each dictionary step (online MedSTC).
    """
    training = DaskOnlineTraining(
        client, X, loss, problem_for, options.n_topics, options.random_state, options.n_jobs,
        batch_size=options.batch_size, learning_offset=options.learning_offset,
        learning_decay=options.learning_decay, max_steps=options.dictionary_max_iter)
    if labels is not None:
        labels.attach(training)
    progress = (OnlineProgressPrinter(options.n_passes, training.n_rounds,
                                      every_batch=options.verbose >= 2)
                if options.verbose else None)
    with StopRequest() as stop:
        pass_objectives, capped, interrupted = training.run(options.n_passes, progress, stop,
                                                            options.topic_averaging)
    # term_counts: every round's tokens, as partial_fit sums them
    state = OnlineState(training.beta, training.statistics, training.n_batch_iter,
                        training.term_counts)
    return LearnedTopics(training.beta, training.term_counts, np.asarray(pass_objectives),
                         len(pass_objectives), interrupted, converged=True,
                         capped_documents=capped, count_scale=training.count_scale,
                         online=state)
