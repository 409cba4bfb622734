/* The built-in Poisson and Gaussian losses' block solvers, vectorised across a topic's words
   at every level of stc/_simd/_levels.h: each word's coordinate problem in closed form, W
   words at a time, with the curvature the coding kernel's block Newton step reads.

   Each returns 0 when it solved the block, 1 when a word is outside the fast path's range
   (the scalar loop's guards; a NaN weight): the loss's scalar loop then redoes the whole
   block. Where it takes the block, it gives the scalar loop's bits (see _levels.h).
*/
#ifndef STC_BUILTIN_VECTORS_H
#define STC_BUILTIN_VECTORS_H

#include "../_simd/_levels.h"

typedef int (*stc_closed_form_fn)(ptrdiff_t n, const double* y, const double* b,
                                  const double* rest, double quad, double lin, double* x,
                                  double* curvature);

/* The scalar level: the loss's own scalar loop does the block. */
static int stc_closed_form_scalar(ptrdiff_t n, const double* y, const double* b,
                                  const double* rest, double quad, double lin, double* x,
                                  double* curvature) {
    (void)n; (void)y; (void)b; (void)rest; (void)quad; (void)lin; (void)x; (void)curvature;
    return 1;
}

/* One vector of W words of the Poisson block; 1 when a word needs the scalar loop. */
#define STC_POISSON_WORDS(NAME, W, TARGET, CPU, SQRT, BITS)                                   \
TARGET static inline int stc_poisson_words_##NAME(const double* y, const double* b,           \
                                                  const double* rest, double quad,            \
                                                  double lin, double flat_root, double* x,    \
                                                  double* curvature) {                        \
    typedef stc_vd_##NAME VD;                                                                 \
    typedef stc_vi_##NAME VI;                                                                 \
    const double two_quad = 2.0 * quad;                                                       \
    VD bi = STC_LOAD(stc_vd_##NAME, b), yi = STC_LOAD(stc_vd_##NAME, y);                      \
    VD ri = STC_LOAD(stc_vd_##NAME, rest);                                                    \
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
        VD root_disc = SQRT(VD, disc);                                                        \
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
        STC_STORE(stc_vd_##NAME, curvature, STC_SELECT(VD, VI, positive, bi * bi * hess,      \
                                                       STC_LOAD(stc_vd_##NAME, curvature)));  \
    }                                                                                         \
    STC_STORE(stc_vd_##NAME, x, xv);                                                          \
    return 0;                                                                                 \
}

/* One vector of W words of the Gaussian block; 1 when a word needs the scalar loop. */
#define STC_GAUSSIAN_WORDS(NAME, W, TARGET, CPU, SQRT, BITS)                                  \
TARGET static inline int stc_gaussian_words_##NAME(const double* y, const double* b,          \
                                                   const double* rest, double quad,           \
                                                   double lin, double flat_root, double* x,   \
                                                   double* curvature) {                       \
    typedef stc_vd_##NAME VD;                                                                 \
    typedef stc_vi_##NAME VI;                                                                 \
    VD bi = STC_LOAD(stc_vd_##NAME, b), yi = STC_LOAD(stc_vd_##NAME, y);                      \
    VD ri = STC_LOAD(stc_vd_##NAME, rest);                                                    \
    VD zero = {0.0};                                                                          \
    VD scale = bi * bi + 2.0 * quad;                                                          \
    VD root = (bi * (yi - ri) - lin) / scale;                                                 \
    VD size = STC_SELECT(VD, VI, root < 0.0, -root, root);                                    \
    VI positive = root > 0.0;                                                                 \
    (void)flat_root;                                                                          \
    if (0 != BITS(~((scale < 1e300) & (size < 1e300)))) return 1;  /* also NaN */             \
    STC_STORE(stc_vd_##NAME, curvature, STC_SELECT(VD, VI, positive, bi * bi * 1.0,           \
                                                   STC_LOAD(stc_vd_##NAME, curvature)));      \
    STC_STORE(stc_vd_##NAME, x, STC_SELECT(VD, VI, positive, root, zero));                    \
    return 0;                                                                                 \
}

/* A block W words at a time; the last n % W words go through the same words function on a
   copy padded with the last word (a valid problem, whose extra lanes are dropped). */
#define STC_CLOSED_FORM_BLOCK(NAME, W, TARGET, CPU, SQRT, BITS)                               \
TARGET static inline int stc_block_##NAME(                                                    \
        int (*words)(const double*, const double*, const double*, double, double, double,    \
                     double*, double*),                                                       \
        ptrdiff_t n, const double* y, const double* b, const double* rest, double quad,       \
        double lin, double* x, double* curvature) {                                           \
    double flat_root = -lin / (2.0 * quad);                                                   \
    double py[W], pb[W], pr[W], px[W], pc[W];                                                 \
    ptrdiff_t i, j, left;                                                                     \
    if (!(flat_root > 0.0)) flat_root = 0.0;                                                  \
    for (i = 0; i + W <= n; i += W)                                                           \
        if (words(y + i, b + i, rest + i, quad, lin, flat_root, x + i, curvature + i))        \
            return 1;                                                                         \
    left = n - i;                                                                             \
    if (left == 0) return 0;                                                                  \
    for (j = 0; j < W; j++) {                                                                 \
        ptrdiff_t from = i + (j < left ? j : left - 1);                                       \
        py[j] = y[from]; pb[j] = b[from]; pr[j] = rest[from];                                 \
        px[j] = x[from]; pc[j] = curvature[from];                                             \
    }                                                                                         \
    if (words(py, pb, pr, quad, lin, flat_root, px, pc)) return 1;                            \
    for (j = 0; j < left; j++) {                                                              \
        x[i + j] = px[j];                                                                     \
        curvature[i + j] = pc[j];                                                             \
    }                                                                                         \
    return 0;                                                                                 \
}                                                                                             \
                                                                                              \
TARGET static int stc_poisson_##NAME(ptrdiff_t n, const double* y, const double* b,           \
                                     const double* rest, double quad, double lin, double* x,  \
                                     double* curvature) {                                     \
    return stc_block_##NAME(stc_poisson_words_##NAME, n, y, b, rest, quad, lin, x,            \
                            curvature);                                                       \
}                                                                                             \
                                                                                              \
TARGET static int stc_gaussian_##NAME(ptrdiff_t n, const double* y, const double* b,          \
                                      const double* rest, double quad, double lin, double* x, \
                                      double* curvature) {                                    \
    return stc_block_##NAME(stc_gaussian_words_##NAME, n, y, b, rest, quad, lin, x,           \
                            curvature);                                                       \
}

STC_VECTOR_LEVELS(STC_POISSON_WORDS)
STC_VECTOR_LEVELS(STC_GAUSSIAN_WORDS)
STC_VECTOR_LEVELS(STC_CLOSED_FORM_BLOCK)

#define STC_POISSON_ENTRY(NAME, W, TARGET, CPU, SQRT, BITS) stc_poisson_##NAME,
#define STC_GAUSSIAN_ENTRY(NAME, W, TARGET, CPU, SQRT, BITS) stc_gaussian_##NAME,
static const stc_closed_form_fn stc_poisson_kernels[STC_LEVEL_COUNT] = {
    stc_closed_form_scalar, STC_VECTOR_LEVELS(STC_POISSON_ENTRY)};
static const stc_closed_form_fn stc_gaussian_kernels[STC_LEVEL_COUNT] = {
    stc_closed_form_scalar, STC_VECTOR_LEVELS(STC_GAUSSIAN_ENTRY)};

/* Two SSE2 lanes do not pay for the closed forms: with most codes zero, a pair of words
   needs the square root and division more often than one word does, at about the same
   cost per lane as the scalar loop, which was faster in a K = 50 sweep (commit 3fe0b41). */
#if defined(__GNUC__) && defined(__x86_64__)
#define STC_CLOSED_FORMS_PAY(level) ((level) != STC_LEVEL_baseline)
#else
#define STC_CLOSED_FORMS_PAY(level) 1
#endif

/* PoissonLoss._solve_block's vector path at the level: 0 when it solved the block. */
static inline int stc_poisson_block(int level, ptrdiff_t n, const double* y, const double* b,
                                    const double* rest, double quad, double lin, double* x,
                                    double* curvature) {
    if (!STC_CLOSED_FORMS_PAY(level)) return 1;
    return stc_poisson_kernels[level](n, y, b, rest, quad, lin, x, curvature);
}

/* GaussianLoss._solve_block's vector path at the level: 0 when it solved the block. */
static inline int stc_gaussian_block(int level, ptrdiff_t n, const double* y, const double* b,
                                     const double* rest, double quad, double lin, double* x,
                                     double* curvature) {
    if (!STC_CLOSED_FORMS_PAY(level)) return 1;
    return stc_gaussian_kernels[level](n, y, b, rest, quad, lin, x, curvature);
}

#endif  /* STC_BUILTIN_VECTORS_H */
