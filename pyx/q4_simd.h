/* Which vector instructions the running CPU has, for code compiled for them
   with __attribute__((target(...))) and chosen at run time (the package is
   built for the x86-64 baseline, which has SSE2 only).

   Q4_SIMD_X86 is 1 where that code can be compiled (x86 with GCC or Clang);
   q4_simd_level() is then 2 with AVX2, 1 with SSSE3 but not AVX2, 0 with
   neither, and always 0 elsewhere. Each module that includes this keeps its
   own level, which q4_simd_force lowers for tests (never above the CPU's). */
#ifndef Q4_SIMD_H
#define Q4_SIMD_H

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define Q4_SIMD_X86 1
#include <immintrin.h>
#else
#define Q4_SIMD_X86 0
#endif

static int q4_simd_cached = -1;

static inline int q4_simd_best(void) {
#if Q4_SIMD_X86
    return __builtin_cpu_supports("avx2") ? 2 : __builtin_cpu_supports("ssse3") ? 1 : 0;
#else
    return 0;
#endif
}

static inline int q4_simd_level(void) {
    if (q4_simd_cached < 0)
        q4_simd_cached = q4_simd_best();
    return q4_simd_cached;
}

/* want < 0: leave it; returns the level in use. */
static inline int q4_simd_force(int want) {
    int best = q4_simd_best();
    if (want >= 0)
        q4_simd_cached = want < best ? want : best;
    return q4_simd_level();
}

#endif
