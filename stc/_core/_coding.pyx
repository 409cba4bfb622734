"""Hierarchical sparse coding kernel (paper Sec. 2.3), loss-agnostic and nogil.

For every document d (in parallel, one document per task) it alternates
  * the word-code step: for each topic k, for each observed word n of d, the
    exact minimiser of the 1-D coordinate problem (the loss plugin's
    `_solve_block`, clamped at zero by Proposition 1). Words are
    independent given theta, so the inner loop over words has no dependency
    chain between consecutive updates;
  * the document-code step: theta in closed form from the word codes
    (`theta_update`: truncated averaging, eq. 3, or the l2 form of footnote 3),
    optionally with a linear term b_d . theta in the objective, which is how
    MedSTC's shifted mean enters;
until the relative decrease of the document's objective falls under `tol`.

The per-word loops of a topic's pass run at the vector level that
`stc._simd._dispatch` chose for this CPU, and every level gives the same bits:
the coordinate problems of one topic's words through the loss's `_solve_block`
(the loss owns its vector code), the coupling sums and the means without topic
k and back through `_coding_vectors.h`.

Word codes are kept per observed word, aligned with the CSR non-zeros of X:
row j of `codes` is the code of the j-th stored entry, stored sparse
(`stc._core._word_codes.SparseWordCodes`: its non-zero codes and their
topics) or dense (an (nnz, K) array). While a document is coded, its word codes and the topic weights of its words
live in a per-thread work buffer laid out topic by topic (K x n_words), so
every pass over a topic's words reads contiguous memory and never gathers
from the (K x N) dictionary again.

The coding problem (penalty weights, penalty kinds, tolerances) travels as
one `CodingParams` struct, built from `stc._learning.coding.CodingProblem`. The numpy
reference `stc._core.reference` mirrors every function here under the same
name (tests/test_reference.py holds them together); both read their constants
from `stc._core._constants`.
"""
from cython.parallel cimport parallel, prange
from libc.math cimport INFINITY, NAN, fabs, isfinite
from libc.stdlib cimport free, malloc

from stc._core._word_codes cimport (STORE_SCRATCH, CodeRows, SparseWordCodes, load_rows,
                                    release_free_memory, store_rows)
from stc.losses._base cimport CompiledLoss
from stc._simd._dispatch cimport level_in_use

import numpy as np

from stc._core import _constants
from stc._core._openmp import resolve_n_jobs

cdef int PENALTY_L1 = _constants.PENALTY_L1
cdef int PENALTY_L2 = _constants.PENALTY_L2
cdef double BLOCK_NEWTON_RTOL = _constants.BLOCK_NEWTON_RTOL
cdef double OVERSHOOT_NUDGE = _constants.OVERSHOOT_NUDGE
cdef double MEANS_DRIFT_RTOL = _constants.MEANS_DRIFT_RTOL
cdef double START_VALUE_RTOL = _constants.START_VALUE_RTOL
cdef int START_VALUE_MAX_ITER = _constants.START_VALUE_MAX_ITER
cdef int FAILURE_NONE = _constants.FAILURE_NONE
cdef int FAILURE_SOLVER = _constants.FAILURE_SOLVER
cdef int FAILURE_HESSIAN = _constants.FAILURE_HESSIAN
cdef int FAILURE_LOSS = _constants.FAILURE_LOSS


cdef extern from "_coding_vectors.h":
    void prefetch_row "stc_prefetch_row"(const double* row, Py_ssize_t n) noexcept nogil
    double stc_coupling_slope(int level, Py_ssize_t n, const double* s_k,
                              const double* curvatures, double t, double gamma, double quad,
                              double* curvature, double* code_sum) noexcept nogil
    void stc_remove_topic(int level, Py_ssize_t n, const double* b, const double* s,
                          double* means) noexcept nogil
    void stc_add_topic(int level, Py_ssize_t n, const double* b, const double* s,
                       double* means) noexcept nogil
    int stc_codes_all_zero(int level, Py_ssize_t n, const double* s) noexcept nogil

# The vector level the loops below run at (`stc._simd._dispatch`, read on every call).
cdef const int* simd_level = level_in_use()


cdef inline double coupling_slope(Py_ssize_t n, const double* s_k, const double* curvatures,
                                  double t, double gamma, double quad, double* curvature,
                                  double* code_sum) noexcept nogil:
    """sum_n 2 gamma (t - s_n), its curvature (into ``curvature``) and sum_n s_n."""
    return stc_coupling_slope(simd_level[0], n, s_k, curvatures, t, gamma, quad, curvature,
                              code_sum)


cdef inline void remove_topic(Py_ssize_t n, const double* b, const double* s,
                              double* means) noexcept nogil:
    """means -= b s, clamped at 0 (rounding only: a sum of non-negative terms)."""
    stc_remove_topic(simd_level[0], n, b, s, means)


cdef inline void add_topic(Py_ssize_t n, const double* b, const double* s,
                           double* means) noexcept nogil:
    stc_add_topic(simd_level[0], n, b, s, means)


cdef inline bint codes_all_zero(Py_ssize_t n, const double* s) noexcept nogil:
    """Whether every s_n == 0 (either sign)."""
    return stc_codes_all_zero(simd_level[0], n, s) != 0


def _codes_all_zero(const double[::1] s):
    """`codes_all_zero` of ``s`` at the level in use (for the tests)."""
    return bool(codes_all_zero(s.shape[0], &s[0] if s.shape[0] else NULL))

# Words ahead whose topic weights `load_document` asks the memory for.
cdef Py_ssize_t LOAD_AHEAD = 8


cdef struct LossFailure:
    # The first point of a document where the loss plugin returned NaN from finite
    # arguments (see `note_failure`); the document's coding stops there.
    int kind            # FAILURE_NONE, FAILURE_SOLVER, FAILURE_HESSIAN or FAILURE_LOSS
    Py_ssize_t word     # the word's position in the document
    double y            # its value
    double mean         # the mean where the loss or hessian is NaN (solver: mean_rest)
    double b            # the coordinate problem: beta_kn, the rest of the mean, lin
    double mean_rest
    double lin


cdef struct Document:
    # One document while it is coded, in the coding thread's work buffer.
    Py_ssize_t n_words
    Py_ssize_t n_topics
    const double* y         # its words' counts
    const double* b         # its words' topic weights, topic by topic: b[k * n_words + i]
    double* s               # its word codes, in the same layout
    double* m               # its words' means s_n . beta_n
    double* theta           # its document codes (K)
    const double* linear    # MedSTC's linear term on theta (K), or NULL
    double* scratch         # n_words doubles of work space (word curvatures, exact means)
    double* code_sums       # K doubles of work space: each topic's sum of word codes
    # 2 gamma added once per word in word order: the coupling curvature of a topic whose
    # word codes are all 0 (`solve_topic_words`)
    double flat_curvature


cdef inline Document document_view(Py_ssize_t n_words, Py_ssize_t n_topics, const double* y,
                                   const double* b, double* s, double* m, double* theta,
                                   const double* linear) noexcept nogil:
    """A Document of these arrays, without work space (enough for `document_objective`)."""
    cdef Document doc
    doc.n_words, doc.n_topics = n_words, n_topics
    doc.y, doc.b, doc.s, doc.m, doc.theta, doc.linear = y, b, s, m, theta, linear
    doc.scratch, doc.code_sums = NULL, NULL
    doc.flat_curvature = NAN
    return doc


cdef void note_failure(LossFailure* failure, int kind, Py_ssize_t word, double y, double mean,
                       double b, double mean_rest, double lin) noexcept nogil:
    """Record a NaN from the loss plugin, unless one is recorded or an argument was not finite.

    Codes that ran off to infinity (an unbounded coding problem, e.g. MedSTC's
    shifted mean with the l1 penalty on theta) make NaN from non-finite
    arguments; that is not the loss's failure, and it is left to the callers'
    safeguards as before.
    """
    if failure.kind != FAILURE_NONE:
        return
    if not (isfinite(y) and isfinite(mean) and isfinite(b) and isfinite(mean_rest)
            and isfinite(lin)):
        return
    failure.kind = kind
    failure.word = word
    failure.y = y
    failure.mean = mean
    failure.b = b
    failure.mean_rest = mean_rest
    failure.lin = lin


cdef void find_nan_loss(CompiledLoss loss, Py_ssize_t n_words, const double* y,
                        const double* means, LossFailure* failure) noexcept nogil:
    """After a NaN objective: record the first word whose loss is NaN at a mean inside the domain."""
    cdef Py_ssize_t i
    cdef double value
    for i in range(n_words):
        if means[i] > loss.mean_lower and means[i] < loss.mean_upper:
            value = loss._loss(y[i], means[i])
            if value != value:
                note_failure(failure, FAILURE_LOSS, i, y[i], means[i], 0.0, means[i], 0.0)
                if failure.kind != FAILURE_NONE:
                    return


cdef inline double theta_update(double mean_code, double linear, double n_words,
                                double lam, double gamma, int penalty) noexcept nogil:
    """Minimiser over t >= 0 of  pen(t) + gamma * sum_n (s_nk - t)^2 - linear * t.

    pen(t) = lam * t (l1, eq. 3: truncated averaging) or lam * t^2 (l2,
    footnote 3); mean_code is the average word code s_bar_k over the
    document's n_words observed words. With linear = 0 these are the paper's
    formulas; MedSTC passes its shifted mean's linear term (see
    `stc._learning.supervised.labelled_batch.shifted_mean_term`).
    """
    cdef double t
    if penalty == PENALTY_L1:
        t = mean_code + (linear - lam) / (2.0 * gamma * n_words)
    else:
        t = (2.0 * gamma * n_words * mean_code + linear) / (2.0 * lam + 2.0 * gamma * n_words)
    return t if t > 0.0 else 0.0


cdef double document_objective(CompiledLoss loss, const Document* doc, const CodingParams* p,
                               double* loss_part) noexcept nogil:
    """Objective (2) restricted to one document, minus linear . theta (if linear is not NULL).

    Reads the document's counts, means, word codes, theta and linear term.
    Returns the objective and stores its loss part in ``loss_part``.
    """
    cdef Py_ssize_t n_words = doc.n_words, n_topics = doc.n_topics, i, k
    cdef const double* y = doc.y
    cdef const double* means = doc.m
    cdef const double* s = doc.s
    cdef const double* theta = doc.theta
    cdef const double* linear = doc.linear
    cdef double reconstruction = 0.0, coupling = 0.0, code_pen = 0.0, doc_pen = 0.0
    cdef double shift = 0.0
    cdef double diff, x, t
    cdef const double* s_k
    for i in range(n_words):
        reconstruction += loss._loss(y[i], means[i])
    for k in range(n_topics):
        s_k = s + k * n_words
        t = theta[k]
        if t == 0.0 and (linear == NULL or isfinite(linear[k])) and codes_all_zero(
                n_words, s_k):
            continue  # every term below is 0, which leaves each sum's bits as they are
        for i in range(n_words):
            x = s_k[i]
            diff = x - t
            coupling += diff * diff
            code_pen += x if p.code_penalty == PENALTY_L1 else x * x
        doc_pen += t if p.theta_penalty == PENALTY_L1 else t * t
        if linear != NULL:
            shift += linear[k] * t
    loss_part[0] = reconstruction
    return reconstruction + p.gamma * coupling + p.rho * code_pen + p.lam * doc_pen - shift


cdef double objective_at_codes(CompiledLoss loss, const CodingParams* p, const double* beta_t,
                               Py_ssize_t n_topics, const int* words, Py_ssize_t n_words,
                               const double* y, double* work, double* loss_part) noexcept nogil:
    """`document_objective` of a document at the codes in ``work`` (for `_segments`).

    ``work`` holds (2 K + 1) n_words + K doubles: its word codes (K x n_words,
    topic by topic) then theta (at offset (2 K + 1) n_words), as
    `segment_objectives` writes them; the rest is overwritten (the topic
    weights of its words and their means).
    """
    cdef double* s = work
    cdef double* b = work + n_topics * n_words
    cdef double* m = work + 2 * n_topics * n_words
    cdef Document doc
    load_document(beta_t, n_topics, words, n_words, b)
    exact_means(s, b, n_words, n_topics, m)
    doc = document_view(n_words, n_topics, y, b, s, m, m + n_words, NULL)
    return document_objective(loss, &doc, p, loss_part)


cdef inline double solve_topic_words(CompiledLoss loss, const Document* doc, Py_ssize_t k,
                                     double t, double quad, double rho_lin, double gamma,
                                     double* curvature, LossFailure* failure) noexcept nogil:
    """Word-code step of topic k with theta_k = t: every word independently.

    The document's means hold the rest of each word's mean (all topics but
    k); its scratch receives the words' curvatures. Returns
    sum_n 2 gamma (t - s_nk) (the coupling part of the derivative in t of the
    block objective) and, in ``curvature``, the matching part of its second
    derivative, using ds_nk/dt = 2 gamma / (b^2 l'' + 2 quad) for s_nk > 0;
    the topic's code sum receives sum_n s_nk (in word order, what
    `theta_update` reads). A NaN code or curvature is recorded in ``failure``
    (see `note_failure`).
    """
    cdef Py_ssize_t n_words = doc.n_words
    cdef const double* y = doc.y
    cdef const double* b = doc.b + k * n_words
    cdef double* s_k = doc.s + k * n_words
    cdef const double* rests = doc.m
    cdef double* scratch = doc.scratch
    cdef double* code_sum = &doc.code_sums[k]
    cdef double slope, curv, lin = rho_lin - 2.0 * gamma * t
    loss._solve_block(n_words, y, b, rests, quad, lin, s_k, scratch)
    if t == 0.0 and codes_all_zero(n_words, s_k):
        # Most topics of a document (theta_k = 0, no word using them): every term of the
        # slope and code sums is 0 and every curvature term 2 gamma, so the sums are
        # known without their chains of additions (the same bits).
        code_sum[0] = 0.0
        curvature[0] = doc.flat_curvature
        return 0.0
    slope = coupling_slope(n_words, s_k, scratch, t, gamma, quad, &curv, code_sum)
    # A NaN code makes the slope NaN, a NaN curvature of a positive code the
    # curvature: only then look for the word (kept out of the hot loop).
    if slope != slope or curv != curv:
        find_nan_code(loss, n_words, y, b, s_k, rests, scratch, lin, failure)
    curvature[0] = curv
    return slope


cdef void find_nan_code(CompiledLoss loss, Py_ssize_t n_words, const double* y,
                        const double* b, const double* s_k, const double* rests,
                        const double* scratch, double lin, LossFailure* failure) noexcept nogil:
    """Record the first word of a topic whose code, or its curvature, the loss made NaN."""
    cdef Py_ssize_t i
    cdef double x, at, value
    for i in range(n_words):
        x = s_k[i]
        if x != x:
            note_failure(failure, FAILURE_SOLVER, i, y[i], rests[i], b[i], rests[i], lin)
        elif x > 0.0 and scratch[i] != scratch[i]:
            # the loss's own NaN (not 0 * inf from a zero topic weight)
            at = rests[i] + b[i] * x
            if at > loss.mean_lower and at < loss.mean_upper:
                value = loss._hessian(y[i], at)
                if value != value:
                    note_failure(failure, FAILURE_HESSIAN, i, y[i], at, b[i], rests[i], lin)


cdef inline double theta_newton_step(double t, double slope, double curvature, bint overshot,
                                     double* low, double* high) noexcept nogil:
    """`update_topic_block`'s next theta_k: a Newton step from t, kept inside [low, high].

    The slope's sign at t moves one end of the bracket [low, high] of the
    minimiser to t. ``overshot``: t is past the minimiser (the slope changed
    sign since the start).
    """
    cdef double t_new
    if slope > 0.0:
        high[0] = t
    else:
        low[0] = t
    t_new = t - slope / curvature
    if overshot:
        # Aim a little short of the minimiser, back on the start's side, where
        # a close point is accepted (see BLOCK_NEWTON_RTOL).
        t_new = t - (1.0 + OVERSHOOT_NUDGE) * slope / curvature
    if t_new <= 0.0 and low[0] == 0.0 and t > 0.0:
        t_new = 0.0  # try the boundary itself: theta_k = 0 is often optimal
    elif t_new < low[0] or t_new > high[0]:
        t_new = 0.5 * (low[0] + high[0]) if high[0] < INFINITY else 2.0 * low[0] + 1.0
    return t_new


cdef int update_topic_block(CompiledLoss loss, Document* doc, Py_ssize_t k, double quad,
                            double rho_lin, const CodingParams* p,
                            LossFailure* failure) noexcept nogil:
    """Update the codes of topic k: word codes s_.k, and theta_k by up to `newton_steps`.

    With newton_steps = 0 this is the paper's word-code step for topic k
    (theta fixed). Otherwise theta_k moves too, by safeguarded Newton steps on
    phi(t) = min over s_.k of the document objective with theta_k = t, which
    is convex; its derivative is pen'(t) - linear_k + sum_n 2 gamma (t - s_nk(t)).
    Moving theta_k together with its word codes removes the slow drift of the
    plain alternation, which shifts their common level by only about
    rho / (2 gamma) per sweep. The result never has a larger phi than the
    start: it is either (numerically) the minimiser or a point between the
    start and the minimiser. The topic's code sum receives the sum of the
    final word codes. Returns at once when the loss plugin fails (``failure``), leaving
    the codes and means as they are.
    """
    cdef Py_ssize_t n_words = doc.n_words
    cdef const double* b = doc.b + k * n_words
    cdef double* s_k = doc.s + k * n_words
    cdef double* means = doc.m
    cdef double linear_k = doc.linear[k] if doc.linear != NULL else 0.0
    cdef double t = doc.theta[k], t_new, slope = 0.0, curvature, start_slope = 0.0
    cdef double low = 0.0, high = INFINITY, pen_slope, pen_curv
    cdef double safe_t = t
    cdef int step
    cdef bint converged = False
    cdef int passes = 0
    cdef double lam = p.lam, gamma = p.gamma
    cdef int theta_penalty = p.theta_penalty, newton_steps = p.newton_steps
    # Hold the rest of each word's mean (all topics but k) in `means`.
    remove_topic(n_words, b, s_k, means)
    for step in range(newton_steps + 1):
        slope = solve_topic_words(loss, doc, k, t, quad, rho_lin, gamma, &curvature, failure)
        passes += 1
        if failure.kind != FAILURE_NONE:
            return passes
        if theta_penalty == PENALTY_L1:
            pen_slope, pen_curv = lam, 0.0
        else:
            pen_slope, pen_curv = 2.0 * lam * t, 2.0 * lam
        slope += pen_slope - linear_k
        curvature += pen_curv
        if fabs(slope) <= 1e-10 * t * curvature:
            converged = True  # the Newton step would be below rounding level
            break
        if fabs(slope) <= BLOCK_NEWTON_RTOL * t * curvature and (
                step == 0 or (slope > 0.0) == (start_slope > 0.0)):
            # Close enough, and between the start and the minimiser, where
            # phi is at most its start value (convexity): stop here.
            converged = True
            break
        if step == newton_steps:
            break
        if step == 0:
            start_slope = slope
        if slope == 0.0 or (t == 0.0 and slope > 0.0):
            converged = True  # stationary, or optimal on the boundary t = 0
            break
        if (slope > 0.0) == (start_slope > 0.0):
            safe_t = t  # still on the start's side of the minimiser
        t_new = theta_newton_step(t, slope, curvature,
                                  step > 0 and (slope > 0.0) != (start_slope > 0.0), &low, &high)
        if fabs(t_new - t) <= 1e-10 * t:
            converged = True
            break
        t = t_new
    if newton_steps > 0 and not converged and t != safe_t and (
            (slope > 0.0) != (start_slope > 0.0)):
        # Stopped past the minimiser: phi may exceed its start value there,
        # so fall back to the last point on the start's side (phi <= start).
        t = safe_t
        solve_topic_words(loss, doc, k, t, quad, rho_lin, gamma, &curvature, failure)
        passes += 1
        if failure.kind != FAILURE_NONE:
            return passes
    doc.theta[k] = t
    add_topic(n_words, b, s_k, means)
    return passes



cdef double common_start_value(CompiledLoss loss, Py_ssize_t n_words, Py_ssize_t n_topics,
                               const double* y, const double* b, double* column_sums,
                               const double* linear, const CodingParams* p) noexcept nogil:
    """The best single value c for all codes of a new document (word and document codes alike).

    With every code equal to c the coupling vanishes and the objective is
    g(c) = sum_n l(y_n, c B_n) + lam K pen(c) + rho n K pen(c) - c sum_k linear_k,
    with B_n = sum_k beta_kn: convex in c. A few safeguarded Newton steps (to
    START_VALUE_RTOL; it is only a start) give its minimiser, a far better
    start for coding a new document than a fixed value when the penalties
    are large. ``column_sums`` is scratch of n_words doubles (receives B).
    """
    cdef Py_ssize_t i, k
    cdef double largest = 0.0, low = 0.0, high = INFINITY, c = 1.0, g, h, mean, step
    cdef double n_codes = <double> (n_words * n_topics), shift = 0.0
    cdef double lam = p.lam, rho = p.rho
    cdef int it
    for i in range(n_words):
        column_sums[i] = 0.0
    for k in range(n_topics):
        for i in range(n_words):
            column_sums[i] += b[k * n_words + i]
        if linear != NULL:
            shift += linear[k]
    for i in range(n_words):
        if column_sums[i] > largest:
            largest = column_sums[i]
    if largest <= 0.0:
        return 1.0
    if loss.mean_upper < INFINITY:
        high = 0.5 * loss.mean_upper / largest  # keep every mean inside the domain
        c = 0.5 * high
    for it in range(START_VALUE_MAX_ITER):
        g = -shift
        h = 0.0
        for i in range(n_words):
            mean = c * column_sums[i]
            g += column_sums[i] * loss._gradient(y[i], mean)
            h += column_sums[i] * column_sums[i] * loss._hessian(y[i], mean)
        if p.theta_penalty == PENALTY_L1:
            g += lam * n_topics
        else:
            g += 2.0 * lam * n_topics * c
            h += 2.0 * lam * n_topics
        if p.code_penalty == PENALTY_L1:
            g += rho * n_codes
        else:
            g += 2.0 * rho * n_codes * c
            h += 2.0 * rho * n_codes
        if not (g == g):  # NaN: a derivative the loss does not provide
            return 1.0 if high == INFINITY else 0.5 * high
        if g > 0.0:
            high = c
        else:
            low = c
        step = c - g / h if h > 0.0 else -1.0
        if not (step > low and step < high):
            step = 0.5 * (low + high) if high < INFINITY else 2.0 * c
        if fabs(step - c) <= START_VALUE_RTOL * c:
            return step
        c = step
    return c


cdef struct DocumentResult:
    double objective     # objective (2) of the document at its final codes (minus linear . theta)
    double loss_part     # its reconstruction loss
    double start_objective
    double start_loss
    int n_iter           # sweeps made
    long long passes     # passes over the document's words, all topics (word-code updates / n_words)
    bint out_of_memory   # its sparse codes could not be stored (they are left as they were)
    LossFailure failure  # where the loss plugin returned NaN, if it did (coding stopped there)


cdef struct CorpusView:
    # The documents and the topics, as the kernel reads them.
    const int* indptr        # CSR X: document d's entries are indptr[d] .. indptr[d + 1]
    const int* indices       # their terms
    const double* data       # their values
    const double* beta_t     # the dictionary transposed, (n_features, K), C-contiguous
    Py_ssize_t n_topics


cdef struct CodeStore:
    # Where the word codes are read from and written to: the dense (nnz, K) array, the
    # sparse rows (`SparseWordCodes`), or neither (new documents whose codes are not kept).
    double* dense
    CodeRows* sparse


cdef struct CallInputs:
    # What one call adds to every document's coding problem.
    const double* theta_linear   # (n_docs, K) or NULL: - b_d . theta_d (MedSTC's shifted mean)
    const unsigned char* active  # n_docs or NULL: a document with 0 is not swept
    double* start_means          # nnz or NULL: receives the means of the start codes
    bint warm                    # start from the stored codes, else from the common start value
    bint with_start              # evaluate the objective at the start of a one-sweep call


cdef inline void load_document(const double* beta_t, Py_ssize_t n_topics, const int* words,
                               Py_ssize_t n_words, double* b) noexcept nogil:
    """Gather the topic weights of the document's words into b, topic by topic.

    ``beta_t`` is the dictionary transposed, (N, K): a word's K weights are
    contiguous, a few cache lines per word, where the (K, N) layout costs one
    cache miss per weight.
    """
    cdef Py_ssize_t i = 0, k, q
    cdef const double* row
    cdef const double* rows[4]
    cdef double* out
    while i + 4 <= n_words:
        # four words at a time: each topic's four weights go to one place in b (one
        # cache line written where one word at a time writes K of them per word)
        for q in range(4):
            if i + q + LOAD_AHEAD < n_words:
                # the rows are scattered over the whole dictionary: ask for one early
                prefetch_row(beta_t + words[i + q + LOAD_AHEAD] * n_topics, n_topics)
            rows[q] = beta_t + words[i + q] * n_topics
        for k in range(n_topics):
            out = b + k * n_words + i
            out[0] = rows[0][k]
            out[1] = rows[1][k]
            out[2] = rows[2][k]
            out[3] = rows[3][k]
        i += 4
    while i < n_words:
        row = beta_t + words[i] * n_topics
        for k in range(n_topics):
            b[k * n_words + i] = row[k]
        i += 1


cdef inline void exact_means(const double* s, const double* b, Py_ssize_t n_words,
                             Py_ssize_t n_topics, double* means) noexcept nogil:
    """means[i] = sum_k s[k, i] b[k, i], summed in topic order (as `word_means` does).

    Topic by topic over all words (`add_topic`, at the vector level in use):
    every word's sum gets its terms in the same order as a word-by-word loop
    would add them (the same bits), while the passes read the topic-major
    buffers in sequence.
    """
    cdef Py_ssize_t i, k
    for i in range(n_words):
        means[i] = 0.0
    for k in range(n_topics):
        add_topic(n_words, b + k * n_words, s + k * n_words, means)


cdef void sweep_document(CompiledLoss loss, Document* doc, const CodingParams* p, int max_iter,
                         bint with_start, DocumentResult* out) noexcept nogil:
    """Coordinate sweeps over one document until its objective stops decreasing.

    Each sweep updates the word codes topic by topic (every word
    independently, each topic's theta_k optionally moving with them, see
    `update_topic_block`), then theta in closed form (`theta_update`).
    The document's means are its running means, kept up to date.
    Stops at once when the loss plugin returns NaN from finite arguments
    (``out.failure``; the objective is then NaN). The objective at the start
    codes is needed for the stopping rule, and reported; a single sweep whose
    caller does not need it (``with_start`` false) skips it and reports NaN.
    """
    cdef Py_ssize_t n_words = doc.n_words, k
    cdef const double* linear = doc.linear
    cdef double quad, rho_lin, previous, current, loss_part
    cdef int it = 0
    # Coordinate problem: l(y, rest + b x) + quad x^2 + lin x, see CompiledLoss.
    quad = p.gamma + (p.rho if p.code_penalty == PENALTY_L2 else 0.0)
    rho_lin = p.rho if p.code_penalty == PENALTY_L1 else 0.0
    if with_start or max_iter != 1:
        previous = document_objective(loss, doc, p, &loss_part)
        if previous != previous:
            find_nan_loss(loss, n_words, doc.y, doc.m, &out.failure)
    else:
        previous = NAN
        loss_part = NAN
    out.start_objective = previous
    out.start_loss = loss_part
    current = previous
    while it < max_iter and out.failure.kind == FAILURE_NONE:
        it += 1
        for k in range(doc.n_topics):
            out.passes += update_topic_block(loss, doc, k, quad, rho_lin, p, &out.failure)
            if out.failure.kind != FAILURE_NONE:
                break
        if out.failure.kind != FAILURE_NONE:
            current = NAN
            break
        for k in range(doc.n_topics):
            doc.theta[k] = theta_update(doc.code_sums[k] / n_words,
                                        linear[k] if linear != NULL else 0.0,
                                        <double> n_words, p.lam, p.gamma, p.theta_penalty)
        current = document_objective(loss, doc, p, &loss_part)
        if current != current:
            find_nan_loss(loss, n_words, doc.y, doc.m, &out.failure)
            if out.failure.kind != FAILURE_NONE:
                break
        if previous - current <= p.tol * fabs(previous):
            break
        previous = current
    out.objective = current
    out.loss_part = loss_part
    out.n_iter = it


cdef void refresh_means(CompiledLoss loss, Document* doc, const CodingParams* p,
                        DocumentResult* out) noexcept nogil:
    """Replace the running means by exact ones (for the dictionary step).

    They are summed in the same order as `word_means`. Where the running
    means drifted from the exact ones (codes that grew huge and came back,
    e.g. under an unbounded supervised shift), the objective computed from
    them is wrong too: recompute it from the exact means (summed into the
    document's scratch).
    """
    cdef Py_ssize_t n_words = doc.n_words, i
    cdef double* m = doc.m
    cdef double* exact = doc.scratch
    cdef bint drifted = False
    exact_means(doc.s, doc.b, n_words, doc.n_topics, exact)
    for i in range(n_words):
        if not fabs(exact[i] - m[i]) <= MEANS_DRIFT_RTOL * exact[i]:  # also NaN
            drifted = True
        m[i] = exact[i]
    if drifted:
        out.objective = document_objective(loss, doc, p, &out.loss_part)


cdef void start_codes(CompiledLoss loss, const CorpusView* corpus, const CodeStore* store,
                      const CallInputs* call, const CodingParams* p, Py_ssize_t d,
                      double* theta_d, double* s, const double* b, double* scratch) noexcept nogil:
    """Put document d's start codes in s (topic by topic) and theta_d.

    Warm: the stored codes (theta_d holds the document's codes already).
    Otherwise every code, word and document, starts at the document's
    `common_start_value`; ``scratch`` holds n_words doubles.
    """
    cdef Py_ssize_t start = corpus.indptr[d], n_words = corpus.indptr[d + 1] - start
    cdef Py_ssize_t n_topics = corpus.n_topics, i, k
    cdef double value
    cdef const double* linear = (call.theta_linear + d * n_topics
                                 if call.theta_linear != NULL else NULL)
    if call.warm and store.sparse != NULL:
        load_rows(store.sparse, start, n_words, n_topics, s)
    elif call.warm:
        # entry by entry: each row of the codes is read in sequence (s is in cache)
        for i in range(n_words):
            for k in range(n_topics):
                s[k * n_words + i] = store.dense[(start + i) * n_topics + k]
    else:
        value = common_start_value(loss, n_words, n_topics, &corpus.data[start], b, scratch,
                                   linear, p)
        for k in range(n_topics):
            for i in range(n_words):
                s[k * n_words + i] = value
            theta_d[k] = value


cdef void code_one_document(CompiledLoss loss, const CorpusView* corpus, CodeStore* store,
                            const CallInputs* call, const CodingParams* p, Py_ssize_t d,
                            double* theta_d, double* means, double* work,
                            DocumentResult* out) noexcept nogil:
    """Code document d from its start codes (`start_codes`) and store the result.

    ``work`` holds at least (2 K + 1) n_words + K doubles: the word codes s
    and the topic weights b of the document's words, both topic by topic,
    scratch for one topic's word curvatures, and each topic's sum of word
    codes; from the curvature scratch on, at least `STORE_SCRATCH` doubles.
    ``means`` (the corpus's nnz entries) receives the exact means of the final
    codes. A document that ``call.active`` leaves out is not swept: only its
    means and objective are computed at its current codes.
    """
    cdef Py_ssize_t start = corpus.indptr[d], n_words = corpus.indptr[d + 1] - start
    cdef Py_ssize_t n_topics = corpus.n_topics, i, k
    cdef double* s = work
    cdef double* b = work + n_topics * n_words
    cdef double* scratch = work + 2 * n_topics * n_words
    cdef double* m = &means[start]
    cdef int max_iter = p.max_iter if call.active == NULL or call.active[d] else 0
    cdef Document doc = document_view(n_words, n_topics, &corpus.data[start], b, s, m, theta_d,
                                      call.theta_linear + d * n_topics
                                      if call.theta_linear != NULL else NULL)
    out.objective = 0.0
    out.loss_part = 0.0
    out.start_objective = 0.0
    out.start_loss = 0.0
    out.n_iter = 0
    out.passes = 0
    out.out_of_memory = False
    out.failure.kind = FAILURE_NONE
    if n_words == 0:
        for k in range(n_topics):
            theta_d[k] = 0.0
        return
    load_document(corpus.beta_t, n_topics, &corpus.indices[start], n_words, b)
    start_codes(loss, corpus, store, call, p, d, theta_d, s, b, m)
    exact_means(s, b, n_words, n_topics, m)
    if call.start_means != NULL:
        for i in range(n_words):
            call.start_means[start + i] = m[i]
    doc.scratch, doc.code_sums = scratch, work + (2 * n_topics + 1) * n_words
    doc.flat_curvature = 0.0
    for i in range(n_words):
        doc.flat_curvature += 2.0 * p.gamma  # in word order, as `coupling_slope` adds
    sweep_document(loss, &doc, p, max_iter, call.with_start, out)
    if out.failure.kind != FAILURE_NONE:
        return  # the caller raises; the codes are left as they are
    refresh_means(loss, &doc, p, out)
    if store.sparse != NULL:
        # the curvature scratch and what follows it are free now
        out.out_of_memory = store_rows(store.sparse, d, start, n_words, n_topics, s,
                                       scratch) != 0
    elif store.dense != NULL:
        for i in range(n_words):
            for k in range(n_topics):
                store.dense[(start + i) * n_topics + k] = s[k * n_words + i]


cdef CallInputs plain_call(bint warm, bint with_start) noexcept:
    """A call that adds nothing to the documents' problems (no shift, every document swept)."""
    cdef CallInputs call
    call.theta_linear = NULL
    call.active = NULL
    call.start_means = NULL
    call.warm = warm
    call.with_start = with_start
    return call


cdef CorpusView corpus_view(X, const double[:, ::1] beta_t) except *:
    """The kernel's view of CSR ``X`` (int32 indices) and the transposed dictionary."""
    cdef const int[::1] indptr = X.indptr
    cdef const int[::1] indices = X.indices
    cdef const double[::1] data = X.data
    cdef CorpusView view
    if beta_t.shape[0] < X.shape[1]:
        raise ValueError(f"beta_t must have a row per term of X ({X.shape[1]}), "
                         f"got {beta_t.shape[0]}")
    view.indptr = &indptr[0]
    view.indices = &indices[0] if indices.shape[0] > 0 else NULL
    view.data = &data[0] if data.shape[0] > 0 else NULL
    view.beta_t = &beta_t[0, 0] if beta_t.shape[0] > 0 else NULL
    view.n_topics = beta_t.shape[1]
    return view


cdef CodeStore code_store(codes, X, Py_ssize_t n_topics) except *:
    """The `CodeStore` of ``codes``: None, a dense (nnz, K) array or `SparseWordCodes`."""
    cdef CodeStore store
    cdef double[:, ::1] dense
    store.dense = NULL
    store.sparse = NULL
    if isinstance(codes, SparseWordCodes):
        if codes.shape != (X.nnz, n_topics) or not np.array_equal(codes.indptr, X.indptr):
            raise ValueError(f"codes must hold the word codes of X's documents with "
                             f"{n_topics} topics")
        store.sparse = (<SparseWordCodes> codes).writable_rows()
    elif codes is not None:
        dense = codes
        if dense.shape[0] != X.nnz or dense.shape[1] != n_topics:
            raise ValueError(f"codes must have shape ({X.nnz}, {n_topics})")
        store.dense = &dense[0, 0] if X.nnz > 0 else NULL
    return store


cdef tuple code_corpus(CompiledLoss loss, CodingParams params, X, const double[:, ::1] beta_t,
                       CodeStore store, double[:, ::1] theta, double[::1] means,
                       CallInputs call, n_jobs):
    """Code every document in parallel; the shared body of the entry points below.

    Returns the per-document arrays and, last, None or a dict describing where
    the loss plugin failed (the document with the lowest index among those
    that failed; each failing document stops at once, the others are coded
    as usual, so the report does not depend on the thread count).
    """
    cdef CorpusView corpus = corpus_view(X, beta_t)
    cdef Py_ssize_t n_docs = X.shape[0], n_topics = corpus.n_topics, d, k
    cdef int n_threads = resolve_n_jobs(n_jobs)
    if theta.shape[0] != n_docs or theta.shape[1] != n_topics:
        raise ValueError(f"theta must have shape ({n_docs}, {n_topics})")
    if means.shape[0] != X.nnz:
        raise ValueError(f"means must have one entry per stored entry of X ({X.nnz})")
    objective = np.zeros(n_docs, dtype=np.float64)
    loss_part = np.zeros(n_docs, dtype=np.float64)
    start = np.zeros((n_docs, 2), dtype=np.float64)
    n_iter = np.zeros(n_docs, dtype=np.intc)
    passes = np.zeros(n_docs, dtype=np.int64)
    failure_kind = np.zeros(n_docs, dtype=np.intc)
    failure_word = np.zeros(n_docs, dtype=np.intp)
    failure_values = np.zeros((n_docs, 5), dtype=np.float64)
    cdef int[::1] failure_kind_v = failure_kind
    cdef Py_ssize_t[::1] failure_word_v = failure_word
    cdef double[:, ::1] failure_values_v = failure_values
    cdef double[::1] objective_v = objective, loss_v = loss_part
    cdef double[:, ::1] start_v = start
    cdef int[::1] n_iter_v = n_iter
    cdef long long[::1] passes_v = passes
    cdef const int[::1] indptr = X.indptr
    longest = int(np.max(np.diff(X.indptr))) if n_docs > 0 else 0
    # the last 2 K n_words + K doubles also serve as `store_rows`' scratch
    cdef size_t work_size = ((2 * n_topics * max(longest, 1)
                              + max(STORE_SCRATCH(longest, n_topics), longest + n_topics))
                             * sizeof(double))
    # NULL until each thread allocates its own (and no compiler warning of an unset copy)
    cdef double* work = NULL
    cdef DocumentResult* result = NULL
    cdef int[::1] failed = np.zeros(2, dtype=np.intc)  # work space, sparse codes
    with nogil, parallel(num_threads=n_threads):
        # Per-thread buffers (assigned inside the parallel block: thread-private).
        work = <double*> malloc(work_size)
        result = <DocumentResult*> malloc(sizeof(DocumentResult))
        if work == NULL or result == NULL:
            failed[0] = 1
        for d in prange(n_docs, schedule="dynamic", chunksize=8):
            if work == NULL or result == NULL:
                continue
            code_one_document(loss, &corpus, &store, &call, &params, d, &theta[d, 0],
                              &means[0] if indptr[n_docs] > 0 else NULL, work, result)
            if result[0].out_of_memory:
                failed[1] = 1
            objective_v[d] = result[0].objective
            loss_v[d] = result[0].loss_part
            start_v[d, 0] = result[0].start_objective
            start_v[d, 1] = result[0].start_loss
            n_iter_v[d] = result[0].n_iter
            passes_v[d] = result[0].passes
            failure_kind_v[d] = result[0].failure.kind
            if result[0].failure.kind != FAILURE_NONE:
                failure_word_v[d] = result[0].failure.word
                failure_values_v[d, 0] = result[0].failure.y
                failure_values_v[d, 1] = result[0].failure.mean
                failure_values_v[d, 2] = result[0].failure.b
                failure_values_v[d, 3] = result[0].failure.mean_rest
                failure_values_v[d, 4] = result[0].failure.lin
        free(work)
        free(result)
    if store.sparse != NULL:
        release_free_memory()  # what shrunken blocks freed (see `reserve_rows`)
    if failed[0]:
        raise MemoryError(f"could not allocate {work_size} bytes of coding work space per thread")
    if failed[1]:
        raise MemoryError("could not store the sparse word codes (some documents keep their "
                          "old codes)")
    return (objective, loss_part, n_iter, passes, start,
            first_failure(failure_kind, failure_word, failure_values, X, params))


cdef dict first_failure(failure_kind, failure_word, failure_values, X, CodingParams params):
    """The first document where the loss plugin failed, as `code_corpus` reports it (or None)."""
    broken = np.flatnonzero(failure_kind)
    if not broken.size:
        return None
    d = int(broken[0])
    y_, mean_, b_, rest_, lin_ = (float(v) for v in failure_values[d])
    return dict(kind=int(failure_kind[d]), document=d,
                entry=int(X.indptr[d]) + int(failure_word[d]), y=y_, mean=mean_, b=b_,
                mean_rest=rest_, lin=lin_,
                quad=params.gamma + (params.rho if params.code_penalty == PENALTY_L2 else 0.0),
                n_documents=int(broken.size))


def code_documents(CompiledLoss loss, CodingParams params, X, const double[:, ::1] beta_t,
                   codes, double[:, ::1] theta, double[::1] means, n_jobs=None,
                   bint with_start=True):
    """Code every document of CSR ``X`` in place, warm-started from ``codes`` and ``theta``.

    ``X`` has int32 indices; ``beta_t`` is the dictionary transposed,
    (n_features, n_topics) and C-contiguous (see `load_document`); the
    callers keep it while the topics stay the same. ``codes`` holds the word
    codes, a dense (nnz, n_topics) array or `SparseWordCodes`; ``theta`` the
    (n_docs, n_topics) document codes; ``means`` (nnz) receives the means
    s_j . beta[:, n_j]. Returns per-document arrays (objective, loss part,
    sweeps, passes over the words, objective and loss part at the start codes
    as (n_docs, 2)) and None, or a dict saying where the loss plugin returned
    NaN from finite arguments (kind: a `_constants` FAILURE_* code, document,
    entry of X, y, mean, and the coordinate problem b, mean_rest, quad, lin);
    a failing document stops at once, with NaN objective. Without
    ``with_start``, a call of one sweep (params.max_iter 1) does not evaluate
    the objective at the start codes: the start values are NaN.
    """
    return code_corpus(loss, params, X, beta_t, code_store(codes, X, beta_t.shape[1]), theta,
                       means, plain_call(True, with_start), n_jobs)


def code_shifted_documents(CompiledLoss loss, CodingParams params, X,
                           const double[:, ::1] beta_t, codes, double[:, ::1] theta,
                           double[::1] means, shift, n_jobs=None):
    """`code_documents` with MedSTC's shifted mean: - b_d . theta_d added to each document.

    ``shift`` is a `stc._learning.coding.ShiftedMean` with
    ``theta_linear``, None or (n_docs, K) b; ``active``, None or a uint8 array of
    n_docs (a document with 0 is not swept: its means, objective and start
    values are those of its current codes); ``start_means``, None or a
    float64 array like ``means`` that receives the means of the start codes
    (the other end of MedSTC's backtracking segments); ``with_start``.
    """
    cdef Py_ssize_t n_docs = X.shape[0]
    cdef const double[:, ::1] linear
    cdef const unsigned char[::1] active
    cdef double[::1] start_means
    cdef CallInputs call = plain_call(True, shift.with_start)
    if shift.theta_linear is not None:
        linear = shift.theta_linear
        if linear.shape[0] != n_docs or linear.shape[1] != beta_t.shape[1]:
            raise ValueError(f"theta_linear must have shape ({n_docs}, {beta_t.shape[1]})")
        call.theta_linear = &linear[0, 0] if n_docs > 0 else NULL
    if shift.active is not None:
        active = shift.active
        if active.shape[0] != n_docs:
            raise ValueError(f"active must have one entry per document ({n_docs})")
        call.active = &active[0] if n_docs > 0 else NULL
    if shift.start_means is not None:
        start_means = shift.start_means
        if start_means.shape[0] != means.shape[0]:
            raise ValueError(f"start_means must have one entry per stored entry "
                             f"({means.shape[0]})")
        call.start_means = &start_means[0] if means.shape[0] > 0 else NULL
    return code_corpus(loss, params, X, beta_t, code_store(codes, X, beta_t.shape[1]), theta,
                       means, call, n_jobs)


def code_new_documents(CompiledLoss loss, CodingParams params, X,
                       const double[:, ::1] beta_t, codes, double[:, ::1] theta,
                       double[::1] means, n_jobs=None):
    """Code every document from scratch: each starts with all codes at its common start value.

    ``codes`` is None (the word codes are not kept: coding new documents
    needs only theta), or a dense (nnz, n_topics) array or `SparseWordCodes`
    that receives them. Takes and returns the same as `code_documents`.
    """
    return code_corpus(loss, params, X, beta_t, code_store(codes, X, beta_t.shape[1]), theta,
                       means, plain_call(False, True), n_jobs)


def theta_from_codes(double mean_code, double linear, double n_words, double lam,
                     double gamma, int penalty):
    """Python access to `theta_update` (for tests)."""
    return theta_update(mean_code, linear, n_words, lam, gamma, penalty)
