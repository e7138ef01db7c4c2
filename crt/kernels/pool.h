/*
 * pool.h - int8 and int16 2-D pooling: AVERAGE_POOL_2D and MAX_POOL_2D.
 *
 * Layouts: input and output NHWC int8 (or int16: the _s16 kernels), the same
 * batch and channel count.
 * Pooling keeps the quantization (TFLite requires input and output to share
 * scale and zero point), so both kernels work on the raw int8 values: no
 * offsets, no requantization, only the fused activation clamp.
 *
 * Window placement follows TFLite: output pixel (y, x) covers input rows
 * y * stride.h - padding.h .. + filter.h - 1 (likewise columns), clipped to
 * the input. Padded positions are not counted: they neither enter the max nor
 * the average's divisor.
 */
#ifndef KILN_POOL_H
#define KILN_POOL_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    kiln_tile_t stride;            /* >= 1 */
    kiln_tile_t padding;           /* rows/columns of padding before the input, >= 0 */
    kiln_tile_t filter;            /* window size, >= 1; filter.h * filter.w <= 2^16
                                      (2^15 for int16 average pooling) */
    kiln_activation_t activation;  /* clamp range within the element type, min <= max */
} kiln_pool_params_t;

/* AVERAGE_POOL_2D: each output is the sum of the window's valid inputs divided
 * by their count, rounded half away from zero, then clamped to the activation.
 * Returns KILN_ERR_ARG on a bad shape or parameter, or when a window holds no
 * input at all (TFLite fails the same way). */
kiln_status_t kiln_avgpool_s8(const kiln_pool_params_t *params,
                              const kiln_dims_t *input_dims, const int8_t *input,
                              const kiln_dims_t *output_dims, int8_t *output);

/* AVERAGE_POOL_2D whose one window is the whole input (a classifier's global
 * average: output 1x1, no padding, filter at least the input's size): the same
 * results as kiln_avgpool_s8 in a few hundred bytes less code, for h * w <= 2^16. */
kiln_status_t kiln_avgpool_global_s8(const kiln_pool_params_t *params,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *output_dims, int8_t *output);

/* MAX_POOL_2D: the window's largest valid input (-128 if the window is empty),
 * clamped to the activation. */
kiln_status_t kiln_maxpool_s8(const kiln_pool_params_t *params,
                              const kiln_dims_t *input_dims, const int8_t *input,
                              const kiln_dims_t *output_dims, int8_t *output);

/* int16 (16x8 models): the same kernels on int16 values (-32768 for an empty
 * max window). */
kiln_status_t kiln_avgpool_s16(const kiln_pool_params_t *params,
                               const kiln_dims_t *input_dims, const int16_t *input,
                               const kiln_dims_t *output_dims, int16_t *output);

kiln_status_t kiln_maxpool_s16(const kiln_pool_params_t *params,
                               const kiln_dims_t *input_dims, const int16_t *input,
                               const kiln_dims_t *output_dims, int16_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_POOL_H */
