"""Batch STC on a Dask cluster: `STC.fit` of a dask array of CSR row blocks (``stc[dask]``).

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

The arithmetic is that of the single-machine fit; only the order of the
sums over documents differs (partition by partition), so the fitted topics
agree with ``fit`` on the whole matrix up to floating-point reduction order.
Partitions are updated in place on their worker: a worker lost during the
fit fails it (Dask cannot recompute a partition's codes).
"""
import numpy as np
import scipy.sparse as sp

from stc._core._simplex import mm_update_rows
from stc._core._sparse_ops import mm_statistics, word_code_sums
from stc._validation import as_count_matrix
from stc.coding import code_documents, initial_codes
from stc.dictionary import CorpusLayout
from stc.training import count_capped


def is_dask_array(X):
    """True for a dask.array.Array (checked without importing dask)."""
    return type(X).__module__.startswith("dask.array") and hasattr(X, "to_delayed")


def current_client():
    """The current dask.distributed client, or a clear error."""
    try:
        from distributed import get_client
    except ImportError:
        raise ImportError("fitting a dask array needs dask.distributed: "
                          "pip install 'stc[dask]'") from None
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
        self.layout = CorpusLayout(self.X)
        self.codes = self.theta = self.means = None

    def summary(self):
        """(documents, term totals, row of each non-empty document)."""
        return (self.X.shape[0], np.asarray(self.X.sum(axis=0)).ravel(),
                np.flatnonzero(np.diff(self.X.indptr) > 0))


def _prepare(block, loss, n_features):
    return Partition(block, loss, n_features)


def _summary(partition):
    return partition.summary()


def _row_sums(partition, rows_per_draw):
    return [np.asarray(partition.X[rows].sum(axis=0)).ravel() for rows in rows_per_draw]


def _start_codes(partition, n_topics, value):
    partition.codes, partition.theta = initial_codes(partition.X, n_topics, value)
    return partition.X.nnz


def _code(partition, problem, beta, n_jobs):
    """Coding step on the partition; returns (objective minus loss, capped documents)."""
    result = code_documents(problem, partition.X, beta, partition.codes, partition.theta,
                            n_jobs=n_jobs)
    partition.means = result.means
    return (float(np.sum(result.objective) - np.sum(result.loss)),
            count_capped(result, problem))


def _first_sums(partition, loss, n_jobs):
    """Loss at the coding means, and the MM step's (plain, weighted) code sums."""
    layout, means = partition.layout, partition.means
    ratio = np.divide(layout.data, means, out=np.zeros_like(means), where=means > 0)
    plain, weighted = word_code_sums(layout.col_ptr, layout.col_entries, partition.codes,
                                     ratio, n_jobs, with_plain=True)
    return float(np.sum(loss.loss(layout.data, means))), plain, weighted


def _statistics(partition, loss, beta_t, with_sums, n_jobs):
    layout = partition.layout
    return mm_statistics(loss, layout.col_ptr, layout.col_entries, layout.data,
                         partition.codes, beta_t, n_jobs, with_ratio_sums=with_sums)


def _gather_sum(client, futures):
    """Gather the partitions' results and add them up in partition order."""
    results = client.gather(futures)
    total = results[0]
    for result in results[1:]:
        total = tuple(a + b for a, b in zip(total, result)) if isinstance(total, tuple) \
            else total + result
    return total


class DaskProgress:
    """One line per outer iteration on stderr: objective, elapsed and time left."""

    def __init__(self, tol, max_iter, n_partitions):
        import time

        self.tol, self.max_iter, self.n_partitions = tol, max_iter, n_partitions
        self.clock = time.perf_counter
        self.start = self.clock()

    def __call__(self, iteration, objective, state):
        import sys

        from stc.training import remaining_iterations

        elapsed = self.clock() - self.start
        left = remaining_iterations(objective, self.tol, self.max_iter)
        eta = "?" if left is None else f"{left * elapsed / iteration:.0f}s"
        print(f"iter {iteration:3d}/{self.max_iter}  objective {objective[-1]:.6e}  "
              f"partitions {self.n_partitions}  elapsed {elapsed:.1f}s  left ~{eta}",
              file=sys.stderr, flush=True)


class DaskTraining:
    """The partitions of one fit and the steps of `stc.training.alternate` on them."""

    def __init__(self, client, X, problem, n_topics, random_state, n_jobs):
        from stc._stc import dictionary_from_draws, initial_dictionary_draws

        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got {X.ndim} dimensions")
        if len(X.chunks[1]) != 1:
            raise ValueError("the dask array must be split into row blocks only (one chunk "
                             f"across its {X.shape[1]} columns): rechunk with "
                             "X.rechunk({1: -1})")
        self.client, self.problem, self.n_jobs = client, problem, n_jobs
        self.loss = problem.loss
        n_features = X.shape[1]
        blocks = client.compute(list(X.to_delayed().ravel()))
        self.parts = [client.submit(_prepare, block, self.loss, n_features, pure=False)
                      for block in blocks]
        summaries = client.gather([client.submit(_summary, p) for p in self.parts])
        offsets = np.cumsum([0] + [n for n, _, _ in summaries])
        self.n_docs = int(offsets[-1])
        corpus = np.sum([c for _, c, _ in summaries], axis=0)
        self.term_counts = np.asarray(corpus, dtype=np.float64)  # the model's term_counts_
        if not corpus.sum() > 0:
            raise ValueError("X has no non-zero entry: every document is empty, so there is "
                             "nothing to learn topics from")
        nonempty = np.concatenate([rows + offsets[i] for i, (_, _, rows) in
                                   enumerate(summaries)])
        draws = initial_dictionary_draws(nonempty, n_features, n_topics, random_state)
        # Each partition sums the chosen documents it holds (draw by draw).
        requests = []
        for i in range(len(self.parts)):
            requests.append([np.sort(docs[(docs >= offsets[i]) & (docs < offsets[i + 1])])
                             - offsets[i] for docs, _ in draws])
        partial = client.gather([client.submit(_row_sums, p, r)
                                 for p, r in zip(self.parts, requests)])
        sums = [np.sum([partial[i][k] for i in range(len(self.parts))], axis=0)
                for k in range(len(draws))]
        self.beta = dictionary_from_draws(corpus, draws, sums, n_topics)
        value = 1.0
        upper = self.loss.mean_domain[1]
        if np.isfinite(upper):  # as stc.coding.start_value_in_domain, over all partitions
            largest = self.beta.sum(axis=0)[corpus > 0].max()
            if largest >= 0.5 * upper:
                value = 0.5 * upper / largest
        client.gather([client.submit(_start_codes, p, n_topics, value, pure=False)
                       for p in self.parts])
        self.capped_documents = 0

    def _scatter(self, array):
        return self.client.scatter(array, broadcast=True)

    def coding_step(self, state, iteration):
        beta = self._scatter(self.beta)
        results = self.client.gather([
            self.client.submit(_code, p, self.problem, beta, self.n_jobs, pure=False)
            for p in self.parts])
        self.capped_documents = sum(capped for _, capped in results)
        return sum(others for others, _ in results), None

    def dictionary_step(self, state, means, max_iter, tol=1e-4):
        """`stc.dictionary.mm_dictionary_steps` with the sums gathered from the partitions."""
        client, loss = self.client, self.loss
        value, plain, weighted_sums = _gather_sum(client, [
            client.submit(_first_sums, p, loss, self.n_jobs, pure=False) for p in self.parts])
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
            results = client.gather([
                client.submit(_statistics, p, loss, beta_t, with_sums, self.n_jobs, pure=False)
                for p in self.parts])
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
