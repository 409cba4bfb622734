"""Hierarchical sparse coding kernel (paper Sec. 2.3), loss-agnostic and nogil.

For every document d (in parallel, one document per task) it alternates
  * the word-code step: for each topic k, for each observed word n of d, the
    exact minimiser of the 1-D coordinate problem (the loss plugin's
    `_solve_coordinate`, clamped at zero by Proposition 1). Words are
    independent given theta, so the inner loop over words has no dependency
    chain between consecutive updates;
  * the document-code step: theta in closed form from the word codes
    (`theta_update`: truncated averaging, eq. 3, or the l2 form of footnote 3),
    optionally with a linear term b_d . theta in the objective, which is how
    MedSTC's shifted mean enters;
until the relative decrease of the document's objective falls under `tol`.

Word codes are stored densely per observed word, aligned with the CSR
non-zeros of X: row j of `codes` is the code of the j-th stored entry.
While a document is coded, its word codes and the topic weights of its words
live in a per-thread work buffer laid out topic by topic (K x n_words), so
every pass over a topic's words reads contiguous memory and never gathers
from the (K x N) dictionary again.
"""
from cython.parallel cimport parallel, prange
from libc.math cimport INFINITY, NAN, fabs
from libc.stdlib cimport free, malloc

from stc.losses._base cimport CompiledLoss

import numpy as np

from stc._core._openmp import resolve_n_jobs

# Block Newton on theta_k stops once its next step would move theta_k by less
# than this fraction, provided theta_k has not passed the block minimiser
# (then the block objective cannot exceed its start value). Past the
# minimiser only a rounding-level step counts as converged. 1e-3 of theta_k
# changes the objective by ~1e-6 of a document's coupling term, far below the
# sweep tolerance, and saves a pass over the words in most blocks.
cdef double BLOCK_NEWTON_RTOL = 1e-3
# After passing the minimiser, the Newton step back is lengthened by this
# fraction so that it usually lands on the start's side.
cdef double OVERSHOOT_NUDGE = 0.003
# A document's running means are rounded once per code update (about 1e-13
# relative in normal runs); beyond this they are taken as drifted.
cdef double MEANS_DRIFT_RTOL = 1e-9

cdef enum:
    PENALTY_L1 = 0
    PENALTY_L2 = 1


cdef inline double theta_update(double mean_code, double linear, double n_words,
                                double lam, double gamma, int penalty) noexcept nogil:
    """Minimiser over t >= 0 of  pen(t) + gamma * sum_n (s_nk - t)^2 - linear * t.

    pen(t) = lam * t (l1, eq. 3: truncated averaging) or lam * t^2 (l2,
    footnote 3); mean_code is the average word code s_bar_k over the
    document's n_words observed words. With linear = 0 these are the paper's
    formulas; MedSTC passes linear = (C / D) (eta_{y_d} - eta_{yhat_d})_k.
    """
    cdef double t
    if penalty == PENALTY_L1:
        t = mean_code + (linear - lam) / (2.0 * gamma * n_words)
    else:
        t = (2.0 * gamma * n_words * mean_code + linear) / (2.0 * lam + 2.0 * gamma * n_words)
    return t if t > 0.0 else 0.0


cdef double document_objective(CompiledLoss loss, Py_ssize_t n_words, const double* y,
                               const double* means, const double* s, const double* theta,
                               const double* linear, Py_ssize_t n_topics,
                               double lam, double gamma, double rho,
                               int theta_penalty, int code_penalty,
                               double* loss_part) noexcept nogil:
    """Objective (2) restricted to one document, plus -linear . theta.

    ``s`` holds the document's word codes topic by topic: s[k * n_words + i].
    """
    cdef Py_ssize_t i, k
    cdef double reconstruction = 0.0, coupling = 0.0, code_pen = 0.0, doc_pen = 0.0
    cdef double shift = 0.0
    cdef double diff, x, t
    cdef const double* s_k
    for i in range(n_words):
        reconstruction += loss._loss(y[i], means[i])
    for k in range(n_topics):
        s_k = s + k * n_words
        t = theta[k]
        for i in range(n_words):
            x = s_k[i]
            diff = x - t
            coupling += diff * diff
            code_pen += x if code_penalty == PENALTY_L1 else x * x
        doc_pen += t if theta_penalty == PENALTY_L1 else t * t
        if linear != NULL:
            shift += linear[k] * t
    loss_part[0] = reconstruction
    return reconstruction + gamma * coupling + rho * code_pen + lam * doc_pen - shift


cdef inline double solve_topic_words(CompiledLoss loss, Py_ssize_t n_words, const double* y,
                                     const double* b, double* s_k, const double* rests,
                                     double t, double quad, double rho_lin, double gamma,
                                     double* scratch, double* curvature) noexcept nogil:
    """Word-code step of topic k with theta_k = t: every word independently.

    ``b`` and ``s_k`` are the topic's weights beta_kn and codes s_nk of the
    document's words; ``scratch`` holds n_words doubles. Returns
    sum_n 2 gamma (t - s_nk) (the coupling part of the derivative in t of the
    block objective) and, in ``curvature``, the matching part of its second
    derivative, using ds_nk/dt = 2 gamma / (b^2 l'' + 2 quad) for s_nk > 0.
    """
    cdef Py_ssize_t i
    cdef double x, slope = 0.0, curv = 0.0, lin = rho_lin - 2.0 * gamma * t
    loss._solve_coordinates(n_words, y, b, rests, quad, lin, s_k, scratch)
    for i in range(n_words):
        x = s_k[i]
        slope += 2.0 * gamma * (t - x)
        if x > 0.0:
            curv += 2.0 * gamma * (1.0 - 2.0 * gamma / (scratch[i] + 2.0 * quad))
        else:
            curv += 2.0 * gamma
    curvature[0] = curv
    return slope


cdef int update_topic_block(CompiledLoss loss, Py_ssize_t n_words, const double* y,
                             const double* b, double* s_k, double* means, double* scratch,
                             double* theta_k, double linear_k,
                             double lam, double gamma, double quad, double rho_lin,
                             int theta_penalty, int newton_steps) noexcept nogil:
    """Update the codes of topic k: word codes s_.k, and theta_k by up to `newton_steps`.

    With newton_steps = 0 this is the paper's word-code step for topic k
    (theta fixed). Otherwise theta_k moves too, by safeguarded Newton steps on
    phi(t) = min over s_.k of the document objective with theta_k = t, which
    is convex; its derivative is pen'(t) - linear_k + sum_n 2 gamma (t - s_nk(t)).
    Moving theta_k together with its word codes removes the slow drift of the
    plain alternation, which shifts their common level by only about
    rho / (2 gamma) per sweep. The result never has a larger phi than the
    start: it is either (numerically) the minimiser or a point between the
    start and the minimiser.
    """
    cdef Py_ssize_t i
    cdef double t = theta_k[0], t_new, slope, curvature, start_slope = 0.0
    cdef double low = 0.0, high = INFINITY, pen_slope, pen_curv
    cdef double safe_t = t
    cdef int step
    cdef bint converged = False
    cdef int passes = 0
    # Hold the rest of each word's mean (all topics but k) in `means`.
    for i in range(n_words):
        means[i] = means[i] - b[i] * s_k[i]
        if means[i] < 0.0:  # rounding only: a sum of non-negative terms
            means[i] = 0.0
    for step in range(newton_steps + 1):
        slope = solve_topic_words(loss, n_words, y, b, s_k, means, t, quad, rho_lin, gamma,
                                  scratch, &curvature)
        passes += 1
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
        if slope > 0.0:
            high = t
        else:
            low = t
        t_new = t - slope / curvature
        if step > 0 and (slope > 0.0) != (start_slope > 0.0):
            # Past the minimiser: aim a little short of it, back on the start's
            # side, where a close point is accepted (see BLOCK_NEWTON_RTOL).
            t_new = t - (1.0 + OVERSHOOT_NUDGE) * slope / curvature
        if t_new <= 0.0 and low == 0.0 and t > 0.0:
            t_new = 0.0  # try the boundary itself: theta_k = 0 is often optimal
        elif t_new < low or t_new > high:
            t_new = 0.5 * (low + high) if high < INFINITY else 2.0 * low + 1.0
        if fabs(t_new - t) <= 1e-10 * t:
            converged = True
            break
        t = t_new
    if newton_steps > 0 and not converged and t != safe_t and (
            (slope > 0.0) != (start_slope > 0.0)):
        # Stopped past the minimiser: phi may exceed its start value there,
        # so fall back to the last point on the start's side (phi <= start).
        t = safe_t
        solve_topic_words(loss, n_words, y, b, s_k, means, t, quad, rho_lin, gamma, scratch,
                          &curvature)
        passes += 1
    theta_k[0] = t
    for i in range(n_words):
        means[i] = means[i] + b[i] * s_k[i]
    return passes


cdef double common_start_value(CompiledLoss loss, Py_ssize_t n_words, Py_ssize_t n_topics,
                               const double* y, const double* b, double* column_sums,
                               const double* linear, double lam, double rho,
                               int theta_penalty, int code_penalty) noexcept nogil:
    """The best single value c for all codes of a document (word and document codes alike).

    With every code equal to c the coupling vanishes and the objective is
    g(c) = sum_n l(y_n, c B_n) + lam K pen(c) + rho n K pen(c) - c sum_k linear_k,
    with B_n = sum_k beta_kn: convex in c. A few safeguarded Newton steps (to
    1e-3 relative; it is only a start) give its minimiser, a far better start
    for coding a new document than a fixed value when the penalties are
    large. ``column_sums`` is scratch of n_words doubles (receives B).
    """
    cdef Py_ssize_t i, k
    cdef double largest = 0.0, low = 0.0, high = INFINITY, c = 1.0, g, h, mean, step
    cdef double n_codes = <double> (n_words * n_topics), shift = 0.0
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
    for it in range(50):
        g = -shift
        h = 0.0
        for i in range(n_words):
            mean = c * column_sums[i]
            g += column_sums[i] * loss._gradient(y[i], mean)
            h += column_sums[i] * column_sums[i] * loss._hessian(y[i], mean)
        if theta_penalty == PENALTY_L1:
            g += lam * n_topics
        else:
            g += 2.0 * lam * n_topics * c
            h += 2.0 * lam * n_topics
        if code_penalty == PENALTY_L1:
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
        if fabs(step - c) <= 1e-3 * c:
            return step
        c = step
    return c


cdef void code_one_document(CompiledLoss loss, Py_ssize_t d,
                            const int[::1] indptr, const int[::1] indices,
                            const double[::1] data, const double[:, ::1] beta,
                            double[:, ::1] codes, bint has_codes, bint warm,
                            double start_value,
                            double[:, ::1] theta, double[::1] means, double* work,
                            const double* linear, double lam, double gamma, double rho,
                            int theta_penalty, int code_penalty, int max_iter, double tol,
                            int newton_steps, double* objective_out, double* loss_out,
                            int* n_iter_out, long long* updates_out,
                            double* start_out) noexcept nogil:
    """Code document d, from its stored codes (``warm``) or all codes at start_value.

    ``work`` holds at least (2 K + 1) n_words doubles: the word codes s and the
    topic weights b of the document's words, both topic by topic, and
    scratch for one topic's word curvatures. If
    ``updates_out`` is not NULL it receives the number of word-code updates
    made (every pass of every topic block counts each word once); if
    ``start_out`` is not NULL it receives the objective and its loss part at
    the start codes (before any sweep).
    """
    cdef Py_ssize_t start = indptr[d], end = indptr[d + 1]
    cdef Py_ssize_t n_topics = beta.shape[0], n_words = end - start, i, k
    cdef double quad, rho_lin, previous, current, loss_part, acc
    cdef double* s = work
    cdef double* b = work + n_topics * n_words
    cdef double* scratch = work + 2 * n_topics * n_words
    cdef double* m = &means[start] if n_words > 0 else NULL
    cdef const double* y = &data[start] if n_words > 0 else NULL
    cdef double* theta_d = &theta[d, 0]
    cdef int it
    cdef bint drifted
    cdef long long passes = 0  # passes over the document's words, all topics
    if n_words == 0:
        for k in range(n_topics):
            theta_d[k] = 0.0
        objective_out[0] = 0.0
        loss_out[0] = 0.0
        n_iter_out[0] = 0
        if updates_out != NULL:
            updates_out[0] = 0
        if start_out != NULL:
            start_out[0] = 0.0
            start_out[1] = 0.0
        return
    for k in range(n_topics):
        for i in range(n_words):
            b[k * n_words + i] = beta[k, indices[start + i]]
    if not warm and start_value != start_value:  # NaN: choose per document
        start_value = common_start_value(loss, n_words, n_topics, y, b, m, linear, lam, rho,
                                         theta_penalty, code_penalty)
    for k in range(n_topics):
        for i in range(n_words):
            s[k * n_words + i] = codes[start + i, k] if warm else start_value
    if not warm:
        for k in range(n_topics):
            theta_d[k] = start_value
    # Coordinate problem: l(y, rest + b x) + quad x^2 + lin x, see CompiledLoss.
    quad = gamma + (rho if code_penalty == PENALTY_L2 else 0.0)
    rho_lin = rho if code_penalty == PENALTY_L1 else 0.0
    for i in range(n_words):
        acc = 0.0
        for k in range(n_topics):
            acc = acc + s[k * n_words + i] * b[k * n_words + i]
        m[i] = acc
    previous = document_objective(loss, n_words, y, m, s, theta_d, linear, n_topics,
                                  lam, gamma, rho, theta_penalty, code_penalty, &loss_part)
    if start_out != NULL:
        start_out[0] = previous
        start_out[1] = loss_part
    current = previous
    it = 0
    while it < max_iter:
        it += 1
        # Word codes topic by topic (every word independently), each topic's
        # theta_k optionally moving with them (see update_topic_block).
        for k in range(n_topics):
            passes += update_topic_block(
                loss, n_words, y, b + k * n_words, s + k * n_words, m, scratch, &theta_d[k],
                linear[k] if linear != NULL else 0.0, lam, gamma, quad, rho_lin, theta_penalty,
                newton_steps)
        # Document code, word codes fixed: the exact closed form.
        for k in range(n_topics):
            acc = 0.0
            for i in range(n_words):
                acc = acc + s[k * n_words + i]
            theta_d[k] = theta_update(acc / n_words, linear[k] if linear != NULL else 0.0,
                                      <double> n_words, lam, gamma, theta_penalty)
        current = document_objective(loss, n_words, y, m, s, theta_d, linear, n_topics,
                                     lam, gamma, rho, theta_penalty, code_penalty, &loss_part)
        if previous - current <= tol * fabs(previous):
            break
        previous = current
    # The means were updated incrementally; return them recomputed, summed
    # in the same order as `word_means`, for the dictionary step. Where the
    # running means drifted from the exact ones (codes that grew huge and came
    # back, e.g. under an unbounded supervised shift), the objective computed
    # from them is wrong too: recompute it from the exact means.
    drifted = False
    for i in range(n_words):
        acc = 0.0
        for k in range(n_topics):
            acc = acc + s[k * n_words + i] * b[k * n_words + i]
        if not fabs(acc - m[i]) <= MEANS_DRIFT_RTOL * acc:  # also NaN
            drifted = True
        m[i] = acc
    if drifted:
        current = document_objective(loss, n_words, y, m, s, theta_d, linear, n_topics,
                                     lam, gamma, rho, theta_penalty, code_penalty, &loss_part)
    if has_codes:
        for k in range(n_topics):
            for i in range(n_words):
                codes[start + i, k] = s[k * n_words + i]
    objective_out[0] = current
    loss_out[0] = loss_part
    n_iter_out[0] = it
    if updates_out != NULL:
        updates_out[0] = passes * n_words


def code_documents(CompiledLoss loss, const int[::1] indptr, const int[::1] indices,
                   const double[::1] data, const double[:, ::1] beta,
                   codes, double[:, ::1] theta, double[::1] means,
                   theta_linear, double lam, double gamma, double rho,
                   int theta_penalty, int code_penalty, int max_iter, double tol,
                   int newton_steps, n_jobs, double start_value=NAN, bint warm_start=True,
                   updates=None, start_values=None, active=None):
    """Code every document of a CSR matrix in place (warm start from `codes`, `theta`).

    Returns per-document arrays (objective, loss part, iterations used).
    `codes` is a (nnz, n_topics) array, updated in place, or None: then the
    word codes are not kept (coding new documents needs only theta). With
    `warm_start` and `codes` the coding starts from `codes` and `theta`;
    otherwise every document starts with all codes (word and document) at
    `start_value`, or, if it is NaN, at the best common value for that
    document (`common_start_value`).
    `theta_linear` is None or a (n_docs, n_topics) array b: the document-code
    step then minimises the objective minus b_d . theta_d. `updates`, if
    given, is an int64 array of n_docs that receives each document's number
    of word-code updates (for throughput measurements). `start_values`, if
    given, is a (n_docs, 2) array that receives each document's objective
    (minus b_d . theta_d, as coded) and its loss part at the start codes.
    `active`, if given (warm start only), is a uint8 array of n_docs: a
    document with active[d] == 0 is not coded (no sweep); its means,
    objective and start values are those of its current codes.
    """
    cdef Py_ssize_t n_docs = indptr.shape[0] - 1, n_topics = beta.shape[0], d
    cdef int n_threads = resolve_n_jobs(n_jobs)
    objective = np.zeros(n_docs, dtype=np.float64)
    loss_part = np.zeros(n_docs, dtype=np.float64)
    n_iter = np.zeros(n_docs, dtype=np.intc)
    cdef double[::1] objective_v = objective, loss_v = loss_part
    cdef int[::1] n_iter_v = n_iter
    cdef const double[:, ::1] linear_v
    cdef double[:, ::1] codes_v
    cdef bint has_linear = theta_linear is not None
    cdef bint has_codes = codes is not None
    cdef bint warm = has_codes and warm_start
    cdef bint count_updates = updates is not None
    cdef long long[::1] updates_v
    cdef bint keep_start = start_values is not None
    cdef double[:, ::1] start_v
    if keep_start:
        start_v = start_values
        if start_v.shape[0] != n_docs or start_v.shape[1] != 2:
            raise ValueError(f"start_values must have shape ({n_docs}, 2)")
    if count_updates:
        updates_v = updates
        if updates_v.shape[0] != n_docs:
            raise ValueError(f"updates must have one entry per document ({n_docs})")
    cdef bint some_inactive = active is not None
    cdef const unsigned char[::1] active_v
    if some_inactive:
        if not warm:
            raise ValueError("active needs a warm start (codes given, warm_start=True)")
        active_v = active
        if active_v.shape[0] != n_docs:
            raise ValueError(f"active must have one entry per document ({n_docs})")
    if has_linear:
        linear_v = theta_linear
    else:
        linear_v = np.zeros((1, n_topics), dtype=np.float64)
    if has_codes:
        codes_v = codes
    else:
        codes_v = np.zeros((1, n_topics), dtype=np.float64)
    longest = int(np.max(np.diff(indptr))) if n_docs > 0 else 0
    cdef size_t work_size = (2 * n_topics + 1) * max(longest, 1) * sizeof(double)
    cdef double* work
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    with nogil, parallel(num_threads=n_threads):
        work = <double*> malloc(work_size)
        if work == NULL:
            failed[0] = 1
        for d in prange(n_docs, schedule="dynamic", chunksize=8):
            if work != NULL:
                code_one_document(loss, d, indptr, indices, data, beta, codes_v, has_codes,
                                  warm, start_value, theta, means, work,
                                  &linear_v[d, 0] if has_linear else NULL,
                                  lam, gamma, rho, theta_penalty, code_penalty,
                                  max_iter if not some_inactive or active_v[d] else 0, tol,
                                  newton_steps, &objective_v[d], &loss_v[d], &n_iter_v[d],
                                  &updates_v[d] if count_updates else NULL,
                                  &start_v[d, 0] if keep_start else NULL)
        free(work)
    if failed[0]:
        raise MemoryError(f"could not allocate {work_size} bytes of coding work space per thread")
    return objective, loss_part, n_iter


def theta_from_codes(double mean_code, double linear, double n_words, double lam,
                     double gamma, int penalty):
    """Python access to `theta_update` (for tests)."""
    return theta_update(mean_code, linear, n_words, lam, gamma, penalty)


def segment_objectives(CompiledLoss loss, const int[::1] indptr, const int[::1] indices,
                       const double[::1] data, const double[:, ::1] beta_t,
                       const double[:, ::1] old_codes, const double[:, ::1] new_codes,
                       const double[:, ::1] old_theta, const double[:, ::1] new_theta,
                       const Py_ssize_t[::1] rows, const double[::1] steps,
                       double lam, double gamma, double rho, int theta_penalty,
                       int code_penalty, n_jobs=None):
    """Objective (2) of documents ``rows`` at the codes old + step * (new - old).

    Document rows[i] is evaluated at step steps[i] along the segment from its
    old codes (word and document) to its new ones, without forming the
    intermediate codes. Returns (objective, loss part), one value per listed
    document. ``beta_t`` is the dictionary transposed, (n_features, n_topics).
    Used by MedSTC's safeguard to backtrack the supervised
    coding step; documents are evaluated in parallel.
    """
    cdef Py_ssize_t n_rows = rows.shape[0], n_topics = beta_t.shape[1], r, d, j, k
    cdef int n_threads = resolve_n_jobs(n_jobs)
    objective = np.zeros(n_rows, dtype=np.float64)
    loss_part = np.zeros(n_rows, dtype=np.float64)
    cdef double[::1] objective_v = objective, loss_v = loss_part
    cdef double t, mean, x, th, reconstruction, coupling, code_pen, doc_pen
    cdef double* trial_theta
    cdef const double* topic_weights
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    with nogil, parallel(num_threads=n_threads):
        trial_theta = <double*> malloc((n_topics if n_topics > 0 else 1) * sizeof(double))
        if trial_theta == NULL:
            failed[0] = 1
        for r in prange(n_rows, schedule="dynamic", chunksize=8):
            if trial_theta == NULL:
                continue
            d = rows[r]
            t = steps[r]
            reconstruction = 0.0
            coupling = 0.0
            code_pen = 0.0
            doc_pen = 0.0
            for k in range(n_topics):
                trial_theta[k] = old_theta[d, k] + t * (new_theta[d, k] - old_theta[d, k])
            for j in range(indptr[d], indptr[d + 1]):
                mean = 0.0
                topic_weights = &beta_t[indices[j], 0]
                for k in range(n_topics):
                    x = old_codes[j, k] + t * (new_codes[j, k] - old_codes[j, k])
                    mean = mean + x * topic_weights[k]
                    coupling = coupling + (x - trial_theta[k]) * (x - trial_theta[k])
                    code_pen = code_pen + (x if code_penalty == PENALTY_L1 else x * x)
                reconstruction = reconstruction + loss._loss(data[j], mean)
            if indptr[d + 1] > indptr[d]:
                for k in range(n_topics):
                    th = trial_theta[k]
                    doc_pen = doc_pen + (th if theta_penalty == PENALTY_L1 else th * th)
            loss_v[r] = reconstruction
            objective_v[r] = reconstruction + gamma * coupling + rho * code_pen + lam * doc_pen
        free(trial_theta)
    if failed[0]:
        raise MemoryError("could not allocate the work space of segment_objectives")
    return objective, loss_part


def move_along_segments(const int[::1] indptr, const int[::1] indices,
                        const double[:, ::1] beta_t, const double[:, ::1] old_codes,
                        double[:, ::1] codes, const double[:, ::1] old_theta,
                        double[:, ::1] theta, double[::1] means, const Py_ssize_t[::1] rows,
                        const double[::1] steps, n_jobs=None):
    """Set the codes of documents ``rows`` to old + step * (current - old), in place.

    The means of their entries are recomputed from the new codes (summed in
    the order `word_means` uses, with ``beta_t`` the dictionary transposed);
    other documents are left alone.
    """
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
