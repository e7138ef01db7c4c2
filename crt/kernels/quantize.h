/*
 * quantize.h - QUANTIZE and DEQUANTIZE at the float/int boundary of a model.
 *
 * These are the only kiln kernels that compute in float, because TFLM's
 * reference kernels do (reference_ops::AffineQuantize, Dequantize); the
 * float operations are mirrored one for one so results are bit-exact on any
 * IEEE-754 single-precision FPU or soft-float library. int8 -> int8 and
 * int8 -> int16 QUANTIZE (requantization) are table lookups filled by the
 * compiler: kiln_lut_s8 (activation.h) and kiln_lut_s8_s16 below; int16 inputs
 * requantize with kiln_requantize_s16_*.
 *
 * In place: the float -> int kernels may write over their input (an output
 * element never overtakes the input still to be read); the widening ones
 * (dequantize, int8 -> int16, int16 -> int32) may not; int16 -> int8/int16 may.
 */
#ifndef KILN_QUANTIZE_H
#define KILN_QUANTIZE_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* real = scale * (q - zero_point), one scale for the whole tensor. */
typedef struct {
    float scale;               /* > 0, the tensor's float32 scale */
    int32_t zero_point;        /* in the quantized type's range */
} kiln_quantize_params_t;

/* float32 -> int8: q = clamp(round(x / scale) + zero_point, -128, 127), the
 * division in float32 and round() half away from zero, as TFLM.
 * NaN maps to the zero point; +-inf and huge values saturate. */
kiln_status_t kiln_quantize_f32_s8(const kiln_quantize_params_t *params,
                                   const kiln_dims_t *input_dims, const float *input,
                                   const kiln_dims_t *output_dims, int8_t *output);

/* float32 -> int16, as above with the int16 range. */
kiln_status_t kiln_quantize_f32_s16(const kiln_quantize_params_t *params,
                                    const kiln_dims_t *input_dims, const float *input,
                                    const kiln_dims_t *output_dims, int16_t *output);

/* int8 -> float32: x = scale * (q - zero_point). TFLM multiplies in double
 * and rounds to float; |q - zero_point| < 2^9 and the scale has 24 significant
 * bits, so the double product is exact and a float32 multiply (one rounding
 * of the exact product) gives the same float. */
kiln_status_t kiln_dequantize_s8_f32(const kiln_quantize_params_t *params,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *output_dims, float *output);

/* int16 -> float32, the same argument with |q - zero_point| < 2^17. */
kiln_status_t kiln_dequantize_s16_f32(const kiln_quantize_params_t *params,
                                      const kiln_dims_t *input_dims, const int16_t *input,
                                      const kiln_dims_t *output_dims, float *output);

/* int8 -> int16 requantization through a table: output[i] = table[input[i] + 128]. */
typedef struct {
    const int16_t *table;      /* 256 entries, table[0] for input -128 */
} kiln_lut_s16_params_t;

kiln_status_t kiln_lut_s8_s16(const kiln_lut_s16_params_t *params,
                              const kiln_dims_t *input_dims, const int8_t *input,
                              const kiln_dims_t *output_dims, int16_t *output);

/* int16 -> int8 / int16 / int32 requantization (QUANTIZE between quantized
 * types), TFLM's reference_ops::Requantize:
 *   y = clamp(requant(x + input_offset) + output_offset, output type range)
 * with TFLite's int32 wrap-around where it wraps (a positive shift before the
 * multiply, the output offset's addition). */
typedef struct {
    kiln_requant_t requant;    /* input scale / output scale; shift in [-31, 30] */
    int32_t input_offset;      /* -input zero point, in [-32767, 32768] */
    int32_t output_offset;     /* output zero point */
} kiln_requantize_params_t;

kiln_status_t kiln_requantize_s16_s8(const kiln_requantize_params_t *params,
                                     const kiln_dims_t *input_dims, const int16_t *input,
                                     const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_requantize_s16_s16(const kiln_requantize_params_t *params,
                                      const kiln_dims_t *input_dims, const int16_t *input,
                                      const kiln_dims_t *output_dims, int16_t *output);

kiln_status_t kiln_requantize_s16_s32(const kiln_requantize_params_t *params,
                                      const kiln_dims_t *input_dims, const int16_t *input,
                                      const kiln_dims_t *output_dims, int32_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_QUANTIZE_H */
