"""Throughput probes of the vector levels, for benchmarks/bench_roofline.py only.

Kept out of the kernels' dispatch tables: nothing in the package imports this module.
"""
import time

import numpy as np

from stc._simd._dispatch cimport level_in_use

cdef extern from "_throughput.h":
    enum:
        STC_OP_SQRT
        STC_OP_DIV
        STC_OP_MUL
        STC_OP_CHAIN
    double stc_throughput(int level, int op, Py_ssize_t n, Py_ssize_t repeats,
                          const double* a, const double* b, double* out) noexcept nogil

OPERATIONS = {"sqrt": STC_OP_SQRT, "div": STC_OP_DIV, "mul": STC_OP_MUL, "chain": STC_OP_CHAIN}


def throughput(operation, n=512, repeats=20000, rounds=5):
    """Seconds per element of ``operation`` at the level in use, on one thread, data in L1.

    "sqrt", "div" and "mul" run the level's vector instructions over arrays of
    ``n`` doubles; "chain" adds them one after the other into one sum (each
    addition waits for the last, as the kernels' ordered sums over words do).
    For benchmarks/bench_roofline.py: the machine's bounds at the width the
    kernels use. Best of ``rounds``.
    """
    if operation not in OPERATIONS:
        raise ValueError(f"operation must be one of {', '.join(OPERATIONS)}; "
                         f"got {operation!r}")
    cdef int op = OPERATIONS[operation]
    cdef int level = level_in_use()[0]
    rng = np.random.default_rng(0)
    cdef double[::1] a = rng.uniform(1.0, 2.0, n), b = rng.uniform(1.0, 2.0, n)
    cdef double[::1] out = np.empty(n)
    cdef Py_ssize_t size = n, count = repeats
    best = np.inf
    for _ in range(rounds):
        start = time.perf_counter()
        with nogil:
            stc_throughput(level, op, size, count, &a[0], &b[0], &out[0])
        best = min(best, time.perf_counter() - start)
    return best / (n * repeats)
