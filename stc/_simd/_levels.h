/* The vector levels of the package's kernels: the one list, and the vector helpers of every
   level's code.

   A kernel with vector code (the coding sweep's loops in stc/_core/_coding_vectors.h, the
   built-in losses' closed forms in stc/losses/_builtin_vectors.h, the benchmark's probes)
   writes it once, as a macro of a level's entry below, and instantiates it with
   STC_VECTOR_LEVELS; its table of kernels, indexed by level, starts with its scalar loop.
   stc._simd._dispatch chooses the level in use.

     scalar    the reference loops (always there, not in the list);
     baseline  what every CPU of the platform has: SSE2 on x86-64 (W = 2), NEON on aarch64;
     avx2      W = 4, x86-64 only;
     avx512    W = 8 (AVX-512F), x86-64 only.

   Adding a level is one entry: its name, its lanes W, the attribute that lets the compiler
   use its instructions, the test that the CPU runs them, and its square root and mask test.

   Every level gives the scalar loops' bits: each word goes through the same IEEE operations
   in the same order (the build passes -ffp-contract=off, so no multiply-add is fused),
   lanes the scalar loop would not compute are discarded by a select, and sums over words
   are added in word order whatever W is.
*/
#ifndef STC_LEVELS_H
#define STC_LEVELS_H

#include <math.h>
#include <stddef.h>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define STC_SQRT_128(VD, v) ((VD)_mm_sqrt_pd((__m128d)(v)))
#define STC_BITS_128(mask) ((unsigned)_mm_movemask_pd((__m128d)(mask)))
#define STC_SQRT_256(VD, v) ((VD)_mm256_sqrt_pd((__m256d)(v)))
#define STC_BITS_256(mask) ((unsigned)_mm256_movemask_pd((__m256d)(mask)))
#define STC_SQRT_512(VD, v) ((VD)_mm512_sqrt_pd((__m512d)(v)))
#define STC_BITS_512(mask) ((unsigned)_mm512_test_epi64_mask((__m512i)(mask), (__m512i)(mask)))
/* LEVEL(name, W, target attribute, CPU test, square root, mask bits), lowest first */
#define STC_VECTOR_LEVELS(LEVEL)                                                              \
    LEVEL(baseline, 2, , 1, STC_SQRT_128, STC_BITS_128)                                       \
    LEVEL(avx2, 4, __attribute__((target("avx2"))), __builtin_cpu_supports("avx2"),           \
          STC_SQRT_256, STC_BITS_256)                                                         \
    LEVEL(avx512, 8, __attribute__((target("avx512f"))), __builtin_cpu_supports("avx512f"),   \
          STC_SQRT_512, STC_BITS_512)
#define STC_CPU_INIT() __builtin_cpu_init()

#elif defined(__GNUC__) && defined(__aarch64__)
#include <arm_neon.h>
#define STC_SQRT_NEON(VD, v) ((VD)vsqrtq_f64((float64x2_t)(v)))
#define STC_BITS_NEON(mask) ((unsigned)(((mask)[0] & 1) | (((mask)[1] & 1) << 1)))
#define STC_VECTOR_LEVELS(LEVEL) LEVEL(baseline, 2, , 1, STC_SQRT_NEON, STC_BITS_NEON)
#define STC_CPU_INIT() ((void)0)

#else  /* no vector extensions: the scalar level only */
#define STC_VECTOR_LEVELS(LEVEL)
#define STC_CPU_INIT() ((void)0)
#endif

/* STC_LEVEL_scalar = 0, then one per entry, and STC_LEVEL_COUNT */
#define STC_LEVEL_ENUM(NAME, W, TARGET, CPU, SQRT, BITS) STC_LEVEL_##NAME,
enum { STC_LEVEL_scalar, STC_VECTOR_LEVELS(STC_LEVEL_ENUM) STC_LEVEL_COUNT };
#undef STC_LEVEL_ENUM

static inline const char* stc_level_name(int level) {
#define STC_LEVEL_NAME(NAME, W, TARGET, CPU, SQRT, BITS) #NAME,
    static const char* const names[STC_LEVEL_COUNT] = {"scalar",
                                                       STC_VECTOR_LEVELS(STC_LEVEL_NAME)};
#undef STC_LEVEL_NAME
    return level >= 0 && level < STC_LEVEL_COUNT ? names[level] : "";
}

/* Whether this CPU (and its operating system) runs the level's code. */
static inline int stc_level_supported(int level) {
    STC_CPU_INIT();
#define STC_LEVEL_SUPPORTED(NAME, W, TARGET, CPU, SQRT, BITS)                                 \
    if (level == STC_LEVEL_##NAME) return (CPU) != 0;
    STC_VECTOR_LEVELS(STC_LEVEL_SUPPORTED)
#undef STC_LEVEL_SUPPORTED
    return level == STC_LEVEL_scalar;
}

#if defined(__GNUC__)
/* Each level's vector types: stc_vd_NAME (W doubles), stc_vi_NAME (its masks) and
   stc_vd_NAMEu, through which unaligned loads and stores may alias double. */
#define STC_VECTOR_TYPES(NAME, W, TARGET, CPU, SQRT, BITS)                                    \
    typedef double stc_vd_##NAME __attribute__((vector_size(8 * W), aligned(8)));             \
    typedef long long stc_vi_##NAME __attribute__((vector_size(8 * W), aligned(8)));          \
    typedef double stc_vd_##NAME##u __attribute__((vector_size(8 * W), aligned(8), may_alias));
STC_VECTOR_LEVELS(STC_VECTOR_TYPES)
#undef STC_VECTOR_TYPES

/* Unaligned loads and stores (one move each, as the compilers' own unaligned intrinsics
   are defined). */
#define STC_LOAD(VD, p) (*(const VD##u*)(p))
#define STC_STORE(VD, p, v) (*(VD##u*)(p) = (v))

/* Lane-wise select: mask lanes are all ones (true) or all zeros. */
#define STC_SELECT(VD, VI, mask, a, b) \
    ((VD)((((VI)(a)) & (mask)) | (((VI)(b)) & ~(mask))))
#endif

#endif  /* STC_LEVELS_H */
