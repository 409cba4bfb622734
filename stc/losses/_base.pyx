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
from libc.math cimport INFINITY, NAN, fabs, fmax, isfinite

import numpy as np

# Newton stops when a step is below this fraction of |x| (the 1e-10 relative
# accuracy promised in the docs); the iteration caps only guard against
# pathological losses.
cdef double NEWTON_RTOL = 1e-10
cdef int NEWTON_MAX_ITER = 100
cdef int BRACKET_MAX_DOUBLINGS = 1100
# Distance kept from a finite upper end of the mean domain (relative).
cdef double DOMAIN_MARGIN = 1e-10


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

    cdef void _solve_coordinates(self, Py_ssize_t n, const double* y, const double* b,
                                 const double* mean_rest, double quad, double lin,
                                 double* x, double* curvature) noexcept nogil:
        """Solve n independent coordinate problems (same quad and lin).

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
        h' > 0 at right); a Newton step that leaves it is replaced by
        bisection, so the method converges for any convex loss.
        """
        cdef double left, right, x, x_new, g, hess, step, previous_step
        cdef int i
        if b <= 0.0:
            x = -lin / (2.0 * quad)
            return x if x > 0.0 else 0.0
        # x must keep the mean inside its open domain.
        left = (self.mean_lower - mean_rest) / b
        right = (self.mean_upper - mean_rest) / b
        if left < 0.0:
            # x = 0 is feasible: by convexity it is optimal when h'(0) >= 0.
            if b * self._gradient(y, mean_rest) + lin >= 0.0:
                return 0.0
            left = 0.0
        if right <= left:
            # No feasible x keeps the mean in its domain (mean_rest is already
            # past the upper end): stay as close to the domain as allowed.
            return left if left > 0.0 else 0.0
        if not isfinite(right):
            # Walk right until h' > 0; quad > 0 makes h' grow without bound.
            step = fabs(x_start) if fabs(x_start) > 1.0 else 1.0
            right = left + step
            for i in range(BRACKET_MAX_DOUBLINGS):
                if b * self._gradient(y, mean_rest + b * right) + 2.0 * quad * right + lin > 0.0:
                    break
                left = right
                step = 2.0 * step
                right = left + step
        x = x_start
        if not (x > left and x < right) or x < 1e-3 * (right - left):
            # A start far below the bracket scale would make Newton creep
            # (for h' ~ -1/x each step only doubles x): start in the middle.
            x = 0.5 * (left + right)
        previous_step = right - left
        for i in range(NEWTON_MAX_ITER):
            g = b * self._gradient(y, mean_rest + b * x) + 2.0 * quad * x + lin
            if g > 0.0:
                right = x
            elif g < 0.0:
                left = x
            else:
                break
            hess = b * b * self._hessian(y, mean_rest + b * x) + 2.0 * quad
            x_new = x - g / hess
            if not (x_new > left and x_new < right) or fabs(2.0 * g) > fabs(previous_step * hess):
                # Outside the bracket, or not at least halving the previous
                # step: bisect (the usual safeguard of Newton-bisection).
                x_new = 0.5 * (left + right)
            previous_step = fabs(x_new - x)
            x = x_new
            if previous_step <= NEWTON_RTOL * fabs(x) or right - left <= NEWTON_RTOL * fabs(x):
                break
        if isfinite(self.mean_upper):
            # Keep the mean a margin inside its domain, so that sums of the
            # same terms in another order cannot round onto the open end.
            cap = self.mean_upper - DOMAIN_MARGIN * fmax(fabs(self.mean_upper), 1.0)
            if mean_rest + b * x > cap:
                x = (cap - mean_rest) / b
        return x if x > 0.0 else 0.0

    # ---- vectorised Python interface (used by the dictionary step and tests)

    def loss(self, y, mean):
        """Elementwise l(y, mean); +inf where the mean leaves its domain."""
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
        cdef double[::1] yv = np.ascontiguousarray(y_arr).ravel()
        cdef double[::1] mv = np.ascontiguousarray(mean_arr).ravel()
        out = np.empty(yv.shape[0], dtype=np.float64)
        cdef double[::1] ov = out
        cdef Py_ssize_t i
        cdef double lo = self.mean_lower, hi = self.mean_upper
        with nogil:
            for i in range(yv.shape[0]):
                if which == 0:
                    if mv[i] > lo and mv[i] < hi:
                        ov[i] = self._loss(yv[i], mv[i])
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

    def _solve(self, y, b, mean_rest, quad, lin, x_start, bint generic):
        arrays = np.broadcast_arrays(*[np.asarray(a, dtype=np.float64)
                                       for a in (y, b, mean_rest, quad, lin, x_start)])
        shape = arrays[0].shape
        flat = [np.ascontiguousarray(a).ravel() for a in arrays]
        cdef double[::1] yv = flat[0], bv = flat[1], mv = flat[2]
        cdef double[::1] qv = flat[3], lv = flat[4], xv = flat[5]
        out = np.empty(yv.shape[0], dtype=np.float64)
        cdef double[::1] ov = out
        cdef Py_ssize_t i
        if np.any(np.asarray(qv) <= 0):
            raise ValueError("quad must be positive")
        with nogil:
            for i in range(yv.shape[0]):
                if generic:
                    ov[i] = self._newton_coordinate(yv[i], bv[i], mv[i], qv[i], lv[i], xv[i])
                else:
                    ov[i] = self._solve_coordinate(yv[i], bv[i], mv[i], qv[i], lv[i], xv[i])
        return out.reshape(shape)

    def __reduce__(self):
        return (type(self), ())
