# Word codes stored sparse: for each stored entry j of X, its non-zero codes only.
#
# A row (one entry's codes) is `count` doubles of values followed by `count` int topics
# (increasing), padded to a whole number of doubles; a document's rows sit one after
# the other in the document's own block (after a first double: the block's capacity),
# so coding a document rewrites one block and never moves another document's codes.
# A row with count CONSTANT_ROW has no storage: all its K codes are
# `SparseWordCodes.value` (the start of a fit). A row with count DENSE_ROW is a row of a
# dense (nnz, K) array (`SparseWordCodes.view_of_dense`): its K values, zeros included.

cdef enum:
    CONSTANT_ROW = -1
    DENSE_ROW = -2

cdef struct EntryRow:
    double* values       # the row's non-zero values; its topics follow them (row_topics)
    int count            # how many, or CONSTANT_ROW or DENSE_ROW


cdef inline const int* row_topics(const EntryRow* row) noexcept nogil:
    return <const int*> (row.values + row.count)


cdef inline double row_dot(const EntryRow* row, const double* weights,
                           Py_ssize_t n_topics) noexcept nogil:
    """sum_k codes[k] weights[k] over the row's codes, in topic order (a stored row's
    absent zeros are the dense row's +0 terms: the same bits)."""
    cdef const int* topics
    cdef double acc = 0.0
    cdef Py_ssize_t q
    if row.count == DENSE_ROW:
        for q in range(n_topics):
            acc = acc + row.values[q] * weights[q]
    else:
        topics = row_topics(row)
        for q in range(row.count):
            acc = acc + row.values[q] * weights[topics[q]]
    return acc


cdef inline void add_scaled_row(double* out, const EntryRow* row, double scale,
                                Py_ssize_t n_topics) noexcept nogil:
    """out[k] += scale * codes[k] for the row's codes."""
    cdef const int* topics
    cdef Py_ssize_t q
    if row.count == DENSE_ROW:
        for q in range(n_topics):
            out[q] += scale * row.values[q]
    else:
        topics = row_topics(row)
        for q in range(row.count):
            out[topics[q]] += scale * row.values[q]


cdef inline Py_ssize_t row_doubles(Py_ssize_t count) noexcept nogil:
    """Doubles one row of ``count`` codes takes: values, then topics padded to a double."""
    return count + (count + 1) // 2


cdef struct CodeRows:
    # What the kernels read and write, taken from a SparseWordCodes while they run.
    EntryRow* rows       # one per stored entry of X
    double** blocks      # one per document: [capacity, its rows...] (NULL if none)
    double value         # the codes of CONSTANT_ROW rows
    const double* dense  # a view's dense (nnz, K) array (row j at dense + j K), else NULL


cdef inline EntryRow entry_row(const CodeRows* codes, Py_ssize_t j,
                               Py_ssize_t n_topics) noexcept nogil:
    """Row j: a view's dense row is found from j alone (no index to read)."""
    cdef EntryRow row
    if codes.dense != NULL:
        row.values = <double*> (codes.dense + j * n_topics)
        row.count = DENSE_ROW
        return row
    return codes.rows[j]


cdef void release_free_memory() noexcept nogil
cdef void load_rows(const CodeRows* codes, Py_ssize_t start, Py_ssize_t n_words,
                    Py_ssize_t n_topics, double* s) noexcept nogil
cdef inline Py_ssize_t STORE_SCRATCH(Py_ssize_t n_words, Py_ssize_t n_topics) noexcept nogil:
    """Doubles of scratch `store_rows` needs: a 64-bit mask per word and 64 topics."""
    return n_words * ((n_topics + 63) // 64)


cdef int store_rows(CodeRows* codes, Py_ssize_t d, Py_ssize_t start, Py_ssize_t n_words,
                    Py_ssize_t n_topics, const double* s, double* scratch) noexcept nogil


cdef class SparseWordCodes:
    cdef CodeRows codes
    cdef object dense                    # the array a view of dense codes reads, or None
    cdef readonly Py_ssize_t n_entries, n_topics, n_documents
    cdef readonly object indptr          # int64 (n_documents + 1): the documents' entries
    cdef CodeRows* writable_rows(self) except NULL
    cdef const CodeRows* stored_rows(self) except NULL
