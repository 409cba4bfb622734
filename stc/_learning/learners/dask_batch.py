"""Batch learning over a dask array's partitions, on the current dask.distributed client.

The loop is batch learning's (`stc._learning.training.alternate`); its steps are
`DaskTraining`'s. Per outer iteration

* the client scatters the topics beta to every worker (once);
* each worker codes its partition with the compiled kernel, warm-started as
  in `stc._learning.training.CodingStep`, and returns only its share of the
  objective, then the dictionary step's sufficient statistics: the term by
  topic sums of the MM step (`stc._learning.dictionary.mm_dictionary_steps`), (N, K)
  arrays, and its loss;
* the client adds them up (in partition order), takes the MM step and, for
  each further MM step, scatters the candidate topics and gathers the
  partitions' loss and sums at them.

Before the first coding step the partitions' entry counts and token totals give
w_bar, the mean count of a stored entry of the whole array (``count_scale_``,
which rho in relative units needs), so the coding problem comes as a
`stc._learning.learners.partitions.DeferredProblem`.

The arithmetic is that of the single-machine fit; only the order of the
sums over documents differs (partition by partition), so the fitted topics
agree with ``fit`` on the whole matrix up to floating-point reduction order.
MedSTC runs the same learner with its own coding step and its SVM step
(its `stc._learning.learners.LearningSteps`:
`stc._learning.supervised.labelled_dask.LabelledDaskBatchSteps`), as it runs
`stc._learning.learners.batch`.
"""
import numpy as np

from stc._core._simplex import mm_update_rows
from stc._core._sparse_ops import mm_statistics, word_code_sums
from stc._learning.coding import (CodeStorage, as_code_rows, code_documents, initial_codes,
                                  iteration_problem)
from stc._learning.dictionary import dictionary_from_draws, initial_dictionary_draws
from stc._learning.learners import LearnedTopics, LearningSteps
from stc._learning.learners.partitions import Partitions, current_client
from stc._learning.progress import DaskProgress, step_capped_documents
from stc._learning.training import alternate, relative_decrease_below


def learn(problem, X, options, steps=None):
    """Learn from dask array ``X`` of CSR row blocks on the current client; returns the
    `LearnedTopics`.

    ``problem`` is a `DeferredProblem`: its loss reads the blocks
    (`stc._utils.validation.as_count_matrix`) before w_bar is known. The starting topics are drawn from
    ``options.random_state`` as `stc._learning.dictionary.initial_dictionary` draws them.
    ``steps`` (a `LearningSteps`, by default STC's) is started with the
    `DaskTraining` once its partitions exist, then gives the steps, as in
    `stc._learning.learners.batch.learn`.
    """
    if steps is None:
        steps = LearningSteps()
    training = DaskTraining(current_client(), X, problem.loss, problem.at, options.n_topics,
                            options.random_state, options.n_jobs,
                            sweeps=options.sweeps_per_iteration,
                            dictionary_max_iter=options.dictionary_max_iter)
    steps.start(training)
    coding_step = steps.coding_step(training)
    if coding_step is None:
        coding_step = training.coding_step
    dictionary_step = steps.dictionary_step(training)
    if dictionary_step is None:
        dictionary_step = training.dictionary_step
    progress = (DaskProgress(options.tol, options.max_iter, len(training.parts),
                             steps.describe) if options.verbose else None)
    objective, converged, interrupted = alternate(
        None, coding_step=coding_step, dictionary_step=dictionary_step,
        extra_step=steps.extra_step(training), converged=relative_decrease_below(options.tol),
        max_iter=options.max_iter, progress=progress)
    return LearnedTopics(training.beta, training.term_counts, np.asarray(objective),
                         len(objective), interrupted, converged=converged,
                         capped_documents=training.capped_documents,
                         count_scale=training.count_scale)


# ---- the workers' side: each runs on the worker that holds its partition

def _summary(partition):
    return partition.summary()


def _row_sums(partition, rows_per_draw):
    return [np.asarray(partition.X[rows].sum(axis=0)).ravel() for rows in rows_per_draw]


def _start_codes(partition, n_topics, value, n_jobs):
    partition.codes, partition.theta = initial_codes(partition.X, n_topics, value, sparse=True)
    partition.storage = CodeStorage(n_jobs)
    return partition.X.nnz


def _code(partition, problem, beta, n_jobs, sweeps=None):
    """Coding step on the partition (`stc._learning.training.CodingStep`'s); returns (objective minus
    loss, capped documents)."""
    step_problem = iteration_problem(problem, sweeps)
    result = code_documents(step_problem, partition.X, beta, partition.codes, partition.theta,
                            n_jobs=n_jobs, with_start=False)
    # sparse or dense by the codes' density, as in memory (stc._learning.training.CodingStep)
    partition.codes = partition.storage(partition.codes, partition.X.indptr)
    partition.means = result.means
    return (float(np.sum(result.objective) - np.sum(result.loss)),
            step_capped_documents(result, step_problem, sweeps))


def _first_sums(partition, loss, n_jobs):
    """Loss at the coding means, and the MM step's (plain, weighted) code sums."""
    layout, means = partition.layout, partition.means
    ratio = np.divide(layout.data, means, out=np.zeros_like(means), where=means > 0)
    plain, weighted = word_code_sums(layout.col_ptr, layout.col_entries,
                                     as_code_rows(partition.codes, partition.X.indptr),
                                     ratio, n_jobs, with_plain=True)
    return float(np.sum(loss.loss(layout.data, means))), plain, weighted


def _statistics(partition, loss, beta_t, with_sums, n_jobs):
    layout = partition.layout
    return mm_statistics(loss, layout.col_ptr, layout.col_entries, layout.data,
                         as_code_rows(partition.codes, partition.X.indptr), beta_t,
                         n_jobs, with_ratio_sums=with_sums)


def _sum_in_order(results):
    """The partitions' results added up in partition order."""
    total = results[0]
    for result in results[1:]:
        total = tuple(a + b for a, b in zip(total, result)) if isinstance(total, tuple) \
            else total + result
    return total


class DaskTraining:
    """The partitions of one fit and the steps of `stc._learning.training.alternate` on them.

    ``problem_for(count_scale)`` gives the coding problem once the mean count
    of a stored entry of the whole array is known (rho in relative units needs it).
    ``sweeps``: coding sweeps per document per iteration, as `stc._learning.training.CodingStep`;
    ``dictionary_max_iter``: MM steps per dictionary step.
    """

    def __init__(self, client, X, loss, problem_for, n_topics, random_state, n_jobs,
                 sweeps=None, dictionary_max_iter=3):
        self.client, self.n_jobs, self.sweeps = client, n_jobs, sweeps
        self.dictionary_max_iter = dictionary_max_iter
        self.loss = loss
        n_features = X.shape[1]
        self.parts = Partitions(client, X, self.loss)
        summaries = self.parts.run(_summary)
        self.rows = [int(n) for n, _, _, _ in summaries]  # documents of each partition
        offsets = np.cumsum([0] + self.rows)
        self.n_docs = int(offsets[-1])
        corpus = np.sum([c for _, c, _, _ in summaries], axis=0)
        self.term_counts = np.asarray(corpus, dtype=np.float64)  # the model's term_counts_
        if not corpus.sum() > 0:
            raise ValueError("X has no non-zero entry: every document is empty, so there is "
                             "nothing to learn topics from")
        self.count_scale = float(corpus.sum()) / sum(nnz for _, _, _, nnz in summaries)
        self.problem = problem_for(self.count_scale)
        nonempty = np.concatenate([rows + offsets[i] for i, (_, _, rows, _) in
                                   enumerate(summaries)])
        draws = initial_dictionary_draws(nonempty, n_features, n_topics, random_state)
        # Each partition sums the chosen documents it holds (draw by draw).
        requests = []
        for i in range(len(self.parts)):
            requests.append([np.sort(docs[(docs >= offsets[i]) & (docs < offsets[i + 1])])
                             - offsets[i] for docs, _ in draws])
        partial = self.parts.run_each(_row_sums, [(r,) for r in requests])
        sums = [np.sum([partial[i][k] for i in range(len(self.parts))], axis=0)
                for k in range(len(draws))]
        self.beta = dictionary_from_draws(corpus, draws, sums, n_topics)
        value = 1.0
        upper = self.loss.mean_domain[1]
        if np.isfinite(upper):  # as stc._learning.coding.start_value_in_domain, over all partitions
            largest = self.beta.sum(axis=0)[corpus > 0].max()
            if largest >= 0.5 * upper:
                value = 0.5 * upper / largest
        self.parts.run(_start_codes, n_topics, value, self.n_jobs)
        self.capped_documents = 0

    def _scatter(self, array):
        return self.client.scatter(array, broadcast=True)

    def coding_step(self, state, iteration):
        beta = self._scatter(self.beta)
        results = self.parts.run(_code, self.problem, beta, self.n_jobs, self.sweeps)
        self.capped_documents = sum(capped for _, capped in results)
        return sum(others for others, _ in results), None

    def dictionary_step(self, state, means, tol=1e-4):
        """`stc._learning.dictionary.mm_dictionary_steps` with the sums gathered from the partitions."""
        loss, max_iter = self.loss, self.dictionary_max_iter
        value, plain, weighted_sums = _sum_in_order(self.parts.run(_first_sums, loss,
                                                                   self.n_jobs))
        if not np.isfinite(value):
            raise ValueError(f"the loss is not finite at the current codes and topics: some "
                             f"mean lies outside the loss's domain {loss.mean_domain}")
        code_sums = np.ascontiguousarray(plain.T)
        multipliers = np.full(self.beta.shape[0], np.nan)
        beta = self.beta
        for n_steps in range(1, max_iter + 1):
            candidate = mm_update_rows(beta, weighted_sums, code_sums, multipliers, 100,
                                       self.n_jobs)
            beta_t = self._scatter(np.ascontiguousarray(candidate.T))
            with_sums = n_steps < max_iter
            results = self.parts.run(_statistics, loss, beta_t, with_sums, self.n_jobs)
            new_value = float(sum(v for v, _ in results))
            if not new_value <= value:
                break
            next_sums = None
            if with_sums:
                next_sums = results[0][1]
                for _, s in results[1:]:
                    next_sums = next_sums + s
            decrease = value - new_value
            beta, value, weighted_sums = candidate, new_value, next_sums
            if decrease <= tol * abs(value):
                break
        self.beta = beta
        return value
