"""MedSTC's segment helpers: the coding objective along the segment from old codes to new.

MedSTC's supervised coding step moves each document's codes (word and document)
from the old ones towards the new ones and backtracks along that segment until
its objective does not rise (`stc._learning.supervised.labelled_batch`); online it moves them
once (`labelled_online`). These are its nogil parts, apart from the unsupervised
coding kernel (`_coding.pyx`), whose objective of one document they share
(`objective_at_codes`). The numpy reference `stc._core.reference` mirrors each
under the same name.
"""
from cython.parallel cimport parallel, prange
from libc.math cimport fabs
from libc.stdlib cimport free, malloc

from stc._core._coding cimport CodingParams, objective_at_codes
from stc.losses._base cimport CompiledLoss

import numpy as np

from stc._core import _constants
from stc._core._openmp import resolve_n_jobs

cdef int PENALTY_L2 = _constants.PENALTY_L2


def segment_objectives(CompiledLoss loss, CodingParams params, X, const double[:, ::1] beta_t,
                       old, new, const Py_ssize_t[::1] rows, const double[::1] steps,
                       n_jobs=None):
    """Objective (2) of documents ``rows`` of CSR ``X`` at the codes old + step * (new - old).

    ``old`` and ``new`` are (dense word codes (nnz, K), theta (n_docs, K)).
    Document rows[i] is evaluated at step steps[i] along the segment from its
    old codes (word and document) to its new ones, by the kernel's own
    `document_objective`, with ``beta_t`` the dictionary transposed. Returns
    (objective, loss part), one value per listed document. Used by MedSTC's
    safeguard to backtrack the supervised coding step; documents are
    evaluated in parallel.
    """
    cdef const int[::1] indptr = X.indptr
    cdef const int[::1] indices = X.indices
    cdef const double[::1] data = X.data
    cdef const double[:, ::1] old_codes = old[0]
    cdef const double[:, ::1] old_theta = old[1]
    cdef const double[:, ::1] new_codes = new[0]
    cdef const double[:, ::1] new_theta = new[1]
    cdef Py_ssize_t n_rows = rows.shape[0], n_topics = beta_t.shape[1], r, d, i, k, start
    cdef Py_ssize_t n_words
    cdef int n_threads = resolve_n_jobs(n_jobs)
    objective = np.zeros(n_rows, dtype=np.float64)
    loss_part = np.zeros(n_rows, dtype=np.float64)
    cdef double[::1] objective_v = objective, loss_v = loss_part
    cdef double t
    longest = int(np.max(np.diff(indptr))) if indptr.shape[0] > 1 else 0
    cdef size_t work_size = ((2 * n_topics + 1) * max(longest, 1) + n_topics) * sizeof(double)
    cdef double* work = NULL  # each thread allocates its own
    cdef double* s
    cdef double* trial_theta
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    with nogil, parallel(num_threads=n_threads):
        work = <double*> malloc(work_size)
        if work == NULL:
            failed[0] = 1
        for r in prange(n_rows, schedule="dynamic", chunksize=8):
            if work == NULL:
                continue
            d = rows[r]
            t = steps[r]
            start = indptr[d]
            n_words = indptr[d + 1] - start
            s = work
            trial_theta = work + (2 * n_topics + 1) * n_words  # as objective_at_codes reads it
            for k in range(n_topics):
                trial_theta[k] = old_theta[d, k] + t * (new_theta[d, k] - old_theta[d, k])
                for i in range(n_words):
                    s[k * n_words + i] = old_codes[start + i, k] + t * (
                        new_codes[start + i, k] - old_codes[start + i, k])
            if n_words == 0:
                # no words: its theta is not part of (2) (coding leaves it at 0)
                objective_v[r] = 0.0
                loss_v[r] = 0.0
                continue
            objective_v[r] = objective_at_codes(loss, &params, &beta_t[0, 0], n_topics,
                                                &indices[start], n_words, &data[start], work,
                                                &loss_v[r])
        free(work)
    if failed[0]:
        raise MemoryError("could not allocate the work space of segment_objectives")
    return objective, loss_part


def segment_curvatures(CodingParams params, X, old, new, const Py_ssize_t[::1] rows,
                       n_jobs=None):
    """Second-order coefficient of objective (2)'s penalty part along each row's segment.

    ``old`` and ``new``: (dense word codes, theta) at the segments' ends, as
    `segment_objectives` takes them.

    Along the codes old + t (new - old) the penalties of (2) are a quadratic
    in t (the l1 terms of non-negative codes are linear in t), so with P0 and
    P1 their values at the ends, P(t) = P0 + t (P1 - P0 - Q) + t^2 Q with
    Q = gamma sum_n ||ds_n - dtheta||^2 (+ rho sum_n ||ds_n||^2 for the l2 code
    penalty, + lam ||dtheta||^2 for the l2 theta penalty), d the differences
    new - old. One value per listed document.
    """
    cdef const int[::1] indptr = X.indptr
    cdef const double[:, ::1] old_codes = old[0]
    cdef const double[:, ::1] old_theta = old[1]
    cdef const double[:, ::1] new_codes = new[0]
    cdef const double[:, ::1] new_theta = new[1]
    cdef Py_ssize_t n_rows = rows.shape[0], n_topics = old_theta.shape[1], r, d, j, k
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef double coupling, code_sq, theta_sq, ds, dt
    curvature = np.zeros(n_rows, dtype=np.float64)
    cdef double[::1] curvature_v = curvature
    with nogil:
        for r in prange(n_rows, schedule="dynamic", chunksize=8, num_threads=n_threads):
            d = rows[r]
            coupling = 0.0
            code_sq = 0.0
            theta_sq = 0.0
            for j in range(indptr[d], indptr[d + 1]):
                for k in range(n_topics):
                    ds = new_codes[j, k] - old_codes[j, k]
                    dt = ds - (new_theta[d, k] - old_theta[d, k])
                    coupling = coupling + dt * dt
                    code_sq = code_sq + ds * ds
            for k in range(n_topics):
                dt = new_theta[d, k] - old_theta[d, k]
                theta_sq = theta_sq + dt * dt
            curvature_v[r] = (params.gamma * coupling
                              + (params.rho * code_sq if params.code_penalty == PENALTY_L2
                                 else 0.0)
                              + (params.lam * theta_sq if params.theta_penalty == PENALTY_L2
                                 else 0.0))
    return curvature


def segment_losses(CompiledLoss loss, X, const double[::1] old_means,
                   const double[::1] new_means, const Py_ssize_t[::1] rows,
                   const double[::1] steps, n_jobs=None):
    """Loss part of objective (2) along segments of CSR ``X``'s documents, from the means at
    their ends.

    A mean is linear in the codes, so at old + t (new - old) entry n's mean is
    old_n + t (new_n - old_n): the loss there costs one pass over the
    document's entries, not over its K codes per entry. Returns (loss, scale)
    per listed document, ``scale`` = sum_n |l| + |mean l'| at those means: the
    size of the rounding by which this loss can differ from one computed from
    the codes (`segment_objectives`), for callers that compare the two.
    """
    cdef const int[::1] indptr = X.indptr
    cdef const double[::1] data = X.data
    cdef Py_ssize_t n_rows = rows.shape[0], r, d, j
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef double t, mean, total, size, value
    losses = np.zeros(n_rows, dtype=np.float64)
    scales = np.zeros(n_rows, dtype=np.float64)
    cdef double[::1] losses_v = losses, scales_v = scales
    with nogil:
        for r in prange(n_rows, schedule="dynamic", chunksize=8, num_threads=n_threads):
            d = rows[r]
            t = steps[r]
            total = 0.0
            size = 0.0
            for j in range(indptr[d], indptr[d + 1]):
                mean = old_means[j] + t * (new_means[j] - old_means[j])
                value = loss._loss(data[j], mean)
                total = total + value
                size = size + fabs(value) + fabs(mean * loss._gradient(data[j], mean))
            losses_v[r] = total
            scales_v[r] = size
    return losses, scales


def move_along_segments(X, const double[:, ::1] beta_t, old, current, double[::1] means,
                        const Py_ssize_t[::1] rows, const double[::1] steps, n_jobs=None):
    """Set the codes of CSR ``X``'s documents ``rows`` to old + step * (current - old), in place.

    ``old`` and ``current`` are (dense word codes, theta); ``current``'s are
    overwritten. The means of the moved entries are recomputed from the new
    codes (summed in the order `word_means` uses, with ``beta_t`` the
    dictionary transposed); other documents are left alone.
    """
    cdef const int[::1] indptr = X.indptr
    cdef const int[::1] indices = X.indices
    cdef const double[:, ::1] old_codes = old[0]
    cdef const double[:, ::1] old_theta = old[1]
    cdef double[:, ::1] codes = current[0]
    cdef double[:, ::1] theta = current[1]
    cdef Py_ssize_t n_rows = rows.shape[0], n_topics = theta.shape[1], r, d, j, k
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef double t, acc
    with nogil:
        for r in prange(n_rows, schedule="static", num_threads=n_threads):
            d = rows[r]
            t = steps[r]
            for j in range(indptr[d], indptr[d + 1]):
                acc = 0.0
                for k in range(n_topics):
                    # step 0 restores the old codes exactly, even from non-finite new ones
                    codes[j, k] = old_codes[j, k] if t == 0.0 else \
                        old_codes[j, k] + t * (codes[j, k] - old_codes[j, k])
                    acc = acc + codes[j, k] * beta_t[indices[j], k]
                means[j] = acc
            for k in range(n_topics):
                theta[d, k] = old_theta[d, k] if t == 0.0 else \
                    old_theta[d, k] + t * (theta[d, k] - old_theta[d, k])
