"""Products between word codes (aligned with X's non-zeros) and the dictionary.

Every function is deterministic whatever the thread count: every output
entry is summed by one thread in a fixed order.
"""
from cython.parallel cimport prange

from stc.losses._base cimport CompiledLoss

import numpy as np

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define STC_PREFETCH(address) __builtin_prefetch(address)
    #else
    #define STC_PREFETCH(address) ((void) 0)
    #endif
    """
    void STC_PREFETCH(const void* address) noexcept nogil

# Rows of the codes are visited in a data-dependent order (term by term):
# prefetch the row this many entries ahead, all of its cache lines.
cdef Py_ssize_t PREFETCH_DISTANCE = 4

cdef inline void prefetch_row(const double* row, Py_ssize_t length) noexcept nogil:
    cdef Py_ssize_t q
    for q in range(0, length, 8):  # 8 doubles per 64-byte cache line
        STC_PREFETCH(row + q)

from stc._core._openmp import resolve_n_jobs


def word_means(const int[::1] indices, const double[:, ::1] codes,
               const double[:, ::1] beta_t, n_jobs=None):
    """mean_j = codes[j] . beta[:, indices[j]] for every stored entry j.

    ``beta_t`` is the dictionary transposed, (n_features, n_topics).
    """
    cdef Py_ssize_t nnz = codes.shape[0], n_topics = codes.shape[1], j, k
    cdef int n_threads = resolve_n_jobs(n_jobs)
    out = np.empty(nnz, dtype=np.float64)
    cdef double[::1] out_v = out
    cdef double acc
    cdef const double* row
    with nogil:
        for j in prange(nnz, schedule="static", num_threads=n_threads):
            if j + PREFETCH_DISTANCE < nnz:
                prefetch_row(&beta_t[indices[j + PREFETCH_DISTANCE], 0], n_topics)
            acc = 0.0
            row = &beta_t[indices[j], 0]
            for k in range(n_topics):
                acc = acc + codes[j, k] * row[k]
            out_v[j] = acc
    return out


cdef inline void add_scaled_row(double* out, const double* row, double scale,
                                Py_ssize_t length) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(length):
        out[k] += scale * row[k]


def word_code_sums(const int[::1] col_ptr, const int[::1] col_entries,
                   const double[:, ::1] codes, const double[::1] weights, n_jobs=None,
                   bint with_plain=False):
    """out[n, k] = sum over entries j of term n of weights[j] * codes[j, k].

    ``col_ptr``/``col_entries`` list, term by term, the positions j of the
    stored entries of each term (a CSC view of X's non-zeros). ``weights``
    may be empty, meaning all ones. With ``with_plain`` the unweighted sums
    come from the same pass over the codes: returns (plain, weighted).
    """
    cdef Py_ssize_t n_features = col_ptr.shape[0] - 1, n_topics = codes.shape[1], n, p, j, k
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef bint weighted = weights.shape[0] > 0
    cdef Py_ssize_t n_entries = col_entries.shape[0]
    out = np.zeros((n_features, n_topics), dtype=np.float64)
    plain = np.zeros((n_features if with_plain else 1, n_topics if with_plain else 1),
                     dtype=np.float64)
    cdef double[:, ::1] out_v = out, plain_v = plain
    with nogil:
        for n in prange(n_features, schedule="static", num_threads=n_threads):
            for p in range(col_ptr[n], col_ptr[n + 1]):
                if p + PREFETCH_DISTANCE < n_entries:
                    prefetch_row(&codes[col_entries[p + PREFETCH_DISTANCE], 0], n_topics)
                j = col_entries[p]
                add_scaled_row(&out_v[n, 0], &codes[j, 0], weights[j] if weighted else 1.0,
                               n_topics)
                if with_plain:  # the row is in cache now
                    add_scaled_row(&plain_v[n, 0], &codes[j, 0], 1.0, n_topics)
    return (plain, out) if with_plain else out


def mm_statistics(CompiledLoss loss, const int[::1] col_ptr, const int[::1] col_entries,
                  const double[::1] data, const double[:, ::1] codes,
                  const double[:, ::1] beta_t, n_jobs=None, bint with_ratio_sums=True):
    """F(beta) and the MM step's weighted sums, in one pass over the codes.

    For every stored entry j of term n, with mean_j = codes[j] . beta[:, n]:
    returns (F, sums) with F = sum_j loss(y_j, mean_j) and
    sums[n, k] = sum over the entries j of term n of (y_j / mean_j) codes[j, k]
    (ratio 0 where mean_j = 0; None without ``with_ratio_sums``). The means
    are not stored: the Poisson MM step needs only these two. F is summed
    term by term, then over terms in order, so it does not depend on the
    thread count. ``beta_t`` is the dictionary transposed, (n_features, K).
    """
    cdef Py_ssize_t n_features = col_ptr.shape[0] - 1, n_topics = codes.shape[1], n, p, j, k
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef Py_ssize_t n_entries = col_entries.shape[0]
    sums = np.zeros((n_features if with_ratio_sums else 1, n_topics), dtype=np.float64)
    term_losses = np.zeros(n_features, dtype=np.float64)
    cdef double[:, ::1] sums_v = sums
    cdef double[::1] term_v = term_losses
    cdef double mean, acc
    cdef const double* row
    cdef const double* topic_weights
    with nogil:
        for n in prange(n_features, schedule="static", num_threads=n_threads):
            topic_weights = &beta_t[n, 0]
            acc = 0.0
            for p in range(col_ptr[n], col_ptr[n + 1]):
                if p + PREFETCH_DISTANCE < n_entries:
                    prefetch_row(&codes[col_entries[p + PREFETCH_DISTANCE], 0], n_topics)
                j = col_entries[p]
                row = &codes[j, 0]
                mean = 0.0
                for k in range(n_topics):
                    mean = mean + row[k] * topic_weights[k]
                acc = acc + loss._loss(data[j], mean)
                if with_ratio_sums and mean > 0.0:
                    add_scaled_row(&sums_v[n, 0], row, data[j] / mean, n_topics)
            term_v[n] = acc
    return float(np.sum(term_losses)), (sums if with_ratio_sums else None)
