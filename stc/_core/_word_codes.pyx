"""Word codes kept sparse between coding sweeps: each entry of X stores its non-zero codes.

Most word codes are exactly zero (Proposition 1 clamps them there), and more of them
the more topics there are. Stored densely, a fit's (nnz, K) codes dominate its memory
and every pass over them reads and writes the zeros too. `SparseWordCodes` keeps, per
stored entry of X, only the non-zero codes and their topics, in one block per document
(see `_word_codes.pxd` for the layout): the coding kernel loads a document's block into
its dense per-document buffer, codes it, and replaces the block; the dictionary
statistics read the rows directly.

A zero code is simply absent, so every sum over a row's codes skips terms that are
exactly +0 in the dense sums: the same bits as summing the dense row in topic order.
"""
from cython.parallel cimport parallel, prange
from libc.stdlib cimport calloc, free, malloc
from libc.stdint cimport uint64_t
from libc.string cimport memcpy, memset

cdef extern from *:
    """
    #if defined(__GLIBC__)
    #include <malloc.h>
    /* Hand the heap's free pages back to the system: documents' blocks shrink as a fit's
       codes grow sparser, and glibc keeps what they freed in its arenas otherwise. */
    static void stc_release_free_memory(void) { malloc_trim(0); }
    #else
    static void stc_release_free_memory(void) {}
    #endif
    """
    void __builtin_prefetch(const void* address) noexcept nogil
    void stc_release_free_memory() noexcept nogil

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* Mark the non-zero codes (NaN included) of topics k0 .. k0 + count - 1 (count <= 4, in
       one group of 64 topics) in their words' masks: masks[i] gets bit k % 64 where
       s[k * n + i] != 0. Each mask is read and written once for the four topics, two words
       at a time where the compiler has vector types (every x86-64 and aarch64 CPU has
       two-double vectors). */
    static void stc_mark_nonzero(Py_ssize_t n, const double* s, Py_ssize_t k0, int count,
                                 uint64_t* masks) {
        const double* rows[4];
        uint64_t bit[4];
        Py_ssize_t i = 0;
        int q;
        for (q = 0; q < 4; q++) {  /* missing topics repeat the last one (its bit set twice) */
            Py_ssize_t k = k0 + (q < count ? q : count - 1);
            rows[q] = s + k * n;
            bit[q] = (uint64_t) 1 << (k & 63);
        }
    #if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
        {
            typedef double v2d __attribute__((vector_size(16)));
            typedef long long v2i __attribute__((vector_size(16)));
            const v2d zero = {0.0, 0.0};
            const v2i b0 = {(long long) bit[0], (long long) bit[0]};
            const v2i b1 = {(long long) bit[1], (long long) bit[1]};
            const v2i b2 = {(long long) bit[2], (long long) bit[2]};
            const v2i b3 = {(long long) bit[3], (long long) bit[3]};
            for (; i + 2 <= n; i += 2) {
                v2d x0, x1, x2, x3;
                v2i m;
                memcpy(&x0, rows[0] + i, sizeof x0);
                memcpy(&x1, rows[1] + i, sizeof x1);
                memcpy(&x2, rows[2] + i, sizeof x2);
                memcpy(&x3, rows[3] + i, sizeof x3);
                memcpy(&m, masks + i, sizeof m);
                m |= ((x0 != zero) & b0) | ((x1 != zero) & b1) | ((x2 != zero) & b2)
                     | ((x3 != zero) & b3);
                memcpy(masks + i, &m, sizeof m);
            }
        }
    #endif
        for (; i < n; i++)
            for (q = 0; q < 4; q++)
                if (rows[q][i] != 0.0)
                    masks[i] |= bit[q];
    }
    /* Bits set, and the index of the lowest set bit (of a non-zero mask). Neither may
       need an instruction that the platform's baseline lacks (x86-64 has no POPCNT):
       GCC and clang pick their own code for the baseline; elsewhere the bits are
       counted by halves, quarters and bytes. */
    #if defined(__GNUC__)
    static inline int stc_popcount64(uint64_t x) { return __builtin_popcountll(x); }
    static inline int stc_lowest_bit(uint64_t x) { return __builtin_ctzll(x); }
    #else
    static inline int stc_popcount64(uint64_t x) {
        x = x - ((x >> 1) & 0x5555555555555555ULL);
        x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
        x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
        return (int) ((x * 0x0101010101010101ULL) >> 56);
    }
    #if defined(_MSC_VER) && defined(_M_X64)
    #include <intrin.h>
    static inline int stc_lowest_bit(uint64_t x) {  /* BSF: baseline x86-64 */
        unsigned long i; _BitScanForward64(&i, x); return (int) i; }
    #else
    static inline int stc_lowest_bit(uint64_t x) {
        int i = 0; while (!(x & 1)) { x >>= 1; i++; } return i; }
    #endif
    #endif
    """
    void mark_nonzero "stc_mark_nonzero"(Py_ssize_t n, const double* s, Py_ssize_t k0,
                                         int count, uint64_t* masks) noexcept nogil
    int popcount64 "stc_popcount64"(uint64_t x) noexcept nogil
    int lowest_bit "stc_lowest_bit"(uint64_t x) noexcept nogil


cdef void release_free_memory() noexcept nogil:
    stc_release_free_memory()

import numpy as np

from stc._core._openmp import resolve_n_jobs


cdef void load_rows(const CodeRows* codes, Py_ssize_t start, Py_ssize_t n_words,
                    Py_ssize_t n_topics, double* s) noexcept nogil:
    """Write the codes of entries start .. start + n_words topic by topic: s[k * n_words + i]."""
    cdef Py_ssize_t i, k, q
    cdef const EntryRow* row
    cdef const int* topics
    memset(s, 0, n_topics * n_words * sizeof(double))
    for i in range(n_words):
        row = &codes.rows[start + i]
        if row.count == CONSTANT_ROW:
            for k in range(n_topics):
                s[k * n_words + i] = codes.value
        elif row.count == DENSE_ROW:
            for k in range(n_topics):
                s[k * n_words + i] = row.values[k]
        else:
            topics = row_topics(row)
            for q in range(row.count):
                s[topics[q] * n_words + i] = row.values[q]


cdef double* reserve_rows(CodeRows* codes, Py_ssize_t d, Py_ssize_t size) noexcept nogil:
    """Room for ``size`` doubles of rows in document d's block; NULL if memory ran out.

    A block's first double holds its capacity. It is reused while the rows
    fit and fill at least half of it (the codes grow sparser as a fit goes
    on, and the memory follows them down): a document coded by
    another thread than last time would otherwise free memory into that
    thread's heap and allocate from its own, a lock on every document.
    The old rows are not kept (the caller holds the codes).
    """
    cdef double* block = codes.blocks[d]
    cdef Py_ssize_t capacity = <Py_ssize_t> block[0] if block != NULL else 0
    if capacity >= size and capacity <= 2 * size + 8:
        return block + 1  # shrunk to under half: given back below
    block = <double*> malloc((size + 1) * sizeof(double))
    if block == NULL:
        return NULL
    block[0] = <double> size
    free(codes.blocks[d])
    codes.blocks[d] = block
    return block + 1


cdef Py_ssize_t stored_doubles(const CodeRows* codes, Py_ssize_t start,
                               Py_ssize_t stop) noexcept nogil:
    """Doubles the rows of entries start .. stop - 1 take (0 for start-value rows)."""
    cdef Py_ssize_t j, size = 0
    for j in range(start, stop):
        if codes.rows[j].count > 0:
            size += row_doubles(codes.rows[j].count)
    return size


cdef int store_strided(CodeRows* codes, Py_ssize_t d, Py_ssize_t start, Py_ssize_t n_words,
                       Py_ssize_t n_topics, const double* s, Py_ssize_t word_stride,
                       Py_ssize_t topic_stride) noexcept nogil:
    """Replace document d's block by the non-zero codes s[i * word_stride + k * topic_stride].

    Returns 0, or -1 (and leaves the old block in place) if memory ran out.
    """
    cdef Py_ssize_t i, k, total = 0, count
    cdef double x
    cdef double* values
    cdef int* topics
    for i in range(n_words):
        count = 0
        for k in range(n_topics):
            if s[i * word_stride + k * topic_stride] != 0.0:  # NaN is kept too
                count += 1
        total += row_doubles(count)
    values = reserve_rows(codes, d, total)
    if values == NULL:
        return -1
    for i in range(n_words):
        count = 0
        for k in range(n_topics):
            if s[i * word_stride + k * topic_stride] != 0.0:
                count += 1
        topics = <int*> (values + count)
        count = 0
        for k in range(n_topics):
            x = s[i * word_stride + k * topic_stride]
            if x != 0.0:
                values[count] = x
                topics[count] = <int> k
                count += 1
        codes.rows[start + i].values = values
        codes.rows[start + i].count = <int> count
        values += row_doubles(count)
    return 0


cdef int store_rows(CodeRows* codes, Py_ssize_t d, Py_ssize_t start, Py_ssize_t n_words,
                    Py_ssize_t n_topics, const double* s, double* scratch) noexcept nogil:
    """Replace document d's block by the codes s[k * n_words + i] (topic by topic).

    ``scratch`` holds `STORE_SCRATCH` (n_words, n_topics) doubles. Returns 0,
    or -1 (and leaves the old codes in place) if memory ran out.

    One pass over s marks each word's non-zero codes in bit masks (64 topics a
    mask, the masks of one group of 64 topics contiguous over the words: the
    pass is a vector loop); then each row is written from its mask, so the
    copying costs one step per non-zero code instead of one per code.
    """
    cdef Py_ssize_t n_masks = (n_topics + 63) // 64, i, k, g, c, total = 0
    cdef uint64_t* masks = <uint64_t*> scratch  # masks[g * n_words + i]: topics 64 g .. 64 g + 63
    cdef uint64_t bits
    cdef double* values
    cdef int* topics
    memset(masks, 0, n_masks * n_words * sizeof(uint64_t))
    k = 0
    while k < n_topics:
        # four topics of one group of 64 at a time
        c = min(4, n_topics - k, 64 - (k & 63))
        mark_nonzero(n_words, s, k, <int> c, masks + (k >> 6) * n_words)
        k += c
    for i in range(n_words):
        c = 0
        for g in range(n_masks):
            c += popcount64(masks[g * n_words + i])
        total += row_doubles(c)
    values = reserve_rows(codes, d, total)
    if values == NULL:
        return -1
    for i in range(n_words):
        c = 0
        for g in range(n_masks):
            c += popcount64(masks[g * n_words + i])
        topics = <int*> (values + c)
        codes.rows[start + i].values = values
        codes.rows[start + i].count = <int> c
        c = 0
        for g in range(n_masks):
            bits = masks[g * n_words + i]
            while bits != 0:
                k = 64 * g + lowest_bit(bits)
                values[c] = s[k * n_words + i]
                topics[c] = <int> k
                c += 1
                bits &= bits - 1  # the next non-zero code, in topic order
        values += row_doubles(c)
    return 0


cdef bint has_constant_rows(const CodeRows* codes, Py_ssize_t n_entries) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n_entries):
        if codes.rows[j].count == CONSTANT_ROW:
            return True
    return False


def _as_indptr(indptr):
    indptr = np.asarray(indptr)
    if indptr.ndim != 1 or indptr.shape[0] < 1 or not np.issubdtype(indptr.dtype, np.integer):
        raise ValueError("indptr must be a 1-D integer array with at least one entry")
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise ValueError("indptr must start at 0 and never decrease")
    return indptr


cdef class SparseWordCodes:
    """The word codes of a corpus, (nnz, K) as a whole, storing only the non-zero codes.

    Entry j of X (its j-th stored value, documents in order as ``indptr`` says)
    has K codes; those that are not exactly 0 are stored with their topics, one
    block per document. ``SparseWordCodes(indptr, n_topics, value)`` starts every
    code at ``value`` without storing them (the start of a fit); `from_dense`
    and `toarray` convert from and to the dense (nnz, K) array, and
    ``np.asarray`` gives the dense array too. The coding kernel
    (`stc._learning.coding.code_documents`) reads and replaces the codes in place.
    """

    def __cinit__(self, indptr, Py_ssize_t n_topics, double value=0.0):
        cdef Py_ssize_t j
        if n_topics < 1:
            raise ValueError(f"n_topics must be at least 1, got {n_topics}")
        self.indptr = _as_indptr(indptr)
        self.indptr.flags.writeable = False
        self.n_documents = self.indptr.shape[0] - 1
        self.n_entries = int(self.indptr[self.n_documents])
        self.n_topics = n_topics
        self.codes.value = value
        self.codes.rows = <EntryRow*> calloc(max(self.n_entries, 1), sizeof(EntryRow))
        self.codes.blocks = <double**> calloc(max(self.n_documents, 1), sizeof(double*))
        if self.codes.rows == NULL or self.codes.blocks == NULL:
            raise MemoryError("could not allocate the word codes' row index")
        if value != 0.0:  # also NaN: every row holds the value without storing it
            for j in range(self.n_entries):
                self.codes.rows[j].count = CONSTANT_ROW

    def __dealloc__(self):
        cdef Py_ssize_t d
        if self.codes.blocks != NULL:
            for d in range(self.n_documents):
                free(self.codes.blocks[d])
            free(self.codes.blocks)
        free(self.codes.rows)

    cdef CodeRows* writable_rows(self) except NULL:
        if self.dense is not None:
            raise ValueError("a view of dense word codes cannot be coded in place: code the "
                             "dense array itself")
        return &self.codes

    cdef const CodeRows* stored_rows(self) except NULL:
        """The rows with every constant row stored (what the dictionary statistics read)."""
        if has_constant_rows(&self.codes, self.n_entries):
            self.assign(self.toarray())
        return &self.codes

    @classmethod
    def view_of_dense(cls, indptr, codes):
        """The dense C-contiguous float64 (nnz, K) ``codes`` as rows the statistics read, in place.

        No copy: the view keeps ``codes`` alive and reads it as it is (its
        zeros included). It cannot be coded in place or refilled.
        """
        if not (isinstance(codes, np.ndarray) and codes.dtype == np.float64 and codes.ndim == 2
                and codes.flags.c_contiguous):
            raise ValueError("codes must be a C-contiguous float64 (nnz, K) array")
        cdef SparseWordCodes view = cls(indptr, max(codes.shape[1], 1))
        if codes.shape != view.shape:
            raise ValueError(f"codes must have shape {view.shape}, got {codes.shape}")
        cdef const double[:, ::1] rows = codes
        cdef Py_ssize_t j
        for j in range(view.n_entries):
            view.codes.rows[j].values = <double*> &rows[j, 0]
            view.codes.rows[j].count = DENSE_ROW
        view.codes.dense = &rows[0, 0] if view.n_entries > 0 else NULL
        view.dense = codes
        return view

    @property
    def is_view(self):
        """True for a view of dense codes (`view_of_dense`)."""
        return self.dense is not None

    @property
    def shape(self):
        return (self.n_entries, self.n_topics)

    @property
    def value(self):
        """The start value of the rows not coded yet (see the class docstring)."""
        return self.codes.value

    @property
    def counts(self):
        """Non-zero codes per entry (-1 for an entry still at the start value, -2 for a row of
        a view of dense codes): int32 array."""
        out = np.empty(self.n_entries, dtype=np.int32)
        cdef int[::1] out_v = out
        cdef Py_ssize_t j
        for j in range(self.n_entries):
            out_v[j] = self.codes.rows[j].count
        return out

    def count_nonzero(self):
        """Non-zero word codes in all (the K codes of a start-value row count if it is not 0)."""
        if self.dense is not None:
            return int(np.count_nonzero(self.dense))
        counts = self.counts
        return int(np.sum(counts[counts >= 0], dtype=np.int64)
                   + np.count_nonzero(counts < 0) * self.n_topics)

    def zero_fraction(self):
        """The share of the (nnz, K) word codes that are exactly 0."""
        size = self.n_entries * self.n_topics
        return 1.0 - self.count_nonzero() / size if size else 0.0

    @property
    def nbytes(self):
        """Bytes held: the documents' blocks (their capacity) and the index of rows and blocks."""
        cdef Py_ssize_t d, total = 0
        if self.dense is not None:  # the rows are the dense array's
            total = self.dense.nbytes // sizeof(double) - self.n_documents
        for d in range(self.n_documents):
            if self.codes.blocks[d] != NULL:
                total += 1 + <Py_ssize_t> self.codes.blocks[d][0]
        return (total * sizeof(double) + self.n_entries * sizeof(EntryRow)
                + self.n_documents * sizeof(double*))

    def row(self, Py_ssize_t j):
        """The K codes of entry j, dense."""
        if not 0 <= j < self.n_entries:
            raise IndexError(f"entry {j} is out of range for {self.n_entries} entries")
        out = np.zeros(self.n_topics)
        cdef double[::1] out_v = out
        cdef const EntryRow* row = &self.codes.rows[j]
        cdef const int* topics
        cdef Py_ssize_t q
        if row.count == CONSTANT_ROW:
            out[:] = self.codes.value
        elif row.count == DENSE_ROW:
            for q in range(self.n_topics):
                out_v[q] = row.values[q]
        else:
            topics = row_topics(row)
            for q in range(row.count):
                out_v[topics[q]] = row.values[q]
        return out

    def toarray(self, n_jobs=None):
        """The dense (nnz, K) float64 array of the codes."""
        out = np.zeros((self.n_entries, self.n_topics))
        cdef double[:, ::1] out_v = out
        cdef Py_ssize_t j, k, q, n_topics = self.n_topics
        cdef const EntryRow* row
        cdef const int* topics
        cdef double value = self.codes.value
        cdef int n_threads = resolve_n_jobs(n_jobs)
        with nogil:
            for j in prange(self.n_entries, schedule="static", num_threads=n_threads):
                row = &self.codes.rows[j]
                if row.count == CONSTANT_ROW:
                    for k in range(n_topics):
                        out_v[j, k] = value
                elif row.count == DENSE_ROW:
                    for k in range(n_topics):
                        out_v[j, k] = row.values[k]
                else:
                    topics = row_topics(row)
                    for q in range(row.count):
                        out_v[j, topics[q]] = row.values[q]
        return out

    def __array__(self, dtype=None, copy=None):
        out = self.toarray()
        return out if dtype is None else out.astype(dtype, copy=False)

    def assign(self, codes, n_jobs=None):
        """Replace every code by the dense (nnz, K) array ``codes`` (stored sparse)."""
        self.writable_rows()  # not a view
        codes = np.asarray(codes)
        if codes.shape != (self.n_entries, self.n_topics):
            raise ValueError(f"codes must have shape {(self.n_entries, self.n_topics)}, "
                             f"got {codes.shape}")
        cdef const double[:, ::1] codes_v = np.ascontiguousarray(codes, dtype=np.float64)
        cdef const long long[::1] indptr_v = self.indptr
        cdef Py_ssize_t d, start, n_words
        cdef int[::1] failed = np.zeros(1, dtype=np.intc)
        cdef int n_threads = resolve_n_jobs(n_jobs)
        with nogil:
            for d in prange(self.n_documents, schedule="dynamic", chunksize=16,
                            num_threads=n_threads):
                start = indptr_v[d]
                n_words = indptr_v[d + 1] - start
                if n_words > 0 and store_strided(&self.codes, d, start, n_words,
                                                 self.n_topics, &codes_v[start, 0],
                                                 self.n_topics, 1) != 0:
                    failed[0] = 1
        if failed[0]:
            raise MemoryError("could not allocate the sparse word codes")
        return self

    @classmethod
    def from_dense(cls, indptr, codes, n_jobs=None):
        """The sparse word codes of the dense (nnz, K) array ``codes`` (documents: ``indptr``)."""
        codes = np.asarray(codes)
        if codes.ndim != 2:
            raise ValueError(f"codes must be a 2-D (nnz, K) array, got shape {codes.shape}")
        return cls(indptr, codes.shape[1]).assign(codes, n_jobs)

    def gathered(self, order, n_jobs=None, SparseWordCodes out=None):
        """The rows ``order[0], order[1], ...`` as the rows of one block, in that order.

        The dictionary statistics visit the entries term by term; gathered in
        that order once (`stc._learning.dictionary.term_major_codes`), every later pass
        reads its rows in sequence instead of one scattered row per entry.
        ``out``, earlier gathered codes of as many entries, is refilled if its
        block is large enough (fresh memory costs a page fault per 4 KiB).
        """
        if self.dense is not None:
            raise ValueError("a view of dense word codes is read in place, not gathered")
        cdef const EntryRow* rows = self.stored_rows().rows
        order = np.ascontiguousarray(order, dtype=np.intc)
        if order.ndim != 1 or (order.size and (order.min() < 0
                                                 or order.max() >= self.n_entries)):
            raise ValueError(f"order must list entries in [0, {self.n_entries})")
        cdef const int[::1] order_v = order
        cdef Py_ssize_t n = order.shape[0], p
        counts = self.counts[order].astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts + (counts + 1) // 2)])
        cdef const long long[::1] offsets_v = offsets
        cdef SparseWordCodes other = out
        if (other is None or other.n_entries != n or other.n_topics != self.n_topics
                or other.n_documents != 1):
            other = SparseWordCodes(np.array([0, n]), self.n_topics)
        cdef double* block = reserve_rows(&other.codes, 0, offsets[n])
        if block == NULL:
            raise MemoryError("could not allocate the gathered word codes")
        cdef int n_threads = resolve_n_jobs(n_jobs)
        cdef const EntryRow* ahead
        with nogil:
            for p in prange(n, schedule="static", num_threads=n_threads):
                # the rows are scattered: ask for the index and the row ahead
                if p + 16 < n:
                    __builtin_prefetch(&rows[order_v[p + 16]])
                if p + 8 < n:
                    ahead = &rows[order_v[p + 8]]
                    if ahead.count > 0:
                        __builtin_prefetch(ahead.values)
                        __builtin_prefetch(ahead.values + 8)
                other.codes.rows[p].values = block + offsets_v[p]
                other.codes.rows[p].count = rows[order_v[p]].count
                if offsets_v[p + 1] > offsets_v[p]:
                    memcpy(block + offsets_v[p], rows[order_v[p]].values,
                           (offsets_v[p + 1] - offsets_v[p]) * sizeof(double))
        return other

    def copy(self):
        """An independent copy (its own blocks; of a view: the codes stored sparse)."""
        if self.dense is not None:
            return SparseWordCodes.from_dense(self.indptr, self.dense)
        cdef SparseWordCodes other = SparseWordCodes(self.indptr, self.n_topics,
                                                     self.codes.value)
        cdef const long long[::1] indptr = self.indptr
        cdef Py_ssize_t d, j
        cdef double* values
        for d in range(self.n_documents):
            if self.codes.blocks[d] == NULL:
                for j in range(indptr[d], indptr[d + 1]):
                    other.codes.rows[j] = self.codes.rows[j]  # start-value or empty rows
                continue
            values = reserve_rows(&other.codes, d,
                                  stored_doubles(&self.codes, indptr[d], indptr[d + 1]))
            if values == NULL:
                raise MemoryError("could not copy the sparse word codes")
            for j in range(indptr[d], indptr[d + 1]):
                other.codes.rows[j].count = self.codes.rows[j].count
                other.codes.rows[j].values = values
                if self.codes.rows[j].count > 0:
                    memcpy(values, self.codes.rows[j].values,
                           row_doubles(self.codes.rows[j].count) * sizeof(double))
                    values += row_doubles(self.codes.rows[j].count)
        return other

    def __reduce__(self):
        return (_rebuild, (self.indptr, self.n_topics, self.codes.value, self.toarray()))

    def __repr__(self):
        return (f"SparseWordCodes({self.n_entries} entries x {self.n_topics} topics, "
                f"{self.count_nonzero()} non-zero)")


def _rebuild(indptr, n_topics, value, dense):
    # rows still at the start value come back stored (the same codes)
    return SparseWordCodes(indptr, n_topics, value).assign(dense)
