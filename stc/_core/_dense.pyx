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


def loss_augmented_argmax(X, W, y_index, double cost, n_jobs=None):
    """Most violated label and hinge of every row (the cutting-plane SVM's oracle), fused.

    Row d's scores are s_c = x_d . W_c + Delta_c with Delta_c = 0 at the true
    label y_d and ``cost`` elsewhere, each dot summed as `row_products` sums
    it; ybar_d is the first index of the largest score (a NaN counts as the
    largest, as in numpy's argmax) and h_d = s_ybar - s_{y_d}; where h_d <= 0
    the row is not violated: ybar_d = y_d, h_d = 0. The same numbers, bit for
    bit, as `row_products` + the loss matrix + numpy's argmax, without the
    (n_rows, n_classes) score matrix or numpy's passes over it.
    Returns (ybar as intp, hinge as float64), one entry per row.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    W = np.ascontiguousarray(W, dtype=np.float64)
    labels = np.ascontiguousarray(y_index, dtype=np.intp)
    if X.ndim != 2 or W.ndim != 2 or X.shape[1] != W.shape[1] or W.shape[0] == 0:
        raise ValueError(f"loss_augmented_argmax needs 2-D X and W with as many columns and "
                         f"a class, got shapes {X.shape} and {W.shape}")
    if labels.shape != (X.shape[0],) or (labels.size and (
            labels.min() < 0 or labels.max() >= W.shape[0])):
        raise ValueError("y_index must hold one class index in [0, n_classes) per row of X")
    ybar = np.empty(X.shape[0], dtype=np.intp)
    hinge = np.empty(X.shape[0], dtype=np.float64)
    _loss_augmented_argmax(X, W, labels, cost, ybar, hinge, resolve_n_jobs(n_jobs))
    return ybar, hinge


cdef void _loss_augmented_argmax(const double[:, ::1] X, const double[:, ::1] W,
                                 const Py_ssize_t[::1] labels, double cost,
                                 Py_ssize_t[::1] ybar, double[::1] hinge,
                                 int n_threads) noexcept nogil:
    cdef Py_ssize_t d, c, y, best_c, n_rows = X.shape[0], n_classes = W.shape[0]
    cdef Py_ssize_t width = X.shape[1]
    cdef double best, score, true_score, h
    cdef bint found_nan
    for d in prange(n_rows, schedule="static", num_threads=n_threads):
        y = labels[d]
        best_c = 0
        best = 0.0
        true_score = 0.0
        found_nan = False
        for c in range(n_classes):
            score = (ordered_dot(&X[d, 0], &W[c, 0], width) if width else 0.0) + (
                0.0 if c == y else cost)
            if c == y:
                true_score = score
            if found_nan:
                continue  # numpy's argmax: the first NaN is the answer
            if score != score:
                best_c, best, found_nan = c, score, True
            elif c == 0 or score > best:
                best_c, best = c, score
        h = best - true_score
        if h <= 0.0:
            best_c = y
            h = 0.0
        ybar[d] = best_c
        hinge[d] = h
