/*
 * activation.c - int8 lookup-table activations and SOFTMAX; int16 SOFTMAX,
 * LOGISTIC, TANH, RELU, RELU6 and LEAKY_RELU; int8 LOG_SOFTMAX.
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

/* The int8 SOFTMAX runs once an inference on a classifier's few outputs (KWS: 12, a
 * few thousand instructions of millions): its functions are compiled for size (GCC
 * and clang optimize a cold function for size; KWS -230 B of flash). */
#if defined(__GNUC__)
#define KILN_SOFTMAX_FN __attribute__((cold))
#else
#define KILN_SOFTMAX_FN
#endif

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

/* gemmlowp's FixedPoint product (SaturatingRoundingDoublingHighMul) out of line:
 * SOFTMAX calls it up to a dozen times a value, and one copy keeps the code small. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
KILN_SOFTMAX_FN static int32_t fp_mul(int32_t a, int32_t b)
{
    return kiln_sat_rounding_doubling_high_mul(a, b);
}

/* gemmlowp's one_over_one_plus_x_for_x_in_0_1: 1 / (1 + a) for a in [0, 1),
 * Q0.31 in and out, by three Newton-Raphson steps on x ~ 1 / d in Q2.29 with
 * d = (1 + a) / 2 in [1/2, 1). x stays in (1, 2] and each correction below
 * 1/16, so none of the Q2.29 additions can overflow. */
KILN_SOFTMAX_FN static int32_t one_over_one_plus_x(int32_t a)
{
    const int32_t kOneQ2 = INT32_C(1) << 29;
    const int32_t k48Over17Q2 = INT32_C(1515870810);
    const int32_t kMinus32Over17Q2 = INT32_C(-1010580540);
    const int32_t half_denominator = rounding_half_sum(a, INT32_MAX);
    int32_t x = k48Over17Q2 + fp_mul(half_denominator, kMinus32Over17Q2);
    for (int i = 0; i < 3; ++i) {
        const int32_t residual = kOneQ2 - fp_mul(half_denominator, x);
        /* x * residual is Q4.27; back to Q2.29 with a saturating shift. */
        x += saturating_shift_left(fp_mul(x, residual), 2);
    }
    /* x / 2 read as Q1.30, to Q0.31: saturates at 1.0 when a == 0. */
    return saturating_shift_left(x, 1);
}

/* gemmlowp's exp_on_negative_values for a Q5.26 input a <= 0, Q0.31 out (TFLM's
 * int8 SOFTMAX; compiler/codegen/ops/fixedpoint.py is the same in numpy).
 * a = -k/4 + r with r in [-1/4, 0): exp(r) by a Taylor series around -1/8, then
 * one factor exp(-2^j) per bit j of k. FixedPoint additions wrap (gemmlowp's Add);
 * here none can: every operand is a Q0.31 value of magnitude below 1. */
KILN_SOFTMAX_FN static int32_t exp_on_negative_values_q5(int32_t a)
{
    /* exp(-2^j) in Q0.31 for j = -2 .. 4: bits 24 .. 30 of the Q5.26 remainder. */
    static const int32_t kBarrel[7] = {1672461947, 1302514674, 790015084, 290630308,
                                       39332535, 720401, 242};
    const int32_t kOneQuarter = INT32_C(1) << 24;
    const int32_t kExpMinusOneEighth = INT32_C(1895147668);
    const int32_t kOneThird = INT32_C(715827883);
    if (a == 0) {
        return INT32_MAX;
    }
    /* r in [-2^24, 0) (Q5.26); Rescale<0> is a left shift by 5 that cannot saturate. */
    const int32_t r = (a & (kOneQuarter - 1)) - kOneQuarter;
    const int32_t x = r * 32 + (INT32_C(1) << 28);             /* r + 1/8, Q0.31 */
    const int32_t x2 = fp_mul(x, x);
    const int32_t x3 = fp_mul(x2, x);
    const int32_t x4 = fp_mul(x2, x2);
    const int32_t x4_over_4 = kiln_rounding_divide_by_pot(x4, 2);
    const int32_t poly =
        kiln_rounding_divide_by_pot(fp_mul(x4_over_4 + x3, kOneThird) + x2, 1);
    int32_t result = kExpMinusOneEighth + fp_mul(kExpMinusOneEighth, x + poly);
    /* r - a = k/4 >= 0 (at most 2^31 - 1: r < 0 and a >= -2^31). */
    const uint32_t remainder = (uint32_t)r - (uint32_t)a;
    for (int32_t j = 0; j < 7; ++j) {
        if (remainder & (UINT32_C(1) << (24 + j))) {
            result = fp_mul(result, kBarrel[j]);
        }
    }
    return result;
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
/* int16 rows: the int32 sum of up to 65535 exp values of at most 32767. */
#define KILN_SOFTMAX_S16_MAX_DEPTH 65535
/* LOG_SOFTMAX keeps its Q12.19 sum in int32 (TFLM: "safe in 2^12 steps"). */
#define KILN_LOG_SOFTMAX_MAX_DEPTH 4095

/* TFLM's quantized Softmax for one int8 row; the output type has `output_bits`
 * (8 or 16) bits and its minimum as zero point (-128 at scale 1/256, -32768 at
 * 1/65536). The row goes to y8 or y16 (the other is NULL), so one loop serves
 * both output types. */
/* exp(-d) in Q0.31 for d = max - x: exp_table[d] (0 past the table's last entry), or
 * computed as TFLM does: the difference -d, if at least diff_min, times
 * 2^left_shift (no overflow: softmax_s8_args_valid) rescaled by the input
 * multiplier to Q5.26 (MultiplyByQuantizedMultiplierGreaterThanOne). */
KILN_SOFTMAX_FN static int32_t softmax_exp(const kiln_softmax_params_t *p, int32_t d)
{
    if (p->exp_table != NULL) {
        return d < p->entries ? p->exp_table[d] : 0;
    }
    if (d > -p->diff_min) {
        return 0;
    }
    const int32_t diff = -(int32_t)((uint32_t)d << p->input_left_shift);
    return exp_on_negative_values_q5(fp_mul(diff, p->input_multiplier));
}

/* A row's first exp values, kept between the sum and the output pass: computing one
 * costs about 150 instructions, so short rows (the classifiers' heads) compute each
 * once. */
#define KILN_SOFTMAX_KEPT 16

/* Inlined into each entry point: a model links one, its output type a constant. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void softmax_row_s8(const kiln_softmax_params_t *p, const int8_t *x, int32_t depth,
                           int32_t output_bits, int8_t *y8, int16_t *y16)
{
    const int32_t out_min = output_bits == 8 ? INT8_MIN : INT16_MIN;
    const int32_t out_max = output_bits == 8 ? INT8_MAX : INT16_MAX;
    int32_t max = x[0];
    for (int32_t c = 1; c < depth; ++c) {
        max = x[c] > max ? x[c] : max;
    }
    /* Sum of exp in Q12.19 (gemmlowp Rescale<12>: a rounding shift by 12). */
    uint32_t sum = 0;
    int32_t kept[KILN_SOFTMAX_KEPT];
    for (int32_t c = 0; c < depth; ++c) {
        const int32_t e = softmax_exp(p, max - x[c]);
        if (c < KILN_SOFTMAX_KEPT) {
            kept[c] = e;
        }
        sum += (uint32_t)kiln_rounding_divide_by_pot(e, 12);
    }
    /* TFLM's GetReciprocal: sum = 2^bits_over_unit * (1 + fraction). sum >= 2^19
     * (the max element contributes exp(0)), so headroom <= 12. */
    const int32_t headroom_plus_one = count_leading_zeros(sum);
    const int32_t bits_over_unit = 12 - headroom_plus_one;
    const int32_t fraction = (int32_t)((sum << headroom_plus_one) - UINT32_C(0x80000000));
    const int32_t scale = one_over_one_plus_x(fraction);
    /* Q0.31 * Q0.31 product down to the 2^-output_bits output scale. */
    const int32_t exponent = bits_over_unit + 31 - output_bits;
    for (int32_t c = 0; c < depth; ++c) {
        int32_t value = out_min;
        if (exponent <= 31) {
            /* exponent > 31 (int8 only): the sum is at least 2^28 (>= 512 near-equal
             * inputs), every probability is below 1/512 and rounds to 0. TFLM stops
             * on a TFLITE_CHECK there. */
            const int32_t prob = kiln_rounding_divide_by_pot(
                fp_mul(scale, c < KILN_SOFTMAX_KEPT ? kept[c] : softmax_exp(p, max - x[c])),
                exponent);
            value = kiln_clamp(prob + out_min, out_min, out_max);
        }
        if (output_bits == 8) {
            y8[c] = (int8_t)value;
        } else {
            y16[c] = (int16_t)value;
        }
    }
}

KILN_SOFTMAX_FN static int softmax_s8_args_valid(const kiln_softmax_params_t *params,
                                 const kiln_dims_t *input_dims, const void *input,
                                 const kiln_dims_t *output_dims, const void *output)
{
    const int32_t count = dims_count(input_dims);
    if (params == NULL) {
        return 0;
    }
    /* exp_table[0] is exp(0) = 1.0; computed, every difference down to diff_min
     * times 2^left_shift fits int32 */
    const int table_ok = params->exp_table != NULL && params->entries >= 1 &&
                         params->entries <= 256 && params->exp_table[0] == INT32_MAX;
    const int computed_ok = params->exp_table == NULL && params->input_multiplier >= 0 &&
                            (uint32_t)params->input_left_shift <= 31 && params->diff_min <= 0 &&
                            UINT32_C(0) - (uint32_t)params->diff_min <=
                                (uint32_t)(INT32_MAX >> params->input_left_shift);
    return (table_ok || computed_ok) && input != NULL && output != NULL &&
           count >= 0 && count == dims_count(output_dims) && input_dims->c == output_dims->c &&
           input_dims->c <= KILN_SOFTMAX_MAX_DEPTH;
}

KILN_SOFTMAX_FN kiln_status_t kiln_softmax_s8(const kiln_softmax_params_t *params,
                              const kiln_dims_t *input_dims, const int8_t *input,
                              const kiln_dims_t *output_dims, int8_t *output)
{
    if (!softmax_s8_args_valid(params, input_dims, input, output_dims, output)) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = input_dims->c;
    const int32_t rows = dims_count(input_dims) / depth;
    for (int32_t r = 0; r < rows; ++r) {
        softmax_row_s8(params, input + r * depth, depth, 8, output + r * depth, NULL);
    }
    return KILN_OK;
}

KILN_SOFTMAX_FN kiln_status_t kiln_softmax_s8_s16(const kiln_softmax_params_t *params,
                                  const kiln_dims_t *input_dims, const int8_t *input,
                                  const kiln_dims_t *output_dims, int16_t *output)
{
    if (!softmax_s8_args_valid(params, input_dims, input, output_dims, output)) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = input_dims->c;
    const int32_t rows = dims_count(input_dims) / depth;
    for (int32_t r = 0; r < rows; ++r) {
        softmax_row_s8(params, input + r * depth, depth, 16, NULL,
                       output + r * depth);
    }
    return KILN_OK;
}

/* --- int16: SOFTMAX, LOGISTIC, TANH ------------------------------------------------ */

/* TFLM's 513-entry int16 table lookup with linear interpolation: entry
 * 256 + (x >> 7) and the next, weighted by the low 7 bits. The slope and the
 * result are int16 values (TFLM stores them in int16_t: wrap-around). */
static inline int32_t wrap16(int32_t x)
{
    return (int32_t)(int16_t)(uint16_t)(uint32_t)x;
}

static inline int32_t lut_interpolate_s16(int32_t value, const int16_t *lut)
{
    const int32_t index = 256 + (value >> 7);          /* value in int16: index in [0, 511] */
    const int32_t offset = value & 0x7f;
    const int32_t base = lut[index];
    const int32_t slope = wrap16(lut[index + 1] - base);
    return wrap16(base + ((slope * offset + 64) >> 7));
}

kiln_status_t kiln_softmax_s16(const kiln_softmax_s16_params_t *params,
                               const kiln_dims_t *input_dims, const int16_t *input,
                               const kiln_dims_t *output_dims, int16_t *output)
{
    const int32_t count = dims_count(input_dims);
    if (params == NULL || params->exp_lut == NULL || params->one_over_one_plus_x_lut == NULL ||
        input == NULL || output == NULL || count < 0 || count != dims_count(output_dims) ||
        input_dims->c != output_dims->c || input_dims->c > KILN_SOFTMAX_S16_MAX_DEPTH ||
        params->input.shift < -31 || params->input.shift > 30) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = input_dims->c;
    const int32_t rows = count / depth;
    for (int32_t r = 0; r < rows; ++r) {
        const int16_t *x = input + r * depth;
        int16_t *y = output + r * depth;
        int32_t max = x[0];
        for (int32_t c = 1; c < depth; ++c) {
            max = x[c] > max ? x[c] : max;
        }
        /* exp(x - max), the difference in [-65535, 0] rescaled so that -65535 is
         * -10.0, recentred to int16 for the table. Kept in the output row (TFLM
         * does the same), which is why the kernel may not run in place. */
        int32_t sum = 0;                 /* Q16.15, at most depth * 32767 < 2^31 */
        for (int32_t c = 0; c < depth; ++c) {
            const int32_t scaled = kiln_requantize(x[c] - max, params->input.multiplier,
                                                   params->input.shift);
            const int32_t e = lut_interpolate_s16(kiln_clamp(scaled + 32767, INT16_MIN,
                                                             INT16_MAX), params->exp_lut);
            y[c] = (int16_t)e;
            sum += e;
        }
        /* 1 / sum: the sum normalised to [1, 2) with 16 fractional bits, minus one
         * and recentred to int16 for the 1/(1 + x) table. sum >= 1 (the max
         * element), so headroom_plus_one <= 31. */
        const int32_t headroom_plus_one = count_leading_zeros((uint32_t)sum);
        const int32_t shifted_sum =
            (int32_t)((((int64_t)sum << (headroom_plus_one - 1)) + (1 << 13)) >> 14);
        const int32_t reciprocal = lut_interpolate_s16(
            kiln_clamp(shifted_sum - ((1 << 15) + (1 << 16)), INT16_MIN, INT16_MAX),
            params->one_over_one_plus_x_lut);
        const int32_t right_shift = 31 - headroom_plus_one;
        const int64_t round = right_shift > 0 ? (INT64_C(1) << (right_shift - 1)) : 0;
        for (int32_t c = 0; c < depth; ++c) {
            const int32_t result =
                (int32_t)(((int64_t)y[c] * reciprocal + round) >> right_shift);
            y[c] = (int16_t)kiln_clamp(result, 0, INT16_MAX);
        }
    }
    return KILN_OK;
}

/* The input on the table's scale: TFLM's (x * multiplier + round) >> left_shift,
 * |x * multiplier| <= 2^15 * 32767 < 2^30. */
static inline int32_t sigmoid_input(int32_t x, const kiln_sigmoid_s16_params_t *p)
{
    const int32_t round = p->left_shift > 0 ? (INT32_C(1) << (p->left_shift - 1)) : 0;
    return (x * p->multiplier + round) >> p->left_shift;
}

static int sigmoid_params_valid(const kiln_sigmoid_s16_params_t *p)
{
    return p != NULL && p->table != NULL && p->multiplier >= 0 && p->multiplier <= 32767 &&
           p->left_shift >= 0 && p->left_shift <= 31;
}

kiln_status_t kiln_logistic_s16(const kiln_sigmoid_s16_params_t *params,
                                const kiln_dims_t *input_dims, const int16_t *input,
                                const kiln_dims_t *output_dims, int16_t *output)
{
    const int32_t count = dims_count(input_dims);
    if (!sigmoid_params_valid(params) || input == NULL || output == NULL || count < 0 ||
        count != dims_count(output_dims)) {
        return KILN_ERR_ARG;
    }
    const uint16_t *table = params->table;
    for (int32_t i = 0; i < count; ++i) {
        const int32_t v = sigmoid_input(input[i], params);
        const uint32_t a = (uint32_t)(v < 0 ? -v : v);
        /* Q7.9 of the table step (1/24 with the 3/4 prescale): entry and fraction. */
        const uint32_t h = a >> 9;
        uint32_t result;
        if (h >= 255) {
            result = UINT32_C(0x7FFF) << 10;
        } else {
            const uint32_t lo = table[h];
            const uint32_t hi = table[h + 1];
            result = (lo << 9) + (a & 0x1ff) * (hi - lo);
        }
        result = v >= 0 ? result + (1u << 9) : (1u << 25) - result + (1u << 9) - 1u;
        output[i] = (int16_t)(result >> 10);
    }
    return KILN_OK;
}

kiln_status_t kiln_tanh_s16(const kiln_sigmoid_s16_params_t *params,
                            const kiln_dims_t *input_dims, const int16_t *input,
                            const kiln_dims_t *output_dims, int16_t *output)
{
    const int32_t count = dims_count(input_dims);
    if (!sigmoid_params_valid(params) || input == NULL || output == NULL || count < 0 ||
        count != dims_count(output_dims)) {
        return KILN_ERR_ARG;
    }
    const uint16_t *table = params->table;
    for (int32_t i = 0; i < count; ++i) {
        const int32_t v = sigmoid_input(input[i], params);
        const uint32_t a = (uint32_t)(v < 0 ? -v : v);
        /* tanh(x) = 2 * sigmoid(2x) - 1: the same table at twice the step. */
        const uint32_t h = a >> 8;
        int32_t result;
        if (h >= 255) {
            result = INT32_C(0xFFFF) << 8;
        } else {
            const uint32_t lo = table[h];
            const uint32_t hi = table[h + 1];
            result = (int32_t)((lo << 8) + (a & 0xff) * (hi - lo));
        }
        result = v >= 0 ? result - (1 << 23) + (1 << 7) : -result + (1 << 23) + (1 << 7) - 1;
        output[i] = (int16_t)(result >> 8);
    }
    return KILN_OK;
}

/* --- int16: RELU, RELU6, LEAKY_RELU ---------------------------------------------- */

kiln_status_t kiln_leaky_relu_s16(const kiln_leaky_relu_s16_params_t *params,
                                  const kiln_dims_t *input_dims, const int16_t *input,
                                  const kiln_dims_t *output_dims, int16_t *output)
{
    const int32_t count = dims_count(input_dims);
    if (params == NULL || input == NULL || output == NULL || count < 0 ||
        count != dims_count(output_dims) || params->input_offset < -32767 ||
        params->input_offset > 32768 || params->positive.shift < -31 ||
        params->positive.shift > 30 || params->negative.shift < -31 ||
        params->negative.shift > 30 || params->clamp.min < INT16_MIN ||
        params->clamp.max > INT16_MAX || params->clamp.min > params->clamp.max) {
        return KILN_ERR_ARG;
    }
    const kiln_requant_t pos = params->positive;
    const kiln_requant_t neg = params->negative;
    for (int32_t i = 0; i < count; ++i) {
        const int32_t v = input[i] + params->input_offset;     /* |v| <= 65535 */
        const int32_t r = v >= 0 ? kiln_requantize(v, pos.multiplier, pos.shift)
                                 : kiln_requantize(v, neg.multiplier, neg.shift);
        /* The offset's addition wraps like TFLite's int32 one. */
        const int32_t y = (int32_t)((uint32_t)r + (uint32_t)params->output_offset);
        output[i] = (int16_t)kiln_clamp(y, params->clamp.min, params->clamp.max);
    }
    return KILN_OK;
}

/* --- LOG_SOFTMAX (int8) -------------------------------------------------------------- */

static inline int32_t saturating_add(int32_t a, int32_t b)
{
    const int64_t sum = (int64_t)a + (int64_t)b;
    return (int32_t)(sum > INT32_MAX ? INT32_MAX : (sum < INT32_MIN ? INT32_MIN : sum));
}

/* Wrapping int32 addition (gemmlowp's non-saturating FixedPoint +). */
static inline int32_t wrap_add(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a + (uint32_t)b);
}

/* TFLite's log_x_for_x_greater_than_or_equal_to_1<5>(x in Q12.19): ln(x) in
 * Q5.26. x = 2^z * r with r in [sqrt(1/2), sqrt(2)) (two candidate splits, the
 * one with r nearer 1 wins), then ln(r) from a rational approximation around
 * 2^-1/4 and z * ln(2), accumulated with 6 integer bits. */
static int32_t log_q12_to_q5(int32_t x)
{
    const int32_t kLog2 = INT32_C(1488522236);           /* ln 2, Q0.31 */
    const int32_t kSqrtSqrtHalf = INT32_C(1805811301);   /* 2^-1/4 */
    const int32_t kSqrtHalf = INT32_C(1518500250);       /* 2^-1/2 */
    const int32_t kAlphaN = INT32_C(117049297);          /* 11/240 * 2^1/4 */
    const int32_t kAlphaD = INT32_C(127690142);          /* 1/20 * 2^1/4 */
    const int32_t kAlphaI = INT32_C(1057819769);         /* 2 / 2^1/4 - 2^1/4 */
    const int32_t kAlphaF = INT32_C(638450708);          /* 1/4 * 2^1/4 */
    const int32_t kInputIntegerBits = 12;
    const int32_t kQuarterQ6 = INT32_C(1) << 23;         /* 1/4 in Q6.25 */

    const int32_t headroom_a = count_leading_zeros((uint32_t)x);
    const int32_t r_a = saturating_shift_left(
        kiln_sat_rounding_doubling_high_mul(saturating_shift_left(x, headroom_a - 1), kSqrtHalf),
        1);
    const int32_t z_a = saturating_add(
        saturating_shift_left(kInputIntegerBits - headroom_a, 31 - 6), kQuarterQ6);
    const int32_t x_b = kiln_sat_rounding_doubling_high_mul(x, kSqrtHalf);
    const int32_t headroom_b = count_leading_zeros((uint32_t)x_b) - 1;
    const int32_t r_b = saturating_shift_left(x, headroom_b);
    const int32_t z_b = saturating_add(
        saturating_shift_left(kInputIntegerBits - headroom_b, 31 - 6), -kQuarterQ6);
    const int32_t r = r_a < r_b ? r_a : r_b;
    const int32_t z = z_a > z_b ? z_a : z_b;

    const int32_t p = rounding_half_sum(r, kSqrtSqrtHalf);
    int32_t q = wrap_add(r, -kSqrtSqrtHalf);
    q = wrap_add(q, q);
    const int32_t q2 = kiln_sat_rounding_doubling_high_mul(q, q);
    const int32_t num = wrap_add(
        kiln_sat_rounding_doubling_high_mul(q, r),
        kiln_sat_rounding_doubling_high_mul(kiln_sat_rounding_doubling_high_mul(q, q2), kAlphaN));
    const int32_t denom_minus_one = wrap_add(
        kiln_sat_rounding_doubling_high_mul(
            p, wrap_add(wrap_add(kAlphaI, q), kiln_sat_rounding_doubling_high_mul(kAlphaD, q2))),
        kiln_sat_rounding_doubling_high_mul(kAlphaF, q));
    const int32_t recip = one_over_one_plus_x(denom_minus_one);
    const int32_t num_q6 = kiln_rounding_divide_by_pot(num, 6);
    const int32_t log_q6 = wrap_add(kiln_sat_rounding_doubling_high_mul(z, kLog2),
                                    kiln_sat_rounding_doubling_high_mul(num_q6, recip));
    return saturating_shift_left(log_q6, 1);
}

kiln_status_t kiln_log_softmax_s8(const kiln_log_softmax_params_t *params,
                                  const kiln_dims_t *input_dims, const int8_t *input,
                                  const kiln_dims_t *output_dims, int8_t *output)
{
    const int32_t count = dims_count(input_dims);
    if (params == NULL || params->exp_table == NULL || params->diff_table == NULL ||
        input == NULL || output == NULL || count < 0 || count != dims_count(output_dims) ||
        input_dims->c != output_dims->c || input_dims->c > KILN_LOG_SOFTMAX_MAX_DEPTH ||
        params->exp_table[0] != INT32_MAX || params->diff_min > 0 ||
        params->reverse.shift > 0 || params->reverse.shift < -31) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = input_dims->c;
    const int32_t rows = count / depth;
    for (int32_t r = 0; r < rows; ++r) {
        const int8_t *x = input + r * depth;
        int8_t *y = output + r * depth;
        int32_t max = x[0];
        for (int32_t c = 1; c < depth; ++c) {
            max = x[c] > max ? x[c] : max;
        }
        /* Sum of exp in Q12.19: below depth * 2^19 < 2^31. Differences under
         * diff_min have table entry 0. */
        int32_t sum = 0;
        for (int32_t c = 0; c < depth; ++c) {
            sum += kiln_rounding_divide_by_pot(params->exp_table[max - x[c]], 12);
        }
        const int32_t log_sum = log_q12_to_q5(sum);
        /* The smallest difference whose result still fits: the most negative Q5.26
         * value plus log_sum, scaled back to the input (TFLM's adjusted_diff_min). */
        const int32_t reach = kiln_requantize(wrap_add(log_sum, INT32_MIN),
                                              params->reverse.multiplier, params->reverse.shift);
        const int32_t diff_limit = kiln_max_i32(params->diff_min - 1, reach);
        for (int32_t c = 0; c < depth; ++c) {
            const int32_t d = max - x[c];
            int32_t value = INT8_MIN;
            if (-d > diff_limit) {
                /* Q5.26 difference minus log_sum, down to the output's steps of
                 * 1/16 (a shift by 26 - 4), offset 127. */
                value = kiln_clamp(kiln_rounding_divide_by_pot(params->diff_table[d] - log_sum,
                                                               31 - 5 - 4) + 127,
                                   INT8_MIN, INT8_MAX);
            }
            y[c] = (int8_t)value;
        }
    }
    return KILN_OK;
}
