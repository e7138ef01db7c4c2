/*
 * transpose_conv.c - TRANSPOSE_CONV int8 kernel. Semantics in conv.h.
 *
 * TFLM scatters: input pixel (iy, ix) adds input * filter[oc][ky][kx] to
 * output (iy * stride - pad + ky, ix * stride - pad + kx). Here each output
 * pixel (oy, ox) gathers instead: filter row ky contributes when
 * oy + pad - ky is a non-negative multiple of the stride whose quotient iy is
 * inside the input; same for x. Integer sums do not depend on the order, so
 * the result is identical, and no int32 buffer of the whole output is needed.
 * Overflow: each product is in [-128 * 255, 128 * 255]; the compiler checks
 * |bias| + 256 * max|filter| * C_in * (taps reaching one output) < 2^31.
 */
#include "conv_internal.h"

kiln_status_t kiln_transpose_conv_s8(const kiln_conv_params_t *params,
                                     const kiln_per_channel_requant_t *quant,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *filter_dims, const int8_t *filter,
                                     const int32_t *bias,
                                     const kiln_dims_t *output_dims, int8_t *output)
{
    if (!kiln_conv_params_valid(params) || quant == NULL || quant->multiplier == NULL ||
        quant->shift == NULL || input == NULL || filter == NULL || output == NULL ||
        !kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims)) {
        return KILN_ERR_ARG;
    }
    /* t = out + padding and the tap index k + stride stay in int32 (the compiler's
     * bound, codegen/ops/conv.py _tconv_extremes; this guards direct callers). */
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
    const int32_t input_offset = params->input_offset;

    int8_t *out = output;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int8_t *image = input + (size_t)b * (size_t)in_h * (size_t)in_w * (size_t)in_c;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t ty = oy + params->padding.h;    /* = iy * stride_h + ky */
            for (int32_t ox = 0; ox < output_dims->w; ++ox, out += out_c) {
                const int32_t tx = ox + params->padding.w;
                for (int32_t oc = 0; oc < out_c; ++oc) {
                    int32_t acc = bias != NULL ? bias[oc] : 0;
                    /* ky runs over ty mod stride_h, ty mod stride_h + stride_h, ... */
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
                            const int8_t *x = image +
                                ((size_t)iy * (size_t)in_w + (size_t)ix) * (size_t)in_c;
                            const int8_t *w = filter +
                                (((size_t)oc * (size_t)k_h + (size_t)ky) * (size_t)k_w +
                                 (size_t)kx) * (size_t)in_c;
                            for (int32_t ic = 0; ic < in_c; ++ic) {
                                acc += w[ic] * (x[ic] + input_offset);
                            }
                        }
                    }
                    out[oc] = kiln_conv_output(acc, quant->multiplier[oc], quant->shift[oc],
                                               params->output_offset, params->activation.min,
                                               params->activation.max);
                }
            }
        }
    }
    return KILN_OK;
}
