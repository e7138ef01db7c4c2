/*
 * dwconv_channels.c - DEPTHWISE_CONV_2D with depth multiplier 1 and any
 * filter size, stride, dilation and padding, in blocks of four channels
 * (kiln_dwconv2d_ch4_s8; layouts in conv.h, primitives in conv_dsp.h).
 *
 * Per output pixel and block of four channels the accumulators stay in
 * registers while the taps are walked row by row: one word of input per tap
 * splits into int16 pairs (c0, c2) and (c1, c3), multiplied lane by lane by
 * the filter packed the same way at compile time. Unlike dwconv_3x3.c it has
 * no table of tap pointers (the filter size is a run-time value): a pixel
 * whose taps all lie in the image walks them by fixed offsets, and only a
 * pixel at the border tests each tap. Its run-time loops cost it 1.4-2.4x
 * kiln_dwconv2d_3x3_s8's instructions on a 3x3 layer, which therefore keeps
 * that kernel. The last C % 4 channels form a block
 * of their own (see load_lanes; C >= 4), whose missing lanes the filter
 * zeroes and which are not stored.
 *
 * Bias: folded, bias + input_offset * sum of the channel's taps, with padding
 * read as the input zero point (a pixel of it in scratch), as in
 * dwconv_3x3.c. Overflow: |folded bias| <= |bias| + 128 * sum|w| and
 * |sum w * x| <= 128 * sum|w|; the compiler checks
 * |bias| + 256 * sum|w| < 2^31 (conv.h).
 */
#include "conv_dsp.h"

int32_t kiln_dwconv2d_ch4_s8_get_buffer_size(const kiln_dims_t *input_dims)
{
    return input_dims == NULL ? 0 : input_dims->c;
}

/* What every pixel of a layer shares. */
typedef struct {
    int32_t in_h, in_w, in_c;
    int32_t k_h, k_w;
    int32_t dil_h, dil_w;
    size_t row_step;            /* bytes of an input row */
    size_t tap_x, tap_y;        /* bytes between taps along a filter row / column */
} dw_geometry_t;

/* The input word of a block of channels at a tap, x pointing at its first
 * channel: for a whole block (shift a constant 0) the next four bytes; for
 * the last C % 4 channels, whose block would run past the pixel (and past
 * the tensor at its last pixel), the pixel's last four bytes shifted right by
 * `shift` = 8 * (4 - C % 4) bits, so the block's channels land in the low
 * lanes and zeros in the others (C >= 4). */
static KILN_ALWAYS_INLINE uint32_t load_lanes(const int8_t *x, int32_t shift)
{
    return shift == 0 ? kiln_load_s8x4(x) : kiln_load_s8x4(x - shift / 8) >> shift;
}

/*
 * One block of channels from c of the output pixel whose first tap is at
 * (iy0, ix0) (shift as in load_lanes): `inside` (a constant) when every tap
 * lies in the image, origin then pointing at that first tap's pixel. Returns
 * the filter after the block's taps.
 */
static KILN_ALWAYS_INLINE const uint32_t *dw_block(const dw_geometry_t *g, const int8_t *image,
                                                  const int8_t *origin, int32_t iy0, int32_t ix0,
                                                  const int8_t *pad, const uint32_t *w,
                                                  int32_t c, int32_t shift, int inside,
                                                  int32_t *acc)
{
    int32_t a0 = acc[0];
    int32_t a1 = acc[1];
    int32_t a2 = acc[2];
    int32_t a3 = acc[3];
    if (inside) {
        /* Offsets, not pointers: a pointer stepped past the last tap could
         * leave the input array. */
        size_t row = (size_t)c;
        for (int32_t ky = 0; ky < g->k_h; ++ky, row += g->tap_y) {
            size_t x = row;
            for (int32_t kx = 0; kx < g->k_w; ++kx, x += g->tap_x) {
                KILN_DW_TAP4(load_lanes(origin + x, shift), w, a0, a1, a2, a3);
            }
        }
    } else {
        for (int32_t ky = 0; ky < g->k_h; ++ky) {
            const int32_t iy = iy0 + ky * g->dil_h;
            const int row_in = iy >= 0 && iy < g->in_h;
            for (int32_t kx = 0; kx < g->k_w; ++kx) {
                const int32_t ix = ix0 + kx * g->dil_w;
                const int8_t *x = row_in && ix >= 0 && ix < g->in_w
                                      ? image + (size_t)iy * g->row_step +
                                            (size_t)ix * (size_t)g->in_c
                                      : pad;
                KILN_DW_TAP4(load_lanes(x + c, shift), w, a0, a1, a2, a3);
            }
        }
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
    return w;
}

/* Every block of one output pixel; inside and full_range are constants. */
static KILN_ALWAYS_INLINE void dw_pixel(const dw_geometry_t *g, const kiln_conv_params_t *p,
                                        const kiln_requant_fast_t *quant, const int8_t *image,
                                        int32_t iy0, int32_t ix0, const int32_t *filter,
                                        const int32_t *bias, const int8_t *pad, int8_t *out,
                                        int inside, int full_range)
{
    const int32_t out_off = p->output_offset;
    const int32_t act_min = p->activation.min;
    const int32_t act_max = p->activation.max;
    const int8_t *origin =
        inside ? image + (size_t)iy0 * g->row_step + (size_t)ix0 * (size_t)g->in_c : NULL;
    const uint32_t *w = (const uint32_t *)filter;
    const int32_t whole = g->in_c & ~3;
    for (int32_t c = 0; c < whole; c += 4) {
        int32_t acc[4] = {bias[c], bias[c + 1], bias[c + 2], bias[c + 3]};
        w = dw_block(g, image, origin, iy0, ix0, pad, w, c, 0, inside, acc);
        KILN_DW_STORE4(out + c, quant + c, acc[0], acc[1], acc[2], acc[3]);
    }
    const int32_t rest = g->in_c - whole;
    if (rest > 0) {
        int32_t acc[4] = {0, 0, 0, 0};
        for (int32_t j = 0; j < rest; ++j) {
            acc[j] = bias[whole + j];
        }
        dw_block(g, image, origin, iy0, ix0, pad, w, whole, 8 * (4 - rest), inside, acc);
        for (int32_t j = 0; j < rest; ++j) {
            out[whole + j] = kiln_output_fast(acc[j], &quant[whole + j], out_off, act_min,
                                              act_max, full_range);
        }
    }
}

/* The pixel loop; full_range is a constant in each instantiation. */
static KILN_ALWAYS_INLINE void dw_pixels(const dw_geometry_t *g, const kiln_conv_params_t *p,
                                         const kiln_requant_fast_t *quant, int32_t batches,
                                         const int8_t *input, const int32_t *filter,
                                         const int32_t *bias, const kiln_dims_t *output_dims,
                                         int8_t *output, const int8_t *pad, int full_range)
{
    const int32_t span_h = (g->k_h - 1) * g->dil_h;     /* first to last tap */
    const int32_t span_w = (g->k_w - 1) * g->dil_w;
    int8_t *out = output;
    for (int32_t b = 0; b < batches; ++b) {
        const int8_t *image = input + (size_t)b * (size_t)g->in_h * g->row_step;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t iy0 = oy * p->stride.h - p->padding.h;
            const int rows_in = iy0 >= 0 && iy0 + span_h < g->in_h;
            for (int32_t ox = 0; ox < output_dims->w; ++ox, out += g->in_c) {
                const int32_t ix0 = ox * p->stride.w - p->padding.w;
                if (rows_in && ix0 >= 0 && ix0 + span_w < g->in_w) {
                    dw_pixel(g, p, quant, image, iy0, ix0, filter, bias, pad, out, 1,
                             full_range);
                } else {
                    dw_pixel(g, p, quant, image, iy0, ix0, filter, bias, pad, out, 0,
                             full_range);
                }
            }
        }
    }
}

kiln_status_t kiln_dwconv2d_ch4_s8(const kiln_context_t *ctx, const kiln_dwconv_params_t *params,
                                   const kiln_requant_fast_t *quant,
                                   const kiln_dims_t *input_dims, const int8_t *input,
                                   const kiln_dims_t *filter_dims, const int32_t *filter,
                                   const int32_t *bias,
                                   const kiln_dims_t *output_dims, int8_t *output)
{
    if (!kiln_dw_fast_args_valid(ctx, params, quant, input_dims, input, filter_dims, filter,
                                 bias, output_dims, output,
                                 kiln_dwconv2d_ch4_s8_get_buffer_size(input_dims)) ||
        input_dims->c < 4) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_c = input_dims->c;
    /* A pixel of padding: taps outside the image read it. */
    int8_t *pad = (int8_t *)ctx->buf;
    memset(pad, (int8_t)(-p->input_offset), (size_t)in_c);

    const dw_geometry_t g = {
        .in_h = input_dims->h, .in_w = input_dims->w, .in_c = in_c,
        .k_h = filter_dims->h, .k_w = filter_dims->w,
        .dil_h = p->dilation.h, .dil_w = p->dilation.w,
        .row_step = (size_t)input_dims->w * (size_t)in_c,
        .tap_x = (size_t)p->dilation.w * (size_t)in_c,
        .tap_y = (size_t)p->dilation.h * (size_t)input_dims->w * (size_t)in_c,
    };
    if (p->activation.min == -128 && p->activation.max == 127) {
        dw_pixels(&g, p, quant, input_dims->n, input, filter, bias, output_dims, output, pad, 1);
    } else {
        dw_pixels(&g, p, quant, input_dims->n, input, filter, bias, output_dims, output, pad, 0);
    }
    return KILN_OK;
}
