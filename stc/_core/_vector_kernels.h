/* The coding sweep's per-word loops, vectorised across a topic's words, with run-time dispatch.

   Given theta_k, the words of a document are independent (paper Sec. 2.3), so one topic's
   pass is an elementwise loop: the Poisson or Gaussian closed form of every word's
   coordinate problem, the rest of each word's mean without topic k and back, and the
   coupling sums of the block Newton step on theta_k (with the sum of the codes, which
   theta's closed form reads). Each is written once over a vector
   type of W doubles (GCC/clang vector extensions) and compiled at several levels:

     scalar    the reference loops of the Cython kernels (no vector code here);
     baseline  what every CPU of the platform has: SSE2 on x86-64 (W = 2), NEON on aarch64;
     avx2      W = 4, x86-64 only;
     avx512    W = 8 (AVX-512F), x86-64 only.

   The best level the CPU supports is chosen when stc._core._simd is imported; the
   environment variable STC_SIMD_LEVEL caps it. Every level gives the same bits: each
   word goes through the same IEEE operations in the same order as in the scalar loop
   (the build passes -ffp-contract=off, so no multiply-add is fused), lanes that the
   scalar loop would not compute are discarded by a select, and the sums over the words
   are added in word order whatever W is. A batch with a word outside the fast path's
   range (see `poisson_batch`) returns 1 and is redone by the scalar loop.
*/
#ifndef STC_VECTOR_KERNELS_H
#define STC_VECTOR_KERNELS_H

#include <math.h>
#include <stddef.h>

enum { STC_LEVEL_SCALAR = 0, STC_LEVEL_BASELINE = 1, STC_LEVEL_AVX2 = 2, STC_LEVEL_AVX512 = 3 };

/* Each kernel returns 0 when it handled the batch, 1 when the caller's scalar loop must. */
typedef int (*stc_closed_form_fn)(ptrdiff_t n, const double* y, const double* b,
                                  const double* rest, double quad, double lin, double* x,
                                  double* curvature);
typedef double (*stc_coupling_fn)(ptrdiff_t n, const double* s, const double* curvatures,
                                  double t, double gamma, double quad, double* curvature,
                                  double* code_sum);
typedef void (*stc_means_fn)(ptrdiff_t n, const double* b, const double* s, double* means);
typedef int (*stc_all_zero_fn)(ptrdiff_t n, const double* s);

/* Throughput probes for benchmarks/bench_roofline.py: each level's square root, division
   and multiplication over L1-resident arrays, and a dependent chain of additions (the
   ordered sums over words). */
enum { STC_OP_SQRT = 0, STC_OP_DIV = 1, STC_OP_MUL = 2, STC_OP_CHAIN = 3 };
typedef double (*stc_throughput_fn)(int op, ptrdiff_t n, ptrdiff_t repeats, const double* a,
                                    const double* b, double* out);

typedef struct {
    int level;
    stc_closed_form_fn poisson;   /* PoissonLoss._solve_coordinates's batch */
    stc_closed_form_fn gaussian;  /* GaussianLoss._solve_coordinates's batch */
    stc_coupling_fn coupling;     /* sum_n 2 gamma (t - s_n), its curvature, and sum_n s_n */
    stc_means_fn remove_topic;    /* means -= b s, clamped at 0 */
    stc_means_fn add_topic;       /* means += b s */
    stc_all_zero_fn all_zero;     /* 1 when every s_n == 0 (either sign), else 0 */
    stc_throughput_fn throughput; /* bench_roofline.py's per-element times */
} stc_kernel_table;

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

static double stc_throughput_scalar(int op, ptrdiff_t n, ptrdiff_t repeats, const double* a,
                                    const double* b, double* out) {
    ptrdiff_t r, i;
    double chain = 0.0;
    for (r = 0; r < repeats; r++) {
        for (i = 0; i < n; i++) {
            if (op == STC_OP_CHAIN)
                chain += a[i];
            else
                out[i] = op == STC_OP_SQRT ? sqrt(a[i]) : op == STC_OP_DIV ? a[i] / b[i]
                                                                         : a[i] * b[i];
        }
#if defined(__GNUC__)
        __asm__ volatile("" ::: "memory");
#endif
    }
    return chain;
}

/* ---- the scalar level: the reference loops ---------------------------------------- */

static int stc_closed_form_scalar(ptrdiff_t n, const double* y, const double* b,
                                  const double* rest, double quad, double lin, double* x,
                                  double* curvature) {
    (void)n; (void)y; (void)b; (void)rest; (void)quad; (void)lin; (void)x; (void)curvature;
    return 1;  /* the loss's own scalar loop does the batch */
}

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

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
#define STC_HAVE_VECTORS 1
#if defined(__x86_64__)
#include <immintrin.h>
#else
#include <arm_neon.h>
#endif

/* Words per chunk of the coupling sums' terms (a multiple of every W). */
#define STC_COUPLING_CHUNK 64

/* Unaligned loads and stores through a vector type that may alias double (one move each,
   as the compilers' own unaligned intrinsics are defined). */
#define STC_LOAD(VD, p) (*(const VD##u*)(p))
#define STC_STORE(VD, p, v) (*(VD##u*)(p) = (v))


/* Lane-wise select: mask lanes are all ones (true) or all zeros. */
#define STC_SELECT(VD, VI, mask, a, b) \
    ((VD)((((VI)(a)) & (mask)) | (((VI)(b)) & ~(mask))))

/* The body of every vector level, for a vector type VD of W doubles and its integer
   twin VI; SQRT and BITS (a mask's lanes as bits) come from the level. */
#define STC_VECTOR_LEVEL(SUFFIX, TARGET, W, VD, VI, SQRT, BITS)                                 \
typedef double VD __attribute__((vector_size(8 * W), aligned(8)));                           \
typedef long long VI __attribute__((vector_size(8 * W), aligned(8)));                        \
typedef double VD##u __attribute__((vector_size(8 * W), aligned(8), may_alias));              \
                                                                                              \
/* One vector of W words of the Poisson batch; 1 when a word needs the scalar loop. */    \
TARGET static inline int stc_poisson_block_##SUFFIX(const double* y, const double* b,          \
                                                    const double* rest, double quad,          \
                                                    double lin, double flat_root, double* x,  \
                                                    double* curvature) {                      \
    const double two_quad = 2.0 * quad;                                                       \
    VD bi = STC_LOAD(VD, b), yi = STC_LOAD(VD, y), ri = STC_LOAD(VD, rest);                   \
    VD zero = {0.0}, tau = bi + lin;                                                          \
    VD a1 = two_quad * ri + bi * tau, a0 = ri * tau - yi * bi;                                \
    VI pos = bi > 0.0, flat = bi <= 0.0;                                                      \
    VI shortcut = pos & (a1 >= 0.0) & (a0 > 0.0);   /* both roots <= 0: x = 0 */              \
    VI solve = pos & ~shortcut, positive;                                                     \
    VD xv = STC_SELECT(VD, VI, flat, zero + flat_root, zero);                                 \
    if (0 != BITS(~(pos | flat))) return 1;         /* NaN weight */                          \
    if (0 != BITS(solve)) {       /* the square root and division, where a word needs it */   \
        VD d0 = two_quad * ri - bi * tau;                                                     \
        VD disc = d0 * d0 + 8.0 * quad * yi * bi * bi;                                        \
        VD root_disc = SQRT(disc);                                                            \
        VD a2 = two_quad * bi;                                                                \
        VI a1_nonneg = a1 >= 0.0;                                                             \
        /* one division: the operands of the scalar loop's branch for each word */            \
        VD root = STC_SELECT(VD, VI, a1_nonneg, -2.0 * a0, -a1 + root_disc)                   \
                  / STC_SELECT(VD, VI, a1_nonneg, a1 + root_disc, 2.0 * a2);                  \
        VI in_range = (root > 0.0) & (root < 1e300) & (disc > 1e-290)                         \
                      & (a1_nonneg | (a2 > 1e-290)) & ~(a1_nonneg & (a0 >= 0.0));             \
        if (0 != BITS(solve & ~in_range)) return 1;   /* the scalar loop's guards */          \
        xv = STC_SELECT(VD, VI, solve, root, xv);                                             \
    }                                                                                         \
    positive = xv > 0.0;                                                                      \
    if (0 != BITS(positive)) {                                                                \
        VD m = ri + bi * xv;                                                                  \
        VD hess = STC_SELECT(VD, VI, yi > 0.0, yi / (m * m), zero);                           \
        STC_STORE(VD, curvature, STC_SELECT(VD, VI, positive, bi * bi * hess,                 \
                                            STC_LOAD(VD, curvature)));                        \
    }                                                                                         \
    STC_STORE(VD, x, xv);                                                                     \
    return 0;                                                                                 \
}                                                                                             \
                                                                                              \
/* One vector of W words of the Gaussian batch; 1 when a word needs the scalar loop. */   \
TARGET static inline int stc_gaussian_block_##SUFFIX(const double* y, const double* b,         \
                                                     const double* rest, double quad,         \
                                                     double lin, double flat_root,            \
                                                     double* x, double* curvature) {          \
    VD bi = STC_LOAD(VD, b), yi = STC_LOAD(VD, y), ri = STC_LOAD(VD, rest);                   \
    VD zero = {0.0};                                                                          \
    VD scale = bi * bi + 2.0 * quad;                                                          \
    VD root = (bi * (yi - ri) - lin) / scale;                                                 \
    VD size = STC_SELECT(VD, VI, root < 0.0, -root, root);                                    \
    VI positive = root > 0.0;                                                                 \
    (void)flat_root;                                                                          \
    if (0 != BITS(~((scale < 1e300) & (size < 1e300)))) return 1;  /* also NaN */             \
    STC_STORE(VD, curvature, STC_SELECT(VD, VI, positive, bi * bi * 1.0,                      \
                                        STC_LOAD(VD, curvature)));                            \
    STC_STORE(VD, x, STC_SELECT(VD, VI, positive, root, zero));                               \
    return 0;                                                                                 \
}                                                                                             \
                                                                                              \
/* A batch W words at a time; the last n % W words go through the same block on a copy      \
   padded with the last word (a valid problem, whose extra lanes are dropped). */          \
TARGET static inline int stc_batch_##SUFFIX(                                                   \
        int (*block)(const double*, const double*, const double*, double, double, double,    \
                     double*, double*),                                                       \
        ptrdiff_t n, const double* y, const double* b, const double* rest, double quad,       \
        double lin, double* x, double* curvature) {                                           \
    double flat_root = -lin / (2.0 * quad);                                                   \
    double py[W], pb[W], pr[W], px[W], pc[W];                                                 \
    ptrdiff_t i, j, left;                                                                     \
    if (!(flat_root > 0.0)) flat_root = 0.0;                                                  \
    for (i = 0; i + W <= n; i += W)                                                           \
        if (block(y + i, b + i, rest + i, quad, lin, flat_root, x + i, curvature + i))        \
            return 1;                                                                         \
    left = n - i;                                                                             \
    if (left == 0) return 0;                                                                  \
    for (j = 0; j < W; j++) {                                                                 \
        ptrdiff_t from = i + (j < left ? j : left - 1);                                       \
        py[j] = y[from]; pb[j] = b[from]; pr[j] = rest[from];                                 \
        px[j] = x[from]; pc[j] = curvature[from];                                             \
    }                                                                                         \
    if (block(py, pb, pr, quad, lin, flat_root, px, pc)) return 1;                            \
    for (j = 0; j < left; j++) {                                                              \
        x[i + j] = px[j];                                                                     \
        curvature[i + j] = pc[j];                                                             \
    }                                                                                         \
    return 0;                                                                                 \
}                                                                                             \
                                                                                              \
TARGET static int stc_poisson_##SUFFIX(ptrdiff_t n, const double* y, const double* b,          \
                                       const double* rest, double quad, double lin,           \
                                       double* x, double* curvature) {                        \
    return stc_batch_##SUFFIX(stc_poisson_block_##SUFFIX, n, y, b, rest, quad, lin, x,        \
                              curvature);                                                     \
}                                                                                             \
                                                                                              \
TARGET static int stc_gaussian_##SUFFIX(ptrdiff_t n, const double* y, const double* b,         \
                                        const double* rest, double quad, double lin,          \
                                        double* x, double* curvature) {                       \
    return stc_batch_##SUFFIX(stc_gaussian_block_##SUFFIX, n, y, b, rest, quad, lin, x,       \
                              curvature);                                                     \
}                                                                                             \
                                                                                              \
/* The terms are computed W words at a time into a chunk, then added in word order by a    \
   plain loop over memory: three independent chains of additions, one per word each, which \
   bound the pass (read out of vector registers lane by lane, GCC spills a running sum to   \
   the stack and lengthens its chain). */                                                  \
TARGET static double stc_coupling_##SUFFIX(ptrdiff_t n, const double* s_k,                     \
                                           const double* curvatures, double t, double gamma,  \
                                           double quad, double* curvature, double* code_sum) { \
    double slope = 0.0, curv = 0.0, sum = 0.0;                                                \
    double slopes[STC_COUPLING_CHUNK], curvs[STC_COUPLING_CHUNK];                             \
    ptrdiff_t first, i, size;                                                                 \
    for (first = 0; first < n; first += STC_COUPLING_CHUNK) {                                 \
        const double* xs = s_k + first;                                                       \
        const double* cs = curvatures + first;                                                \
        size = n - first < STC_COUPLING_CHUNK ? n - first : STC_COUPLING_CHUNK;               \
        for (i = 0; i + W <= size; i += W) {                                                  \
            VD xv = STC_LOAD(VD, xs + i), cv = STC_LOAD(VD, cs + i);                          \
            VD zero = {0.0}, flat_terms = zero + 2.0 * gamma;                                 \
            STC_STORE(VD, slopes + i, 2.0 * gamma * (t - xv));                                \
            STC_STORE(VD, curvs + i,                                                          \
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
}                                                                                             \
                                                                                              \
TARGET static void stc_remove_topic_##SUFFIX(ptrdiff_t n, const double* b, const double* s,    \
                                             double* means) {                                 \
    ptrdiff_t i, j;                                                                           \
    for (i = 0; i + W <= n; i += W) {                                                         \
        VD m = STC_LOAD(VD, means + i) - STC_LOAD(VD, b + i) * STC_LOAD(VD, s + i);           \
        VD zero = {0.0};\
        STC_STORE(VD, means + i, STC_SELECT(VD, VI, m < 0.0, zero, m));                            \
    }                                                                                         \
    for (j = i; j < n; j++) {                                                                 \
        double m = means[j] - b[j] * s[j];                                                    \
        means[j] = m < 0.0 ? 0.0 : m;                                                         \
    }                                                                                         \
}                                                                                             \
                                                                                              \
TARGET static void stc_add_topic_##SUFFIX(ptrdiff_t n, const double* b, const double* s,       \
                                          double* means) {                                    \
    ptrdiff_t i, j;                                                                           \
    for (i = 0; i + W <= n; i += W)                                                           \
        STC_STORE(VD, means + i, STC_LOAD(VD, means + i) + STC_LOAD(VD, b + i) * STC_LOAD(VD, s + i)); \
    for (j = i; j < n; j++)                                                                   \
        means[j] = means[j] + b[j] * s[j];                                                    \
}                                                                                             \
                                                                                              \
TARGET static int stc_all_zero_##SUFFIX(ptrdiff_t n, const double* s) {                       \
    ptrdiff_t i;                                                                              \
    for (i = 0; i + W <= n; i += W) {                                                         \
        VD zero = {0.0};                                                                      \
        if (0 != BITS(STC_LOAD(VD, s + i) != zero)) return 0;                                 \
    }                                                                                         \
    for (; i < n; i++)                                                                        \
        if (s[i] != 0.0) return 0;                                                            \
    return 1;                                                                                 \
}                                                                                             \
                                                                                              \
TARGET static double stc_throughput_##SUFFIX(int op, ptrdiff_t n, ptrdiff_t repeats,           \
                                             const double* a, const double* b, double* out) { \
    ptrdiff_t r, i;                                                                           \
    double chain = 0.0;                                                                       \
    for (r = 0; r < repeats; r++) {                                                           \
        if (op == STC_OP_CHAIN) {                                                             \
            for (i = 0; i < n; i++) chain += a[i];                                            \
        } else {                                                                              \
            for (i = 0; i + W <= n; i += W) {                                                 \
                VD va = STC_LOAD(VD, a + i), vb = STC_LOAD(VD, b + i);                        \
                STC_STORE(VD, out + i, op == STC_OP_SQRT ? SQRT(va)                           \
                                       : op == STC_OP_DIV ? va / vb : va * vb);               \
            }                                                                                 \
        }                                                                                     \
        __asm__ volatile("" ::: "memory");      /* every repeat does the work again */        \
    }                                                                                         \
    return chain;                                                                             \
}

#if defined(__x86_64__)
#define STC_BITS_128(mask) ((unsigned)_mm_movemask_pd((__m128d)(mask)))
#define STC_SQRT_128(v) ((stc_v2d)_mm_sqrt_pd((__m128d)(v)))
STC_VECTOR_LEVEL(baseline, , 2, stc_v2d, stc_v2i, STC_SQRT_128, STC_BITS_128)

#define STC_TARGET_AVX2 __attribute__((target("avx2")))
#define STC_BITS_256(mask) ((unsigned)_mm256_movemask_pd((__m256d)(mask)))
#define STC_SQRT_256(v) ((stc_v4d)_mm256_sqrt_pd((__m256d)(v)))
STC_VECTOR_LEVEL(avx2, STC_TARGET_AVX2, 4, stc_v4d, stc_v4i, STC_SQRT_256, STC_BITS_256)

#define STC_TARGET_AVX512 __attribute__((target("avx512f")))
#define STC_BITS_512(mask) ((unsigned)_mm512_test_epi64_mask((__m512i)(mask), (__m512i)(mask)))
#define STC_SQRT_512(v) ((stc_v8d)_mm512_sqrt_pd((__m512d)(v)))
STC_VECTOR_LEVEL(avx512, STC_TARGET_AVX512, 8, stc_v8d, stc_v8i, STC_SQRT_512, STC_BITS_512)

#else  /* aarch64: NEON is part of the baseline */
#define STC_BITS_NEON(mask) ((unsigned)(((mask)[0] & 1) | (((mask)[1] & 1) << 1)))
#define STC_SQRT_NEON(v) ((stc_v2d)vsqrtq_f64((float64x2_t)(v)))
STC_VECTOR_LEVEL(baseline, , 2, stc_v2d, stc_v2i, STC_SQRT_NEON, STC_BITS_NEON)
#endif
#endif  /* GCC or clang on x86-64 or aarch64 */

/* ---- dispatch -------------------------------------------------------------------------- */

static inline const char* stc_level_name(int level) {
    static const char* const names[] = {"scalar", "baseline", "avx2", "avx512"};
    return level >= 0 && level < 4 ? names[level] : "";
}

/* Whether this build holds the level's code. */
static inline int stc_level_compiled(int level) {
    if (level == STC_LEVEL_SCALAR) return 1;
#if defined(STC_HAVE_VECTORS)
    if (level == STC_LEVEL_BASELINE) return 1;
#if defined(__x86_64__)
    if (level == STC_LEVEL_AVX2 || level == STC_LEVEL_AVX512) return 1;
#endif
#endif
    return 0;
}

/* Whether this CPU (and its operating system) runs the level's code. */
static inline int stc_level_supported(int level) {
    if (!stc_level_compiled(level)) return 0;
#if defined(STC_HAVE_VECTORS) && defined(__x86_64__)
    __builtin_cpu_init();
    if (level == STC_LEVEL_AVX2) return __builtin_cpu_supports("avx2") != 0;
    if (level == STC_LEVEL_AVX512) return __builtin_cpu_supports("avx512f") != 0;
#endif
    return 1;
}

static inline stc_kernel_table stc_kernel_table_of(int level) {
    stc_kernel_table table = {STC_LEVEL_SCALAR, stc_closed_form_scalar, stc_closed_form_scalar,
                              stc_coupling_scalar, stc_remove_topic_scalar,
                              stc_add_topic_scalar, stc_all_zero_scalar,
                              stc_throughput_scalar};
#if defined(STC_HAVE_VECTORS)
#define STC_TABLE(LEVEL, SUFFIX)                                                              \
    if (level == LEVEL) {                                                                     \
        stc_kernel_table t = {LEVEL, stc_poisson_##SUFFIX, stc_gaussian_##SUFFIX,             \
                              stc_coupling_##SUFFIX, stc_remove_topic_##SUFFIX,               \
                              stc_add_topic_##SUFFIX, stc_all_zero_##SUFFIX,                  \
                              stc_throughput_##SUFFIX};                                       \
        table = t;                                                                            \
    }
    STC_TABLE(STC_LEVEL_BASELINE, baseline)
#if defined(__x86_64__)
    /* Two SSE2 lanes do not pay for the closed forms: with most codes zero, a pair of words
       needs the square root and division more often than one word does, at about the same
       cost per lane as the scalar loop, which was faster in a K = 50 sweep (commit
       3fe0b41). */
    if (level == STC_LEVEL_BASELINE) {
        table.poisson = stc_closed_form_scalar;
        table.gaussian = stc_closed_form_scalar;
    }
    STC_TABLE(STC_LEVEL_AVX2, avx2)
    STC_TABLE(STC_LEVEL_AVX512, avx512)
#endif
#undef STC_TABLE
#endif
    return table;
}

#endif  /* STC_VECTOR_KERNELS_H */
