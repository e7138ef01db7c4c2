/*
 * math_ops.h - int8 binary math ops: SQUARED_DIFFERENCE and PRELU.
 *
 * Bit-exact with TFLM's reference kernels (micro/kernels/squared_difference.cc,
 * reference_ops::BroadcastPrelu4DSlow). The unary math ops (ABS, RSQRT, PRELU
 * with one constant alpha) are 256-entry tables run by kiln_lut_s8
 * (activation.h).
 *
 * Broadcasting as in elementwise.h: NHWC dims for both inputs and the output,
 * each input dim equal to the output dim or 1; anything else returns
 * KILN_ERR_ARG. The output may alias an input of the output's dims (each
 * element is read before it is written), not a broadcast one.
 */
#ifndef KILN_MATH_OPS_H
#define KILN_MATH_OPS_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SQUARED_DIFFERENCE: both inputs on a common scale (twice the larger input
 * scale) with `left_shift` (7) bits of headroom, subtracted, squared and
 * rescaled to the output:
 *   a = requant((x1 + input1_offset) << left_shift, input1)
 *   b = requant((x2 + input2_offset) << left_shift, input2)
 *   y = clamp(requant((a - b) * (a - b), output) + output_offset, -128, 127)
 * input1 and input2 are below one (shifts in [-31, 0]); output is
 * (2 * max input scale)^2 / (2^(2 * left_shift) * output scale), shift in
 * [-31, 30]. */
typedef struct {
    int32_t input1_offset;        /* -input1 zero point, in [-127, 128] */
    int32_t input2_offset;        /* -input2 zero point, in [-127, 128] */
    int32_t output_offset;        /* output zero point, in [-128, 127] */
    int32_t left_shift;           /* headroom bits, in [0, 7]; TFLM uses 7 for int8 */
    kiln_requant_t input1;        /* input1 scale / (2 * max input scale) */
    kiln_requant_t input2;        /* input2 scale / (2 * max input scale) */
    kiln_requant_t output;
} kiln_squared_difference_params_t;

kiln_status_t kiln_squared_difference_s8(const kiln_squared_difference_params_t *params,
                                         const kiln_dims_t *input1_dims, const int8_t *input1,
                                         const kiln_dims_t *input2_dims, const int8_t *input2,
                                         const kiln_dims_t *output_dims, int8_t *output);

/* int16 SQUARED_DIFFERENCE (TFLM: zero points 0, left_shift 0, the int16 output
 * range): the same arithmetic; KILN_ERR_ARG for a nonzero offset or shift. */
kiln_status_t kiln_squared_difference_s16(const kiln_squared_difference_params_t *params,
                                          const kiln_dims_t *input1_dims, const int16_t *input1,
                                          const kiln_dims_t *input2_dims, const int16_t *input2,
                                          const kiln_dims_t *output_dims, int16_t *output);

/* PRELU: v = x + input_offset;
 *   y = clamp(requant(v, positive) + output_offset)                           if v >= 0
 *   y = clamp(requant(v * (alpha + alpha_offset), negative) + output_offset)  otherwise
 * positive is input scale / output scale, negative input scale * alpha scale /
 * output scale; both shifts in [-31, 30]. */
typedef struct {
    int32_t input_offset;         /* -input zero point, in [-127, 128] */
    int32_t alpha_offset;         /* -alpha zero point, in [-127, 128] */
    int32_t output_offset;        /* output zero point, in [-128, 127] */
    kiln_requant_t positive;
    kiln_requant_t negative;
} kiln_prelu_params_t;

kiln_status_t kiln_prelu_s8(const kiln_prelu_params_t *params,
                            const kiln_dims_t *input_dims, const int8_t *input,
                            const kiln_dims_t *alpha_dims, const int8_t *alpha,
                            const kiln_dims_t *output_dims, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_MATH_OPS_H */
