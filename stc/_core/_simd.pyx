"""Run-time choice of the coding sweep's vector level (scalar, baseline, avx2, avx512).

The per-word loops of a topic's pass (`_vector_kernels.h`) are compiled at every level
the platform has; on import the best level this CPU supports is chosen, capped by the
environment variable ``STC_SIMD_LEVEL`` if it is set. Every level gives the same bits,
so the level changes speed only. `level`, `levels` and `set_level` report and change
it (tests run the pinned fits at every level the machine has); `stc.show_config`
prints it.
"""
import os
import time

import numpy as np

cdef extern from "_vector_kernels.h":
    ctypedef int (*closed_form_fn)(Py_ssize_t, const double*, const double*, const double*,
                                   double, double, double*, double*) noexcept nogil
    ctypedef double (*coupling_fn)(Py_ssize_t, const double*, const double*, double, double,
                                   double, double*, double*) noexcept nogil
    ctypedef void (*means_fn)(Py_ssize_t, const double*, const double*, double*) noexcept nogil
    ctypedef int (*all_zero_fn)(Py_ssize_t, const double*) noexcept nogil
    ctypedef double (*throughput_fn)(int, Py_ssize_t, Py_ssize_t, const double*,
                                     const double*, double*) noexcept nogil
    ctypedef struct stc_kernel_table:
        int level
        throughput_fn throughput
        closed_form_fn poisson
        closed_form_fn gaussian
        coupling_fn coupling
        means_fn remove_topic
        means_fn add_topic
        all_zero_fn all_zero
    const char* stc_level_name(int level) nogil
    enum:
        STC_OP_SQRT
        STC_OP_DIV
        STC_OP_MUL
        STC_OP_CHAIN
    int stc_level_compiled(int level) nogil
    int stc_level_supported(int level) nogil
    stc_kernel_table stc_kernel_table_of(int level) nogil

LEVEL_NAMES = tuple(stc_level_name(level).decode() for level in range(4))
ENVIRONMENT_VARIABLE = "STC_SIMD_LEVEL"

cdef stc_kernel_table active


cdef int poisson_batch(Py_ssize_t n, const double* y, const double* b, const double* rest,
                       double quad, double lin, double* x, double* curvature) noexcept nogil:
    return active.poisson(n, y, b, rest, quad, lin, x, curvature)


cdef int gaussian_batch(Py_ssize_t n, const double* y, const double* b, const double* rest,
                        double quad, double lin, double* x, double* curvature) noexcept nogil:
    return active.gaussian(n, y, b, rest, quad, lin, x, curvature)


cdef double coupling_slope(Py_ssize_t n, const double* s_k, const double* curvatures,
                           double t, double gamma, double quad, double* curvature,
                           double* code_sum) noexcept nogil:
    return active.coupling(n, s_k, curvatures, t, gamma, quad, curvature, code_sum)


cdef void remove_topic(Py_ssize_t n, const double* b, const double* s,
                       double* means) noexcept nogil:
    active.remove_topic(n, b, s, means)


cdef void add_topic(Py_ssize_t n, const double* b, const double* s,
                    double* means) noexcept nogil:
    active.add_topic(n, b, s, means)


cdef bint codes_all_zero(Py_ssize_t n, const double* s) noexcept nogil:
    return active.all_zero(n, s) != 0


def _codes_all_zero(const double[::1] s):
    """`codes_all_zero` of ``s`` at the level in use (for the tests)."""
    return bool(codes_all_zero(s.shape[0], &s[0] if s.shape[0] else NULL))


def levels():
    """The levels this build holds and this CPU runs, lowest first."""
    return tuple(name for i, name in enumerate(LEVEL_NAMES) if stc_level_supported(i))


def compiled_levels():
    """The levels this build holds, whether or not this CPU runs them."""
    return tuple(name for i, name in enumerate(LEVEL_NAMES) if stc_level_compiled(i))


def level():
    """The level the coding kernels use now."""
    return LEVEL_NAMES[active.level]


def _index(name, what):
    if not isinstance(name, str) or name.strip().lower() not in LEVEL_NAMES:
        raise ValueError(f"{what} must be one of {', '.join(LEVEL_NAMES)}; got {name!r}")
    return LEVEL_NAMES.index(name.strip().lower())


def set_level(name):
    """Use level ``name`` (one of `levels`) from now on; returns the previous level.

    Not while a coding call runs in another thread: the kernels read the level
    without a lock.
    """
    global active
    index = _index(name, "level")
    if not stc_level_supported(index):
        raise ValueError(f"level {name!r} is not supported here: this build and CPU "
                         f"run {', '.join(levels())}")
    previous = level()
    active = stc_kernel_table_of(index)
    return previous


def best_level(cap=None):
    """The highest level this CPU runs, no higher than ``cap`` (a level name) if given."""
    top = len(LEVEL_NAMES) - 1 if cap is None else _index(cap, ENVIRONMENT_VARIABLE)
    return max(i for i in range(top + 1) if stc_level_supported(i))


active = stc_kernel_table_of(best_level(os.environ.get(ENVIRONMENT_VARIABLE) or None))


THROUGHPUT_OPERATIONS = {"sqrt": STC_OP_SQRT, "div": STC_OP_DIV, "mul": STC_OP_MUL,
                         "chain": STC_OP_CHAIN}


def throughput(operation, n=512, repeats=20000, rounds=5):
    """Seconds per element of ``operation`` at the level in use, on one thread, data in L1.

    "sqrt", "div" and "mul" run the level's vector instructions over arrays of
    ``n`` doubles; "chain" adds them one after the other into one sum (each
    addition waits for the last, as the kernels' ordered sums over words do).
    For benchmarks/bench_roofline.py: the machine's bounds at the width the
    kernels use. Best of ``rounds``.
    """
    if operation not in THROUGHPUT_OPERATIONS:
        raise ValueError(f"operation must be one of {', '.join(THROUGHPUT_OPERATIONS)}; "
                         f"got {operation!r}")
    cdef int op = THROUGHPUT_OPERATIONS[operation]
    rng = np.random.default_rng(0)
    cdef double[::1] a = rng.uniform(1.0, 2.0, n), b = rng.uniform(1.0, 2.0, n)
    cdef double[::1] out = np.empty(n)
    cdef Py_ssize_t size = n, count = repeats
    best = np.inf
    for _ in range(rounds):
        start = time.perf_counter()
        with nogil:
            active.throughput(op, size, count, &a[0], &b[0], &out[0])
        best = min(best, time.perf_counter() - start)
    return best / (n * repeats)
