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

/* vector lanes: KERA_LANES batch rows per block, GCC vector types */
#define KERA_LANES 4
typedef float kf32 __attribute__((vector_size(16)));
typedef double kf64 __attribute__((vector_size(32)));
typedef uint8_t ku8 __attribute__((vector_size(4)));
typedef uint32_t ku32 __attribute__((vector_size(16)));
typedef int32_t ks32 __attribute__((vector_size(16)));
typedef uint64_t ku64 __attribute__((vector_size(32)));
typedef int64_t ks64 __attribute__((vector_size(32)));
/* mask of a comparison: a vector comparison is already -1/0 per lane.  64-bit lanes span two
   hardware registers, and gcc scalarises comparisons wider than one, so they go by halves. */
#define K_C32(a, op, b) ((ku32)((a) op (b)))
typedef uint64_t ku64h __attribute__((vector_size(16)));
#define K_LO(x) __builtin_shufflevector((x), (x), 0, 1)
#define K_HI(x) __builtin_shufflevector((x), (x), 2, 3)
#define K_C64(a, op, b) __builtin_shufflevector((ku64h)(K_LO(a) op K_LO(b)),     (ku64h)(K_HI(a) op K_HI(b)), 0, 1, 2, 3)
#define K_CVT(x, T) __builtin_convertvector((x), T)
#define K_AS(T, x) return (T)(x)              /* a vector cast keeps the bits, in registers */
#define K_SPLAT(T, x) ((T){0} + (x))
#define K_MAP1(T, f, a) ({ T k_r_; for (int k_l_ = 0; k_l_ < KERA_LANES; k_l_++) { \
    k_r_[k_l_] = f((a)[k_l_]); } k_r_; })
#define K_MAP3(T, f, a, b, c) ({ T k_r_; for (int k_l_ = 0; k_l_ < KERA_LANES; k_l_++) { \
    k_r_[k_l_] = f((a)[k_l_], (b)[k_l_], (c)[k_l_]); } k_r_; })

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

static K_NOINLINE void k_load8_n(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    const unsigned char *s = (const unsigned char *)src;
    for (size_t j = 0; j < size; j++) {
        ku8 v = {0};
        for (size_t l = 0; l < cnt; l++) {
            uint8_t w;
            memcpy(&w, s + ((row + l) * size + j) * 1, 1);
            v[l] = w != 0;
        }
        memcpy((unsigned char *)t + j * sizeof v, &v, sizeof v);
    }
}

static inline void k_load8(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    if (size == 1 && cnt == KERA_LANES) { /* a full block of scalars: one vector load */
        ku8 v;
        memcpy(&v, (const unsigned char *)src + row * 1, sizeof v);
        v = (ku8)(v != (ku8){0}) & 1u;
        memcpy(t, &v, sizeof v);
        return;
    }
    k_load8_n(t, src, row, cnt, size); /* element by element, lane by lane */
}

static K_NOINLINE void k_store8_n(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    unsigned char *d = (unsigned char *)dst;
    for (size_t j = 0; j < size; j++) {
        ku8 v;
        memcpy(&v, (const unsigned char *)t + j * sizeof v, sizeof v);
        for (size_t l = 0; l < cnt; l++) {
            uint8_t w = v[l];
            memcpy(d + ((row + l) * size + j) * 1, &w, 1);
        }
    }
}

static inline void k_store8(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    if (size == 1 && cnt == KERA_LANES) {
        memcpy((unsigned char *)dst + row * 1, t, sizeof(ku8));
        return;
    }
    k_store8_n(dst, t, row, cnt, size);
}

static K_NOINLINE void k_load32_n(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    const unsigned char *s = (const unsigned char *)src;
    for (size_t j = 0; j < size; j++) {
        ku32 v = {0};
        for (size_t l = 0; l < cnt; l++) {
            uint32_t w;
            memcpy(&w, s + ((row + l) * size + j) * 4, 4);
            v[l] = w;
        }
        memcpy((unsigned char *)t + j * sizeof v, &v, sizeof v);
    }
}

static inline void k_load32(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    if (size == 1 && cnt == KERA_LANES) { /* a full block of scalars: one vector load */
        ku32 v;
        memcpy(&v, (const unsigned char *)src + row * 4, sizeof v);
        memcpy(t, &v, sizeof v);
        return;
    }
    k_load32_n(t, src, row, cnt, size); /* element by element, lane by lane */
}

static K_NOINLINE void k_store32_n(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    unsigned char *d = (unsigned char *)dst;
    for (size_t j = 0; j < size; j++) {
        ku32 v;
        memcpy(&v, (const unsigned char *)t + j * sizeof v, sizeof v);
        for (size_t l = 0; l < cnt; l++) {
            uint32_t w = v[l];
            memcpy(d + ((row + l) * size + j) * 4, &w, 4);
        }
    }
}

static inline void k_store32(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    if (size == 1 && cnt == KERA_LANES) {
        memcpy((unsigned char *)dst + row * 4, t, sizeof(ku32));
        return;
    }
    k_store32_n(dst, t, row, cnt, size);
}

static K_NOINLINE void k_load64_n(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    const unsigned char *s = (const unsigned char *)src;
    for (size_t j = 0; j < size; j++) {
        ku64 v = {0};
        for (size_t l = 0; l < cnt; l++) {
            uint64_t w;
            memcpy(&w, s + ((row + l) * size + j) * 8, 8);
            v[l] = w;
        }
        memcpy((unsigned char *)t + j * sizeof v, &v, sizeof v);
    }
}

static inline void k_load64(void *t, const void *src, size_t row, size_t cnt, size_t size)
{
    if (size == 1 && cnt == KERA_LANES) { /* a full block of scalars: one vector load */
        ku64 v;
        memcpy(&v, (const unsigned char *)src + row * 8, sizeof v);
        memcpy(t, &v, sizeof v);
        return;
    }
    k_load64_n(t, src, row, cnt, size); /* element by element, lane by lane */
}

static K_NOINLINE void k_store64_n(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    unsigned char *d = (unsigned char *)dst;
    for (size_t j = 0; j < size; j++) {
        ku64 v;
        memcpy(&v, (const unsigned char *)t + j * sizeof v, sizeof v);
        for (size_t l = 0; l < cnt; l++) {
            uint64_t w = v[l];
            memcpy(d + ((row + l) * size + j) * 8, &w, 8);
        }
    }
}

static inline void k_store64(void *dst, const void *t, size_t row, size_t cnt, size_t size)
{
    if (size == 1 && cnt == KERA_LANES) {
        memcpy((unsigned char *)dst + row * 8, t, sizeof(ku64));
        return;
    }
    k_store64_n(dst, t, row, cnt, size);
}
