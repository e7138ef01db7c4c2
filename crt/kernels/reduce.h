/*
 * reduce.h - int8 reductions over any axes: MEAN, SUM, REDUCE_MAX; int16 MEAN
 * and SUM.
 *
 * The compiler describes a reduction in a canonical form that needs no axis
 * handling at run time (kiln_reduce_shape_t): it drops size-1 dimensions, merges
 * neighbouring dimensions that are both reduced or both kept, and splits the
 * result into
 *   - up to three kept dimensions (outer, outermost first),
 *   - up to three reduced dimensions,
 *   - the innermost kept extent `inner`, contiguous in the input (1 when the
 *     input's last axis is reduced),
 * each kept/reduced dimension with its input stride in elements. Unused slots
 * have extent 1 and stride 0. The output is row-major over (outer..., inner),
 * which is the order of the kept axes whether or not TFLite keeps the reduced
 * ones as size-1 dimensions.
 *
 * Example: MEAN over H and W of a [N, H, W, C] tensor is outer = {1, 1, N},
 * outer_stride = {0, 0, H*W*C}, reduce = {1, 1, H*W}, reduce_stride = {0, 0, C},
 * inner = C.
 *
 * Every kernel sums (or maxes) the raw int8 values; the number of reduced
 * elements, count = reduce[0] * reduce[1] * reduce[2], is at most 2^23 so the
 * int32 sums cannot overflow (|sum| <= 128 * 2^23 = 2^30).
 */
#ifndef KILN_REDUCE_H
#define KILN_REDUCE_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_REDUCE_MAX_COUNT (INT32_C(1) << 23)
/* int16: |x - zero point| <= 65535, so 2^15 values keep the sum below 2^31. */
#define KILN_REDUCE_MAX_COUNT_S16 (INT32_C(1) << 15)

typedef struct {
    int32_t outer[3];          /* kept extents, outermost first, >= 1 */
    int32_t outer_stride[3];   /* their input strides, elements */
    int32_t reduce[3];         /* reduced extents, >= 1, product <= KILN_REDUCE_MAX_COUNT */
    int32_t reduce_stride[3];  /* their input strides, elements */
    int32_t inner;             /* innermost kept extent, input stride 1, >= 1 */
} kiln_reduce_shape_t;

/* Requantization of a sum: out = clamp(requantize(sum + bias) + output_offset).
 * bias is -input_zero_point * count, so sum + bias is a sum of count values in
 * [-255, 255]: |sum + bias| <= 255 * 2^23 < 2^31. */
typedef struct {
    kiln_requant_t requant;
    int32_t bias;
    int32_t output_offset;     /* output zero point */
} kiln_reduce_quant_t;

/* SUM and MEAN: out = clamp(requantize(sum + bias) + output_offset, -128, 127),
 * for MEAN with the 1/count factor folded into the multiplier by the compiler
 * (as TFLM's QuantizedMeanOrSum does, even when input and output share their
 * quantization). */
kiln_status_t kiln_reduce_sum_requant_s8(const kiln_reduce_shape_t *shape,
                                         const kiln_reduce_quant_t *quant,
                                         const int8_t *input, int8_t *output);

/* int16 SUM and MEAN (TFLM's QuantizedMeanOrSum at int16), the same arithmetic
 * with count <= KILN_REDUCE_MAX_COUNT_S16 and the int16 output range. */
kiln_status_t kiln_reduce_sum_requant_s16(const kiln_reduce_shape_t *shape,
                                          const kiln_reduce_quant_t *quant,
                                          const int16_t *input, int16_t *output);

/* REDUCE_MAX (input and output share quantization): the largest raw value. */
kiln_status_t kiln_reduce_max_s8(const kiln_reduce_shape_t *shape, const int8_t *input,
                                 int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_REDUCE_H */
