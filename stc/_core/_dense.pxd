cdef inline double ordered_dot(const double* a, const double* b, Py_ssize_t n) noexcept nogil:
    """sum_k a[k] b[k] in one fixed order: four interleaved partial sums, then the rest.

    Scalar code: the order is the same on every CPU (no run-time SIMD dispatch),
    and gcc does not reassociate it without -ffast-math.
    """
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t k, n4 = n - n % 4
    for k in range(0, n4, 4):
        s0 += a[k] * b[k]
        s1 += a[k + 1] * b[k + 1]
        s2 += a[k + 2] * b[k + 2]
        s3 += a[k + 3] * b[k + 3]
    for k in range(n4, n):
        s0 += a[k] * b[k]
    return (s0 + s1) + (s2 + s3)
