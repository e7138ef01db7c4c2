/*
 * conv.h - convolution-like int8 kernels: CONV_2D, DEPTHWISE_CONV_2D,
 * FULLY_CONNECTED and TRANSPOSE_CONV.
 *
 * Bit-exact with tflite-micro's reference kernels (integer_ops/conv.h,
 * depthwise_conv.h, fully_connected.h, transpose_conv.h): every output is
 *
 *     acc = bias[oc] + sum over taps of filter * (input + input_offset)
 *     out = clamp(kiln_requantize(acc, multiplier[oc], shift[oc]) + output_offset,
 *                 activation.min, activation.max)
 *
 * with padding taps contributing nothing (in the offset domain), i.e. a
 * padded input reads as the input zero point.
 *
 * Layouts: activations NHWC int8; CONV_2D and TRANSPOSE_CONV filters OHWI
 * (I = input channels per group); DEPTHWISE_CONV_2D filters 1HWC with
 * C = input channels * depth multiplier (output channel c reads input channel
 * c / depth_multiplier); FULLY_CONNECTED filters [units, depth] row-major.
 *
 * Folded bias. CONV_2D and FULLY_CONNECTED take a *folded* bias so their
 * inner loop is a plain int8 dot product:
 *
 *     bias[oc] = model_bias[oc] + input_offset * sum_k filter[oc][k]
 *                (FULLY_CONNECTED per-tensor: sum_k (filter[oc][k] + filter_offset))
 *
 * which the compiler derives (kiln.compiler.codegen.ops.conv). The CONV_2D
 * kernels read padded input as the input zero point (-input_offset) so the
 * fold holds at the borders too. DEPTHWISE_CONV_2D and TRANSPOSE_CONV take
 * the model's bias unchanged. A NULL bias means all zeros.
 *
 * Accumulators are int32. The compiler rejects a layer unless, for every
 * output channel, |model bias| + 256 * sum|filter| < 2^31: that bounds
 * TFLM's accumulator (|input + input_offset| <= 255) and kiln's folded one
 * (|folded bias| <= |bias| + 128 * sum|filter|, |input| <= 128), so no
 * accumulator here overflows for any input.
 *
 * Scratch: kernels that need it take a kiln_context_t and say how much with
 * their kiln_<op>_get_buffer_size(); the compiler computes the same number
 * when it picks the variant.
 */
#ifndef KILN_CONV_H
#define KILN_CONV_H

#include "kiln_types.h"

/* Parameters of CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV. */
typedef struct {
    kiln_tile_t stride;             /* >= 1 */
    kiln_tile_t padding;            /* padding before (top, left), >= 0; the far side is
                                     * whatever the output size implies */
    kiln_tile_t dilation;           /* >= 1; TRANSPOSE_CONV requires 1 */
    int32_t input_offset;           /* -input zero point, [-127, 128] */
    int32_t output_offset;          /* output zero point, [-128, 127] */
    kiln_activation_t activation;   /* clamp range, -128 <= min <= max <= 127 */
} kiln_conv_params_t;

/* Parameters of DEPTHWISE_CONV_2D. */
typedef struct {
    kiln_conv_params_t conv;
    int32_t depth_multiplier;       /* >= 1; output channels = input channels * this */
} kiln_dwconv_params_t;

/* Parameters of FULLY_CONNECTED. */
typedef struct {
    int32_t input_offset;           /* -input zero point, [-127, 128] */
    int32_t filter_offset;          /* -filter zero point, [-127, 128]; 0 for per-channel
                                     * weights (TFLM ignores their zero point) */
    int32_t output_offset;          /* output zero point, [-128, 127] */
    kiln_activation_t activation;   /* clamp range, -128 <= min <= max <= 127 */
} kiln_fc_params_t;

/* ---- CONV_2D ------------------------------------------------------------ */

/* General CONV_2D: any filter size, stride, dilation, padding and groups
 * (groups = input_dims->c / filter_dims->c). Each output pixel gathers its
 * receptive field into scratch (im2col, padding filled with the input zero
 * point) and multiplies it by the filter rows.
 *   input_dims  [N, H, W, C_in]          filter_dims [C_out, KH, KW, C_in / groups]
 *   output_dims [N, OH, OW, C_out]       bias        C_out folded values (see above)
 *   quant       C_out multipliers/shifts  ctx        >= kiln_conv2d_s8_get_buffer_size()
 * Returns KILN_ERR_ARG on NULL pointers, inconsistent dims or too little scratch. */
kiln_status_t kiln_conv2d_s8(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                             const kiln_per_channel_requant_t *quant,
                             const kiln_dims_t *input_dims, const int8_t *input,
                             const kiln_dims_t *filter_dims, const int8_t *filter,
                             const int32_t *bias,
                             const kiln_dims_t *output_dims, int8_t *output);

/* Scratch bytes kiln_conv2d_s8 needs: one receptive field, KH * KW * filter C. */
int32_t kiln_conv2d_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                       const kiln_dims_t *filter_dims);

/* CONV_2D with a 1x1 filter, one group, no padding (a 1x1 filter never pads),
 * any stride; dilation is irrelevant. No scratch: each output pixel is its
 * input pixel's channels times the filter matrix. Same arguments as
 * kiln_conv2d_s8 minus the context. */
kiln_status_t kiln_conv2d_1x1_s8(const kiln_conv_params_t *params,
                                 const kiln_per_channel_requant_t *quant,
                                 const kiln_dims_t *input_dims, const int8_t *input,
                                 const kiln_dims_t *filter_dims, const int8_t *filter,
                                 const int32_t *bias,
                                 const kiln_dims_t *output_dims, int8_t *output);

/* ---- DEPTHWISE_CONV_2D -------------------------------------------------- */

/* DEPTHWISE_CONV_2D, any filter size, stride, dilation, padding and depth
 * multiplier. No scratch.
 *   input_dims  [N, H, W, C_in]          filter_dims [1, KH, KW, C_in * depth_multiplier]
 *   output_dims [N, OH, OW, C_in * depth_multiplier]
 *   bias        the model's bias (not folded), one per output channel, or NULL */
kiln_status_t kiln_dwconv2d_s8(const kiln_dwconv_params_t *params,
                               const kiln_per_channel_requant_t *quant,
                               const kiln_dims_t *input_dims, const int8_t *input,
                               const kiln_dims_t *filter_dims, const int8_t *filter,
                               const int32_t *bias,
                               const kiln_dims_t *output_dims, int8_t *output);

/* ---- FULLY_CONNECTED ---------------------------------------------------- */

/* FULLY_CONNECTED: output[b][u] from input row b (depth values) and filter row u.
 *   input_dims  n = batches, c = depth (h = w = 1)
 *   filter_dims n = units,   c = depth (h = w = 1)
 *   output_dims n = batches, c = units (h = w = 1)
 *   bias        units folded values (see above), or NULL
 *   quant       units multipliers/shifts (per-tensor weights repeat one value) */
kiln_status_t kiln_fully_connected_s8(const kiln_fc_params_t *params,
                                      const kiln_per_channel_requant_t *quant,
                                      const kiln_dims_t *input_dims, const int8_t *input,
                                      const kiln_dims_t *filter_dims, const int8_t *filter,
                                      const int32_t *bias,
                                      const kiln_dims_t *output_dims, int8_t *output);

/* ---- TRANSPOSE_CONV ----------------------------------------------------- */

/* TRANSPOSE_CONV (int8): every input pixel scatters input * filter onto the
 * output at (in * stride - padding + filter position). Computed here as a
 * gather per output pixel, so it needs no scratch (TFLM uses an int32 buffer
 * of the whole output; integer sums do not depend on the order).
 *   input_dims  [N, H, W, C_in]          filter_dims [C_out, KH, KW, C_in]
 *   output_dims [N, OH, OW, C_out]       bias        the model's bias, or NULL
 *   params->dilation must be 1x1. */
kiln_status_t kiln_transpose_conv_s8(const kiln_conv_params_t *params,
                                     const kiln_per_channel_requant_t *quant,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *filter_dims, const int8_t *filter,
                                     const int32_t *bias,
                                     const kiln_dims_t *output_dims, int8_t *output);

#endif /* KILN_CONV_H */
