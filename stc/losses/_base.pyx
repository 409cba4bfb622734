"""Base class of compiled (nogil) losses and the generic 1-D coordinate solver.

Every loss is a function l(y, mean) of one observed value y and the mean
mean = s . beta_n that reconstructs it, convex in the mean. The coordinate
problem of the sparse-coding step (paper Sec. 2.3) is, for one entry x = s_nk,

    h(x) = l(y, mean_rest + b * x) + quad * x**2 + lin * x,   x >= 0,

with b = beta_kn, mean_rest = sum_{j != k} s_nj beta_jn, quad = gamma (+ rho
for the l2 code penalty) and lin = rho - 2 gamma theta_k (l1 code penalty) or
-2 gamma theta_k (l2). By Proposition 1 its solution is the unconstrained
minimiser clamped at zero.
"""
from libc.float cimport DBL_MAX
from libc.math cimport INFINITY, NAN, fabs, fmax, fmin, isfinite, sqrt

import numpy as np

from stc.losses import _solver_settings
from stc.losses._python import check_solutions

# The solver's settings live in `_solver_settings` (shared with the numpy solver in
# `_python.py`); C copies keep the nogil loops free of Python lookups.
cdef double NEWTON_RTOL = _solver_settings.NEWTON_RTOL
cdef int NEWTON_MAX_ITER = _solver_settings.NEWTON_MAX_ITER
cdef int BRACKET_MAX_DOUBLINGS = _solver_settings.BRACKET_MAX_DOUBLINGS
cdef double DOMAIN_MARGIN = _solver_settings.DOMAIN_MARGIN
cdef double SMALLEST_POSITIVE = 5e-324  # the smallest positive (subnormal) double


cdef inline double split_bracket(double left, double right) noexcept nogil:
    """A point inside the bracket 0 <= left < right, where Newton's step is refused.

    The midpoint when right <= 4 left; otherwise the geometric mean of
    max(left, 5e-324) and right, so that a minimiser many orders of magnitude
    below ``right`` is reached in at most ~12 steps (log2 of the ~2100 binary
    orders of magnitude of doubles) instead of ~1000 halvings.
    """
    if right <= 4.0 * left:
        return left + 0.5 * (right - left)
    return sqrt(left if left > SMALLEST_POSITIVE else SMALLEST_POSITIVE) * sqrt(right)


cdef inline double newton_target(double b, double curv, double grad, double x, double quad,
                                 double lin) noexcept nogil:
    """The Newton step x - h'(x) / h''(x), for h'' = b^2 l'' + 2 quad, written without cancellation.

    h'(x) = b grad + 2 quad x + lin: the 2 quad x terms are cancelled by hand
    (far from the minimiser they dominate h' and would leave only the
    rounding error of x). For b > 1 numerator and denominator are divided by
    b, so that b^2 l'' cannot overflow (b = 1e154).
    """
    if b > 1.0:
        return ((b * curv * x - grad) - lin / b) / (b * curv + 2.0 * quad / b)
    return (b * (b * curv * x - grad) - lin) / (b * b * curv + 2.0 * quad)


cdef bint bracket_minimiser(CompiledLoss loss, double y, double b, double mean_rest,
                            double quad, double lin, double x_start, double* bracket,
                            double* answer) noexcept nogil:
    """The start of `CompiledLoss._newton_coordinate`: the answer, or a bracket for it.

    Returns True with the answer in ``answer`` when no Newton step is needed
    (a zero weight, the exact zero of Proposition 1, no feasible x, an
    infimum at +inf) or possible (NaN); otherwise False with [left, right] in
    ``bracket``: h' < 0 at left (or left = 0) and h' > 0 at right.
    """
    cdef double lower = loss.mean_lower, upper = loss.mean_upper
    cdef double left, right, step
    cdef double g = NAN  # set before every read (the doubling loop runs at least once)
    cdef int i
    if b <= 0.0:
        answer[0] = -lin / (2.0 * quad)
        if not answer[0] > 0.0:
            answer[0] = 0.0
        return True
    # x must keep the mean inside its open domain.
    left = (lower - mean_rest) / b
    right = (upper - mean_rest) / b
    if left <= 0.0:
        # x = 0 is feasible, or puts the mean on the lower end where the
        # loss may extend (y = 0 for Poisson and Bernoulli: its gradient
        # there is finite). By convexity x = 0 is optimal when h'(0) >= 0
        # (Proposition 1): an exact zero, not the end of a bracket.
        g = b * loss._gradient(y, mean_rest) + lin
        if g >= 0.0:
            answer[0] = 0.0
            return True
        if g != g and left < 0.0:
            answer[0] = NAN  # (at the end a NaN gradient only means the loss stops there)
            return True
        left = 0.0
    if right <= left:
        # No feasible x keeps the mean in its domain (mean_rest is already
        # past the upper end): stay as close to the domain as allowed.
        answer[0] = left if left > 0.0 else 0.0
        return True
    if not isfinite(right):
        # Walk right until h' > 0 (quad > 0 makes h' grow without bound),
        # from a step at the scale of the answer: |x_start|, or twice the
        # minimiser -lin / (2 quad) of the quadratic part.
        step = fmax(1.0, -lin / quad)
        if isfinite(x_start) and fabs(x_start) > step:
            step = fabs(x_start)
        right = fmin(left + step, DBL_MAX)
        for i in range(BRACKET_MAX_DOUBLINGS):
            g = b * loss._gradient(y, mean_rest + b * right) + 2.0 * quad * right + lin
            if g > 0.0:
                break
            if g != g:
                answer[0] = NAN
                return True
            if right == DBL_MAX:
                # h' <= 0 up to the largest double (lin = -inf, say): the
                # infimum is at +inf, which is what the closed forms return.
                answer[0] = INFINITY
                return True
            left = right
            step = 2.0 * step
            right = fmin(left + step, DBL_MAX)
        if not g > 0.0:
            answer[0] = NAN
            return True
    bracket[0], bracket[1] = left, right
    return False


cdef double newton_in_bracket(CompiledLoss loss, double y, double b, double mean_rest,
                              double quad, double lin, double x_start, double left,
                              double right) noexcept nogil:
    """The Newton steps of `CompiledLoss._newton_coordinate` in [left, right] (`bracket_minimiser`).

    Returns the minimiser, or NaN (a NaN gradient inside the domain, or no
    convergence in NEWTON_MAX_ITER steps).
    """
    cdef double lower = loss.mean_lower, upper = loss.mean_upper
    cdef double x, x_new, mean, grad, curv, g, step, previous_step
    cdef bint newton_ok
    cdef int i
    x = x_start
    if not (x > left and x < right) or x < 1e-3 * (right - left):
        # A start far below the bracket scale would make Newton creep
        # (for h' ~ -1/x each step only doubles x): start in the middle.
        x = left + 0.5 * (right - left)
    previous_step = 2.0 * (right - left)  # any first Newton step in the bracket is taken
    for i in range(NEWTON_MAX_ITER):
        mean = mean_rest + b * x
        newton_ok = False
        if not (mean > lower):
            left = x  # rounded onto the open lower end: the minimiser is to the right
        elif not (mean < upper):
            right = x
        else:
            grad = loss._gradient(y, mean)
            g = b * grad + 2.0 * quad * x + lin
            if g > 0.0:
                right = x
            elif g < 0.0:
                left = x
            elif g == 0.0:
                return x
            else:
                return NAN  # the loss's gradient is NaN inside its domain
            curv = loss._hessian(y, mean)
            if mean == mean_rest:
                # b x is below the rounding of mean_rest: the loss cannot
                # see x, and its first-order model about mean_rest is all
                # there is. Its minimiser is the answer if the loss cannot
                # see it either (Newton would crawl towards a point that
                # the rounded gradient puts elsewhere).
                x_new = newton_target(b, curv, grad, 0.0, quad, lin)
                if mean_rest + b * x_new == mean_rest:
                    return fmax(left, x_new if x_new < right else right)
            else:
                x_new = newton_target(b, curv, grad, x, quad, lin)
            if fabs(x_new - x) <= NEWTON_RTOL * x:
                # (x_new may sit on the bracket's end x)
                return fmax(left, x_new if x_new < right else right)
            newton_ok = (x_new > left and x_new < right
                         and fabs(x_new - x) <= 0.5 * previous_step)
        if not newton_ok:
            x_new = split_bracket(left, right)
            if not (x_new > left and x_new < right):
                return x  # the bracket holds no other double
        step = fabs(x_new - x)
        x = x_new
        if step <= NEWTON_RTOL * x or right - left <= NEWTON_RTOL * x:
            return x
        previous_step = step
    return NAN


cdef class CompiledLoss:
    """A convex loss l(y, mean) with nogil value and derivatives in the mean.

    Subclasses override ``_loss``, ``_gradient`` and ``_hessian`` (and may
    override ``_solve_coordinate`` with a closed form). Losses are written as
    deviances (zero when the mean equals y), which differ from the negative
    log-likelihood only by a term in y.

    Pickling (and so ``copy`` and ``sklearn.clone`` of an estimator holding
    the loss) re-creates the loss with no arguments: a subclass with
    parameters must override ``__reduce__`` to pass them.
    """

    name = "compiled"
    # Capabilities the estimators ask for instead of testing the loss's type:
    # a compiled loss is coded by the nogil kernel; the dictionary step uses
    # projected gradient ("pg") unless the loss declares that the Poisson
    # majorisation-minimisation step ("mm") applies to it.
    runs_in_kernel = True
    dictionary_method = "pg"
    # What `STC.score` reports on held-out entries: "loss" (minus the mean loss per
    # entry) or, for a model of counts, "multinomial" (the mean log-likelihood per token).
    score_kind = "loss"

    def __cinit__(self):
        self.mean_lower = -INFINITY
        self.mean_upper = INFINITY

    # Not overridden: NaN, which `check_loss` reports as a missing method.
    cdef double _loss(self, double y, double mean) noexcept nogil:
        return NAN

    cdef double _gradient(self, double y, double mean) noexcept nogil:
        return NAN

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        return NAN

    cdef double _solve_coordinate(self, double y, double b, double mean_rest,
                                  double quad, double lin, double x_start) noexcept nogil:
        return self._newton_coordinate(y, b, mean_rest, quad, lin, x_start)

    cdef void _solve_block(self, Py_ssize_t n, const double* y, const double* b,
                           const double* mean_rest, double quad, double lin,
                           double* x, double* curvature) noexcept nogil:
        """Solve n independent coordinate problems (same quad and lin): one topic's words.

        ``x`` holds the start values and receives the minimisers;
        ``curvature[i]`` receives b_i^2 l''(y_i, mean_rest_i + b_i x_i) where
        x_i > 0 (the kernel's block Newton step needs it) and is left
        undefined where x_i = 0.
        """
        cdef Py_ssize_t i
        for i in range(n):
            x[i] = self._solve_coordinate(y[i], b[i], mean_rest[i], quad, lin, x[i])
            if x[i] > 0.0:
                curvature[i] = b[i] * b[i] * self._hessian(y[i], mean_rest[i] + b[i] * x[i])

    cdef double _newton_coordinate(self, double y, double b, double mean_rest,
                                   double quad, double lin, double x_start) noexcept nogil:
        """Minimise h over x >= 0 by Newton steps inside a shrinking bracket.

        The bracket [left, right] always holds the minimiser (h' < 0 at left,
        h' > 0 at right). A Newton step that leaves it, or does not at least
        halve the previous step, is replaced by a split of the bracket
        (`split_bracket`), so the method converges for any convex loss in at
        most ~50 steps. Returns NaN when it cannot answer: the loss's gradient
        is not a number inside its mean domain, or the iteration did not
        converge in NEWTON_MAX_ITER steps (inconsistent derivatives). Callers
        report NaN as an error.
        """
        cdef double bracket[2]
        cdef double x, cap, upper = self.mean_upper
        if bracket_minimiser(self, y, b, mean_rest, quad, lin, x_start, bracket, &x):
            return x  # answered without Newton steps (or NaN)
        x = newton_in_bracket(self, y, b, mean_rest, quad, lin, x_start, bracket[0], bracket[1])
        if x != x:
            return NAN
        if isfinite(upper):
            # Keep the mean a margin inside its domain, so that sums of the
            # same terms in another order cannot round onto the open end.
            cap = upper - DOMAIN_MARGIN * fmax(fabs(upper), 1.0)
            if mean_rest + b * x > cap:
                x = (cap - mean_rest) / b
        return x if x > 0.0 else 0.0

    # ---- vectorised Python interface (used by the dictionary step and tests)

    def loss(self, y, mean):
        """Elementwise l(y, mean); +inf where the mean leaves its domain.

        At a finite end of the domain the value is the loss's own there
        (its limit, e.g. 0 for the Bernoulli loss at y = mean = 0), or +inf
        where the loss does not extend to it (NaN).
        """
        return self._map(y, mean, 0)

    def gradient(self, y, mean):
        """Elementwise d l / d mean."""
        return self._map(y, mean, 1)

    def hessian(self, y, mean):
        """Elementwise d^2 l / d mean^2."""
        return self._map(y, mean, 2)

    def check_data(self, values):
        """Raise ValueError when ``values`` (the non-zero data) leave the data domain."""

    @property
    def mean_domain(self):
        """Open interval (low, high) that the mean must lie in."""
        return (self.mean_lower, self.mean_upper)

    def _map(self, y, mean, int which):
        y_arr, mean_arr = np.broadcast_arrays(np.asarray(y, dtype=np.float64),
                                              np.asarray(mean, dtype=np.float64))
        shape = y_arr.shape
        cdef const double[::1] yv = np.ascontiguousarray(y_arr).ravel()
        cdef const double[::1] mv = np.ascontiguousarray(mean_arr).ravel()
        out = np.empty(yv.shape[0], dtype=np.float64)
        cdef double[::1] ov = out
        cdef Py_ssize_t i
        cdef double lo = self.mean_lower, hi = self.mean_upper
        cdef double value
        with nogil:
            for i in range(yv.shape[0]):
                if which == 0:
                    if mv[i] > lo and mv[i] < hi:
                        ov[i] = self._loss(yv[i], mv[i])
                    elif mv[i] == lo or mv[i] == hi:
                        # an end of the domain: finite where the loss extends to it
                        value = self._loss(yv[i], mv[i])
                        ov[i] = value if value == value else INFINITY
                    else:
                        ov[i] = INFINITY
                elif which == 1:
                    ov[i] = self._gradient(yv[i], mv[i])
                else:
                    ov[i] = self._hessian(yv[i], mv[i])
        return out.reshape(shape)

    def solve_coordinate(self, y, b, mean_rest, quad, lin, x_start=0.0):
        """Vectorised exact minimiser of h(x) over x >= 0 (see module doc)."""
        return self._solve(y, b, mean_rest, quad, lin, x_start, False)

    def newton_coordinate(self, y, b, mean_rest, quad, lin, x_start=0.0):
        """Like solve_coordinate but always through the generic Newton solver."""
        return self._solve(y, b, mean_rest, quad, lin, x_start, True)

    def solve_block(self, y, b, mean_rest, double quad, double lin, x_start=0.0):
        """The block the coding kernel solves (`_solve_block`): shared quad and lin.

        Returns the minimisers (1-D). Closed-form losses take a different code
        path here than in `solve_coordinate` (their inlined loop, with the
        extreme inputs handed to the generic solver afterwards); results agree.
        """
        y_arr, b_arr, m_arr, x_arr = [np.ascontiguousarray(a, dtype=np.float64).ravel()
                                      for a in np.broadcast_arrays(y, b, mean_rest, x_start)]
        if not quad > 0:
            raise ValueError("quad must be positive")
        out = x_arr.copy()
        curvature = np.empty_like(out)
        cdef const double[::1] yv = y_arr, bv = b_arr, mv = m_arr
        cdef double[::1] ov = out, cv = curvature
        cdef Py_ssize_t n = out.shape[0]
        if n:
            with nogil:
                self._solve_block(n, &yv[0], &bv[0], &mv[0], quad, lin, &ov[0], &cv[0])
        check_solutions(self, out, [y_arr, b_arr, m_arr, np.full(n, quad), np.full(n, lin)])
        return out

    def _solve(self, y, b, mean_rest, quad, lin, x_start, bint generic):
        arrays = np.broadcast_arrays(*[np.asarray(a, dtype=np.float64)
                                       for a in (y, b, mean_rest, quad, lin, x_start)])
        shape = arrays[0].shape
        flat = [np.ascontiguousarray(a).ravel() for a in arrays]
        # const: a broadcast scalar's flattened view may be read-only
        cdef const double[::1] yv = flat[0], bv = flat[1], mv = flat[2]
        cdef const double[::1] qv = flat[3], lv = flat[4], xv = flat[5]
        out = np.empty(yv.shape[0], dtype=np.float64)
        cdef double[::1] ov = out
        cdef Py_ssize_t i
        if not np.all(np.asarray(qv) > 0):
            raise ValueError("quad must be positive")
        with nogil:
            for i in range(yv.shape[0]):
                if generic:
                    ov[i] = self._newton_coordinate(yv[i], bv[i], mv[i], qv[i], lv[i], xv[i])
                else:
                    ov[i] = self._solve_coordinate(yv[i], bv[i], mv[i], qv[i], lv[i], xv[i])
        check_solutions(self, out, flat)
        return out.reshape(shape)

    def __reduce__(self):
        return (type(self), ())
