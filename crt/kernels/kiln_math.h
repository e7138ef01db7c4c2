/*
 * kiln_math.h - the fixed-point arithmetic every int8 kernel shares.
 *
 * These reproduce TFLite's default (double rounding) integer arithmetic bit
 * for bit: gemmlowp's SaturatingRoundingDoublingHighMul followed by a
 * round-half-away-from-zero division by a power of two. The numpy twin is
 * kiln.compiler.numerics; tests pin the two against each other and against
 * tflite-micro.
 */
#ifndef KILN_MATH_H
#define KILN_MATH_H

#include <stdint.h>

/* (a * b * 2) >> 32, rounded to nearest, saturating the one overflow case
 * a == b == INT32_MIN. */
static inline int32_t kiln_sat_rounding_doubling_high_mul(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    const int64_t ab = (int64_t)a * (int64_t)b;
    const int64_t nudge = ab >= 0 ? (INT64_C(1) << 30) : (1 - (INT64_C(1) << 30));
    /* C division truncates toward zero, which is what gemmlowp relies on. */
    return (int32_t)((ab + nudge) / (INT64_C(1) << 31));
}

/* x / 2^exponent rounded to nearest, ties away from zero; exponent in [0, 31]. */
static inline int32_t kiln_rounding_divide_by_pot(int32_t x, int32_t exponent)
{
    const int32_t mask = (int32_t)((UINT32_C(1) << exponent) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* x * multiplier * 2^(shift - 31): TFLite's MultiplyByQuantizedMultiplier.
 * shift in [-31, 30]. A positive shift is applied before the multiply, as in
 * TFLite, with two's complement wrap-around (TFLite's int32 multiply). */
static inline int32_t kiln_requantize(int32_t x, int32_t multiplier, int32_t shift)
{
    const int32_t left_shift = shift > 0 ? shift : 0;
    const int32_t right_shift = shift > 0 ? 0 : -shift;
    const int32_t shifted = (int32_t)((uint32_t)x << left_shift);
    return kiln_rounding_divide_by_pot(
        kiln_sat_rounding_doubling_high_mul(shifted, multiplier), right_shift);
}

/* x * multiplier * 2^(shift - 31) for a 64-bit x: TFLite's int64
 * MultiplyByQuantizedMultiplier (16x8 layers with int64 bias), which rounds
 * differently from kiln_requantize: the multiplier is first rounded to 15
 * bits (0x7FFF at most), then one rounding shift by 15 - shift. Needs
 * multiplier >= 0, shift in [-31, 7] and |x| < 2^47 (the caller's bound), so
 * no intermediate overflows; the result is truncated to int32 as TFLite does
 * (two's complement wrap-around). */
static inline int32_t kiln_requantize64(int64_t x, int32_t multiplier, int32_t shift)
{
    const int32_t reduced = multiplier < 0x7FFF0000 ? (multiplier + (1 << 15)) >> 16 : 0x7FFF;
    /* (p + 2^(t - 1)) >> t with p = x * reduced, t = 15 - shift >= 8, taken as
     * ((p >> (t - 1)) + 1) >> 1: the same floor (floor((floor(u) + 1) / 2) =
     * floor((u + 1) / 2)), with one variable 64-bit shift instead of two. */
    const int64_t half = (x * reduced) >> (14 - shift);
    return (int32_t)(uint32_t)(uint64_t)((half + 1) >> 1);
}

static inline int32_t kiln_clamp(int32_t x, int32_t lo, int32_t hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

static inline int32_t kiln_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int32_t kiln_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }

#endif /* KILN_MATH_H */
