/*
 * conv_inplace.c - banded conv-family kernels (see inplace.h): each band is
 * one call of the ordinary kernel on the band's rows, so results are those of
 * the ordinary kernel, bit for bit.
 */
#include <string.h>

#include "inplace.h"

static int32_t min_i32(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

static int32_t max_i32(int32_t a, int32_t b)
{
    return a > b ? a : b;
}

/* The band API below is out of line in every caller: one copy serves the band
 * loops here and the kernels with their own (dwconv_3x3_px2.c), and a band's
 * call costs a few instructions where each inlined copy cost 50-250 bytes. */
#if defined(__GNUC__)
#define KILN_BAND_API __attribute__((noinline))
#else
#define KILN_BAND_API
#endif

KILN_BAND_API int32_t kiln_band_count(const kiln_band_params_t *band, int32_t out_h)
{
    return (out_h + band->rows - 1) / band->rows;
}

KILN_BAND_API void kiln_band_rows(const kiln_band_params_t *band,
                                  const kiln_conv_params_t *params, int32_t in_h,
                                  int32_t k_h, int32_t out_h, int32_t index,
                                  kiln_band_t *out)
{
    const int32_t r0 = index * band->rows;
    const int32_t r1 = min_i32(out_h, r0 + band->rows);
    /* Input row of the first tap of output row r0, and one past the last tap of r1 - 1. */
    const int32_t origin = r0 * params->stride.h - params->padding.h;
    const int32_t last = (r1 - 1) * params->stride.h - params->padding.h +
                         (k_h - 1) * params->dilation.h + 1;
    int32_t lo = max_i32(origin, 0);
    int32_t hi = min_i32(last, in_h);
    if (hi <= lo) {             /* the band reads only padding: hand over one row anyway */
        lo = min_i32(lo, in_h - 1);
        hi = lo + 1;
    }
    out->out_row = r0;
    out->out_rows = r1 - r0;
    out->in_row = lo;
    out->in_rows = hi - lo;
    out->pad_top = lo - origin;
}

/* Largest band input in rows. */
static int32_t max_band_in_rows(const kiln_band_params_t *band, const kiln_conv_params_t *params,
                                int32_t in_h, int32_t k_h, int32_t out_h)
{
    int32_t rows = 0;
    const int32_t count = kiln_band_count(band, out_h);
    for (int32_t i = 0; i < count; ++i) {
        kiln_band_t b;
        kiln_band_rows(band, params, in_h, k_h, out_h, i, &b);
        rows = max_i32(rows, b.in_rows);
    }
    return rows;
}

KILN_BAND_API int32_t kiln_band_copy_bytes(const kiln_band_params_t *band,
                                           const kiln_conv_params_t *params,
                                           const kiln_dims_t *input_dims, int32_t k_h,
                                           const kiln_dims_t *output_dims)
{
    if (!band->copy) {
        return 0;
    }
    const int32_t rows = max_band_in_rows(band, params, input_dims->h, k_h, output_dims->h);
    return (rows * input_dims->w * input_dims->c + 7) / 8 * 8;
}

/* What one kernel call needs for band `index`. */
typedef struct {
    kiln_conv_params_t params;
    kiln_dims_t in_dims;
    kiln_dims_t out_dims;
    const int8_t *in;
    int8_t *out;
    kiln_context_t ctx;         /* the kernel's own scratch */
} band_call_t;

/* The dims the kernel is called with: as given, or [1, H * W, 1, C] when flat. */
typedef struct {
    kiln_dims_t in;
    kiln_dims_t out;
} band_dims_t;

/* Shared checks; on success *copy_bytes is the copy area at the start of ctx and
 * *dims the (flattened) dims. */
static int bands_valid(const kiln_band_params_t *band, const kiln_context_t *ctx,
                       const kiln_conv_params_t *params, const kiln_dims_t *input_dims,
                       const int8_t *input, const kiln_dims_t *filter_dims,
                       const kiln_dims_t *output_dims, int8_t *output, int32_t *copy_bytes,
                       band_dims_t *dims)
{
    if (band == NULL || band->rows < 1 || ctx == NULL || params == NULL ||
        input_dims == NULL || filter_dims == NULL || output_dims == NULL || input == NULL ||
        output == NULL || input_dims->n != 1 || output_dims->n != 1 || input_dims->h < 1 ||
        output_dims->h < 1 || filter_dims->h < 1 || params->stride.h < 1 ||
        params->dilation.h < 1 || params->padding.h < 0) {
        return 0;
    }
    dims->in = *input_dims;
    dims->out = *output_dims;
    if (band->flat) {
        if (filter_dims->h != 1 || filter_dims->w != 1 || params->stride.h != 1 ||
            params->stride.w != 1 || params->padding.h != 0 || params->padding.w != 0 ||
            input_dims->h != output_dims->h || input_dims->w != output_dims->w) {
            return 0;
        }
        dims->in.h = input_dims->h * input_dims->w;
        dims->in.w = 1;
        dims->out.h = output_dims->h * output_dims->w;
        dims->out.w = 1;
    }
    *copy_bytes = kiln_band_copy_bytes(band, params, &dims->in, filter_dims->h, &dims->out);
    if (*copy_bytes > 0 && (ctx->buf == NULL || ctx->size < *copy_bytes)) {
        return 0;
    }
    return 1;
}

/* Geometry, pointers and (copied) input of band `index` in run order. */
static void band_call(const kiln_band_params_t *band, const kiln_context_t *ctx,
                      int32_t copy_bytes, const kiln_conv_params_t *params,
                      const kiln_dims_t *input_dims, const int8_t *input, int32_t k_h,
                      const kiln_dims_t *output_dims, int8_t *output, int32_t index,
                      band_call_t *call)
{
    const int32_t count = kiln_band_count(band, output_dims->h);
    kiln_band_t b;
    kiln_band_rows(band, params, input_dims->h, k_h, output_dims->h,
                   band->reverse ? count - 1 - index : index, &b);
    const size_t in_row_bytes = (size_t)input_dims->w * (size_t)input_dims->c;
    const size_t out_row_bytes = (size_t)output_dims->w * (size_t)output_dims->c;
    call->params = *params;
    call->params.padding.h = b.pad_top;
    call->in_dims = *input_dims;
    call->in_dims.h = b.in_rows;
    call->out_dims = *output_dims;
    call->out_dims.h = b.out_rows;
    call->in = input + (size_t)b.in_row * in_row_bytes;
    call->out = output + (size_t)b.out_row * out_row_bytes;
    if (copy_bytes > 0) {
        kiln_copy_bytes(ctx->buf, call->in, (size_t)b.in_rows * in_row_bytes);
        call->in = (const int8_t *)ctx->buf;
    }
    call->ctx.buf = copy_bytes > 0 ? (void *)((int8_t *)ctx->buf + copy_bytes) : ctx->buf;
    call->ctx.size = ctx->size - copy_bytes;
}

kiln_status_t kiln_conv2d_banded_s8(const kiln_band_params_t *band, const kiln_context_t *ctx,
                                    const kiln_conv_params_t *params,
                                    const kiln_per_channel_requant_t *quant,
                                    const kiln_dims_t *input_dims, const int8_t *input,
                                    const kiln_dims_t *filter_dims, const int8_t *filter,
                                    const int32_t *bias,
                                    const kiln_dims_t *output_dims, int8_t *output)
{
    int32_t copy_bytes;
    band_dims_t d;
    if (!bands_valid(band, ctx, params, input_dims, input, filter_dims, output_dims, output,
                     &copy_bytes, &d)) {
        return KILN_ERR_ARG;
    }
    const int32_t count = kiln_band_count(band, d.out.h);
    for (int32_t i = 0; i < count; ++i) {
        band_call_t c;
        band_call(band, ctx, copy_bytes, params, &d.in, input, filter_dims->h, &d.out, output,
                  i, &c);
        const kiln_status_t status = kiln_conv2d_s8(&c.ctx, &c.params, quant, &c.in_dims, c.in,
                                                    filter_dims, filter, bias, &c.out_dims,
                                                    c.out);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_conv2d_1x1_banded_s8(const kiln_band_params_t *band,
                                        const kiln_context_t *ctx,
                                        const kiln_conv_params_t *params,
                                        const kiln_per_channel_requant_t *quant,
                                        const kiln_dims_t *input_dims, const int8_t *input,
                                        const kiln_dims_t *filter_dims, const int8_t *filter,
                                        const int32_t *bias,
                                        const kiln_dims_t *output_dims, int8_t *output)
{
    int32_t copy_bytes;
    band_dims_t d;
    if (!bands_valid(band, ctx, params, input_dims, input, filter_dims, output_dims, output,
                     &copy_bytes, &d)) {
        return KILN_ERR_ARG;
    }
    const int32_t count = kiln_band_count(band, d.out.h);
    for (int32_t i = 0; i < count; ++i) {
        band_call_t c;
        band_call(band, ctx, copy_bytes, params, &d.in, input, filter_dims->h, &d.out, output,
                  i, &c);
        const kiln_status_t status = kiln_conv2d_1x1_s8(&c.params, quant, &c.in_dims, c.in,
                                                        filter_dims, filter, bias, &c.out_dims,
                                                        c.out);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}

/* The conv2d gemm variants share one signature (conv.h), so one band loop. */
typedef kiln_status_t (*gemm_kernel_t)(const kiln_context_t *ctx,
                                       const kiln_conv_params_t *params,
                                       const kiln_requant_fast_t *quant,
                                       const kiln_dims_t *input_dims, const int8_t *input,
                                       const kiln_dims_t *filter_dims, const int32_t *filter,
                                       const int32_t *bias,
                                       const kiln_dims_t *output_dims, int8_t *output);

static kiln_status_t gemm_banded(gemm_kernel_t kernel, const kiln_band_params_t *band,
                                 const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                 const kiln_requant_fast_t *quant,
                                 const kiln_dims_t *input_dims, const int8_t *input,
                                 const kiln_dims_t *filter_dims, const int32_t *filter,
                                 const int32_t *bias,
                                 const kiln_dims_t *output_dims, int8_t *output)
{
    int32_t copy_bytes;
    band_dims_t d;
    if (!bands_valid(band, ctx, params, input_dims, input, filter_dims, output_dims, output,
                     &copy_bytes, &d)) {
        return KILN_ERR_ARG;
    }
    const int32_t count = kiln_band_count(band, d.out.h);
    for (int32_t i = 0; i < count; ++i) {
        band_call_t c;
        band_call(band, ctx, copy_bytes, params, &d.in, input, filter_dims->h, &d.out, output,
                  i, &c);
        const kiln_status_t status = kernel(&c.ctx, &c.params, quant, &c.in_dims, c.in,
                                            filter_dims, filter, bias, &c.out_dims, c.out);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_conv2d_gemm_banded_s8(const kiln_band_params_t *band,
                                         const kiln_context_t *ctx,
                                         const kiln_conv_params_t *params,
                                         const kiln_requant_fast_t *quant,
                                         const kiln_dims_t *input_dims, const int8_t *input,
                                         const kiln_dims_t *filter_dims, const int32_t *filter,
                                         const int32_t *bias,
                                         const kiln_dims_t *output_dims, int8_t *output)
{
    return gemm_banded(kiln_conv2d_gemm_s8, band, ctx, params, quant, input_dims, input,
                       filter_dims, filter, bias, output_dims, output);
}

kiln_status_t kiln_conv2d_gemm_oc4_banded_s8(const kiln_band_params_t *band,
                                             const kiln_context_t *ctx,
                                             const kiln_conv_params_t *params,
                                             const kiln_requant_fast_t *quant,
                                             const kiln_dims_t *input_dims, const int8_t *input,
                                             const kiln_dims_t *filter_dims,
                                             const int32_t *filter, const int32_t *bias,
                                             const kiln_dims_t *output_dims, int8_t *output)
{
    return gemm_banded(kiln_conv2d_gemm_oc4_s8, band, ctx, params, quant, input_dims, input,
                       filter_dims, filter, bias, output_dims, output);
}

kiln_status_t kiln_conv2d_gemm_w8_banded_s8(const kiln_band_params_t *band,
                                            const kiln_context_t *ctx,
                                            const kiln_conv_params_t *params,
                                            const kiln_requant_fast_t *quant,
                                            const kiln_dims_t *input_dims, const int8_t *input,
                                            const kiln_dims_t *filter_dims,
                                            const int32_t *filter, const int32_t *bias,
                                            const kiln_dims_t *output_dims, int8_t *output)
{
    return gemm_banded(kiln_conv2d_gemm_w8_s8, band, ctx, params, quant, input_dims, input,
                       filter_dims, filter, bias, output_dims, output);
}

/* gemm_banded for the int8-pair gemms (their own quant type). */
typedef kiln_status_t (*gemm_p8_kernel_t)(const kiln_context_t *ctx,
                                          const kiln_conv_params_t *params,
                                          const kiln_requant_packed_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int32_t *filter,
                                          const int32_t *bias,
                                          const kiln_dims_t *output_dims, int8_t *output);

#if defined(__GNUC__)
__attribute__((always_inline))  /* a model links one of its two callers: no call, no pointer */
#endif
static inline kiln_status_t gemm_p8_banded(gemm_p8_kernel_t kernel, const kiln_band_params_t *band,
                                    const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                    const kiln_requant_packed_t *quant,
                                    const kiln_dims_t *input_dims, const int8_t *input,
                                    const kiln_dims_t *filter_dims, const int32_t *filter,
                                    const int32_t *bias, const kiln_dims_t *output_dims,
                                    int8_t *output)
{
    int32_t copy_bytes;
    band_dims_t d;
    if (!bands_valid(band, ctx, params, input_dims, input, filter_dims, output_dims, output,
                     &copy_bytes, &d)) {
        return KILN_ERR_ARG;
    }
    const int32_t count = kiln_band_count(band, d.out.h);
    for (int32_t i = 0; i < count; ++i) {
        band_call_t c;
        band_call(band, ctx, copy_bytes, params, &d.in, input, filter_dims->h, &d.out, output,
                  i, &c);
        const kiln_status_t status = kernel(&c.ctx, &c.params, quant, &c.in_dims, c.in,
                                            filter_dims, filter, bias, &c.out_dims, c.out);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_conv2d_gemm_p8_banded_s8(const kiln_band_params_t *band,
                                            const kiln_context_t *ctx,
                                            const kiln_conv_params_t *params,
                                            const kiln_requant_packed_t *quant,
                                            const kiln_dims_t *input_dims, const int8_t *input,
                                            const kiln_dims_t *filter_dims,
                                            const int32_t *filter, const int32_t *bias,
                                            const kiln_dims_t *output_dims, int8_t *output)
{
    return gemm_p8_banded(kiln_conv2d_gemm_p8_s8, band, ctx, params, quant, input_dims, input,
                          filter_dims, filter, bias, output_dims, output);
}

kiln_status_t kiln_conv2d_gemm_p8_full_banded_s8(const kiln_band_params_t *band,
                                                 const kiln_context_t *ctx,
                                                 const kiln_conv_params_t *params,
                                                 const kiln_requant_packed_t *quant,
                                                 const kiln_dims_t *input_dims,
                                                 const int8_t *input,
                                                 const kiln_dims_t *filter_dims,
                                                 const int32_t *filter, const int32_t *bias,
                                                 const kiln_dims_t *output_dims,
                                                 int8_t *output)
{
    return gemm_p8_banded(kiln_conv2d_gemm_p8_full_s8, band, ctx, params, quant, input_dims,
                          input, filter_dims, filter, bias, output_dims, output);
}

/*
 * The int8-pair gemms' flat bands (band->flat: a 1x1, stride-1, unpadded layer
 * seen as H * W rows of one pixel), without the row geometry: band b is pixels
 * [b * rows, b * rows + rows) of input and output alike, the same kernel calls
 * as gemm_p8_banded makes for such a layer (copy area, the kernel's scratch
 * after it, reverse order), so the same results. A model whose banded gemm
 * layers are all flat (KWS) links no bands_valid or band_call.
 */
#if defined(__GNUC__)
__attribute__((always_inline))  /* a model links one of its two callers: no call, no pointer */
#endif
static inline kiln_status_t gemm_p8_flat_banded(gemm_p8_kernel_t kernel,
                                         const kiln_band_params_t *band,
                                         const kiln_context_t *ctx,
                                         const kiln_conv_params_t *params,
                                         const kiln_requant_packed_t *quant,
                                         const kiln_dims_t *input_dims, const int8_t *input,
                                         const kiln_dims_t *filter_dims, const int32_t *filter,
                                         const int32_t *bias, const kiln_dims_t *output_dims,
                                         int8_t *output)
{
    if (band == NULL || band->rows < 1 || !band->flat || ctx == NULL || params == NULL ||
        input_dims == NULL || filter_dims == NULL || output_dims == NULL || input == NULL ||
        output == NULL || input_dims->n != 1 || output_dims->n != 1 || input_dims->h < 1 ||
        input_dims->w < 1 || input_dims->c < 1 || input_dims->h > INT32_MAX / input_dims->w ||
        output_dims->h != input_dims->h || output_dims->w != input_dims->w ||
        filter_dims->h != 1 || filter_dims->w != 1 || params->stride.h != 1 ||
        params->stride.w != 1 || params->padding.h != 0 || params->padding.w != 0) {
        return KILN_ERR_ARG;
    }
    const int32_t pixels = input_dims->h * input_dims->w;
    const int32_t rows = band->rows;
    const int32_t count = (pixels - 1) / rows + 1;
    kiln_dims_t in = {1, rows, 1, input_dims->c};
    kiln_dims_t out = {1, rows, 1, output_dims->c};
    /* kiln_band_copy_bytes of these dims: the largest band is min(rows, pixels) pixels. */
    const int32_t copy = band->copy ? (min_i32(rows, pixels) * in.c + 7) & ~7 : 0;
    if (copy > 0 && (ctx->buf == NULL || ctx->size < copy)) {
        return KILN_ERR_ARG;
    }
    const kiln_context_t kctx = {copy > 0 ? (void *)((int8_t *)ctx->buf + copy) : ctx->buf,
                                 ctx->size - copy};
    int32_t p0 = band->reverse ? (count - 1) * rows : 0;
    const int32_t step = band->reverse ? -rows : rows;
    for (int32_t i = 0; i < count; ++i, p0 += step) {
        const int8_t *src = input + (size_t)p0 * (size_t)in.c;
        in.h = min_i32(rows, pixels - p0);
        out.h = in.h;
        if (copy > 0) {
            kiln_copy_bytes(ctx->buf, src, (size_t)in.h * (size_t)in.c);
            src = (const int8_t *)ctx->buf;
        }
        const kiln_status_t status = kernel(&kctx, params, quant, &in, src, filter_dims,
                                            filter, bias, &out,
                                            output + (size_t)p0 * (size_t)out.c);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_conv2d_gemm_p8_flat_banded_s8(const kiln_band_params_t *band,
                                                 const kiln_context_t *ctx,
                                                 const kiln_conv_params_t *params,
                                                 const kiln_requant_packed_t *quant,
                                                 const kiln_dims_t *input_dims,
                                                 const int8_t *input,
                                                 const kiln_dims_t *filter_dims,
                                                 const int32_t *filter, const int32_t *bias,
                                                 const kiln_dims_t *output_dims,
                                                 int8_t *output)
{
    return gemm_p8_flat_banded(kiln_conv2d_gemm_p8_s8, band, ctx, params, quant, input_dims,
                               input, filter_dims, filter, bias, output_dims, output);
}

kiln_status_t kiln_conv2d_gemm_p8_full_flat_banded_s8(const kiln_band_params_t *band,
                                                      const kiln_context_t *ctx,
                                                      const kiln_conv_params_t *params,
                                                      const kiln_requant_packed_t *quant,
                                                      const kiln_dims_t *input_dims,
                                                      const int8_t *input,
                                                      const kiln_dims_t *filter_dims,
                                                      const int32_t *filter,
                                                      const int32_t *bias,
                                                      const kiln_dims_t *output_dims,
                                                      int8_t *output)
{
    return gemm_p8_flat_banded(kiln_conv2d_gemm_p8_full_s8, band, ctx, params, quant,
                               input_dims, input, filter_dims, filter, bias, output_dims,
                               output);
}

kiln_status_t kiln_dwconv2d_banded_s8(const kiln_band_params_t *band, const kiln_context_t *ctx,
                                      const kiln_dwconv_params_t *params,
                                      const kiln_per_channel_requant_t *quant,
                                      const kiln_dims_t *input_dims, const int8_t *input,
                                      const kiln_dims_t *filter_dims, const int8_t *filter,
                                      const int32_t *bias,
                                      const kiln_dims_t *output_dims, int8_t *output)
{
    int32_t copy_bytes;
    band_dims_t d;
    if (params == NULL || !bands_valid(band, ctx, &params->conv, input_dims, input, filter_dims,
                                       output_dims, output, &copy_bytes, &d)) {
        return KILN_ERR_ARG;
    }
    const int32_t count = kiln_band_count(band, d.out.h);
    kiln_dwconv_params_t p = *params;
    for (int32_t i = 0; i < count; ++i) {
        band_call_t c;
        band_call(band, ctx, copy_bytes, &params->conv, &d.in, input, filter_dims->h, &d.out,
                  output, i, &c);
        p.conv = c.params;
        const kiln_status_t status = kiln_dwconv2d_s8(&p, quant, &c.in_dims, c.in, filter_dims,
                                                      filter, bias, &c.out_dims, c.out);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}

/* The SIMD dwconv variants share one signature (conv.h), so one band loop. */
typedef kiln_status_t (*dw_kernel_t)(const kiln_context_t *ctx,
                                     const kiln_dwconv_params_t *params,
                                     const kiln_requant_fast_t *quant,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *filter_dims, const int32_t *filter,
                                     const int32_t *bias,
                                     const kiln_dims_t *output_dims, int8_t *output);

static kiln_status_t dw_banded(dw_kernel_t kernel, const kiln_band_params_t *band,
                               const kiln_context_t *ctx, const kiln_dwconv_params_t *params,
                               const kiln_requant_fast_t *quant,
                               const kiln_dims_t *input_dims, const int8_t *input,
                               const kiln_dims_t *filter_dims, const int32_t *filter,
                               const int32_t *bias,
                               const kiln_dims_t *output_dims, int8_t *output)
{
    int32_t copy_bytes;
    band_dims_t d;
    if (params == NULL || !bands_valid(band, ctx, &params->conv, input_dims, input, filter_dims,
                                       output_dims, output, &copy_bytes, &d)) {
        return KILN_ERR_ARG;
    }
    const int32_t count = kiln_band_count(band, d.out.h);
    kiln_dwconv_params_t p = *params;
    for (int32_t i = 0; i < count; ++i) {
        band_call_t c;
        band_call(band, ctx, copy_bytes, &params->conv, &d.in, input, filter_dims->h, &d.out,
                  output, i, &c);
        p.conv = c.params;
        const kiln_status_t status = kernel(&c.ctx, &p, quant, &c.in_dims, c.in, filter_dims,
                                            filter, bias, &c.out_dims, c.out);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_dwconv2d_3x3_banded_s8(const kiln_band_params_t *band,
                                          const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_requant_fast_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int32_t *filter,
                                          const int32_t *bias,
                                          const kiln_dims_t *output_dims, int8_t *output)
{
    return dw_banded(kiln_dwconv2d_3x3_s8, band, ctx, params, quant, input_dims, input,
                     filter_dims, filter, bias, output_dims, output);
}

kiln_status_t kiln_dwconv2d_ch4_banded_s8(const kiln_band_params_t *band,
                                          const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_requant_fast_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int32_t *filter,
                                          const int32_t *bias,
                                          const kiln_dims_t *output_dims, int8_t *output)
{
    return dw_banded(kiln_dwconv2d_ch4_s8, band, ctx, params, quant, input_dims, input,
                     filter_dims, filter, bias, output_dims, output);
}

/* kiln_dwconv2d_3x3_w8_s8 reads the model's int8 filter: the band loop of dw_banded
 * with its signature. */
kiln_status_t kiln_dwconv2d_3x3_w8_banded_s8(const kiln_band_params_t *band,
                                             const kiln_context_t *ctx,
                                             const kiln_dwconv_params_t *params,
                                             const kiln_requant_packed_t *quant,
                                             const kiln_dims_t *input_dims, const int8_t *input,
                                             const kiln_dims_t *filter_dims, const int8_t *filter,
                                             const int32_t *bias,
                                             const kiln_dims_t *output_dims, int8_t *output)
{
    int32_t copy_bytes;
    band_dims_t d;
    if (params == NULL || !bands_valid(band, ctx, &params->conv, input_dims, input, filter_dims,
                                       output_dims, output, &copy_bytes, &d)) {
        return KILN_ERR_ARG;
    }
    const int32_t count = kiln_band_count(band, d.out.h);
    kiln_dwconv_params_t p = *params;
    for (int32_t i = 0; i < count; ++i) {
        band_call_t c;
        band_call(band, ctx, copy_bytes, &params->conv, &d.in, input, filter_dims->h, &d.out,
                  output, i, &c);
        p.conv = c.params;
        const kiln_status_t status = kiln_dwconv2d_3x3_w8_s8(&c.ctx, &p, quant, &c.in_dims, c.in,
                                                             filter_dims, filter, bias,
                                                             &c.out_dims, c.out);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}
