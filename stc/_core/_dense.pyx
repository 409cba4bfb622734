"""Dense products summed in a fixed order, whatever the CPU and the thread count.

numpy's ``@`` hands dense products to BLAS, and OpenBLAS picks its kernel at run
time by the CPU (AVX-512, AVX2, ...); the kernels sum in different orders, so
the same fit differs in its last bits from one machine to the next. The
max-margin loop of MedSTC amplifies such bits through discrete choices (the
most violated labels, the safeguard's comparisons), so its SVM step computes
every product with these functions instead (`ordered_dot` in ``_dense.pxd``):
each output entry is summed by one thread in one order.
"""
import numpy as np

from cython.parallel cimport prange

from stc._core._dense cimport ordered_dot

from stc._core._openmp import resolve_n_jobs


def row_products(A, B, n_jobs=None):
    """``A @ B.T`` for 2-D float arrays, shape (A.shape[0], B.shape[0])."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[1]:
        raise ValueError(f"row_products needs 2-D arrays with as many columns, got shapes "
                         f"{A.shape} and {B.shape}")
    out = np.zeros((A.shape[0], B.shape[0]))
    if A.shape[1]:
        _row_products(A, B, out, resolve_n_jobs(n_jobs))
    return out


cdef void _row_products(const double[:, ::1] A, const double[:, ::1] B, double[:, ::1] out,
                        int n_threads) noexcept nogil:
    cdef Py_ssize_t i, j, n_rows = A.shape[0], n_cols = B.shape[0], width = A.shape[1]
    for i in prange(n_rows, schedule="static", num_threads=n_threads):
        for j in range(n_cols):
            out[i, j] = ordered_dot(&A[i, 0], &B[j, 0], width)


def matvec(A, x):
    """``A @ x`` for a 2-D ``A`` and a 1-D ``x``."""
    return row_products(A, np.reshape(x, (1, -1)))[:, 0]


def vecmat(x, A):
    """``x @ A`` for a 1-D ``x`` and a 2-D ``A``: the rows of ``A`` added in order."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    A = np.ascontiguousarray(A, dtype=np.float64)
    if x.ndim != 1 or A.ndim != 2 or A.shape[0] != x.shape[0]:
        raise ValueError(f"vecmat needs shapes (n,) and (n, p), got {x.shape} and {A.shape}")
    out = np.zeros(A.shape[1])
    _vecmat(x, A, out)
    return out


cdef void _vecmat(const double[::1] x, const double[:, ::1] A, double[::1] out) noexcept nogil:
    cdef Py_ssize_t i, j
    for i in range(A.shape[0]):
        if x[i] != 0.0:  # the zero cut and idle cuts: most weights are zero
            for j in range(A.shape[1]):
                out[j] += x[i] * A[i, j]


def dot(a, b):
    """``a . b`` for 1-D arrays (flattened), as a float."""
    a = np.ascontiguousarray(a, dtype=np.float64).ravel()
    b = np.ascontiguousarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"dot needs arrays of one size, got {a.size} and {b.size}")
    return _dot(a, b)


cdef double _dot(const double[::1] a, const double[::1] b) noexcept nogil:
    if a.shape[0] == 0:
        return 0.0
    return ordered_dot(&a[0], &b[0], a.shape[0])
