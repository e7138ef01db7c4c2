/*
 * dwconv_mve.c - kiln_dwconv2d_mve_s8 (kernels_mve.h): DEPTHWISE_CONV_2D with
 * depth multiplier 1 on Helium, sixteen channels a pass. Compiled to nothing
 * without MVE, apart from the buffer size.
 */
#include "conv_mve.h"

int32_t kiln_dwconv2d_mve_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                             const kiln_dims_t *filter_dims)
{
    return 8 * filter_dims->h * filter_dims->w + input_dims->c;
}

#if defined(KILN_MVE)

/* The int32 sums of 16 channels, by lane order: a = (c0, c4, c8, c12),
 * b = (c2, c6, c10, c14), c = (c1, c5, c9, c13), d = (c3, c7, c11, c15). */
typedef struct {
    int32x4_t a, b, c, d;
} sums16_t;

/* even / odd: int16 products (or sums of two) of the even / odd channels,
 * widened into the four int32 sums. */
KILN_MVE_INLINE void widen_add(sums16_t *s, int16x8_t even, int16x8_t odd)
{
    s->a = vaddq_s32(s->a, vmovlbq_s16(even));
    s->b = vaddq_s32(s->b, vmovltq_s16(even));
    s->c = vaddq_s32(s->c, vmovlbq_s16(odd));
    s->d = vaddq_s32(s->d, vmovltq_s16(odd));
}

/*
 * Sixteen channels [c, c + 16) of one output pixel (`pred` lanes of them). Tap
 * t reads channel c at taps[t] + c (a border window: a zero-point pixel where
 * the tap is padding), or, inside the input, at origin + offsets[t] + c; w is
 * the filter's channel c of tap 0 (stride C per tap).
 * VMULLB / VMULLT.S8 multiply the even / odd channels into int16 lanes: a
 * product is at most 2^14 in magnitude. With `pairs` (no filter value is
 * -128) a product is at most 128 * 127, so two taps' products add up in int16
 * (|sum| <= 32512) before widening: half the widening work. The int32 sums
 * are the plain kernel's (conv.h).
 */
KILN_MVE_INLINE void channels16(int8_t *out, const int8_t *const *taps, const int8_t *origin,
                                const int32_t *offsets, int32_t n_taps, const int8_t *w,
                                int32_t c, int32_t stride, const kiln_mve_quant4_t *q,
                                const kiln_conv_params_t *p, mve_pred16_t pred,
                                int predicated, int border, int pairs)
{
    sums16_t s = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
    int32_t t = 0;
    if (pairs) {
        for (; t + 1 < n_taps; t += 2, w += 2 * stride) {
            const int8_t *x0 = (border ? taps[t] : origin + offsets[t]) + c;
            const int8_t *x1 = (border ? taps[t + 1] : origin + offsets[t + 1]) + c;
            const int8x16_t xv0 = predicated ? vldrbq_z_s8(x0, pred) : vldrbq_s8(x0);
            const int8x16_t wv0 = predicated ? vldrbq_z_s8(w, pred) : vldrbq_s8(w);
            const int8x16_t xv1 = predicated ? vldrbq_z_s8(x1, pred) : vldrbq_s8(x1);
            const int8x16_t wv1 = predicated ? vldrbq_z_s8(w + stride, pred)
                                             : vldrbq_s8(w + stride);
            widen_add(&s, vaddq_s16(vmullbq_int_s8(xv0, wv0), vmullbq_int_s8(xv1, wv1)),
                      vaddq_s16(vmulltq_int_s8(xv0, wv0), vmulltq_int_s8(xv1, wv1)));
        }
    }
    for (; t < n_taps; ++t, w += stride) {
        const int8_t *x = (border ? taps[t] : origin + offsets[t]) + c;
        const int8x16_t xv = predicated ? vldrbq_z_s8(x, pred) : vldrbq_s8(x);
        const int8x16_t wv = predicated ? vldrbq_z_s8(w, pred) : vldrbq_s8(w);
        widen_add(&s, vmullbq_int_s8(xv, wv), vmulltq_int_s8(xv, wv));
    }
    const int32_t off = p->output_offset, lo = p->activation.min, hi = p->activation.max;
    const int32x4_t a = kiln_mve_output4(s.a, q, off, lo, hi);
    const int32x4_t b = kiln_mve_output4(s.b, q + 1, off, lo, hi);
    const int32x4_t cc = kiln_mve_output4(s.c, q + 2, off, lo, hi);
    const int32x4_t d = kiln_mve_output4(s.d, q + 3, off, lo, hi);
    /* back to channel order: int16 lanes 2k / 2k + 1 from a / b (even channels),
     * c / d (odd ones), then int8 lanes 2i / 2i + 1 from those */
    const int16x8_t even = vmovntq_s32(vmovnbq_s32(vdupq_n_s16(0), a), b);
    const int16x8_t odd = vmovntq_s32(vmovnbq_s32(vdupq_n_s16(0), cc), d);
    const int8x16_t packed = vmovntq_s16(vmovnbq_s16(vdupq_n_s8(0), even), odd);
    if (predicated) {
        vstrbq_p_s8(out + c, packed, pred);
    } else {
        vstrbq_s8(out + c, packed);
    }
}

/* Every channel of one output pixel; `border` and `pairs` as in channels16. */
KILN_MVE_INLINE void pixel(int8_t *out, const int8_t *const *taps, const int8_t *origin,
                           const int32_t *offsets, int32_t n_taps, const int8_t *filter,
                           int32_t ch, const kiln_mve_quant4_t *q, const kiln_conv_params_t *p,
                           int border, int pairs)
{
    const int32_t whole = ch / 16 * 16;
    int32_t c = 0;
    for (; c < whole; c += 16, q += 4) {
        channels16(out, taps, origin, offsets, n_taps, filter + c, c, ch, q, p, 0, 0, border,
                   pairs);
    }
    if (c < ch) {
        channels16(out, taps, origin, offsets, n_taps, filter + c, c, ch, q, p,
                   vctp8q((uint32_t)(ch - c)), 1, border, pairs);
    }
}

/* The output pixels of one layer; `pairs` as in channels16. */
KILN_MVE_INLINE void layer(const kiln_dwconv_params_t *params, const kiln_mve_quant4_t *quant,
                           const kiln_dims_t *input_dims, const int8_t *input,
                           const kiln_dims_t *filter_dims, const int8_t *filter,
                           const kiln_dims_t *output_dims, int8_t *output,
                           const int8_t **taps, const int32_t *offsets, const int8_t *pad,
                           int pairs)
{
    const kiln_conv_params_t *p = &params->conv;
    const int32_t ch = input_dims->c;
    const int32_t n_taps = filter_dims->h * filter_dims->w;
    /* Windows with origin rows [0, last_y] and columns [0, last_x] are inside. */
    const int32_t last_y = input_dims->h - 1 - (filter_dims->h - 1) * p->dilation.h;
    const int32_t last_x = input_dims->w - 1 - (filter_dims->w - 1) * p->dilation.w;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int8_t *image = input + b * input_dims->h * input_dims->w * ch;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t y0 = oy * p->stride.h - p->padding.h;
            for (int32_t ox = 0; ox < output_dims->w; ++ox, output += ch) {
                const int32_t x0 = ox * p->stride.w - p->padding.w;
                if (y0 >= 0 && y0 <= last_y && x0 >= 0 && x0 <= last_x) {
                    pixel(output, taps, image + (y0 * input_dims->w + x0) * ch, offsets,
                          n_taps, filter, ch, quant, p, 0, pairs);
                    continue;
                }
                for (int32_t ky = 0, t = 0; ky < filter_dims->h; ++ky) {
                    const int32_t iy = y0 + ky * p->dilation.h;
                    const int row_in = iy >= 0 && iy < input_dims->h;
                    for (int32_t kx = 0; kx < filter_dims->w; ++kx, ++t) {
                        const int32_t ix = x0 + kx * p->dilation.w;
                        taps[t] = row_in && ix >= 0 && ix < input_dims->w
                                      ? image + (iy * input_dims->w + ix) * ch : pad;
                    }
                }
                pixel(output, taps, image, offsets, n_taps, filter, ch, quant, p, 1, pairs);
            }
        }
    }
}

static KILN_MVE_NOINLINE void layer_pairs(const kiln_dwconv_params_t *params,
                                          const kiln_mve_quant4_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int8_t *filter,
                                          const kiln_dims_t *output_dims, int8_t *output,
                                          const int8_t **taps, const int32_t *offsets,
                                          const int8_t *pad)
{
    layer(params, quant, input_dims, input, filter_dims, filter, output_dims, output, taps,
          offsets, pad, 1);
}

static KILN_MVE_NOINLINE void layer_single(const kiln_dwconv_params_t *params,
                                           const kiln_mve_quant4_t *quant,
                                           const kiln_dims_t *input_dims, const int8_t *input,
                                           const kiln_dims_t *filter_dims, const int8_t *filter,
                                           const kiln_dims_t *output_dims, int8_t *output,
                                           const int8_t **taps, const int32_t *offsets,
                                           const int8_t *pad)
{
    layer(params, quant, input_dims, input, filter_dims, filter, output_dims, output, taps,
          offsets, pad, 0);
}

/* No filter value is -128 (the products of two taps add up in int16). */
static int filter_above_min(const int8_t *filter, int32_t n)
{
    int8x16_t low = vdupq_n_s8(INT8_MAX);
    for (int32_t i = 0; i < n; i += 16) {
        low = vminq_s8(low, vldrbq_z_s8(filter + i, vctp8q((uint32_t)(n - i))));
    }
    return vminvq_s8(INT8_MAX, low) > INT8_MIN;
}

kiln_status_t kiln_dwconv2d_mve_s8(const kiln_context_t *ctx, const kiln_dwconv_params_t *params,
                                   const kiln_mve_quant4_t *quant,
                                   const kiln_dims_t *input_dims, const int8_t *input,
                                   const kiln_dims_t *filter_dims, const int8_t *filter,
                                   const kiln_dims_t *output_dims, int8_t *output)
{
    if (params == NULL || quant == NULL || input == NULL || filter == NULL || output == NULL ||
        ctx == NULL || ctx->buf == NULL || ((uintptr_t)ctx->buf & 3u) != 0 ||
        !kiln_conv_params_valid(&params->conv) || params->depth_multiplier != 1 ||
        !kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims) || filter_dims->n != 1 ||
        filter_dims->c != input_dims->c || output_dims->c != input_dims->c ||
        input_dims->n != output_dims->n ||
        !kiln_conv_geometry_valid(&params->conv, input_dims, filter_dims, output_dims) ||
        ctx->size < kiln_dwconv2d_mve_s8_get_buffer_size(input_dims, filter_dims)) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t ch = input_dims->c;
    const int32_t n_taps = filter_dims->h * filter_dims->w;
    const int8_t **taps = (const int8_t **)ctx->buf;
    int32_t *offsets = (int32_t *)ctx->buf + n_taps;
    int8_t *pad = (int8_t *)ctx->buf + 8 * n_taps;
    kiln_mve_fill(pad, vdupq_n_s8((int8_t)-p->input_offset), ch);
    for (int32_t ky = 0, t = 0; ky < filter_dims->h; ++ky) {
        for (int32_t kx = 0; kx < filter_dims->w; ++kx, ++t) {
            offsets[t] = (ky * p->dilation.h * input_dims->w + kx * p->dilation.w) * ch;
        }
    }
    if (filter_above_min(filter, n_taps * ch)) {
        layer_pairs(params, quant, input_dims, input, filter_dims, filter, output_dims, output,
                    taps, offsets, pad);
    } else {
        layer_single(params, quant, input_dims, input, filter_dims, filter, output_dims,
                     output, taps, offsets, pad);
    }
    return KILN_OK;
}

#endif /* KILN_MVE */
