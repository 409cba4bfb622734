"""The restricted dual QP of the cutting-plane SVM, compiled and in a fixed order.

    maximise  c.a - 1/2 a'Ha   over   {a >= 0, sum(a) = C}

(``H`` the Gram matrix of the cuts, positive semi-definite and singular as
soon as there are more cuts than dimensions). Each iteration makes one
pairwise (SMO-type) step, mass from cut j to cut i with an exact line search
(i maximises the gradient, j the second-order gain among cuts with weight),
then one step towards the optimum of the face of the current support
(`face_step_kernel`): the Newton step on the face's quadratic, through an
eigen-decomposition of its small Gram matrix by Jacobi rotations, which removes
the zig-zag of pairwise steps on nearly parallel cuts. Both are ascent steps.
Every sum runs in one fixed order, no BLAS or LAPACK kernel is called, so the
solution is the same on every CPU; and the whole loop runs without the GIL.
"""
import numpy as np

from libc.math cimport INFINITY, fabs, hypot, isfinite, sqrt

from stc._core._dense cimport ordered_dot

cdef double EPS = np.finfo(np.float64).eps


cdef void gradient(const double[:, ::1] H, const double[::1] c, const double[::1] alpha,
                   double[::1] g) noexcept nogil:
    """g = c - H alpha."""
    cdef Py_ssize_t i, m = c.shape[0]
    for i in range(m):
        g[i] = c[i] - ordered_dot(&H[i, 0], &alpha[0], m)


cdef void symmetric_eigen(double[:, ::1] A, double[:, ::1] V, Py_ssize_t n) noexcept nogil:
    """Eigen-decomposition of the symmetric n x n block of A by cyclic Jacobi rotations.

    On return A's diagonal holds the eigenvalues and V's columns the
    eigenvectors. Jacobi's method is accurate on the small, singular Gram
    matrices of nearly parallel cuts, and its order of operations is fixed.
    """
    cdef Py_ssize_t p, q, k, sweep
    cdef double off, total, app, aqq, apq, tau, t, c, s, x, y
    for p in range(n):
        for q in range(n):
            V[p, q] = 1.0 if p == q else 0.0
    for sweep in range(60):
        off = 0.0
        total = 0.0
        for p in range(n):
            total += A[p, p] * A[p, p]
            for q in range(p + 1, n):
                off += A[p, q] * A[p, q]
        if not off > EPS * EPS * (total + 2.0 * off):
            return
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = A[p, q]
                if apq == 0.0:
                    continue
                app, aqq = A[p, p], A[q, q]
                # the rotation that zeroes A[p, q] (Golub & Van Loan, sym.schur2)
                tau = (aqq - app) / (2.0 * apq)
                t = 1.0 / (fabs(tau) + hypot(1.0, tau))
                if tau < 0.0:
                    t = -t
                c = 1.0 / sqrt(1.0 + t * t)
                s = t * c
                for k in range(n):
                    x, y = A[k, p], A[k, q]
                    A[k, p] = c * x - s * y
                    A[k, q] = s * x + c * y
                for k in range(n):
                    x, y = A[p, k], A[q, k]
                    A[p, k] = c * x - s * y
                    A[q, k] = s * x + c * y
                A[p, q] = 0.0
                A[q, p] = 0.0
                for k in range(n):
                    x, y = V[k, p], V[k, q]
                    V[k, p] = c * x - s * y
                    V[k, q] = s * x + c * y


cdef bint face_direction(const double[:, ::1] H, const double[::1] g, const Py_ssize_t* S,
                         Py_ssize_t n, double[:, ::1] A, double[:, ::1] V,
                         double* d, double* coef, double* reduced) noexcept nogil:
    """Ascent direction on the face {sum(d) = 0} of the support S, scaled to max |d| = 1.

    On the face the dual is g.d - 1/2 d'H d with sum(d) = 0. With P the
    projection onto sum(d) = 0, the reduced Hessian P H P is split by its
    eigenvalues. Where it is flat (the cut gradients are linearly dependent,
    as soon as the cuts outnumber the dimensions), a gradient component there
    makes the face unbounded: move along it, to the boundary. Otherwise the
    Newton step (pseudo-inverse): the face's maximiser. Writes d; returns
    False when there is no ascent direction.
    """
    cdef Py_ssize_t a, b, e, pass_
    cdef double mean = 0.0, largest = 0.0, flat, norm_d = 0.0, norm_r = 0.0, size = 0.0
    cdef double slope = 0.0, total
    for a in range(n):
        mean += g[S[a]]
    mean /= n
    for a in range(n):
        reduced[a] = g[S[a]] - mean
        norm_r += reduced[a] * reduced[a]
    # A = P H_SS P: subtract row means, then column means
    for a in range(n):
        total = 0.0
        for b in range(n):
            A[a, b] = H[S[a], S[b]]
            total += A[a, b]
        total /= n
        for b in range(n):
            A[a, b] -= total
    for b in range(n):
        total = 0.0
        for a in range(n):
            total += A[a, b]
        total /= n
        for a in range(n):
            A[a, b] -= total
    symmetric_eigen(A, V, n)
    for e in range(n):
        largest = max(largest, A[e, e])
        total = 0.0
        for a in range(n):
            total += V[a, e] * reduced[a]
        coef[e] = total
    # flat: within the rounding of the eigenvalues (about n * 1e-16 * the largest)
    flat = 100.0 * n * EPS * largest
    for pass_ in range(2):
        # first the flat part of the gradient; if that is rounding only, the Newton step
        mean = 0.0
        for a in range(n):
            total = 0.0
            for e in range(n):
                if (A[e, e] <= flat) == (pass_ == 0):
                    total += V[a, e] * (coef[e] if pass_ == 0 else coef[e] / A[e, e])
            d[a] = total
            mean += total
        mean /= n
        norm_d = 0.0
        for a in range(n):
            d[a] -= mean  # the constant vector is flat too, and no direction on the face
            norm_d += d[a] * d[a]
        if sqrt(norm_d) > 1e-8 * sqrt(norm_r):
            break
    for a in range(n):
        size = max(size, fabs(d[a]))
    if not (isfinite(size) and size > 0.0):
        return False
    mean = 0.0
    for a in range(n):
        d[a] /= size  # a rounding-level d with a huge step would move sum(alpha)
        mean += d[a]
    mean /= n
    for a in range(n):
        d[a] -= mean
        slope += g[S[a]] * d[a]
    return slope > 0.0


cdef bint face_step_kernel(const double[:, ::1] H, double[::1] alpha, const double[::1] g,
                           Py_ssize_t* S, double[:, ::1] A, double[:, ::1] V,
                           double[:, ::1] vectors) noexcept nogil:
    """Exact-line-search step towards the optimum of the face of alpha's support.

    On the face {a_j = 0 off the support S, sum(a) = C} the QP is an
    equality-constrained quadratic; move from alpha along `face_direction` as
    far as the quadratic line search and alpha >= 0 allow (a weight reaching
    zero leaves the support). The step is taken only along an ascent
    direction, so the dual never decreases, however ill-conditioned or
    singular H_SS is. Updates alpha in place; returns False when no step was taken.
    """
    cdef Py_ssize_t m = alpha.shape[0], n = 0, a, b, hit = -1
    cdef double* d = &vectors[0, 0]
    cdef double slope = 0.0, curv = 0.0, row, t, ratio
    for a in range(m):
        if alpha[a] > 0.0:
            S[n] = a
            n += 1
    if n < 2:
        return False
    if not face_direction(H, g, S, n, A, V, d, &vectors[1, 0], &vectors[2, 0]):
        return False
    for a in range(n):
        slope += g[S[a]] * d[a]
        row = 0.0
        for b in range(n):
            row += H[S[a], S[b]] * d[b]
        curv += d[a] * row
    t = slope / curv if curv > 0.0 else INFINITY
    for a in range(n):
        if d[a] < 0.0:
            ratio = alpha[S[a]] / -d[a]
            if ratio < t or (ratio == t and hit < 0):
                t = ratio
                hit = S[a]
    if not (isfinite(t) and t > 0.0):
        return False
    for a in range(n):
        alpha[S[a]] = max(alpha[S[a]] + t * d[a], 0.0)
    if hit >= 0:
        alpha[hit] = 0.0
    return True


cdef class _Workspace:
    """Buffers of the face step for up to m cuts."""
    cdef Py_ssize_t[::1] S
    cdef double[:, ::1] A, V, vectors

    def __init__(self, Py_ssize_t m):
        m = max(m, 1)
        self.S = np.zeros(m, dtype=np.intp)
        self.A = np.zeros((m, m))
        self.V = np.zeros((m, m))
        self.vectors = np.zeros((3, m))


def face_step(H, g, alpha):
    """`face_step_kernel` on numpy arrays (``alpha`` updated in place); True if it moved."""
    cdef _Workspace work = _Workspace(alpha.shape[0])
    return bool(face_step_kernel(np.ascontiguousarray(H, dtype=np.float64), alpha,
                                 np.ascontiguousarray(g, dtype=np.float64), &work.S[0],
                                 work.A, work.V, work.vectors))


def solve_simplex_qp(const double[:, ::1] H, const double[::1] c, double[::1] alpha, double C,
                     double tol, Py_ssize_t max_iter):
    """Maximise ``c.a - 1/2 a'Ha`` over ``{a >= 0, sum(a) = C}``, ``alpha`` in place.

    Stops when the Frank-Wolfe gap ``C max(g) - a.g`` (``g = c - H a``), which
    is exactly the duality gap of this QP, is at most ``tol``; or when two
    iterations in a row leave the dual objective where it was, or no pair can
    make progress: the gap asked for is then below what double precision
    resolves (the QP's numbers grow like C^2 ||x||^2, the gap asked for like C).
    Returns (iterations, whether it stopped for lack of progress).
    """
    cdef Py_ssize_t m = c.shape[0]
    g_array = np.zeros(m)
    cdef _Workspace work = _Workspace(m)
    cdef double[::1] g = g_array
    cdef Py_ssize_t steps
    cdef bint stuck
    with nogil:
        steps, stuck = qp_loop(H, c, alpha, C, tol, max_iter, g, work)
    return steps, stuck


cdef (Py_ssize_t, bint) qp_loop(const double[:, ::1] H, const double[::1] c, double[::1] alpha,
                                double C, double tol, Py_ssize_t max_iter, double[::1] g,
                                _Workspace work) noexcept nogil:
    cdef Py_ssize_t m = c.shape[0], i, j, k, steps = 0, idle = 0
    cdef double tau = 0.0, gap, b, curv, gain, best, t, dual, previous
    if m == 0:
        return 0, False
    for k in range(m):
        tau = max(tau, H[k, k])
    tau = 1e-12 * max(tau, 1e-300)
    gradient(H, c, alpha, g)
    dual = 0.0
    for k in range(m):
        dual += alpha[k] * (c[k] + g[k])
    dual *= 0.5  # c.a - 1/2 a'Ha, as g = c - H a
    while steps < max_iter:
        i = 0
        for k in range(1, m):
            if g[k] > g[i]:
                i = k
        gap = C * g[i] - ordered_dot(&alpha[0], &g[0], m)
        if gap <= tol:
            return steps, False
        j = -1
        best = 0.0
        for k in range(m):
            b = g[i] - g[k]
            if alpha[k] > 0.0 and b > 0.0:
                curv = max(H[i, i] + H[k, k] - 2.0 * H[i, k], tau)
                gain = b * b / curv
                if gain > best:
                    best, j = gain, k
        if j < 0:  # optimal up to round-off
            return steps, True
        b = g[i] - g[j]
        t = b / max(H[i, i] + H[j, j] - 2.0 * H[i, j], tau)
        if t >= alpha[j]:
            t = alpha[j]
            alpha[j] = 0.0
        else:
            alpha[j] -= t
        alpha[i] += t
        gradient(H, c, alpha, g)
        if face_step_kernel(H, alpha, g, &work.S[0], work.A, work.V, work.vectors):
            gradient(H, c, alpha, g)
        steps += 1
        previous = dual
        dual = 0.0
        for k in range(m):
            dual += alpha[k] * (c[k] + g[k])
        dual *= 0.5
        idle = idle + 1 if not dual > previous else 0
        if idle == 2:
            return steps, True
    return steps, False
