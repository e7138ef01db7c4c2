/*
 * conv2d.c - CONV_2D int8 kernels: the general im2col kernel and the 1x1
 * specialisation. Semantics and the folded-bias contract are in conv.h.
 */
#include <string.h>

#include "conv_internal.h"

int32_t kiln_conv2d_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                       const kiln_dims_t *filter_dims)
{
    (void)input_dims;
    if (filter_dims == NULL) {
        return 0;
    }
    return filter_dims->h * filter_dims->w * filter_dims->c;
}

/* Shapes shared by both CONV_2D kernels: batch and channel counts agree. */
static int conv2d_dims_valid(const kiln_dims_t *input_dims, const kiln_dims_t *filter_dims,
                             const kiln_dims_t *output_dims)
{
    if (!kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims)) {
        return 0;
    }
    if (input_dims->n != output_dims->n || filter_dims->n != output_dims->c ||
        input_dims->c % filter_dims->c != 0) {
        return 0;
    }
    const int32_t groups = input_dims->c / filter_dims->c;
    return output_dims->c % groups == 0;
}

kiln_status_t kiln_conv2d_s8(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                             const kiln_per_channel_requant_t *quant,
                             const kiln_dims_t *input_dims, const int8_t *input,
                             const kiln_dims_t *filter_dims, const int8_t *filter,
                             const int32_t *bias,
                             const kiln_dims_t *output_dims, int8_t *output)
{
    if (ctx == NULL || !kiln_conv_params_valid(params) || quant == NULL ||
        quant->multiplier == NULL || quant->shift == NULL || input == NULL ||
        filter == NULL || output == NULL ||
        !conv2d_dims_valid(input_dims, filter_dims, output_dims) ||
        !kiln_conv_geometry_valid(params, input_dims, filter_dims, output_dims)) {
        return KILN_ERR_ARG;
    }
    const int32_t patch_size = kiln_conv2d_s8_get_buffer_size(input_dims, filter_dims);
    if (ctx->buf == NULL || ctx->size < patch_size) {
        return KILN_ERR_ARG;
    }

    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t group_c = filter_dims->c;            /* input channels per group */
    const int32_t groups = in_c / group_c;
    const int32_t out_c = output_dims->c;
    const int32_t group_out_c = out_c / groups;        /* output channels per group */
    const int32_t stride_h = params->stride.h;
    const int32_t stride_w = params->stride.w;
    const int32_t dil_h = params->dilation.h;
    const int32_t dil_w = params->dilation.w;
    /* Padding reads as the input zero point, so the folded bias holds there too. */
    const int8_t pad_value = (int8_t)(-params->input_offset);
    /* A whole filter row is one contiguous run of the input when it has every
     * channel and no horizontal dilation. */
    const int row_is_contiguous = groups == 1 && dil_w == 1;
    int8_t *patch = (int8_t *)ctx->buf;

    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int8_t *image = input + (size_t)b * (size_t)in_h * (size_t)in_w * (size_t)in_c;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t iy0 = oy * stride_h - params->padding.h;
            for (int32_t ox = 0; ox < output_dims->w; ++ox) {
                const int32_t ix0 = ox * stride_w - params->padding.w;
                const int row_inside = ix0 >= 0 && ix0 + (k_w - 1) * dil_w < in_w;
                int8_t *out = output +
                    (((size_t)b * (size_t)output_dims->h + (size_t)oy) * (size_t)output_dims->w +
                     (size_t)ox) * (size_t)out_c;
                for (int32_t g = 0; g < groups; ++g) {
                    /* Gather the receptive field of group g: [KH][KW][group_c]. */
                    int8_t *dst = patch;
                    for (int32_t ky = 0; ky < k_h; ++ky) {
                        const int32_t iy = iy0 + ky * dil_h;
                        if (iy < 0 || iy >= in_h) {
                            memset(dst, pad_value, (size_t)(k_w * group_c));
                            dst += k_w * group_c;
                            continue;
                        }
                        const int8_t *src_row = image + (size_t)iy * (size_t)in_w * (size_t)in_c +
                                                (size_t)g * (size_t)group_c;
                        if (row_is_contiguous && row_inside) {
                            memcpy(dst, src_row + (size_t)ix0 * (size_t)in_c,
                                   (size_t)(k_w * group_c));
                            dst += k_w * group_c;
                            continue;
                        }
                        for (int32_t kx = 0; kx < k_w; ++kx) {
                            const int32_t ix = ix0 + kx * dil_w;
                            if (ix < 0 || ix >= in_w) {
                                memset(dst, pad_value, (size_t)group_c);
                            } else {
                                memcpy(dst, src_row + (size_t)ix * (size_t)in_c, (size_t)group_c);
                            }
                            dst += group_c;
                        }
                    }
                    const int32_t first = g * group_out_c;
                    const kiln_per_channel_requant_t group_quant = {
                        quant->multiplier + first, quant->shift + first};
                    kiln_row_times_filter_s8(patch, filter + (size_t)first * (size_t)patch_size,
                                             patch_size, bias != NULL ? bias + first : NULL, 0,
                                             &group_quant, group_out_c, params->output_offset,
                                             params->activation.min, params->activation.max,
                                             out + first);
                }
            }
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_conv2d_1x1_s8(const kiln_conv_params_t *params,
                                 const kiln_per_channel_requant_t *quant,
                                 const kiln_dims_t *input_dims, const int8_t *input,
                                 const kiln_dims_t *filter_dims, const int8_t *filter,
                                 const int32_t *bias,
                                 const kiln_dims_t *output_dims, int8_t *output)
{
    if (!kiln_conv_params_valid(params) || quant == NULL || quant->multiplier == NULL ||
        quant->shift == NULL || input == NULL || filter == NULL || output == NULL ||
        !conv2d_dims_valid(input_dims, filter_dims, output_dims) ||
        !kiln_conv_geometry_valid(params, input_dims, filter_dims, output_dims)) {
        return KILN_ERR_ARG;
    }
    if (filter_dims->h != 1 || filter_dims->w != 1 || filter_dims->c != input_dims->c ||
        params->padding.h != 0 || params->padding.w != 0 ||
        (output_dims->h - 1) * params->stride.h >= input_dims->h ||
        (output_dims->w - 1) * params->stride.w >= input_dims->w) {
        return KILN_ERR_ARG;
    }
    const int32_t in_c = input_dims->c;
    const int32_t out_c = output_dims->c;
    int8_t *out = output;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int8_t *row = input +
                (((size_t)b * (size_t)input_dims->h + (size_t)(oy * params->stride.h)) *
                 (size_t)input_dims->w) * (size_t)in_c;
            for (int32_t ox = 0; ox < output_dims->w; ++ox) {
                kiln_row_times_filter_s8(row + (size_t)(ox * params->stride.w) * (size_t)in_c,
                                         filter, in_c, bias, 0, quant, out_c,
                                         params->output_offset, params->activation.min,
                                         params->activation.max, out);
                out += out_c;
            }
        }
    }
    return KILN_OK;
}
