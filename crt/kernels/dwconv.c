/*
 * dwconv.c - DEPTHWISE_CONV_2D int8 kernel. Semantics in conv.h.
 *
 * Loop order: output pixel, then a block of output channels whose
 * accumulators stay in registers across the filter taps; taps outside the
 * image are skipped (TFLM's "zero padding by omission"), so the model's bias
 * is used as is, and the input offset is added to every input value.
 * Overflow: each product filter * (input + input_offset) is in
 * [-128 * 255, 128 * 255]; the compiler checks |bias| + 256 * sum|filter|
 * < 2^31 per output channel, so no partial sum leaves int32.
 */
#include "conv_internal.h"

/* The filter taps k in [*first, *end) with 0 <= origin + k * dilation < size. */
static void valid_taps(int32_t origin, int32_t dilation, int32_t taps, int32_t size,
                       int32_t *first, int32_t *end)
{
    int32_t lo = origin < 0 ? (-origin + dilation - 1) / dilation : 0;
    int32_t hi = origin < size ? (size - 1 - origin) / dilation + 1 : 0;
    hi = kiln_min_i32(hi, taps);
    *first = kiln_min_i32(lo, hi);
    *end = hi;
}

kiln_status_t kiln_dwconv2d_s8(const kiln_dwconv_params_t *params,
                               const kiln_per_channel_requant_t *quant,
                               const kiln_dims_t *input_dims, const int8_t *input,
                               const kiln_dims_t *filter_dims, const int8_t *filter,
                               const int32_t *bias,
                               const kiln_dims_t *output_dims, int8_t *output)
{
    if (params == NULL || !kiln_conv_params_valid(&params->conv) || params->depth_multiplier < 1 ||
        quant == NULL || quant->multiplier == NULL || quant->shift == NULL || input == NULL ||
        filter == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        !kiln_conv_geometry_valid(&params->conv, input_dims, filter_dims, output_dims)) {
        return KILN_ERR_ARG;
    }
    const int32_t mult = params->depth_multiplier;
    if (input_dims->n != output_dims->n || filter_dims->n != 1 ||
        filter_dims->c != output_dims->c || output_dims->c != input_dims->c * mult) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t input_offset = p->input_offset;
    const int32_t act_min = p->activation.min;
    const int32_t act_max = p->activation.max;

    int8_t *out = output;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int8_t *image = input + (size_t)b * (size_t)in_h * (size_t)in_w * (size_t)in_c;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t iy0 = oy * p->stride.h - p->padding.h;
            int32_t ky0;
            int32_t ky1;
            valid_taps(iy0, p->dilation.h, k_h, in_h, &ky0, &ky1);
            for (int32_t ox = 0; ox < output_dims->w; ++ox, out += out_c) {
                const int32_t ix0 = ox * p->stride.w - p->padding.w;
                int32_t kx0;
                int32_t kx1;
                valid_taps(ix0, p->dilation.w, k_w, in_w, &kx0, &kx1);
                int32_t oc = 0;
                if (mult == 1) {
                    /* Output channel oc reads input channel oc: blocks of KILN_CONV_BLOCK
                     * channels (a vectorisable fixed-size loop), then of four. */
                    for (; oc + KILN_CONV_BLOCK <= out_c; oc += KILN_CONV_BLOCK) {
                        int32_t acc[KILN_CONV_BLOCK];
                        for (int32_t j = 0; j < KILN_CONV_BLOCK; ++j) {
                            acc[j] = bias != NULL ? bias[oc + j] : 0;
                        }
                        for (int32_t ky = ky0; ky < ky1; ++ky) {
                            const int32_t iy = iy0 + ky * p->dilation.h;
                            for (int32_t kx = kx0; kx < kx1; ++kx) {
                                const int32_t ix = ix0 + kx * p->dilation.w;
                                const int8_t *x = image +
                                    ((size_t)iy * (size_t)in_w + (size_t)ix) * (size_t)in_c + oc;
                                const int8_t *w = filter +
                                    ((size_t)ky * (size_t)k_w + (size_t)kx) * (size_t)out_c + oc;
                                for (int32_t j = 0; j < KILN_CONV_BLOCK; ++j) {
                                    acc[j] += w[j] * (x[j] + input_offset);
                                }
                            }
                        }
                        for (int32_t j = 0; j < KILN_CONV_BLOCK; ++j) {
                            out[oc + j] = kiln_conv_output(acc[j], quant->multiplier[oc + j],
                                                           quant->shift[oc + j],
                                                           p->output_offset, act_min, act_max);
                        }
                    }
                    for (; oc + 4 <= out_c; oc += 4) {
                        int32_t a0 = 0;
                        int32_t a1 = 0;
                        int32_t a2 = 0;
                        int32_t a3 = 0;
                        if (bias != NULL) {
                            a0 = bias[oc];
                            a1 = bias[oc + 1];
                            a2 = bias[oc + 2];
                            a3 = bias[oc + 3];
                        }
                        for (int32_t ky = ky0; ky < ky1; ++ky) {
                            const int32_t iy = iy0 + ky * p->dilation.h;
                            for (int32_t kx = kx0; kx < kx1; ++kx) {
                                const int32_t ix = ix0 + kx * p->dilation.w;
                                const int8_t *x = image +
                                    ((size_t)iy * (size_t)in_w + (size_t)ix) * (size_t)in_c + oc;
                                const int8_t *w = filter +
                                    ((size_t)ky * (size_t)k_w + (size_t)kx) * (size_t)out_c + oc;
                                a0 += w[0] * (x[0] + input_offset);
                                a1 += w[1] * (x[1] + input_offset);
                                a2 += w[2] * (x[2] + input_offset);
                                a3 += w[3] * (x[3] + input_offset);
                            }
                        }
                        out[oc] = kiln_conv_output(a0, quant->multiplier[oc], quant->shift[oc],
                                                   p->output_offset, act_min, act_max);
                        out[oc + 1] = kiln_conv_output(a1, quant->multiplier[oc + 1],
                                                       quant->shift[oc + 1], p->output_offset,
                                                       act_min, act_max);
                        out[oc + 2] = kiln_conv_output(a2, quant->multiplier[oc + 2],
                                                       quant->shift[oc + 2], p->output_offset,
                                                       act_min, act_max);
                        out[oc + 3] = kiln_conv_output(a3, quant->multiplier[oc + 3],
                                                       quant->shift[oc + 3], p->output_offset,
                                                       act_min, act_max);
                    }
                }
                /* Remaining channels, and every channel when depth_multiplier > 1:
                 * output channel oc reads input channel oc / mult. */
                for (; oc < out_c; ++oc) {
                    const int32_t ic = oc / mult;
                    int32_t acc = bias != NULL ? bias[oc] : 0;
                    for (int32_t ky = ky0; ky < ky1; ++ky) {
                        const int32_t iy = iy0 + ky * p->dilation.h;
                        for (int32_t kx = kx0; kx < kx1; ++kx) {
                            const int32_t ix = ix0 + kx * p->dilation.w;
                            const int32_t x = image[((size_t)iy * (size_t)in_w + (size_t)ix) *
                                                    (size_t)in_c + (size_t)ic];
                            const int32_t w = filter[((size_t)ky * (size_t)k_w + (size_t)kx) *
                                                     (size_t)out_c + (size_t)oc];
                            acc += w * (x + input_offset);
                        }
                    }
                    out[oc] = kiln_conv_output(acc, quant->multiplier[oc], quant->shift[oc],
                                               p->output_offset, act_min, act_max);
                }
            }
        }
    }
    return KILN_OK;
}
