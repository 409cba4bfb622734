# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled losses for stc: the pseudo-Huber loss, and a Poisson loss without
a closed-form coordinate update (used by benchmarks/bench_custom_loss.py).

Both subclass stc.losses._base.CompiledLoss and override the three nogil
methods the coding kernel calls. Neither overrides _solve_coordinate, so the
kernel minimises each coordinate with the generic safeguarded Newton solver.
"""
from libc.math cimport fabs, log, sqrt

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
        cdef double r = (mean - y) / self.delta
        return self.delta * r / sqrt_one_plus_square(fabs(r))

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        cdef double q = 1.0 / sqrt_one_plus_square(fabs(mean - y) / self.delta)
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
