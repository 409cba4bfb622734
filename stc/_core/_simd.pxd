# The vectorised per-word loops of the coding sweep (see _vector_kernels.h), at the level
# chosen when stc._core._simd is imported. Each returns, or leaves to its caller, exactly
# what the scalar loop it replaces computes.

cdef int poisson_batch(Py_ssize_t n, const double* y, const double* b, const double* rest,
                       double quad, double lin, double* x, double* curvature) noexcept nogil
cdef int gaussian_batch(Py_ssize_t n, const double* y, const double* b, const double* rest,
                        double quad, double lin, double* x, double* curvature) noexcept nogil
cdef double coupling_slope(Py_ssize_t n, const double* s_k, const double* curvatures,
                           double t, double gamma, double quad, double* curvature,
                           double* code_sum) noexcept nogil
cdef void remove_topic(Py_ssize_t n, const double* b, const double* s,
                       double* means) noexcept nogil
cdef void add_topic(Py_ssize_t n, const double* b, const double* s,
                    double* means) noexcept nogil
cdef bint codes_all_zero(Py_ssize_t n, const double* s) noexcept nogil
