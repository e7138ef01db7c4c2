/*
 * conv2d_gemm.c - CONV_2D as im2col + a GEMM on int16 pairs (SMLAD on cores
 * with the DSP extension, plain C elsewhere), in three variants that differ
 * only in the filter's packing and the block of outputs one pass over a
 * column computes (layouts in conv.h, primitives in conv_dsp.h):
 *
 *   kiln_conv2d_gemm_s8      2 channels x 2 pixels, filter as int16 pairs;
 *   kiln_conv2d_gemm_oc4_s8  4 channels x 2 pixels, filter as int16 pairs;
 *   kiln_conv2d_gemm_w8_s8   2 channels x 2 pixels, filter kept int8;
 *   kiln_conv2d_gemm_p8_s8   4 channels x 2 pixels, filter as int8 channel
 *                            pairs (conv_dsp.h).
 *
 * Per pair of output pixels the receptive fields are gathered into scratch
 * as int16 pairs interleaved pixel by pixel, so one LDRD fetches the same
 * pair of k for both pixels; the filter was packed the same way at compile
 * time (the channels of a block side by side). Per group of four k the inner
 * loops do:
 *
 *   2x2 int16: 2 LDM,   8 SMLAD                 (16 MACs): on DSP cores one
 *              asm routine runs every channel pair of the pixel pair
 *              (pairs_2x2), the requantization included; 4 LDRD in C
 *   4x2 int16: 6 LDRD, 16 SMLAD                 (32 MACs): the column's loads
 *              are shared by twice the channels, at the price of 8 live
 *              accumulators (all the registers there are: see dot_4x2)
 *   2x2 int8:  3 LDRD,  4 SXTB16, 8 SMLAD       (16 MACs): half the filter
 *              bytes in flash, widened at run time
 *   4x2 p8:    4 LDRD,  4 SXTB16, 16 SMLAD      (32 MACs): int8 filter, each
 *              word widened once for both pixels and used raw as well
 *
 * Channels past the last whole block take the smaller blocks (4x2: one 2x2
 * block, then a single channel), packed in the same order at compile time.
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

/* The three variants share the column and its scratch. */
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

int32_t kiln_conv2d_gemm_oc4_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                                const kiln_dims_t *filter_dims)
{
    return kiln_conv2d_gemm_s8_get_buffer_size(input_dims, filter_dims);
}

int32_t kiln_conv2d_gemm_w8_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                               const kiln_dims_t *filter_dims)
{
    return kiln_conv2d_gemm_s8_get_buffer_size(input_dims, filter_dims);
}

int32_t kiln_conv2d_gemm_p8_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                               const kiln_dims_t *filter_dims)
{
    return kiln_conv2d_gemm_s8_get_buffer_size(input_dims, filter_dims);
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
    int32_t out_h, out_w;
    int pointwise;              /* 1x1, stride 1, unpadded, whole words of channels */
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

/* extend_run for both pixels of the pair at once (src0 into col[4g] and
 * col[4g + 2], src1 into col[4g + 1] and col[4g + 3]): half the loop trips
 * and no per-pixel gather of a pointwise layer (gemm_pixels). */
static void extend_pair(uint32_t *col, const int8_t *src0, const int8_t *src1, int32_t n)
{
    for (int32_t i = 0; i < n; ++i) {
        const uint32_t v0 = kiln_load_s8x4(src0 + 4 * i);
        const uint32_t v1 = kiln_load_s8x4(src1 + 4 * i);
        col[0] = kiln_sxtb16(v0);
        col[1] = kiln_sxtb16(v1);
        col[2] = kiln_sxtb16_ror8(v0);
        col[3] = kiln_sxtb16_ror8(v1);
        col += 4;
    }
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
static KILN_NOINLINE void gather(const gather_t *g, int32_t b, int32_t oy, int32_t ox,
                                 int8_t *patch, uint32_t *col)
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

/* The column of output pixels p and p + 1 (p again when !paired), one copy
 * for every variant. pos is pixel p's (b, oy, ox), advanced past them. A
 * pointwise layer's pixel p is input pixel p, widened (extend_pair). */
static KILN_NOINLINE void gather_pair(const gather_t *g, int32_t p, int paired, int32_t pos[3],
                                      int8_t *patch, uint32_t *col)
{
    if (g->pointwise) {
        const int8_t *src = g->input + (size_t)p * (size_t)g->in_c;
        extend_pair(col, src, paired ? src + g->in_c : src, g->in_c / 4);
        return;
    }
    for (int32_t i = 0; i < 2; ++i) {
        if (i == 0 || paired) {
            gather(g, pos[0], pos[1], pos[2], patch, col + i);
            if (++pos[2] == g->out_w) {
                pos[2] = 0;
                if (++pos[1] == g->out_h) {
                    pos[1] = 0;
                    ++pos[0];
                }
            }
        }
    }
    if (!paired) {
        for (int32_t i = 0; i < 4 * g->groups4; i += 2) {
            col[i + 1] = col[i];
        }
    }
}

/* extend_pair for the int16-pair kernels' gather (gather_pair_rows), the
 * same words: on DSP cores each group's four words are two STRD, and the
 * loop runs two groups a trip (an odd first group alone) and ends on the
 * column pointer (GCC stores the words one by one and counts the trips).
 * n >= 1; the loads may be unaligned (LDR allows it, LDRD would not). */
static KILN_ALWAYS_INLINE uint32_t *extend_pair_s16(uint32_t *col, const int8_t *src0,
                                                    const int8_t *src1, int32_t n)
{
    uint32_t *const end = col + 4 * n;
#if defined(__ARM_FEATURE_DSP)
    uint32_t v0;
    uint32_t v1;
    uint32_t e0;
    uint32_t e1;
#define EXTEND_PAIR_ASM                                                          \
    "ldr %[v0], [%[s0]], #4\n\t"                                                \
    "ldr %[v1], [%[s1]], #4\n\t"                                                \
    "sxtb16 %[e0], %[v0]\n\t"                                                   \
    "sxtb16 %[e1], %[v1]\n\t"                                                   \
    "sxtb16 %[v0], %[v0], ror #8\n\t"                                           \
    "sxtb16 %[v1], %[v1], ror #8\n\t"                                           \
    "strd %[e0], %[e1], [%[col]], #8\n\t"                                       \
    "strd %[v0], %[v1], [%[col]], #8\n\t"
    __asm__ volatile("tst %[n], #1\n\t"
                     "beq 2f\n\t"
                     EXTEND_PAIR_ASM
                     "2:\n\t"
                     "cmp %[col], %[end]\n\t"
                     "beq 3f\n"
                     "1:\n\t"
                     EXTEND_PAIR_ASM EXTEND_PAIR_ASM
                     "cmp %[col], %[end]\n\t"
                     "bne 1b\n"
                     "3:"
                     : [col] "+r"(col), [s0] "+r"(src0), [s1] "+r"(src1), [v0] "=&r"(v0),
                       [v1] "=&r"(v1), [e0] "=&r"(e0), [e1] "=&r"(e1)
                     : [end] "r"(end), [n] "r"(n)
                     : "cc", "memory");     /* reads src0 and src1, writes the column */
#undef EXTEND_PAIR_ASM
#else
    do {
        const uint32_t v0 = kiln_load_s8x4(src0);
        const uint32_t v1 = kiln_load_s8x4(src1);
        src0 += 4;
        src1 += 4;
        col[0] = kiln_sxtb16(v0);
        col[1] = kiln_sxtb16(v1);
        col[2] = kiln_sxtb16_ror8(v0);
        col[3] = kiln_sxtb16_ror8(v1);
        col += 4;
    } while (col != end);
#endif
    return col;
}

/*
 * One kernel row (iy, from ix0) of one pixel into its column slot (the words
 * slot[4g] and slot[4g + 2]), as gather converts each row; returns the slot
 * past the row.
 */
static uint32_t *gather_row(const gather_t *g, const int8_t *image, int32_t iy, int32_t ix0,
                            int8_t *patch, uint32_t *slot, uint32_t pad_pair)
{
    const int32_t n4 = g->row4 / 4;
    if (iy < 0 || iy >= g->in_h) {
        return fill_run(slot, pad_pair, n4);
    }
    const int8_t *src_row = image + (size_t)iy * (size_t)g->in_w * (size_t)g->in_c;
    if (g->dil_w == 1 && ix0 >= 0 && ix0 + g->k_w - 1 < g->in_w) {
        const int8_t *src = src_row + (size_t)ix0 * (size_t)g->in_c;
        if (g->input_end - src >= g->row4) {
            return extend_run(slot, src, n4);
        }
    }
    if (g->in_c % 4 == 0) {
        for (int32_t kx = 0; kx < g->k_w; ++kx) {
            const int32_t ix = ix0 + kx * g->dil_w;
            slot = (ix < 0 || ix >= g->in_w)
                       ? fill_run(slot, pad_pair, g->in_c / 4)
                       : extend_run(slot, src_row + (size_t)ix * (size_t)g->in_c, g->in_c / 4);
        }
        return slot;        /* row4 == row_len here */
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
    return extend_run(slot, patch, n4);
}

/*
 * gather_pair for the int16-pair kernels (oc4): when both pixels of the pair
 * lie in one output row, a layer of whole words of channels (in_c % 4 == 0,
 * so row4 == row_len) and no horizontal dilation, their kernel rows come from
 * the same input row: each row is converted for both pixels in one pass
 * (extend_pair_s16), a padding row filled for both, and only a row reaching
 * into the left or right padding goes channel run by channel run per pixel.
 * A pointwise layer's pair is extend_pair_s16's; a pair that straddles two
 * output rows (or a lone last pixel) is gather_pair's, and so is every pair of
 * a layer gemm_pixels does not send here. The column is the same word for word.
 */
static KILN_NOINLINE void gather_pair_rows(const gather_t *g, int32_t p, int paired,
                                           int32_t pos[3], int8_t *patch, uint32_t *col)
{
    if (g->pointwise) {
        const int8_t *src = g->input + (size_t)p * (size_t)g->in_c;
        extend_pair_s16(col, src, paired ? src + g->in_c : src, g->in_c / 4);
        return;
    }
    const int32_t ox = pos[2];
    if (!paired || ox + 1 >= g->out_w) {
        gather_pair(g, p, paired, pos, patch, col);
        return;
    }
    const int32_t in_c = g->in_c;
    const int8_t *image = g->input + (size_t)pos[0] * (size_t)g->in_h * (size_t)g->in_w *
                                         (size_t)in_c;
    const int32_t iy0 = pos[1] * g->stride_h - g->pad_h;
    const int32_t ix0 = ox * g->stride_w - g->pad_w;
    const int32_t ix1 = ix0 + g->stride_w;
    const int inside = ix0 >= 0 && ix1 + g->k_w - 1 < g->in_w;
    const int32_t n4 = g->row4 / 4;
    const uint32_t pad_pair = kiln_sxtb16((uint8_t)g->pad_value * UINT32_C(0x01010101));
    pos[2] += 2;
    if (pos[2] == g->out_w) {
        pos[2] = 0;
        if (++pos[1] == g->out_h) {
            pos[1] = 0;
            ++pos[0];
        }
    }
    for (int32_t ky = 0; ky < g->k_h; ++ky) {
        const int32_t iy = iy0 + ky * g->dil_h;
        if (iy < 0 || iy >= g->in_h) {
            for (int32_t i = 0; i < 4 * n4; ++i) {
                col[i] = pad_pair;
            }
            col += 4 * n4;
            continue;
        }
        const int8_t *src_row = image + (size_t)iy * (size_t)g->in_w * (size_t)in_c;
        if (inside) {
            col = extend_pair_s16(col, src_row + (size_t)ix0 * (size_t)in_c,
                                  src_row + (size_t)ix1 * (size_t)in_c, n4);
            continue;
        }
        for (int32_t i = 0; i < 2; ++i) {
            uint32_t *slot = col + i;
            const int32_t ixp = i == 0 ? ix0 : ix1;
            for (int32_t kx = 0; kx < g->k_w; ++kx) {
                const int32_t ix = ixp + kx;
                slot = (ix < 0 || ix >= g->in_w)
                           ? fill_run(slot, pad_pair, in_c / 4)
                           : extend_run(slot, src_row + (size_t)ix * (size_t)in_c, in_c / 4);
            }
        }
        col += 4 * n4;
    }
}

/*
 * gather_pair for the int16-pair kernels' other layers (oc4: channels not in
 * whole words, such as a first layer's three, with rows of two words or
 * more), the same column word for word: a kernel row that lies inside the
 * image for both pixels (and whose row4 bytes, tail included, lie inside the
 * input) is converted for both in one pass (extend_pair_s16); any other row
 * goes per pixel as gather converts it (gather_row). The pixels may lie in
 * different output rows; a lone last pixel is gather_pair's.
 */
static KILN_NOINLINE void gather_pair_any(const gather_t *g, int32_t p, int paired,
                                           int32_t pos[3], int8_t *patch, uint32_t *col)
{
    if (!paired) {
        gather_pair(g, p, paired, pos, patch, col);
        return;
    }
    const size_t image_size = (size_t)g->in_h * (size_t)g->in_w * (size_t)g->in_c;
    const size_t row_size = (size_t)g->in_w * (size_t)g->in_c;
    const int8_t *image[2];
    int32_t iy0[2];
    int32_t ix0[2];
    int inside = g->dil_w == 1;     /* both pixels' rows inside horizontally */
    for (int32_t i = 0; i < 2; ++i) {
        image[i] = g->input + (size_t)pos[0] * image_size;
        iy0[i] = pos[1] * g->stride_h - g->pad_h;
        ix0[i] = pos[2] * g->stride_w - g->pad_w;
        inside = inside && ix0[i] >= 0 && ix0[i] + g->k_w - 1 < g->in_w;
        if (++pos[2] == g->out_w) {
            pos[2] = 0;
            if (++pos[1] == g->out_h) {
                pos[1] = 0;
                ++pos[0];
            }
        }
    }
    const int32_t n4 = g->row4 / 4;
    const uint32_t pad_pair = kiln_sxtb16((uint8_t)g->pad_value * UINT32_C(0x01010101));
    for (int32_t ky = 0; ky < g->k_h; ++ky) {
        const int32_t iy_a = iy0[0] + ky * g->dil_h;
        const int32_t iy_b = iy0[1] + ky * g->dil_h;
        if (inside && iy_a >= 0 && iy_a < g->in_h && iy_b >= 0 && iy_b < g->in_h) {
            const int8_t *src_a = image[0] + (size_t)iy_a * row_size +
                                  (size_t)ix0[0] * (size_t)g->in_c;
            const int8_t *src_b = image[1] + (size_t)iy_b * row_size +
                                  (size_t)ix0[1] * (size_t)g->in_c;
            if (g->input_end - src_a >= g->row4 && g->input_end - src_b >= g->row4) {
                col = extend_pair_s16(col, src_a, src_b, n4);
                continue;
            }
        }
        gather_row(g, image[0], iy_a, ix0[0], patch, col, pad_pair);
        gather_row(g, image[1], iy_b, ix0[1], patch, col + 1, pad_pair);
        col += 4 * n4;
    }
}

/*
 * gather of one pixel for layers whose kernel rows are one word (row4 == 4:
 * k_w * in_c <= 4) without horizontal dilation, such as KWS's first layer
 * (10x4 on one channel), the same column word for word. Which bytes j of a
 * row lie in the image (0 <= lo + j < row_bytes, lo the row's first byte
 * relative to the image row) is the same for every row of the pixel, so each
 * row inside the image vertically is one unaligned load, shifted past the
 * left padding, masked and filled with the zero point in the padding (and
 * past row_len, where the packed filter is zero). A load that would run past
 * the input (its last row) goes byte by byte; a window wholly in the
 * horizontal padding is the zero point.
 */
static void gather_word_rows(const gather_t *g, int32_t b, int32_t oy, int32_t ox,
                             uint32_t *slot)
{
    const int32_t row_bytes = g->in_w * g->in_c;
    const int32_t lo = (ox * g->stride_w - g->pad_w) * g->in_c;
    const int32_t k_h = g->k_h;
    const int32_t in_h = g->in_h;
    const int32_t dil_h = g->dil_h;
    const uint32_t pad4 = (uint8_t)g->pad_value * UINT32_C(0x01010101);
    const uint32_t pad_a = kiln_sxtb16(pad4);
    const uint32_t pad_b = kiln_sxtb16_ror8(pad4);
    uint32_t keep = 0;
    for (int32_t j = 0; j < g->row_len; ++j) {
        if (lo + j >= 0 && lo + j < row_bytes) {
            keep |= UINT32_C(0xFF) << (8 * j);
        }
    }
    /* The rows inside the image vertically: ky in [ky0, ky1). */
    const int32_t iy0 = oy * g->stride_h - g->pad_h;
    int32_t ky0 = 0;
    int32_t ky1 = 0;
    if (keep != 0) {
        ky0 = iy0 < 0 ? (-iy0 + dil_h - 1) / dil_h : 0;
        ky1 = in_h - iy0 > 0 ? (in_h - iy0 + dil_h - 1) / dil_h : 0;
        ky1 = ky1 < k_h ? ky1 : k_h;
        ky0 = ky0 < ky1 ? ky0 : ky1;
    }
    int32_t ky = 0;
    for (; ky < ky0; ++ky) {
        slot[0] = pad_a;
        slot[2] = pad_b;
        slot += 4;
    }
    if (ky < ky1) {
        /* keep != 0: lo > -4, so the shift stays below 32; off < row_bytes. */
        const int32_t off = lo > 0 ? lo : 0;
        const uint32_t shl = lo < 0 ? 8u * (uint32_t)-lo : 0u;
        const uint32_t fill = pad4 & ~keep;
        const size_t step = (size_t)dil_h * (size_t)row_bytes;
        const int8_t *row = g->input + (size_t)b * (size_t)in_h * (size_t)row_bytes +
                            (size_t)(iy0 + ky * dil_h) * (size_t)row_bytes;
        const int8_t *const input_end = g->input_end;
        for (; ky < ky1; ++ky) {
            uint32_t v;
            if (input_end - (row + off) >= 4) {
                v = ((kiln_load_s8x4(row + off) << shl) & keep) | fill;
            } else {
                v = fill;
                for (int32_t j = 0; j < 4; ++j) {
                    if ((keep >> (8 * j)) & 0xFFu) {
                        v |= (uint32_t)(uint8_t)row[lo + j] << (8 * j);
                    }
                }
            }
            slot[0] = kiln_sxtb16(v);
            slot[2] = kiln_sxtb16_ror8(v);
            slot += 4;
            row += step;
        }
    }
    for (; ky < k_h; ++ky) {
        slot[0] = pad_a;
        slot[2] = pad_b;
        slot += 4;
    }
}

/* gather_pair for one-word kernel rows (gather_word_rows), the same column. */
static KILN_NOINLINE void gather_pair_words(const gather_t *g, int paired, int32_t pos[3],
                                            uint32_t *col)
{
    for (int32_t i = 0; i < 2; ++i) {
        if (i == 0 || paired) {
            gather_word_rows(g, pos[0], pos[1], pos[2], col + i);
            if (++pos[2] == g->out_w) {
                pos[2] = 0;
                if (++pos[1] == g->out_h) {
                    pos[1] = 0;
                    ++pos[0];
                }
            }
        }
    }
    if (!paired) {
        for (int32_t i = 0; i < 4 * g->groups4; i += 2) {
            col[i + 1] = col[i];
        }
    }
}

/* The variants (conv.h): how the filter is packed and which blocks run. */
enum { GEMM_2X2, GEMM_4X2, GEMM_W8, GEMM_P8 };

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
#define GEMM_2X2_PAIR()                                                          \
    do {                                                                         \
        KILN_LOAD_PAIR(w0, w1, w);                                               \
        KILN_LOAD_PAIR(x0, x1, col);                                             \
        a00 = kiln_smlad(w0, x0, a00);                                           \
        a01 = kiln_smlad(w0, x1, a01);                                           \
        a10 = kiln_smlad(w1, x0, a10);                                           \
        a11 = kiln_smlad(w1, x1, a11);                                           \
    } while (0)
    for (int32_t n = groups4 / 2; n > 0; --n) {     /* two groups per trip */
        GEMM_2X2_PAIR();
        GEMM_2X2_PAIR();
        GEMM_2X2_PAIR();
        GEMM_2X2_PAIR();
    }
    if (groups4 % 2 != 0) {
        GEMM_2X2_PAIR();
        GEMM_2X2_PAIR();
    }
#undef GEMM_2X2_PAIR
    acc[0] = a00;
    acc[1] = a01;
    acc[2] = a10;
    acc[3] = a11;
}

/*
 * Channels oc .. oc + 3 of both pixels: w is the block (per group the A words
 * of the four channels, then their B words), col as in dot_2x2.
 * acc[2 * c + p] = (oc + c, pixel p), added to.
 *
 * The eight accumulators, two column words, two filter words and both
 * pointers need fourteen registers, all Cortex-M has. Written in C, GCC
 * rotates the accumulators through the unrolled body and spills two of them
 * and the trip count (7 loads/stores per two groups: the whole gain over 2x2
 * gone), and an asm block with register operands cannot be compiled when r7
 * is the frame pointer (-O0, -fno-omit-frame-pointer). So on DSP cores the
 * whole loop is asm on fixed registers (dot_4x2_run) that saves and restores
 * every register it uses beyond its operands (r7 included): w in r0, col in
 * r1, the column's end in r2, acc in r3 and the loop's entry offset in r12 on
 * entry; accumulators in r4-r11; column words in r2, r3 and filter words in
 * r12, lr; the end pointer and acc wait on the stack. The plain C twin
 * (dot_4x2) computes the same sums.
 */
#define GEMM_4X2_PAIR(a)                                                         \
    do {                                                                         \
        KILN_LOAD_PAIR(x0, x1, col);                                             \
        KILN_LOAD_PAIR(w0, w1, w);                                               \
        (a)[0] = kiln_smlad(w0, x0, (a)[0]);                                     \
        (a)[1] = kiln_smlad(w0, x1, (a)[1]);                                     \
        (a)[2] = kiln_smlad(w1, x0, (a)[2]);                                     \
        (a)[3] = kiln_smlad(w1, x1, (a)[3]);                                     \
        KILN_LOAD_PAIR(w0, w1, w);                                               \
        (a)[4] = kiln_smlad(w0, x0, (a)[4]);                                     \
        (a)[5] = kiln_smlad(w0, x1, (a)[5]);                                     \
        (a)[6] = kiln_smlad(w1, x0, (a)[6]);                                     \
        (a)[7] = kiln_smlad(w1, x1, (a)[7]);                                     \
    } while (0)

#if defined(__ARM_FEATURE_DSP)
/* One pair of k (GEMM_4X2_PAIR) on the registers described above. */
#define GEMM_4X2_PAIR_ASM                                                        \
    "ldrd r2, r3, [r1], #8\n\t"                                                  \
    "ldrd r12, lr, [r0], #8\n\t"                                                 \
    "smlad r4, r12, r2, r4\n\t"                                                  \
    "smlad r5, r12, r3, r5\n\t"                                                  \
    "smlad r6, lr, r2, r6\n\t"                                                   \
    "smlad r7, lr, r3, r7\n\t"                                                   \
    "ldrd r12, lr, [r0], #8\n\t"                                                 \
    "smlad r8, r12, r2, r8\n\t"                                                  \
    "smlad r9, r12, r3, r9\n\t"                                                  \
    "smlad r10, lr, r2, r10\n\t"                                                 \
    "smlad r11, lr, r3, r11\n\t"
#endif

#if !defined(__ARM_FEATURE_DSP)
/* The plain C twin of dot_4x2_run's loop (cores without DSP, host builds). */
static void dot_4x2(const uint32_t *w, const uint32_t *col, int32_t groups4, int32_t acc[8])
{
    uint32_t w0;
    uint32_t w1;
    uint32_t x0;
    uint32_t x1;
    int32_t a[8];       /* in registers: stores to acc could alias w and col */
    memcpy(a, acc, sizeof a);
    for (int32_t n = groups4; n > 0; --n) {
        GEMM_4X2_PAIR(a);
        GEMM_4X2_PAIR(a);
    }
    memcpy(acc, a, sizeof a);
}
#endif
#undef GEMM_4X2_PAIR

/*
 * dot_4x2 for a run of blocks (blocks_4x2): the filter pointer after the
 * block is returned, and the loop runs eight groups a trip, the first trip
 * entered part-way at the group that leaves groups4 % 8 of them (a computed
 * BX, as dot_p8_4x2: every instruction of GEMM_4X2_PAIR_ASM is 32-bit, so a
 * group is 88 bytes, which the .if below checks), so no tail code follows the
 * loop and its end check is three instructions per eight groups. entry is
 * 88 * ((8 - groups4 % 8) % 8) + 1 (+ 1: Thumb), end the column's end.
 * Registers as dot_4x2's.
 */
static KILN_NOINLINE const uint32_t *dot_4x2_run(const uint32_t *w, const uint32_t *col,
                                                 const uint32_t *end, uint32_t entry,
                                                 int32_t acc[8])
{
#if defined(__ARM_FEATURE_DSP)
    register const uint32_t *w_ __asm__("r0") = w;
    register const uint32_t *col_ __asm__("r1") = col;
    register const uint32_t *end_ __asm__("r2") = end;
    register int32_t *acc_ __asm__("r3") = acc;
    register uint32_t entry_ __asm__("r12") = entry;
    __asm__ volatile("push {r2-r12, lr}\n\t"
                     "ldm r3, {r4-r11}\n\t"
                     "adr r2, 1f\n\t"
                     "add r2, r2, r12\n\t"
                     "bx r2\n\t"
                     ".p2align 2\n"
                     "1:\n\t"
                     GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM
                     GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM
                     GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM
                     GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM GEMM_4X2_PAIR_ASM
                     "2:\n\t"
                     ".if (2b - 1b) != 704\n\t"
                     ".error \"GEMM_4X2_PAIR_ASM is not 44 bytes\"\n\t"
                     ".endif\n\t"
                     "ldr r2, [sp]\n\t"
                     "cmp r1, r2\n\t"
                     "bne 1b\n\t"
                     "ldr r3, [sp, #4]\n\t"
                     "stm r3, {r4-r11}\n\t"
                     "pop {r2-r12, lr}"
                     : "+r"(w_), "+r"(col_)
                     : "r"(end_), "r"(acc_), "r"(entry_)
                     : "cc", "memory");     /* reads w and col, updates acc */
    return w_;
#else
    (void)entry;
    dot_4x2(w, col, (int32_t)(end - col) / 4, acc);
    return w + 2 * (end - col);     /* per group: four words of column, eight of filter */
#endif
}

/*
 * Channel pairs (c0, c1) and (c2, c3) of both pixels, int8 pair filter
 * (conv_dsp.h): w is the block, per group the words [A of (c0, c1)][A of
 * (c2, c3)][B of (c0, c1)][B of (c2, c3)]; col as in dot_2x2. acc, added to:
 * [raw (c0, c1) px0, px1][even = c0 px0, px1][raw (c2, c3) px0, px1][c2 px0, px1].
 * Registers as dot_4x2's (the same frame, see there), with each filter word
 * widened in place after its raw use.
 */
#define GEMM_P8_PAIR(a)                                                          \
    do {                                                                         \
        KILN_LOAD_PAIR(x0, x1, col);                                             \
        KILN_LOAD_PAIR(w0, w1, w);                                               \
        (a)[0] = kiln_smlad_wrap(w0, x0, (a)[0]);                                \
        (a)[1] = kiln_smlad_wrap(w0, x1, (a)[1]);                                \
        w0 = kiln_sxtb16(w0);                                                    \
        (a)[2] = kiln_smlad(w0, x0, (a)[2]);                                     \
        (a)[3] = kiln_smlad(w0, x1, (a)[3]);                                     \
        (a)[4] = kiln_smlad_wrap(w1, x0, (a)[4]);                                \
        (a)[5] = kiln_smlad_wrap(w1, x1, (a)[5]);                                \
        w1 = kiln_sxtb16(w1);                                                    \
        (a)[6] = kiln_smlad(w1, x0, (a)[6]);                                     \
        (a)[7] = kiln_smlad(w1, x1, (a)[7]);                                     \
    } while (0)

#if defined(__ARM_FEATURE_DSP)
#define GEMM_P8_PAIR_ASM                                                         \
    "ldrd r2, r3, [r1], #8\n\t"                                                  \
    "ldrd r12, lr, [r0], #8\n\t"                                                 \
    "smlad r4, r12, r2, r4\n\t"                                                  \
    "smlad r5, r12, r3, r5\n\t"                                                  \
    "sxtb16 r12, r12\n\t"                                                        \
    "smlad r6, r12, r2, r6\n\t"                                                  \
    "smlad r7, r12, r3, r7\n\t"                                                  \
    "smlad r8, lr, r2, r8\n\t"                                                   \
    "smlad r9, lr, r3, r9\n\t"                                                   \
    "sxtb16 lr, lr\n\t"                                                          \
    "smlad r10, lr, r2, r10\n\t"                                                 \
    "smlad r11, lr, r3, r11\n\t"
#endif

static KILN_NOINLINE void dot_p8_4x2(const uint32_t *w, const uint32_t *col, int32_t groups4,
                                     int32_t acc[8])
{
#if defined(__ARM_FEATURE_DSP)
    /* Eight groups a trip (the trip's end check is three instructions). The
     * first trip enters the loop body part-way, at the group that leaves
     * groups4 % 8 of them (a computed BX: every instruction of
     * GEMM_P8_PAIR_ASM is 32-bit, so a group is 96 bytes, which the .if
     * below checks), so no tail code follows the loop. groups4 >= 1: the
     * dims checks keep every dimension positive. */
    const uint32_t skip = (8u - (uint32_t)groups4 % 8u) % 8u;
    register const uint32_t *w_ __asm__("r0") = w;
    register const uint32_t *col_ __asm__("r1") = col;
    register const uint32_t *end_ __asm__("r2") = col + 4u * (uint32_t)groups4;
    register int32_t *acc_ __asm__("r3") = acc;
    register uint32_t entry_ __asm__("r12") = 96u * skip + 1u;    /* + 1: Thumb */
    __asm__ volatile("push {r2-r12, lr}\n\t"
                     "ldm r3, {r4-r11}\n\t"
                     "adr r2, 1f\n\t"
                     "add r2, r2, r12\n\t"
                     "bx r2\n\t"
                     ".p2align 2\n"
                     "1:\n\t"
                     GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM
                     GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM
                     GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM
                     GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM GEMM_P8_PAIR_ASM
                     "2:\n\t"
                     ".if (2b - 1b) != 768\n\t"
                     ".error \"GEMM_P8_PAIR_ASM is not 48 bytes\"\n\t"
                     ".endif\n\t"
                     "ldr r2, [sp]\n\t"
                     "cmp r1, r2\n\t"
                     "bne 1b\n\t"
                     "ldr r3, [sp, #4]\n\t"
                     "stm r3, {r4-r11}\n\t"
                     "pop {r2-r12, lr}"
                     : "+r"(w_), "+r"(col_)
                     : "r"(end_), "r"(acc_), "r"(entry_)
                     : "cc", "memory");     /* reads w and col, updates acc */
#else
    uint32_t w0;
    uint32_t w1;
    uint32_t x0;
    uint32_t x1;
    int32_t a[8];
    memcpy(a, acc, sizeof a);
    for (int32_t n = groups4; n > 0; --n) {
        GEMM_P8_PAIR(a);
        GEMM_P8_PAIR(a);
    }
    memcpy(acc, a, sizeof a);
#endif
}
#undef GEMM_P8_PAIR

/* One channel pair (c0, c1) of both pixels, int8 pair filter: w holds [A][B]
 * per group. acc as the first four of dot_p8_4x2's, added to. */
static void dot_p8_2x2(const uint32_t *w, const uint32_t *col, int32_t groups4, int32_t acc[4])
{
    int32_t r0 = acc[0];
    int32_t r1 = acc[1];
    int32_t e0 = acc[2];
    int32_t e1 = acc[3];
    uint32_t x0;
    uint32_t x1;
    for (int32_t n = 2 * groups4; n > 0; --n) {
        const uint32_t raw = *w++;
        KILN_LOAD_PAIR(x0, x1, col);
        r0 = kiln_smlad_wrap(raw, x0, r0);
        r1 = kiln_smlad_wrap(raw, x1, r1);
        const uint32_t even = kiln_sxtb16(raw);
        e0 = kiln_smlad(even, x0, e0);
        e1 = kiln_smlad(even, x1, e1);
    }
    acc[0] = r0;
    acc[1] = r1;
    acc[2] = e0;
    acc[3] = e1;
}

/*
 * Channels oc and oc + 1 with the filter kept int8: per group, one word per
 * channel holding its four k (k0 in the low byte), so SXTB16 gives the pair
 * (k0, k2) and SXTB16 ror 8 the pair (k1, k3), the column's A and B.
 * acc as in dot_2x2.
 */
static KILN_ALWAYS_INLINE void dot_w8_2x2(const uint32_t *w, const uint32_t *col,
                                          int32_t groups4, int32_t acc[4])
{
    int32_t a00 = acc[0];
    int32_t a01 = acc[1];
    int32_t a10 = acc[2];
    int32_t a11 = acc[3];
    uint32_t r0;
    uint32_t r1;
    uint32_t w0;
    uint32_t w1;
    uint32_t x0;
    uint32_t x1;
#define GEMM_W8_GROUP()                                                          \
    do {                                                                         \
        KILN_LOAD_PAIR(r0, r1, w);                                               \
        w0 = kiln_sxtb16(r0);                                                    \
        w1 = kiln_sxtb16(r1);                                                    \
        KILN_LOAD_PAIR(x0, x1, col);                                             \
        a00 = kiln_smlad(w0, x0, a00);                                           \
        a01 = kiln_smlad(w0, x1, a01);                                           \
        a10 = kiln_smlad(w1, x0, a10);                                           \
        a11 = kiln_smlad(w1, x1, a11);                                           \
        w0 = kiln_sxtb16_ror8(r0);                                               \
        w1 = kiln_sxtb16_ror8(r1);                                               \
        KILN_LOAD_PAIR(x0, x1, col);                                             \
        a00 = kiln_smlad(w0, x0, a00);                                           \
        a01 = kiln_smlad(w0, x1, a01);                                           \
        a10 = kiln_smlad(w1, x0, a10);                                           \
        a11 = kiln_smlad(w1, x1, a11);                                           \
    } while (0)
    for (int32_t n = groups4 / 2; n > 0; --n) {     /* two groups per trip */
        GEMM_W8_GROUP();
        GEMM_W8_GROUP();
    }
    if (groups4 % 2 != 0) {
        GEMM_W8_GROUP();
    }
#undef GEMM_W8_GROUP
    acc[0] = a00;
    acc[1] = a01;
    acc[2] = a10;
    acc[3] = a11;
}

#if defined(__ARM_FEATURE_DSP)
/*
 * Every whole channel pair of one pixel pair, int16-pair filter, in one asm
 * routine (pairs_2x2_full, pairs_2x2_clamp): dot products, requantization
 * and stores, the state between blocks kept in a frame on the stack. Per
 * group of four k, one LDM of the block's four filter words [A c0][A c1]
 * [B c0][B c1], one LDM of the column's four [A px0][A px1][B px0][B px1]
 * and eight SMLAD: ten instructions for 16 MACs, where the 4x2 block's LDRD
 * take eleven for eight SMLAD (its eight accumulators leave four registers
 * for the data: two LDRD of the filter and one of the column per pair of k).
 * The loop runs sixteen groups a trip, the first trip entered part-way (as
 * dot_4x2_run: every instruction of a group is 32-bit, 40 bytes a group,
 * which the .if checks), so no tail follows it.
 * The requantization is kiln_dw_output's (conv_dsp.h), six instructions an
 * output with its store: SMMLAR by 2 * multiplier - 2^32, ADD of the sign,
 * ASR by right_shift, ADD of 2 * output_offset + 1, SSAT with its halving
 * shift, STRB with write-back; the same value as kiln_output_fast for every
 * kiln_requant_fast_t channel conv.h allows (multiplier in [2^30, 2^31),
 * right_shift in [1, 30]). A clamping layer then clamps to its range (two
 * compares and conditional moves).
 * The struct is the frame's first twelve words, in the order the asm reads them.
 */
typedef struct {
    const kiln_requant_fast_t *q;   /* [0]  the block's first channel */
    int8_t *out0;                   /* [4]  pixel p's output at that channel */
    int8_t *out1;                   /* [8]  pixel p + 1's (out0 for a lone pixel) */
    int32_t k;                      /* [12] 2 * output_offset + 1 */
    int32_t act_min;                /* [16] */
    int32_t act_max;                /* [20] */
    const int32_t *bias;            /* [24] */
    const uint32_t *col;            /* [28] the pair's column */
    uint32_t entry;                 /* [32] 40 * ((16 - groups4 % 16) % 16) + 1 (Thumb) */
    const uint32_t *col_end;        /* [36] col + 4 * groups4 */
    const uint32_t *w_end;          /* [40] past the last whole pair's filter words */
    const uint32_t *w;              /* [44] the first pair's filter words (>= 1 pair) */
} pairs_2x2_t;

/* Registers: filter pointer r0, column pointer r1, accumulators r4-r7
 * ((c0, px0), (c0, px1), (c1, px0), (c1, px1)), filter words r8-r11, column
 * words r2, r3, r12, lr; in the requantization q, out0, out1, k, act_min,
 * act_max in r8-r12, lr, the channel's multiplier and right_shift in r1, r3.
 * Every register but r0 is saved and restored (r7 may be the frame pointer). */
#define PAIRS_2X2_GROUP_ASM                                                      \
    "ldm r0!, {r8-r11}\n\t"                                                      \
    "ldm r1!, {r2, r3, r12, lr}\n\t"                                             \
    "smlad r4, r8, r2, r4\n\t"                                                   \
    "smlad r5, r8, r3, r5\n\t"                                                   \
    "smlad r6, r9, r2, r6\n\t"                                                   \
    "smlad r7, r9, r3, r7\n\t"                                                   \
    "smlad r4, r10, r12, r4\n\t"                                                 \
    "smlad r5, r10, lr, r5\n\t"                                                  \
    "smlad r6, r11, r12, r6\n\t"                                                 \
    "smlad r7, r11, lr, r7\n\t"
/* One output in register a (its kiln_requant_fast_t in r1, r3), clamped by CLAMP. */
#define PAIRS_2X2_REQ_ASM(a)                                                     \
    "smmlar " a ", " a ", r1, " a "\n\t"                                         \
    "add " a ", " a ", " a ", asr #31\n\t"                                       \
    "asr " a ", " a ", r3\n\t"                                                   \
    "add " a ", " a ", r11\n\t"                                                  \
    "ssat " a ", #8, " a ", asr #1\n\t"
#define PAIRS_2X2_CLAMP_ASM(a)                                                   \
    "cmp " a ", r12\n\t"                                                         \
    "it lt\n\t"                                                                  \
    "movlt " a ", r12\n\t"                                                       \
    "cmp " a ", lr\n\t"                                                          \
    "it gt\n\t"                                                                  \
    "movgt " a ", lr\n\t"
#define PAIRS_2X2_NO_CLAMP_ASM(a)
/* One channel's two outputs (accumulators a, b) from its kiln_requant_fast_t at r8. */
#define PAIRS_2X2_OUT_ASM(a, b, CLAMP)                                           \
    "ldm r8!, {r1, r2, r3}\n\t"                                                  \
    "lsl r1, r1, #1\n\t"                                                         \
    PAIRS_2X2_REQ_ASM(a) PAIRS_2X2_REQ_ASM(b) CLAMP(a) CLAMP(b)                  \
    "strb " a ", [r9], #1\n\t"                                                   \
    "strb " b ", [r10], #1\n\t"

#define PAIRS_2X2_RUN(name, state, CLAMP)                                        \
    static KILN_NOINLINE void name(const pairs_2x2_t *args)                      \
    {                                                                            \
        register const pairs_2x2_t *a_ __asm__("r0") = args;                     \
        __asm__ volatile(                                                        \
            "push {r1-r12, lr}\n\t"                                              \
            "sub sp, sp, #48\n\t"                                                \
            "ldm r0, {r1-r12}\n\t"                                               \
            "adr lr, 1f\n\t"                                                     \
            "add r9, r9, lr\n\t"                                                 \
            "stm sp, {r1-r12}\n\t"                                               \
            "mov r0, r12\n"                                                      \
            "4:\n\t"                                                             \
            "ldrd r2, r1, [sp, #24]\n\t"        /* bias, col */                  \
            "ldrd r4, r6, [r2], #8\n\t"                                          \
            "str r2, [sp, #24]\n\t"                                              \
            "mov r5, r4\n\t"                                                     \
            "mov r7, r6\n\t"                                                     \
            "ldr pc, [sp, #32]\n\t"                                              \
            ".p2align 2\n"                                                       \
            "1:\n\t"                                                             \
            PAIRS_2X2_GROUP_ASM PAIRS_2X2_GROUP_ASM PAIRS_2X2_GROUP_ASM          \
            PAIRS_2X2_GROUP_ASM PAIRS_2X2_GROUP_ASM PAIRS_2X2_GROUP_ASM          \
            PAIRS_2X2_GROUP_ASM PAIRS_2X2_GROUP_ASM PAIRS_2X2_GROUP_ASM          \
            PAIRS_2X2_GROUP_ASM PAIRS_2X2_GROUP_ASM PAIRS_2X2_GROUP_ASM          \
            PAIRS_2X2_GROUP_ASM PAIRS_2X2_GROUP_ASM PAIRS_2X2_GROUP_ASM          \
            PAIRS_2X2_GROUP_ASM                                                  \
            "2:\n\t"                                                             \
            ".if (2b - 1b) != 640\n\t"                                           \
            ".error \"PAIRS_2X2_GROUP_ASM is not 40 bytes\"\n\t"                 \
            ".endif\n\t"                                                         \
            "ldr r2, [sp, #36]\n\t"                                              \
            "cmp r1, r2\n\t"                                                     \
            "bne 1b\n\t"                                                         \
            "ldm sp, " state "\n\t"                                              \
            PAIRS_2X2_OUT_ASM("r4", "r5", CLAMP)                                 \
            PAIRS_2X2_OUT_ASM("r6", "r7", CLAMP)                                 \
            "stm sp, {r8-r10}\n\t"                                               \
            "ldr r2, [sp, #40]\n\t"                                              \
            "cmp r0, r2\n\t"                                                     \
            "bne 4b\n\t"                                                         \
            "add sp, sp, #48\n\t"                                                \
            "pop {r1-r12, lr}"                                                   \
            : "+r"(a_)                                                           \
            :                                                                    \
            : "cc", "memory");  /* reads filter, column, bias, quant; writes out */ \
    }
PAIRS_2X2_RUN(pairs_2x2_full, "{r8-r11}", PAIRS_2X2_NO_CLAMP_ASM)
PAIRS_2X2_RUN(pairs_2x2_clamp, "{r8-r12, lr}", PAIRS_2X2_CLAMP_ASM)
#undef PAIRS_2X2_RUN
#undef PAIRS_2X2_OUT_ASM
#undef PAIRS_2X2_NO_CLAMP_ASM
#undef PAIRS_2X2_CLAMP_ASM
#undef PAIRS_2X2_REQ_ASM
#undef PAIRS_2X2_GROUP_ASM
#endif

/* The last, unpaired channel, int16 filter: w holds (A, B) per group.
 * acc[0..1] = px0, px1. */
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

/* The last, unpaired channel, int8 filter: w holds one word per group. */
static void dot_w8_1x2(const uint32_t *w, const uint32_t *col, int32_t groups4, int32_t acc[2])
{
    int32_t a0 = acc[0];
    int32_t a1 = acc[1];
    uint32_t x0;
    uint32_t x1;
    for (int32_t n = groups4; n > 0; --n) {
        const uint32_t r = *w++;
        const uint32_t wa = kiln_sxtb16(r);
        KILN_LOAD_PAIR(x0, x1, col);
        a0 = kiln_smlad(wa, x0, a0);
        a1 = kiln_smlad(wa, x1, a1);
        const uint32_t wb = kiln_sxtb16_ror8(r);
        KILN_LOAD_PAIR(x0, x1, col);
        a0 = kiln_smlad(wb, x0, a0);
        a1 = kiln_smlad(wb, x1, a1);
    }
    acc[0] = a0;
    acc[1] = a1;
}

/* What every block of one layer shares. */
typedef struct {
    const uint32_t *col;            /* the two pixels' column */
    int32_t groups4;
    int32_t out_off;
    int32_t act_min;
    int32_t act_max;
} block_t;

/* Requantizes channel c of both pixels (acc[2 * c + p]) and stores it at
 * out0[c] and out1[c]. out1 may equal out0 (one pixel: its column is in both
 * slots, so both write the same value). */
static KILN_ALWAYS_INLINE void store_channel(const block_t *k, const int32_t *acc, int32_t c,
                                             const kiln_requant_fast_t *q, int8_t *out0,
                                             int8_t *out1, int full_range)
{
    const kiln_requant_fast_t qc = q[c];
    const int8_t y0 = kiln_output_fast(acc[2 * c], &qc, k->out_off, k->act_min, k->act_max,
                                       full_range);
    const int8_t y1 = kiln_output_fast(acc[2 * c + 1], &qc, k->out_off, k->act_min,
                                       k->act_max, full_range);
    out1[c] = y1;
    out0[c] = y0;
}

/* One block of channels (bias, q and the outputs point at its first channel)
 * of both pixels: dot products, requantization and stores. */
static KILN_ALWAYS_INLINE void block(const block_t *k, const uint32_t *w, const int32_t *bias,
                                     const kiln_requant_fast_t *q, int8_t *out0, int8_t *out1,
                                     int kind, int full_range)
{
    int32_t acc[4] = {bias[0], bias[0], bias[1], bias[1]};
    if (kind == GEMM_W8) {
        dot_w8_2x2(w, k->col, k->groups4, acc);
    } else {
        dot_2x2(w, k->col, k->groups4, acc);
    }
    const block_t kk = *k;      /* read once: the int8 stores may alias it */
    store_channel(&kk, acc, 0, q, out0, out1, full_range);
    store_channel(&kk, acc, 1, q, out0, out1, full_range);
}

/* The blocks as functions of their own, one per variant and clamp, so that
 * each inner loop gets the registers to itself. */
#define GEMM_BLOCK_FN(name, kind, full_range)                                    \
    static KILN_NOINLINE void name(const block_t *k, const uint32_t *w,          \
                                   const int32_t *bias,                          \
                                   const kiln_requant_fast_t *q, int8_t *out0,   \
                                   int8_t *out1)                                 \
    {                                                                            \
        block(k, w, bias, q, out0, out1, kind, full_range);                      \
    }
GEMM_BLOCK_FN(block_2x2_full, GEMM_2X2, 1)
GEMM_BLOCK_FN(block_2x2_clamp, GEMM_2X2, 0)
GEMM_BLOCK_FN(block_w8_full, GEMM_W8, 1)
GEMM_BLOCK_FN(block_w8_clamp, GEMM_W8, 0)
#undef GEMM_BLOCK_FN

/* store_channel from a kiln_requant_packed_t (mult, shift at the block's
 * first channel). */
static KILN_ALWAYS_INLINE void store_channel_p8(const block_t *k, const int32_t *sums, int32_t c,
                                                const int32_t *mult, const int8_t *shift,
                                                uint32_t k40, int8_t *out0, int8_t *out1,
                                                int full_range)
{
    const int32_t m = mult[c];
    const int32_t s1 = kiln_packed_s1_k(shift[c]);
    const int8_t y0 = kiln_output_packed_k(sums[2 * c], m, s1, k40, k->out_off, k->act_min,
                                           k->act_max, full_range);
    const int8_t y1 = kiln_output_packed_k(sums[2 * c + 1], m, s1, k40, k->out_off,
                                           k->act_min, k->act_max, full_range);
    out1[c] = y1;
    out0[c] = y0;
}

/* The int8-pair block of four channels of both pixels (bias, mult, shift and
 * the outputs at its first channel). */
static KILN_ALWAYS_INLINE void block_p8(const block_t *k, const uint32_t *w, const int32_t *bias,
                                        const int32_t *mult, const int8_t *shift, int8_t *out0,
                                        int8_t *out1, int full_range)
{
    int32_t acc[8] = {bias[0], bias[0], bias[0], bias[0], bias[2], bias[2], bias[2], bias[2]};
    dot_p8_4x2(w, k->col, k->groups4, acc);
    const int32_t sums[8] = {acc[2], acc[3],
                             bias[1] + kiln_pair_odd(acc[0], acc[2]),
                             bias[1] + kiln_pair_odd(acc[1], acc[3]),
                             acc[6], acc[7],
                             bias[3] + kiln_pair_odd(acc[4], acc[6]),
                             bias[3] + kiln_pair_odd(acc[5], acc[7])};
    const block_t kk = *k;      /* read once: the int8 stores may alias it */
    const uint32_t k40 = kiln_opaque_u32(UINT32_C(0x40000000));
    store_channel_p8(&kk, sums, 0, mult, shift, k40, out0, out1, full_range);
    store_channel_p8(&kk, sums, 1, mult, shift, k40, out0, out1, full_range);
    store_channel_p8(&kk, sums, 2, mult, shift, k40, out0, out1, full_range);
    store_channel_p8(&kk, sums, 3, mult, shift, k40, out0, out1, full_range);
}

/* Every whole block of four channels of one pixel pair (w, bias, mult, shift
 * and the outputs at channel 0) in one call: the loop keeps its pointers and
 * constants in registers across the blocks. */
static KILN_ALWAYS_INLINE void blocks_p8(const block_t *k, const uint32_t *w, const int32_t *bias,
                                         const kiln_requant_packed_t *qp, int32_t out_c,
                                         int8_t *out0, int8_t *out1, int full_range)
{
    const int32_t step = 4 * k->groups4;       /* filter words per block */
    const int32_t *mult = qp->multiplier;
    const int8_t *shift = qp->shift;
    for (int32_t oc = 0; oc + 4 <= out_c; oc += 4) {
        block_p8(k, w, bias + oc, mult + oc, shift + oc, out0 + oc, out1 + oc, full_range);
        w += step;
    }
}

static KILN_NOINLINE void blocks_p8_full(const block_t *k, const uint32_t *w,
                                         const int32_t *bias, const kiln_requant_packed_t *qp,
                                         int32_t out_c, int8_t *out0, int8_t *out1)
{
    blocks_p8(k, w, bias, qp, out_c, out0, out1, 1);
}

static KILN_NOINLINE void blocks_p8_clamp(const block_t *k, const uint32_t *w,
                                          const int32_t *bias, const kiln_requant_packed_t *qp,
                                          int32_t out_c, int8_t *out0, int8_t *out1)
{
    blocks_p8(k, w, bias, qp, out_c, out0, out1, 0);
}

/* store_channel as kiln_output_packed_k (blocks_4x2). */
static KILN_ALWAYS_INLINE void store_channel_k(const block_t *k, const int32_t *acc, int32_t c,
                                               const kiln_requant_fast_t *q, uint32_t k40,
                                               int8_t *out0, int8_t *out1, int full_range)
{
    const int32_t m = q[c].multiplier;
    const int32_t s1 = q[c].right_shift - 1;
    const int8_t y0 = kiln_output_packed_k(acc[2 * c], m, s1, k40, k->out_off, k->act_min,
                                           k->act_max, full_range);
    const int8_t y1 = kiln_output_packed_k(acc[2 * c + 1], m, s1, k40, k->out_off,
                                           k->act_min, k->act_max, full_range);
    out1[c] = y1;
    out0[c] = y0;
}

/*
 * Every whole block of four channels of one pixel pair, int16-pair filter (w,
 * bias, quant and the outputs at channel 0), in one call as blocks_p8. The
 * requantization is kiln_output_packed_k's (the p8 kernels'), from the
 * kiln_requant_fast_t channel: its multiplier, and s1 = right_shift - 1
 * (= -shift - 2); its round is 2^s1, which ((hi >> s1) + 1) >> 1 adds
 * exactly (see kiln_output_packed).
 */
static KILN_ALWAYS_INLINE void blocks_4x2(const block_t *k, const uint32_t *w, const int32_t *bias,
                                          const kiln_requant_fast_t *q, int32_t out_c,
                                          int8_t *out0, int8_t *out1, int full_range)
{
    const block_t kk = *k;      /* read once: the int8 stores may alias it */
    const uint32_t *end = kk.col + 4 * kk.groups4;
    const uint32_t entry = 88u * ((8u - (uint32_t)kk.groups4 % 8u) % 8u) + 1u;
    const uint32_t k40 = kiln_opaque_u32(UINT32_C(0x40000000));
    for (int32_t oc = 0; oc + 4 <= out_c; oc += 4) {
        int32_t acc[8] = {bias[0], bias[0], bias[1], bias[1],
                          bias[2], bias[2], bias[3], bias[3]};
        w = dot_4x2_run(w, kk.col, end, entry, acc);
        store_channel_k(&kk, acc, 0, q, k40, out0, out1, full_range);
        store_channel_k(&kk, acc, 1, q, k40, out0, out1, full_range);
        store_channel_k(&kk, acc, 2, q, k40, out0, out1, full_range);
        store_channel_k(&kk, acc, 3, q, k40, out0, out1, full_range);
        bias += 4;
        q += 4;
        out0 += 4;
        out1 += 4;
    }
}

static KILN_NOINLINE void blocks_4x2_full(const block_t *k, const uint32_t *w,
                                          const int32_t *bias, const kiln_requant_fast_t *q,
                                          int32_t out_c, int8_t *out0, int8_t *out1)
{
    blocks_4x2(k, w, bias, q, out_c, out0, out1, 1);
}

static KILN_NOINLINE void blocks_4x2_clamp(const block_t *k, const uint32_t *w,
                                           const int32_t *bias, const kiln_requant_fast_t *q,
                                           int32_t out_c, int8_t *out0, int8_t *out1)
{
    blocks_4x2(k, w, bias, q, out_c, out0, out1, 0);
}

/* Every output pixel pair; kind and full_range are constants in each
 * instantiation. */
static KILN_ALWAYS_INLINE void gemm_pixels(const gather_t *gp, const kiln_requant_fast_t *quant,
                                           const kiln_requant_packed_t *qp,
                                           const uint32_t *packed, const int32_t *bias,
                                           const kiln_dims_t *output_dims, int8_t *output,
                                           uint32_t *col, int8_t *patch, int32_t out_off,
                                           int32_t act_min, int32_t act_max, int kind,
                                           int full_range)
{
    const gather_t g = *gp;
    const int32_t out_c = output_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t pixels = output_dims->n * out_h * out_w;
    const block_t blk = {col, g.groups4, out_off, act_min, act_max};
    /* Words of the filter per channel: four k as two int16 pairs, or as int8. */
    const int32_t words = (kind == GEMM_W8 || kind == GEMM_P8 ? 1 : 2) * g.groups4;
    int32_t pos[3] = {0, 0, 0};
    /* The int16-pair kernels' pair gathers: whole words of channels (pointwise
     * layers too) by rows of one output row, else by rows wherever a row is
     * two words or more (one word gains nothing from the pairing: KWS's first
     * layer, 10x4 on one channel, ran 1.5% slower), else a word a row. */
    const int s16 = kind == GEMM_4X2 || kind == GEMM_2X2;
    const int pair_rows = s16 && g.in_c % 4 == 0 && g.dil_w == 1;
    const int pair_any = s16 && !pair_rows && g.row4 > 4;
    const int pair_words = s16 && !pair_rows && g.row4 == 4 && g.dil_w == 1;
#if defined(__ARM_FEATURE_DSP)
    /* The 2x2 kernel's whole channel pairs in one asm call a pixel pair
     * (pairs_2x2_full or _clamp), their frame filled once (out0 and out1 set
     * per pixel pair). */
    pairs_2x2_t run2 = {
        .q = quant, .k = 2 * out_off + 1, .act_min = act_min, .act_max = act_max,
        .bias = bias, .col = col,
        .entry = 40u * ((16u - (uint32_t)g.groups4 % 16u) % 16u) + 1u,
        .col_end = col + 4 * g.groups4, .w_end = packed + (size_t)(out_c / 2 * 2) * (size_t)words,
        .w = packed,
    };
#endif
    for (int32_t p = 0; p < pixels; p += 2) {
        const int paired = p + 1 < pixels;
        if (pair_rows) {
            gather_pair_rows(&g, p, paired, pos, patch, col);
        } else if (pair_any) {
            gather_pair_any(&g, p, paired, pos, patch, col);
        } else if (pair_words) {
            gather_pair_words(&g, paired, pos, col);
        } else {
            gather_pair(&g, p, paired, pos, patch, col);
        }
        int8_t *out0 = output + (size_t)p * (size_t)out_c;
        int8_t *out1 = paired ? out0 + out_c : out0;
        const uint32_t *w = packed;
        int32_t oc = 0;
        if (kind == GEMM_P8) {
            if (full_range) {
                blocks_p8_full(&blk, w, bias, qp, out_c, out0, out1);
            } else {
                blocks_p8_clamp(&blk, w, bias, qp, out_c, out0, out1);
            }
            oc = out_c / 4 * 4;
            w += oc * words;
            /* A last pair, or a last channel paired with a zero one (not stored). */
            for (; oc < out_c; oc += 2) {
                int32_t acc[4] = {bias[oc], bias[oc], bias[oc], bias[oc]};
                dot_p8_2x2(w, col, g.groups4, acc);
                w += 2 * words;
                const int32_t m0 = qp->multiplier[oc];
                const int32_t e0 = kiln_packed_s1(qp, oc);
                out0[oc] = kiln_output_packed(acc[2], m0, e0, out_off, act_min, act_max,
                                              full_range);
                out1[oc] = kiln_output_packed(acc[3], m0, e0, out_off, act_min, act_max,
                                              full_range);
                if (oc + 1 < out_c) {
                    const int32_t m1 = qp->multiplier[oc + 1];
                    const int32_t e1 = kiln_packed_s1(qp, oc + 1);
                    const int32_t s0 = bias[oc + 1] + kiln_pair_odd(acc[0], acc[2]);
                    const int32_t s1 = bias[oc + 1] + kiln_pair_odd(acc[1], acc[3]);
                    out0[oc + 1] = kiln_output_packed(s0, m1, e1, out_off, act_min, act_max,
                                                      full_range);
                    out1[oc + 1] = kiln_output_packed(s1, m1, e1, out_off, act_min, act_max,
                                                      full_range);
                }
            }
            continue;
        }
        if (kind == GEMM_4X2) {
            if (full_range) {
                blocks_4x2_full(&blk, w, bias, quant, out_c, out0, out1);
            } else {
                blocks_4x2_clamp(&blk, w, bias, quant, out_c, out0, out1);
            }
            oc = out_c / 4 * 4;
            w += oc * words;
        }
#if defined(__ARM_FEATURE_DSP)
        if (kind == GEMM_2X2) {
            if (out_c >= 2) {
                run2.out0 = out0;
                run2.out1 = out1;
                if (full_range) {
                    pairs_2x2_full(&run2);
                } else {
                    pairs_2x2_clamp(&run2);
                }
            }
            oc = out_c / 2 * 2;
            w += oc * words;
        }
        const int c_pairs = kind != GEMM_2X2;     /* pairs left to the C blocks */
#else
        const int c_pairs = 1;
#endif
        for (; c_pairs && oc + 2 <= out_c; oc += 2) {      /* 4x2: at most one block of two */
            if (kind == GEMM_W8) {
                if (full_range) {
                    block_w8_full(&blk, w, bias + oc, quant + oc, out0 + oc, out1 + oc);
                } else {
                    block_w8_clamp(&blk, w, bias + oc, quant + oc, out0 + oc, out1 + oc);
                }
            } else if (full_range) {
                block_2x2_full(&blk, w, bias + oc, quant + oc, out0 + oc, out1 + oc);
            } else {
                block_2x2_clamp(&blk, w, bias + oc, quant + oc, out0 + oc, out1 + oc);
            }
            w += 2 * words;
        }
        if (oc < out_c) {
            int32_t acc[2] = {bias[oc], bias[oc]};
            if (kind == GEMM_W8) {
                dot_w8_1x2(w, col, g.groups4, acc);
            } else {
                dot_1x2(w, col, g.groups4, acc);
            }
            out0[oc] = kiln_output_fast(acc[0], &quant[oc], out_off, act_min, act_max, full_range);
            if (paired) {
                out1[oc] = kiln_output_fast(acc[1], &quant[oc], out_off, act_min, act_max, full_range);
            }
        }
    }
}

/* Which activation ranges a gemm entry point serves (a constant in each caller):
 * any (an instantiation of the pixel loop for the full int8 range, one for a
 * clamp), or the full range only, whose entry then links no clamping code. */
enum { RANGE_ANY, RANGE_FULL };

/* Argument checks, the gather geometry and the run of one variant (a
 * constant in each caller). */
static KILN_ALWAYS_INLINE kiln_status_t gemm_run(const kiln_context_t *ctx,
                                                 const kiln_conv_params_t *params,
                                                 const kiln_requant_fast_t *quant,
                                                 const kiln_requant_packed_t *qp,
                                                 const kiln_dims_t *input_dims,
                                                 const int8_t *input,
                                                 const kiln_dims_t *filter_dims,
                                                 const int32_t *filter, const int32_t *bias,
                                                 const kiln_dims_t *output_dims, int8_t *output,
                                                 int kind, int ranges)
{
    const int quant_ok = kind == GEMM_P8 ? kiln_requant_packed_valid(qp) : quant != NULL;
    if (ctx == NULL || !kiln_conv_params_valid(params) || !quant_ok || input == NULL ||
        filter == NULL || bias == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        !kiln_conv_geometry_valid(params, input_dims, filter_dims, output_dims)) {
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
        .out_h = output_dims->h, .out_w = output_dims->w,
        .pointwise = filter_dims->h == 1 && filter_dims->w == 1 && params->stride.h == 1 &&
                     params->stride.w == 1 && params->padding.h == 0 &&
                     params->padding.w == 0 && input_dims->c % 4 == 0 &&
                     input_dims->h == output_dims->h && input_dims->w == output_dims->w,
    };
    uint32_t *col = (uint32_t *)ctx->buf;
    int8_t *patch = (int8_t *)ctx->buf + 16 * g.groups4;
    const uint32_t *packed = (const uint32_t *)filter;
    const int32_t act_min = params->activation.min;
    const int32_t act_max = params->activation.max;
    if (act_min == -128 && act_max == 127) {
        gemm_pixels(&g, quant, qp, packed, bias, output_dims, output, col, patch,
                    params->output_offset, act_min, act_max, kind, 1);
    } else if (ranges == RANGE_FULL) {
        return KILN_ERR_ARG;
    } else {
        gemm_pixels(&g, quant, qp, packed, bias, output_dims, output, col, patch,
                    params->output_offset, act_min, act_max, kind, 0);
    }
    return KILN_OK;
}

kiln_status_t kiln_conv2d_gemm_s8(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                  const kiln_requant_fast_t *quant,
                                  const kiln_dims_t *input_dims, const int8_t *input,
                                  const kiln_dims_t *filter_dims, const int32_t *filter,
                                  const int32_t *bias,
                                  const kiln_dims_t *output_dims, int8_t *output)
{
    return gemm_run(ctx, params, quant, NULL, input_dims, input, filter_dims, filter, bias,
                    output_dims, output, GEMM_2X2, RANGE_ANY);
}

kiln_status_t kiln_conv2d_gemm_oc4_s8(const kiln_context_t *ctx,
                                      const kiln_conv_params_t *params,
                                      const kiln_requant_fast_t *quant,
                                      const kiln_dims_t *input_dims, const int8_t *input,
                                      const kiln_dims_t *filter_dims, const int32_t *filter,
                                      const int32_t *bias,
                                      const kiln_dims_t *output_dims, int8_t *output)
{
    return gemm_run(ctx, params, quant, NULL, input_dims, input, filter_dims, filter, bias,
                    output_dims, output, GEMM_4X2, RANGE_ANY);
}

kiln_status_t kiln_conv2d_gemm_p8_s8(const kiln_context_t *ctx,
                                     const kiln_conv_params_t *params,
                                     const kiln_requant_packed_t *quant,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *filter_dims, const int32_t *filter,
                                     const int32_t *bias,
                                     const kiln_dims_t *output_dims, int8_t *output)
{
    return gemm_run(ctx, params, NULL, quant, input_dims, input, filter_dims, filter, bias,
                    output_dims, output, GEMM_P8, RANGE_ANY);
}

kiln_status_t kiln_conv2d_gemm_p8_full_s8(const kiln_context_t *ctx,
                                          const kiln_conv_params_t *params,
                                          const kiln_requant_packed_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int32_t *filter,
                                          const int32_t *bias,
                                          const kiln_dims_t *output_dims, int8_t *output)
{
    return gemm_run(ctx, params, NULL, quant, input_dims, input, filter_dims, filter, bias,
                    output_dims, output, GEMM_P8, RANGE_FULL);
}

kiln_status_t kiln_conv2d_gemm_w8_s8(const kiln_context_t *ctx,
                                     const kiln_conv_params_t *params,
                                     const kiln_requant_fast_t *quant,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *filter_dims, const int32_t *filter,
                                     const int32_t *bias,
                                     const kiln_dims_t *output_dims, int8_t *output)
{
    return gemm_run(ctx, params, quant, NULL, input_dims, input, filter_dims, filter, bias,
                    output_dims, output, GEMM_W8, RANGE_ANY);
}
