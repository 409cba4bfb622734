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
"""
from cython.parallel cimport prange
from libc.math cimport INFINITY, fabs

from stc.losses._base cimport CompiledLoss

import numpy as np

from stc._core._openmp import resolve_n_jobs

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


cdef double document_objective(CompiledLoss loss, Py_ssize_t start, Py_ssize_t end,
                               const double[::1] data, const double[::1] means,
                               const double[:, ::1] codes, const double* theta,
                               const double* linear, Py_ssize_t n_topics,
                               double lam, double gamma, double rho,
                               int theta_penalty, int code_penalty,
                               double* loss_part) noexcept nogil:
    """Objective (2) restricted to one document, plus -linear . theta."""
    cdef Py_ssize_t j, k
    cdef double reconstruction = 0.0, coupling = 0.0, code_pen = 0.0, doc_pen = 0.0
    cdef double shift = 0.0
    cdef double diff, s
    for j in range(start, end):
        reconstruction += loss._loss(data[j], means[j])
        for k in range(n_topics):
            s = codes[j, k]
            diff = s - theta[k]
            coupling += diff * diff
            code_pen += s if code_penalty == PENALTY_L1 else s * s
    for k in range(n_topics):
        doc_pen += theta[k] if theta_penalty == PENALTY_L1 else theta[k] * theta[k]
        if linear != NULL:
            shift += linear[k] * theta[k]
    loss_part[0] = reconstruction
    return reconstruction + gamma * coupling + rho * code_pen + lam * doc_pen - shift


cdef inline double solve_topic_words(CompiledLoss loss, Py_ssize_t start, Py_ssize_t end,
                                     Py_ssize_t k, const int[::1] indices,
                                     const double[::1] data, const double[:, ::1] beta,
                                     double[:, ::1] codes, const double[::1] rests,
                                     double t, double quad, double rho_lin, double gamma,
                                     double* curvature) noexcept nogil:
    """Word-code step of topic k with theta_k = t: every word independently.

    Returns sum_n 2 gamma (t - s_nk) (the coupling part of the derivative in
    t of the block objective) and, in ``curvature``, the matching part of its
    second derivative, using ds_nk/dt = 2 gamma / (b^2 l'' + 2 quad) for s_nk > 0.
    """
    cdef Py_ssize_t j
    cdef double b, x, slope = 0.0, curv = 0.0, lin = rho_lin - 2.0 * gamma * t
    for j in range(start, end):
        b = beta[k, indices[j]]
        x = loss._solve_coordinate(data[j], b, rests[j], quad, lin, codes[j, k])
        codes[j, k] = x
        slope += 2.0 * gamma * (t - x)
        if x > 0.0:
            curv += 2.0 * gamma * (1.0 - 2.0 * gamma / (
                b * b * loss._hessian(data[j], rests[j] + b * x) + 2.0 * quad))
        else:
            curv += 2.0 * gamma
    curvature[0] = curv
    return slope


cdef void update_topic_block(CompiledLoss loss, Py_ssize_t start, Py_ssize_t end, Py_ssize_t k,
                             const int[::1] indices, const double[::1] data,
                             const double[:, ::1] beta, double[:, ::1] codes,
                             double[::1] means, double* theta_k, double linear_k,
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
    cdef Py_ssize_t j
    cdef double b, t = theta_k[0], t_new, slope, curvature, start_slope = 0.0
    cdef double low = 0.0, high = INFINITY, pen_slope, pen_curv
    cdef double safe_t = t
    cdef int step
    cdef bint converged = False
    # Hold the rest of each word's mean (all topics but k) in `means`.
    for j in range(start, end):
        b = beta[k, indices[j]]
        means[j] = means[j] - b * codes[j, k]
        if means[j] < 0.0:  # rounding only: a sum of non-negative terms
            means[j] = 0.0
    for step in range(newton_steps + 1):
        slope = solve_topic_words(loss, start, end, k, indices, data, beta, codes, means,
                                  t, quad, rho_lin, gamma, &curvature)
        if theta_penalty == PENALTY_L1:
            pen_slope, pen_curv = lam, 0.0
        else:
            pen_slope, pen_curv = 2.0 * lam * t, 2.0 * lam
        slope += pen_slope - linear_k
        curvature += pen_curv
        if fabs(slope) <= 1e-10 * t * curvature:
            converged = True  # the Newton step would be below rounding level
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
        solve_topic_words(loss, start, end, k, indices, data, beta, codes, means,
                          t, quad, rho_lin, gamma, &curvature)
    theta_k[0] = t
    for j in range(start, end):
        means[j] = means[j] + beta[k, indices[j]] * codes[j, k]


cdef void code_one_document(CompiledLoss loss, Py_ssize_t d,
                            const int[::1] indptr, const int[::1] indices,
                            const double[::1] data, const double[:, ::1] beta,
                            double[:, ::1] codes, double[:, ::1] theta, double[::1] means,
                            const double* linear, double lam, double gamma, double rho,
                            int theta_penalty, int code_penalty, int max_iter, double tol,
                            int newton_steps, double* objective_out, double* loss_out,
                            int* n_iter_out) noexcept nogil:
    cdef Py_ssize_t start = indptr[d], end = indptr[d + 1]
    cdef Py_ssize_t n_topics = beta.shape[0], j, k
    cdef double n_words = <double> (end - start)
    cdef double quad, rho_lin, previous, current, loss_part
    cdef int it
    if end == start:
        for k in range(n_topics):
            theta[d, k] = 0.0
        objective_out[0] = 0.0
        loss_out[0] = 0.0
        n_iter_out[0] = 0
        return
    # Coordinate problem: l(y, rest + b x) + quad x^2 + lin x, see CompiledLoss.
    quad = gamma + (rho if code_penalty == PENALTY_L2 else 0.0)
    rho_lin = rho if code_penalty == PENALTY_L1 else 0.0
    for j in range(start, end):
        means[j] = 0.0
        for k in range(n_topics):
            means[j] += codes[j, k] * beta[k, indices[j]]
    previous = document_objective(loss, start, end, data, means, codes, &theta[d, 0], linear,
                                  n_topics, lam, gamma, rho, theta_penalty, code_penalty,
                                  &loss_part)
    current = previous
    it = 0
    while it < max_iter:
        it += 1
        # Word codes topic by topic (every word independently), each topic's
        # theta_k optionally moving with them (see update_topic_block).
        for k in range(n_topics):
            update_topic_block(loss, start, end, k, indices, data, beta, codes, means,
                               &theta[d, k], linear[k] if linear != NULL else 0.0,
                               lam, gamma, quad, rho_lin, theta_penalty, newton_steps)
        # Document code, word codes fixed: the exact closed form.
        for k in range(n_topics):
            theta[d, k] = 0.0
        for j in range(start, end):
            for k in range(n_topics):
                theta[d, k] += codes[j, k]
        for k in range(n_topics):
            theta[d, k] = theta_update(theta[d, k] / n_words,
                                       linear[k] if linear != NULL else 0.0,
                                       n_words, lam, gamma, theta_penalty)
        current = document_objective(loss, start, end, data, means, codes, &theta[d, 0], linear,
                                     n_topics, lam, gamma, rho, theta_penalty, code_penalty,
                                     &loss_part)
        if previous - current <= tol * fabs(previous):
            break
        previous = current
    objective_out[0] = current
    loss_out[0] = loss_part
    n_iter_out[0] = it


def code_documents(CompiledLoss loss, const int[::1] indptr, const int[::1] indices,
                   const double[::1] data, const double[:, ::1] beta,
                   double[:, ::1] codes, double[:, ::1] theta, double[::1] means,
                   theta_linear, double lam, double gamma, double rho,
                   int theta_penalty, int code_penalty, int max_iter, double tol,
                   int newton_steps, n_jobs):
    """Code every document of a CSR matrix in place (warm start from `codes`, `theta`).

    Returns per-document arrays (objective, loss part, iterations used).
    `theta_linear` is None or a (n_docs, n_topics) array b: the document-code
    step then minimises the objective minus b_d . theta_d.
    """
    cdef Py_ssize_t n_docs = indptr.shape[0] - 1, d
    cdef int n_threads = resolve_n_jobs(n_jobs)
    objective = np.zeros(n_docs, dtype=np.float64)
    loss_part = np.zeros(n_docs, dtype=np.float64)
    n_iter = np.zeros(n_docs, dtype=np.intc)
    cdef double[::1] objective_v = objective, loss_v = loss_part
    cdef int[::1] n_iter_v = n_iter
    cdef const double[:, ::1] linear_v
    cdef bint has_linear = theta_linear is not None
    if has_linear:
        linear_v = theta_linear
    else:
        linear_v = np.zeros((1, beta.shape[0]), dtype=np.float64)
    with nogil:
        for d in prange(n_docs, schedule="dynamic", chunksize=8, num_threads=n_threads):
            code_one_document(loss, d, indptr, indices, data, beta, codes, theta, means,
                              &linear_v[d, 0] if has_linear else NULL,
                              lam, gamma, rho, theta_penalty, code_penalty, max_iter, tol,
                              newton_steps, &objective_v[d], &loss_v[d], &n_iter_v[d])
    return objective, loss_part, n_iter


def theta_from_codes(double mean_code, double linear, double n_words, double lam,
                     double gamma, int penalty):
    """Python access to `theta_update` (for tests)."""
    return theta_update(mean_code, linear, n_words, lam, gamma, penalty)
