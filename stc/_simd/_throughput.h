/* Throughput probes for benchmarks/bench_roofline.py, at every level of _levels.h: each
   level's square root, division and multiplication over L1-resident arrays, and a dependent
   chain of additions (the kernels' ordered sums over words). Nothing in the package calls
   them. */
#ifndef STC_THROUGHPUT_H
#define STC_THROUGHPUT_H

#include "_levels.h"

enum { STC_OP_SQRT = 0, STC_OP_DIV = 1, STC_OP_MUL = 2, STC_OP_CHAIN = 3 };
typedef double (*stc_throughput_fn)(int op, ptrdiff_t n, ptrdiff_t repeats, const double* a,
                                    const double* b, double* out);

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

#define STC_THROUGHPUT_LEVEL(NAME, W, TARGET, CPU, SQRT, BITS)                                \
TARGET static double stc_throughput_##NAME(int op, ptrdiff_t n, ptrdiff_t repeats,            \
                                           const double* a, const double* b, double* out) {   \
    typedef stc_vd_##NAME VD;                                                                 \
    ptrdiff_t r, i;                                                                           \
    double chain = 0.0;                                                                       \
    for (r = 0; r < repeats; r++) {                                                           \
        if (op == STC_OP_CHAIN) {                                                             \
            for (i = 0; i < n; i++) chain += a[i];                                            \
        } else {                                                                              \
            for (i = 0; i + W <= n; i += W) {                                                 \
                VD va = STC_LOAD(stc_vd_##NAME, a + i), vb = STC_LOAD(stc_vd_##NAME, b + i);  \
                STC_STORE(stc_vd_##NAME, out + i, op == STC_OP_SQRT ? SQRT(VD, va)            \
                                                  : op == STC_OP_DIV ? va / vb : va * vb);    \
            }                                                                                 \
        }                                                                                     \
        __asm__ volatile("" ::: "memory");      /* every repeat does the work again */        \
    }                                                                                         \
    return chain;                                                                             \
}

STC_VECTOR_LEVELS(STC_THROUGHPUT_LEVEL)

#define STC_THROUGHPUT_ENTRY(NAME, W, TARGET, CPU, SQRT, BITS) stc_throughput_##NAME,
static const stc_throughput_fn stc_throughput_kernels[STC_LEVEL_COUNT] = {
    stc_throughput_scalar, STC_VECTOR_LEVELS(STC_THROUGHPUT_ENTRY)};

static inline double stc_throughput(int level, int op, ptrdiff_t n, ptrdiff_t repeats,
                                    const double* a, const double* b, double* out) {
    return stc_throughput_kernels[level](op, n, repeats, a, b, out);
}

#endif  /* STC_THROUGHPUT_H */
