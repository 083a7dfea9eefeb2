#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__FAST_MATH__) || (defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__)
#error "kera: compile without -ffast-math/-Ofast: the contract needs IEEE arithmetic"
#endif
#if defined(__GNUC__) && !defined(__clang__) && !defined(__SUPPORT_SNAN__)
#error "kera: compile with -fsignaling-nans: without it gcc may quiet a signalling NaN constant"
#endif
#if FLT_EVAL_METHOD != 0
#error "kera: needs FLT_EVAL_METHOD == 0 (x87 excess precision changes results; use SSE)"
#endif
#if !defined(__GNUC__) || defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
/* Compile time, not semantics: helpers over whole tiles (k_<op>_<type>_n, lane-by-lane loads
   and stores) are functions of their own, built once per unit, and loops that move elements
   stay loops (not unrolled into every node's code).  Neither changes what is computed. */
#if defined(__GNUC__) && !defined(__clang__)
#define K_NOINLINE __attribute__((noinline, noclone, unused))
#define K_ROLLED _Pragma("GCC unroll 1")
#elif defined(__GNUC__)
#define K_NOINLINE __attribute__((noinline, unused))
#define K_ROLLED
#else
#define K_NOINLINE
#define K_ROLLED
#endif

/* scalar lanes: one batch row per block, plain ISO C11 */
#define KERA_LANES 1
typedef float kf32;
typedef double kf64;
typedef uint8_t ku8;
typedef uint32_t ku32;
typedef int32_t ks32;
typedef uint64_t ku64;
typedef int64_t ks64;
/* all-ones/zero mask of a comparison (C gives 0/1) */
#define K_C32(a, op, b) ((ku32)0 - (ku32)((a) op (b)))
#define K_C64(a, op, b) ((ku64)0 - (ku64)((a) op (b)))
#define K_CVT(x, T) ((T)(x))                  /* C conversion (operands are in range) */
#define K_AS(T, x) T k_r_; memcpy(&k_r_, &(x), sizeof k_r_); return k_r_  /* same bits */
#define K_SPLAT(T, x) ((T)(x))
#define K_MAP1(T, f, a) (f(a))
#define K_MAP3(T, f, a, b, c) (f((a), (b), (c)))

/* The contract needs round-to-nearest-even and subnormals kept (no FTZ/DAZ). */
static int k_fpenv_ok(void)
{
#if defined(__GNUC__) && defined(__SSE__) && (defined(__x86_64__) || defined(__i386__))
    if (__builtin_ia32_stmxcsr() & 0xE040u) /* MXCSR: FTZ bit 15, rounding 13-14, DAZ bit 6 */
        return 0;
#elif defined(__GNUC__) && defined(__aarch64__)
    if (__builtin_aarch64_get_fpcr() & 0x01C00002u) /* FPCR: FZ bit 24, RMode 22-23, AH bit 1 */
        return 0;
#endif
    return fegetround() == FE_TONEAREST;
}

static inline void k_load8(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    (void)cnt;
    memcpy(t, (const unsigned char *)src + row * size * 1, size * 1);
    for (size_t j = 0; j < size; j++)
        ((ku8 *)t)[j] = ((ku8 *)t)[j] != 0;
}

static inline void k_store8(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    (void)cnt;
    memcpy((unsigned char *)dst + row * size * 1, t, size * 1);
}

static inline void k_load32(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    (void)cnt;
    memcpy(t, (const unsigned char *)src + row * size * 4, size * 4);
}

static inline void k_store32(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    (void)cnt;
    memcpy((unsigned char *)dst + row * size * 4, t, size * 4);
}

static inline void k_load64(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    (void)cnt;
    memcpy(t, (const unsigned char *)src + row * size * 8, size * 8);
}

static inline void k_store64(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    (void)cnt;
    memcpy((unsigned char *)dst + row * size * 8, t, size * 8);
}
