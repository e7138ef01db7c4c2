/*
 * conv_mve.c - kiln_conv2d_mve_s8 (kernels_mve.h): CONV_2D as im2col + GEMM on
 * Helium. Compiled to nothing without MVE, apart from the buffer size, which
 * the compiler's scratch sizes are tested against on every target.
 */
#include "conv_mve.h"

int32_t kiln_conv2d_mve_s8_get_buffer_size(const kiln_conv_params_t *params,
                                           const kiln_dims_t *filter_dims)
{
    if (filter_dims->h == 1 && filter_dims->w == 1 && params->padding.h == 0 &&
        params->padding.w == 0) {
        return 0;
    }
    return filter_dims->h * filter_dims->w * filter_dims->c;
}

#if defined(KILN_MVE)

/* One receptive field into col (KH * KW * C bytes), padding as the zero point:
 * with dilation 1 along the width a kernel row's in-range taps are one
 * contiguous run of the input row. */
static void im2col(int8_t *col, const kiln_conv_params_t *p, const kiln_dims_t *in,
                   const int8_t *image, const kiln_dims_t *f, int32_t oy, int32_t ox)
{
    const int32_t c = in->c;
    const int32_t row_bytes = f->w * c;
    const int8x16_t zp = vdupq_n_s8((int8_t)-p->input_offset);
    const int32_t y0 = oy * p->stride.h - p->padding.h;
    const int32_t x0 = ox * p->stride.w - p->padding.w;
    for (int32_t ky = 0; ky < f->h; ++ky, col += row_bytes) {
        const int32_t iy = y0 + ky * p->dilation.h;
        if (iy < 0 || iy >= in->h) {
            kiln_mve_fill(col, zp, row_bytes);
            continue;
        }
        const int8_t *row = image + (int32_t)iy * in->w * c;
        if (p->dilation.w == 1) {
            /* taps kx in [lo, hi) read input columns x0 + kx in [0, W) */
            const int32_t lo = x0 < 0 ? kiln_min_i32(-x0, f->w) : 0;
            const int32_t hi = kiln_max_i32(lo, kiln_min_i32(f->w, in->w - x0));
            kiln_mve_fill(col, zp, lo * c);
            kiln_mve_copy(col + lo * c, row + (x0 + lo) * c, (hi - lo) * c);
            kiln_mve_fill(col + hi * c, zp, (f->w - hi) * c);
            continue;
        }
        for (int32_t kx = 0; kx < f->w; ++kx) {
            const int32_t ix = x0 + kx * p->dilation.w;
            if (ix < 0 || ix >= in->w) {
                kiln_mve_fill(col + kx * c, zp, c);
            } else {
                kiln_mve_copy(col + kx * c, row + ix * c, c);
            }
        }
    }
}

kiln_status_t kiln_conv2d_mve_s8(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                 const kiln_mve_quant4_t *quant,
                                 const kiln_dims_t *input_dims, const int8_t *input,
                                 const kiln_dims_t *filter_dims, const int8_t *filter,
                                 const kiln_dims_t *output_dims, int8_t *output)
{
    if (params == NULL || quant == NULL || input == NULL || filter == NULL || output == NULL ||
        !kiln_conv_params_valid(params) || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        filter_dims->c != input_dims->c || filter_dims->n != output_dims->c ||
        input_dims->n != output_dims->n ||
        !kiln_conv_geometry_valid(params, input_dims, filter_dims, output_dims)) {
        return KILN_ERR_ARG;
    }
    const int32_t scratch = kiln_conv2d_mve_s8_get_buffer_size(params, filter_dims);
    if (scratch > 0 && (ctx == NULL || ctx->buf == NULL || ctx->size < scratch)) {
        return KILN_ERR_ARG;
    }
    const int32_t k = filter_dims->h * filter_dims->w * filter_dims->c;
    const int32_t block_bytes = (k + 15) / 16 * 64;          /* four packed rows */
    const int32_t out_c = output_dims->c;
    const int32_t in_image = input_dims->h * input_dims->w * input_dims->c;
    int8_t *col = scratch > 0 ? (int8_t *)ctx->buf : NULL;
    const int32_t off = params->output_offset;
    const int32_t lo = params->activation.min, hi = params->activation.max;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int8_t *image = input + b * in_image;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            for (int32_t ox = 0; ox < output_dims->w; ++ox) {
                const int8_t *row;
                if (col != NULL) {
                    im2col(col, params, input_dims, image, filter_dims, oy, ox);
                    row = col;
                } else {        /* 1x1, no padding: the input pixel itself */
                    row = image + ((oy * params->stride.h) * input_dims->w +
                                   ox * params->stride.w) * input_dims->c;
                }
                const int8_t *w = filter;
                const kiln_mve_quant4_t *q = quant;
                for (int32_t oc = 0; oc < out_c; oc += 4, w += block_bytes, ++q) {
                    const int32x4_t v = kiln_mve_output4(kiln_mve_dot4(row, k, w), q, off, lo, hi);
                    vstrbq_p_s32(output + oc, v, vctp32q((uint32_t)(out_c - oc)));
                }
                output += out_c;
            }
        }
    }
    return KILN_OK;
}

#endif /* KILN_MVE */
