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

/* Bytes of one kernel row of the receptive field, KW * C_in, and the same
 * rounded up to whole words (the packed filter's row). */
static int32_t row_bytes4(const kiln_dims_t *filter_dims)
{
    return kiln_round_up4(filter_dims->w * filter_dims->c);
}

int32_t kiln_conv2d_gemm_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                            const kiln_dims_t *filter_dims)
{
    if (input_dims == NULL || filter_dims == NULL) {
        return 0;
    }
    /* Two pixels' columns of int16 pairs (4 bytes per k), then one row of int8. */
    const int32_t row4 = row_bytes4(filter_dims);
    return 4 * filter_dims->h * row4 + row4;
}

/* Where one output pixel's receptive field lies, and what padding reads. */
typedef struct {
    const int8_t *input;        /* batch 0 */
    const int8_t *input_end;    /* one past the last input byte */
    int32_t in_h, in_w, in_c;
    int32_t k_h, k_w;
    int32_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int32_t row_len;            /* k_w * in_c */
    int32_t row4;               /* row_len rounded up to 4 */
    int32_t groups4;            /* k_h * row4 / 4 */
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
 * pixel's first word; its words are col[4g] and col[4g + 2]), one kernel row
 * of row4 values at a time: the packed filter is zero in each row's last
 * row4 - row_len values, so whatever the column holds there only has to be
 * defined. A row inside the image is converted straight from the input (its
 * tail reads the bytes after it, when they are still in the input tensor); a
 * row in the padding is the zero point; any other row goes through `patch`.
 */
static void gather(const gather_t *g, int32_t b, int32_t oy, int32_t ox, int8_t *patch,
                   uint32_t *col)
{
    const int8_t *image = g->input + (size_t)b * (size_t)g->in_h * (size_t)g->in_w *
                                         (size_t)g->in_c;
    const int32_t iy0 = oy * g->stride_h - g->pad_h;
    const int32_t ix0 = ox * g->stride_w - g->pad_w;
    const int row_inside = g->dil_w == 1 && ix0 >= 0 && ix0 + g->k_w - 1 < g->in_w;
    const int32_t n4 = g->row4 / 4;
    const uint32_t pad_pair = kiln_sxtb16((uint8_t)g->pad_value * UINT32_C(0x01010101));
    for (int32_t ky = 0; ky < g->k_h; ++ky) {
        const int32_t iy = iy0 + ky * g->dil_h;
        if (iy < 0 || iy >= g->in_h) {
            col = fill_run(col, pad_pair, n4);
            continue;
        }
        const int8_t *src_row = image + (size_t)iy * (size_t)g->in_w * (size_t)g->in_c;
        if (row_inside) {
            const int8_t *src = src_row + (size_t)ix0 * (size_t)g->in_c;
            if (g->input_end - src >= g->row4) {
                col = extend_run(col, src, n4);
                continue;
            }
        }
        if (g->in_c % 4 == 0) {
            for (int32_t kx = 0; kx < g->k_w; ++kx) {
                const int32_t ix = ix0 + kx * g->dil_w;
                col = (ix < 0 || ix >= g->in_w)
                          ? fill_run(col, pad_pair, g->in_c / 4)
                          : extend_run(col, src_row + (size_t)ix * (size_t)g->in_c, g->in_c / 4);
            }
            continue;       /* row4 == row_len here */
        }
        int8_t *dst = patch;
        for (int32_t kx = 0; kx < g->k_w; ++kx) {
            const int32_t ix = ix0 + kx * g->dil_w;
            for (int32_t c = 0; c < g->in_c; ++c) {
                dst[c] = (ix < 0 || ix >= g->in_w) ? g->pad_value
                                                   : src_row[(size_t)ix * (size_t)g->in_c + c];
            }
            dst += g->in_c;
        }
        for (int32_t i = g->row_len; i < g->row4; ++i) {
            *dst++ = 0;
        }
        col = extend_run(col, patch, n4);
    }
}

/*
 * Channels oc and oc + 1 of both pixels: w is the channel pair's packed block,
 * col the two pixels' interleaved column (groups4 groups of 4 words each).
 * acc[0..3] = (oc, px0), (oc, px1), (oc+1, px0), (oc+1, px1), added to.
 */
static KILN_ALWAYS_INLINE void dot_2x2(const uint32_t *w, const uint32_t *col, int32_t groups4,
                                       int32_t acc[4])
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

/* What every 2x2 block of one layer shares. */
typedef struct {
    const uint32_t *col;            /* the two pixels' column */
    int32_t groups4;
    int32_t out_off;
    int32_t act_min;
    int32_t act_max;
} block_t;

/* Channels oc, oc + 1 (bias, q and the outputs point at oc) of both pixels:
 * dot products, requantization and stores. out1 may equal out0 (one pixel:
 * its column is in both slots, so both write the same values). */
static KILN_ALWAYS_INLINE void block_2x2(const block_t *k, const uint32_t *w, const int32_t *bias,
                                         const kiln_requant_fast_t *q, int8_t *out0, int8_t *out1,
                                         int full_range)
{
    int32_t acc[4] = {bias[0], bias[0], bias[1], bias[1]};
    dot_2x2(w, k->col, k->groups4, acc);
    /* Everything read before the first store: int8 stores may alias it. */
    const kiln_requant_fast_t q0 = q[0];
    const kiln_requant_fast_t q1 = q[1];
    const int32_t off = k->out_off;
    const int32_t lo = k->act_min;
    const int32_t hi = k->act_max;
    const int8_t y00 = kiln_output_fast(acc[0], &q0, off, lo, hi, full_range);
    const int8_t y01 = kiln_output_fast(acc[1], &q0, off, lo, hi, full_range);
    const int8_t y10 = kiln_output_fast(acc[2], &q1, off, lo, hi, full_range);
    const int8_t y11 = kiln_output_fast(acc[3], &q1, off, lo, hi, full_range);
    out1[0] = y01;
    out1[1] = y11;
    out0[0] = y00;
    out0[1] = y10;
}

static KILN_NOINLINE void block_2x2_full(const block_t *k, const uint32_t *w,
                                         const int32_t *bias, const kiln_requant_fast_t *q,
                                         int8_t *out0, int8_t *out1)
{
    block_2x2(k, w, bias, q, out0, out1, 1);
}

static KILN_NOINLINE void block_2x2_clamp(const block_t *k, const uint32_t *w,
                                          const int32_t *bias, const kiln_requant_fast_t *q,
                                          int8_t *out0, int8_t *out1)
{
    block_2x2(k, w, bias, q, out0, out1, 0);
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
    const block_t blk = {col, g.groups4, out_off, act_min, act_max};
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
        int8_t *out1 = paired ? out0 + out_c : out0;
        const uint32_t *w = packed;
        int32_t oc = 0;
        for (; oc + 2 <= out_c; oc += 2) {
            if (full_range) {
                block_2x2_full(&blk, w, bias + oc, quant + oc, out0 + oc, out1 + oc);
            } else {
                block_2x2_clamp(&blk, w, bias + oc, quant + oc, out0 + oc, out1 + oc);
            }
            w += 4 * g.groups4;
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
        .input_end = input + (size_t)input_dims->n * (size_t)input_dims->h *
                                 (size_t)input_dims->w * (size_t)input_dims->c,
        .in_h = input_dims->h, .in_w = input_dims->w, .in_c = input_dims->c,
        .k_h = filter_dims->h, .k_w = filter_dims->w,
        .stride_h = params->stride.h, .stride_w = params->stride.w,
        .pad_h = params->padding.h, .pad_w = params->padding.w,
        .dil_h = params->dilation.h, .dil_w = params->dilation.w,
        .row_len = filter_dims->w * filter_dims->c,
        .row4 = row_bytes4(filter_dims),
        .groups4 = filter_dims->h * row_bytes4(filter_dims) / 4,
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
