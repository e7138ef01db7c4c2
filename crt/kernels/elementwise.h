/*
 * elementwise.h - binary elementwise ops: ADD, SUB, MUL, MAXIMUM, MINIMUM (int8),
 * ADD, SUB, MUL (int16, symmetric: zero point 0).
 *
 * Bit-exact with TFLM's reference kernels (reference_integer_ops::Add/Mul,
 * reference_ops::Sub, MaximumMinimumBroadcastSlow).
 *
 * Broadcasting: every kernel takes the dims of both inputs and of the output
 * (NHWC, lower ranks padded with leading 1s). An input dim equals the output
 * dim or is 1 (broadcast); anything else returns KILN_ERR_ARG. The compiler
 * collapses adjacent dims that broadcast the same way before calling, so the
 * innermost (c) run is as long as possible; a kernel reads its inputs through
 * per-dim strides of 0 (broadcast) or the input's own stride.
 *
 * Values: int8 inputs and output with any zero point in [-128, 127]; int16
 * inputs with zero point 0 (TFLM's 16x8 quantization). The output may
 * alias an input of the output's dims (each element is read before it is
 * written), not a broadcast one.
 */
#ifndef KILN_ELEMENTWISE_H
#define KILN_ELEMENTWISE_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ADD and SUB. Both inputs are brought to a common scale, twice the larger
 * input scale, with `left_shift` (20) bits of headroom, added (subtracted) and
 * rescaled to the output:
 *   a = requant((x1 + input1_offset) << left_shift, input1)
 *   b = requant((x2 + input2_offset) << left_shift, input2)
 *   y = clamp(requant(a +/- b, output) + output_offset, activation)
 * All three multipliers are below one: shifts in [-31, 0]. */
typedef struct {
    int32_t input1_offset;        /* -input1 zero point, in [-127, 128] */
    int32_t input2_offset;        /* -input2 zero point, in [-127, 128] */
    int32_t output_offset;        /* output zero point, in [-128, 127] */
    int32_t left_shift;           /* headroom bits, in [0, 22]; TFLM uses 20 for int8 */
    kiln_requant_t input1;        /* input1 scale / (2 * max input scale) */
    kiln_requant_t input2;        /* input2 scale / (2 * max input scale) */
    kiln_requant_t output;        /* 2 * max input scale / (2^left_shift * output scale) */
    kiln_activation_t activation; /* fused activation clamp, int8 domain */
} kiln_add_params_t;

kiln_status_t kiln_add_s8(const kiln_add_params_t *params,
                          const kiln_dims_t *input1_dims, const int8_t *input1,
                          const kiln_dims_t *input2_dims, const int8_t *input2,
                          const kiln_dims_t *output_dims, int8_t *output);

/* SUB: same parameters as ADD; y = x1 - x2. */
kiln_status_t kiln_sub_s8(const kiln_add_params_t *params,
                          const kiln_dims_t *input1_dims, const int8_t *input1,
                          const kiln_dims_t *input2_dims, const int8_t *input2,
                          const kiln_dims_t *output_dims, int8_t *output);

/* int16 ADD and SUB: the same arithmetic with left_shift 15 (TFLM's int16
 * value; at most 15 here), input offsets 0, the activation an int16 range.
 * TFLM runs this general path for every int16 ADD/SUB, also for power-of-two
 * scales (the converter's pot_scale_int16 flag is not read). */
kiln_status_t kiln_add_s16(const kiln_add_params_t *params,
                           const kiln_dims_t *input1_dims, const int16_t *input1,
                           const kiln_dims_t *input2_dims, const int16_t *input2,
                           const kiln_dims_t *output_dims, int16_t *output);

kiln_status_t kiln_sub_s16(const kiln_add_params_t *params,
                           const kiln_dims_t *input1_dims, const int16_t *input1,
                           const kiln_dims_t *input2_dims, const int16_t *input2,
                           const kiln_dims_t *output_dims, int16_t *output);

/* ADD and SUB with one input's rescaling precomputed. TFLM rescales both inputs to a
 * common scale, twice the larger input scale, so the larger-scale input's multiplier is
 * exactly 1/2: requant((x + offset) << 20, 1/2) = (x + offset) << 19, a shift. That
 * input (`shifted_input`, 1 or 2) enters as sign * (x << 19); the other one through a
 * table holding, for every int8 value x, its rescaled value
 * requant((x + offset) << 20, multiplier) (negated for SUB's input2) minus the shifted
 * input's offset term sign * (offset << 19). Per element: one load, one addition (the
 * shift is part of it) and the output rescaling:
 *   y = clamp(requant(table[u + 128] + sign * (v << 19), output) + output_offset)
 * with u the table input's element and v the shifted input's. Table entries are below
 * 2^30 in magnitude and |v << 19| <= 2^26, so the sum fits int32. The compiler picks
 * this variant for large tensors (the table costs 1 KB). */
typedef struct {
    const int32_t *table;         /* 256 entries, table[0] for x = -128 */
    int32_t shifted_input;        /* 1 or 2: the input entering as sign * (x << 19) */
    int32_t shifted_sign;         /* 1, or -1 for SUB's input2 */
    int32_t output_offset;        /* output zero point, in [-128, 127] */
    kiln_requant_t output;        /* multiplier in [2^30, 2^31), shift in [-31, -2] */
    kiln_activation_t activation;
} kiln_add_lut_params_t;

kiln_status_t kiln_add_lut_s8(const kiln_add_lut_params_t *params,
                              const kiln_dims_t *input1_dims, const int8_t *input1,
                              const kiln_dims_t *input2_dims, const int8_t *input2,
                              const kiln_dims_t *output_dims, int8_t *output);

/* kiln_add_lut_s8 on inputs of the output's shape (the three dims equal, else
 * KILN_ERR_ARG): one run over the elements, without the broadcast walk's code. */
kiln_status_t kiln_add_lut_same_s8(const kiln_add_lut_params_t *params,
                                   const kiln_dims_t *input1_dims, const int8_t *input1,
                                   const kiln_dims_t *input2_dims, const int8_t *input2,
                                   const kiln_dims_t *output_dims, int8_t *output);

/* kiln_add_lut_s8's table built at run time, for a firmware that keeps it out of flash
 * (1 KB a layer) in the layer's scratch: for every int8 x (table[0] for x = -128),
 *   table[x + 128] = sign * requant((x + input_offset) << 20, input) - shifted_term
 * the table input's value on the common scale (negated for SUB's input2) minus the
 * shifted input's zero-point term, the values the compiler would otherwise store; 256
 * requantizations a call. `table`: 256 int32, word aligned. */
typedef struct {
    kiln_requant_t input;         /* the table input's rescaling: shift in [-31, 0] */
    int32_t input_offset;         /* -its zero point, in [-127, 128] */
    int32_t sign;                 /* 1, or -1 for SUB's input2 */
    int32_t shifted_term;         /* the shifted input's sign * (its zero point << 19) */
} kiln_add_lut_table_params_t;

kiln_status_t kiln_add_lut_table_s8(const kiln_add_lut_table_params_t *params, int32_t *table);

/* MUL: y = clamp(requant((x1 + input1_offset) * (x2 + input2_offset), output)
 *                + output_offset, activation).
 * output is input1 scale * input2 scale / output scale; its shift may be
 * positive (a multiplier above one), in [-31, 30]. */
typedef struct {
    int32_t input1_offset;        /* -input1 zero point, in [-127, 128] */
    int32_t input2_offset;        /* -input2 zero point, in [-127, 128] */
    int32_t output_offset;        /* output zero point, in [-128, 127] */
    kiln_requant_t output;
    kiln_activation_t activation;
} kiln_mul_params_t;

kiln_status_t kiln_mul_s8(const kiln_mul_params_t *params,
                          const kiln_dims_t *input1_dims, const int8_t *input1,
                          const kiln_dims_t *input2_dims, const int8_t *input2,
                          const kiln_dims_t *output_dims, int8_t *output);

/* int16 MUL: offsets 0 (TFLM requires zero points 0), |x1 * x2| <= 2^30, the
 * same requantization; the output offset is 0 too in TFLM's models. */
kiln_status_t kiln_mul_s16(const kiln_mul_params_t *params,
                           const kiln_dims_t *input1_dims, const int16_t *input1,
                           const kiln_dims_t *input2_dims, const int16_t *input2,
                           const kiln_dims_t *output_dims, int16_t *output);

/* MAXIMUM / MINIMUM on the raw int8 values. Like TFLM, no rescaling: the
 * converter gives both inputs and the output the same quantization. */
kiln_status_t kiln_maximum_s8(const kiln_dims_t *input1_dims, const int8_t *input1,
                              const kiln_dims_t *input2_dims, const int8_t *input2,
                              const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_minimum_s8(const kiln_dims_t *input1_dims, const int8_t *input1,
                              const kiln_dims_t *input2_dims, const int8_t *input2,
                              const kiln_dims_t *output_dims, int8_t *output);

/* The same on raw int16 values. */
kiln_status_t kiln_maximum_s16(const kiln_dims_t *input1_dims, const int16_t *input1,
                               const kiln_dims_t *input2_dims, const int16_t *input2,
                               const kiln_dims_t *output_dims, int16_t *output);

kiln_status_t kiln_minimum_s16(const kiln_dims_t *input1_dims, const int16_t *input1,
                               const kiln_dims_t *input2_dims, const int16_t *input2,
                               const kiln_dims_t *output_dims, int16_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_ELEMENTWISE_H */
