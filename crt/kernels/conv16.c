/*
 * conv16.c - the 16x8 kernels of CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED
 * and TRANSPOSE_CONV: int16 activations with zero point 0, int8 weights.
 * Semantics (the wide and narrow arithmetic, the bounds the compiler proves)
 * are in conv.h.
 *
 * Every output is an exact int64 sum of int16 * int8 products plus the bias,
 * then one of TFLM's two requantizations. The sums run in int32 over blocks
 * of KILN_CONV16_BLOCK products (each |x * w| <= 32768 * 128 = 2^22, so a
 * block stays below 2^30) and are widened once per block: plain 32-bit
 * multiply-accumulates in the inner loop on every core.
 */
#include <string.h>

#include "conv_internal.h"

#define KILN_CONV16_BLOCK 256

/* sum_k row[k] * w[k], exact (depth < 2^31 terms of at most 2^22: below 2^53). */
static int64_t dot_s16_s8(const int16_t *row, const int8_t *w, int32_t depth)
{
    int64_t acc = 0;
    int32_t k = 0;
    while (k < depth) {
        const int32_t end = depth - k > KILN_CONV16_BLOCK ? k + KILN_CONV16_BLOCK : depth;
        int32_t part = 0;
        for (; k < end; ++k) {
            part += (int32_t)row[k] * w[k];
        }
        acc += part;
    }
    return acc;
}

/* ---- CONV_2D ------------------------------------------------------------ */

int32_t kiln_conv2d_s16_get_buffer_size(const kiln_dims_t *input_dims,
                                        const kiln_dims_t *filter_dims)
{
    (void)input_dims;
    if (!kiln_dims_valid(filter_dims)) {
        return 0;
    }
    const int64_t size = 2 * (int64_t)filter_dims->h * filter_dims->w * filter_dims->c;
    return size > INT32_MAX ? 0 : (int32_t)size;
}

static kiln_status_t conv2d_s16(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                const kiln_per_channel_requant_t *quant,
                                const kiln_dims_t *input_dims, const int16_t *input,
                                const kiln_dims_t *filter_dims, const int8_t *filter,
                                const int64_t *bias64, const int32_t *bias32, int wide,
                                const kiln_dims_t *output_dims, int16_t *output)
{
    if (ctx == NULL || ctx->buf == NULL || !kiln_conv16_params_valid(params) ||
        !kiln_requant_valid(quant) || input == NULL || filter == NULL || output == NULL ||
        !kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims) ||
        !kiln_conv_geometry_valid(params, input_dims, filter_dims, output_dims)) {
        return KILN_ERR_ARG;
    }
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t group_c = filter_dims->c;
    const int32_t out_c = output_dims->c;
    if (in_c % group_c != 0 || input_dims->n != output_dims->n || filter_dims->n != out_c ||
        out_c % (in_c / group_c) != 0 ||
        ctx->size < kiln_conv2d_s16_get_buffer_size(input_dims, filter_dims) ||
        kiln_conv2d_s16_get_buffer_size(input_dims, filter_dims) == 0) {
        return KILN_ERR_ARG;
    }
    const int32_t groups = in_c / group_c;
    const int32_t group_out_c = out_c / groups;
    const int32_t patch_size = k_h * k_w * group_c;
    int16_t *patch = (int16_t *)ctx->buf;

    int16_t *out = output;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int16_t *image = input + (size_t)b * (size_t)in_h * (size_t)in_w * (size_t)in_c;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t iy0 = oy * params->stride.h - params->padding.h;
            for (int32_t ox = 0; ox < output_dims->w; ++ox, out += out_c) {
                const int32_t ix0 = ox * params->stride.w - params->padding.w;
                for (int32_t g = 0; g < groups; ++g) {
                    /* The receptive field of group g, [KH][KW][group_c]; padding is 0. */
                    int16_t *dst = patch;
                    for (int32_t ky = 0; ky < k_h; ++ky) {
                        const int32_t iy = iy0 + ky * params->dilation.h;
                        for (int32_t kx = 0; kx < k_w; ++kx, dst += group_c) {
                            const int32_t ix = ix0 + kx * params->dilation.w;
                            if (iy < 0 || iy >= in_h || ix < 0 || ix >= in_w) {
                                memset(dst, 0, (size_t)group_c * sizeof(int16_t));
                            } else {
                                memcpy(dst, image + ((size_t)iy * (size_t)in_w + (size_t)ix) *
                                                    (size_t)in_c + (size_t)g * (size_t)group_c,
                                       (size_t)group_c * sizeof(int16_t));
                            }
                        }
                    }
                    for (int32_t oc = g * group_out_c; oc < (g + 1) * group_out_c; ++oc) {
                        const int64_t sum = dot_s16_s8(
                            patch, filter + (size_t)oc * (size_t)patch_size, patch_size);
                        out[oc] = kiln_conv16_output(sum, bias64, bias32, wide, oc, quant,
                                                     params->activation.min,
                                                     params->activation.max);
                    }
                }
            }
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_conv2d_s16(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                              const kiln_per_channel_requant_t *quant,
                              const kiln_dims_t *input_dims, const int16_t *input,
                              const kiln_dims_t *filter_dims, const int8_t *filter,
                              const int64_t *bias,
                              const kiln_dims_t *output_dims, int16_t *output)
{
    return conv2d_s16(ctx, params, quant, input_dims, input, filter_dims, filter, bias, NULL, 1,
                      output_dims, output);
}

kiln_status_t kiln_conv2d_b32_s16(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                  const kiln_per_channel_requant_t *quant,
                                  const kiln_dims_t *input_dims, const int16_t *input,
                                  const kiln_dims_t *filter_dims, const int8_t *filter,
                                  const int32_t *bias,
                                  const kiln_dims_t *output_dims, int16_t *output)
{
    return conv2d_s16(ctx, params, quant, input_dims, input, filter_dims, filter, NULL, bias, 0,
                      output_dims, output);
}

/* ---- DEPTHWISE_CONV_2D -------------------------------------------------- */

kiln_status_t kiln_dwconv2d_s16(const kiln_dwconv_params_t *params,
                                const kiln_per_channel_requant_t *quant,
                                const kiln_dims_t *input_dims, const int16_t *input,
                                const kiln_dims_t *filter_dims, const int8_t *filter,
                                const int64_t *bias,
                                const kiln_dims_t *output_dims, int16_t *output)
{
    if (params == NULL || !kiln_conv16_params_valid(&params->conv) ||
        params->depth_multiplier < 1 || !kiln_requant_valid(quant) || input == NULL ||
        filter == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        !kiln_conv_geometry_valid(&params->conv, input_dims, filter_dims, output_dims)) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t mult = params->depth_multiplier;
    if (input_dims->n != output_dims->n || filter_dims->n != 1 || filter_dims->c != out_c ||
        (int64_t)in_c * mult != out_c) {
        return KILN_ERR_ARG;
    }
    int16_t *out = output;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int16_t *image = input + (size_t)b * (size_t)in_h * (size_t)in_w * (size_t)in_c;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t iy0 = oy * p->stride.h - p->padding.h;
            int32_t ky0;
            int32_t ky1;
            kiln_tap_range(iy0, in_h, k_h, p->dilation.h, &ky0, &ky1);
            for (int32_t ox = 0; ox < output_dims->w; ++ox, out += out_c) {
                const int32_t ix0 = ox * p->stride.w - p->padding.w;
                int32_t kx0;
                int32_t kx1;
                kiln_tap_range(ix0, in_w, k_w, p->dilation.w, &kx0, &kx1);
                if (ky0 == ky1 || kx0 == kx1) {
                    for (int32_t oc = 0; oc < out_c; ++oc) {    /* no tap inside */
                        out[oc] = kiln_conv16_output(0, bias, NULL, 1, oc, quant,
                                                     p->activation.min, p->activation.max);
                    }
                    continue;
                }
                /* The taps inside the image only: no test in the loops below. */
                const int16_t *corner = image + ((size_t)(iy0 + ky0 * p->dilation.h) *
                                                 (size_t)in_w +
                                                 (size_t)(ix0 + kx0 * p->dilation.w)) *
                                                (size_t)in_c;
                const int8_t *w_corner = filter + ((size_t)ky0 * (size_t)k_w + (size_t)kx0) *
                                                  (size_t)out_c;
                const size_t x_row = (size_t)p->dilation.h * (size_t)in_w * (size_t)in_c;
                const size_t x_col = (size_t)p->dilation.w * (size_t)in_c;
                const size_t w_row = (size_t)k_w * (size_t)out_c;
                /* Up to 256 products of at most 2^22 fit an int32 sum; more (a
                 * filter of over 256 taps) are added one by one in int64. */
                const int narrow = (int64_t)(ky1 - ky0) * (kx1 - kx0) <= KILN_CONV16_BLOCK;
                for (int32_t oc = 0; oc < out_c; ++oc) {
                    const int16_t *x_r = corner + oc / mult;
                    const int8_t *w_r = w_corner + oc;
                    int64_t sum = 0;
                    int32_t part = 0;
                    for (int32_t ky = ky0; ky < ky1; ++ky, x_r += x_row, w_r += w_row) {
                        const int16_t *x_t = x_r;
                        const int8_t *w_t = w_r;
                        if (narrow) {
                            for (int32_t kx = kx0; kx < kx1; ++kx, x_t += x_col, w_t += out_c) {
                                part += (int32_t)*x_t * *w_t;
                            }
                        } else {
                            for (int32_t kx = kx0; kx < kx1; ++kx, x_t += x_col, w_t += out_c) {
                                sum += (int32_t)*x_t * *w_t;
                            }
                        }
                    }
                    out[oc] = kiln_conv16_output(sum + part, bias, NULL, 1, oc, quant,
                                                 p->activation.min, p->activation.max);
                }
            }
        }
    }
    return KILN_OK;
}

/* ---- FULLY_CONNECTED ---------------------------------------------------- */

static kiln_status_t fully_connected_s16(const kiln_fc_params_t *params,
                                         const kiln_per_channel_requant_t *quant,
                                         const kiln_dims_t *input_dims, const int16_t *input,
                                         const kiln_dims_t *filter_dims, const int8_t *filter,
                                         const int64_t *bias64, const int32_t *bias32,
                                         int wide,
                                         const kiln_dims_t *output_dims, int16_t *output)
{
    if (params == NULL || !kiln_requant_valid(quant) || input == NULL || filter == NULL ||
        output == NULL || !kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims)) {
        return KILN_ERR_ARG;
    }
    if (params->input_offset != 0 || params->output_offset != 0 ||
        params->filter_offset < -127 || params->filter_offset > 128 ||
        params->activation.min < INT16_MIN || params->activation.min > params->activation.max ||
        params->activation.max > INT16_MAX) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = filter_dims->c;
    const int32_t units = filter_dims->n;
    const int32_t batches = output_dims->n;
    if (input_dims->c != depth || input_dims->n != batches || output_dims->c != units) {
        return KILN_ERR_ARG;
    }
    for (int32_t b = 0; b < batches; ++b) {
        const int16_t *row = input + (size_t)b * (size_t)depth;
        int16_t *out = output + (size_t)b * (size_t)units;
        /* sum_k (w + filter_offset) * x = sum_k w * x + filter_offset * sum_k x */
        int64_t row_term = 0;
        if (params->filter_offset != 0) {
            int64_t row_sum = 0;
            for (int32_t k = 0; k < depth; ++k) {
                row_sum += row[k];
            }
            row_term = params->filter_offset * row_sum;
        }
        for (int32_t u = 0; u < units; ++u) {
            const int64_t sum = row_term + dot_s16_s8(row, filter + (size_t)u * (size_t)depth,
                                                      depth);
            out[u] = kiln_conv16_output(sum, bias64, bias32, wide, u, quant,
                                        params->activation.min, params->activation.max);
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_fully_connected_s16(const kiln_fc_params_t *params,
                                       const kiln_per_channel_requant_t *quant,
                                       const kiln_dims_t *input_dims, const int16_t *input,
                                       const kiln_dims_t *filter_dims, const int8_t *filter,
                                       const int64_t *bias,
                                       const kiln_dims_t *output_dims, int16_t *output)
{
    return fully_connected_s16(params, quant, input_dims, input, filter_dims, filter, bias, NULL,
                               1, output_dims, output);
}

kiln_status_t kiln_fully_connected_b32_s16(const kiln_fc_params_t *params,
                                           const kiln_per_channel_requant_t *quant,
                                           const kiln_dims_t *input_dims, const int16_t *input,
                                           const kiln_dims_t *filter_dims,
                                           const int8_t *filter, const int32_t *bias,
                                           const kiln_dims_t *output_dims, int16_t *output)
{
    return fully_connected_s16(params, quant, input_dims, input, filter_dims, filter, NULL, bias,
                               0, output_dims, output);
}

/* ---- TRANSPOSE_CONV ----------------------------------------------------- */

kiln_status_t kiln_transpose_conv_s16(const kiln_conv_params_t *params,
                                      const kiln_per_channel_requant_t *quant,
                                      const kiln_dims_t *input_dims, const int16_t *input,
                                      const kiln_dims_t *filter_dims, const int8_t *filter,
                                      const int64_t *bias,
                                      const kiln_dims_t *output_dims, int16_t *output)
{
    if (!kiln_conv16_params_valid(params) || !kiln_requant_valid(quant) || input == NULL ||
        filter == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims)) {
        return KILN_ERR_ARG;
    }
    /* As kiln_transpose_conv_s8: t = out + padding and k + stride stay in int32. */
    if ((int64_t)output_dims->h + params->padding.h > INT32_MAX ||
        (int64_t)output_dims->w + params->padding.w > INT32_MAX ||
        (int64_t)filter_dims->h + params->stride.h > INT32_MAX ||
        (int64_t)filter_dims->w + params->stride.w > INT32_MAX) {
        return KILN_ERR_ARG;
    }
    if (params->dilation.h != 1 || params->dilation.w != 1 ||
        input_dims->n != output_dims->n || filter_dims->c != input_dims->c ||
        filter_dims->n != output_dims->c) {
        return KILN_ERR_ARG;
    }
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t stride_h = params->stride.h;
    const int32_t stride_w = params->stride.w;

    int16_t *out = output;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int16_t *image = input + (size_t)b * (size_t)in_h * (size_t)in_w * (size_t)in_c;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t ty = oy + params->padding.h;    /* = iy * stride_h + ky */
            for (int32_t ox = 0; ox < output_dims->w; ++ox, out += out_c) {
                const int32_t tx = ox + params->padding.w;
                for (int32_t oc = 0; oc < out_c; ++oc) {
                    int64_t sum = 0;
                    for (int32_t ky = ty % stride_h; ky < k_h && ky <= ty; ky += stride_h) {
                        const int32_t iy = (ty - ky) / stride_h;
                        if (iy >= in_h) {
                            continue;
                        }
                        for (int32_t kx = tx % stride_w; kx < k_w && kx <= tx; kx += stride_w) {
                            const int32_t ix = (tx - kx) / stride_w;
                            if (ix >= in_w) {
                                continue;
                            }
                            sum += dot_s16_s8(
                                image + ((size_t)iy * (size_t)in_w + (size_t)ix) * (size_t)in_c,
                                filter + (((size_t)oc * (size_t)k_h + (size_t)ky) *
                                          (size_t)k_w + (size_t)kx) * (size_t)in_c,
                                in_c);
                        }
                    }
                    out[oc] = kiln_conv16_output(sum, bias, NULL, 1, oc, quant,
                                                 params->activation.min, params->activation.max);
                }
            }
        }
    }
    return KILN_OK;
}
