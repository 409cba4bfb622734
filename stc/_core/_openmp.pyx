"""Whether the kernels were compiled with OpenMP, and how many threads to use."""
import os

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int stc_openmp_enabled(void) { return 1; }
    static int stc_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int stc_openmp_enabled(void) { return 0; }
    static int stc_max_threads(void) { return 1; }
    #endif
    """
    int stc_openmp_enabled() nogil
    int stc_max_threads() nogil


def openmp_enabled():
    """True when the compiled kernels run in parallel with OpenMP."""
    return bool(stc_openmp_enabled())


def resolve_n_jobs(n_jobs):
    """Map scikit-learn style ``n_jobs`` (None, -1, k >= 1) to a thread count."""
    if not stc_openmp_enabled():
        return 1
    available = stc_max_threads()
    if n_jobs is None:
        return 1
    if n_jobs < 0:
        return max(1, available + 1 + n_jobs)
    return max(1, int(n_jobs))
