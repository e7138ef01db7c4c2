/*
 * conv_mve_inplace.c - banded twins of the MVE conv kernels (inplace.h's
 * contract, kernels_mve.h): each band is one call of the ordinary MVE kernel
 * on the band's rows, so the planner may overlap these layers' outputs with
 * their inputs as it does the DSP kernels'. The band geometry is
 * kiln_band_rows (conv_inplace.c), the one kiln.compiler.codegen.ops.inplace
 * derives the safe overlaps from. Compiled to nothing without MVE.
 */
#include <string.h>

#include "conv_mve.h"
#include "inplace.h"

#if defined(KILN_MVE)

/* One band's call: its params, dims, pointers (the input copied to the copy
 * area when band->copy) and the kernel's own scratch after the copy area. */
typedef struct {
    kiln_conv_params_t params;
    kiln_dims_t in_dims, out_dims;
    const int8_t *in;
    int8_t *out;
    kiln_context_t ctx;
} band_call_t;

/* The checks of inplace.h's banded kernels; on success *dims_in / *dims_out are
 * the dims the kernel sees (flat: [1, H * W, 1, C]) and *copy_bytes the copy area. */
static int bands_valid(const kiln_band_params_t *band, const kiln_context_t *ctx,
                       const kiln_conv_params_t *p, const kiln_dims_t *in,
                       const int8_t *input, const kiln_dims_t *f, const kiln_dims_t *out,
                       int8_t *output, kiln_dims_t *dims_in, kiln_dims_t *dims_out,
                       int32_t *copy_bytes)
{
    if (band == NULL || band->rows < 1 || ctx == NULL || p == NULL || in == NULL ||
        f == NULL || out == NULL || input == NULL || output == NULL || in->n != 1 ||
        out->n != 1 || in->h < 1 || out->h < 1 || f->h < 1 || p->stride.h < 1 ||
        p->dilation.h < 1 || p->padding.h < 0) {
        return 0;
    }
    *dims_in = *in;
    *dims_out = *out;
    if (band->flat) {
        if (f->h != 1 || f->w != 1 || p->stride.h != 1 || p->stride.w != 1 ||
            p->padding.h != 0 || p->padding.w != 0 || in->h != out->h || in->w != out->w) {
            return 0;
        }
        dims_in->h = in->h * in->w;
        dims_in->w = 1;
        dims_out->h = out->h * out->w;
        dims_out->w = 1;
    }
    *copy_bytes = kiln_band_copy_bytes(band, p, dims_in, f->h, dims_out);
    return *copy_bytes == 0 || (ctx->buf != NULL && ctx->size >= *copy_bytes);
}

static void band_call(const kiln_band_params_t *band, const kiln_context_t *ctx,
                      int32_t copy_bytes, const kiln_conv_params_t *p, const kiln_dims_t *in,
                      const int8_t *input, int32_t k_h, const kiln_dims_t *out, int8_t *output,
                      int32_t index, band_call_t *call)
{
    const int32_t count = kiln_band_count(band, out->h);
    kiln_band_t b;
    kiln_band_rows(band, p, in->h, k_h, out->h, band->reverse ? count - 1 - index : index, &b);
    const size_t in_row = (size_t)in->w * (size_t)in->c;
    call->params = *p;
    call->params.padding.h = b.pad_top;
    call->in_dims = *in;
    call->in_dims.h = b.in_rows;
    call->out_dims = *out;
    call->out_dims.h = b.out_rows;
    call->in = input + (size_t)b.in_row * in_row;
    call->out = output + (size_t)b.out_row * (size_t)out->w * (size_t)out->c;
    if (copy_bytes > 0) {
        kiln_copy_bytes(ctx->buf, call->in, (size_t)b.in_rows * in_row);
        call->in = (const int8_t *)ctx->buf;
    }
    call->ctx.buf = copy_bytes > 0 ? (void *)((int8_t *)ctx->buf + copy_bytes) : ctx->buf;
    call->ctx.size = ctx->size - copy_bytes;
}

typedef kiln_status_t (*conv_kernel_t)(const kiln_context_t *, const kiln_conv_params_t *,
                                       const kiln_mve_quant4_t *, const kiln_dims_t *,
                                       const int8_t *, const kiln_dims_t *, const int8_t *,
                                       const kiln_dims_t *, int8_t *);

static kiln_status_t conv_banded(conv_kernel_t kernel, const kiln_band_params_t *band,
                                 const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                 const kiln_mve_quant4_t *quant,
                                 const kiln_dims_t *input_dims, const int8_t *input,
                                 const kiln_dims_t *filter_dims, const int8_t *filter,
                                 const kiln_dims_t *output_dims, int8_t *output)
{
    kiln_dims_t in, out;
    int32_t copy_bytes;
    if (!bands_valid(band, ctx, params, input_dims, input, filter_dims, output_dims, output,
                     &in, &out, &copy_bytes)) {
        return KILN_ERR_ARG;
    }
    const int32_t count = kiln_band_count(band, out.h);
    for (int32_t i = 0; i < count; ++i) {
        band_call_t c;
        band_call(band, ctx, copy_bytes, params, &in, input, filter_dims->h, &out, output, i,
                  &c);
        const kiln_status_t status = kernel(&c.ctx, &c.params, quant, &c.in_dims, c.in,
                                            filter_dims, filter, &c.out_dims, c.out);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_conv2d_mve_banded_s8(const kiln_band_params_t *band,
                                        const kiln_context_t *ctx,
                                        const kiln_conv_params_t *params,
                                        const kiln_mve_quant4_t *quant,
                                        const kiln_dims_t *input_dims, const int8_t *input,
                                        const kiln_dims_t *filter_dims, const int8_t *filter,
                                        const kiln_dims_t *output_dims, int8_t *output)
{
    return conv_banded(kiln_conv2d_mve_s8, band, ctx, params, quant, input_dims, input,
                       filter_dims, filter, output_dims, output);
}

kiln_status_t kiln_conv2d_mve_im2col_banded_s8(const kiln_band_params_t *band,
                                               const kiln_context_t *ctx,
                                               const kiln_conv_params_t *params,
                                               const kiln_mve_quant4_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int8_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int8_t *filter,
                                               const kiln_dims_t *output_dims, int8_t *output)
{
    return conv_banded(kiln_conv2d_mve_im2col_s8, band, ctx, params, quant, input_dims, input,
                       filter_dims, filter, output_dims, output);
}

kiln_status_t kiln_dwconv2d_mve_banded_s8(const kiln_band_params_t *band,
                                          const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_mve_quant4_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int8_t *filter,
                                          const kiln_dims_t *output_dims, int8_t *output)
{
    kiln_dims_t in, out;
    int32_t copy_bytes;
    if (params == NULL || !bands_valid(band, ctx, &params->conv, input_dims, input, filter_dims,
                                       output_dims, output, &in, &out, &copy_bytes)) {
        return KILN_ERR_ARG;
    }
    const int32_t count = kiln_band_count(band, out.h);
    kiln_dwconv_params_t p = *params;
    for (int32_t i = 0; i < count; ++i) {
        band_call_t c;
        band_call(band, ctx, copy_bytes, &params->conv, &in, input, filter_dims->h, &out,
                  output, i, &c);
        p.conv = c.params;
        const kiln_status_t status = kiln_dwconv2d_mve_s8(&c.ctx, &p, quant, &c.in_dims, c.in,
                                                          filter_dims, filter, &c.out_dims,
                                                          c.out);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}

#else

/* ISO C wants a translation unit to declare something. */
typedef int kiln_conv_mve_inplace_unused_t;

#endif /* KILN_MVE */
