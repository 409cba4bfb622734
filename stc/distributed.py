"""STC on a Dask cluster: `STC.fit` of a dask array of CSR row blocks
(``sparse-topical-coding[dask]``).

The partitions, the workers' side and the client's steps of batch learning
(`DaskTraining`) and online learning (`DaskOnlineTraining`, described at its
class); the learners `stc.learners.dask_batch` and `stc.learners.dask_online`
run them. MedSTC adds its labels and steps to `DaskTraining`'s partitions
and, online, to `DaskOnlineTraining`'s rounds (`stc.supervised.distributed`).

Each row block (partition) of the corpus stays on the worker that holds it,
with its word codes, document codes and means: the (nnz, K) codes never
travel. Per outer iteration

* the client scatters the topics beta to every worker (once);
* each worker codes its partition with the compiled kernel, warm-started as
  in `stc.training.CodingStep`, and returns only its share of the
  objective, then the dictionary step's sufficient statistics: the term by
  topic sums of the MM step (`stc.dictionary.mm_dictionary_steps`), (N, K)
  arrays, and its loss;
* the client adds them up (in partition order), takes the MM step and, for
  each further MM step, scatters the candidate topics and gathers the
  partitions' loss and sums at them.

Before the first coding step the partitions' entry counts and token totals give
w_bar, the mean count of a stored entry of the whole array (``count_scale_``,
which rho in relative units needs).

The arithmetic is that of the single-machine fit; only the order of the
sums over documents differs (partition by partition), so the fitted topics
agree with ``fit`` on the whole matrix up to floating-point reduction order.
Partitions are updated in place on their worker: a worker lost during the
fit fails it (Dask cannot recompute a partition's codes).
"""
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp

from stc._core._simplex import mm_update_rows
from stc._core._sparse_ops import mm_statistics, word_code_sums
from stc._validation import as_count_matrix
from stc.coding import as_code_rows, code_documents, initial_codes, iteration_problem
from stc.dictionary import CorpusLayout, dictionary_from_draws, initial_dictionary_draws
from stc.progress import step_capped_documents


def is_dask_array(X):
    """True for a dask.array.Array (checked without importing dask)."""
    return type(X).__module__.startswith("dask.array") and hasattr(X, "to_delayed")


def refuse_dask_array(X, method):
    """TypeError if ``X`` is a dask array: ``method`` (e.g. partial_fit) reads matrices in memory.

    Only ``fit`` learns from a dask array; validation would otherwise fail on
    one with a numpy error that says neither.
    """
    if is_dask_array(X):
        raise TypeError(f"{method} takes matrices in memory, not a dask array: fit learns from "
                        "a dask array on the current dask.distributed client (online too, with "
                        "learning_method='online'); or compute the batch first (X.compute())")


def check_dask_loss(loss):
    """The workers return the MM dictionary step's sums: a dask array needs the Poisson loss."""
    if not (loss.runs_in_kernel and loss.dictionary_method == "mm"):
        raise ValueError("fitting a dask array needs the Poisson loss (the MM dictionary "
                         "step, whose sufficient statistics the workers return)")


def current_client():
    """The current dask.distributed client, or a clear error."""
    try:
        from distributed import get_client
    except ImportError:
        raise ImportError("fitting a dask array needs dask.distributed: "
                          "pip install 'sparse-topical-coding[dask]'") from None
    try:
        return get_client()
    except ValueError:
        raise ValueError("fitting a dask array needs a dask.distributed client: create one "
                         "first (e.g. distributed.Client() or Client(LocalCluster(...)))") from None


class Partition:
    """A row block of the corpus and its training state; lives on one worker."""

    def __init__(self, block, loss, n_features):
        if not sp.issparse(block):
            raise TypeError("the dask array's blocks must be scipy.sparse matrices (CSR row "
                            f"blocks), got {type(block).__name__}")
        self.X = as_count_matrix(sp.csr_matrix(block, dtype=np.float64), loss)
        if self.X.shape[1] != n_features:
            raise ValueError(f"a block has {self.X.shape[1]} columns, expected {n_features}")
        self._layout = None
        self.codes = self.theta = self.means = None
        # online learning: the row order of the current pass, the slice of
        # rows coded next (and which of the partition's rows they are) and the
        # coded slice (its word codes, until the next)
        self._order = (None, None)
        self.pending = self.pending_rows = self.coded = None
        # MedSTC: the partition's labels and supervised state (stc.supervised.distributed)
        self.supervised = None

    @property
    def layout(self):
        """X's entries by term (batch learning's dictionary step); built when first needed."""
        if self._layout is None:
            self._layout = CorpusLayout(self.X)
        return self._layout

    def summary(self):
        """(documents, term totals, row of each non-empty document, stored entries)."""
        return (self.X.shape[0], np.asarray(self.X.sum(axis=0)).ravel(),
                np.flatnonzero(np.diff(self.X.indptr) > 0), self.X.nnz)


def _prepare(block, loss, n_features):
    return Partition(block, loss, n_features)


def _summary(partition):
    return partition.summary()


def _row_sums(partition, rows_per_draw):
    return [np.asarray(partition.X[rows].sum(axis=0)).ravel() for rows in rows_per_draw]


def _start_codes(partition, n_topics, value):
    partition.codes, partition.theta = initial_codes(partition.X, n_topics, value, sparse=True)
    return partition.X.nnz


def _code(partition, problem, beta, n_jobs, sweeps=None):
    """Coding step on the partition (`stc.training.CodingStep`'s); returns (objective minus
    loss, capped documents)."""
    step_problem = iteration_problem(problem, sweeps)
    result = code_documents(step_problem, partition.X, beta, partition.codes, partition.theta,
                            n_jobs=n_jobs, with_start=False)
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


class Partitions:
    """The `Partition` of every row block of dask array ``X``, in row order, on the workers.

    A partition is updated in place by the tasks run on it, so each of them
    runs on the worker that holds it: Dask's work stealing would otherwise
    run some on an idle worker, on a copy of the partition, and the update
    would be lost (with worker processes the state of MedSTC's cutting planes
    diverged so). A worker that leaves the cluster takes its partitions'
    codes with it: the fit then stops with a RuntimeError (`gather`) rather
    than wait for it or go on from a fresh copy.
    """

    # How often (seconds) a round that has not finished checks that the
    # partitions' workers are still in the cluster.
    LIVENESS_CHECK_SECONDS = 2.0

    def __init__(self, client, X, loss):
        from distributed import wait

        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got {X.ndim} dimensions")
        if len(X.chunks[1]) != 1:
            raise ValueError("the dask array must be split into row blocks only (one chunk "
                             f"across its {X.shape[1]} columns): rechunk with "
                             "X.rechunk({1: -1})")
        self.client = client
        blocks = client.compute(list(X.to_delayed().ravel()))
        self.futures = [client.submit(_prepare, block, loss, X.shape[1], pure=False)
                        for block in blocks]
        wait(self.futures)
        for future in self.futures:
            if future.status == "error":
                future.result()  # the worker's error (e.g. a block that is not sparse), here
        holders = client.who_has(self.futures)
        self.workers = [holders[future.key][0] for future in self.futures]

    def __len__(self):
        return len(self.futures)

    def submit(self, index, function, *args):
        """``function(partition, *args)`` on partition ``index``'s worker; returns its future."""
        return self.client.submit(function, self.futures[index], *args,
                                  workers=[self.workers[index]], allow_other_workers=False,
                                  pure=False)

    def run(self, function, *args):
        """``function(partition, *args)`` on every partition; the results, in partition order."""
        return self.gather([self.submit(i, function, *args) for i in range(len(self))])

    def run_each(self, function, args):
        """``function(partition, *args[i])`` on each partition i; the results in order."""
        return self.gather([self.submit(i, function, *args_i) for i, args_i in enumerate(args)])

    def gather(self, futures):
        """The results of ``futures``, or a RuntimeError if a partition's worker left the cluster.

        A task pinned to a worker that is gone would wait for ever.
        """
        from distributed import TimeoutError as DaskTimeoutError
        from distributed import wait

        while True:
            try:
                wait(futures, timeout=self.LIVENESS_CHECK_SECONDS)
                break
            except DaskTimeoutError:
                self.check_workers()
        return self.client.gather(futures)

    def check_workers(self):
        """RuntimeError if a worker holding a partition is no longer in the cluster."""
        present = set(self.client.scheduler_info().get("workers", {}))
        lost = sorted({worker for worker in self.workers if worker not in present})
        if lost:
            held = [i for i, worker in enumerate(self.workers) if worker not in present]
            raise RuntimeError(
                f"worker(s) {', '.join(lost)} left the cluster during the fit, with the codes "
                f"of partition(s) {held}: they cannot be recovered from a copy of the data; "
                "fit again on a stable cluster")


class DaskTraining:
    """The partitions of one fit and the steps of `stc.training.alternate` on them.

    ``problem_for(count_scale)`` gives the coding problem once the mean count
    of a stored entry of the whole array is known (rho in relative units needs it).
    ``sweeps``: coding sweeps per document per iteration, as `stc.training.CodingStep`.
    """

    def __init__(self, client, X, loss, problem_for, n_topics, random_state, n_jobs,
                 sweeps=None):
        self.client, self.n_jobs, self.sweeps = client, n_jobs, sweeps
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
        if np.isfinite(upper):  # as stc.coding.start_value_in_domain, over all partitions
            largest = self.beta.sum(axis=0)[corpus > 0].max()
            if largest >= 0.5 * upper:
                value = 0.5 * upper / largest
        self.parts.run(_start_codes, n_topics, value)
        self.capped_documents = 0

    def _scatter(self, array):
        return self.client.scatter(array, broadcast=True)

    def coding_step(self, state, iteration):
        beta = self._scatter(self.beta)
        results = self.parts.run(_code, self.problem, beta, self.n_jobs, self.sweeps)
        self.capped_documents = sum(capped for _, capped in results)
        return sum(others for others, _ in results), None

    def dictionary_step(self, state, means, max_iter, tol=1e-4):
        """`stc.dictionary.mm_dictionary_steps` with the sums gathered from the partitions."""
        loss = self.loss
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


# ---- online learning on the cluster

def online_entropy(random_state):
    """The seed of the partitions' row orders, from ``random_state`` (an int is used as is)."""
    import numbers

    from sklearn.utils import check_random_state

    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    return int(check_random_state(random_state).randint(2 ** 31 - 1))


def partition_order(n_rows, entropy, pass_number, partition_index):
    """The order in which a partition's rows are visited in one pass of online learning."""
    return np.random.default_rng([entropy, pass_number, partition_index]).permutation(n_rows)


def round_rows(n_rows, n_rounds, round_index):
    """(start, stop) of a partition's share of round ``round_index`` in its row order.

    Every round takes about n_rows / n_rounds rows from every partition, so a
    round's batch is spread over the partitions in proportion to their size.
    """
    return (round_index * n_rows) // n_rounds, ((round_index + 1) * n_rows) // n_rounds


def _size(partition):
    """(documents, stored entries, sum of the stored counts) of the partition."""
    return partition.X.shape[0], partition.X.nnz, float(np.sum(partition.X.data))


def slice_rows(partition, entropy, pass_number, partition_index, n_rounds, round_index):
    """The partition's rows of one round (`round_rows` of its `partition_order`), in order.

    The pass's order is kept on the partition until the next pass.
    """
    key = (entropy, pass_number)
    if partition._order[0] != key:
        partition._order = (key, partition_order(partition.X.shape[0], entropy, pass_number,
                                                 partition_index))
    start, stop = round_rows(partition.X.shape[0], n_rounds, round_index)
    return partition._order[1][start:stop]


def _online_select(partition, *selection):
    """Make the partition's rows of one round (``selection``: `slice_rows`'s) its pending slice.

    Returns what the client needs before coding it: (rows, terms, their
    token counts, rows of the non-empty documents). The slice is kept with
    its columns renumbered over its own terms (`BatchLayout`'s numbering).
    """
    partition.pending_rows = slice_rows(partition, *selection)
    X = partition.X[partition.pending_rows]
    present = np.bincount(X.indices, minlength=X.shape[1]) > 0
    terms = np.flatnonzero(present)
    counts = np.bincount(X.indices, weights=X.data, minlength=X.shape[1])[terms]
    position = np.cumsum(present, dtype=np.intc) - 1
    compact = sp.csr_matrix((X.data, position[X.indices], X.indptr.astype(np.intc)),
                            shape=(X.shape[0], terms.size))
    partition.pending = (compact, terms)
    return X.shape[0], terms, counts, np.flatnonzero(np.diff(X.indptr) > 0)


def _online_row_sums(partition, rows_per_draw):
    """Term sums of the given rows of the pending slice, one (N,) array per draw."""
    X, terms = partition.pending
    sums = []
    for rows in rows_per_draw:
        total = np.zeros(partition.X.shape[1])
        total[terms] = np.asarray(X[rows].sum(axis=0)).ravel()
        sums.append(total)
    return sums


def _online_code(partition, problem, beta_columns, n_jobs, next_selection, keep_codes,
                 coder=None):
    """Code the pending slice with its topic columns; select the next slice.

    Returns (plain, responsibilities, `stc.online.BatchOutcome`, seconds spent coding,
    the next slice's `_online_select` result or None, report). With
    ``keep_codes`` the slice's word codes stay on the worker for the further
    MM steps of the round. ``coder`` (online MedSTC's) codes the slice
    instead of `stc.online.code_batch`: ``coder(partition, problem, X,
    beta_columns, n_jobs)`` returns the slice's `stc.online.CodedBatch` and
    the report, what the client learns from besides the sums (None without a
    coder or for an empty slice).
    """
    import time

    from stc.online import BatchOutcome, code_batch

    X, terms = partition.pending
    start = time.perf_counter()
    report = None
    if X.shape[0]:
        if coder is None:
            partition.coded = code_batch(problem, X, beta_columns, n_jobs)
        else:
            partition.coded, report = coder(partition, problem, X, beta_columns, n_jobs)
        plain, responsibilities, outcome = (partition.coded.plain,
                                            partition.coded.responsibilities,
                                            partition.coded.outcome)
        partition.coded.plain = partition.coded.responsibilities = None
        if not keep_codes:
            partition.coded = None
    else:
        partition.coded = None
        plain = responsibilities = np.zeros((beta_columns.shape[0], 0))
        outcome = BatchOutcome(0.0, 0, 0)
    busy = time.perf_counter() - start
    following = (None if next_selection is None
                 else _online_select(partition, *next_selection))
    return plain, responsibilities, outcome, busy, following, report


def _online_responsibilities_at(partition, loss, beta_columns, n_jobs):
    """The coded slice's responsibilities at other topic columns, and the seconds spent."""
    import time

    start = time.perf_counter()
    if partition.coded is None:
        return np.zeros((beta_columns.shape[0], 0)), 0.0
    sums = partition.coded.responsibilities_at(loss, beta_columns, None, n_jobs)
    return sums, time.perf_counter() - start


def _add_columns(total, where, columns):
    """total[:, where] += columns, ``where`` a slice's positions among the round's terms.

    A slice holding every term of the round (always so with one partition)
    has ``where`` = 0, 1, ...: it is added without fancy indexing, which
    would copy (K, terms) arrays twice.
    """
    if where.size == total.shape[1]:
        total += columns
    else:
        total[:, where] += columns


def _slice_columns(columns, where):
    """The (K, terms of the round) ``columns`` at a slice's positions ``where``."""
    return columns if where.size == columns.shape[1] else np.take(columns, where, axis=1)


class DaskOnlineTraining:
    """Online learning (`stc.online`) over the partitions of a dask array.

    The partitions stay on their workers. Each pass visits every partition's
    rows in an order drawn from ``random_state`` (`partition_order`); round
    r of ceil(D / batch_size) rounds takes rows `round_rows` of every
    partition, so the round's mini-batch is the concatenation of those
    slices, in partition order. Per round:

    * the client holds the topics beta and the running statistics (K x N);
      each worker gets the topic columns of its slice's terms only (its
      slice's terms came back with the previous round's answer);
    * each worker codes its slice cold with the compiled kernel and returns
      its MM sums over its slice's terms, then selects its next slice; the
      slice's word codes stay on the worker for the round's further MM steps
      (`dictionary_max_iter`), each of which sends the new columns and gathers
      the sums at them;
    * the client adds the sums up per term (in partition order) and takes
      the stochastic dictionary step (`stc.online.stochastic_dictionary_step`).

    The arithmetic is `STC.fit_stream` over those mini-batches: the learned
    topics agree with it up to floating-point reduction order (a test checks
    it). One difference: with rho in relative units, w_bar (``count_scale_``)
    is the whole array's, as ``fit`` takes it in memory, where ``fit_stream``
    takes its first batch's; ``problem_for(count_scale)`` gives the coding
    problem, as in `DaskTraining`. The first round's documents give the
    initial topics, drawn as `stc.dictionary.initial_dictionary` draws them (only the
    chosen documents' term sums travel). Memory on a worker: its partition, the row order of the
    current pass and one slice's word codes; on the client: three K x N
    arrays and one round's sums.

    Online MedSTC runs the same rounds with its labels (``labels``:
    `stc.supervised.distributed.DaskOnlineLabels`): each round's coder,
    which travels with the topic columns, codes the slices with the
    shifted mean of the current eta, and the client takes eta's step on the
    round's codes after the dictionary step.
    """

    def __init__(self, client, X, loss, problem_for, n_topics, random_state, n_jobs, *,
                 batch_size, learning_offset, learning_decay, max_steps):
        from sklearn.utils import check_random_state

        self.client, self.n_jobs = client, n_jobs
        self.n_topics, self.max_steps = n_topics, max_steps
        self.learning_offset, self.learning_decay = learning_offset, learning_decay
        self.n_features = X.shape[1]
        self.parts = Partitions(client, X, loss)
        sizes = self.parts.run(_size)
        self.sizes = [rows for rows, _, _ in sizes]
        self.n_docs = int(sum(self.sizes))
        if self.n_docs == 0:
            raise ValueError("X has no document to learn from")
        n_entries = sum(nnz for _, nnz, _ in sizes)
        if n_entries == 0:
            raise ValueError("X has no non-zero entry: every document is empty, so there is "
                             "nothing to learn topics from")
        # w_bar of the whole array, as fit in memory takes it (not of the first round)
        self.count_scale = sum(total for _, _, total in sizes) / n_entries
        self.problem = problem_for(self.count_scale)
        self.n_rounds = max(1, -(-self.n_docs // batch_size))
        self.entropy = online_entropy(random_state)
        self.rng = check_random_state(random_state)
        self.beta = self.statistics = None
        self.n_batch_iter = 0
        self.term_counts = np.zeros(self.n_features)  # tokens of every round, per term
        self.busy_seconds = np.zeros(len(self.parts))  # time inside the kernels, per partition
        # online MedSTC's labels (`stc.supervised.distributed.DaskOnlineLabels`, set by its
        # attach): the round's coder of the slices, and its learn(reports) after the
        # dictionary step; None for STC
        self.labels = None

    def selection(self, pass_number, round_index):
        """What each partition's `slice_rows` needs for one round, in partition order."""
        return [(self.entropy, pass_number, i, self.n_rounds, round_index)
                for i in range(len(self.parts))]

    def _initial_topics(self, selected, counts):
        offsets = np.cumsum([0] + [rows for rows, _, _, _ in selected])
        nonempty = np.concatenate([s[3] + offsets[i] for i, s in enumerate(selected)])
        if not counts.sum() > 0:
            raise ValueError("the first mini-batch has no non-zero entry: every document is "
                             "empty, so there is nothing to learn topics from")
        draws = initial_dictionary_draws(nonempty, self.n_features, self.n_topics, self.rng)
        requests = [[np.sort(docs[(docs >= offsets[i]) & (docs < offsets[i + 1])]) - offsets[i]
                     for docs, _ in draws] for i in range(len(self.parts))]
        partial = self.parts.run_each(_online_row_sums, [(r,) for r in requests])
        sums = [np.sum([partial[i][k] for i in range(len(self.parts))], axis=0)
                for k in range(len(draws))]
        return dictionary_from_draws(counts, draws, sums, self.n_topics)

    def _round(self, selected, following):
        """Code one round's slices and take the dictionary step; returns (outcome, next)."""
        from stc.online import (BatchOutcome, introduce_terms_by_count, learning_rate,
                                stochastic_dictionary_step)

        counts = np.zeros(self.n_features)
        for _, terms, term_counts, _ in selected:
            counts[terms] += term_counts
        self.term_counts += counts
        if self.beta is None:
            self.beta = self._initial_topics(selected, counts)
        introduce_terms_by_count(self.beta, counts)
        union = np.flatnonzero(counts > 0)
        positions = [np.searchsorted(union, terms) for _, terms, _, _ in selected]
        coder = None if self.labels is None else self.labels.slice_coder()
        results = self.parts.run_each(_online_code, [
            (self.problem, np.take(self.beta, s[1], axis=1), self.n_jobs, nxt,
             self.max_steps > 1, coder) for s, nxt in zip(selected, following)])
        plain = np.zeros((self.n_topics, union.size))
        responsibilities = np.zeros((self.n_topics, union.size))
        for (p_sums, a_sums, _, busy, _, _), where, i in zip(results, positions,
                                                             range(len(results))):
            _add_columns(plain, where, p_sums)
            _add_columns(responsibilities, where, a_sums)
            self.busy_seconds[i] += busy

        def responsibilities_at(topics, terms):
            columns = np.take(topics, terms, axis=1)
            answers = self.parts.run_each(_online_responsibilities_at, [
                (self.problem.loss, _slice_columns(columns, where), self.n_jobs)
                for where in positions])
            total = np.zeros((self.n_topics, union.size))
            for i, ((sums, busy), where) in enumerate(zip(answers, positions)):
                _add_columns(total, where, sums)
                self.busy_seconds[i] += busy
            return total

        n_docs = sum(rows for rows, _, _, _ in selected)
        self.n_batch_iter += 1
        rho = learning_rate(self.n_batch_iter, self.learning_offset, self.learning_decay)
        self.statistics = stochastic_dictionary_step(
            self.beta, self.statistics, rho, n_docs, union,
            SimpleNamespace(plain=plain, responsibilities=responsibilities),
            responsibilities_at,
            max_steps=self.max_steps, n_jobs=self.n_jobs)
        if self.labels is not None:  # online MedSTC: eta's step on the round's codes
            self.labels.learn([r[5] for r in results])
        outcome = BatchOutcome(sum(r[2].objective for r in results), n_docs,
                               sum(r[2].capped_documents for r in results))
        return outcome, [r[4] for r in results]

    def run(self, n_passes, progress=None, stop=None, topic_averaging=0.0):
        """``n_passes`` passes; returns (objective per pass, capped documents, interrupted).

        ``topic_averaging`` as `STC`'s: ``beta`` ends as the mean of the topics
        after each of the last rounds of the last pass.
        """
        from stc.online import TopicAverage, averaging_start

        average = TopicAverage()
        selected = self.parts.run_each(_online_select, self.selection(1, 0))
        pass_objectives, capped = [], 0
        for pass_number in range(1, n_passes + 1):
            total = 0.0
            first_averaged = (averaging_start(self.n_rounds, topic_averaging)
                              if pass_number == n_passes else None)
            for round_index in range(self.n_rounds):
                if round_index + 1 < self.n_rounds:
                    following = self.selection(pass_number, round_index + 1)
                elif pass_number < n_passes:
                    following = self.selection(pass_number + 1, 0)
                else:
                    following = [None] * len(self.parts)
                if sum(s[0] for s in selected) == 0:  # a round without documents
                    selected = self.parts.gather([
                        self.parts.submit(i, _online_select, *sel)
                        for i, sel in enumerate(following) if sel is not None])
                    continue
                outcome, selected = self._round(selected, following)
                if first_averaged is not None and round_index + 1 >= first_averaged:
                    average.add(self.beta)
                total += outcome.objective
                capped += outcome.capped_documents
                if progress is not None:
                    progress(pass_number, round_index + 1, outcome)
                if stop is not None and stop.requested:
                    break
            pass_objectives.append(total)
            if progress is not None:
                progress.end_pass(pass_number, self.n_rounds, total)
            if stop is not None and stop.requested:
                break
        if average.count:
            self.beta = average.mean()
        return pass_objectives, capped, bool(stop is not None and stop.requested)
