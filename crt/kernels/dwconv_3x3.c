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
 *
 * Why four channels at a time: blocks of eight (each tap's pointer loaded
 * once for eight channels) measured 11-14% more instructions on every
 * depthwise layer of KWS and VWW (QEMU mps2-an386). Eight accumulators, the
 * filter pointer and the four temporaries of a tap fill Cortex-M4's
 * registers, so GCC reloads the tap pointer for the second half and spills,
 * and the one load saved per tap is lost.
 */
#include "conv_dsp.h"

int32_t kiln_dwconv2d_3x3_s8_get_buffer_size(const kiln_dims_t *input_dims)
{
    return input_dims == NULL ? 0 : input_dims->c;
}

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
                    KILN_DW_TAP4(kiln_load_s8x4(tap[0] + c), w, a0, a1, a2, a3);
                    KILN_DW_TAP4(kiln_load_s8x4(tap[1] + c), w, a0, a1, a2, a3);
                    KILN_DW_TAP4(kiln_load_s8x4(tap[2] + c), w, a0, a1, a2, a3);
                    KILN_DW_TAP4(kiln_load_s8x4(tap[3] + c), w, a0, a1, a2, a3);
                    KILN_DW_TAP4(kiln_load_s8x4(tap[4] + c), w, a0, a1, a2, a3);
                    KILN_DW_TAP4(kiln_load_s8x4(tap[5] + c), w, a0, a1, a2, a3);
                    KILN_DW_TAP4(kiln_load_s8x4(tap[6] + c), w, a0, a1, a2, a3);
                    KILN_DW_TAP4(kiln_load_s8x4(tap[7] + c), w, a0, a1, a2, a3);
                    KILN_DW_TAP4(kiln_load_s8x4(tap[8] + c), w, a0, a1, a2, a3);
                    KILN_DW_STORE4(out + c, quant + c, a0, a1, a2, a3);
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
    if (!kiln_dw_fast_args_valid(ctx, params, quant, input_dims, input, filter_dims, filter,
                                 bias, output_dims, output,
                                 kiln_dwconv2d_3x3_s8_get_buffer_size(input_dims)) ||
        filter_dims->h != 3 || filter_dims->w != 3 || input_dims->c % 4 != 0 ||
        params->conv.dilation.h != 1 || params->conv.dilation.w != 1) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_c = input_dims->c;
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
