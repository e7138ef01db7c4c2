/*
 * dwconv_3x3_px2.c - DEPTHWISE_CONV_2D with a 3x3 filter, depth multiplier 1,
 * no dilation, horizontal stride 1 (any vertical stride), any padding, any
 * number of channels, reading the model's int8 filter as it is (1HWC):
 * kiln_dwconv2d_3x3_px2_s8. Semantics and layouts in conv.h, primitives in
 * conv_dsp.h.
 *
 * A channel at a time over a ring of three widened input lines. Channels go in
 * passes of two, the SXTB16 lanes of a word of four, (c0, c2) then (c1, c3):
 * each input line a pass needs is widened once into the ring, one int16 plane a
 * channel, each word two neighbouring pixels (x[2m], x[2m + 1]) of the line
 * (ring pixels from the tile's first tap; padding pixels hold the input zero
 * point). Then, per channel, its six weight pairs a = (w0, w1) and b = (w1, w2)
 * of the three filter rows stay in registers for every pixel pair of the line:
 *   out[2j]     += a . word j  + w2 * lane0(word j + 1)      SMLAD, SMLABT
 *   out[2j + 1] += w0 * lane1(word j) + b . word j + 1      SMLATB, SMLAD
 * a filter row in four MAC instructions a pair, nine MACs a pixel in six (the
 * scheme of dwconv_3x3_planes.c, whose planes hold the whole map: here a ring
 * that rolls down the lines, so big maps need no more scratch than three lines).
 * A plane's word m of ring slot k (the slot holding input line iy: iy mod 3) sits
 * at word 3m + k, so a pair's three filter rows are three consecutive words (one
 * LDM) and the next word's three the next three; slot k holds filter row
 * (k + rot) % 3 of an output line, so the weight pairs come from row rot on
 * (rows 0, 1, 2, 0, 1 in a table).
 *
 * Padding costs nothing per pixel: with the bias folded (bias + input_offset *
 * sum of the channel's taps) a padded tap adds w * (zero point + input_offset) =
 * 0 as in TFLM. The ring holds a tile of the output pixels of a line (the whole
 * line, or as many as the scratch holds: the tile is the tuning knob), rounded
 * up to even, plus 2. An odd tile's last pixel goes on its own (at the end of
 * the line loop, px2_last in C); where its third tap is the padding past the line (SAME) the ring stops before
 * that tap (tw + 1 pixels) and its bias carries the tap instead, so a tile of 24
 * holds KWS's 25-pixel columns whole. The ring of a pass of two channels is
 * 2 * 3 * 2 bytes a pixel, the bytes of the int8 ring of four channels it
 * replaces (kiln_dwconv2d_3x3_px2_s8_get_buffer_size unchanged). On QEMU
 * mps2-an386 (assembly line loop and fill): 2.43 instructions a MAC on KWS's
 * 25x5x64 layers (px2v), 2.21 on VWW's 48x48x8, 2.25 on its 24x24x32; of KWS's
 * 175 k a layer the pixel pairs take 1.5 a MAC, the fill about 0.4.
 *
 * The requantization is kiln_dw_output (conv_dsp.h), its per-channel constants
 * derived once per pass from the packed table (TFLite's int32 multiplier and int8
 * shift: five bytes of flash a channel, kiln_dw_rq_packed), and the bias the same way
 * from int32 or, where every channel's fits, int16 (quant->bias16: KWS -512 B).
 *
 * Overflow: the compiler checks |bias| + 256 * sum|w| < 2^31 per channel
 * (conv.h); the folded bias is at most |bias| + 128 * sum|w| and each partial
 * sum of w * x is at most 128 * sum|w|.
 */
#include "conv_dsp.h"
#include "inplace.h"

/* Pixels of one ring line: out_w rounded up to even, plus the two the last pair
 * reads past its first tap. */
static int32_t ring_cols(int32_t out_w)
{
    return (out_w + 1) / 2 * 2 + 2;
}

/* The ring of whole lines; a smaller scratch (at least 48 bytes) makes the kernel
 * go in tiles of the output pixels it holds. */
int32_t kiln_dwconv2d_3x3_px2_s8_get_buffer_size(const kiln_dims_t *output_dims)
{
    return output_dims == NULL ? 0 : 3 * 4 * ring_cols(output_dims->w);
}

/*
 * One channel of a pass. w: (a, b) of filter rows 0, 1, 2, 0, 1 (a = (w0, w1),
 * b = (w1, w2) as int16 pairs), the line loop's weights for rotation rot from
 * w[2 * rot]. Then what the assembly line loop reads, in its order:
 * multiplier2, rsk = right_shift | k << 8 (an ASR by a register shifts by its low
 * byte, right_shift 1..30, and rsk >> 8 is k), the output bytes from a pixel to
 * the next along the line, the folded bias twice, the output bytes of the tile's
 * pairs, and the tile's last pixel: last (0: the tile is even; 1: odd, its ring
 * short; 2: odd) and its bias (in a short ring the pixel's third taps are the
 * zero point the ring does not hold: bias + input_offset * the sum of its w0 and
 * w1 only, bias_short); whether the tile's pairs are odd, and the bytes from this
 * channel's plane to the next one's (its px2_chan_t next in the array, its
 * output one byte pair on), 0 for the pass's last channel.
 */
typedef struct {
    uint32_t w[10];
    int32_t multiplier2;
    uint32_t rsk;
    uint32_t step;
    int32_t bias[2];
    uint32_t pair_bytes;
    uint32_t last;
    int32_t last_bias;
    int32_t bias_short;
    uint32_t odd_pairs;         /* the tile's pairs are odd */
    uint32_t next;              /* bytes to the next channel's plane; 0: the last */
} px2_chan_t;

/*
 * What every line of a layer shares. Pairs run along one axis of the image and
 * the ring's slots along the other: rows of pixels along x (kiln_dwconv2d_3x3_px2_s8),
 * or columns of pixels along y (kiln_dwconv2d_3x3_px2v_s8, the same code on the
 * transposed image, with the filter's taps transposed too).
 */
typedef struct {
    const kiln_conv_params_t *p;
    int32_t in_lines, in_len;   /* input lines, and pixels along a line */
    int32_t out_lines, out_len;
    int32_t line_stride, line_pad, len_pad;     /* the pair axis has stride 1 */
    size_t in_pix, in_line;     /* input bytes from a pixel to the next along a line,
                                 * and from a line to the next */
    size_t out_pix, out_line;
    int32_t x0, tw;             /* the tile: output pixels [x0, x0 + tw) of each line */
    int32_t cols;               /* ring_cols(tw), or tw + 1 short (px2_last) */
} px2_layer_t;

/* Input pixel word (four channels from c, or the `lanes` there are, zero above). */
static KILN_ALWAYS_INLINE uint32_t px2_load(const int8_t *x, int32_t lanes)
{
    if (lanes == 4) {
        return kiln_load_s8x4(x);
    }
    uint32_t v = 0;
    for (int32_t l = 0; l < lanes; ++l) {
        v |= (uint32_t)(uint8_t)x[l] << (8 * l);
    }
    return v;
}

#if defined(__ARM_FEATURE_DSP) && defined(__thumb2__)
#if defined(__clang__)
#define PX2_NAKED __attribute__((naked, noinline))
#else
#define PX2_NAKED __attribute__((naked, noinline, noipa))
#endif
#define PX2_ARG __attribute__((unused))

/*
 * The line loop in assembly for the full-range RELU at the output zero point -128
 * (MLPerf Tiny's layers), every channel of a pass: fourteen registers live (the six
 * weight pairs, two accumulators, three plane words, the plane, the output and its
 * end), 28.5 instructions a pair of pixels (18 MACs, two pairs an iteration), then
 * an odd tile's last pixel. Arguments: plane (the first channel's, word 0 of slot
 * 0), out, rot (bytes from w[0] to the line's rotation, 8 * rot) and ch (the pass's
 * first px2_chan_t). Without TFLite's rounding correction of a negative product r:
 * then both r >> right_shift and its corrected twin are <= -1, so 2 * that + k
 * (k = 1 + 2 * -128) halves to below -128 either way and SSAT makes it -128.
 */
#define PX2_PAIR                                                                 \
    "ldrd r10, r11, [sp, #12]\n\t"      /* bias, bias */                         \
    "ldm r0!, {r3, r12, lr}\n\t"        /* word j of slots 0, 1, 2 */            \
    "smlad r10, r3, r4, r10\n\t"                                                 \
    "smlatb r11, r3, r4, r11\n\t"                                                \
    "smlad r10, r12, r6, r10\n\t"                                                \
    "smlatb r11, r12, r6, r11\n\t"                                               \
    "smlad r10, lr, r8, r10\n\t"                                                 \
    "smlatb r11, lr, r8, r11\n\t"                                                \
    "ldm r0, {r3, r12, lr}\n\t"         /* word j + 1 */                         \
    "smlabt r10, r3, r5, r10\n\t"                                                \
    "smlad r11, r3, r5, r11\n\t"                                                 \
    "smlabt r10, r12, r7, r10\n\t"                                               \
    "smlad r11, r12, r7, r11\n\t"                                                \
    "smlabt r10, lr, r9, r10\n\t"                                                \
    "smlad r11, lr, r9, r11\n\t"                                                 \
    "ldm sp, {r3, r12, lr}\n\t"         /* multiplier2, rsk, step */             \
    "smmlar r10, r10, r3, r10\n\t"                                               \
    "smmlar r11, r11, r3, r11\n\t"                                               \
    "asr r10, r10, r12\n\t"                                                      \
    "asr r11, r11, r12\n\t"                                                      \
    "add r10, r10, r12, asr #8\n\t"                                              \
    "add r11, r11, r12, asr #8\n\t"                                              \
    "ssat r10, #8, r10, asr #1\n\t"                                              \
    "ssat r11, #8, r11, asr #1\n\t"                                              \
    "strb r10, [r1]\n\t"                                                         \
    "strb r11, [r1, lr]\n\t"                                                     \
    "add r1, r1, lr, lsl #1\n\t"

PX2_NAKED static void px2_line_relu(PX2_ARG const uint32_t *plane, PX2_ARG int8_t *out,
                                    PX2_ARG uint32_t rot, PX2_ARG const px2_chan_t *ch)
{
    __asm__ volatile(
        "push {r4-r11, lr}\n\t"
        "sub sp, sp, #36\n\t"       /* [sp]: multiplier2, rsk, step, bias, bias, then
                                     * ch, plane, out, rot */
        "str r2, [sp, #32]\n\t"
        "0:\n\t"
        "strd r0, r1, [sp, #24]\n\t"
        "str r3, [sp, #20]\n\t"
        "add r2, r2, r3\n\t"
        "ldm r2, {r4-r9}\n\t"               /* a0 b0 a1 b1 a2 b2 */
        "ldr r2, [r3, #60]\n\t"
        "add r2, r2, r1\n\t"                /* the pairs' end */
        "add r3, r3, #40\n\t"
        "ldm r3, {r3, r10, r11, r12, lr}\n\t"
        "stm sp, {r3, r10, r11, r12, lr}\n\t"
        "ldr r3, [sp, #20]\n\t"
        "ldr r3, [r3, #76]\n\t"             /* odd_pairs */
        "cmp r1, r2\n\t"
        "beq 2f\n\t"
        "cmp r3, #0\n\t"
        "bne 5f\n\t"
        "1:\n\t"
        PX2_PAIR
        "5:\n\t"
        PX2_PAIR
        "cmp r1, r2\n\t"
        "bne 1b\n\t"
        "2:\n\t"
        "ldr r3, [sp, #20]\n\t"
        "ldrd r10, r12, [r3, #64]\n\t"      /* last, last_bias */
        "cmp r10, #0\n\t"
        "beq 4f\n\t"
        "ldm r0, {r3, r11, lr}\n\t"         /* word j of slots 0, 1, 2 */
        "smlad r12, r3, r4, r12\n\t"
        "smlad r12, r11, r6, r12\n\t"
        "smlad r12, lr, r8, r12\n\t"
        "cmp r10, #1\n\t"
        "beq 3f\n\t"                        /* short: no third taps */
        "add r0, r0, #12\n\t"
        "ldm r0, {r3, r11, lr}\n\t"         /* word j + 1 */
        "smlabt r12, r3, r5, r12\n\t"
        "smlabt r12, r11, r7, r12\n\t"
        "smlabt r12, lr, r9, r12\n\t"
        "3:\n\t"
        "ldrd r3, r10, [sp]\n\t"
        "smmlar r12, r12, r3, r12\n\t"
        "asr r12, r12, r10\n\t"
        "add r12, r12, r10, asr #8\n\t"
        "ssat r12, #8, r12, asr #1\n\t"
        "strb r12, [r1]\n\t"
        "4:\n\t"
        "ldr r3, [sp, #20]\n\t"
        "ldr r2, [r3, #80]\n\t"             /* next */
        "cmp r2, #0\n\t"
        "beq 6f\n\t"
        "ldrd r0, r1, [sp, #24]\n\t"
        "add r0, r0, r2\n\t"
        "add r1, r1, #2\n\t"
        "add r3, r3, #84\n\t"               /* sizeof (px2_chan_t) */
        "ldr r2, [sp, #32]\n\t"
        "b 0b\n\t"
        "6:\n\t"
        "add sp, sp, #36\n\t"
        "pop {r4-r11, pc}\n\t");
}
#undef PX2_PAIR

/*
 * px2_fill for a block of four channels: line (the input line at the block's first
 * channel; NULL: a padding line), q (ring slot's word 0 of the lo plane) and the
 * tile's plan words a (px2_plan_t). Bytes 0 and 2 (px2_fill_even) or 1 and 3
 * (px2_fill_odd) of each pixel's word; 9.5 instructions a word of two pixels of the
 * two channels.
 */
#define PX2_FILL_ASM(ror)                                                        \
    __asm__ volatile(                                                            \
        "push {r4-r9, lr}\n\t"                                                   \
        "ldrd r8, r12, [r2]\n\t"            /* step, hi plane offset */          \
        "ldr r9, [r2, #40]\n\t"             /* the zero point's int16 pair */    \
        "cmp r0, #0\n\t"                                                         \
        "bne 1f\n\t"                                                             \
        "ldr r3, [r2, #8]\n\t"              /* a padding line: every word */     \
        "add r3, r3, r1\n\t"                                                     \
        "0:\n\t"                                                                 \
        "str r9, [r1, r12]\n\t"                                                  \
        "str r9, [r1], #12\n\t"                                                  \
        "cmp r1, r3\n\t"                                                         \
        "bne 0b\n\t"                                                             \
        "pop {r4-r9, pc}\n\t"                                                    \
        "1:\n\t"                                                                 \
        "ldrd r3, r4, [r2, #24]\n\t"        /* lo_part: (zero point, pixel) */   \
        "cmp r3, #0\n\t"                                                         \
        "blt 2f\n\t"                                                             \
        "ldr r4, [r0, r4]\n\t"                                                   \
        "sxtb16 r4, r4" ror "\n\t"                                               \
        "pkhbt r6, r9, r4, lsl #16\n\t"                                          \
        "pkhbt r7, r9, r4\n\t"                                                   \
        "add r3, r3, r1\n\t"                                                     \
        "str r7, [r3, r12]\n\t"                                                  \
        "str r6, [r3]\n\t"                                                       \
        "2:\n\t"                                                                 \
        "ldrd r3, r4, [r2, #32]\n\t"        /* hi_part: (pixel, zero point) */   \
        "cmp r3, #0\n\t"                                                         \
        "blt 3f\n\t"                                                             \
        "ldr r4, [r0, r4]\n\t"                                                   \
        "sxtb16 r4, r4" ror "\n\t"                                               \
        "pkhbt r6, r4, r9, lsl #16\n\t"                                          \
        "pkhtb r7, r9, r4, asr #16\n\t"                                          \
        "add r3, r3, r1\n\t"                                                     \
        "str r7, [r3, r12]\n\t"                                                  \
        "str r6, [r3]\n\t"                                                       \
        "3:\n\t"                                                                 \
        "ldrd r3, r4, [r2, #12]\n\t"        /* the image words' offsets in q */  \
        "cmp r3, r4\n\t"                                                         \
        "beq 9f\n\t"                                                             \
        "ldr r5, [r2, #20]\n\t"                                                  \
        "add r0, r0, r5\n\t"                                                     \
        "add r2, r1, r4\n\t"                                                     \
        "add r1, r1, r3\n\t"                                                     \
        "sub r4, r4, r3\n\t"                /* 12 * words: bit 2 their parity */ \
        "add r3, r8, r8, lsl #1\n\t"        /* 3 * step */                       \
        "tst r4, #4\n\t"                                                         \
        "beq 4f\n\t"                                                             \
        "ldr r4, [r0]\n\t"                  /* an odd count's first word */      \
        "ldr r5, [r0, r8]\n\t"                                                   \
        "add r0, r0, r8, lsl #1\n\t"                                             \
        "sxtb16 r4, r4" ror "\n\t"                                               \
        "sxtb16 r5, r5" ror "\n\t"                                               \
        "pkhbt r6, r4, r5, lsl #16\n\t"                                          \
        "pkhtb r7, r5, r4, asr #16\n\t"                                          \
        "str r7, [r1, r12]\n\t"                                                  \
        "str r6, [r1], #12\n\t"                                                  \
        "cmp r1, r2\n\t"                                                         \
        "beq 9f\n\t"                                                             \
        "4:\n\t"                            /* two words (four pixels) a turn */ \
        "ldr r4, [r0]\n\t"                                                       \
        "ldr r5, [r0, r8]\n\t"                                                   \
        "ldr r9, [r0, r8, lsl #1]\n\t"                                           \
        "ldr lr, [r0, r3]\n\t"                                                   \
        "add r0, r0, r8, lsl #2\n\t"                                             \
        "sxtb16 r4, r4" ror "\n\t"                                               \
        "sxtb16 r5, r5" ror "\n\t"                                               \
        "pkhbt r6, r4, r5, lsl #16\n\t"     /* lo: (pixel 0, pixel 1) */         \
        "pkhtb r7, r5, r4, asr #16\n\t"     /* hi */                             \
        "str r7, [r1, r12]\n\t"                                                  \
        "str r6, [r1], #12\n\t"                                                  \
        "sxtb16 r9, r9" ror "\n\t"                                               \
        "sxtb16 lr, lr" ror "\n\t"                                               \
        "pkhbt r6, r9, lr, lsl #16\n\t"                                          \
        "pkhtb r7, lr, r9, asr #16\n\t"                                          \
        "str r7, [r1, r12]\n\t"                                                  \
        "str r6, [r1], #12\n\t"                                                  \
        "cmp r1, r2\n\t"                                                         \
        "bne 4b\n\t"                                                             \
        "9:\n\t"                                                                 \
        "pop {r4-r9, pc}\n\t")

PX2_NAKED static void px2_fill_even(PX2_ARG const int8_t *line, PX2_ARG uint32_t *q,
                                    PX2_ARG const uint32_t *a)
{
    PX2_FILL_ASM("");
}

PX2_NAKED static void px2_fill_odd(PX2_ARG const int8_t *line, PX2_ARG uint32_t *q,
                                   PX2_ARG const uint32_t *a)
{
    PX2_FILL_ASM(", ror #8");
}
#undef PX2_FILL_ASM
#define PX2_ASM 1
#endif

/* Two pixel words' SXTB16 lanes (odd: bytes 1 and 3) as the int16 pair of each
 * channel: *lo = (v0's lane 0, v1's lane 0), *hi = (v0's lane 1, v1's lane 1). */
static KILN_ALWAYS_INLINE void px2_widen(uint32_t v0, uint32_t v1, int odd, uint32_t *lo,
                                         uint32_t *hi)
{
    const uint32_t e0 = odd ? kiln_sxtb16_ror8(v0) : kiln_sxtb16(v0);
    const uint32_t e1 = odd ? kiln_sxtb16_ror8(v1) : kiln_sxtb16(v1);
    *lo = (e0 & 0xffffu) | (e1 << 16);
    *hi = (e0 >> 16) | (e1 & 0xffff0000u);
}

/* A tile's fill: where the image falls in a ring line, and what every fill of the
 * tile shares. Words [m_lo, m_hi) hold two image pixels; lo_part: word m_lo - 1
 * holds (zero point, image pixel at x_lo); hi_part: word m_hi holds (image pixel
 * at x_hi, zero point); every other word the zero point twice, whatever the line
 * (px2_tile writes them once a tile). x: input bytes from the line's pixel 0 (at
 * the block's channel c) to word m_lo's first pixel. */
typedef struct {
    const px2_layer_t *g;
    const int8_t *image;        /* the batch's image at the block's first channel */
    uint32_t *ring;
    int32_t words, m_lo, m_hi;
    int32_t pad, lo, hi;        /* ring pixel i is input pixel i - pad; [lo, hi) the image */
    int lo_part, hi_part;
    int32_t lanes;
    int odd;                    /* the pass's SXTB16 lanes: bytes 1 and 3 */
    uint32_t zp4;               /* the input zero point in every byte */
    size_t hi_off;              /* words from the lo plane to the hi one */
    size_t x, x_lo, x_hi;
    /* px2_fill_even / _odd's (bytes): step, 4 * hi_off, a slot's words (12 * words),
     * the image words' first and end in q (12 * m_lo, 12 * m_hi), x, lo_part's word
     * in q (-1: none) and x_lo, hi_part's and x_hi, the zero point's int16 pair. */
    uint32_t a[11];
} px2_plan_t;

static void px2_plan(const px2_layer_t *g, px2_plan_t *f)
{
    /* Ring pixel i is input pixel i - pad; ring pixels [lo, hi) are in the image. */
    const int32_t pad = g->len_pad - g->x0;
    const int32_t lo = kiln_min_i32(kiln_max_i32(pad, 0), g->cols);
    const int32_t hi = kiln_max_i32(kiln_min_i32(pad + g->in_len, g->cols), lo);
    f->g = g;
    f->pad = pad;
    f->lo = lo;
    f->hi = hi;
    f->words = g->cols / 2;
    f->m_lo = (lo + 1) / 2;
    f->m_hi = kiln_max_i32(hi / 2, f->m_lo);
    f->lo_part = (lo & 1) && lo < hi;
    f->hi_part = (hi & 1) && lo < hi;     /* never lo_part's word: that has hi even */
    f->hi_off = 3 * (size_t)f->words;
    f->x = (size_t)kiln_max_i32(2 * f->m_lo - pad, 0) * g->in_pix;
    f->x_lo = (size_t)kiln_max_i32(lo - pad, 0) * g->in_pix;
    f->x_hi = (size_t)kiln_max_i32(hi - 1 - pad, 0) * g->in_pix;
    f->a[0] = (uint32_t)g->in_pix;
    f->a[1] = (uint32_t)(4 * f->hi_off);
    f->a[2] = 12u * (uint32_t)f->words;
    f->a[3] = 12u * (uint32_t)f->m_lo;
    f->a[4] = 12u * (uint32_t)f->m_hi;
    f->a[5] = (uint32_t)f->x;
    f->a[6] = f->lo_part ? 12u * (uint32_t)(f->m_lo - 1) : UINT32_MAX;
    f->a[7] = (uint32_t)f->x_lo;
    f->a[8] = f->hi_part ? 12u * (uint32_t)f->m_hi : UINT32_MAX;
    f->a[9] = (uint32_t)f->x_hi;
}

/*
 * Input line iy of the pass's two channels into ring slot `slot` of both planes (a
 * padding line: every word the zero point), a pixel at a time: the C twin of
 * px2_fill_even / _odd, and the fill of a last block of C % 4 channels.
 */
static KILN_NOINLINE void px2_fill(const px2_plan_t *f, int32_t iy, int32_t slot)
{
    const int image = iy >= 0 && iy < f->g->in_lines;
    const int8_t *line = f->image + (image ? (size_t)iy * f->g->in_line : 0);
    uint32_t *q = f->ring + slot;
    for (int32_t i = 0; i < 2 * f->words; i += 2, q += 3) {
        uint32_t v[2];
        for (int32_t h = 0; h < 2; ++h) {
            v[h] = image && i + h >= f->lo && i + h < f->hi
                       ? px2_load(line + (size_t)(i + h - f->pad) * f->g->in_pix, f->lanes)
                       : f->zp4;
        }
        px2_widen(v[0], v[1], f->odd, &q[0], &q[f->hi_off]);
    }
}

/* px2_fill, or its assembly twin for a block of four channels (every block when
 * relu_only: C a multiple of four). */
static KILN_ALWAYS_INLINE void px2_fill_line(const px2_plan_t *f, int32_t iy, int32_t slot,
                                             int relu_only)
{
#if defined(PX2_ASM)
    if (relu_only || f->lanes == 4) {
        const int8_t *line =
            iy < 0 || iy >= f->g->in_lines ? NULL : f->image + (size_t)iy * f->g->in_line;
        (f->odd ? px2_fill_odd : px2_fill_even)(line, f->ring + slot, f->a);
        return;
    }
#else
    (void)relu_only;
#endif
    px2_fill(f, iy, slot);
}

/* The generic line loop: a channel's pairs of a tile's line, plane at word 0 of
 * the ring (slot 0), w its weights from the line's rotation, any clamp. */
static KILN_NOINLINE void px2_line_c(const uint32_t *plane, const uint32_t *w,
                                     const px2_chan_t *ch, int8_t *out, int32_t pairs,
                                     int32_t act_min, int32_t act_max)
{
    const size_t step = ch->step;
    const int32_t rs = (int32_t)(ch->rsk & 0xffu);
    const int32_t k = (int32_t)ch->rsk >> 8;
    for (int32_t j = 0; j < pairs; ++j, plane += 3, out += 2 * step) {
        int32_t e = ch->bias[0];
        int32_t o = ch->bias[1];
        for (int32_t s = 0; s < 3; ++s) {
            const uint32_t x0 = plane[s];
            const uint32_t x1 = plane[3 + s];
            const uint32_t a = w[2 * s];
            const uint32_t b = w[2 * s + 1];
            e = kiln_smlad(x0, a, e);
#if defined(__ARM_FEATURE_DSP)
            e = __smlabt((int32_t)x1, (int32_t)b, e);
            o = __smlatb((int32_t)x0, (int32_t)a, o);
#else
            e += kiln_lane0(x1) * kiln_lane1(b);
            o += kiln_lane1(x0) * kiln_lane0(a);
#endif
            o = kiln_smlad(x1, b, o);
        }
        out[0] = kiln_dw_output(e, ch->multiplier2, rs, k, act_min, act_max, 0);
        out[step] = kiln_dw_output(o, ch->multiplier2, rs, k, act_min, act_max, 0);
    }
}


/* The last pixel of an odd tile's line, on its own: per slot a . word j plus w2 *
 * lane0(word j + 1), or in a short ring (the pixel's third taps are padding past
 * the line, which the ring stops before) bias_short and no third taps. */
static KILN_NOINLINE void px2_last(const uint32_t *r, const uint32_t *w, const px2_chan_t *ch,
                                   int8_t *out, int ring_short, int32_t act_min,
                                   int32_t act_max)
{
    int32_t e = ring_short ? ch->bias_short : ch->bias[0];
    for (int32_t s = 0; s < 3; ++s) {
        e = kiln_smlad(r[s], w[2 * s], e);
        if (!ring_short) {
#if defined(__ARM_FEATURE_DSP)
            e = __smlabt((int32_t)r[3 + s], (int32_t)w[2 * s + 1], e);
#else
            e += kiln_lane0(r[3 + s]) * kiln_lane1(w[2 * s + 1]);
#endif
        }
    }
    *out = kiln_dw_output(e, ch->multiplier2, (int32_t)(ch->rsk & 0xffu),
                          (int32_t)ch->rsk >> 8, act_min, act_max, 0);
}

/*
 * Every output line of the tile for a pass of `n` channels (ch; out at the tile's
 * first pixel of line 0 in the first one's channel, the second's two channels on):
 * each line first brings the input lines it needs into the ring. relu: the
 * assembly loop applies. relu_only (a constant, relu then 1): C a multiple of four too,
 * so that with the assembly no C line loop, last pixel or fill is reached (or linked).
 */
static KILN_ALWAYS_INLINE void px2_tile_body(const px2_layer_t *g, const int8_t *image,
                                             int32_t lanes, int odd, const px2_chan_t *ch,
                                             int32_t n, uint32_t *ring, int8_t *out,
                                             uint32_t zp4, int relu, int relu_only)
{
    const kiln_conv_params_t *p = g->p;
    const int32_t act_min = p->activation.min;
    const int32_t act_max = p->activation.max;
    const int32_t pairs = g->tw / 2;
    px2_plan_t f;
    px2_plan(g, &f);
    f.image = image;
    f.ring = ring;
    f.lanes = lanes;
    f.odd = odd;
    f.zp4 = zp4;
    f.a[10] = kiln_sxtb16(zp4);
    const size_t plane_words = f.hi_off;
    /* The words no image pixel reaches: the zero point in every slot of both planes. */
    const uint32_t zp2 = kiln_sxtb16(zp4);
    for (size_t i = 0; i < 3 * (size_t)(f.m_lo - f.lo_part); ++i) {
        ring[i] = zp2;
        ring[plane_words + i] = zp2;
    }
    for (size_t i = 3 * (size_t)(f.m_hi + f.hi_part); i < plane_words; ++i) {
        ring[i] = zp2;
        ring[plane_words + i] = zp2;
    }
#if defined(PX2_ASM)
    const int32_t n_c = relu ? 0 : n;       /* the channels the C loop runs */
#else
    const int32_t n_c = n;
    (void)relu;
#endif
    /* held[k]: the input line in ring slot k (lines below -3 never are). At vertical
     * stride 1 each line after the first brings one new input line. */
    int32_t held[3] = {INT32_MIN, INT32_MIN, INT32_MIN};
    int32_t iy0 = -g->line_pad;
    /* Input line iy sits in slot (iy + 3) % 3 (iy >= -3: padding <= 3 lines). */
    int32_t slot0 = (iy0 + 3) % 3;
    const int stride1 = g->line_stride == 1;
    if (stride1) {
        px2_fill_line(&f, iy0, slot0, relu_only);
        px2_fill_line(&f, iy0 + 1, slot0 == 2 ? 0 : slot0 + 1, relu_only);
    }
    for (int32_t oy = 0; oy < g->out_lines; ++oy, iy0 += g->line_stride, out += g->out_line) {
        if (stride1) {
            px2_fill_line(&f, iy0 + 2, slot0 == 0 ? 2 : slot0 - 1, relu_only);
        } else {
            slot0 = (iy0 + 3) % 3;
            for (int32_t ky = 0, slot = slot0; ky < 3; ++ky, slot = slot == 2 ? 0 : slot + 1) {
                if (held[slot] != iy0 + ky) {
                    px2_fill_line(&f, iy0 + ky, slot, relu_only);
                    held[slot] = iy0 + ky;
                }
            }
        }
        /* Slot k holds filter row (k + rot) % 3 with rot = (3 - slot0) % 3. */
        const int32_t rot = slot0 == 0 ? 0 : 3 - slot0;
#if defined(PX2_ASM)
        if (relu) {
            px2_line_relu(ring, out, 8u * (uint32_t)rot, ch);
        }
#endif
        for (int32_t i = 0; i < n_c; ++i) {
            const uint32_t *plane = ring + (size_t)i * plane_words;
            const uint32_t *w = ch[i].w + 2 * rot;
            int8_t *o = out + 2 * i;
            px2_line_c(plane, w, &ch[i], o, pairs, act_min, act_max);
            if (g->tw & 1) {
                px2_last(plane + 3 * (size_t)pairs, w, &ch[i],
                         o + (size_t)(2 * pairs) * g->out_pix, ch[i].last == 1, act_min,
                         act_max);
            }
        }
        if (stride1) {
            slot0 = slot0 == 2 ? 0 : slot0 + 1;
        }
    }
}

/* Any layer. */
static KILN_NOINLINE void px2_tile(const px2_layer_t *g, const int8_t *image, int32_t lanes,
                                   int odd, const px2_chan_t *ch, int32_t n, uint32_t *ring,
                                   int8_t *out, uint32_t zp4, int relu)
{
    px2_tile_body(g, image, lanes, odd, ch, n, ring, out, zp4, relu, 0);
}

/* The _relu entry points' (px2_run_relu has checked relu and C). */
static KILN_NOINLINE void px2_tile_relu(const px2_layer_t *g, const int8_t *image,
                                        int32_t lanes, int odd, const px2_chan_t *ch,
                                        int32_t n, uint32_t *ring, int8_t *out, uint32_t zp4)
{
    px2_tile_body(g, image, lanes, odd, ch, n, ring, out, zp4, 1, 1);
}

#if defined(__ARM_FEATURE_DSP)
/* (lane0(a), lane0(b)) and (lane1(a), lane1(b)). */
static inline uint32_t px2_pack_lo(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

static inline uint32_t px2_pack_hi(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(b), "r"(a));
    return r;
}
#else
static inline uint32_t px2_pack_lo(uint32_t a, uint32_t b)
{
    return (a & 0xffffu) | (b << 16);
}

static inline uint32_t px2_pack_hi(uint32_t a, uint32_t b)
{
    return (a >> 16) | (b & 0xffff0000u);
}
#endif

/* The weights, folded biases and requantization of the `n` channels of pass j of the
 * block of `lanes` channels at c (c + j, c + j + 2), a word of four taps at a time (the
 * filter's taps `tap` bytes apart along the pair axis, its rows `line` apart along the
 * slot axis: C and 3 * C for rows of pairs, the other way round for columns):
 * SXTB16 (lanes j) splits a filter word into the pass's two channels and PKH regroups
 * them by channel; the sums of the taps as int16 lanes (|sum| <= 9 * 128). The model's
 * biases come from `bias`, or where it is NULL from quant->bias16. */
static void px2_setup(const int8_t *filter, const int32_t *bias,
                      const kiln_requant_packed_t *quant, size_t tap, size_t line,
                      int32_t input_offset, int32_t k, int32_t c, int32_t lanes, int j,
                      int32_t n, px2_chan_t *s)
{
    uint32_t sum = 0;
    uint32_t sum01 = 0;
    for (int32_t ky = 0; ky < 3; ++ky) {
        const int8_t *f = filter + (size_t)ky * line + (size_t)c;
        const uint32_t v0 = px2_load(f, lanes);
        const uint32_t v1 = px2_load(f + tap, lanes);
        const uint32_t v2 = px2_load(f + 2 * tap, lanes);
        const uint32_t e0 = j ? kiln_sxtb16_ror8(v0) : kiln_sxtb16(v0);
        const uint32_t e1 = j ? kiln_sxtb16_ror8(v1) : kiln_sxtb16(v1);
        const uint32_t e2 = j ? kiln_sxtb16_ror8(v2) : kiln_sxtb16(v2);
        s[0].w[2 * ky] = px2_pack_lo(e0, e1);         /* (w0, w1) */
        s[0].w[2 * ky + 1] = px2_pack_lo(e1, e2);     /* (w1, w2) */
        s[1].w[2 * ky] = px2_pack_hi(e0, e1);
        s[1].w[2 * ky + 1] = px2_pack_hi(e1, e2);
        const uint32_t e01 = kiln_sadd16(e0, e1);
        sum01 = kiln_sadd16(sum01, e01);
        sum = kiln_sadd16(sum, kiln_sadd16(e01, e2));
    }
    for (int32_t i = 0; i < n; ++i, sum >>= 16, sum01 >>= 16) {
        const int32_t ch = c + j + 2 * i;
        memcpy(&s[i].w[6], &s[i].w[0], 4 * sizeof s[i].w[0]);
        const kiln_dw_rq_t rq = kiln_dw_rq_packed(quant, ch);
        s[i].multiplier2 = rq.multiplier2;
        s[i].rsk = (uint32_t)rq.right_shift | (uint32_t)k << 8;
        const int32_t b = bias != NULL ? bias[ch] : quant->bias16[ch];
        s[i].bias[0] = s[i].bias[1] = b + input_offset * (int16_t)(uint16_t)sum;
        s[i].bias_short = b + input_offset * (int16_t)(uint16_t)sum01;
    }
}

/* Both kernels: pairs along x (vertical = 0) or along y (vertical = 1); tiles of
 * the pair axis last to first when reverse (a banded call over its own input).
 * relu_only (a constant): the _relu entry points', whose layers this checks; their
 * blocks are all of four channels, their tiles px2_tile_relu. */
static KILN_ALWAYS_INLINE kiln_status_t
px2_run_body(const kiln_context_t *ctx, const kiln_dwconv_params_t *params,
             const kiln_requant_packed_t *quant, const kiln_dims_t *input_dims,
             const int8_t *input, const kiln_dims_t *filter_dims, const int8_t *filter,
             const int32_t *bias, const kiln_dims_t *output_dims, int8_t *output, int vertical,
             int reverse, int relu_only)
{
    if (ctx == NULL || ctx->buf == NULL || params == NULL ||
        !kiln_conv_params_valid(&params->conv) || params->depth_multiplier != 1 ||
        !kiln_requant_packed_valid(quant) || input == NULL || filter == NULL ||
        (bias == NULL) == (quant->bias16 == NULL) || output == NULL ||
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
    px2_layer_t g = {.p = p};
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
    /* The assembly line loop: no clamp but SSAT's and act_min at the zero point (a
     * RELU with the output zero point at -128, as MLPerf Tiny's models have); any
     * other clamp takes the C one. */
    const int relu = p->activation.min == -128 && p->activation.max == 127 &&
                     p->output_offset == -128;
    if (relu_only && (!relu || in_c % 4 != 0)) {
        return KILN_ERR_ARG;
    }
    const int32_t k = 1 + 2 * p->output_offset;
    for (int32_t b = 0; b < input_dims->n; ++b) {
        const int8_t *image = input + (size_t)b * image_bytes;
        int8_t *out = output + (size_t)b * out_bytes;
        for (int32_t c = 0; c < in_c; c += 4) {
            const int32_t lanes = relu_only ? 4 : kiln_min_i32(4, in_c - c);
            /* Pass j: channels c + j and c + j + 2 (if there), SXTB16 lanes j. */
            for (int32_t j = 0; j < 2 && j < lanes; ++j) {
                px2_chan_t ch[2];
                const int32_t n = j + 2 < lanes ? 2 : 1;
                px2_setup(filter, bias, quant, tap, line, p->input_offset, k, c, lanes, j, n,
                          ch);
                ch[0].step = ch[1].step = (uint32_t)g.out_pix;
                for (int32_t t = 0; t < tiles; ++t) {
                    const int32_t ti = reverse ? tiles - 1 - t : t;
                    g.x0 = ti * tile;
                    g.tw = ti < tiles - 1 ? tile : g.out_len - g.x0;
                    g.cols = short_last && g.x0 + g.tw == g.out_len ? g.tw + 1
                                                                    : ring_cols(g.tw);
                    const uint32_t last = (g.tw & 1) == 0 ? 0u : g.cols == g.tw + 1 ? 1u : 2u;
                    for (int32_t i = 0; i < n; ++i) {
                        ch[i].pair_bytes = (uint32_t)(g.tw / 2) * 2u * (uint32_t)g.out_pix;
                        ch[i].last = last;
                        ch[i].last_bias = last == 1 ? ch[i].bias_short : ch[i].bias[0];
                        ch[i].odd_pairs = (uint32_t)(g.tw / 2) & 1u;
                        ch[i].next = i + 1 < n ? 4u * 3u * (uint32_t)(g.cols / 2) : 0u;
                    }
                    int8_t *o = out + (size_t)g.x0 * g.out_pix + (size_t)(c + j);
                    if (relu_only) {
                        px2_tile_relu(&g, image + c, lanes, j, ch, n, ring, o, zp4);
                    } else {
                        px2_tile(&g, image + c, lanes, j, ch, n, ring, o, zp4, relu);
                    }
                }
            }
        }
    }
    return KILN_OK;
}

typedef kiln_status_t (*px2_run_fn)(const kiln_context_t *ctx,
                                    const kiln_dwconv_params_t *params,
                                    const kiln_requant_packed_t *quant,
                                    const kiln_dims_t *input_dims, const int8_t *input,
                                    const kiln_dims_t *filter_dims, const int8_t *filter,
                                    const int32_t *bias, const kiln_dims_t *output_dims,
                                    int8_t *output, int vertical, int reverse);

static KILN_NOINLINE kiln_status_t px2_run(const kiln_context_t *ctx,
                                           const kiln_dwconv_params_t *params,
                                           const kiln_requant_packed_t *quant,
                                           const kiln_dims_t *input_dims, const int8_t *input,
                                           const kiln_dims_t *filter_dims,
                                           const int8_t *filter, const int32_t *bias,
                                           const kiln_dims_t *output_dims, int8_t *output,
                                           int vertical, int reverse)
{
    return px2_run_body(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                        output_dims, output, vertical, reverse, 0);
}

static KILN_NOINLINE kiln_status_t px2_run_relu(const kiln_context_t *ctx,
                                                const kiln_dwconv_params_t *params,
                                                const kiln_requant_packed_t *quant,
                                                const kiln_dims_t *input_dims,
                                                const int8_t *input,
                                                const kiln_dims_t *filter_dims,
                                                const int8_t *filter, const int32_t *bias,
                                                const kiln_dims_t *output_dims,
                                                int8_t *output, int vertical, int reverse)
{
    return px2_run_body(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                        output_dims, output, vertical, reverse, 1);
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

kiln_status_t kiln_dwconv2d_3x3_px2_relu_s8(const kiln_context_t *ctx,
                                            const kiln_dwconv_params_t *params,
                                            const kiln_requant_packed_t *quant,
                                            const kiln_dims_t *input_dims, const int8_t *input,
                                            const kiln_dims_t *filter_dims,
                                            const int8_t *filter, const int32_t *bias,
                                            const kiln_dims_t *output_dims, int8_t *output)
{
    return px2_run_relu(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
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

kiln_status_t kiln_dwconv2d_3x3_px2v_relu_s8(const kiln_context_t *ctx,
                                             const kiln_dwconv_params_t *params,
                                             const kiln_requant_packed_t *quant,
                                             const kiln_dims_t *input_dims, const int8_t *input,
                                             const kiln_dims_t *filter_dims,
                                             const int8_t *filter, const int32_t *bias,
                                             const kiln_dims_t *output_dims, int8_t *output)
{
    return px2_run_relu(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
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
static kiln_status_t px2v_banded(const kiln_band_params_t *band, const kiln_context_t *ctx,
                                 const kiln_dwconv_params_t *params,
                                 const kiln_requant_packed_t *quant,
                                 const kiln_dims_t *input_dims, const int8_t *input,
                                 const kiln_dims_t *filter_dims, const int8_t *filter,
                                 const int32_t *bias, const kiln_dims_t *output_dims,
                                 int8_t *output, px2_run_fn run)
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
        return run(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
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
            kiln_copy_bytes(ctx->buf, in, (size_t)b.in_rows * in_row);
            in = (const int8_t *)ctx->buf;
        }
        const kiln_context_t kctx = {(int8_t *)ctx->buf + copy, ctx->size - copy};
        const kiln_status_t status =
            run(&kctx, &bp, quant, &in_dims, in, filter_dims, filter, bias, &out_dims,
                output + (size_t)b.out_row * out_row, 1, 0);
        if (status != KILN_OK) {
            return status;
        }
    }
    return KILN_OK;
}

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
    return px2v_banded(band, ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                       output_dims, output, px2_run);
}

kiln_status_t kiln_dwconv2d_3x3_px2v_relu_banded_s8(const kiln_band_params_t *band,
                                                    const kiln_context_t *ctx,
                                                    const kiln_dwconv_params_t *params,
                                                    const kiln_requant_packed_t *quant,
                                                    const kiln_dims_t *input_dims,
                                                    const int8_t *input,
                                                    const kiln_dims_t *filter_dims,
                                                    const int8_t *filter,
                                                    const int32_t *bias,
                                                    const kiln_dims_t *output_dims,
                                                    int8_t *output)
{
    return px2v_banded(band, ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                       output_dims, output, px2_run_relu);
}
