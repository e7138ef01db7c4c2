/*
 * dwconv_3x3_px2.c - DEPTHWISE_CONV_2D with a 3x3 filter, depth multiplier 1,
 * no dilation, horizontal stride 1 (any vertical stride), any padding, any
 * number of channels, reading the model's int8 filter as it is (1HWC):
 * kiln_dwconv2d_3x3_px2_s8. Semantics and layouts in conv.h, primitives in
 * conv_dsp.h.
 *
 * Output pixels go in horizontal pairs (j, j + 1), which share their middle
 * two input columns: per filter row and channel, those two columns form one
 * int16 pair (x[j + 1], x[j + 2]) (PKHBT / PKHTB of the SXTB16 lanes), and
 *   out[j]     += (w1, w2) . (x[j + 1], x[j + 2]) + w0 * x[j]      SMLAD, SMLABB
 *   out[j + 1] += (w0, w1) . (x[j + 1], x[j + 2]) + w2 * x[j + 3]  SMLAD, SMLABT
 * (x[i] the tap columns of the pair, i = 0..3): six MACs in four MAC
 * instructions, against six with SMLABB / SMLATT per tap. A pass takes two
 * channels of a block of four, (c0, c2) then (c1, c3) (the two SXTB16 lanes
 * of one input word), so four accumulators stay in registers.
 *
 * Padding costs nothing per pixel: each block of four channels copies the
 * input rows it needs into a ring of three rows in scratch, one word (the
 * block's four channels) per column, padding columns and rows written as the
 * input zero point; with the bias folded (bias + input_offset * sum of the
 * channel's taps) a padded tap adds w * (zero point + input_offset) = 0 as in
 * TFLM. At vertical stride 1 each output row copies one new input row. The
 * ring holds a tile of the output columns (the whole row, or as many as the
 * scratch holds: the tile is the tuning knob), rounded up to even, plus 2. An
 * odd tile's last pixel goes on its own (px2_last); where its third tap is the
 * padding past the line (SAME) the ring stops before that tap (tw + 1 columns),
 * so a tile of 24 holds KWS's 25-pixel columns whole.
 *
 * The requantization is kiln_dw_output (five instructions, conv_dsp.h), its
 * per-channel constants derived once per block of channels from the packed
 * table (TFLite's int32 multiplier and int8 shift: five bytes of flash a
 * channel, kiln_dw_rq_packed).
 *
 * Overflow: the compiler checks |bias| + 256 * sum|w| < 2^31 per channel
 * (conv.h); the folded bias is at most |bias| + 128 * sum|w| and
 * |sum w * x| <= 128 * sum|w|, and an SMLAD adds two products of that sum.
 */
#include "conv_dsp.h"
#include "inplace.h"

/* Columns of one ring row: out_w rounded up to even, plus the two the last pair
 * reads past its first tap. */
static int32_t ring_cols(int32_t out_w)
{
    return (out_w + 1) / 2 * 2 + 2;
}

/* The ring of whole rows; a smaller scratch (at least 48 bytes) makes the kernel
 * go in tiles of the output columns it holds. */
int32_t kiln_dwconv2d_3x3_px2_s8_get_buffer_size(const kiln_dims_t *output_dims)
{
    return output_dims == NULL ? 0 : 3 * 4 * ring_cols(output_dims->w);
}

#if defined(__ARM_FEATURE_DSP)
static inline int32_t smlabt(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlabt((int32_t)a, (int32_t)b, acc);
}

static inline int32_t smlatb(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlatb((int32_t)a, (int32_t)b, acc);
}

/* (lane0(a), lane0(b)) and (lane1(a), lane1(b)). */
static inline uint32_t pack_lo(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

static inline uint32_t pack_hi(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(b), "r"(a));
    return r;
}
#else
static inline int32_t smlabt(uint32_t a, uint32_t b, int32_t acc)
{
    return acc + kiln_lane0(a) * kiln_lane1(b);
}

static inline int32_t smlatb(uint32_t a, uint32_t b, int32_t acc)
{
    return acc + kiln_lane1(a) * kiln_lane0(b);
}

static inline uint32_t pack_lo(uint32_t a, uint32_t b)
{
    return (a & 0xffffu) | (b << 16);
}

static inline uint32_t pack_hi(uint32_t a, uint32_t b)
{
    return (a >> 16) | (b & 0xffff0000u);
}
#endif

/* One channel pair's part of a block: per filter row the words
 * [(w1, w2) lo, (w0, w1) lo, (w1, w2) hi, (w0, w1) hi], lo / hi the pass's
 * two channels, for rows 0, 1, 2, 0, 1 (ring slot k holds filter row
 * (k + rot) % 3 of an output row: its weights start at row rot); then the
 * channels' folded biases and requantization. */
typedef struct {
    uint32_t w[5][4];
    int32_t bias[4];            /* lo, lo, hi, hi: a pair's four accumulators */
    kiln_dw_rq_t rq_lo, rq_hi;
} px2_pass_t;

/*
 * What every line of a layer shares. Pairs run along one axis of the image and
 * the ring's slots along the other: rows of pixels along x (kiln_dwconv2d_3x3_px2_s8),
 * or columns of pixels along y (kiln_dwconv2d_3x3_px2v_s8, the same code on the
 * transposed image, with the filter's taps transposed too).
 */
typedef struct {
    const kiln_conv_params_t *p;
    int32_t in_c;
    int32_t in_lines, in_len;   /* input lines, and pixels along a line */
    int32_t out_lines, out_len;
    int32_t line_stride, line_pad, len_pad;     /* the pair axis has stride 1 */
    size_t in_pix, in_line;     /* input bytes from a pixel to the next along a line,
                                 * and from a line to the next */
    size_t out_pix, out_line;
    int32_t x0, tw;             /* the tile: output pixels [x0, x0 + tw) of each line */
    int32_t cols;               /* ring_cols(tw), or tw + 1 short (px2_last) */
} px2_layer_t;

/* A padding line: ring pixels [0, cols) of a slot (d at its first word) to the zero
 * point, two at a time. */
static KILN_NOINLINE void fill_zp(uint32_t *d, int32_t cols, uint32_t zp4)
{
    uint32_t *q = d;
    for (int32_t n = cols >> 1; n > 0; --n, q += 6) {
        q[0] = zp4;
        q[1] = zp4;
    }
    if (cols & 1) {
        q[0] = zp4;
    }
}

/* Input line iy (a row, or a column) of the block of `lanes` channels at c (image
 * at the batch) into ring slot `slot`: pixel i at word (i / 2) * 6 + 2 * slot + i % 2. */
static KILN_ALWAYS_INLINE void fill_row(const px2_layer_t *g, const int8_t *image, int32_t c,
                                        int32_t lanes, int32_t iy, uint32_t zp4,
                                        uint32_t *ring, int32_t slot)
{
    /* Ring pixel i is input pixel i - pad (the tile's first tap at ring pixel 0). */
    const int32_t pad = g->len_pad - g->x0;
    uint32_t *d = ring + 2 * slot;
    if (iy < 0 || iy >= g->in_lines) {
        fill_zp(d, g->cols, zp4);
        return;
    }
    /* Ring columns [lo, hi) are in the image. */
    const int32_t lo = kiln_min_i32(kiln_max_i32(pad, 0), g->cols);
    const int32_t hi = kiln_max_i32(kiln_min_i32(pad + g->in_len, g->cols), lo);
    int32_t i = 0;
    for (; i < lo; ++i) {
        d[(i >> 1) * 6 + (i & 1)] = zp4;
    }
    const size_t step = g->in_pix;
    const int8_t *x = image + (size_t)c;
    if (i < hi) {
        x += (size_t)iy * g->in_line + (size_t)(i - pad) * step;
    }
    if (lanes == 4) {
        if (i < hi && (i & 1)) {
            d[(i >> 1) * 6 + 1] = kiln_load_s8x4(x);
            x += step;
            ++i;
        }
        uint32_t *q = d + (i >> 1) * 6;
        for (int32_t n = (hi - i) >> 1; n > 0; --n, q += 6, x += 2 * step) {
            const uint32_t v0 = kiln_load_s8x4(x);
            const uint32_t v1 = kiln_load_s8x4(x + step);
            q[0] = v0;
            q[1] = v1;
        }
        i += (hi - i) & ~1;
    }
    for (; i < hi; ++i, x += step) {        /* the last C % 4 channels: the others read 0 */
        uint32_t v = 0;
        for (int32_t l = 0; l < lanes; ++l) {
            v |= (uint32_t)(uint8_t)x[l] << (8 * l);
        }
        d[(i >> 1) * 6 + (i & 1)] = v;
    }
    for (; i < g->cols; ++i) {
        d[(i >> 1) * 6 + (i & 1)] = zp4;
    }
}

/* The three filter rows of a pixel pair for the pass's two channels: r the pair's
 * first ring column pair (slot k's four words at 2k, 2k + 1, 6 + 2k, 7 + 2k),
 * w the weights of slots 0..2 in turn; odd picks the SXTB16 lanes. */
static KILN_ALWAYS_INLINE void px2_pair(const uint32_t *r, const uint32_t *w, int odd,
                                        int32_t *a_lo, int32_t *b_lo, int32_t *a_hi,
                                        int32_t *b_hi)
{
#if defined(__ARM_FEATURE_DSP) && defined(__thumb2__)
    /* 18 instructions a slot: GCC loads each word on its own and spills. */
    int32_t al = *a_lo;
    int32_t bl = *b_lo;
    int32_t ah = *a_hi;
    int32_t bh = *b_hi;
    uint32_t x0;
    uint32_t x1;
    uint32_t x2;
    uint32_t x3;
    uint32_t t;
    uint32_t wb;
#define PX2_SLOT(ror, xo0, xo1, wo0, wo1)                                        \
    "ldrd %[x0], %[x1], [%[r], #" xo0 "]\n\t"                                    \
    "ldrd %[x2], %[x3], [%[r], #" xo1 "]\n\t"                                    \
    "sxtb16 %[x1], %[x1]" ror "\n\t"                                                \
    "sxtb16 %[x2], %[x2]" ror "\n\t"                                                \
    "pkhbt %[t], %[x1], %[x2], lsl #16\n\t"                                     \
    "pkhtb %[x1], %[x2], %[x1], asr #16\n\t"                                    \
    "ldrd %[x2], %[wb], [%[w], #" wo0 "]\n\t"                                    \
    "smlad %[al], %[t], %[x2], %[al]\n\t"                                       \
    "smlad %[bl], %[t], %[wb], %[bl]\n\t"                                       \
    "sxtb16 %[x0], %[x0]" ror "\n\t"                                                \
    "smlabb %[al], %[x0], %[wb], %[al]\n\t"                                     \
    "sxtb16 %[x3], %[x3]" ror "\n\t"                                                \
    "smlabt %[bl], %[x3], %[x2], %[bl]\n\t"                                     \
    "ldrd %[x2], %[wb], [%[w], #" wo1 "]\n\t"                                    \
    "smlad %[ah], %[x1], %[x2], %[ah]\n\t"                                      \
    "smlad %[bh], %[x1], %[wb], %[bh]\n\t"                                      \
    "smlatb %[ah], %[x0], %[wb], %[ah]\n\t"                                     \
    "smlatt %[bh], %[x3], %[x2], %[bh]\n\t"
#define PX2_ASM(ror)                                                             \
    __asm__(PX2_SLOT(ror, "0", "24", "0", "8")                                   \
            PX2_SLOT(ror, "8", "32", "16", "24")                                 \
            PX2_SLOT(ror, "16", "40", "32", "40")                                \
            : [al] "+r"(al), [bl] "+r"(bl), [ah] "+r"(ah), [bh] "+r"(bh),         \
              [x0] "=&r"(x0), [x1] "=&r"(x1), [x2] "=&r"(x2), [x3] "=&r"(x3),     \
              [t] "=&r"(t), [wb] "=&r"(wb)                                        \
            : [r] "r"(r), [w] "r"(w), "m"(*(const uint32_t(*)[12])r),           \
              "m"(*(const uint32_t(*)[12])w))
    if (odd) {
        PX2_ASM(", ror #8");
    } else {
        PX2_ASM("");
    }
#undef PX2_ASM
#undef PX2_SLOT
    *a_lo = al;
    *b_lo = bl;
    *a_hi = ah;
    *b_hi = bh;
#else
    for (int32_t k = 0; k < 3; ++k, w += 4) {
        const uint32_t *x = r + 2 * k;
        const uint32_t m = odd ? kiln_sxtb16_ror8(x[0]) : kiln_sxtb16(x[0]);
        const uint32_t x0 = odd ? kiln_sxtb16_ror8(x[1]) : kiln_sxtb16(x[1]);
        const uint32_t x1 = odd ? kiln_sxtb16_ror8(x[6]) : kiln_sxtb16(x[6]);
        const uint32_t e = odd ? kiln_sxtb16_ror8(x[7]) : kiln_sxtb16(x[7]);
        const uint32_t lo = pack_lo(x0, x1);
        const uint32_t hi = pack_hi(x0, x1);
        *a_lo = kiln_smlabb(m, w[1], kiln_smlad(lo, w[0], *a_lo));
        *b_lo = smlabt(e, w[0], kiln_smlad(lo, w[1], *b_lo));
        *a_hi = smlatb(m, w[3], kiln_smlad(hi, w[2], *a_hi));
        *b_hi = kiln_smlatt(e, w[2], kiln_smlad(hi, w[3], *b_hi));
    }
#endif
}

/*
 * Requantized, plus the output zero point, clamped (kiln_dw_output); with relu
 * (a constant: act_min >= the output zero point) without TFLite's rounding
 * correction for a negative r: then both r >> right_shift and its corrected
 * twin are <= -1, so the output is <= the zero point <= act_min either way and
 * the clamp makes it act_min (four instructions instead of five).
 */
static KILN_ALWAYS_INLINE int8_t px2_output(int32_t acc, const kiln_dw_rq_t *q, int32_t k,
                                            int32_t act_min, int32_t act_max, int full_range,
                                            int relu)
{
    if (!relu) {
        return kiln_dw_output(acc, q->multiplier2, q->right_shift, k, act_min, act_max,
                              full_range);
    }
    return kiln_dw_clamp((kiln_dw_mulhigh(acc, q->multiplier2) >> q->right_shift) + k,
                         act_min, act_max, full_range);
}

/* The last pixel of an odd row, on its own: one clamping instance for all (flags at
 * run time), it is one pixel of a row. Per filter row (w0, w1) . (x[j], x[j + 1])
 * and w2 * x[j + 2], x[j + 2] from the ring, or in a short ring (g->cols == tw + 1:
 * the pixel's third tap is padding past the line, and the ring stops before it) the
 * zero point itself (the folded bias holds w2 * input_offset: the padded tap adds 0
 * as in TFLM). */
static KILN_NOINLINE void px2_last(const px2_layer_t *g, const px2_pass_t *s,
                                   const uint32_t *w, const uint32_t *r, int8_t *out, int odd,
                                   int store_hi)
{
    const kiln_conv_params_t *p = g->p;
    const int32_t k = 1 + 2 * p->output_offset;
    const int ring_short = g->cols == g->tw + 1;
    /* The zero point in every byte (what a padding column holds). */
    const uint32_t zp4 = (uint32_t)(uint8_t)(int8_t)(-p->input_offset) * UINT32_C(0x01010101);
    int32_t a_lo = s->bias[0];
    int32_t a_hi = s->bias[2];
    for (int32_t ky = 0; ky < 3; ++ky, w += 4) {
        const uint32_t v2 = ring_short ? zp4 : r[6 + 2 * ky];
        const uint32_t x0 = odd ? kiln_sxtb16_ror8(r[2 * ky]) : kiln_sxtb16(r[2 * ky]);
        const uint32_t x1 = odd ? kiln_sxtb16_ror8(r[2 * ky + 1]) : kiln_sxtb16(r[2 * ky + 1]);
        const uint32_t x2 = odd ? kiln_sxtb16_ror8(v2) : kiln_sxtb16(v2);
        a_lo = smlatb(w[0], x2, kiln_smlad(pack_lo(x0, x1), w[1], a_lo));
        a_hi = kiln_smlatt(w[2], x2, kiln_smlad(pack_hi(x0, x1), w[3], a_hi));
    }
    out[0] = px2_output(a_lo, &s->rq_lo, k, p->activation.min, p->activation.max, 0, 0);
    if (store_hi) {
        out[2] = px2_output(a_hi, &s->rq_hi, k, p->activation.min, p->activation.max, 0, 0);
    }
}

/* One output row of one pass: ring at the row's slots, w the pass's weights from
 * the row's rotation, out at the row's first pixel and the pass's first channel. */
static KILN_ALWAYS_INLINE void px2_pass(const px2_layer_t *g, const px2_pass_t *s,
                                        const uint32_t *w, const uint32_t *ring, int8_t *out,
                                        int odd, int full_range, int relu, int store_hi)
{
    const kiln_conv_params_t *p = g->p;
    const int32_t k = 1 + 2 * p->output_offset;
    const int32_t act_min = p->activation.min;
    const int32_t act_max = p->activation.max;
    const size_t c = g->out_pix;
    const uint32_t *end = ring + (size_t)(g->tw / 2) * 6;
    for (const uint32_t *r = ring; r != end; r += 6, out += 2 * c) {
        int32_t a_lo = s->bias[0];
        int32_t b_lo = s->bias[1];
        int32_t a_hi = s->bias[2];
        int32_t b_hi = s->bias[3];
        px2_pair(r, w, odd, &a_lo, &b_lo, &a_hi, &b_hi);
        const int8_t y0 = px2_output(a_lo, &s->rq_lo, k, act_min, act_max, full_range, relu);
        const int8_t y1 = px2_output(b_lo, &s->rq_lo, k, act_min, act_max, full_range, relu);
        out[0] = y0;
        out[c] = y1;
        if (store_hi) {
            const int8_t y2 = px2_output(a_hi, &s->rq_hi, k, act_min, act_max, full_range,
                                         relu);
            const int8_t y3 = px2_output(b_hi, &s->rq_hi, k, act_min, act_max, full_range,
                                         relu);
            out[2] = y2;
            out[c + 2] = y3;
        }
    }
    if (g->tw & 1) {
        px2_last(g, s, w, end, out, odd, store_hi);
    }
}

/* Every output line of the tile of the block of `lanes` channels at c (its passes
 * s): each line first brings the input lines it needs into the ring. full_range
 * and relu are constants in each instance. */
static KILN_ALWAYS_INLINE void px2_block(const px2_layer_t *g, const int8_t *image, int32_t c,
                                         int32_t lanes, const px2_pass_t *s, uint32_t *ring,
                                         int8_t *out, uint32_t zp4, int full_range, int relu)
{
    /* held[k]: the input line in ring slot k (lines below -3 never are). */
    int32_t held[3] = {INT32_MIN, INT32_MIN, INT32_MIN};
    int32_t iy0 = -g->line_pad;
    for (int32_t oy = 0; oy < g->out_lines; ++oy, iy0 += g->line_stride, out += g->out_line) {
        /* Input line iy sits in slot (iy + 3) % 3 (iy >= -3: padding <= 3 lines). */
        const int32_t slot0 = (iy0 + 3) % 3;
        for (int32_t ky = 0, slot = slot0; ky < 3; ++ky, slot = slot == 2 ? 0 : slot + 1) {
            if (held[slot] != iy0 + ky) {
                fill_row(g, image, c, lanes, iy0 + ky, zp4, ring, slot);
                held[slot] = iy0 + ky;
            }
        }
        /* Slot k holds filter row (k + rot) % 3 with rot = (3 - slot0) % 3. */
        const int32_t rot = slot0 == 0 ? 0 : 3 - slot0;
        /* A pass stores its second channel only if it exists (C % 4). */
        px2_pass(g, &s[0], s[0].w[rot], ring, out, 0, full_range, relu, lanes >= 3);
        if (lanes >= 2) {
            px2_pass(g, &s[1], s[1].w[rot], ring, out + 1, 1, full_range, relu, lanes == 4);
        }
    }
}

/* The RELU-at-the-zero-point instance (whole blocks), and the one for any clamp
 * and any block (its passes test for a missing second channel per pair). */
static KILN_NOINLINE void px2_block_relu(const px2_layer_t *g, const int8_t *image, int32_t c,
                                         const px2_pass_t *s, uint32_t *ring, int8_t *out,
                                         uint32_t zp4)
{
    px2_block(g, image, c, 4, s, ring, out, zp4, 1, 1);
}

static KILN_NOINLINE void px2_block_any(const px2_layer_t *g, const int8_t *image, int32_t c,
                                        int32_t lanes, const px2_pass_t *s, uint32_t *ring,
                                        int8_t *out, uint32_t zp4)
{
    px2_block(g, image, c, lanes, s, ring, out, zp4, 0, 0);
}

/* Rows 3 and 4 of the pass weights: rows 0 and 1 again (px2_pass_t). */
static void px2_wrap_rows(px2_pass_t *s)
{
    for (int32_t j = 0; j < 2; ++j) {
        memcpy(s[j].w[3], s[j].w[0], 2 * sizeof s[j].w[0]);
    }
}

/* The two passes of the last C % 4 channels (`lanes` of them) at c, one weight at
 * a time: widened weight pairs, folded biases (bias + input_offset * sum of the
 * taps) and requantization; lanes past C get zero weights and are never stored.
 * tap: filter bytes from a tap to the next along the pair axis; line: along the
 * slot axis (C and 3 * C for rows of pairs, the other way round for columns). */
static void px2_setup_tail(const int8_t *filter, const int32_t *bias,
                           const kiln_requant_packed_t *quant, size_t tap, size_t line,
                           int32_t input_offset, int32_t c, int32_t lanes, px2_pass_t *s)
{
    memset(s, 0, 2 * sizeof *s);
    for (int32_t lane = 0; lane < lanes; ++lane) {
        /* Pass lane & 1 (c0, c2 then c1, c3); lo for c0 / c1, hi for c2 / c3. */
        px2_pass_t *ps = &s[lane & 1];
        const int hi = lane >> 1;
        const int32_t ch = c + lane;
        int32_t sum = 0;
        for (int32_t ky = 0; ky < 3; ++ky) {
            const int8_t *f = filter + (size_t)ky * line + (size_t)ch;
            const int32_t w0 = f[0];
            const int32_t w1 = f[tap];
            const int32_t w2 = f[2 * tap];
            sum += w0 + w1 + w2;
            ps->w[ky][2 * hi] = (uint32_t)(uint16_t)w1 | (uint32_t)(uint16_t)w2 << 16;
            ps->w[ky][2 * hi + 1] = (uint32_t)(uint16_t)w0 | (uint32_t)(uint16_t)w1 << 16;
        }
        ps->bias[2 * hi] = ps->bias[2 * hi + 1] = bias[ch] + input_offset * sum;
        *(hi ? &ps->rq_hi : &ps->rq_lo) = kiln_dw_rq_packed(quant, ch);
    }
    px2_wrap_rows(s);
}

/* The same for a whole block of four channels, a word of four taps at a time:
 * SXTB16 splits a filter word into the (c0, c2) and (c1, c3) pairs, and PKH
 * regroups them by channel (the sums of the taps as int16 lanes, |sum| <= 9 * 128). */
static void px2_setup(const int8_t *filter, const int32_t *bias,
                      const kiln_requant_packed_t *quant, size_t tap, size_t line,
                      int32_t input_offset, int32_t c, px2_pass_t *s)
{
    uint32_t sum[2] = {0, 0};
    for (int32_t ky = 0; ky < 3; ++ky) {
        const int8_t *f = filter + (size_t)ky * line + (size_t)c;
        const uint32_t v0 = kiln_load_s8x4(f);
        const uint32_t v1 = kiln_load_s8x4(f + tap);
        const uint32_t v2 = kiln_load_s8x4(f + 2 * tap);
        for (int32_t j = 0; j < 2; ++j) {
            const uint32_t e0 = j ? kiln_sxtb16_ror8(v0) : kiln_sxtb16(v0);
            const uint32_t e1 = j ? kiln_sxtb16_ror8(v1) : kiln_sxtb16(v1);
            const uint32_t e2 = j ? kiln_sxtb16_ror8(v2) : kiln_sxtb16(v2);
            uint32_t *w = s[j].w[ky];
            w[0] = pack_lo(e1, e2);         /* (w1, w2) lo */
            w[1] = pack_lo(e0, e1);         /* (w0, w1) lo */
            w[2] = pack_hi(e1, e2);
            w[3] = pack_hi(e0, e1);
            sum[j] = kiln_sadd16(sum[j], kiln_sadd16(e0, kiln_sadd16(e1, e2)));
        }
    }
    px2_wrap_rows(s);
    for (int32_t j = 0; j < 2; ++j) {
        const int32_t lo = c + j;
        const int32_t hi = c + j + 2;
        s[j].bias[0] = s[j].bias[1] = bias[lo] + input_offset * (int16_t)(uint16_t)sum[j];
        s[j].bias[2] = s[j].bias[3] =
            bias[hi] + input_offset * (int16_t)(uint16_t)(sum[j] >> 16);
        s[j].rq_lo = kiln_dw_rq_packed(quant, lo);
        s[j].rq_hi = kiln_dw_rq_packed(quant, hi);
    }
}

/* Both kernels: pairs along x (vertical = 0) or along y (vertical = 1); tiles of
 * the pair axis last to first when reverse (a banded call over its own input). */
static kiln_status_t px2_run(const kiln_context_t *ctx, const kiln_dwconv_params_t *params,
                             const kiln_requant_packed_t *quant, const kiln_dims_t *input_dims,
                             const int8_t *input, const kiln_dims_t *filter_dims,
                             const int8_t *filter, const int32_t *bias,
                             const kiln_dims_t *output_dims, int8_t *output, int vertical,
                             int reverse)
{
    if (ctx == NULL || ctx->buf == NULL || params == NULL ||
        !kiln_conv_params_valid(&params->conv) || params->depth_multiplier != 1 ||
        !kiln_requant_packed_valid(quant) || input == NULL || filter == NULL || bias == NULL || output == NULL ||
        !kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims) ||
        !kiln_conv_geometry_valid(&params->conv, input_dims, filter_dims, output_dims) ||
        input_dims->n != output_dims->n || filter_dims->n != 1 ||
        filter_dims->c != input_dims->c || output_dims->c != input_dims->c ||
        filter_dims->h != 3 || filter_dims->w != 3 ||
        params->conv.dilation.h != 1 || params->conv.dilation.w != 1 ||
        (vertical ? params->conv.stride.h : params->conv.stride.w) != 1 ||
        ((uintptr_t)ctx->buf & 3u) != 0 || ctx->size < 3 * 4 * ring_cols(1)) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_c = input_dims->c;
    const size_t pix = (size_t)in_c;
    const size_t in_row = (size_t)input_dims->w * pix;
    const size_t out_row = (size_t)output_dims->w * pix;
    px2_layer_t g = {.p = p, .in_c = in_c};
    size_t tap = pix;                   /* filter taps along the pair axis */
    size_t line = 3 * pix;              /* ... and along the slot axis */
    if (vertical) {
        g.in_lines = input_dims->w;
        g.in_len = input_dims->h;
        g.out_lines = output_dims->w;
        g.out_len = output_dims->h;
        g.line_stride = p->stride.w;
        g.line_pad = p->padding.w;
        g.len_pad = p->padding.h;
        g.in_pix = in_row;
        g.in_line = pix;
        g.out_pix = out_row;
        g.out_line = pix;
        tap = 3 * pix;
        line = pix;
    } else {
        g.in_lines = input_dims->h;
        g.in_len = input_dims->w;
        g.out_lines = output_dims->h;
        g.out_len = output_dims->w;
        g.line_stride = p->stride.h;
        g.line_pad = p->padding.h;
        g.len_pad = p->padding.w;
        g.in_pix = pix;
        g.in_line = in_row;
        g.out_pix = pix;
        g.out_line = out_row;
    }
    /* The widest tile (even) whose ring the scratch holds. (Balanced tiles, 25 as
     * 14 + 11 rather than 24 + 1, measured 1% more instructions on KWS: the per-line
     * work of a second full tile outweighs one odd pixel.) */
    const int32_t most = (int32_t)((ctx->size / (3 * 4) - 2) & ~(size_t)1);
    const int32_t tile = kiln_min_i32(most, (g.out_len + 1) / 2 * 2);
    int32_t tiles = (g.out_len + tile - 1) / tile;
    /* An odd line whose last pixel's third tap is padding past it (SAME): its ring
     * stops before that tap (short, px2_last), one column instead of three; a last
     * tile of one such pixel joins the tile before it, whose ring then holds it
     * (KWS's 25-pixel columns in tiles of 24: one tile of 25, not 24 + 1). */
    const int short_last = (g.out_len & 1) && g.out_len + 1 - g.len_pad >= g.in_len;
    if (short_last && tiles > 1 && g.out_len - (tiles - 1) * tile == 1) {
        --tiles;
    }
    uint32_t *ring = (uint32_t *)ctx->buf;
    /* The input zero point in every byte: what padding reads. */
    const uint32_t zp4 = (uint32_t)(uint8_t)(int8_t)(-p->input_offset) * UINT32_C(0x01010101);
    const size_t image_bytes = (size_t)input_dims->h * in_row;
    const size_t out_bytes = (size_t)output_dims->h * out_row;
    /* The fast instance: no clamp but SSAT's and act_min at the zero point (a
     * RELU with the output zero point at -128, as MLPerf Tiny's models have); any
     * other clamp takes the clamping one. */
    const int relu = p->activation.min == -128 && p->activation.max == 127 &&
                     p->output_offset == -128;
    for (int32_t b = 0; b < input_dims->n; ++b) {
        const int8_t *image = input + (size_t)b * image_bytes;
        int8_t *out = output + (size_t)b * out_bytes;
        for (int32_t c = 0; c < in_c; c += 4) {
            const int32_t lanes = kiln_min_i32(4, in_c - c);
            px2_pass_t s[2];
            if (lanes < 4) {
                px2_setup_tail(filter, bias, quant, tap, line, p->input_offset, c, lanes, s);
            } else {
                px2_setup(filter, bias, quant, tap, line, p->input_offset, c, s);
            }
            for (int32_t t = 0; t < tiles; ++t) {
                const int32_t ti = reverse ? tiles - 1 - t : t;
                g.x0 = ti * tile;
                g.tw = ti < tiles - 1 ? tile : g.out_len - g.x0;
                g.cols = short_last && g.x0 + g.tw == g.out_len ? g.tw + 1
                                                                : ring_cols(g.tw);
                int8_t *o = out + (size_t)g.x0 * g.out_pix + (size_t)c;
                if (relu && lanes == 4) {
                    px2_block_relu(&g, image, c, s, ring, o, zp4);
                } else {
                    px2_block_any(&g, image, c, lanes, s, ring, o, zp4);
                }
            }
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_dwconv2d_3x3_px2_s8(const kiln_context_t *ctx,
                                       const kiln_dwconv_params_t *params,
                                       const kiln_requant_packed_t *quant,
                                       const kiln_dims_t *input_dims, const int8_t *input,
                                       const kiln_dims_t *filter_dims, const int8_t *filter,
                                       const int32_t *bias,
                                       const kiln_dims_t *output_dims, int8_t *output)
{
    return px2_run(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                   output_dims, output, 0, 0);
}

int32_t kiln_dwconv2d_3x3_px2v_s8_get_buffer_size(const kiln_dims_t *output_dims)
{
    return output_dims == NULL ? 0 : 3 * 4 * ring_cols(output_dims->h);
}

kiln_status_t kiln_dwconv2d_3x3_px2v_s8(const kiln_context_t *ctx,
                                        const kiln_dwconv_params_t *params,
                                        const kiln_requant_packed_t *quant,
                                        const kiln_dims_t *input_dims, const int8_t *input,
                                        const kiln_dims_t *filter_dims, const int8_t *filter,
                                        const int32_t *bias,
                                        const kiln_dims_t *output_dims, int8_t *output)
{
    return px2_run(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                   output_dims, output, 1, 0);
}

/*
 * The banded twin (inplace.h). When the output sits a whole number of rows from
 * the input (each output byte over the input byte of its own channel and column)
 * and no band copies its input, the whole layer is one call: a block of channels
 * reads and writes only its own channels, and within a block the ring holds every
 * input pixel of a tile of rows before any output row of the tile is written;
 * tiles go in the bands' order, so a tile reads only rows that the bands before
 * it could not have overwritten (the planner's bound puts the output at least
 * two rows from the input). Otherwise band by band, as conv_inplace.c does.
 */
kiln_status_t kiln_dwconv2d_3x3_px2v_banded_s8(const kiln_band_params_t *band,
                                               const kiln_context_t *ctx,
                                               const kiln_dwconv_params_t *params,
                                               const kiln_requant_packed_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int8_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int8_t *filter, const int32_t *bias,
                                               const kiln_dims_t *output_dims, int8_t *output)
{
    if (band == NULL || band->rows < 1 || band->flat || ctx == NULL || params == NULL ||
        input_dims == NULL || output_dims == NULL || filter_dims == NULL || input == NULL ||
        output == NULL || input_dims->n != 1 || output_dims->n != 1 ||
        !kiln_dims_valid(input_dims) || !kiln_dims_valid(output_dims) ||
        !kiln_conv_params_valid(&params->conv) || filter_dims->h != 3) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const size_t in_row = (size_t)input_dims->w * (size_t)input_dims->c;
    const size_t out_row = (size_t)output_dims->w * (size_t)output_dims->c;
    const intptr_t delta = (intptr_t)output - (intptr_t)input;
    const size_t gap = (size_t)(delta < 0 ? -delta : delta);
    /* Apart, or two rows or more in the bands' direction (the argument above). */
    const int apart = gap >= (size_t)input_dims->h * in_row;
    const int ahead = band->reverse ? delta > 0 : delta < 0;
    if (!band->copy && in_row == out_row && gap % in_row == 0 &&
        (apart || (ahead && gap >= 2 * in_row))) {
        return px2_run(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                       output_dims, output, 1, band->reverse);
    }
    const int32_t copy = kiln_band_copy_bytes(band, p, input_dims, 3, output_dims);
    if (copy > 0 && (ctx->buf == NULL || ctx->size < copy)) {
        return KILN_ERR_ARG;
    }
    const int32_t count = kiln_band_count(band, output_dims->h);
    for (int32_t i = 0; i < count; ++i) {
        kiln_band_t b;
        kiln_band_rows(band, p, input_dims->h, 3, output_dims->h,
                       band->reverse ? count - 1 - i : i, &b);
        kiln_dwconv_params_t bp = *params;
        bp.conv.padding.h = b.pad_top;
        kiln_dims_t in_dims = *input_dims;
        kiln_dims_t out_dims = *output_dims;
        in_dims.h = b.in_rows;
        out_dims.h = b.out_rows;
        const int8_t *in = input + (size_t)b.in_row * in_row;
        if (copy > 0) {
            memcpy(ctx->buf, in, (size_t)b.in_rows * in_row);
            in = (const int8_t *)ctx->buf;
        }
        const kiln_context_t kctx = {(int8_t *)ctx->buf + copy, ctx->size - copy};
        const kiln_status_t status =
            px2_run(&kctx, &bp, quant, &in_dims, in, filter_dims, filter, bias, &out_dims,
                    output + (size_t)b.out_row * out_row, 1, 0);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}
