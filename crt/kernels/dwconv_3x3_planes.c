/*
 * dwconv_3x3_planes.c - DEPTHWISE_CONV_2D with a 3x3 filter, depth multiplier
 * 1, no dilation, horizontal stride 1 or 2 (any vertical stride), any padding,
 * any number of channels: kiln_dwconv2d_3x3_planes_s8, for small maps and
 * stride 2 (VWW's 12x12 to 3x3 layers). Semantics in conv.h, primitives in
 * conv_dsp.h.
 *
 * Channels outermost, pixels inside. A block of four channels is widened once
 * into four int16 planes in scratch, one a channel: each word two horizontally
 * adjacent input pixels (x + input_offset) of the channel, the padding a ring
 * of zeros (written once per call; the image part is rewritten per block), so
 * no tap tests the image's bounds and the bias is used as given. Then, per
 * channel, its six weight pairs (w0, w1) and (w1, w2) per filter row stay in
 * registers for all output pixels: a filter row is two instructions a pixel,
 * nine MACs in six (SMLAD on a word, SMLABT/SMLATB on the half it shares with
 * the next pixel):
 *   stride 2, pixel ox:      SMLAD(word ox, (w0, w1)) + SMLABT(word ox + 1, (w1, w2))
 *   stride 1, pixel 2j:      SMLAD(word j, (w0, w1))  + SMLABT(word j + 1, (w1, w2))
 *   stride 1, pixel 2j + 1:  SMLATB(word j, (w0, w1)) + SMLAD(word j + 1, (w1, w2))
 * (the words in plane columns counted from output 0's first tap).
 *
 * Overflow: |w * (x + input_offset)| <= 255 |w|; the compiler checks
 * |bias| + 256 * sum|w| < 2^31 per channel (conv.h), and each SMLAD's partial
 * sum is a prefix of that sum.
 */
#include "conv_dsp.h"

#if defined(__ARM_FEATURE_DSP)
static inline int32_t smlabt(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlabt((int32_t)a, (int32_t)b, acc);
}

static inline int32_t smlatb(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlatb((int32_t)a, (int32_t)b, acc);
}

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
static inline int32_t smlabt(uint32_t a, uint32_t b, int32_t acc)
{
    return acc + kiln_lane0(a) * kiln_lane1(b);
}

static inline int32_t smlatb(uint32_t a, uint32_t b, int32_t acc)
{
    return acc + kiln_lane1(a) * kiln_lane0(b);
}

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

/* A plane's rows: the input rows the outputs read, from output 0's first tap. Its
 * rows are PLANE_RW words (the assembly loops reach the three filter rows by
 * immediate offsets), of which the outputs read the first
 * ((W - 1) * stride_w + 3 + 1) / 2: whole words plus the word the last pixel's
 * SMLABT reads past an odd column count. */
#define PLANE_RW 16
#define PLANES_STATIC_ASSERT(c) ((void)sizeof(char[(c) ? 1 : -1]))

static int32_t plane_rows(int32_t out_h, int32_t stride_h)
{
    return (out_h - 1) * stride_h + 3;
}

static int32_t plane_row_words(int32_t out_w, int32_t stride_w)
{
    return ((out_w - 1) * stride_w + 3 + 1) / 2;
}

int32_t kiln_dwconv2d_3x3_planes_s8_get_buffer_size(const kiln_conv_params_t *params,
                                                    const kiln_dims_t *output_dims)
{
    if (params == NULL || output_dims == NULL || output_dims->h < 1 || output_dims->w < 1 ||
        params->stride.h < 1 || params->stride.w < 1 || params->stride.w > 2 ||
        output_dims->w > 2 * PLANE_RW ||
        plane_row_words(output_dims->w, params->stride.w) > PLANE_RW) {
        return 0;
    }
    return 4 * 4 * PLANE_RW * plane_rows(output_dims->h, params->stride.h);
}

#if defined(__ARM_FEATURE_DSP) && defined(__thumb2__)
/* Naked (the body is the whole function) and opaque to GCC's interprocedural
 * analysis, so it assumes the call reads `ch` and the plane and writes `out`. */
#if defined(__clang__)
#define PLANES_NAKED __attribute__((naked, noinline))
#else
#define PLANES_NAKED __attribute__((naked, noinline, noipa))
#endif
#define PLANES_ARG __attribute__((unused))

/*
 * The full-range loops in assembly: fourteen registers live (GCC's version of the
 * loops above keeps the weights and requantization constants in stack slots,
 * about 34 instructions a pixel where these take 19, and 32 a pair). Arguments:
 * p (word 0 of the first output row's first plane row; the filter's other rows
 * 16 and 32 words on), out, out_end (past the last output byte written) and the
 * channel's constants `ch`. Output rows follow each other in memory (HWC), so out
 * steps by C throughout; p skips to the next plane row at each row's end.
 * The requantization is kiln_dw_output's with right_shift and k in one register,
 * rsk = right_shift | k << 8: ASR by a register shifts by its low byte
 * (right_shift, 1..30), and rsk >> 8 (arithmetic) is k, as right_shift < 256.
 *
 * Stride 2, a pixel a time: ch = {(w00, w01), (w10, w11), (w20, w21), (w02, w12),
 * (w22, 0), multiplier2, rsk, C, bias, bytes of an output row, bytes p skips at a
 * row's end}.
 */
PLANES_NAKED static void rows_s2(PLANES_ARG const uint32_t *p, PLANES_ARG int8_t *out,
                                 PLANES_ARG const int8_t *out_end,
                                 PLANES_ARG const uint32_t *ch)
{
    __asm__ volatile(
        "push {r4-r11, lr}\n\t"
        "add r12, r3, #32\n\t"
        "ldm r12, {r4-r6}\n\t"
        "push {r2, r4-r6}\n\t"              /* [sp]: out_end, bias, row bytes, skip */
        "ldm r3, {r4-r11}\n\t"
        "2:\n\t"
        "ldr r2, [sp, #8]\n\t"
        "add r2, r2, r1\n\t"                /* the row's end */
        "1:\n\t"
        "ldr lr, [sp, #4]\n\t"
        "ldrd r3, r12, [r0], #4\n\t"        /* filter row 0: words ox, ox + 1 */
        "smlad lr, r3, r4, lr\n\t"
        "smlabb lr, r12, r7, lr\n\t"
        "ldrd r3, r12, [r0, #60]\n\t"       /* row 1 (p has moved one word) */
        "smlad lr, r3, r5, lr\n\t"
        "smlabt lr, r12, r7, lr\n\t"
        "ldrd r3, r12, [r0, #124]\n\t"      /* row 2 */
        "smlad lr, r3, r6, lr\n\t"
        "smlabb lr, r12, r8, lr\n\t"
        "smmlar lr, lr, r9, lr\n\t"
        "add lr, lr, lr, asr #31\n\t"
        "asr lr, lr, r10\n\t"
        "add lr, lr, r10, asr #8\n\t"
        "ssat lr, #8, lr, asr #1\n\t"
        "strb lr, [r1]\n\t"
        "add r1, r1, r11\n\t"
        "cmp r1, r2\n\t"
        "bne 1b\n\t"
        "ldr r3, [sp, #12]\n\t"
        "add r0, r0, r3\n\t"
        "ldr r3, [sp]\n\t"
        "cmp r1, r3\n\t"
        "bne 2b\n\t"
        "add sp, sp, #16\n\t"
        "pop {r4-r11, pc}\n\t");
}

/* Stride 1, pixels 2j and 2j + 1 a time: ch = {(w00, w01), (w10, w11), (w20, w21),
 * (w01, w02), (w11, w12), (w21, w22), C, bias, bias, multiplier2, rsk, bytes of
 * the pairs of an output row, bytes p skips at a row's end}. */
PLANES_NAKED static void rows_s1(PLANES_ARG const uint32_t *p, PLANES_ARG int8_t *out,
                                 PLANES_ARG const int8_t *out_end,
                                 PLANES_ARG const uint32_t *ch)
{
    __asm__ volatile(
        "push {r4-r11, lr}\n\t"
        "add r12, r3, #28\n\t"
        "ldm r12, {r4-r9}\n\t"
        "push {r2, r4-r9}\n\t"  /* [sp]: out_end, bias, bias, multiplier2, rsk, row, skip */
        "ldm r3, {r4-r10}\n\t"
        "2:\n\t"
        "ldr r2, [sp, #20]\n\t"
        "add r2, r2, r1\n\t"
        "1:\n\t"
        "ldrd lr, r11, [sp, #4]\n\t"
        "ldrd r3, r12, [r0], #4\n\t"        /* filter row 0: words j, j + 1 */
        "smlad lr, r3, r4, lr\n\t"
        "smlatb r11, r3, r4, r11\n\t"
        "smlabt lr, r12, r7, lr\n\t"
        "smlad r11, r12, r7, r11\n\t"
        "ldrd r3, r12, [r0, #60]\n\t"
        "smlad lr, r3, r5, lr\n\t"
        "smlatb r11, r3, r5, r11\n\t"
        "smlabt lr, r12, r8, lr\n\t"
        "smlad r11, r12, r8, r11\n\t"
        "ldrd r3, r12, [r0, #124]\n\t"
        "smlad lr, r3, r6, lr\n\t"
        "smlatb r11, r3, r6, r11\n\t"
        "smlabt lr, r12, r9, lr\n\t"
        "smlad r11, r12, r9, r11\n\t"
        "ldrd r3, r12, [sp, #12]\n\t"       /* multiplier2, rsk */
        "smmlar lr, lr, r3, lr\n\t"
        "smmlar r11, r11, r3, r11\n\t"
        "add lr, lr, lr, asr #31\n\t"
        "add r11, r11, r11, asr #31\n\t"
        "asr lr, lr, r12\n\t"
        "asr r11, r11, r12\n\t"
        "add lr, lr, r12, asr #8\n\t"
        "add r11, r11, r12, asr #8\n\t"
        "ssat lr, #8, lr, asr #1\n\t"
        "ssat r11, #8, r11, asr #1\n\t"
        "strb lr, [r1]\n\t"
        "strb r11, [r1, r10]\n\t"
        "add r1, r1, r10, lsl #1\n\t"
        "cmp r1, r2\n\t"
        "bne 1b\n\t"
        "ldr r3, [sp, #24]\n\t"
        "add r0, r0, r3\n\t"
        "ldr r3, [sp]\n\t"
        "cmp r1, r3\n\t"
        "bne 2b\n\t"
        "add sp, sp, #28\n\t"
        "pop {r4-r11, pc}\n\t");
}

/* The image part of the planes of four channels, every image row the outputs read:
 * src (the first such row), q (its plane 0 word holding column 0, or the word
 * below when pad_w is odd), and args = {C, pw (bytes from a plane to the next),
 * (input_offset, input_offset), bytes of an input row, flags (1: pad_w is odd,
 * column 0 goes in a word's upper half; 2: a last column in a word's lower
 * half), bytes of plane words the column pairs fill, rows}. 18 instructions per
 * two pixels of four channels; a lone column's word has zeros in its other half
 * (padding, or a column no output reads). */
PLANES_NAKED static void fill_rows(PLANES_ARG const int8_t *src, PLANES_ARG uint32_t *q,
                                   PLANES_ARG int32_t unused,
                                   PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(
        "push {r4-r11, lr}\n\t"
        "add r12, r3, #12\n\t"
        "ldm r12, {r7-r10}\n\t"
        "ldm r3, {r4-r6}\n\t"               /* C, pw, offsets */
        "push {r0, r1, r7-r10}\n\t"  /* [sp]: src, q, row bytes, flags, pair bytes, rows */
        "3:\n\t"
        "ldrd r0, r1, [sp]\n\t"
        "ldr r3, [sp, #12]\n\t"
        "tst r3, #1\n\t"
        "beq 4f\n\t"
        "ldr r7, [r0]\n\t"                  /* column 0 alone, in the upper halves */
        "add r0, r0, r4\n\t"
        "sxtab16 r9, r6, r7\n\t"
        "sxtab16 r7, r6, r7, ror #8\n\t"
        "lsl r11, r9, #16\n\t"
        "lsr r12, r9, #16\n\t"
        "lsl r12, r12, #16\n\t"
        "lsl lr, r7, #16\n\t"
        "lsr r3, r7, #16\n\t"
        "lsl r3, r3, #16\n\t"
        "add r10, r1, r5\n\t"
        "str r12, [r1, r5, lsl #1]\n\t"
        "str lr, [r10]\n\t"
        "str r3, [r10, r5, lsl #1]\n\t"
        "str r11, [r1], #4\n\t"
        "4:\n\t"
        "ldr r2, [sp, #16]\n\t"
        "add r2, r2, r1\n\t"
        "cmp r1, r2\n\t"
        "beq 5f\n\t"
        "1:\n\t"
        "ldr r7, [r0]\n\t"
        "ldr r8, [r0, r4]\n\t"
        "add r0, r0, r4, lsl #1\n\t"
        "sxtab16 r9, r6, r7\n\t"            /* (c0, c2) of pixel a */
        "sxtab16 r10, r6, r8\n\t"           /* ... of pixel b */
        "sxtab16 r7, r6, r7, ror #8\n\t"    /* (c1, c3) of a */
        "sxtab16 r8, r6, r8, ror #8\n\t"
        "pkhbt r11, r9, r10, lsl #16\n\t"   /* c0: (a, b) */
        "pkhtb r12, r10, r9, asr #16\n\t"   /* c2 */
        "pkhbt lr, r7, r8, lsl #16\n\t"     /* c1 */
        "pkhtb r3, r8, r7, asr #16\n\t"     /* c3 */
        "add r9, r1, r5\n\t"
        "str r12, [r1, r5, lsl #1]\n\t"
        "str lr, [r9]\n\t"
        "str r3, [r9, r5, lsl #1]\n\t"
        "str r11, [r1], #4\n\t"
        "cmp r1, r2\n\t"
        "bne 1b\n\t"
        "5:\n\t"
        "ldr r3, [sp, #12]\n\t"
        "tst r3, #2\n\t"
        "beq 6f\n\t"
        "ldr r7, [r0]\n\t"                  /* a last column alone, lower halves */
        "sxtab16 r9, r6, r7\n\t"
        "sxtab16 r7, r6, r7, ror #8\n\t"
        "uxth r11, r9\n\t"
        "lsr r12, r9, #16\n\t"
        "uxth lr, r7\n\t"
        "lsr r3, r7, #16\n\t"
        "add r10, r1, r5\n\t"
        "str r12, [r1, r5, lsl #1]\n\t"
        "str lr, [r10]\n\t"
        "str r3, [r10, r5, lsl #1]\n\t"
        "str r11, [r1]\n\t"
        "6:\n\t"
        "ldrd r0, r1, [sp]\n\t"             /* the next row */
        "ldr r2, [sp, #8]\n\t"
        "add r0, r0, r2\n\t"
        "add r1, r1, #64\n\t"
        "strd r0, r1, [sp]\n\t"
        "ldr r3, [sp, #20]\n\t"
        "subs r3, r3, #1\n\t"
        "str r3, [sp, #20]\n\t"
        "bne 3b\n\t"
        "add sp, sp, #24\n\t"
        "pop {r4-r11, pc}\n\t");
}

#define PLANES_ASM 1
#endif

/* Channels c.. c + n - 1 (n < 4) of a pixel as a word, zero bytes above. */
static inline uint32_t load_partial(const int8_t *p, int32_t n)
{
    uint32_t v = 0;
    for (int32_t j = 0; j < n; ++j) {
        v |= (uint32_t)(uint8_t)p[j] << (8 * j);
    }
    return v;
}

static inline uint32_t load_px(const int8_t *p, int32_t n)
{
    return n == 4 ? kiln_load_s8x4(p) : load_partial(p, n);
}

/* The image part of the four planes of channels c.. c + n - 1: plane column px
 * holds input column px - pad_w; words outside the image keep their zeros. */
static void fill_planes(uint32_t *planes, int32_t plane_words, int32_t rows, int32_t rw,
                        int32_t cols, const int8_t *image, int32_t in_h, int32_t in_w, int32_t in_c,
                        int32_t pad_h, int32_t pad_w, int32_t n, uint32_t off2)
{
    /* Input columns [0, ix_end) land in the columns read (plane columns [pad_w, cols)). */
    int32_t ix_end = cols - pad_w;
    ix_end = ix_end < in_w ? ix_end : in_w;
    if (ix_end <= 0) {
        return;
    }
    const size_t pw = (size_t)plane_words;
#if defined(PLANES_ASM)
    if (n == 4) {
        /* The plane rows of image rows: [pad_h, min(rows, in_h + pad_h)). */
        const int32_t py_end = rows < in_h + pad_h ? rows : in_h + pad_h;
        if (py_end <= pad_h) {
            return;
        }
        const int32_t odd = pad_w & 1;
        const int32_t pairs = (ix_end - odd) / 2;
        const int32_t trail = (ix_end - odd) & 1;
        PLANES_STATIC_ASSERT(PLANE_RW == 16);       /* the 64-byte row step in fill_rows */
        const uint32_t args[7] = {
            (uint32_t)in_c, (uint32_t)(4 * pw), off2, (uint32_t)in_w * (uint32_t)in_c,
            (uint32_t)(odd | trail << 1), 4u * (uint32_t)pairs, (uint32_t)(py_end - pad_h)};
        fill_rows(image, planes + (size_t)pad_h * (size_t)rw + (size_t)(pad_w / 2), 0, args);
        return;
    }
#endif
    for (int32_t py = 0; py < rows; ++py) {
        const int32_t iy = py - pad_h;
        if (iy < 0 || iy >= in_h) {
            continue;
        }
        const int8_t *src = image + ((size_t)iy * (size_t)in_w) * (size_t)in_c;
        uint32_t *q = planes + (size_t)py * (size_t)rw + (size_t)(pad_w / 2);
        int32_t ix = 0;
        if (pad_w & 1) {        /* column 0 in a word's upper half, padding below */
            const uint32_t x = load_px(src, n);
            const uint32_t e = sxtab16(off2, x);
            const uint32_t o = sxtab16_ror8(off2, x);
            q[0] = e << 16;
            q[pw] = o << 16;
            q[2 * pw] = e & 0xFFFF0000u;
            q[3 * pw] = o & 0xFFFF0000u;
            ++q;
            ix = 1;
        }
        const size_t step = (size_t)in_c;
        for (; ix + 1 < ix_end; ix += 2, ++q) {
            const int8_t *s = src + (size_t)ix * step;
            const uint32_t xa = load_px(s, n);
            const uint32_t xb = load_px(s + step, n);
            const uint32_t ea = sxtab16(off2, xa);
            const uint32_t eb = sxtab16(off2, xb);
            const uint32_t oa = sxtab16_ror8(off2, xa);
            const uint32_t ob = sxtab16_ror8(off2, xb);
            q[0] = (ea & 0xFFFFu) | (eb << 16);
            q[pw] = (oa & 0xFFFFu) | (ob << 16);
            q[2 * pw] = (eb & 0xFFFF0000u) | (ea >> 16);
            q[3 * pw] = (ob & 0xFFFF0000u) | (oa >> 16);
        }
        if (ix < ix_end) {      /* a last column in a word's lower half */
            const uint32_t x = load_px(src + (size_t)ix * step, n);
            const uint32_t e = sxtab16(off2, x);
            const uint32_t o = sxtab16_ror8(off2, x);
            q[0] = e & 0xFFFFu;
            q[pw] = o & 0xFFFFu;
            q[2 * pw] = e >> 16;
            q[3 * pw] = o >> 16;
        }
    }
}

/* What one channel's pass needs. */
typedef struct {
    int32_t out_h, out_w, stride_h, rw, in_c;
    int32_t k, act_min, act_max;
} planes_layer_t;

/* All output pixels of one channel from its plane P (output 0's first tap at
 * word 0); w01[r] = (w0, w1), w12[r] = (w1, w2) of filter row r. */
static KILN_ALWAYS_INLINE void channel_s2(const planes_layer_t *g, const uint32_t *P,
                                          const uint32_t *w01, const uint32_t *w12,
                                          int32_t bias, kiln_dw_rq_t rq, int8_t *out,
                                          int full_range)
{
    const uint32_t a0 = w01[0], a1 = w01[1], a2 = w01[2];
    const uint32_t b0 = w12[0], b1 = w12[1], b2 = w12[2];
    const size_t rw = (size_t)g->rw;
    const size_t step = (size_t)g->in_c;
    const size_t row_step = (size_t)g->stride_h * rw;
    const int32_t k = g->k, act_min = g->act_min, act_max = g->act_max;
    for (int32_t oy = 0; oy < g->out_h; ++oy, P += row_step) {
        const uint32_t *r = P;
        for (int32_t ox = 0; ox < g->out_w; ++ox, ++r, out += step) {
            int32_t acc = bias;
            acc = kiln_smlad(r[0], a0, acc);
            acc = smlabt(r[1], b0, acc);
            acc = kiln_smlad(r[rw], a1, acc);
            acc = smlabt(r[rw + 1], b1, acc);
            acc = kiln_smlad(r[2 * rw], a2, acc);
            acc = smlabt(r[2 * rw + 1], b2, acc);
            *out = kiln_dw_output(acc, rq.multiplier2, rq.right_shift, k, act_min, act_max,
                                  full_range);
        }
    }
}

static KILN_ALWAYS_INLINE void channel_s1(const planes_layer_t *g, const uint32_t *P,
                                          const uint32_t *w01, const uint32_t *w12,
                                          int32_t bias, kiln_dw_rq_t rq, int8_t *out,
                                          int full_range)
{
    const uint32_t a0 = w01[0], a1 = w01[1], a2 = w01[2];
    const uint32_t b0 = w12[0], b1 = w12[1], b2 = w12[2];
    const size_t rw = (size_t)g->rw;
    const size_t step = (size_t)g->in_c;
    const size_t row_step = (size_t)g->stride_h * rw;
    const int32_t k = g->k, act_min = g->act_min, act_max = g->act_max;
    const int32_t pairs = g->out_w / 2;
    for (int32_t oy = 0; oy < g->out_h; ++oy, P += row_step) {
        const uint32_t *r = P;
        for (int32_t j = 0; j < pairs; ++j, ++r, out += 2 * step) {
            int32_t e = bias;
            int32_t o = bias;
            uint32_t x0 = r[0], x1 = r[1];
            e = kiln_smlad(x0, a0, e);
            e = smlabt(x1, b0, e);
            o = smlatb(x0, a0, o);
            o = kiln_smlad(x1, b0, o);
            x0 = r[rw];
            x1 = r[rw + 1];
            e = kiln_smlad(x0, a1, e);
            e = smlabt(x1, b1, e);
            o = smlatb(x0, a1, o);
            o = kiln_smlad(x1, b1, o);
            x0 = r[2 * rw];
            x1 = r[2 * rw + 1];
            e = kiln_smlad(x0, a2, e);
            e = smlabt(x1, b2, e);
            o = smlatb(x0, a2, o);
            o = kiln_smlad(x1, b2, o);
            out[0] = kiln_dw_output(e, rq.multiplier2, rq.right_shift, k, act_min, act_max,
                                    full_range);
            out[step] = kiln_dw_output(o, rq.multiplier2, rq.right_shift, k, act_min, act_max,
                                       full_range);
        }
        if (g->out_w & 1) {
            int32_t e = bias;
            e = kiln_smlad(r[0], a0, e);
            e = smlabt(r[1], b0, e);
            e = kiln_smlad(r[rw], a1, e);
            e = smlabt(r[rw + 1], b1, e);
            e = kiln_smlad(r[2 * rw], a2, e);
            e = smlabt(r[2 * rw + 1], b2, e);
            out[0] = kiln_dw_output(e, rq.multiplier2, rq.right_shift, k, act_min, act_max,
                                    full_range);
            out += step;
        }
    }
}


static inline uint32_t rsk_of(kiln_dw_rq_t rq, int32_t k)
{
    return (uint32_t)rq.right_shift | ((uint32_t)k << 8);
}

/* One instantiation per (stride, full_range): both constants in each. */
static KILN_NOINLINE void channel_s2_full(const planes_layer_t *g, const uint32_t *P,
                                          const uint32_t *w01, const uint32_t *w12,
                                          int32_t bias, kiln_dw_rq_t rq, int8_t *out)
{
#if defined(PLANES_ASM)
    const uint32_t row_out = (uint32_t)g->out_w * (uint32_t)g->in_c;
    const uint32_t ch[11] = {
        w01[0], w01[1], w01[2], (w12[0] >> 16) | (w12[1] & 0xFFFF0000u), w12[2] >> 16,
        (uint32_t)rq.multiplier2, rsk_of(rq, g->k), (uint32_t)g->in_c, (uint32_t)bias,
        row_out, (uint32_t)(4 * (g->stride_h * PLANE_RW - g->out_w))};
    rows_s2(P, out, out + (size_t)g->out_h * row_out, ch);
#else
    channel_s2(g, P, w01, w12, bias, rq, out, 1);
#endif
}

static KILN_NOINLINE void channel_s2_clamped(const planes_layer_t *g, const uint32_t *P,
                                             const uint32_t *w01, const uint32_t *w12,
                                             int32_t bias, kiln_dw_rq_t rq, int8_t *out)
{
    channel_s2(g, P, w01, w12, bias, rq, out, 0);
}

static KILN_NOINLINE void channel_s1_full(const planes_layer_t *g, const uint32_t *P,
                                          const uint32_t *w01, const uint32_t *w12,
                                          int32_t bias, kiln_dw_rq_t rq, int8_t *out)
{
#if defined(PLANES_ASM)
    const size_t step = (size_t)g->in_c;
    const size_t row_out = (size_t)g->out_w * step;
    const int32_t pairs = g->out_w / 2;
    const uint32_t pair_bytes = 2u * (uint32_t)pairs * (uint32_t)step;
    const uint32_t ch[13] = {
        w01[0], w01[1], w01[2], w12[0], w12[1], w12[2], (uint32_t)step, (uint32_t)bias,
        (uint32_t)bias, (uint32_t)rq.multiplier2, rsk_of(rq, g->k), pair_bytes,
        (uint32_t)(4 * (g->stride_h * PLANE_RW - pairs))};
    if ((g->out_w & 1) == 0) {      /* the rows follow each other: one call */
        rows_s1(P, out, out + (size_t)g->out_h * row_out, ch);
        return;
    }
    const int32_t k = g->k;
    for (int32_t oy = 0; oy < g->out_h; ++oy, P += (size_t)g->stride_h * PLANE_RW, out += row_out) {
        if (pairs > 0) {
            rows_s1(P, out, out + pair_bytes, ch);
        }
        /* The last pixel, even: as at stride 2. */
        const uint32_t *r = P + pairs;
        int32_t e = bias;
        e = kiln_smlad(r[0], w01[0], e);
        e = smlabt(r[1], w12[0], e);
        e = kiln_smlad(r[PLANE_RW], w01[1], e);
        e = smlabt(r[PLANE_RW + 1], w12[1], e);
        e = kiln_smlad(r[2 * PLANE_RW], w01[2], e);
        e = smlabt(r[2 * PLANE_RW + 1], w12[2], e);
        out[pair_bytes] = kiln_dw_output(e, rq.multiplier2, rq.right_shift, k, -128, 127, 1);
    }
#else
    channel_s1(g, P, w01, w12, bias, rq, out, 1);
#endif
}

static KILN_NOINLINE void channel_s1_clamped(const planes_layer_t *g, const uint32_t *P,
                                             const uint32_t *w01, const uint32_t *w12,
                                             int32_t bias, kiln_dw_rq_t rq, int8_t *out)
{
    channel_s1(g, P, w01, w12, bias, rq, out, 0);
}

typedef void (*channel_fn)(const planes_layer_t *, const uint32_t *, const uint32_t *,
                           const uint32_t *, int32_t, kiln_dw_rq_t, int8_t *);

kiln_status_t kiln_dwconv2d_3x3_planes_s8(const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_requant_packed_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int8_t *filter,
                                          const int32_t *bias,
                                          const kiln_dims_t *output_dims, int8_t *output)
{
    if (ctx == NULL || ctx->buf == NULL || ((uintptr_t)ctx->buf & 3u) != 0 || params == NULL ||
        !kiln_conv_params_valid(&params->conv) || params->depth_multiplier != 1 ||
        !kiln_requant_packed_valid(quant) || input == NULL || filter == NULL || bias == NULL ||
        output == NULL || !kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims) ||
        !kiln_conv_geometry_valid(&params->conv, input_dims, filter_dims, output_dims) ||
        input_dims->n != output_dims->n || filter_dims->n != 1 ||
        filter_dims->c != input_dims->c || output_dims->c != input_dims->c ||
        filter_dims->h != 3 || filter_dims->w != 3 || params->conv.dilation.h != 1 ||
        params->conv.dilation.w != 1 ||
        kiln_dwconv2d_3x3_planes_s8_get_buffer_size(&params->conv, output_dims) == 0 ||
        ctx->size < kiln_dwconv2d_3x3_planes_s8_get_buffer_size(&params->conv, output_dims)) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_c = input_dims->c;
    const int32_t rows = plane_rows(output_dims->h, p->stride.h);
    const int32_t rw = PLANE_RW;
    const int32_t cols = 2 * plane_row_words(output_dims->w, p->stride.w);
    const int32_t plane_words = rows * rw;
    uint32_t *planes = (uint32_t *)ctx->buf;
    memset(planes, 0, (size_t)plane_words * 4u * sizeof(uint32_t));
    const planes_layer_t g = {
        .out_h = output_dims->h, .out_w = output_dims->w, .stride_h = p->stride.h,
        .rw = rw, .in_c = in_c, .k = 1 + 2 * p->output_offset,
        .act_min = p->activation.min, .act_max = p->activation.max,
    };
    const int full_range = p->activation.min == -128 && p->activation.max == 127;
    const channel_fn run = p->stride.w == 2 ? (full_range ? channel_s2_full : channel_s2_clamped)
                                            : (full_range ? channel_s1_full : channel_s1_clamped);
    const uint32_t off2 = (uint32_t)(uint16_t)p->input_offset * 0x10001u;
    const size_t image_bytes = (size_t)input_dims->h * (size_t)input_dims->w * (size_t)in_c;
    const size_t out_bytes = (size_t)output_dims->h * (size_t)output_dims->w * (size_t)in_c;
    for (int32_t b = 0; b < input_dims->n; ++b) {
        const int8_t *image = input + (size_t)b * image_bytes;
        int8_t *out = output + (size_t)b * out_bytes;
        for (int32_t c = 0; c < in_c; c += 4) {
            const int32_t n = in_c - c < 4 ? in_c - c : 4;
            fill_planes(planes, plane_words, rows, rw, cols, image + c, input_dims->h, input_dims->w,
                        in_c, p->padding.h, p->padding.w, n, off2);
            for (int32_t j = 0; j < n; ++j) {      /* plane j: channel c + j */
                const int32_t ch = c + j;
                uint32_t w01[3];
                uint32_t w12[3];
                for (int32_t r = 0; r < 3; ++r) {
                    const int8_t *f = filter + (size_t)(3 * r) * (size_t)in_c + ch;
                    const int32_t f0 = f[0];
                    const int32_t f1 = f[in_c];
                    const int32_t f2 = f[2 * in_c];
                    w01[r] = (uint32_t)(uint16_t)f0 | ((uint32_t)(uint16_t)f1 << 16);
                    w12[r] = (uint32_t)(uint16_t)f1 | ((uint32_t)(uint16_t)f2 << 16);
                }
                run(&g, planes + (size_t)j * (size_t)plane_words, w01, w12, bias[ch],
                    kiln_dw_rq_packed(quant, ch), out + ch);
            }
        }
    }
    return KILN_OK;
}
