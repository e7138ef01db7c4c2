/*
 * dwconv_mve.c - kiln_dwconv2d_mve_s8 (kernels_mve.h): DEPTHWISE_CONV_2D with
 * depth multiplier 1 on Helium, eight channels a pass. Compiled to nothing
 * without MVE, apart from the buffer size.
 */
#include "conv_mve.h"

int32_t kiln_dwconv2d_mve_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                             const kiln_dims_t *filter_dims)
{
    return 8 * filter_dims->h * filter_dims->w + input_dims->c;
}

#if defined(KILN_MVE)

/*
 * Eight channels [c, c + 8) of one output pixel (`pred` lanes of them). Tap t
 * reads channel c at taps[t] + c (a border window: a zero-point pixel where
 * the tap is padding), or, inside the input, at origin + offsets[t] + c.
 * w is the filter's channel c of tap 0 (stride C per tap).
 * Lanes widen to int16; VMULLB multiplies the even ones (c, c+2, ...) into
 * int32, VMULLT the odd ones: the order of the quant blocks. Every product is
 * at most 2^14 in magnitude and the sums are the plain kernel's (conv.h).
 */
KILN_MVE_INLINE void channels8(int8_t *out, const int8_t *const *taps, const int8_t *origin,
                               const int32_t *offsets, int32_t n_taps, const int8_t *w,
                               int32_t c, int32_t stride, const kiln_mve_quant4_t *q,
                               const kiln_conv_params_t *p, mve_pred16_t pred, int predicated,
                               int border)
{
    int32x4_t even = vdupq_n_s32(0), odd = vdupq_n_s32(0);
    for (int32_t t = 0; t < n_taps; ++t, w += stride) {
        const int8_t *x = (border ? taps[t] : origin + offsets[t]) + c;
        const int16x8_t xv = predicated ? vldrbq_z_s16(x, pred) : vldrbq_s16(x);
        const int16x8_t wv = predicated ? vldrbq_z_s16(w, pred) : vldrbq_s16(w);
        even = vaddq_s32(even, vmullbq_int_s16(xv, wv));
        odd = vaddq_s32(odd, vmulltq_int_s16(xv, wv));
    }
    even = kiln_mve_output4(even, q, p->output_offset, p->activation.min, p->activation.max);
    odd = kiln_mve_output4(odd, q + 1, p->output_offset, p->activation.min, p->activation.max);
    const int16x8_t packed = vmovntq_s32(vmovnbq_s32(vdupq_n_s16(0), even), odd);
    if (predicated) {
        vstrbq_p_s16(out + c, packed, pred);
    } else {
        vstrbq_s16(out + c, packed);
    }
}

/* Every channel of one output pixel; `border` as in channels8. */
KILN_MVE_INLINE void pixel(int8_t *out, const int8_t *const *taps, const int8_t *origin,
                           const int32_t *offsets, int32_t n_taps, const int8_t *filter,
                           int32_t ch, const kiln_mve_quant4_t *q, const kiln_conv_params_t *p,
                           int border)
{
    const int32_t whole = ch / 8 * 8;
    int32_t c = 0;
    for (; c < whole; c += 8, q += 2) {
        channels8(out, taps, origin, offsets, n_taps, filter + c, c, ch, q, p, 0, 0, border);
    }
    if (c < ch) {
        channels8(out, taps, origin, offsets, n_taps, filter + c, c, ch, q, p,
                  vctp16q((uint32_t)(ch - c)), 1, border);
    }
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
                          n_taps, filter, ch, quant, p, 0);
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
                pixel(output, taps, image, offsets, n_taps, filter, ch, quant, p, 1);
            }
        }
    }
    return KILN_OK;
}

#endif /* KILN_MVE */
