"""Exact Euclidean projection onto the simplex {x >= 0, sum(x) = radius}.

Condat's algorithm (L. Condat, "Fast projection onto the simplex and the l1
ball", Math. Programming 2016): one pass builds a candidate set whose running
mean estimates the threshold tau, a cleanup pass removes the entries that fall
below it; expected linear time. Rows are projected in parallel.
"""
from cython.parallel cimport parallel, prange
from libc.stdlib cimport free, malloc

import numpy as np

from stc._core._openmp import resolve_n_jobs


cdef double simplex_threshold(const double* y, Py_ssize_t n, double radius,
                              double* active, double* waiting) noexcept nogil:
    """Return tau such that max(y - tau, 0) sums to ``radius``.

    ``active`` and ``waiting`` are scratch buffers of length ``n``.
    """
    cdef Py_ssize_t i, j, n_active = 1, n_waiting = 0, n_left
    cdef double tau = y[0] - radius
    cdef bint removed = True
    active[0] = y[0]
    for i in range(1, n):
        if y[i] > tau:
            tau = tau + (y[i] - tau) / (n_active + 1)
            if tau > y[i] - radius:
                active[n_active] = y[i]
                n_active += 1
            else:
                # y[i] alone beats the current candidates: park them, restart.
                for j in range(n_active):
                    waiting[n_waiting] = active[j]
                    n_waiting += 1
                active[0] = y[i]
                n_active = 1
                tau = y[i] - radius
    for j in range(n_waiting):
        if waiting[j] > tau:
            active[n_active] = waiting[j]
            n_active += 1
            tau = tau + (waiting[j] - tau) / n_active
    while removed:
        removed = False
        j = 0
        for i in range(n_active):
            if active[i] > tau:
                active[j] = active[i]
                j += 1
            else:
                removed = True
                n_left = j + (n_active - i - 1)
                if n_left > 0:
                    tau = tau + (tau - active[i]) / n_left
        n_active = j
    return tau


cdef void project_row(double* y, Py_ssize_t n, double radius,
                      double* active, double* waiting) noexcept nogil:
    cdef double tau = simplex_threshold(y, n, radius, active, waiting)
    cdef Py_ssize_t i
    for i in range(n):
        y[i] = y[i] - tau if y[i] > tau else 0.0


def project_rows_onto_simplex(V, double radius=1.0, n_jobs=None):
    """Project every row of ``V`` onto {x >= 0, sum(x) = radius}.

    Returns a new C-contiguous float64 array; rows are handled in parallel.
    """
    if not radius > 0:
        raise ValueError(f"radius must be positive, got {radius!r}")
    out = np.array(V, dtype=np.float64, order="C", copy=True, ndmin=2)
    if out.ndim != 2:
        raise ValueError(f"V must be 1-D or 2-D, got {out.ndim} dimensions")
    if out.shape[1] == 0:
        raise ValueError("V must have at least one column")
    if not np.all(np.isfinite(out)):
        raise ValueError("V contains NaN or infinite values")
    cdef double[:, ::1] rows = out
    cdef Py_ssize_t n_rows = rows.shape[0], n = rows.shape[1], r
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef double* active
    cdef double* waiting
    with nogil, parallel(num_threads=n_threads):
        active = <double*> malloc(2 * n * sizeof(double))
        waiting = active + n
        for r in prange(n_rows, schedule="static"):
            project_row(&rows[r, 0], n, radius, active, waiting)
        free(active)
    return out


def project_onto_simplex(v, double radius=1.0):
    """Project a 1-D vector onto {x >= 0, sum(x) = radius}."""
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"v must be 1-D, got shape {v.shape}")
    return project_rows_onto_simplex(v[None, :], radius)[0]
