"""A dask array's row blocks as partitions that stay on their workers, and the client's checks.

The Dask learners (`stc._learning.learners.dask_batch`, `stc._learning.learners.dask_online`)
keep each row block (`Partition`) of the corpus on the worker that holds it,
with its codes: the (nnz, K) word codes never travel, and the tasks that
update a partition run where it lives (`Partitions`). MedSTC adds its labels
and state to the same partitions (`stc._learning.supervised.labelled_dask`).
Partitions are updated in place on their worker: a worker lost during the
fit fails it (Dask cannot recompute a partition's codes).
"""
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

from stc._learning.dictionary import CorpusLayout
from stc._utils.validation import as_count_matrix, check_sparse_structure


@dataclass(frozen=True)
class DeferredProblem:
    """A dask array's coding problem before its partitions are read.

    rho in relative units needs w_bar, the mean count of the whole array,
    which only the partitions know: the learner reads them with ``loss`` and
    then builds the problem as ``at(w_bar)``.
    """

    loss: object
    at: Callable


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
    try:  # dask.distributed is optional (the [dask] extra): imported when a fit needs it
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
        check_sparse_structure(block, "a block of the dask array")
        self.X = as_count_matrix(sp.csr_matrix(block, dtype=np.float64), loss)
        if self.X.shape[1] != n_features:
            raise ValueError(f"a block has {self.X.shape[1]} columns, expected {n_features}")
        self._layout = None
        self.codes = self.theta = self.means = None
        self.storage = None  # batch learning's stc._learning.coding.CodeStorage of the word codes
        # online learning: the row order of the current pass, the slice of
        # rows coded next (and which of the partition's rows they are) and the
        # coded slice (its word codes and terms, until the next)
        self._order = (None, None)
        self.pending = self.pending_rows = self.coded = self.coded_terms = None
        # MedSTC: the partition's labels and supervised state (stc._learning.supervised.labelled_dask)
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
        from distributed import wait  # optional dependency: here, where a dask fit starts

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
        # optional dependency, loaded by then (a Partitions exists)
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
