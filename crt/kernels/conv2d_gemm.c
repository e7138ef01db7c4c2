/*
 * conv2d_gemm.c - CONV_2D as im2col + a GEMM blocked 2 output channels x
 * 2 output pixels, on packed int16 pairs (SMLAD on cores with the DSP
 * extension, plain C elsewhere). Semantics, the folded bias and the packed
 * filter layout are in conv.h; the pair primitives in conv_dsp.h.
 *
 * Per pair of output pixels the receptive fields are gathered into scratch
 * as int16 pairs interleaved pixel by pixel, so one LDRD fetches the same
 * pair of k for both pixels; the filter was packed the same way at compile
 * time (both channels of a block side by side). The inner loop then does,
 * per group of four k: 4 LDRD and 8 SMLAD, 16 multiply-accumulates.
 *
 * Overflow: products of int16 lanes holding int8 values; the sums are the
 * same as kiln_conv2d_s8's, which conv.h bounds below 2^31.
 */
#include "conv_dsp.h"

int32_t kiln_conv2d_gemm_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                            const kiln_dims_t *filter_dims)
{
    if (input_dims == NULL || filter_dims == NULL) {
        return 0;
    }
    const int32_t depth4 = kiln_round_up4(filter_dims->h * filter_dims->w * filter_dims->c);
    /* Two pixels' columns of int16 (4 * depth4 bytes), plus an int8 patch
     * when channel runs are not whole words. */
    return 4 * depth4 + (filter_dims->c % 4 != 0 ? depth4 : 0);
}

/* Where one output pixel's receptive field lies, and what padding reads. */
typedef struct {
    const int8_t *input;        /* batch 0 */
    int32_t in_h, in_w, in_c;
    int32_t k_h, k_w;
    int32_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int32_t depth;              /* k_h * k_w * in_c */
    int32_t groups4;            /* depth rounded up to 4, over 4 */
    int8_t pad_value;           /* the input zero point */
} gather_t;

/* n groups of four int8 from src into one pixel's slot of the column. */
static uint32_t *extend_run(uint32_t *col, const int8_t *src, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        const uint32_t v = kiln_load_s8x4(src);
        col[0] = kiln_sxtb16(v);
        col[2] = kiln_sxtb16_ror8(v);
        col += 4;
        src += 4;
    }
    return col;
}

static uint32_t *fill_run(uint32_t *col, uint32_t pair, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        col[0] = pair;
        col[2] = pair;
        col += 4;
    }
    return col;
}

/*
 * Receptive field of output pixel (b, oy, ox) into column slot `col` (the
 * pixel's first word; its words are col[4g] and col[4g + 2]). With whole
 * words of channels the input converts directly; otherwise it goes through
 * an int8 patch.
 */
static void gather(const gather_t *g, int32_t b, int32_t oy, int32_t ox, int8_t *patch,
                   uint32_t *col)
{
    const int8_t *image = g->input + (size_t)b * (size_t)g->in_h * (size_t)g->in_w *
                                         (size_t)g->in_c;
    const int32_t iy0 = oy * g->stride_h - g->pad_h;
    const int32_t ix0 = ox * g->stride_w - g->pad_w;
    const int row_inside = g->dil_w == 1 && ix0 >= 0 && ix0 + g->k_w - 1 < g->in_w;
    const int32_t row_len = g->k_w * g->in_c;
    if (g->in_c % 4 == 0) {
        const uint32_t pad_pair = kiln_sxtb16((uint8_t)g->pad_value * UINT32_C(0x01010101));
        const int32_t c4 = g->in_c / 4;
        for (int32_t ky = 0; ky < g->k_h; ++ky) {
            const int32_t iy = iy0 + ky * g->dil_h;
            if (iy < 0 || iy >= g->in_h) {
                col = fill_run(col, pad_pair, row_len / 4);
                continue;
            }
            const int8_t *src_row = image + (size_t)iy * (size_t)g->in_w * (size_t)g->in_c;
            if (row_inside) {
                col = extend_run(col, src_row + (size_t)ix0 * (size_t)g->in_c, row_len / 4);
                continue;
            }
            for (int32_t kx = 0; kx < g->k_w; ++kx) {
                const int32_t ix = ix0 + kx * g->dil_w;
                col = (ix < 0 || ix >= g->in_w)
                          ? fill_run(col, pad_pair, c4)
                          : extend_run(col, src_row + (size_t)ix * (size_t)g->in_c, c4);
            }
        }
        return;
    }
    int8_t *dst = patch;
    for (int32_t ky = 0; ky < g->k_h; ++ky) {
        const int32_t iy = iy0 + ky * g->dil_h;
        if (iy < 0 || iy >= g->in_h) {
            memset(dst, g->pad_value, (size_t)row_len);
            dst += row_len;
            continue;
        }
        const int8_t *src_row = image + (size_t)iy * (size_t)g->in_w * (size_t)g->in_c;
        if (row_inside) {
            memcpy(dst, src_row + (size_t)ix0 * (size_t)g->in_c, (size_t)row_len);
            dst += row_len;
            continue;
        }
        for (int32_t kx = 0; kx < g->k_w; ++kx) {
            const int32_t ix = ix0 + kx * g->dil_w;
            if (ix < 0 || ix >= g->in_w) {
                memset(dst, g->pad_value, (size_t)g->in_c);
            } else {
                memcpy(dst, src_row + (size_t)ix * (size_t)g->in_c, (size_t)g->in_c);
            }
            dst += g->in_c;
        }
    }
    /* The filter is zero past depth; zeros here keep the products defined. */
    memset(dst, 0, (size_t)(4 * g->groups4 - g->depth));
    extend_run(col, patch, g->groups4);
}

/*
 * Channels oc and oc + 1 of both pixels: w is the channel pair's packed block,
 * col the two pixels' interleaved column (groups4 groups of 4 words each).
 * acc[0..3] = (oc, px0), (oc, px1), (oc+1, px0), (oc+1, px1), added to.
 */
static void dot_2x2(const uint32_t *w, const uint32_t *col, int32_t groups4, int32_t acc[4])
{
    int32_t a00 = acc[0];
    int32_t a01 = acc[1];
    int32_t a10 = acc[2];
    int32_t a11 = acc[3];
    uint32_t w0;
    uint32_t w1;
    uint32_t x0;
    uint32_t x1;
    for (int32_t n = groups4 / 2; n > 0; --n) {
        KILN_LOAD_PAIR(w0, w1, w);
        KILN_LOAD_PAIR(x0, x1, col);
        a00 = kiln_smlad(w0, x0, a00);
        a01 = kiln_smlad(w0, x1, a01);
        a10 = kiln_smlad(w1, x0, a10);
        a11 = kiln_smlad(w1, x1, a11);
        KILN_LOAD_PAIR(w0, w1, w);
        KILN_LOAD_PAIR(x0, x1, col);
        a00 = kiln_smlad(w0, x0, a00);
        a01 = kiln_smlad(w0, x1, a01);
        a10 = kiln_smlad(w1, x0, a10);
        a11 = kiln_smlad(w1, x1, a11);
        KILN_LOAD_PAIR(w0, w1, w);
        KILN_LOAD_PAIR(x0, x1, col);
        a00 = kiln_smlad(w0, x0, a00);
        a01 = kiln_smlad(w0, x1, a01);
        a10 = kiln_smlad(w1, x0, a10);
        a11 = kiln_smlad(w1, x1, a11);
        KILN_LOAD_PAIR(w0, w1, w);
        KILN_LOAD_PAIR(x0, x1, col);
        a00 = kiln_smlad(w0, x0, a00);
        a01 = kiln_smlad(w0, x1, a01);
        a10 = kiln_smlad(w1, x0, a10);
        a11 = kiln_smlad(w1, x1, a11);
    }
    if (groups4 % 2 != 0) {
        KILN_LOAD_PAIR(w0, w1, w);
        KILN_LOAD_PAIR(x0, x1, col);
        a00 = kiln_smlad(w0, x0, a00);
        a01 = kiln_smlad(w0, x1, a01);
        a10 = kiln_smlad(w1, x0, a10);
        a11 = kiln_smlad(w1, x1, a11);
        KILN_LOAD_PAIR(w0, w1, w);
        KILN_LOAD_PAIR(x0, x1, col);
        a00 = kiln_smlad(w0, x0, a00);
        a01 = kiln_smlad(w0, x1, a01);
        a10 = kiln_smlad(w1, x0, a10);
        a11 = kiln_smlad(w1, x1, a11);
    }
    acc[0] = a00;
    acc[1] = a01;
    acc[2] = a10;
    acc[3] = a11;
}

/* The last, unpaired channel: w holds (A, B) per group. acc[0..1] = px0, px1. */
static void dot_1x2(const uint32_t *w, const uint32_t *col, int32_t groups4, int32_t acc[2])
{
    int32_t a0 = acc[0];
    int32_t a1 = acc[1];
    uint32_t wa;
    uint32_t wb;
    uint32_t x0;
    uint32_t x1;
    for (int32_t n = groups4; n > 0; --n) {
        KILN_LOAD_PAIR(wa, wb, w);
        KILN_LOAD_PAIR(x0, x1, col);
        a0 = kiln_smlad(wa, x0, a0);
        a1 = kiln_smlad(wa, x1, a1);
        KILN_LOAD_PAIR(x0, x1, col);
        a0 = kiln_smlad(wb, x0, a0);
        a1 = kiln_smlad(wb, x1, a1);
    }
    acc[0] = a0;
    acc[1] = a1;
}

/* Every output pixel pair; full_range is a constant in each instantiation. */
static KILN_ALWAYS_INLINE void gemm_pixels(const gather_t *gp, const kiln_requant_fast_t *quant,
                                           const uint32_t *packed, const int32_t *bias,
                                           const kiln_dims_t *output_dims, int8_t *output,
                                           uint32_t *col, int8_t *patch, int32_t out_off,
                                           int32_t act_min, int32_t act_max, int full_range)
{
    const gather_t g = *gp;
    const int32_t out_c = output_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t pixels = output_dims->n * out_h * out_w;
    int32_t b = 0;
    int32_t oy = 0;
    int32_t ox = 0;
    for (int32_t p = 0; p < pixels; p += 2) {
        /* Pixels p and p + 1 (p again when p is the last one). */
        gather(&g, b, oy, ox, patch, col);
        if (++ox == out_w) {
            ox = 0;
            if (++oy == out_h) {
                oy = 0;
                ++b;
            }
        }
        const int paired = p + 1 < pixels;
        if (paired) {
            gather(&g, b, oy, ox, patch, col + 1);
            if (++ox == out_w) {
                ox = 0;
                if (++oy == out_h) {
                    oy = 0;
                    ++b;
                }
            }
        } else {
            for (int32_t i = 0; i < 4 * g.groups4; i += 2) {
                col[i + 1] = col[i];
            }
        }
        int8_t *out0 = output + (size_t)p * (size_t)out_c;
        int8_t *out1 = out0 + out_c;
        const uint32_t *w = packed;
        int32_t oc = 0;
        for (; oc + 2 <= out_c; oc += 2) {
            int32_t acc[4] = {bias[oc], bias[oc], bias[oc + 1], bias[oc + 1]};
            dot_2x2(w, col, g.groups4, acc);
            w += 4 * g.groups4;
            const kiln_requant_fast_t *q0 = &quant[oc];
            const kiln_requant_fast_t *q1 = &quant[oc + 1];
            out0[oc] = kiln_output_fast(acc[0], q0, out_off, act_min, act_max, full_range);
            out0[oc + 1] = kiln_output_fast(acc[2], q1, out_off, act_min, act_max, full_range);
            if (paired) {
                out1[oc] = kiln_output_fast(acc[1], q0, out_off, act_min, act_max, full_range);
                out1[oc + 1] = kiln_output_fast(acc[3], q1, out_off, act_min, act_max, full_range);
            }
        }
        if (oc < out_c) {
            int32_t acc[2] = {bias[oc], bias[oc]};
            dot_1x2(w, col, g.groups4, acc);
            out0[oc] = kiln_output_fast(acc[0], &quant[oc], out_off, act_min, act_max, full_range);
            if (paired) {
                out1[oc] = kiln_output_fast(acc[1], &quant[oc], out_off, act_min, act_max, full_range);
            }
        }
    }
}

kiln_status_t kiln_conv2d_gemm_s8(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                  const kiln_requant_fast_t *quant,
                                  const kiln_dims_t *input_dims, const int8_t *input,
                                  const kiln_dims_t *filter_dims, const int32_t *filter,
                                  const int32_t *bias,
                                  const kiln_dims_t *output_dims, int8_t *output)
{
    if (ctx == NULL || !kiln_conv_params_valid(params) || quant == NULL || input == NULL ||
        filter == NULL || bias == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims)) {
        return KILN_ERR_ARG;
    }
    if (input_dims->n != output_dims->n || filter_dims->n != output_dims->c ||
        filter_dims->c != input_dims->c) {
        return KILN_ERR_ARG;
    }
    const int32_t needed = kiln_conv2d_gemm_s8_get_buffer_size(input_dims, filter_dims);
    if (ctx->buf == NULL || ctx->size < needed || ((uintptr_t)ctx->buf & 3u) != 0 ||
        ((uintptr_t)filter & 3u) != 0) {
        return KILN_ERR_ARG;
    }
    const gather_t g = {
        .input = input,
        .in_h = input_dims->h, .in_w = input_dims->w, .in_c = input_dims->c,
        .k_h = filter_dims->h, .k_w = filter_dims->w,
        .stride_h = params->stride.h, .stride_w = params->stride.w,
        .pad_h = params->padding.h, .pad_w = params->padding.w,
        .dil_h = params->dilation.h, .dil_w = params->dilation.w,
        .depth = filter_dims->h * filter_dims->w * filter_dims->c,
        .groups4 = kiln_round_up4(filter_dims->h * filter_dims->w * filter_dims->c) / 4,
        .pad_value = (int8_t)(-params->input_offset),
    };
    uint32_t *col = (uint32_t *)ctx->buf;
    int8_t *patch = (int8_t *)ctx->buf + 16 * g.groups4;
    const uint32_t *packed = (const uint32_t *)filter;
    const int32_t act_min = params->activation.min;
    const int32_t act_max = params->activation.max;
    if (act_min == -128 && act_max == 127) {
        gemm_pixels(&g, quant, packed, bias, output_dims, output, col, patch,
                    params->output_offset, act_min, act_max, 1);
    } else {
        gemm_pixels(&g, quant, packed, bias, output_dims, output, col, patch,
                    params->output_offset, act_min, act_max, 0);
    }
    return KILN_OK;
}
