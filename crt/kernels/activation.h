/*
 * activation.h - int8 activations: SOFTMAX, and a 256-entry lookup table
 * kernel for the unary ones (LOGISTIC, TANH, RELU, RELU6, LEAKY_RELU,
 * HARD_SWISH; also QUANTIZE int8 -> int8).
 *
 * The compiler fills the tables by running TFLM's integer arithmetic for
 * every one of the 256 int8 inputs, so the table kernel is bit-exact with
 * TFLM's reference kernels by construction and the tests compare all 256.
 * int16 (16x8 models): SOFTMAX, LOGISTIC and TANH as TFLM computes them.
 */
#ifndef KILN_ACTIVATION_H
#define KILN_ACTIVATION_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Unary int8 -> int8 through a table: output[i] = table[input[i] + 128]. */
typedef struct {
    const int8_t *table;       /* 256 entries, table[0] for input -128 */
} kiln_lut_params_t;

/* input and output hold the same number of elements (dims may differ by a
 * reshape); input may equal output (in place). */
kiln_status_t kiln_lut_s8(const kiln_lut_params_t *params,
                          const kiln_dims_t *input_dims, const int8_t *input,
                          const kiln_dims_t *output_dims, int8_t *output);

/* SOFTMAX along the innermost (c) dim, int8 in, int8 out with scale 1/256 and
 * zero point -128, as TFLM's reference_ops::Softmax (gemmlowp fixed point).
 *
 * Per row: d = max(row) - x in [0, 255]. exp(d) is TFLM's
 * exp_on_negative_values(-d * beta * input_scale) in Q0.31 of the difference
 * rescaled by the input multiplier (Q5.26), and 0 where -d is below TFLM's
 * diff_min (those inputs are skipped and give -128). Either looked up in
 * exp_table, precomputed by the compiler (long rows: a lookup per value), or,
 * with exp_table NULL, computed here in gemmlowp's fixed point (short rows:
 * about 300 bytes of code instead of up to 1 KB of table). The row sum is kept
 * in Q12.19: each term is at most 2^19, so rows up to 8191 long (KILN_ERR_ARG
 * beyond) fit the uint32 accumulator. Its reciprocal is gemmlowp's
 * Newton-Raphson 1/(1+x). A sum of 2^28 or more (512+ near-equal inputs) stops
 * TFLM on a TFLITE_CHECK; kiln writes -128 there, every probability being
 * below 1/512. */
typedef struct {
    const int32_t *exp_table;  /* `entries` values in Q0.31, indexed by max(row) - x;
                                * NULL: computed from the three fields below */
    int32_t entries;           /* 1 to 256: exp_table[d] for d < entries, 0 beyond (the
                                * compiler drops the table's zero tail); 0 when computed */
    int32_t input_multiplier;  /* TFLite's multiplier of beta * input scale * 2^26 */
    int32_t input_left_shift;  /* its shift, in [0, 31] */
    int32_t diff_min;          /* TFLM's diff_min, in [-255, 0]: (-diff_min) << left_shift
                                * fits int32 (CalculateInputRadius) */
} kiln_softmax_params_t;

/* input may equal output (in place). */
kiln_status_t kiln_softmax_s8(const kiln_softmax_params_t *params,
                              const kiln_dims_t *input_dims, const int8_t *input,
                              const kiln_dims_t *output_dims, int8_t *output);

/* SOFTMAX int8 in, int16 out with scale 1/65536 and zero point -32768: the
 * same arithmetic as kiln_softmax_s8 with 16 output bits (TFLM's template with
 * OutputT = int16_t). Not in place (the output is wider). */
kiln_status_t kiln_softmax_s8_s16(const kiln_softmax_params_t *params,
                                  const kiln_dims_t *input_dims, const int8_t *input,
                                  const kiln_dims_t *output_dims, int16_t *output);

/* SOFTMAX int16 -> int16 (zero points 0, output scale 1/32768), TFLM's
 * SoftmaxInt16: exp and 1/(1+x) from two 513-entry tables with linear
 * interpolation (gen_lut's, computed by the compiler). Rows up to 65535 long.
 * The output row holds the exp values in between: not in place. */
typedef struct {
    const int16_t *exp_lut;                 /* 513 entries: exp on [-10, 0] */
    const int16_t *one_over_one_plus_x_lut; /* 513 entries: 1 / (1 + x) on [0, 1] */
    kiln_requant_t input;                   /* input scale * beta / (10 / 65535) */
} kiln_softmax_s16_params_t;

kiln_status_t kiln_softmax_s16(const kiln_softmax_s16_params_t *params,
                               const kiln_dims_t *input_dims, const int16_t *input,
                               const kiln_dims_t *output_dims, int16_t *output);

/* LOGISTIC and TANH int16 -> int16 (zero points 0, output scale 2^-15), TFLM's
 * reference_integer_ops::Logistic/Tanh: the input is brought to the table's
 * scale as (x * multiplier + round) >> left_shift, then sigmoid is interpolated
 * from 256 entries of sigmoid(i / 24) in Q0.16 (tanh(x) = 2 sigmoid(2x) - 1).
 * In place allowed (element i from element i). */
typedef struct {
    const uint16_t *table;     /* 256 entries, sigmoid(i / 24) * 65536 */
    int32_t multiplier;        /* in [0, 32767] */
    int32_t left_shift;        /* in [0, 31] (a right shift, despite TFLM's name) */
} kiln_sigmoid_s16_params_t;

kiln_status_t kiln_logistic_s16(const kiln_sigmoid_s16_params_t *params,
                                const kiln_dims_t *input_dims, const int16_t *input,
                                const kiln_dims_t *output_dims, int16_t *output);

kiln_status_t kiln_tanh_s16(const kiln_sigmoid_s16_params_t *params,
                            const kiln_dims_t *input_dims, const int16_t *input,
                            const kiln_dims_t *output_dims, int16_t *output);

/* RELU, RELU6 and LEAKY_RELU int16 -> int16 (TFLM's ReluQuantized,
 * Relu6Quantized and QuantizeLeakyRelu):
 *   v = x + input_offset
 *   y = clamp(requant(v, v >= 0 ? positive : negative) + output_offset, clamp)
 * RELU: both multipliers input / output scale, clamp [output zero point, max].
 * RELU6: identity multipliers (2^30, shift 1), clamp [zero, six] in the input
 * domain. LEAKY_RELU: negative = alpha * input / output scale (a negative
 * multiplier for a negative alpha), clamp the int16 range. In place allowed. */
typedef struct {
    int32_t input_offset;      /* -input zero point (0 in TFLM's int16) */
    int32_t output_offset;     /* output zero point */
    kiln_requant_t positive;   /* shift in [-31, 30] */
    kiln_requant_t negative;   /* multiplier may be negative; shift in [-31, 30] */
    kiln_activation_t clamp;   /* within [-32768, 32767] */
} kiln_leaky_relu_s16_params_t;

kiln_status_t kiln_leaky_relu_s16(const kiln_leaky_relu_s16_params_t *params,
                                  const kiln_dims_t *input_dims, const int16_t *input,
                                  const kiln_dims_t *output_dims, int16_t *output);

/* LOG_SOFTMAX along the innermost dim, int8 in, int8 out with scale 16/256 and
 * zero point 127 (TFLM's LogSoftmaxQuantized, beta 1): per row, the Q12.19 sum
 * of exp(x - max) as in SOFTMAX, its log in Q5.26 (gemmlowp's rational
 * approximation), and y = (diff in Q5.26 - log sum) / 2^22 + 127, -128 for the
 * differences whose result would leave int32 (below TFLM's adjusted
 * diff_min). Rows up to 4095 long. In place allowed (a row is read in full
 * before it is written). */
typedef struct {
    const int32_t *exp_table;  /* 256 entries, as kiln_softmax_params_t (beta 1) */
    const int32_t *diff_table; /* 256 entries: -d rescaled to Q5.26 (input multiplier) */
    int32_t diff_min;          /* -input radius: differences below give exp 0 */
    kiln_requant_t reverse;    /* Q5.26 back to the input scale; shift in [-31, 0] */
} kiln_log_softmax_params_t;

kiln_status_t kiln_log_softmax_s8(const kiln_log_softmax_params_t *params,
                                  const kiln_dims_t *input_dims, const int8_t *input,
                                  const kiln_dims_t *output_dims, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_ACTIVATION_H */
