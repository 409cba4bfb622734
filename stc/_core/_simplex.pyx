"""Exact Euclidean projection onto the simplex {x >= 0, sum(x) = radius}.

Condat's algorithm (L. Condat, "Fast projection onto the simplex and the l1
ball", Math. Programming 2016): one pass builds a candidate set whose running
mean estimates the threshold tau, a cleanup pass removes the entries that fall
below it; expected linear time. Rows are projected in parallel.
"""
from cython.parallel cimport parallel, prange
from libc.math cimport INFINITY, NAN, fabs
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
    """Project ``y`` in place.

    The projection commutes with a shift of every entry, so the row is first
    shifted by its largest entry: the threshold is then computed from values
    in [-radius, 0] and keeps the precision of ``radius`` even when the
    entries are ~1e308 (otherwise tau = y - radius rounds to y) or all equal
    to -8e12 (the running means lose the 1/n of radius). Entries below
    -radius can only get 0 (the threshold is at least -radius once the
    largest entry is 0), so they are clamped there, which also keeps
    differences such as 1e308 - (-1e308) from overflowing.
    """
    cdef double largest = y[0], tau
    cdef Py_ssize_t i
    for i in range(1, n):
        if y[i] > largest:
            largest = y[i]
    for i in range(n):
        y[i] = y[i] - largest
        if not y[i] > -radius:
            y[i] = -radius
    tau = simplex_threshold(y, n, radius, active, waiting)
    for i in range(n):
        y[i] = y[i] - tau if y[i] > tau else 0.0


def project_rows_onto_simplex(V, double radius=1.0, n_jobs=None):
    """Project every row of ``V`` onto {x >= 0, sum(x) = radius}.

    Returns a new C-contiguous float64 array; rows are handled in parallel.
    """
    if not (radius > 0 and radius < 1e300):
        raise ValueError(f"radius must be positive and finite (below 1e300), got {radius!r}")
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
    cdef double* active = NULL
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    with nogil, parallel(num_threads=n_threads):
        active = <double*> malloc(2 * n * sizeof(double))
        if active == NULL:
            failed[0] = 1
        for r in prange(n_rows, schedule="static"):
            if active != NULL:
                project_row(&rows[r, 0], n, radius, active, active + n)
        free(active)
    if failed[0]:
        raise MemoryError("could not allocate the work space of the simplex projection")
    return out


def project_onto_simplex(v, double radius=1.0):
    """Project a 1-D vector onto {x >= 0, sum(x) = radius}."""
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"v must be 1-D, got shape {v.shape}")
    return project_rows_onto_simplex(v[None, :], radius)[0]


cdef double row_multiplier(const double* a, const double* c, Py_ssize_t n, int max_iter,
                           double* packed) noexcept nogil:
    """nu with sum_i a_i / (c_i + nu) = 1 over the entries with a_i > 0 (NaN if a = 0).

    The entries with a > 0 are packed (`stc_pack_positive`) and `packed_newton`
    searches u = nu + min c over them, as `mm_update_row` does. ``packed`` is
    scratch of 3 n doubles.
    """
    cdef double* packed_a = packed
    cdef double* packed_d = packed + n
    cdef double lowest, spare, total
    cdef Py_ssize_t q, m
    m = stc_pack_positive(a, c, n, packed_a, packed_d, <Py_ssize_t*> (packed + 2 * n), &total,
                          &lowest, &spare)
    if total == 0.0:
        return NAN
    for q in range(m):
        packed_d[q] = packed_d[q] - lowest
    return packed_newton(packed_a, packed_d, m, total, lowest, max_iter, NAN) - lowest


def simplex_multipliers(a_rows, c_rows, int max_iter=100, n_jobs=None):
    """Row-wise `row_multiplier` for (n_rows, n) arrays, rows in parallel.

    Rows whose ``a`` is all zero get NaN.
    """
    cdef const double[:, ::1] a = np.ascontiguousarray(a_rows, dtype=np.float64)
    cdef const double[:, ::1] c = np.ascontiguousarray(c_rows, dtype=np.float64)
    if a.shape[0] != c.shape[0] or a.shape[1] != c.shape[1]:
        raise ValueError("a_rows and c_rows must have the same shape")
    cdef Py_ssize_t n_rows = a.shape[0], n = a.shape[1], r
    cdef int n_threads = resolve_n_jobs(n_jobs)
    out = np.empty(n_rows, dtype=np.float64)
    cdef double[::1] out_v = out
    # scratch of 3 n doubles per row (rows run in parallel)
    cdef double[:, ::1] packed = np.empty((n_rows, 3 * max(n, 1)))
    with nogil:
        for r in prange(n_rows, schedule="static", num_threads=n_threads):
            out_v[r] = row_multiplier(&a[r, 0], &c[r, 0], n, max_iter, &packed[r, 0])
    return out


cdef double fill_row_with_spare_mass(const double* a, const double* c, Py_ssize_t n,
                                     double spare, double* out) noexcept nogil:
    """The row at nu = -c_spare (see `mm_update_row`); returns its sum, about one.

    Entries with a_n > 0 get a_n / (c_n - c_spare); the mass they leave goes in
    equal shares to the entries with a_n = 0 and c_n = c_spare.
    """
    cdef double total = 0.0, slack
    cdef Py_ssize_t i, n_spare = 0
    for i in range(n):
        if a[i] > 0.0:
            out[i] = a[i] / (c[i] - spare)
            total = total + out[i]
        else:
            out[i] = 0.0
            if c[i] == spare:
                n_spare += 1
    slack = 1.0 - total if total < 1.0 else 0.0
    for i in range(n):
        if not a[i] > 0.0 and c[i] == spare:
            out[i] = slack / n_spare
    return total + slack


cdef extern from *:
    """
    #include <math.h>
    /* One pass over a row of the MM update: packs the entries with a > 0 (their a,
       their c and their index, in order) and returns their count; *total receives
       the sum of their a (in order), *lowest the smallest of their c and *spare the
       smallest c of the others. Branch-free: a > 0 follows no pattern (40 to 80 % of
       the entries), and a mispredicted branch per entry cost more than the work. A
       skipped entry adds +0.0 to the total, which leaves it unchanged (it is +0.0 or
       positive), and its slot is overwritten by the next entry. No reassociation:
       the same sums as a loop that tests a > 0. */
    static Py_ssize_t stc_pack_positive(const double* a, const double* c, Py_ssize_t n,
                                        double* packed_a, double* packed_c,
                                        Py_ssize_t* index, double* total_out,
                                        double* lowest_out, double* spare_out) {
        double total = 0.0, lowest = INFINITY, spare = INFINITY;
        Py_ssize_t i, m = 0;
        for (i = 0; i < n; i++) {
            double ai = a[i], ci = c[i];
            int positive = ai > 0.0;
            total = total + (positive ? ai : 0.0);
            lowest = (positive && ci < lowest) ? ci : lowest;
            spare = (!positive && ci < spare) ? ci : spare;
            packed_a[m] = ai;
            packed_c[m] = ci;
            index[m] = i;
            m += positive;
        }
        *total_out = total;
        *lowest_out = lowest;
        *spare_out = spare;
        return m;
    }
    """
    Py_ssize_t stc_pack_positive(const double* a, const double* c, Py_ssize_t n,
                                 double* packed_a, double* packed_c, Py_ssize_t* index,
                                 double* total_out, double* lowest_out,
                                 double* spare_out) noexcept nogil


cdef double packed_newton(const double* packed_a, const double* packed_d, Py_ssize_t m,
                          double total, double lowest, int max_iter,
                          double nu_start) noexcept nogil:
    """u = nu + min c, where nu solves sum_i a_i / (c_i + nu) = 1 over the packed entries.

    The entries are those with a_i > 0 (`stc_pack_positive`), ``packed_d`` =
    c - min c and ``total`` the sum of the packed a. In u the function is
    convex and decreasing on (0, total], where the root lies: safeguarded
    Newton (bisection when a step leaves the bracket), denominators
    (c_i - min c) + u computed without cancellation. The caller should form
    the same denominators: when nu ~ -min c, c_i + nu would cancel (u may be
    1e-20 and min c 144, where nu = u - min c rounds to -min c). A finite
    ``nu_start`` (e.g. the previous MM step's nu) is the first iterate when it
    lies in the bracket; otherwise Newton starts at the bracket's middle.
    """
    cdef Py_ssize_t i
    cdef double low = 0.0, high = total, u, f, df, ratio, step, inverse
    cdef int it
    u = nu_start + lowest
    if not (u > 0.0 and u < high):  # also catches a NaN start
        u = 0.5 * high
    for it in range(max_iter):
        f = -1.0
        df = 0.0
        for i in range(m):
            inverse = 1.0 / (packed_d[i] + u)
            ratio = packed_a[i] * inverse
            f += ratio
            df -= ratio * inverse
        if f == 0.0:
            break
        if f < 0.0:
            high = u
        else:
            low = u
        step = u - f / df
        if not (step > low and step <= high):
            step = 0.5 * (low + high)
        if fabs(step - u) <= 1e-14 * u:
            u = step
            break
        u = step
    return u


cdef double mm_update_row(const double* a, const double* c, const double* beta_row,
                          double* out, Py_ssize_t n, int max_iter,
                          double nu_start, double* packed) noexcept nogil:
    """One topic of `mm_update_rows`: ``out`` receives the new row; returns nu.

    The MM surrogate sum_n (c_n beta_n - a_n log beta_n) is minimised on the
    simplex. Its KKT conditions give beta_n = a_n / (c_n + nu) where a_n > 0,
    and require c_n + nu >= 0 where a_n = 0. So nu is the root nu* of the
    multiplier equation unless nu* < -c_spare, c_spare the smallest c_n with
    a_n = 0 (0 for a term that never occurs): then nu = -c_spare, and the mass
    the other entries leave, 1 - sum a_n / (c_n - c_spare), goes to the
    entries with a_n = 0 and c_n = c_spare (shared equally). This happens only
    when the codes overshoot the data (nu* < 0): moving weight onto a term
    that never occurs then lowers every mean at no cost, which is where the
    exact minimiser of F goes too. A collapsed topic (every a_n = 0) is copied.

    ``packed`` is scratch of 3 n doubles. The entries with a_n > 0 are packed
    once (`stc_pack_positive`) and the search and the row work on them only:
    the same values, summed in the same order, as a loop over all n entries
    that skips the others (their 0 adds nothing to the row's sum).
    """
    cdef double* packed_a = packed
    cdef double* packed_d = packed + n
    cdef Py_ssize_t* index = <Py_ssize_t*> (packed + 2 * n)
    cdef double lowest, spare, total, u, nu, value
    cdef Py_ssize_t i, q, m
    m = stc_pack_positive(a, c, n, packed_a, packed_d, index, &total, &lowest, &spare)
    u = NAN
    if total != 0.0:
        for q in range(m):
            packed_d[q] = packed_d[q] - lowest
        u = packed_newton(packed_a, packed_d, m, total, lowest, max_iter, nu_start)
    if u != u:  # NaN: collapsed topic (total 0), keep it
        for i in range(n):
            out[i] = beta_row[i]
        return NAN
    if u < lowest - spare:
        nu = -spare
        total = fill_row_with_spare_mass(a, c, n, spare, out)
        for i in range(n):
            out[i] = out[i] / total
        return nu
    nu = u - lowest
    total = 0.0
    for i in range(n):
        out[i] = 0.0
    if u >= lowest:  # nu >= 0: c + nu >= 0 + 0 does not cancel
        for q in range(m):
            value = packed_a[q] / (c[index[q]] + nu)
            out[index[q]] = value
            total = total + value
    else:  # (c - min c) + u: c + nu could cancel (see packed_newton)
        for q in range(m):
            value = packed_a[q] / (packed_d[q] + u)
            out[index[q]] = value
            total = total + value
    for q in range(m):  # the others stay 0 = 0 / total
        out[index[q]] = out[index[q]] / total
    return nu


def mm_update_rows(const double[:, ::1] beta, const double[:, ::1] weighted_sums,
                   const double[:, ::1] code_sums, double[::1] multipliers,
                   int max_iter=100, n_jobs=None):
    """The Poisson MM update of every topic (see `stc._learning.dictionary`), topics in parallel.

    For topic k: a_n = beta_kn * weighted_sums[n, k], c_n = code_sums[k, n];
    the new row is a_n / (c_n + nu_k), with nu_k from `packed_newton`
    so that it sums to one (then divided by its sum, for the last rounding
    error), or, when the codes overshoot the data, nu_k = -c_spare and the
    spare mass on the entries with a_n = 0 (`mm_update_row`). A topic whose a
    is all zero (no word codes: collapsed) is returned unchanged. ``multipliers``
    (K,) holds start values for nu (NaN: none)
    and receives the new nu (NaN for collapsed topics); successive MM steps
    change nu little, so the previous step's values save Newton iterations.
    Returns the new (K, N) dictionary; `mm_exact_rows`, which takes a itself as (K, N),
    does the work.
    """
    cdef Py_ssize_t n_topics = beta.shape[0], n = beta.shape[1]
    if (weighted_sums.shape[0] != n or weighted_sums.shape[1] != n_topics
            or code_sums.shape[0] != n_topics or code_sums.shape[1] != n
            or multipliers.shape[0] != n_topics):
        raise ValueError("weighted_sums must be (n_features, n_topics), code_sums "
                         "(n_topics, n_features) and multipliers (n_topics,) for a "
                         "(n_topics, n_features) beta")
    # a in (K, N): the same products, one rounding each, as a per-topic gather would make
    responsibilities = np.multiply(beta, np.asarray(weighted_sums).T, order="C")
    return mm_exact_rows(beta, responsibilities, code_sums, multipliers, max_iter, n_jobs)


def mm_exact_rows(const double[:, ::1] beta, const double[:, ::1] responsibilities,
                  const double[:, ::1] code_sums, double[::1] multipliers,
                  int max_iter=100, n_jobs=None, out=None):
    """The MM update of `mm_update_rows` with a given as a (K, N) array (``responsibilities``).

    The batch fit forms a = beta * sums in the statistics pass
    (`stc._core._sparse_ops.mm_step_statistics`), in this layout, so no
    strided gather of (N, K) sums is needed here. Unlike `mm_minimiser_rows`
    (online learning's faster search), the multiplier is found exactly as
    `mm_update_rows` finds it. ``out``, if given, a C-contiguous float64
    (K, N) array other than ``beta``, receives the result. Returns it.
    """
    cdef Py_ssize_t n_topics = beta.shape[0], n = beta.shape[1], k
    if (responsibilities.shape[0] != n_topics or responsibilities.shape[1] != n
            or code_sums.shape[0] != n_topics or code_sums.shape[1] != n
            or multipliers.shape[0] != n_topics):
        raise ValueError("responsibilities and code_sums must have beta's (n_topics, "
                         "n_features) shape and multipliers (n_topics,)")
    if out is None:
        out = np.empty((n_topics, n), dtype=np.float64)
    elif not (isinstance(out, np.ndarray) and out.dtype == np.float64
              and out.shape == (n_topics, n) and out.flags.c_contiguous
              and out.flags.writeable) or np.may_share_memory(out, beta):
        raise ValueError("out must be a writable C-contiguous float64 array of beta's shape "
                         f"({n_topics}, {n}), not beta itself")
    cdef double[:, ::1] out_v = out
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef double* packed = NULL
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    with nogil, parallel(num_threads=n_threads):
        packed = <double*> malloc(3 * (n if n > 0 else 1) * sizeof(double))
        if packed == NULL:
            failed[0] = 1
        # dynamic: a topic's cost follows its count of a > 0, which varies 2-fold
        for k in prange(n_topics, schedule="dynamic", chunksize=1):
            if packed == NULL:
                continue
            multipliers[k] = mm_update_row(&responsibilities[k, 0], &code_sums[k, 0],
                                           &beta[k, 0], &out_v[k, 0], n, max_iter,
                                           multipliers[k], packed)
        free(packed)
    if failed[0]:
        raise MemoryError("could not allocate the work space of the MM update")
    return out


cdef extern from *:
    """
    /* Sums of the multiplier equation over packed entries (all with a > 0):
       S = sum a / (d + u) and dS = sum a / (d + u)^2. The SIMD reduction's
       order is fixed by the build, not by the thread count. */
    static void stc_secular_sums(const double* a, const double* d, Py_ssize_t n, double u,
                                 double* s_out, double* ds_out) {
        double s = 0.0, ds = 0.0;
        Py_ssize_t i;
        #pragma omp simd reduction(+:s, ds)
        for (i = 0; i < n; i++) {
            double inverse = 1.0 / (d[i] + u);
            double ratio = a[i] * inverse;
            s += ratio;
            ds += ratio * inverse;
        }
        *s_out = s;
        *ds_out = ds;
    }

    /* out = a / ((c - lowest) + u) where a > 0, else 0; returns the sum of out. */
    static double stc_fill_row(const double* a, const double* c, Py_ssize_t n, double lowest,
                               double u, double* out) {
        double total = 0.0;
        Py_ssize_t i;
        #pragma omp simd reduction(+:total)
        for (i = 0; i < n; i++) {
            double value = a[i] > 0.0 ? a[i] / ((c[i] - lowest) + u) : 0.0;
            out[i] = value;
            total += value;
        }
        return total;
    }

    static void stc_scale_row(double* out, Py_ssize_t n, double total) {
        Py_ssize_t i;
        #pragma omp simd
        for (i = 0; i < n; i++) {
            out[i] = out[i] / total;
        }
    }
    """
    void stc_secular_sums(const double* a, const double* d, Py_ssize_t n, double u,
                          double* s_out, double* ds_out) noexcept nogil
    double stc_fill_row(const double* a, const double* c, Py_ssize_t n, double lowest,
                        double u, double* out) noexcept nogil
    void stc_scale_row(double* out, Py_ssize_t n, double total) noexcept nogil


cdef double minimiser_row(const double* a, const double* c, const double* beta_row,
                          double* out, Py_ssize_t n, int max_iter, double nu_start,
                          double* packed_a, double* packed_d) noexcept nogil:
    """`mm_update_row`'s exact minimiser, with a faster search for the multiplier.

    Same solution and cases (root nu* of sum a_n / (c_n + nu) = 1; the
    overshoot case nu = -c_spare; a collapsed topic is copied), but the
    entries with a_n > 0 are packed once into ``packed_a`` and ``packed_d`` =
    c - min c (scratch of n doubles each), the sums run as SIMD reductions,
    and Newton's method is applied to 1 / S(u) - 1 with S(u) = sum a / (d + u):
    1 / S is increasing, concave and nearly linear where one entry dominates,
    so from a warm start it takes fewer steps than Newton on S - 1. Online
    learning calls it once per MM step on all K x N statistics, so its cost
    counts.
    """
    cdef double lowest = INFINITY, spare = INFINITY, total = 0.0, low = 0.0, high, u
    cdef double sums, slope, step, nu
    cdef Py_ssize_t i, m = 0
    cdef int it
    for i in range(n):
        if a[i] > 0.0:
            total = total + a[i]
            if c[i] < lowest:
                lowest = c[i]
        elif c[i] < spare:
            spare = c[i]
    if total == 0.0:  # collapsed topic: keep it
        for i in range(n):
            out[i] = beta_row[i]
        return NAN
    for i in range(n):
        if a[i] > 0.0:
            packed_a[m] = a[i]
            packed_d[m] = c[i] - lowest
            m += 1
    high = total
    u = nu_start + lowest
    if not (u > 0.0 and u < high):  # also catches a NaN start
        u = 0.5 * high
    for it in range(max_iter):
        stc_secular_sums(packed_a, packed_d, m, u, &sums, &slope)
        if sums == 1.0:
            break
        if sums < 1.0:
            high = u
        else:
            low = u
        step = u + sums * (sums - 1.0) / slope  # Newton on 1 / S(u) - 1
        if not (step > low and step <= high):
            step = 0.5 * (low + high)
        if fabs(step - u) <= 1e-14 * u:
            u = step
            break
        u = step
    if u < lowest - spare:  # codes overshoot the data: nu = -c_spare, spare mass
        total = fill_row_with_spare_mass(a, c, n, spare, out)
        nu = -spare
    else:
        total = stc_fill_row(a, c, n, lowest, u, out)
        nu = u - lowest
    stc_scale_row(out, n, total)
    return nu


def mm_minimiser_rows(const double[:, ::1] beta, const double[:, ::1] responsibilities,
                      const double[:, ::1] code_sums, double[::1] multipliers,
                      int max_iter=100, n_jobs=None, out=None):
    """`mm_update_rows` for a given a (``responsibilities``, (K, N)) instead of beta * sums.

    Online learning keeps a as a running average, so it cannot be formed
    from one beta. Each row is the exact minimiser of
    sum_n (c_n beta_n - a_n log beta_n) on the simplex, `mm_update_row`'s
    solution computed by `minimiser_row`; a topic whose a is all zero keeps
    its row of ``beta``. ``multipliers`` as in `mm_update_rows`. ``out``, a
    C-contiguous float64 (K, N) array, receives the result; it may be
    ``beta`` itself (a row of beta is read only to be copied, for a
    collapsed topic), which saves a (K, N) array. Returns the new (K, N)
    dictionary (``out`` when given).
    """
    cdef Py_ssize_t n_topics = beta.shape[0], n = beta.shape[1], k
    if (responsibilities.shape[0] != n_topics or responsibilities.shape[1] != n
            or code_sums.shape[0] != n_topics or code_sums.shape[1] != n
            or multipliers.shape[0] != n_topics):
        raise ValueError("responsibilities and code_sums must have beta's (n_topics, "
                         "n_features) shape and multipliers (n_topics,)")
    cdef int n_threads = resolve_n_jobs(n_jobs)
    if out is None:
        out = np.empty((n_topics, n), dtype=np.float64)
    elif not (isinstance(out, np.ndarray) and out.dtype == np.float64
              and out.shape == (n_topics, n) and out.flags.c_contiguous):
        raise ValueError("out must be a C-contiguous float64 array of beta's shape "
                         f"({n_topics}, {n})")
    cdef double[:, ::1] out_v = out
    cdef double* packed = NULL
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    with nogil, parallel(num_threads=n_threads):
        packed = <double*> malloc(2 * (n if n > 0 else 1) * sizeof(double))
        if packed == NULL:
            failed[0] = 1
        for k in prange(n_topics, schedule="static"):
            if packed == NULL:
                continue
            multipliers[k] = minimiser_row(&responsibilities[k, 0], &code_sums[k, 0],
                                           &beta[k, 0], &out_v[k, 0], n, max_iter,
                                           multipliers[k], packed, packed + n)
        free(packed)
    if failed[0]:
        raise MemoryError("could not allocate the work space of the MM minimiser")
    return out


cdef class OnlineBlock:
    """A batch's terms in online learning's dictionary step, and what the step keeps.

    Topic k's row of beta is split into the batch's ``terms`` (intp, among
    beta's N columns) and the other terms, which move together: beta_n = r_k
    x (their beta before the batch). Per topic the block keeps the past's
    responsibilities on the batch's terms (``kept``, (K, terms)) and the one
    entry that stands for the other terms: its a (``other_responsibility``,
    the sum of A over them), its c (``other_cost``, sum C beta / their mass),
    their mass before the batch (``start_mass``) and now (``mass``), (K,)
    each. ``rho`` is the batch's weight and ``n_docs`` its size.
    `online_block_start`, `online_block_solve` and `online_block_finish` are
    the step's three parts.
    """
    cdef readonly object terms, in_batch, kept, other_responsibility, other_cost
    cdef readonly object start_mass, mass
    cdef readonly double rho, n_docs

    def __init__(self, terms, Py_ssize_t n_topics, Py_ssize_t n_features, double rho,
                 double n_docs):
        self.terms = np.ascontiguousarray(terms, dtype=np.intp)
        if self.terms.ndim != 1 or (self.terms.size and (
                self.terms.min() < 0 or self.terms.max() >= n_features)):
            raise ValueError(f"OnlineBlock: terms must be 1-D, in [0, {n_features})")
        self.in_batch = np.zeros(n_features, dtype=np.uint8)
        self.in_batch[self.terms] = 1
        self.kept = np.empty((n_topics, self.terms.size))
        self.other_responsibility = np.empty(n_topics)
        self.other_cost = np.empty(n_topics)
        self.start_mass = np.empty(n_topics)
        self.mass = np.empty(n_topics)
        self.rho, self.n_docs = rho, n_docs


cdef check_block(OnlineBlock block, beta, statistics=(), batch_sums=None):
    """ValueError unless ``beta``, the (K, N) ``statistics`` and the (K, terms) ``batch_sums``
    fit the block."""
    n_topics, n = block.kept.shape[0], block.in_batch.shape[0]
    if beta.shape[0] != n_topics or beta.shape[1] != n or any(
            s.shape[0] != n_topics or s.shape[1] != n for s in statistics) or (
            batch_sums is not None and (batch_sums.shape[0] != n_topics
                                        or batch_sums.shape[1] != block.kept.shape[1])):
        raise ValueError(f"online block step: beta and the statistics must be ({n_topics}, "
                         f"{n}), the batch's sums ({n_topics}, {block.kept.shape[1]})")


def online_block_start(double[:, ::1] beta, double[:, ::1] responsibilities,
                       double[:, ::1] code_sums, OnlineBlock block not None,
                       const double[:, ::1] plain, n_jobs=None):
    """The first part of online learning's dictionary step on a batch: the batch enters.

    A and C (``responsibilities`` and ``code_sums``, (K, N), in place) are
    scaled by 1 - rho, the block's entry for the other terms is set from them
    (one pass over the row), the batch's code sums ``plain`` ((K, terms))
    enter C on its terms (C += rho * plain / n_docs) and the block keeps A
    on them. Topics in parallel.
    """
    check_block(block, beta, (responsibilities, code_sums), plain)
    cdef Py_ssize_t n_topics = beta.shape[0], n = beta.shape[1], k, i, t
    cdef const Py_ssize_t[::1] terms = block.terms
    cdef const unsigned char[::1] in_batch = block.in_batch
    cdef double[:, ::1] kept = block.kept
    cdef double[::1] other_a = block.other_responsibility, other_c = block.other_cost
    cdef double[::1] start_mass = block.start_mass, mass = block.mass
    cdef double rho = block.rho, n_docs = block.n_docs, decay = 1.0 - rho
    cdef double sum_a, sum_cb, sum_mass
    cdef int n_threads = resolve_n_jobs(n_jobs)
    with nogil:
        for k in prange(n_topics, schedule="static", num_threads=n_threads):
            sum_a = 0.0
            sum_cb = 0.0
            sum_mass = 0.0
            for i in range(n):
                responsibilities[k, i] = responsibilities[k, i] * decay
                code_sums[k, i] = code_sums[k, i] * decay
                if not in_batch[i]:
                    sum_a = sum_a + responsibilities[k, i]
                    sum_cb = sum_cb + code_sums[k, i] * beta[k, i]
                    sum_mass = sum_mass + beta[k, i]
            if sum_mass > 0.0:
                other_a[k] = sum_a
                other_c[k] = sum_cb / sum_mass
            else:  # no mass off the batch: an entry that never gets any
                other_a[k] = 0.0
                other_c[k] = INFINITY
            start_mass[k] = sum_mass
            mass[k] = sum_mass
            for t in range(terms.shape[0]):
                code_sums[k, terms[t]] = rho * (plain[k, t] / n_docs) + code_sums[k, terms[t]]
                kept[k, t] = responsibilities[k, terms[t]]


def online_block_solve(double[:, ::1] beta, double[:, ::1] responsibilities,
                       const double[:, ::1] code_sums, double[::1] multipliers,
                       OnlineBlock block not None, const double[:, ::1] batch_responsibilities,
                       int max_iter=100, n_jobs=None):
    """One MM step of online learning's dictionary step on a batch's terms, in place.

    Sets A = kept + (rho / n_docs) a on the batch's terms, with
    ``batch_responsibilities`` the batch's a = beta * (MM sums) at the
    current topics ((K, terms), rows read in order;
    `stc._core._sparse_ops.mm_first_statistics` and `mm_step_statistics`
    with their ``columns``), and minimises the surrogate
    sum_n (C_kn beta_n - A_kn log beta_n) over the block's family on the
    simplex: the other terms enter as the block's one entry (its minimiser
    r u is the derivative of r P - Q log r), so `minimiser_row` runs on
    terms + 1 entries instead of N. The batch's terms of beta and the
    block's ``mass`` receive the solution; ``multipliers`` (K,) the new nu.
    `online_block_finish` moves the other terms. Topics in parallel.
    """
    check_block(block, beta, (responsibilities, code_sums), batch_responsibilities)
    if multipliers.shape[0] != beta.shape[0]:
        raise ValueError(f"multipliers must have one entry per topic ({beta.shape[0]})")
    cdef const Py_ssize_t[::1] terms = block.terms
    cdef const double[:, ::1] kept = block.kept
    cdef const double[::1] other_a = block.other_responsibility, other_c = block.other_cost
    cdef double[::1] mass = block.mass
    cdef Py_ssize_t n_topics = beta.shape[0], n_terms = terms.shape[0], k, t
    cdef Py_ssize_t size = n_terms + 1
    cdef double weight = block.rho / block.n_docs
    cdef int n_threads = resolve_n_jobs(n_jobs)
    cdef double* work = NULL
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    with nogil, parallel(num_threads=n_threads):
        # a, c, beta, the minimiser's output, and its two packed scratch rows
        work = <double*> malloc(6 * size * sizeof(double))
        if work == NULL:
            failed[0] = 1
        for k in prange(n_topics, schedule="static"):
            if work == NULL:
                continue
            for t in range(n_terms):
                responsibilities[k, terms[t]] = batch_responsibilities[k, t] * weight + kept[k, t]
                work[t] = responsibilities[k, terms[t]]
                work[size + t] = code_sums[k, terms[t]]
                work[2 * size + t] = beta[k, terms[t]]
            work[n_terms] = other_a[k]
            work[size + n_terms] = other_c[k]
            work[2 * size + n_terms] = mass[k]
            multipliers[k] = minimiser_row(work, work + size, work + 2 * size, work + 3 * size,
                                           size, max_iter, multipliers[k], work + 4 * size,
                                           work + 5 * size)
            for t in range(n_terms):
                beta[k, terms[t]] = work[3 * size + t]
            mass[k] = work[3 * size + n_terms]
        free(work)
    if failed[0]:
        raise MemoryError("could not allocate the work space of the MM minimiser")


def online_block_finish(double[:, ::1] beta, OnlineBlock block not None, n_jobs=None):
    """The last part of online learning's dictionary step: the other terms move, in place.

    Each topic's terms off the batch are scaled by r = mass / start mass (the
    block's), so that they hold the mass `online_block_solve` gave them.
    Topics in parallel.
    """
    check_block(block, beta)
    cdef const unsigned char[::1] in_batch = block.in_batch
    cdef const double[::1] start_mass = block.start_mass, mass = block.mass
    cdef Py_ssize_t n_topics = beta.shape[0], n = beta.shape[1], k, i
    cdef double ratio
    cdef int n_threads = resolve_n_jobs(n_jobs)
    with nogil:
        for k in prange(n_topics, schedule="static", num_threads=n_threads):
            if start_mass[k] > 0.0 and mass[k] != start_mass[k]:
                ratio = mass[k] / start_mass[k]
                for i in range(n):
                    if not in_batch[i]:
                        beta[k, i] = beta[k, i] * ratio
