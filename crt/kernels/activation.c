/*
 * activation.c - int8 lookup-table activations and SOFTMAX.
 */
#include "activation.h"

#include "kiln_math.h"

static int32_t dims_count(const kiln_dims_t *d)
{
    if (d == NULL || d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0) {
        return -1;
    }
    return d->n * d->h * d->w * d->c;
}

/* --- table lookup ---------------------------------------------------------------- */

kiln_status_t kiln_lut_s8(const kiln_lut_params_t *params,
                          const kiln_dims_t *input_dims, const int8_t *input,
                          const kiln_dims_t *output_dims, int8_t *output)
{
    const int32_t count = dims_count(input_dims);
    if (params == NULL || params->table == NULL || input == NULL || output == NULL ||
        count < 0 || count != dims_count(output_dims)) {
        return KILN_ERR_ARG;
    }
    const int8_t *table = params->table + 128;   /* table[x] for x in [-128, 127] */
    for (int32_t i = 0; i < count; ++i) {
        output[i] = table[input[i]];
    }
    return KILN_OK;
}

/* --- SOFTMAX ----------------------------------------------------------------------- */

/* gemmlowp's SaturatingRoundingMultiplyByPOT for a positive exponent: a left
 * shift that saturates to the int32 range. */
static inline int32_t saturating_shift_left(int32_t x, int32_t exponent)
{
    const int32_t threshold = (int32_t)((UINT32_C(1) << (31 - exponent)) - 1);
    if (x > threshold) {
        return INT32_MAX;
    }
    if (x < -threshold) {
        return INT32_MIN;
    }
    return x * (1 << exponent);
}

/* (a + b) / 2 rounded away from zero (gemmlowp RoundingHalfSum). */
static inline int32_t rounding_half_sum(int32_t a, int32_t b)
{
    const int64_t sum = (int64_t)a + (int64_t)b;
    return (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
}

/* gemmlowp's one_over_one_plus_x_for_x_in_0_1: 1 / (1 + a) for a in [0, 1),
 * Q0.31 in and out, by three Newton-Raphson steps on x ~ 1 / d in Q2.29 with
 * d = (1 + a) / 2 in [1/2, 1). x stays in (1, 2] and each correction below
 * 1/16, so none of the Q2.29 additions can overflow. */
static int32_t one_over_one_plus_x(int32_t a)
{
    const int32_t kOneQ2 = INT32_C(1) << 29;
    const int32_t k48Over17Q2 = INT32_C(1515870810);
    const int32_t kMinus32Over17Q2 = INT32_C(-1010580540);
    const int32_t half_denominator = rounding_half_sum(a, INT32_MAX);
    int32_t x = k48Over17Q2 + kiln_sat_rounding_doubling_high_mul(half_denominator,
                                                                  kMinus32Over17Q2);
    for (int i = 0; i < 3; ++i) {
        const int32_t residual =
            kOneQ2 - kiln_sat_rounding_doubling_high_mul(half_denominator, x);
        /* x * residual is Q4.27; back to Q2.29 with a saturating shift. */
        x += saturating_shift_left(kiln_sat_rounding_doubling_high_mul(x, residual), 2);
    }
    /* x / 2 read as Q1.30, to Q0.31: saturates at 1.0 when a == 0. */
    return saturating_shift_left(x, 1);
}

static inline int32_t count_leading_zeros(uint32_t x)
{
#if defined(__GNUC__)
    return x == 0 ? 32 : (int32_t)__builtin_clz(x);
#else
    int32_t n = 0;
    if (x == 0) {
        return 32;
    }
    while ((x & UINT32_C(0x80000000)) == 0) {
        x <<= 1;
        ++n;
    }
    return n;
#endif
}

/* Rows up to 8191 long: each Q12.19 term is at most 2^19, so the sum stays
 * below 2^32. */
#define KILN_SOFTMAX_MAX_DEPTH 8191

kiln_status_t kiln_softmax_s8(const kiln_softmax_params_t *params,
                              const kiln_dims_t *input_dims, const int8_t *input,
                              const kiln_dims_t *output_dims, int8_t *output)
{
    const int32_t count = dims_count(input_dims);
    if (params == NULL || params->exp_table == NULL || input == NULL || output == NULL ||
        count < 0 || count != dims_count(output_dims) || input_dims->c != output_dims->c ||
        input_dims->c > KILN_SOFTMAX_MAX_DEPTH || params->exp_table[0] != INT32_MAX) {
        return KILN_ERR_ARG;   /* exp_table[0] is exp(0) = 1.0 */
    }
    const int32_t *exp_table = params->exp_table;
    const int32_t depth = input_dims->c;
    const int32_t rows = count / depth;
    for (int32_t r = 0; r < rows; ++r) {
        const int8_t *x = input + r * depth;
        int8_t *y = output + r * depth;
        int32_t max = x[0];
        for (int32_t c = 1; c < depth; ++c) {
            max = x[c] > max ? x[c] : max;
        }
        /* Sum of exp in Q12.19 (gemmlowp Rescale<12>: a rounding shift by 12). */
        uint32_t sum = 0;
        for (int32_t c = 0; c < depth; ++c) {
            sum += (uint32_t)kiln_rounding_divide_by_pot(exp_table[max - x[c]], 12);
        }
        /* TFLM's GetReciprocal: sum = 2^bits_over_unit * (1 + fraction). sum >= 2^19
         * (the max element contributes exp(0)), so headroom <= 12. */
        const int32_t headroom_plus_one = count_leading_zeros(sum);
        const int32_t bits_over_unit = 12 - headroom_plus_one;
        const int32_t fraction = (int32_t)((sum << headroom_plus_one) - UINT32_C(0x80000000));
        const int32_t scale = one_over_one_plus_x(fraction);
        /* Q0.31 * Q0.31 product down to the 1/256 output scale. */
        const int32_t exponent = bits_over_unit + 31 - 8;
        if (exponent > 31) {
            /* The sum is at least 2^28 (>= 512 near-equal inputs): every probability
             * is below 1/512 and rounds to 0. TFLM stops on a TFLITE_CHECK here. */
            for (int32_t c = 0; c < depth; ++c) {
                y[c] = INT8_MIN;
            }
            continue;
        }
        for (int32_t c = 0; c < depth; ++c) {
            const int32_t prob = kiln_rounding_divide_by_pot(
                kiln_sat_rounding_doubling_high_mul(scale, exp_table[max - x[c]]), exponent);
            y[c] = (int8_t)kiln_clamp(prob - 128, INT8_MIN, INT8_MAX);
        }
    }
    return KILN_OK;
}
