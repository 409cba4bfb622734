"""Products between word codes (aligned with X's non-zeros) and the dictionary.

The word codes are `SparseWordCodes`: each entry's non-zero codes with their
topics, so every pass costs the non-zero codes, not nnz x K. A sum over a
row's codes skips only terms that are +0 in the dense sum: the same bits as
summing the dense (nnz, K) row in topic order. Every function is
deterministic whatever the thread count: every output entry is summed by one
thread in a fixed order.
"""
from cython.parallel cimport parallel, prange
from libc.stdlib cimport free, malloc

from stc._core._word_codes cimport (DENSE_ROW, CodeRows, EntryRow, SparseWordCodes,
                                    add_scaled_row, entry_row, row_dot)
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

# Terms per chunk of the dynamically scheduled loops over terms; TERM_BLOCK is the block
# of terms whose (K, N) columns are gathered and written together (K x 64 doubles per
# array, in L1/L2): row by row, 64 consecutive doubles, instead of K scattered ones per term.
cdef enum:
    TERM_CHUNK = 64
    TERM_BLOCK = 64

# Rows of the codes are visited in a data-dependent order (term by term): prefetch the
# row index this many entries ahead, and the row it points to half as many.
cdef Py_ssize_t PREFETCH_DISTANCE = 8

cdef inline void prefetch_row(const double* row, Py_ssize_t length) noexcept nogil:
    cdef Py_ssize_t q
    for q in range(0, length, 8):  # 8 doubles per 64-byte cache line
        STC_PREFETCH(row + q)


cdef inline void prefetch_entry(const CodeRows* codes, const int* entries, Py_ssize_t p,
                                Py_ssize_t n_left, Py_ssize_t n_topics) noexcept nogil:
    """Ask early for the row of the entry PREFETCH_DISTANCE / 2 ahead and the index further on."""
    cdef const EntryRow* ahead
    if codes.dense != NULL:  # a dense row's place follows from its entry
        if p + PREFETCH_DISTANCE // 2 < n_left:
            prefetch_row(codes.dense + entries[p + PREFETCH_DISTANCE // 2] * n_topics, n_topics)
        return
    if p + PREFETCH_DISTANCE < n_left:
        STC_PREFETCH(&codes.rows[entries[p + PREFETCH_DISTANCE]])
    if p + PREFETCH_DISTANCE // 2 < n_left:
        ahead = &codes.rows[entries[p + PREFETCH_DISTANCE // 2]]
        if ahead.count > 0:
            prefetch_row(ahead.values, ahead.count + (ahead.count + 1) // 2)


from stc._core._openmp import resolve_n_jobs


def word_means(const int[::1] indices, SparseWordCodes codes not None, const double[:, ::1] beta_t,
               n_jobs=None):
    """mean_j = codes[j] . beta[:, indices[j]] for every stored entry j.

    ``beta_t`` is the dictionary transposed, (n_features, n_topics).
    """
    cdef const CodeRows* rows = codes.stored_rows()
    cdef Py_ssize_t nnz = codes.n_entries, n_topics = codes.n_topics, j
    cdef EntryRow row
    cdef int n_threads = resolve_n_jobs(n_jobs)
    if indices.shape[0] != nnz or beta_t.shape[1] != n_topics:
        raise ValueError("indices and beta_t must match the codes' entries and topics")
    out = np.empty(nnz, dtype=np.float64)
    cdef double[::1] out_v = out
    with nogil:
        for j in prange(nnz, schedule="static", num_threads=n_threads):
            if j + PREFETCH_DISTANCE < nnz:
                prefetch_row(&beta_t[indices[j + PREFETCH_DISTANCE], 0], n_topics)
            row = entry_row(rows, j, n_topics)
            out_v[j] = row_dot(&row, &beta_t[indices[j], 0], n_topics)
    return out


def word_code_sums(const int[::1] col_ptr, const int[::1] col_entries, SparseWordCodes codes not None,
                   const double[::1] weights, n_jobs=None, bint with_plain=False):
    """out[n, k] = sum over entries j of term n of weights[j] * codes[j, k].

    ``col_ptr``/``col_entries`` list, term by term, the positions j of the
    stored entries of each term (a CSC view of X's non-zeros). ``weights``
    may be empty, meaning all ones. With ``with_plain`` the unweighted sums
    come from the same pass over the codes: returns (plain, weighted).
    """
    cdef const CodeRows* rows = codes.stored_rows()
    cdef Py_ssize_t n_features = col_ptr.shape[0] - 1, n_topics = codes.n_topics, n, p, j
    cdef EntryRow row
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef bint weighted = weights.shape[0] > 0
    cdef Py_ssize_t n_entries = col_entries.shape[0]
    if n_entries != codes.n_entries:
        raise ValueError("col_entries must list every entry of the codes")
    out = np.zeros((n_features, n_topics), dtype=np.float64)
    plain = np.zeros((n_features if with_plain else 1, n_topics if with_plain else 1),
                     dtype=np.float64)
    cdef double[:, ::1] out_v = out, plain_v = plain
    with nogil:
        # dynamic: the entries crowd into a corpus's frequent terms, which tend to
        # come first, so static halves can leave one thread idle
        for n in prange(n_features, schedule="dynamic", chunksize=TERM_CHUNK,
                        num_threads=n_threads):
            for p in range(col_ptr[n], col_ptr[n + 1]):
                prefetch_entry(rows, &col_entries[0], p, n_entries, n_topics)
                j = col_entries[p]
                row = entry_row(rows, j, n_topics)
                add_scaled_row(&out_v[n, 0], &row, weights[j] if weighted else 1.0, n_topics)
                if with_plain:  # the row is in cache now
                    add_scaled_row(&plain_v[n, 0], &row, 1.0, n_topics)
    return (plain, out) if with_plain else out


cdef double term_mm_pass(CompiledLoss loss, const int* entries, Py_ssize_t count,
                        const double* data, const CodeRows* rows, Py_ssize_t n_topics,
                        const double* topic_weights, double* sums, Py_ssize_t n_entries_left,
                        bint with_loss) noexcept nogil:
    """One term of `mm_statistics`: returns sum_j loss(y_j, mean_j) over its entries.

    With ``sums`` (K doubles, accumulated into) adds (y_j / mean_j) codes[j]
    where mean_j > 0. ``rows`` are the sparse codes' rows; ``n_entries_left``
    bounds the prefetch (entries of X from this term on). y_j is data[p] for
    the term's p-th entry: values stored term by term are read in sequence,
    where reading them by entry j would be a cache miss per entry. Without
    ``with_loss`` the loss is not evaluated (0 is returned).
    """
    cdef Py_ssize_t p = 0, q, k, group
    cdef double acc = 0.0, y, m0, m1, m2, m3
    cdef double means[4]
    cdef EntryRow group_rows[4]
    cdef const double* w = topic_weights
    while p < count:
        group = count - p if count - p < 4 else 4
        for q in range(group):
            prefetch_entry(rows, entries, p + q, n_entries_left, n_topics)
            group_rows[q] = entry_row(rows, entries[p + q], n_topics)
        if group == 4 and (group_rows[0].count == DENSE_ROW and group_rows[1].count == DENSE_ROW
                           and group_rows[2].count == DENSE_ROW
                           and group_rows[3].count == DENSE_ROW):
            # dense rows: four serial chains of K additions, overlapped (each mean summed
            # in topic order as `row_dot` sums it: the same bits)
            m0 = m1 = m2 = m3 = 0.0
            for k in range(n_topics):
                m0 = m0 + group_rows[0].values[k] * w[k]
                m1 = m1 + group_rows[1].values[k] * w[k]
                m2 = m2 + group_rows[2].values[k] * w[k]
                m3 = m3 + group_rows[3].values[k] * w[k]
            means[0], means[1], means[2], means[3] = m0, m1, m2, m3
        else:
            for q in range(group):
                means[q] = row_dot(&group_rows[q], w, n_topics)
        for q in range(group):
            y = data[p + q]
            if with_loss:
                acc = acc + loss._loss(y, means[q])
            if sums != NULL and means[q] > 0.0:
                add_scaled_row(sums, &group_rows[q], y / means[q], n_topics)
        p += group
    return acc


def mm_statistics(CompiledLoss loss, const int[::1] col_ptr, const int[::1] col_entries,
                  const double[::1] data, SparseWordCodes codes not None,
                  const double[:, ::1] beta_t, n_jobs=None, bint with_ratio_sums=True):
    """F(beta) and the MM step's weighted sums, in one pass over the codes.

    For every stored entry j of term n, with mean_j = codes[j] . beta[:, n]:
    returns (F, sums) with F = sum_j loss(y_j, mean_j) and
    sums[n, k] = sum over the entries j of term n of (y_j / mean_j) codes[j, k]
    (ratio 0 where mean_j = 0; None without ``with_ratio_sums``). The means
    are not stored: the Poisson MM step needs only these two. F is summed
    term by term, then over terms in order, so it does not depend on the
    thread count. ``beta_t`` is the dictionary transposed, (n_features, K).
    `mm_step_statistics` is the same pass in the (K, N) layout of beta.
    """
    cdef const CodeRows* rows = codes.stored_rows()
    cdef Py_ssize_t n_features = col_ptr.shape[0] - 1, n_topics = codes.n_topics, n
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef Py_ssize_t n_entries = col_entries.shape[0]
    if n_entries != codes.n_entries or data.shape[0] != n_entries:
        raise ValueError("col_entries and data must hold one value per entry of the codes")
    # the values term by term, read in sequence by `term_mm_pass`
    cdef const double[::1] col_data = np.asarray(data)[np.asarray(col_entries)]
    sums = np.zeros((n_features if with_ratio_sums else 1, n_topics), dtype=np.float64)
    term_losses = np.zeros(n_features, dtype=np.float64)
    cdef double[:, ::1] sums_v = sums
    cdef double[::1] term_v = term_losses
    with nogil:
        for n in prange(n_features, schedule="dynamic", chunksize=TERM_CHUNK,
                        num_threads=n_threads):
            term_v[n] = term_mm_pass(loss, &col_entries[col_ptr[n]], col_ptr[n + 1] - col_ptr[n],
                                     &col_data[col_ptr[n]], rows, n_topics, &beta_t[n, 0],
                                     &sums_v[n, 0] if with_ratio_sums else NULL,
                                     n_entries - col_ptr[n], True)
    return float(np.sum(term_losses)), (sums if with_ratio_sums else None)


def _check_topic_major(name, array, n_topics, n_features):
    if not (isinstance(array, np.ndarray) and array.dtype == np.float64
            and array.shape == (n_topics, n_features) and array.flags.c_contiguous
            and array.flags.writeable):
        raise ValueError(f"{name} must be a writable C-contiguous float64 array of shape "
                         f"({n_topics}, {n_features})")


def _beta_columns(beta, columns, n_topics, n_features):
    """Check ``beta`` against the layout's terms; return the index of their beta columns.

    Without ``columns`` term n's topic weights are beta[:, n] (beta is (K,
    n_features)); with it, beta[:, columns[n]]: beta holds every term of a
    vocabulary of which the layout's are a part (online learning's batch).
    """
    if columns is None:
        if beta.shape[0] != n_topics or beta.shape[1] != n_features:
            raise ValueError(f"beta must be ({n_topics}, {n_features})")
        return np.arange(n_features, dtype=np.intp)
    columns = np.asarray(columns)
    if columns.dtype != np.intp or columns.ndim != 1 or not columns.flags.c_contiguous:
        raise ValueError("columns must be a C-contiguous 1-D intp array")
    if beta.shape[0] != n_topics or columns.shape[0] != n_features:
        raise ValueError(f"beta must have {n_topics} rows and columns {n_features} entries")
    if n_features and (columns.min() < 0 or columns.max() >= beta.shape[1]):
        raise ValueError(f"columns must lie in [0, {beta.shape[1]})")
    return columns


def mm_step_statistics(CompiledLoss loss, const int[::1] col_ptr, const int[::1] col_entries,
                       const double[::1] col_data, SparseWordCodes codes not None,
                       const double[:, ::1] beta, responsibilities=None, n_jobs=None,
                       columns=None, bint with_loss=True):
    """`mm_statistics` with beta (K, N) as it is, and a = beta * sums written (K, N).

    ``col_data`` holds the values y_j term by term (``data[col_entries]``).
    Returns F. With ``responsibilities`` (a writable C-contiguous (K, N)
    array), sets responsibilities[k, n] = beta[k, n] * sums[n, k], the a of
    the next MM step (`stc._core._simplex.mm_exact_rows`), each sum formed
    exactly as `mm_statistics` forms it. Blocks of terms are gathered from and
    written to beta's layout through a small buffer per thread: no transposed
    copy of beta nor (N, K) sums, and no strided pass over a whole array.
    ``columns`` (see `_beta_columns`): term n's topic weights are
    beta[:, columns[n]]; ``responsibilities`` is then (K, terms of the layout).
    Without ``with_loss`` F is not evaluated (NaN is returned): online
    learning's step needs a only, and the loss costs a logarithm per entry.
    """
    cdef const CodeRows* rows = codes.stored_rows()
    cdef Py_ssize_t n_features = col_ptr.shape[0] - 1, n_topics = codes.n_topics, n, k
    if col_data.shape[0] != codes.n_entries or col_entries.shape[0] != codes.n_entries:
        raise ValueError("col_data and col_entries must hold one value per code row")
    cdef const Py_ssize_t[::1] column = _beta_columns(beta, columns, n_topics, n_features)
    cdef bint with_sums = responsibilities is not None
    if with_sums:
        _check_topic_major("responsibilities", responsibilities, n_topics, n_features)
    cdef double[:, ::1] a_v = responsibilities if with_sums else np.empty((1, 1))
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef Py_ssize_t n_entries = col_entries.shape[0], block, n_blocks, first, count, t
    n_blocks = (n_features + TERM_BLOCK - 1) // TERM_BLOCK
    term_losses = np.zeros(n_features, dtype=np.float64)
    cdef double[::1] term_v = term_losses
    cdef double* weights = NULL  # the block's columns of beta, term by term: (TERM_BLOCK, K)
    cdef double* sums = NULL  # the block's ratio sums, term by term
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    with nogil, parallel(num_threads=n_threads):
        weights = <double*> malloc(2 * TERM_BLOCK * (n_topics if n_topics > 0 else 1)
                                   * sizeof(double))
        if weights == NULL:
            failed[0] = 1
        sums = weights + TERM_BLOCK * n_topics
        for block in prange(n_blocks, schedule="dynamic"):
            if weights == NULL:
                continue
            first = block * TERM_BLOCK
            count = n_features - first if n_features - first < TERM_BLOCK else TERM_BLOCK
            for k in range(n_topics):
                for t in range(count):
                    weights[t * n_topics + k] = beta[k, column[first + t]]
            for t in range(count * n_topics):
                sums[t] = 0.0
            for t in range(count):
                n = first + t
                term_v[n] = term_mm_pass(
                    loss, &col_entries[col_ptr[n]], col_ptr[n + 1] - col_ptr[n],
                    &col_data[col_ptr[n]], rows, n_topics, weights + t * n_topics,
                    sums + t * n_topics if with_sums else NULL, n_entries - col_ptr[n],
                    with_loss)
            if with_sums:
                for k in range(n_topics):
                    for t in range(count):
                        a_v[k, first + t] = beta[k, column[first + t]] * sums[t * n_topics + k]
        free(weights)
    if failed[0]:
        raise MemoryError("could not allocate the work space of the MM statistics")
    return float(np.sum(term_losses)) if with_loss else float("nan")


def mm_first_statistics(const int[::1] col_ptr, const int[::1] col_entries,
                        SparseWordCodes codes not None, const double[::1] ratios,
                        const double[:, ::1] beta, responsibilities, code_sums, n_jobs=None,
                        columns=None):
    """The first MM step's statistics in beta's (K, N) layout, in one pass over the codes.

    Sets code_sums[k, n] = sum over the entries j of term n of codes[j, k] and
    responsibilities[k, n] = beta[k, n] * (sum of ratios[j] * codes[j, k]):
    `word_code_sums` (``with_plain``) transposed, with a formed, each sum
    accumulated in the same order. Both outputs: writable C-contiguous (K, N).
    ``columns`` as `mm_step_statistics`' (the outputs are then (K, terms of
    the layout)).
    """
    cdef const CodeRows* rows = codes.stored_rows()
    cdef Py_ssize_t n_features = col_ptr.shape[0] - 1, n_topics = codes.n_topics, n, p, j, k
    cdef EntryRow row
    if ratios.shape[0] != codes.n_entries or col_entries.shape[0] != codes.n_entries:
        raise ValueError("ratios and col_entries must hold one value per code row")
    cdef const Py_ssize_t[::1] column = _beta_columns(beta, columns, n_topics, n_features)
    _check_topic_major("responsibilities", responsibilities, n_topics, n_features)
    _check_topic_major("code_sums", code_sums, n_topics, n_features)
    cdef double[:, ::1] a_v = responsibilities, c_v = code_sums
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef Py_ssize_t n_entries = col_entries.shape[0], block, n_blocks, first, count, t
    n_blocks = (n_features + TERM_BLOCK - 1) // TERM_BLOCK
    cdef double* weighted = NULL  # the block's weighted sums, term by term: (TERM_BLOCK, K)
    cdef double* plain = NULL  # and its plain sums
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    with nogil, parallel(num_threads=n_threads):
        weighted = <double*> malloc(2 * TERM_BLOCK * (n_topics if n_topics > 0 else 1)
                                    * sizeof(double))
        if weighted == NULL:
            failed[0] = 1
        plain = weighted + TERM_BLOCK * n_topics
        for block in prange(n_blocks, schedule="dynamic"):
            if weighted == NULL:
                continue
            first = block * TERM_BLOCK
            count = n_features - first if n_features - first < TERM_BLOCK else TERM_BLOCK
            for t in range(2 * TERM_BLOCK * n_topics):
                weighted[t] = 0.0
            for t in range(count):
                n = first + t
                for p in range(col_ptr[n], col_ptr[n + 1]):
                    prefetch_entry(rows, &col_entries[0], p, n_entries, n_topics)
                    if p + PREFETCH_DISTANCE < n_entries:
                        STC_PREFETCH(&ratios[col_entries[p + PREFETCH_DISTANCE]])  # a miss too
                    j = col_entries[p]
                    row = entry_row(rows, j, n_topics)
                    add_scaled_row(weighted + t * n_topics, &row, ratios[j], n_topics)
                    add_scaled_row(plain + t * n_topics, &row, 1.0, n_topics)
            for k in range(n_topics):
                for t in range(count):
                    a_v[k, first + t] = beta[k, column[first + t]] * weighted[t * n_topics + k]
                    c_v[k, first + t] = plain[t * n_topics + k]
        free(weighted)
    if failed[0]:
        raise MemoryError("could not allocate the work space of the MM statistics")
