/* The coding sweep's per-word loops that do not depend on the loss, vectorised across a
   topic's words at every level of stc/_simd/_levels.h: the coupling sums of the block
   Newton step on theta_k (with the sum of the codes, which theta's closed form reads),
   the rest of each word's mean without topic k and back, and the test that a topic's
   codes are all zero. The loss's own loop (the coordinate problems of one topic's words)
   is the loss's `_solve_block`.

   Each kernel is chosen per call from its table by the level in use (`_dispatch`), and
   gives the scalar loop's bits at every level (see _levels.h).
*/
#ifndef STC_CODING_VECTORS_H
#define STC_CODING_VECTORS_H

#include "../_simd/_levels.h"

typedef double (*stc_coupling_fn)(ptrdiff_t n, const double* s, const double* curvatures,
                                  double t, double gamma, double quad, double* curvature,
                                  double* code_sum);
typedef void (*stc_means_fn)(ptrdiff_t n, const double* b, const double* s, double* means);
typedef int (*stc_all_zero_fn)(ptrdiff_t n, const double* s);

/* Ask the memory for the n doubles at row, one cache line at a time (a hint; no effect on
   results). */
static inline void stc_prefetch_row(const double* row, ptrdiff_t n) {
#if defined(__GNUC__)
    ptrdiff_t i;
    for (i = 0; i < n; i += 8)
        __builtin_prefetch(row + i, 0, 1);
#else
    (void)row; (void)n;
#endif
}

/* ---- the scalar level: the reference loops ---------------------------------------- */

static double stc_coupling_scalar(ptrdiff_t n, const double* s_k, const double* curvatures,
                                  double t, double gamma, double quad, double* curvature,
                                  double* code_sum) {
    double slope = 0.0, curv = 0.0, sum = 0.0;
    ptrdiff_t i;
    for (i = 0; i < n; i++) {
        double x = s_k[i];
        sum = sum + x;
        slope += 2.0 * gamma * (t - x);
        if (x > 0.0)
            curv += 2.0 * gamma * (1.0 - 2.0 * gamma / (curvatures[i] + 2.0 * quad));
        else
            curv += 2.0 * gamma;
    }
    *curvature = curv;
    *code_sum = sum;
    return slope;
}

static void stc_remove_topic_scalar(ptrdiff_t n, const double* b, const double* s,
                                    double* means) {
    ptrdiff_t i;
    for (i = 0; i < n; i++) {
        double m = means[i] - b[i] * s[i];
        means[i] = m < 0.0 ? 0.0 : m;  /* rounding only: a sum of non-negative terms */
    }
}

static void stc_add_topic_scalar(ptrdiff_t n, const double* b, const double* s, double* means) {
    ptrdiff_t i;
    for (i = 0; i < n; i++)
        means[i] = means[i] + b[i] * s[i];
}

static int stc_all_zero_scalar(ptrdiff_t n, const double* s) {
    ptrdiff_t i;
    for (i = 0; i < n; i++)
        if (s[i] != 0.0)
            return 0;
    return 1;
}

/* ---- the vector levels ---------------------------------------------------------------- */

/* Words per chunk of the coupling sums' terms (a multiple of every W). */
#define STC_COUPLING_CHUNK 64

/* The terms are computed W words at a time into a chunk, then added in word order by a
   plain loop over memory: three independent chains of additions, one per word each, which
   bound the pass (read out of vector registers lane by lane, GCC spills a running sum to
   the stack and lengthens its chain). */
#define STC_COUPLING_LEVEL(NAME, W, TARGET, CPU, SQRT, BITS)                                  \
TARGET static double stc_coupling_##NAME(ptrdiff_t n, const double* s_k,                      \
                                         const double* curvatures, double t, double gamma,    \
                                         double quad, double* curvature, double* code_sum) {  \
    typedef stc_vd_##NAME VD;                                                                 \
    typedef stc_vi_##NAME VI;                                                                 \
    double slope = 0.0, curv = 0.0, sum = 0.0;                                                \
    double slopes[STC_COUPLING_CHUNK], curvs[STC_COUPLING_CHUNK];                             \
    ptrdiff_t first, i, size;                                                                 \
    for (first = 0; first < n; first += STC_COUPLING_CHUNK) {                                 \
        const double* xs = s_k + first;                                                       \
        const double* cs = curvatures + first;                                                \
        size = n - first < STC_COUPLING_CHUNK ? n - first : STC_COUPLING_CHUNK;               \
        for (i = 0; i + W <= size; i += W) {                                                  \
            VD xv = STC_LOAD(stc_vd_##NAME, xs + i), cv = STC_LOAD(stc_vd_##NAME, cs + i);    \
            VD zero = {0.0}, flat_terms = zero + 2.0 * gamma;                                 \
            STC_STORE(stc_vd_##NAME, slopes + i, 2.0 * gamma * (t - xv));                     \
            STC_STORE(stc_vd_##NAME, curvs + i,                                               \
                      STC_SELECT(VD, VI, xv > 0.0,                                            \
                                 2.0 * gamma * (1.0 - 2.0 * gamma / (cv + 2.0 * quad)),       \
                                 flat_terms));                                                \
        }                                                                                     \
        for (; i < size; i++) {                                                               \
            slopes[i] = 2.0 * gamma * (t - xs[i]);                                            \
            curvs[i] = xs[i] > 0.0 ? 2.0 * gamma * (1.0 - 2.0 * gamma / (cs[i] + 2.0 * quad)) \
                                   : 2.0 * gamma;                                             \
        }                                                                                     \
        for (i = 0; i < size; i++) {           /* in word order, as the scalar loop */        \
            sum = sum + xs[i];                                                                \
            slope += slopes[i];                                                               \
            curv += curvs[i];                                                                 \
        }                                                                                     \
    }                                                                                         \
    *curvature = curv;                                                                        \
    *code_sum = sum;                                                                          \
    return slope;                                                                             \
}

#define STC_MEANS_LEVEL(NAME, W, TARGET, CPU, SQRT, BITS)                                     \
TARGET static void stc_remove_topic_##NAME(ptrdiff_t n, const double* b, const double* s,     \
                                           double* means) {                                   \
    typedef stc_vd_##NAME VD;                                                                 \
    typedef stc_vi_##NAME VI;                                                                 \
    ptrdiff_t i, j;                                                                           \
    for (i = 0; i + W <= n; i += W) {                                                         \
        VD zero = {0.0};                                                                      \
        VD m = STC_LOAD(stc_vd_##NAME, means + i)                                             \
               - STC_LOAD(stc_vd_##NAME, b + i) * STC_LOAD(stc_vd_##NAME, s + i);             \
        STC_STORE(stc_vd_##NAME, means + i, STC_SELECT(VD, VI, m < 0.0, zero, m));            \
    }                                                                                         \
    for (j = i; j < n; j++) {                                                                 \
        double m = means[j] - b[j] * s[j];                                                    \
        means[j] = m < 0.0 ? 0.0 : m;                                                         \
    }                                                                                         \
}                                                                                             \
                                                                                              \
TARGET static void stc_add_topic_##NAME(ptrdiff_t n, const double* b, const double* s,        \
                                        double* means) {                                      \
    ptrdiff_t i, j;                                                                           \
    for (i = 0; i + W <= n; i += W)                                                           \
        STC_STORE(stc_vd_##NAME, means + i,                                                   \
                  STC_LOAD(stc_vd_##NAME, means + i)                                          \
                  + STC_LOAD(stc_vd_##NAME, b + i) * STC_LOAD(stc_vd_##NAME, s + i));         \
    for (j = i; j < n; j++)                                                                   \
        means[j] = means[j] + b[j] * s[j];                                                    \
}

#define STC_ALL_ZERO_LEVEL(NAME, W, TARGET, CPU, SQRT, BITS)                                  \
TARGET static int stc_all_zero_##NAME(ptrdiff_t n, const double* s) {                         \
    ptrdiff_t i;                                                                              \
    for (i = 0; i + W <= n; i += W) {                                                         \
        stc_vd_##NAME zero = {0.0};                                                           \
        if (0 != BITS(STC_LOAD(stc_vd_##NAME, s + i) != zero)) return 0;                      \
    }                                                                                         \
    for (; i < n; i++)                                                                        \
        if (s[i] != 0.0) return 0;                                                            \
    return 1;                                                                                 \
}

STC_VECTOR_LEVELS(STC_COUPLING_LEVEL)
STC_VECTOR_LEVELS(STC_MEANS_LEVEL)
STC_VECTOR_LEVELS(STC_ALL_ZERO_LEVEL)

/* ---- the tables, indexed by level ------------------------------------------------------ */

#define STC_COUPLING_ENTRY(NAME, W, TARGET, CPU, SQRT, BITS) stc_coupling_##NAME,
#define STC_REMOVE_TOPIC_ENTRY(NAME, W, TARGET, CPU, SQRT, BITS) stc_remove_topic_##NAME,
#define STC_ADD_TOPIC_ENTRY(NAME, W, TARGET, CPU, SQRT, BITS) stc_add_topic_##NAME,
#define STC_ALL_ZERO_ENTRY(NAME, W, TARGET, CPU, SQRT, BITS) stc_all_zero_##NAME,
static const stc_coupling_fn stc_coupling_kernels[STC_LEVEL_COUNT] = {
    stc_coupling_scalar, STC_VECTOR_LEVELS(STC_COUPLING_ENTRY)};
static const stc_means_fn stc_remove_topic_kernels[STC_LEVEL_COUNT] = {
    stc_remove_topic_scalar, STC_VECTOR_LEVELS(STC_REMOVE_TOPIC_ENTRY)};
static const stc_means_fn stc_add_topic_kernels[STC_LEVEL_COUNT] = {
    stc_add_topic_scalar, STC_VECTOR_LEVELS(STC_ADD_TOPIC_ENTRY)};
static const stc_all_zero_fn stc_all_zero_kernels[STC_LEVEL_COUNT] = {
    stc_all_zero_scalar, STC_VECTOR_LEVELS(STC_ALL_ZERO_ENTRY)};

/* sum_n 2 gamma (t - s_n), its curvature, and sum_n s_n */
static inline double stc_coupling_slope(int level, ptrdiff_t n, const double* s_k,
                                        const double* curvatures, double t, double gamma,
                                        double quad, double* curvature, double* code_sum) {
    return stc_coupling_kernels[level](n, s_k, curvatures, t, gamma, quad, curvature,
                                       code_sum);
}

/* means -= b s, clamped at 0 */
static inline void stc_remove_topic(int level, ptrdiff_t n, const double* b, const double* s,
                                    double* means) {
    stc_remove_topic_kernels[level](n, b, s, means);
}

/* means += b s */
static inline void stc_add_topic(int level, ptrdiff_t n, const double* b, const double* s,
                                 double* means) {
    stc_add_topic_kernels[level](n, b, s, means);
}

/* 1 when every s_n == 0 (either sign), else 0 */
static inline int stc_codes_all_zero(int level, ptrdiff_t n, const double* s) {
    return stc_all_zero_kernels[level](n, s);
}

#endif  /* STC_CODING_VECTORS_H */
