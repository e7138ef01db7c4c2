/*
 * conv_mve.h - primitives of the MVE kernels (conv_mve.c, dwconv_mve.c,
 * fully_connected_mve.c). Private: not included by kiln_kernels.h, and only
 * meaningful where __ARM_FEATURE_MVE has its integer bit (KILN_MVE below).
 */
#ifndef KILN_CONV_MVE_H
#define KILN_CONV_MVE_H

#include "kernels_mve.h"
#include "conv_internal.h"

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#define KILN_MVE 1
#include <arm_mve.h>

#if defined(__GNUC__)
#define KILN_MVE_INLINE static inline __attribute__((always_inline))
#define KILN_MVE_NOINLINE __attribute__((noinline))
#else
#define KILN_MVE_INLINE static inline
#define KILN_MVE_NOINLINE
#endif

/*
 * TFLite's MultiplyByQuantizedMultiplier (kiln_requantize) on four lanes:
 *
 *   1. x << left_shift, wrapping like TFLite's int32 multiply (VSHL);
 *   2. gemmlowp's SaturatingRoundingDoublingHighMul: (2 x m + 2^31) >> 32,
 *      saturating only INT32_MIN * INT32_MIN. gemmlowp adds 2^30 to x m >= 0
 *      and 1 - 2^30 below zero, then truncates toward zero: both are
 *      floor((x m + 2^30) / 2^31), which VQRDMULH computes (ties up);
 *   3. RoundingDivideByPOT: round half away from zero, where VRSHL rounds
 *      half up. Lanes with a right shift and a negative x first move down by
 *      one (saturating, so INT32_MIN stays, and its quotient is exact):
 *      then a tie -k - 1/2 becomes just below it and rounds to -k - 1, and
 *      no other value crosses a rounding boundary (x is an integer, the
 *      boundaries are at odd multiples of 2^(n-1)). The sign test is
 *      x & neg_right_shift: a right shift n > 0 is stored as -n, whose sign
 *      bit is set; n = 0 leaves x alone.
 * tests/test_ops_mve.py checks it against kiln_requantize on QEMU over
 * random and edge values, ties included, for every shift in [-31, 30].
 */
KILN_MVE_INLINE int32x4_t kiln_mve_requantize(int32x4_t x, int32x4_t multiplier,
                                              int32x4_t left_shift, int32x4_t neg_right_shift)
{
    x = vqrdmulhq_s32(vshlq_s32(x, left_shift), multiplier);
    const int32x4_t fixup = vshrq_n_s32(vandq_s32(x, neg_right_shift), 31);
    return vrshlq_s32(vqaddq_s32(x, fixup), neg_right_shift);
}

/* bias + acc -> requantize -> + output_offset -> clamp, four lanes of one
 * kiln_mve_quant4_t. */
KILN_MVE_INLINE int32x4_t kiln_mve_output4(int32x4_t acc, const kiln_mve_quant4_t *q,
                                           int32_t output_offset, int32_t act_min,
                                           int32_t act_max)
{
    acc = vaddq_s32(acc, vldrwq_s32(q->bias));
    int32x4_t v = kiln_mve_requantize(acc, vldrwq_s32(q->multiplier),
                                      vldrwq_s32(q->left_shift),
                                      vldrwq_s32(q->neg_right_shift));
    v = vaddq_n_s32(v, output_offset);
    return vminq_s32(vmaxq_s32(v, vdupq_n_s32(act_min)), vdupq_n_s32(act_max));
}

/* Four int32 sums into lanes 0-3 by two dual-lane moves, where GCC 12 spends a VDUP
 * and three lane moves: "VMOV Qd[2], Qd[0], Rt, Rt2" writes Rt into lane 0 and Rt2
 * into lane 2 (Rt is the encoding's low-lane register; the MVE conv and FC tests on
 * QEMU catch a swap). */
KILN_MVE_INLINE int32x4_t kiln_mve_lanes4(int32_t a0, int32_t a1, int32_t a2, int32_t a3)
{
    int32x4_t v;
    __asm__("vmov %q[v][2], %q[v][0], %[a0], %[a2]\n\t"
            "vmov %q[v][3], %q[v][1], %[a1], %[a3]"
            : [v] "=w"(v)
            : [a0] "r"(a0), [a1] "r"(a1), [a2] "r"(a2), [a3] "r"(a3));
    return v;
}

/*
 * A receptive field times a block of four packed filter rows: the four dot
 * products as lanes 0-3. The field is `runs` runs of `len` int8 values, run r
 * at row + r * step (the rows of a conv window, or one run: a 1x1 pixel, a
 * FULLY_CONNECTED row); the filter block holds per run ceil(len / 16) groups
 * of 16 k, 16 bytes of each of the four rows (zeros past len). A run is read
 * only up to its len (the last group is a predicated load, other lanes
 * zero), so it may end at the end of its buffer.
 * Overflow: each dot product is bounded by the caller's proof (conv.h); the
 * partial sums are those of the plain kernels in another order, and VMLADAVA
 * wraps modulo 2^32 like them, so the result is the exact one.
 */
KILN_MVE_INLINE int32x4_t kiln_mve_dot4(const int8_t *row, int32_t step, int32_t runs,
                                        int32_t len, const int8_t *w)
{
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    const int32_t whole = len / 16;
    const mve_pred16_t tail = vctp8q((uint32_t)(len - whole * 16));
    for (int32_t r = 0; r < runs; ++r, row += step) {
        const int8_t *x = row;
        /* The whole groups as a low-overhead loop of ten instructions a group (GCC 12
         * spends a register copy more). VMLADAVA's accumulators must be even
         * registers ("Te"); q0, q1 are scratch. */
        __asm__ volatile("wls lr, %[n], 2f\n"
                         "1:\n\t"
                         "vldrb.8 q0, [%[x]], #16\n\t"
                         "vldrb.8 q1, [%[w]], #16\n\t"
                         "vmladava.s8 %[a0], q0, q1\n\t"
                         "vldrb.8 q1, [%[w]], #16\n\t"
                         "vmladava.s8 %[a1], q0, q1\n\t"
                         "vldrb.8 q1, [%[w]], #16\n\t"
                         "vmladava.s8 %[a2], q0, q1\n\t"
                         "vldrb.8 q1, [%[w]], #16\n\t"
                         "vmladava.s8 %[a3], q0, q1\n\t"
                         "le lr, 1b\n"
                         "2:\n"
                         : [a0] "+Te"(a0), [a1] "+Te"(a1), [a2] "+Te"(a2), [a3] "+Te"(a3),
                           [x] "+r"(x), [w] "+r"(w)
                         : [n] "r"(whole), "m"(*(const int8_t(*)[])x), "m"(*(const int8_t(*)[])w)
                         : "lr", "q0", "q1");
        if (whole * 16 < len) {
            const int8x16_t v = vldrbq_z_s8(x, tail);
            a0 = vmladavaq_s8(a0, v, vldrbq_s8(w));
            a1 = vmladavaq_s8(a1, v, vldrbq_s8(w + 16));
            a2 = vmladavaq_s8(a2, v, vldrbq_s8(w + 32));
            a3 = vmladavaq_s8(a3, v, vldrbq_s8(w + 48));
            w += 64;
        }
    }
    return kiln_mve_lanes4(a0, a1, a2, a3);
}

/* The sum of a row of k int8 values (FULLY_CONNECTED's filter_offset term);
 * |sum| <= 128 k fits int32 for every k the compiler allows. */
KILN_MVE_INLINE int32_t kiln_mve_sum(const int8_t *row, int32_t k)
{
    int32_t s = 0;
    for (; k >= 16; k -= 16, row += 16) {
        s = vaddvaq_s8(s, vldrbq_s8(row));
    }
    if (k > 0) {
        s = vaddvaq_s8(s, vldrbq_z_s8(row, vctp8q((uint32_t)k)));
    }
    return s;
}

/* dst[0, n) = src[0, n) and dst[0, n) = value, 16 bytes an iteration. */
KILN_MVE_INLINE void kiln_mve_copy(int8_t *dst, const int8_t *src, int32_t n)
{
    for (; n > 0; n -= 16, src += 16, dst += 16) {
        const mve_pred16_t p = vctp8q((uint32_t)n);
        vstrbq_p_s8(dst, vldrbq_z_s8(src, p), p);
    }
}

KILN_MVE_INLINE void kiln_mve_fill(int8_t *dst, int8x16_t value, int32_t n)
{
    for (; n > 0; n -= 16, dst += 16) {
        vstrbq_p_s8(dst, value, vctp8q((uint32_t)n));
    }
}

#endif /* MVE */

#endif /* KILN_CONV_MVE_H */
