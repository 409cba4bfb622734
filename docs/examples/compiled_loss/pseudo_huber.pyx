# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled losses for stc: the pseudo-Huber loss, and a Poisson loss without
a closed-form coordinate update (used by benchmarks/bench_custom_loss.py).

Both subclass stc.losses._base.CompiledLoss and override the three nogil
methods the coding kernel calls. Neither overrides _solve_coordinate, so the
kernel minimises each coordinate with the generic safeguarded Newton solver.
PseudoHuberBlockLoss, at the end, adds a solver of its own and the block
method that runs it without a method call per word.
"""
from libc.math cimport NAN, fabs, log, sqrt

from stc.losses._base cimport CompiledLoss


cdef inline double sqrt_one_plus_square(double a) noexcept nogil:
    """sqrt(1 + a^2) for a >= 0, as a sqrt(1 + 1 / a^2) above 1 so that a^2 cannot overflow."""
    if a > 1.0:
        return a * sqrt(1.0 + 1.0 / (a * a))
    return sqrt(1.0 + a * a)


cdef class PseudoHuberLoss(CompiledLoss):
    """delta^2 (sqrt(1 + ((mean - y) / delta)^2) - 1), delta = 1 by default.

    Quadratic for residuals much smaller than delta, linear (slope delta)
    for larger ones: a robust version of the Gaussian loss. Convex in the
    mean; the mean may be any real number, so the inherited domain
    (-inf, inf) is kept.
    """

    name = "pseudo_huber"
    cdef readonly double delta

    def __cinit__(self, double delta=1.0):
        # CompiledLoss.__cinit__ has already set the mean domain to
        # (-inf, inf). A loss whose mean must stay in an interval sets
        # self.mean_lower / self.mean_upper here.
        if not delta > 0.0:
            raise ValueError(f"delta must be positive, got {delta}")
        self.delta = delta

    def __reduce__(self):
        # CompiledLoss pickles (and so copies, e.g. in sklearn.clone) by
        # calling the class without arguments: pass the parameter along.
        return (type(self), (self.delta,))

    # Written so that no intermediate overflows at huge residuals (r * r does
    # beyond 1e154).
    cdef double _loss(self, double y, double mean) noexcept nogil:
        cdef double a = fabs(mean - y) / self.delta
        # sqrt(1 + a^2) - 1 = a^2 / (sqrt(1 + a^2) + 1): no cancellation for small a
        return self.delta * self.delta * a * (a / (sqrt_one_plus_square(a) + 1.0))

    cdef double _gradient(self, double y, double mean) noexcept nogil:
        return pseudo_huber_gradient(self.delta, y, mean)

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        return pseudo_huber_hessian(self.delta, y, mean)


cdef inline double pseudo_huber_gradient(double delta, double y, double mean) noexcept nogil:
    cdef double r = (mean - y) / delta
    return delta * r / sqrt_one_plus_square(fabs(r))


cdef inline double pseudo_huber_hessian(double delta, double y, double mean) noexcept nogil:
    cdef double q = 1.0 / sqrt_one_plus_square(fabs(mean - y) / delta)
    return q * q * q


cdef class PoissonNewtonLoss(CompiledLoss):
    """The Poisson deviance mean - y + y log(y / mean), like the built-in
    "poisson" loss, but coded with the generic Newton solver instead of the
    built-in closed form. Mean domain (0, inf)."""

    name = "poisson_newton"

    def __cinit__(self):
        self.mean_lower = 0.0

    cdef double _loss(self, double y, double mean) noexcept nogil:
        if y > 0.0:
            return mean - y + y * log(y / mean)
        return mean

    # (at y = 0 the loss is the mean, also at mean = 0, where y / mean is 0/0)
    cdef double _gradient(self, double y, double mean) noexcept nogil:
        return 1.0 - y / mean if y > 0.0 else 1.0

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        return y / (mean * mean) if y > 0.0 else 0.0


cdef inline double pseudo_huber_coordinate(double delta, double y, double b, double mean_rest,
                                           double quad, double lin,
                                           double x_start) noexcept nogil:
    """Minimiser over x >= 0 of h(x) = l(y, mean_rest + b x) + quad x^2 + lin x.

    h' is increasing and |l'| <= delta, so the minimiser lies in [0, (b delta - lin) /
    (2 quad)]: Newton steps from the warm start, replaced by a halving of that bracket
    when they would leave it. NaN for a NaN slope (the kernel reports it).
    """
    cdef double left = 0.0, right, x, x_new, slope
    cdef int i
    if not b > 0.0:
        x = -lin / (2.0 * quad)
        return x if x > 0.0 else 0.0
    slope = b * pseudo_huber_gradient(delta, y, mean_rest) + lin  # h'(0)
    if slope >= 0.0:
        return 0.0  # Proposition 1: an exact zero
    if slope != slope:
        return NAN
    right = (b * delta - lin) / (2.0 * quad)
    x = x_start if left < x_start < right else 0.5 * right
    for i in range(200):
        slope = b * pseudo_huber_gradient(delta, y, mean_rest + b * x) + 2.0 * quad * x + lin
        if slope > 0.0:
            right = x
        elif slope < 0.0:
            left = x
        else:
            return x if slope == 0.0 else NAN
        x_new = x - slope / (b * b * pseudo_huber_hessian(delta, y, mean_rest + b * x)
                             + 2.0 * quad)
        if not left < x_new < right:
            x_new = left + 0.5 * (right - left)
        if fabs(x_new - x) <= 1e-10 * x_new or right - left <= 1e-10 * x_new:
            return x_new
        x = x_new
    return NAN


cdef class PseudoHuberBlockLoss(PseudoHuberLoss):
    """The pseudo-Huber loss with a coordinate solver of its own, and the block
    method that the coding kernel calls (one topic's words) running it inline.

    The block gives the same bits as the default block, which calls
    _solve_coordinate and _hessian word by word through the method table.
    """

    name = "pseudo_huber_block"

    cdef double _solve_coordinate(self, double y, double b, double mean_rest,
                                  double quad, double lin, double x_start) noexcept nogil:
        return pseudo_huber_coordinate(self.delta, y, b, mean_rest, quad, lin, x_start)

    cdef void _solve_block(self, Py_ssize_t n, const double* y, const double* b,
                           const double* mean_rest, double quad, double lin,
                           double* x, double* curvature) noexcept nogil:
        # The default's arithmetic, word by word, with the calls inlined: x holds the
        # start values and receives the minimisers; curvature[i] = b^2 l'' where x > 0.
        cdef double delta = self.delta
        cdef Py_ssize_t i
        for i in range(n):
            x[i] = pseudo_huber_coordinate(delta, y[i], b[i], mean_rest[i], quad, lin, x[i])
            if x[i] > 0.0:
                curvature[i] = b[i] * b[i] * pseudo_huber_hessian(delta, y[i],
                                                                  mean_rest[i] + b[i] * x[i])


cdef class PseudoHuberWordByWordLoss(PseudoHuberBlockLoss):
    """PseudoHuberBlockLoss through the default block (for the benchmark's comparison)."""

    name = "pseudo_huber_word_by_word"

    cdef void _solve_block(self, Py_ssize_t n, const double* y, const double* b,
                           const double* mean_rest, double quad, double lin,
                           double* x, double* curvature) noexcept nogil:
        CompiledLoss._solve_block(self, n, y, b, mean_rest, quad, lin, x, curvature)
