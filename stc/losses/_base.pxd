# Compiled loss interface: the coding kernel calls these methods without the GIL.
# A user's compiled loss subclasses CompiledLoss in its own extension module
# (`from stc.losses._base cimport CompiledLoss`) and overrides _loss, _gradient
# and _hessian; _solve_coordinate then runs the generic safeguarded Newton
# solver, or is overridden by a closed form.
# _solve_block is what the kernel calls: the coordinate problems of one topic's
# words (one call per topic and document). Its default loops over
# _solve_coordinate; a loss may override it with its own loop (inlined, or
# vectorised as the built-in Poisson and Gaussian losses' are) that gives the
# same results.

cdef class CompiledLoss:
    cdef readonly double mean_lower     # the mean must lie in the open interval
    cdef readonly double mean_upper     # (mean_lower, mean_upper)

    cdef double _loss(self, double y, double mean) noexcept nogil
    cdef double _gradient(self, double y, double mean) noexcept nogil
    cdef double _hessian(self, double y, double mean) noexcept nogil
    cdef double _solve_coordinate(self, double y, double b, double mean_rest,
                                  double quad, double lin, double x_start) noexcept nogil
    cdef double _newton_coordinate(self, double y, double b, double mean_rest,
                                   double quad, double lin, double x_start) noexcept nogil
    cdef void _solve_block(self, Py_ssize_t n, const double* y, const double* b,
                           const double* mean_rest, double quad, double lin,
                           double* x, double* curvature) noexcept nogil
