/*
 * dwconv_3x3_w8.c - DEPTHWISE_CONV_2D with a 3x3 filter, depth multiplier 1,
 * no dilation, any stride and padding, C a multiple of 4, reading the
 * model's int8 filter as it is (1HWC: no packed copy in flash):
 * kiln_dwconv2d_3x3_w8_s8. Semantics and layouts in conv.h, primitives in
 * conv_dsp.h.
 *
 * Interior pixels (all nine taps in the image): a block of four channels
 * outermost. The block's nine taps are widened once (SXTB16) into int16
 * pairs on the stack, [(c0, c2)][(c1, c3)] per tap, so every interior pixel
 * of the block reads them with one LDRD per tap, and walks its taps from one
 * pointer ([t], [t, C], [t, C, lsl #1] per filter row) with the bias folded
 * per block (bias + input_offset * sum of the channel's taps). Per tap a word
 * of input (four channels) splits into (c0, c2) and (c1, c3), multiplied lane
 * by lane (SMLABB / SMLATT); the requantization is four instructions
 * (dw_requantize).
 *
 * Edge pixels (a tap outside the image) go pixel by pixel, every block of
 * channels, as dwconv_3x3.c does: the nine tap pointers found once, taps
 * outside read a pixel of the input zero point in scratch, every input lane
 * gets the input offset as it is widened (SXTAB16), so a padded tap adds 0
 * and the bias is used as given; weights widened from the int8 filter at each
 * use.
 *
 * Measured on QEMU mps2-an386 (single layers, benchmarks/records): 0.79-0.96x
 * dwconv_3x3.c's instructions on VWW's layers where at least 0.84 of the
 * output pixels are interior (48x48, 24x24), 1.04-1.44x on smaller maps
 * (12x12 to 3x3) and on KWS's 25x5, where edge pixels are 30-90% of the
 * work; those keep dwconv_3x3.c (conv.py: candidates). Two output rows per
 * pass (sharing weight loads and, at stride 1, two input rows) measured
 * 1.05-1.4x this one's instructions: eight accumulators do not fit the
 * registers next to a tap's temporaries.
 *
 * Overflow: the compiler checks |bias| + 256 * sum|w| < 2^31 per channel
 * (conv.h): at an edge |w * (x + input_offset)| <= 255 |w|; in the interior
 * the folded bias is at most |bias| + 128 * sum|w| and |sum w * x| <=
 * 128 * sum|w|.
 */
#include "conv_dsp.h"

int32_t kiln_dwconv2d_3x3_w8_s8_get_buffer_size(const kiln_dims_t *input_dims)
{
    return input_dims == NULL ? 0 : input_dims->c;
}

/* acc += lane by lane: (a0, a2) from the even bytes of x, (a1, a3) from the odd
 * ones, each plus the (input_offset, input_offset) pair off (SXTAB16). */
#if defined(__ARM_FEATURE_DSP)
static inline uint32_t sxtab16(uint32_t off, uint32_t x)
{
    return (uint32_t)__sxtab16((int16x2_t)off, (int8x4_t)x);
}

static inline uint32_t sxtab16_ror8(uint32_t off, uint32_t x)
{
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(off), "r"(x));
    return r;
}
#else
static inline uint32_t sxtab16(uint32_t off, uint32_t x)
{
    const uint32_t e = kiln_sxtb16(x);
    return kiln_pack16(kiln_lane0(off) + kiln_lane0(e), kiln_lane1(off) + kiln_lane1(e));
}

static inline uint32_t sxtab16_ror8(uint32_t off, uint32_t x)
{
    return sxtab16(off, x >> 8);
}
#endif

/* What every pixel of a layer shares. */
typedef struct {
    const kiln_conv_params_t *p;
    int32_t in_h, in_w, in_c, out_h, out_w;
    size_t row;                 /* bytes of an input row */
    int32_t oy0, oy1, ox0, ox1; /* the interior: every tap in the image */
} dw_layer_t;

/* acc += a tap's four channels' int16 pairs (e, o) times its weights (we, wo). */
#define DW_MAC(e, o, we, wo, a0, a1, a2, a3)                                     \
    do {                                                                         \
        (a0) = kiln_smlabb(e, we, a0);                                           \
        (a2) = kiln_smlatt(e, we, a2);                                           \
        (a1) = kiln_smlabb(o, wo, a1);                                           \
        (a3) = kiln_smlatt(o, wo, a3);                                           \
    } while (0)

/* The next tap (w steps past its two words, one LDRD) times input word x. */
#define DW_TAP(x, w, a0, a1, a2, a3)                                             \
    do {                                                                         \
        const uint32_t x_ = (x);                                                 \
        const uint32_t e_ = kiln_sxtb16(x_);                                     \
        const uint32_t o_ = kiln_sxtb16_ror8(x_);                                \
        uint32_t we_;                                                            \
        uint32_t wo_;                                                            \
        KILN_LOAD_PAIR(we_, wo_, w);                                             \
        DW_MAC(e_, o_, we_, wo_, a0, a1, a2, a3);                                \
    } while (0)

/* Requantizes and stores one pixel's four channels from the block's table q (k,
 * act_min, act_max and full_range in scope); all four before the first store. */
#define DW_STORE(o, q, a0, a1, a2, a3)                                           \
    do {                                                                         \
        const int8_t y0_ = kiln_dw_output(a0, (q)[0].multiplier2, (q)[0].right_shift, k, \
                                     act_min, act_max, full_range);              \
        const int8_t y1_ = kiln_dw_output(a1, (q)[1].multiplier2, (q)[1].right_shift, k, \
                                     act_min, act_max, full_range);              \
        const int8_t y2_ = kiln_dw_output(a2, (q)[2].multiplier2, (q)[2].right_shift, k, \
                                     act_min, act_max, full_range);              \
        const int8_t y3_ = kiln_dw_output(a3, (q)[3].multiplier2, (q)[3].right_shift, k, \
                                     act_min, act_max, full_range);              \
        (o)[0] = y0_;                                                            \
        (o)[1] = y1_;                                                            \
        (o)[2] = y2_;                                                            \
        (o)[3] = y3_;                                                            \
    } while (0)

/* The same from the packed table at channel c (the edge pixels, every block):
 * kiln_dw_rq_packed per output, the work kiln_requant_fast_t's entries took too. */
#define DW_STORE_PACKED(o, q, c, a0, a1, a2, a3)                                 \
    do {                                                                         \
        const kiln_dw_rq_t r0_ = kiln_dw_rq_packed(q, (int32_t)(c));             \
        const kiln_dw_rq_t r1_ = kiln_dw_rq_packed(q, (int32_t)(c) + 1);         \
        const kiln_dw_rq_t r2_ = kiln_dw_rq_packed(q, (int32_t)(c) + 2);         \
        const kiln_dw_rq_t r3_ = kiln_dw_rq_packed(q, (int32_t)(c) + 3);         \
        const int8_t y0_ = kiln_dw_output(a0, r0_.multiplier2, r0_.right_shift, k, \
                                          act_min, act_max, 0);                  \
        const int8_t y1_ = kiln_dw_output(a1, r1_.multiplier2, r1_.right_shift, k, \
                                          act_min, act_max, 0);                  \
        const int8_t y2_ = kiln_dw_output(a2, r2_.multiplier2, r2_.right_shift, k, \
                                          act_min, act_max, 0);                  \
        const int8_t y3_ = kiln_dw_output(a3, r3_.multiplier2, r3_.right_shift, k, \
                                          act_min, act_max, 0);                  \
        (o)[0] = y0_;                                                            \
        (o)[1] = y1_;                                                            \
        (o)[2] = y2_;                                                            \
        (o)[3] = y3_;                                                            \
    } while (0)

/* One interior output pixel from r, its first tap (filter row ky at r + ky * row). */
static KILN_ALWAYS_INLINE void dw_interior_pixel(const int8_t *r, size_t c, size_t row,
                                                 const uint32_t *w, const int32_t *bias,
                                                 const kiln_dw_rq_t *quant, int32_t k,
                                                 int32_t act_min, int32_t act_max, int8_t *o,
                                                 int full_range)
{
    int32_t a0 = bias[0];
    int32_t a1 = bias[1];
    int32_t a2 = bias[2];
    int32_t a3 = bias[3];
#if defined(__ARM_FEATURE_DSP) && defined(__thumb2__)
    /* The nine taps as one block: GCC keeps each tap's offset in a stack slot
     * (seven more loads a pixel); here they are [t], [t, c] and [t, c, lsl #1]
     * per filter row. The asm tells the compiler of the input it reads by its
     * first byte only: nothing in this kernel writes memory it reads (within
     * a call the output never overlaps the input, crt/kernels/inplace.h). */
    uint32_t x;
    uint32_t e;
    uint32_t we;
    uint32_t wo;
    const int8_t *t = r;
#define DW_ASM_TAP(addr, woff)                                                   \
    "ldr %[x], " addr "\n\t"                                                     \
    "ldrd %[we], %[wo], [%[w], #" woff "]\n\t"                                   \
    "sxtb16 %[e], %[x]\n\t"                                                     \
    "sxtb16 %[x], %[x], ror #8\n\t"                                              \
    "smlabb %[a0], %[e], %[we], %[a0]\n\t"                                       \
    "smlatt %[a2], %[e], %[we], %[a2]\n\t"                                       \
    "smlabb %[a1], %[x], %[wo], %[a1]\n\t"                                       \
    "smlatt %[a3], %[x], %[wo], %[a3]\n\t"
#define DW_ASM_ROW(w0, w1, w2)                                                   \
    DW_ASM_TAP("[%[t]]", w0) DW_ASM_TAP("[%[t], %[c]]", w1)                      \
    DW_ASM_TAP("[%[t], %[c], lsl #1]", w2)
    __asm__(DW_ASM_ROW("0", "8", "16") "add %[t], %[t], %[row]\n\t"
            DW_ASM_ROW("24", "32", "40") "add %[t], %[t], %[row]\n\t"
            DW_ASM_ROW("48", "56", "64")
            : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [t] "+&r"(t),
              [x] "=&r"(x), [e] "=&r"(e), [we] "=&r"(we), [wo] "=&r"(wo)
            : [c] "r"(c), [row] "r"(row), [w] "r"(w), "m"(*(const uint32_t(*)[18])w),
              "m"(*(const int8_t(*)[1])r));
#undef DW_ASM_ROW
#undef DW_ASM_TAP
#else
    const uint32_t *wp = w;
    const int8_t *t = r;
    DW_TAP(kiln_load_s8x4(t), wp, a0, a1, a2, a3);
    DW_TAP(kiln_load_s8x4(t + c), wp, a0, a1, a2, a3);
    DW_TAP(kiln_load_s8x4(t + 2 * c), wp, a0, a1, a2, a3);
    t += row;
    DW_TAP(kiln_load_s8x4(t), wp, a0, a1, a2, a3);
    DW_TAP(kiln_load_s8x4(t + c), wp, a0, a1, a2, a3);
    DW_TAP(kiln_load_s8x4(t + 2 * c), wp, a0, a1, a2, a3);
    t += row;
    DW_TAP(kiln_load_s8x4(t), wp, a0, a1, a2, a3);
    DW_TAP(kiln_load_s8x4(t + c), wp, a0, a1, a2, a3);
    DW_TAP(kiln_load_s8x4(t + 2 * c), wp, a0, a1, a2, a3);
#endif
    DW_STORE(o, quant, a0, a1, a2, a3);
}

/* Every interior output pixel (rows [oy0, oy1) x columns [ox0, ox1)) of one
 * block of four channels (image and out at its first channel; w its widened
 * taps, folded its folded bias, rq its requantization); one instance per
 * clamp, not inlined into the block loop so that its few live values (one
 * tap pointer, C, the row step, w, four accumulators and a tap's four
 * temporaries) keep Cortex-M4's registers. */
static KILN_ALWAYS_INLINE void dw_block(const dw_layer_t *g, const int8_t *image,
                                        const uint32_t *w, const int32_t *folded,
                                        const kiln_dw_rq_t *rq, int8_t *out, int full_range)
{
    const kiln_conv_params_t *p = g->p;
    const int32_t k = 1 + 2 * p->output_offset;
    const int32_t act_min = p->activation.min;
    const int32_t act_max = p->activation.max;
    const size_t c = (size_t)g->in_c;
    const size_t row = g->row;
    const size_t step = (size_t)p->stride.w * c;
    const size_t out_row = (size_t)g->out_w * c;
    for (int32_t oy = g->oy0; oy < g->oy1; ++oy) {
        const int8_t *r = image + (size_t)(oy * p->stride.h - p->padding.h) * row +
                          (size_t)(g->ox0 * p->stride.w - p->padding.w) * c;
        int8_t *o = out + (size_t)oy * out_row + (size_t)g->ox0 * c;
        for (int32_t ox = g->ox0; ox < g->ox1; ++ox, r += step, o += c) {
            dw_interior_pixel(r, c, row, w, folded, rq, k, act_min, act_max, o, full_range);
        }
    }
}

static KILN_NOINLINE void dw_block_full(const dw_layer_t *g, const int8_t *image,
                                        const uint32_t *w, const int32_t *folded,
                                        const kiln_dw_rq_t *rq, int8_t *out)
{
    dw_block(g, image, w, folded, rq, out, 1);
}

static KILN_NOINLINE void dw_block_clamped(const dw_layer_t *g, const int8_t *image,
                                           const uint32_t *w, const int32_t *folded,
                                           const kiln_dw_rq_t *rq, int8_t *out)
{
    dw_block(g, image, w, folded, rq, out, 0);
}

/* Output pixel (oy, ox), one with a tap outside the image, every block of
 * channels (pixel by pixel, so its nine tap pointers are found once): taps
 * outside read `pad`, the input zero point, and every input lane gets the
 * input offset (SXTAB16), so a padded tap adds 0 and the bias is used as
 * given; weights widened from the int8 filter at each use. */
static KILN_ALWAYS_INLINE void dw_edge_pixel(const dw_layer_t *g, const int8_t *image,
                                             const int8_t *filter, const int32_t *bias,
                                             const kiln_requant_packed_t *quant,
                                             const int8_t *pad, int32_t oy, int32_t ox,
                                             int8_t *out)
{
    const kiln_conv_params_t *p = g->p;
    const int32_t k = 1 + 2 * p->output_offset;
    const int32_t act_min = p->activation.min;
    const int32_t act_max = p->activation.max;
    const uint32_t off = (uint32_t)(uint16_t)p->input_offset * UINT32_C(0x00010001);
    const int32_t iy0 = oy * p->stride.h - p->padding.h;
    const int32_t ix0 = ox * p->stride.w - p->padding.w;
    const size_t c = (size_t)g->in_c;
    const int8_t *tap[9];
    for (int32_t ky = 0; ky < 3; ++ky) {
        const int32_t iy = iy0 + ky;
        for (int32_t kx = 0; kx < 3; ++kx) {
            const int32_t ix = ix0 + kx;
            tap[3 * ky + kx] = (iy < 0 || iy >= g->in_h || ix < 0 || ix >= g->in_w)
                                   ? pad
                                   : image + (size_t)iy * g->row + (size_t)ix * c;
        }
    }
    for (size_t j = 0; j < c; j += 4) {
        int32_t a0 = bias[j];
        int32_t a1 = bias[j + 1];
        int32_t a2 = bias[j + 2];
        int32_t a3 = bias[j + 3];
        const int8_t *f = filter + j;
#define DW_EDGE_TAP(t)                                                           \
    do {                                                                         \
        const uint32_t x = kiln_load_s8x4(tap[t] + j);                           \
        const uint32_t v = kiln_load_s8x4(f);                                    \
        f += c;                                                                  \
        DW_MAC(sxtab16(off, x), sxtab16_ror8(off, x), kiln_sxtb16(v),            \
               kiln_sxtb16_ror8(v), a0, a1, a2, a3);                             \
    } while (0)
        DW_EDGE_TAP(0);
        DW_EDGE_TAP(1);
        DW_EDGE_TAP(2);
        DW_EDGE_TAP(3);
        DW_EDGE_TAP(4);
        DW_EDGE_TAP(5);
        DW_EDGE_TAP(6);
        DW_EDGE_TAP(7);
        DW_EDGE_TAP(8);
#undef DW_EDGE_TAP
        DW_STORE_PACKED(out + j, quant, j, a0, a1, a2, a3);
    }
}

static KILN_NOINLINE void dw_edges(const dw_layer_t *g, const int8_t *image,
                                   const int8_t *filter, const int32_t *bias,
                                   const kiln_requant_packed_t *quant, const int8_t *pad,
                                   int8_t *out)
{
    const size_t c = (size_t)g->in_c;
    for (int32_t oy = 0; oy < g->out_h; ++oy) {
        const int whole_row = oy >= g->oy0 && oy < g->oy1;
        for (int32_t ox = 0; ox < g->out_w; ++ox) {
            if (whole_row && ox == g->ox0) {
                ox = g->ox1 - 1;                /* the interior: done block by block */
                continue;
            }
            /* One instance (it clamps: right for any range): edge pixels are the
             * fewer, and the code is half the size. */
            int8_t *o = out + ((size_t)oy * (size_t)g->out_w + (size_t)ox) * c;
            dw_edge_pixel(g, image, filter, bias, quant, pad, oy, ox, o);
        }
    }
}

/* The interior along one axis: out with 0 <= out * stride - pad and that + 2 < size. */
static void interior_range(int32_t size, int32_t out, int32_t stride, int32_t pad,
                             int32_t *lo, int32_t *hi)
{
    const int32_t a = kiln_min_i32((pad + stride - 1) / stride, out);
    const int32_t b = size - 3 + pad >= 0 ? kiln_min_i32((size - 3 + pad) / stride + 1, out) : 0;
    *lo = a;
    *hi = b > a ? b : a;
}

static kiln_status_t dw_run(const kiln_context_t *ctx, const kiln_dwconv_params_t *params,
                            const kiln_requant_packed_t *quant,
                            const kiln_dims_t *input_dims, const int8_t *input,
                            const kiln_dims_t *filter_dims, const int8_t *filter,
                            const int32_t *bias, const kiln_dims_t *output_dims, int8_t *output)
{
    if (ctx == NULL || ctx->buf == NULL || params == NULL ||
        !kiln_conv_params_valid(&params->conv) ||
        params->depth_multiplier != 1 || !kiln_requant_packed_valid(quant) || input == NULL || filter == NULL ||
        bias == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        !kiln_conv_geometry_valid(&params->conv, input_dims, filter_dims, output_dims) ||
        input_dims->n != output_dims->n || filter_dims->n != 1 ||
        filter_dims->c != input_dims->c || output_dims->c != input_dims->c ||
        filter_dims->h != 3 || filter_dims->w != 3 || input_dims->c % 4 != 0 ||
        params->conv.dilation.h != 1 || params->conv.dilation.w != 1 ||
        ctx->size < kiln_dwconv2d_3x3_w8_s8_get_buffer_size(input_dims)) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_c = input_dims->c;
    dw_layer_t g = {
        .p = p, .in_h = input_dims->h, .in_w = input_dims->w, .in_c = in_c,
        .out_h = output_dims->h, .out_w = output_dims->w,
        .row = (size_t)input_dims->w * (size_t)in_c,
    };
    interior_range(g.in_h, g.out_h, p->stride.h, p->padding.h, &g.oy0, &g.oy1);
    interior_range(g.in_w, g.out_w, p->stride.w, p->padding.w, &g.ox0, &g.ox1);
    if (g.oy0 == g.oy1 || g.ox0 == g.ox1) {
        g.oy0 = g.oy1 = g.ox0 = g.ox1 = 0;     /* no interior: every pixel an edge one */
    }
    /* A pixel of padding for the edge pixels' taps outside the image. */
    int8_t *pad = (int8_t *)ctx->buf;
    memset(pad, (int8_t)(-p->input_offset), (size_t)in_c);
    const size_t image_bytes = (size_t)g.in_h * g.row;
    const size_t out_bytes = (size_t)g.out_h * (size_t)g.out_w * (size_t)in_c;
    const int full_range = p->activation.min == -128 && p->activation.max == 127;
    for (int32_t b = 0; b < input_dims->n; ++b) {
        const int8_t *image = input + (size_t)b * image_bytes;
        int8_t *out = output + (size_t)b * out_bytes;
        for (int32_t c = 0; c < in_c; c += 4) {
            /* The block's taps as int16 pairs, (c0, c2) then (c1, c3) per tap, and its
             * folded bias. */
            uint32_t w[18];
            /* The sums of the taps (c0, c2) and (c1, c3) as int16 lanes (|sum| <= 9 * 128):
             * the block's folded bias. A band of a banded twin repeats this per call. */
            uint32_t sum_e = 0;
            uint32_t sum_o = 0;
            for (int32_t t = 0; t < 9; ++t) {
                const uint32_t v = kiln_load_s8x4(filter + (size_t)t * (size_t)in_c + c);
                w[2 * t] = kiln_sxtb16(v);
                w[2 * t + 1] = kiln_sxtb16_ror8(v);
                sum_e = kiln_sadd16(sum_e, w[2 * t]);
                sum_o = kiln_sadd16(sum_o, w[2 * t + 1]);
            }
            const int32_t off = p->input_offset;
            const int32_t folded[4] = {
                bias[c] + off * (int16_t)(uint16_t)sum_e,
                bias[c + 1] + off * (int16_t)(uint16_t)sum_o,
                bias[c + 2] + off * (int16_t)(uint16_t)(sum_e >> 16),
                bias[c + 3] + off * (int16_t)(uint16_t)(sum_o >> 16),
            };
            kiln_dw_rq_t rq[4];
            for (int32_t j = 0; j < 4; ++j) {
                rq[j] = kiln_dw_rq_packed(quant, c + j);
            }
            const int8_t *im = image + c;
            if (full_range) {
                dw_block_full(&g, im, w, folded, rq, out + c);
            } else {
                dw_block_clamped(&g, im, w, folded, rq, out + c);
            }
        }
        dw_edges(&g, image, filter, bias, quant, pad, out);
    }
    return KILN_OK;
}

kiln_status_t kiln_dwconv2d_3x3_w8_s8(const kiln_context_t *ctx,
                                      const kiln_dwconv_params_t *params,
                                      const kiln_requant_packed_t *quant,
                                      const kiln_dims_t *input_dims, const int8_t *input,
                                      const kiln_dims_t *filter_dims, const int8_t *filter,
                                      const int32_t *bias,
                                      const kiln_dims_t *output_dims, int8_t *output)
{
    return dw_run(ctx, params, quant, input_dims, input, filter_dims, filter, bias, output_dims,
                  output);
}
