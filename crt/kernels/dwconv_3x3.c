/*
 * dwconv_3x3.c - DEPTHWISE_CONV_2D with a 3x3 filter, depth multiplier 1, no
 * dilation, any stride and padding; channels a multiple of 4. Blocks of four
 * channels: one word of input per tap splits into int16 pairs (c0, c2) and
 * (c1, c3), multiplied lane by lane (SMLABB / SMLATT) by the filter packed
 * the same way at compile time. Semantics in conv.h; primitives in
 * conv_dsp.h.
 *
 * Bias: this kernel takes a folded bias, bias + input_offset * sum of the
 * channel's nine taps, and reads padding as the input zero point (a pixel of
 * it in scratch), so a padded tap adds w * (zero point + input_offset) = 0 as
 * in TFLM. Every output pixel reads its nine taps through one pointer table.
 * Overflow: |folded bias| <= |bias| + 128 * sum|w| and |sum w * x| <=
 * 128 * sum|w|; the compiler checks |bias| + 256 * sum|w| < 2^31 (conv.h).
 */
#include "conv_dsp.h"

/* One block of four channels at one tap: x is four input bytes, w points at
 * the tap's two packed words. */
#define DW_TAP(x, w)                                                             \
    do {                                                                         \
        const uint32_t even_ = kiln_sxtb16(x);                                   \
        const uint32_t odd_ = kiln_sxtb16_ror8(x);                               \
        uint32_t we_;                                                            \
        uint32_t wo_;                                                            \
        KILN_LOAD_PAIR(we_, wo_, w);                                             \
        a0 = kiln_smlabb(even_, we_, a0);                                        \
        a2 = kiln_smlatt(even_, we_, a2);                                        \
        a1 = kiln_smlabb(odd_, wo_, a1);                                         \
        a3 = kiln_smlatt(odd_, wo_, a3);                                         \
    } while (0)

int32_t kiln_dwconv2d_3x3_s8_get_buffer_size(const kiln_dims_t *input_dims)
{
    return input_dims == NULL ? 0 : input_dims->c;
}

/* Requantize a0..a3 into o[0..3] with q[0..3]; all four before the first
 * store, which the compiler must assume may alias q. */
#define DW_STORE4(o, q)                                                          \
    do {                                                                         \
        const int8_t y0_ = kiln_output_fast(a0, &(q)[0], out_off, act_min, act_max, full_range); \
        const int8_t y1_ = kiln_output_fast(a1, &(q)[1], out_off, act_min, act_max, full_range); \
        const int8_t y2_ = kiln_output_fast(a2, &(q)[2], out_off, act_min, act_max, full_range); \
        const int8_t y3_ = kiln_output_fast(a3, &(q)[3], out_off, act_min, act_max, full_range); \
        (o)[0] = y0_;                                                            \
        (o)[1] = y1_;                                                            \
        (o)[2] = y2_;                                                            \
        (o)[3] = y3_;                                                            \
    } while (0)

/* The pixel loop; full_range is a constant in each instantiation. */
static KILN_ALWAYS_INLINE void dw_pixels(const kiln_conv_params_t *p, const kiln_requant_fast_t *quant,
                                         const kiln_dims_t *input_dims, const int8_t *input,
                                         const int32_t *filter, const int32_t *bias,
                                         const kiln_dims_t *output_dims, int8_t *output,
                                         const int8_t *pad, int full_range)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const size_t row_step = (size_t)in_w * (size_t)in_c;
    const int32_t out_off = p->output_offset;
    const int32_t act_min = p->activation.min;
    const int32_t act_max = p->activation.max;
    int8_t *out = output;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int8_t *image = input + (size_t)b * (size_t)in_h * row_step;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t iy0 = oy * p->stride.h - p->padding.h;
            for (int32_t ox = 0; ox < output_dims->w; ++ox, out += in_c) {
                const int32_t ix0 = ox * p->stride.w - p->padding.w;
                const uint32_t *w = (const uint32_t *)filter;
                /* The nine taps; those outside the image read `pad`. */
                const int8_t *tap[9];
                if (iy0 >= 0 && iy0 + 2 < in_h && ix0 >= 0 && ix0 + 2 < in_w) {
                    const int8_t *r0 = image + (size_t)iy0 * row_step + (size_t)ix0 * (size_t)in_c;
                    const int8_t *r1 = r0 + row_step;
                    const int8_t *r2 = r1 + row_step;
                    tap[0] = r0;
                    tap[1] = r0 + in_c;
                    tap[2] = r0 + 2 * in_c;
                    tap[3] = r1;
                    tap[4] = r1 + in_c;
                    tap[5] = r1 + 2 * in_c;
                    tap[6] = r2;
                    tap[7] = r2 + in_c;
                    tap[8] = r2 + 2 * in_c;
                } else {
                    for (int32_t ky = 0; ky < 3; ++ky) {
                        const int32_t iy = iy0 + ky;
                        for (int32_t kx = 0; kx < 3; ++kx) {
                            const int32_t ix = ix0 + kx;
                            tap[3 * ky + kx] =
                                (iy < 0 || iy >= in_h || ix < 0 || ix >= in_w)
                                    ? pad
                                    : image + (size_t)iy * row_step + (size_t)ix * (size_t)in_c;
                        }
                    }
                }
                for (int32_t c = 0; c < in_c; c += 4) {
                    int32_t a0 = bias[c];
                    int32_t a1 = bias[c + 1];
                    int32_t a2 = bias[c + 2];
                    int32_t a3 = bias[c + 3];
                    DW_TAP(kiln_load_s8x4(tap[0] + c), w);
                    DW_TAP(kiln_load_s8x4(tap[1] + c), w);
                    DW_TAP(kiln_load_s8x4(tap[2] + c), w);
                    DW_TAP(kiln_load_s8x4(tap[3] + c), w);
                    DW_TAP(kiln_load_s8x4(tap[4] + c), w);
                    DW_TAP(kiln_load_s8x4(tap[5] + c), w);
                    DW_TAP(kiln_load_s8x4(tap[6] + c), w);
                    DW_TAP(kiln_load_s8x4(tap[7] + c), w);
                    DW_TAP(kiln_load_s8x4(tap[8] + c), w);
                    DW_STORE4(out + c, quant + c);
                }
            }
        }
    }
}

kiln_status_t kiln_dwconv2d_3x3_s8(const kiln_context_t *ctx, const kiln_dwconv_params_t *params,
                                   const kiln_requant_fast_t *quant,
                                   const kiln_dims_t *input_dims, const int8_t *input,
                                   const kiln_dims_t *filter_dims, const int32_t *filter,
                                   const int32_t *bias,
                                   const kiln_dims_t *output_dims, int8_t *output)
{
    if (ctx == NULL || params == NULL || !kiln_conv_params_valid(&params->conv) ||
        params->depth_multiplier != 1 || quant == NULL || input == NULL || filter == NULL ||
        bias == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        ((uintptr_t)filter & 3u) != 0) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_c = input_dims->c;
    if (input_dims->n != output_dims->n || filter_dims->n != 1 || filter_dims->h != 3 ||
        filter_dims->w != 3 || filter_dims->c != in_c || output_dims->c != in_c ||
        in_c % 4 != 0 || p->dilation.h != 1 || p->dilation.w != 1) {
        return KILN_ERR_ARG;
    }
    if (ctx->buf == NULL || ctx->size < kiln_dwconv2d_3x3_s8_get_buffer_size(input_dims)) {
        return KILN_ERR_ARG;
    }
    /* A pixel of padding: taps outside the image read it. */
    int8_t *pad = (int8_t *)ctx->buf;
    memset(pad, (int8_t)(-p->input_offset), (size_t)in_c);

    if (p->activation.min == -128 && p->activation.max == 127) {
        dw_pixels(p, quant, input_dims, input, filter, bias, output_dims, output, pad, 1);
    } else {
        dw_pixels(p, quant, input_dims, input, filter, bias, output_dims, output, pad, 0);
    }
    return KILN_OK;
}
