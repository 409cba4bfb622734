# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled losses for stc: the pseudo-Huber loss, and a Poisson loss without
a closed-form coordinate update (used by benchmarks/bench_custom_loss.py).

Both subclass stc.losses._base.CompiledLoss and override the three nogil
methods the coding kernel calls. Neither overrides _solve_coordinate, so the
kernel minimises each coordinate with the generic safeguarded Newton solver.
"""
from libc.math cimport sqrt, log

from stc.losses._base cimport CompiledLoss


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

    cdef double _loss(self, double y, double mean) noexcept nogil:
        cdef double r = (mean - y) / self.delta
        return self.delta * self.delta * (sqrt(1.0 + r * r) - 1.0)

    cdef double _gradient(self, double y, double mean) noexcept nogil:
        cdef double r = (mean - y) / self.delta
        return self.delta * r / sqrt(1.0 + r * r)

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        cdef double r = (mean - y) / self.delta
        cdef double q = 1.0 + r * r
        return 1.0 / (q * sqrt(q))


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

    cdef double _gradient(self, double y, double mean) noexcept nogil:
        return 1.0 - y / mean

    cdef double _hessian(self, double y, double mean) noexcept nogil:
        return y / (mean * mean)
