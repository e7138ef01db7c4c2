/*
 * dwconv_3x3_s2ring.c - DEPTHWISE_CONV_2D with a 3x3 filter, depth multiplier 1,
 * no dilation, stride 2 both ways, any padding, any number of channels, reading
 * the model's int8 filter as it is (1HWC): kiln_dwconv2d_3x3_s2ring_s8. Semantics
 * and layouts in conv.h, primitives in conv_dsp.h.
 *
 * At stride 2 output row oy reads input rows r, r + 1 and r + 2 (r = 2 oy -
 * pad_top): row r + 2 is also row 0 of the next output row, the others are read
 * by this output row only. A channel at a time, row by row, over a ring of one
 * widened line: word m of the ring holds ring pixels (2m, 2m + 1) of filter row
 * 0's input row as an int16 pair (ring pixel i is input pixel i - pad_left;
 * padding pixels hold the input zero point). Along the output row:
 *   out[ox] += (w0, w1) . ring word ox + w2 * lane0(ring word ox + 1)   SMLAD, SMLABB
 * for filter row 0, three MLAs on the middle row's int8 pixels, and for row 2
 * the same pair of its pixels (2ox, 2ox + 1), packed, SMLAD, then stored as ring
 * word ox for the next output row (word ox is read by outputs ox - 1 and ox
 * only, both done by then). So every input pixel is loaded once (twice for the
 * kept rows: from the input, then from the ring), with no separate fill pass,
 * and the scratch is one line: 4 * (out_w + 1) bytes (100 for VWW's 48x48x16 at
 * stride 2). The interior of a row (and a last output whose only padding is its
 * third column, and a last output row whose bottom row is padding) runs in
 * assembly on DSP cores for the full int8 clamp (s2ring_row_fix / _m128), the rest
 * in C; where the assembly covers whole rows (SAME with no padding left or top),
 * one call runs a channel's rows. At 16 channels with in_w = 2 out_w (VWW's
 * 48x48x16) the rows run in s2ring_rows16_fix / _m128: immediate pixel offsets and
 * unrolled pairs, 41 instructions a pair of outputs against 48 plus pointer adds
 * and loop, and the last row (bottom padding) too. On QEMU mps2-an386: 2.34
 * instructions a MAC on VWW's 24x24x16 layer from 48x48 (194,154; 2.98 with the
 * generic rows, the w8 kernel in one-row bands 4.34).
 *
 * Each channel's outputs are written in raster order (whole output rows), every
 * output after the inputs it reads (the ring's earlier): the layer may write its
 * output exactly over its input (compiler/codegen/ops/inplace.py, order_s2ring).
 *
 * Padding costs nothing per pixel: with the bias folded (bias + input_offset * sum
 * of the channel's taps) a padded tap adds w * (zero point + input_offset) = 0 as
 * in TFLM. The requantization is kiln_dw_output (conv_dsp.h), its constants from
 * the packed table (kiln_dw_rq_packed). Overflow: the compiler checks |bias| + 256
 * * sum|w| < 2^31 per channel (conv.h); the folded bias is at most |bias| + 128 *
 * sum|w| and each partial sum of w * x at most 128 * sum|w|.
 */
#include "conv_dsp.h"

/* Words of the ring: ring pixels 0 .. 2 * out_w (the last output's third tap), in
 * pairs. */
static int32_t s2ring_words(int32_t out_w)
{
    return out_w + 1;
}

int32_t kiln_dwconv2d_3x3_s2ring_s8_get_buffer_size(const kiln_dims_t *output_dims)
{
    return output_dims == NULL ? 0 : 4 * s2ring_words(output_dims->w);
}

/* (lane0(a), lane0(b)) as an int16 pair. */
static KILN_ALWAYS_INLINE uint32_t s2ring_pack(int32_t a, int32_t b)
{
    return ((uint32_t)a & 0xffffu) | ((uint32_t)b << 16);
}

/* One channel: the filter rows' taps, rows 0 and 2's (w0, w1) as int16 pairs, the
 * folded bias, the requantization. */
typedef struct {
    int32_t w[9];
    uint32_t a0, a2;
    int32_t bias;
    kiln_dw_rq_t rq;
} s2ring_chan_t;

/* What every row of a layer shares. */
typedef struct {
    int32_t in_h, in_w, out_w, pad_l, pad_t;
    size_t pix;                 /* input and output bytes from a pixel to the next */
    int32_t zp;                 /* the input zero point */
    int32_t ox_lo, ox_hi;       /* outputs whose taps along x are all in the image */
    int32_t k, act_min, act_max, full;
    int32_t asm_end;            /* the assembly row's outputs: [ox_lo, asm_end) */
    uint32_t asm_flags;         /* its s2ring_asm_t flags */
} s2ring_layer_t;

/* Pixel ix of a row at this channel (NULL: a padding row), the zero point outside. */
static KILN_ALWAYS_INLINE int32_t s2ring_px(const s2ring_layer_t *g, const int8_t *row,
                                            int32_t ix)
{
    return row != NULL && ix >= 0 && ix < g->in_w ? row[(size_t)ix * g->pix] : g->zp;
}

/* Ring word m of a row at this channel (NULL: a padding row): its pixels 2m - pad_left
 * and + 1, the second the zero point in the last word (no output's tap). */
static void s2ring_ring_word(const s2ring_layer_t *g, uint32_t *ring, const int8_t *row,
                             int32_t m)
{
    const int32_t ix = 2 * m - g->pad_l;
    ring[m] = s2ring_pack(s2ring_px(g, row, ix), m < g->out_w ? s2ring_px(g, row, ix + 1) : g->zp);
}

/* Output ox where some of its taps along x (or a whole row) may be padding. */
static KILN_NOINLINE void s2ring_edge(const s2ring_layer_t *g, uint32_t *ring,
                                      const int8_t *mid, const int8_t *bot,
                                      const s2ring_chan_t *ch, int8_t *out, int32_t ox)
{
    const int32_t ix = 2 * ox - g->pad_l;
    int32_t acc = kiln_smlad(ring[ox], ch->a0, ch->bias);
    acc = kiln_smlabb(ring[ox + 1], (uint32_t)ch->w[2], acc);
    for (int32_t kx = 0; kx < 3; ++kx) {
        acc += s2ring_px(g, mid, ix + kx) * ch->w[3 + kx];
    }
    const int32_t b0 = s2ring_px(g, bot, ix);
    const int32_t b1 = s2ring_px(g, bot, ix + 1);
    const uint32_t pair = s2ring_pack(b0, b1);
    acc = kiln_smlad(pair, ch->a2, acc);
    acc += s2ring_px(g, bot, ix + 2) * ch->w[8];
    ring[ox] = pair;
    out[(size_t)ox * g->pix] = kiln_dw_output(acc, ch->rq.multiplier2, ch->rq.right_shift,
                                              g->k, g->act_min, g->act_max, g->full);
}

#if defined(__ARM_FEATURE_DSP) && defined(__thumb2__)
#if defined(__clang__)
#define S2RING_NAKED __attribute__((naked, noinline))
#else
#define S2RING_NAKED __attribute__((naked, noinline, noipa))
#endif
#define S2RING_ARG __attribute__((unused))

/* What the assembly row keeps on its stack (s2ring_asm_t, word offsets x 4). */
enum {
    S2_BIAS = 0, S2_A0 = 4, S2_W0212 = 8, S2_BIAS2 = 12, S2_A1 = 16, S2_A2 = 20, S2_W22 = 24,
    S2_MULT = 28, S2_RSK = 32, S2_END = 36, S2_PIX = 40, S2_BIAS_SHORT = 44, S2_FLAGS = 48,
    S2_ROWS = 52, S2_IN_STEP = 56, S2_OUT_STEP = 60
};

/*
 * The interior of an output row in assembly, for the full int8 clamp: q (ring word
 * ox), xm and xb (the middle and bottom rows' pixel 2ox - pad_left at this channel),
 * out (output ox) and k (s2ring_asm_t: the weights as pairs, a0 = (w00, w01), w0212 =
 * (w02, w12), a1 = (w10, w11), a2 = (w20, w21) and w22, the folded bias,
 * multiplier2, rsk = right_shift | k << 8, the ring's end after the pairs, pix, the
 * bias of a short last pixel, flags, then rows: output rows to run, each the
 * last one's pointers plus in_step (two input rows) and out_step (one output row),
 * the ring from its start again). Flag 1: first one output on its own (an odd
 * count); then pairs of outputs (ox, ox + 1) until q reaches end; flag 2: then a
 * last output whose third column of taps is padding past the row (SAME), without
 * those taps (bias_short: the bias less their zero-point products), as px2_last.
 * Nine registers hold the pointers, pix and the carried pixels 2ox of the middle
 * and bottom rows; seven the sums, pixels and weights of the turn, the rest coming
 * from the stack by LDM / LDRD (the metric counts instructions: a load of several
 * words is one). A pair takes 48 instructions: 18 MACs, 8 LDRSB and 4 PKHBT (the
 * middle and bottom rows' pixels), 3 loads of ring words and 2 stores, 14 for the
 * requantization (kiln_dw_output's) and stores, the rest pointers and loop.
 * S2RING_FIX is the rounding correction of a negative product, which the variant
 * without it leaves out where the output zero point is -128 (then both the corrected
 * and uncorrected values halve to -128 or less, as in px2_line_relu).
 */
#define S2RING_REQ(acc, FIX)                                                    \
    "ldrd r4, r5, [sp, #28]\n\t"        /* multiplier2, rsk */                  \
    "smmlar " acc ", " acc ", r4, " acc "\n\t"                                  \
    FIX                                                                         \
    "asr " acc ", " acc ", r5\n\t"                                              \
    "add " acc ", " acc ", r5, asr #8\n\t"                                      \
    "ssat " acc ", #8, " acc ", asr #1\n\t"

#define S2RING_ROW_ASM(FIX7, FIXLR)                                             \
    __asm__ volatile(                                                           \
        "push {r4-r11, lr}\n\t"                                                 \
        "ldr r12, [sp, #36]\n\t"            /* k */                             \
        "sub sp, sp, #80\n\t"                                                   \
        "ldm r12!, {r4-r11}\n\t"                                                \
        "stm sp, {r4-r11}\n\t"                                                  \
        "ldm r12, {r4-r11}\n\t"             /* rsk .. flags, rows, steps */     \
        "add r12, sp, #32\n\t"                                                  \
        "stm r12, {r4-r11}\n\t"                                                 \
        "ldr r9, [sp, #40]\n\t"             /* pix */                           \
        "0:\n\t"                            /* an output row */                 \
        "add r12, sp, #64\n\t"                                                  \
        "stm r12, {r0-r3}\n\t"              /* where it starts */               \
        "ldrsb r10, [r1]\n\t"                                                   \
        "ldrsb r11, [r2]\n\t"                                                   \
        "ldr r8, [sp, #48]\n\t"             /* flags */                         \
        "tst r8, #1\n\t"                                                        \
        "beq 2f\n\t"                                                            \
        "ldm r0, {r4, r5}\n\t"              /* one output: ring words ox, ox+1 */ \
        "ldrd r7, r8, [sp, #0]\n\t"         /* bias, a0 */                      \
        "ldr r12, [sp, #8]\n\t"             /* w0212 */                         \
        "smlad r7, r4, r8, r7\n\t"                                              \
        "smlabb r7, r5, r12, r7\n\t"                                            \
        "ldrsb r4, [r1, r9]\n\t"                                                \
        "ldrsb r5, [r1, r9, lsl #1]\n\t"                                        \
        "add r1, r1, r9, lsl #1\n\t"                                            \
        "pkhbt r10, r10, r4, lsl #16\n\t"                                       \
        "ldr r6, [sp, #16]\n\t"             /* a1 */                            \
        "smlad r7, r10, r6, r7\n\t"                                             \
        "smlabt r7, r5, r12, r7\n\t"                                            \
        "mov r10, r5\n\t"                                                       \
        "ldrsb r4, [r2, r9]\n\t"                                                \
        "ldrsb r5, [r2, r9, lsl #1]\n\t"                                        \
        "add r2, r2, r9, lsl #1\n\t"                                            \
        "pkhbt r11, r11, r4, lsl #16\n\t"                                       \
        "str r11, [r0], #4\n\t"                                                 \
        "ldrd r6, r12, [sp, #20]\n\t"       /* a2, w22 */                       \
        "smlad r7, r11, r6, r7\n\t"                                             \
        "smlabb r7, r5, r12, r7\n\t"                                            \
        "mov r11, r5\n\t"                                                       \
        S2RING_REQ("r7", FIX7)                                                  \
        "strb r7, [r3]\n\t"                                                     \
        "add r3, r3, r9\n\t"                                                    \
        "2:\n\t"                                                                \
        "ldr r4, [sp, #36]\n\t"             /* end */                           \
        "cmp r0, r4\n\t"                                                        \
        "beq 3f\n\t"                                                            \
        "1:\n\t"                                                                \
        "ldm r0, {r4, r5, r6}\n\t"          /* ring words ox .. ox + 2 */       \
        "ldm sp, {r7, r8, r12, lr}\n\t"     /* bias, a0, w0212, bias */         \
        "smlad r7, r4, r8, r7\n\t"                                              \
        "smlabb r7, r5, r12, r7\n\t"                                            \
        "smlad lr, r5, r8, lr\n\t"                                              \
        "smlabb lr, r6, r12, lr\n\t"                                            \
        "ldrsb r4, [r1, r9]\n\t"            /* middle row: pixels 1 .. 3 */     \
        "ldrsb r5, [r1, r9, lsl #1]\n\t"                                        \
        "add r1, r1, r9, lsl #1\n\t"                                            \
        "ldrsb r6, [r1, r9]\n\t"                                                \
        "pkhbt r10, r10, r4, lsl #16\n\t"                                       \
        "pkhbt r4, r5, r6, lsl #16\n\t"                                         \
        "ldr r6, [sp, #16]\n\t"             /* a1 */                            \
        "smlad r7, r10, r6, r7\n\t"                                             \
        "smlabt r7, r5, r12, r7\n\t"                                            \
        "smlad lr, r4, r6, lr\n\t"                                              \
        "ldrsb r10, [r1, r9, lsl #1]\n\t"   /* pixel 4: the next turn's 0 */    \
        "add r1, r1, r9, lsl #1\n\t"                                            \
        "smlabt lr, r10, r12, lr\n\t"                                           \
        "ldrsb r4, [r2, r9]\n\t"            /* bottom row: pixels 1 .. 3 */     \
        "ldrsb r5, [r2, r9, lsl #1]\n\t"                                        \
        "add r2, r2, r9, lsl #1\n\t"                                            \
        "ldrsb r6, [r2, r9]\n\t"                                                \
        "pkhbt r11, r11, r4, lsl #16\n\t"                                       \
        "pkhbt r4, r5, r6, lsl #16\n\t"                                         \
        "strd r11, r4, [r0], #8\n\t"        /* the next row's ring words */     \
        "ldrd r6, r12, [sp, #20]\n\t"       /* a2, w22 */                       \
        "smlad r7, r11, r6, r7\n\t"                                             \
        "smlabb r7, r5, r12, r7\n\t"                                            \
        "smlad lr, r4, r6, lr\n\t"                                              \
        "ldrsb r11, [r2, r9, lsl #1]\n\t"   /* pixel 4 */                       \
        "add r2, r2, r9, lsl #1\n\t"                                            \
        "smlabb lr, r11, r12, lr\n\t"                                           \
        "ldrd r4, r5, [sp, #28]\n\t"        /* multiplier2, rsk */              \
        "smmlar r7, r7, r4, r7\n\t"                                             \
        "smmlar lr, lr, r4, lr\n\t"                                             \
        FIX7                                                                    \
        FIXLR                                                                   \
        "asr r7, r7, r5\n\t"                                                    \
        "asr lr, lr, r5\n\t"                                                    \
        "add r7, r7, r5, asr #8\n\t"                                            \
        "add lr, lr, r5, asr #8\n\t"                                            \
        "ssat r7, #8, r7, asr #1\n\t"                                           \
        "ssat lr, #8, lr, asr #1\n\t"                                           \
        "strb r7, [r3]\n\t"                                                     \
        "strb lr, [r3, r9]\n\t"                                                 \
        "add r3, r3, r9, lsl #1\n\t"                                            \
        "ldr r4, [sp, #36]\n\t"             /* end */                           \
        "cmp r0, r4\n\t"                                                        \
        "bne 1b\n\t"                                                            \
        "3:\n\t"                                                                \
        "ldr r4, [sp, #48]\n\t"             /* flags */                         \
        "tst r4, #2\n\t"                                                        \
        "beq 4f\n\t"                                                            \
        "ldr r4, [r0]\n\t"                  /* a short last output */           \
        "ldr r7, [sp, #44]\n\t"             /* bias_short */                    \
        "ldr r8, [sp, #4]\n\t"                                                  \
        "smlad r7, r4, r8, r7\n\t"                                              \
        "ldrsb r4, [r1, r9]\n\t"                                                \
        "pkhbt r10, r10, r4, lsl #16\n\t"                                       \
        "ldr r6, [sp, #16]\n\t"                                                 \
        "smlad r7, r10, r6, r7\n\t"                                             \
        "ldrsb r4, [r2, r9]\n\t"                                                \
        "pkhbt r11, r11, r4, lsl #16\n\t"                                       \
        "str r11, [r0]\n\t"                                                     \
        "ldr r6, [sp, #20]\n\t"                                                 \
        "smlad r7, r11, r6, r7\n\t"                                             \
        S2RING_REQ("r7", FIX7)                                                  \
        "strb r7, [r3]\n\t"                                                     \
        "4:\n\t"                                                                \
        "ldr r4, [sp, #52]\n\t"             /* rows left */                     \
        "subs r4, r4, #1\n\t"                                                   \
        "beq 5f\n\t"                                                            \
        "str r4, [sp, #52]\n\t"                                                 \
        "add r12, sp, #64\n\t"                                                  \
        "ldm r12, {r0-r3}\n\t"                                                  \
        "ldrd r4, r5, [sp, #56]\n\t"        /* input, output steps */           \
        "add r1, r1, r4\n\t"                                                    \
        "add r2, r2, r4\n\t"                                                    \
        "add r3, r3, r5\n\t"                                                    \
        "b 0b\n\t"                                                              \
        "5:\n\t"                                                                \
        "add sp, sp, #80\n\t"                                                   \
        "pop {r4-r11, pc}\n\t")

S2RING_NAKED static void s2ring_row_fix(S2RING_ARG uint32_t *q, S2RING_ARG const int8_t *xm,
                                        S2RING_ARG const int8_t *xb, S2RING_ARG int8_t *out,
                                        S2RING_ARG const uint32_t *k)
{
    S2RING_ROW_ASM("add r7, r7, r7, asr #31\n\t", "add lr, lr, lr, asr #31\n\t");
}

S2RING_NAKED static void s2ring_row_m128(S2RING_ARG uint32_t *q, S2RING_ARG const int8_t *xm,
                                         S2RING_ARG const int8_t *xb, S2RING_ARG int8_t *out,
                                         S2RING_ARG const uint32_t *k)
{
    S2RING_ROW_ASM("", "");
}

/*
 * Whole rows of a channel at 16 channels a pixel (pix = 16: VWW's 48x48x16), for
 * SAME with no padding left and in_w = 2 out_w (the last output's third column of
 * taps is padding), out_w <= 2 S2RING16_PAIRS + 2: q, xm, xb and out at the first
 * row's output 0, k as s2ring_row_fix's but skip (S2RING16_PAIRS less the row's
 * (out_w - 2) / 2 pairs) in place of end, then rows, in_adv (from where a row
 * leaves xm and xb to the next row's pixel 0) and the ring's rewind in bytes.
 * The pixel offsets are immediates, the input pointers move by a load's
 * writeback and the pairs are unrolled (a row jumps to its first pair from the
 * end: every copy is the same code), which frees r9 for a1: a pair takes 41
 * instructions, against the loop's 48 plus pointer adds and end's load. A row is
 * its pairs, then the last two outputs together, the second without its third
 * column of taps (bias_short); outputs follow each other from a row to the next
 * (out_row = out_w * pix). The ring's word out_w (ring pixels 2 out_w, + 1) is
 * never written: the zero point of the first ring line, read by no output here.
 * Each variant's unrolled pairs take 2 KB of flash; without the rounding
 * correction (output zero point -128, VWW's) a pair takes 39 instructions (9,030
 * fewer on VWW's layer).
 */
#define S2RING16_PAIRS 11          /* VWW's 24 outputs a row: 11 pairs and the last two */

/* Outputs (ox, ox + 1) of a row at 16 channels, r7 and lr (S2RING16_ROWS_ASM). */
#define S2RING16_MID_BOT(LAST)                                                  \
    "ldrsb r4, [r1, #16]\n\t"           /* middle row: pixels 1 .. 3 */         \
    "ldrsb r5, [r1, #32]\n\t"                                                   \
    "ldrsb r6, [r1, #48]\n\t"                                                   \
    "pkhbt r10, r10, r4, lsl #16\n\t"                                           \
    "pkhbt r4, r5, r6, lsl #16\n\t"                                             \
    "smlad r7, r10, r9, r7\n\t"                                                 \
    "smlabt r7, r5, r12, r7\n\t"                                                \
    "smlad lr, r4, r9, lr\n\t"                                                  \
    LAST("ldrsb r10, [r1, #64]!\n\t"    /* pixel 4: the next pair's 0 */        \
         "smlabt lr, r10, r12, lr\n\t")                                         \
    "ldrsb r4, [r2, #16]\n\t"           /* bottom row: pixels 1 .. 3 */         \
    "ldrsb r5, [r2, #32]\n\t"                                                   \
    "ldrsb r6, [r2, #48]\n\t"                                                   \
    "pkhbt r11, r11, r4, lsl #16\n\t"                                           \
    "pkhbt r4, r5, r6, lsl #16\n\t"                                             \
    LAST("strd r11, r4, [r0], #8\n\t")  /* the next row's ring words */         \
    "ldrd r6, r12, [sp, #20]\n\t"       /* a2, w22 */                           \
    "smlad r7, r11, r6, r7\n\t"                                                 \
    "smlabb r7, r5, r12, r7\n\t"                                                \
    "smlad lr, r4, r6, lr\n\t"                                                  \
    LAST("ldrsb r11, [r2, #64]!\n\t"    /* pixel 4 */                           \
         "smlabb lr, r11, r12, lr\n\t")

#define S2RING16_OUT(FIX7, FIXLR)                                               \
    "ldrd r4, r5, [sp, #28]\n\t"        /* multiplier2, rsk */                  \
    "smmlar r7, r7, r4, r7\n\t"                                                 \
    "smmlar lr, lr, r4, lr\n\t"                                                 \
    FIX7                                                                        \
    FIXLR                                                                       \
    "asr r7, r7, r5\n\t"                                                        \
    "asr lr, lr, r5\n\t"                                                        \
    "add r7, r7, r5, asr #8\n\t"                                                \
    "add lr, lr, r5, asr #8\n\t"                                                \
    "ssat r7, #8, r7, asr #1\n\t"                                               \
    "ssat lr, #8, lr, asr #1\n\t"                                               \
    "strb r7, [r3], #16\n\t"                                                    \
    "strb lr, [r3], #16\n\t"

#define S2RING16_ALL(x) x
#define S2RING16_NONE(x)
#define S2RING16_STR(x) #x
#define S2RING16_XSTR(x) S2RING16_STR(x)

#define S2RING16_ROWS_ASM(FIX7, FIXLR)                                          \
    __asm__ volatile(                                                           \
        "push {r4-r11, lr}\n\t"                                                 \
        "ldr r12, [sp, #36]\n\t"            /* k */                             \
        "sub sp, sp, #64\n\t"                                                   \
        "ldm r12!, {r4-r11}\n\t"                                                \
        "stm sp, {r4-r11}\n\t"                                                  \
        "ldm r12, {r4-r11}\n\t"             /* rsk .. flags, rows, steps */     \
        "add r12, sp, #32\n\t"                                                  \
        "stm r12, {r4-r11}\n\t"                                                 \
        "ldr r9, [sp, #16]\n\t"             /* a1 */                            \
        "b 8f\n\t"                                                              \
        "0:\n\t"                            /* an output row */                 \
        "ldrsb r10, [r1]\n\t"                                                   \
        "ldrsb r11, [r2]\n\t"                                                   \
        "ldr r4, [sp, #40]\n\t"             /* its first pair */                \
        "bx r4\n\t"                                                             \
        "6:\n\t"                                                                \
        ".rept " S2RING16_XSTR(S2RING16_PAIRS) "\n\t"                           \
        "ldm r0, {r4, r5, r6}\n\t"          /* ring words ox .. ox + 2 */       \
        "ldm sp, {r7, r8, r12, lr}\n\t"     /* bias, a0, w0212, bias */         \
        "smlad r7, r4, r8, r7\n\t"                                              \
        "smlabb r7, r5, r12, r7\n\t"                                            \
        "smlad lr, r5, r8, lr\n\t"                                              \
        "smlabb lr, r6, r12, lr\n\t"                                            \
        S2RING16_MID_BOT(S2RING16_ALL)                                          \
        S2RING16_OUT(FIX7, FIXLR)                                               \
        ".endr\n\t"                                                             \
        "7:\n\t"                            /* the last two outputs */          \
        "ldm r0, {r4, r5}\n\t"                                                  \
        "ldm sp, {r7, r8, r12}\n\t"         /* bias, a0, w0212 */               \
        "ldr lr, [sp, #44]\n\t"             /* bias_short */                    \
        "smlad r7, r4, r8, r7\n\t"                                              \
        "smlabb r7, r5, r12, r7\n\t"                                            \
        "smlad lr, r5, r8, lr\n\t"                                              \
        S2RING16_MID_BOT(S2RING16_NONE)                                         \
        "strd r11, r4, [r0]\n\t"                                                \
        S2RING16_OUT(FIX7, FIXLR)                                               \
        "ldr r4, [sp, #52]\n\t"             /* rows left */                     \
        "subs r4, r4, #1\n\t"                                                   \
        "beq 5f\n\t"                                                            \
        "str r4, [sp, #52]\n\t"                                                 \
        "ldrd r4, r5, [sp, #56]\n\t"        /* in_adv, the ring's rewind */     \
        "add r1, r1, r4\n\t"                                                    \
        "add r2, r2, r4\n\t"                                                    \
        "sub r0, r0, r5\n\t"                                                    \
        "b 0b\n\t"                                                              \
        "5:\n\t"                                                                \
        "add sp, sp, #64\n\t"                                                   \
        "pop {r4-r11, pc}\n\t"                                                  \
        "8:\n\t"                            /* the first pair: 6 + skip pairs */ \
        "adr r4, 6b\n\t"                                                        \
        "ldr r5, [sp, #36]\n\t"             /* skip */                          \
        "mov r6, #((7b - 6b) / " S2RING16_XSTR(S2RING16_PAIRS) ")\n\t"          \
        "mla r4, r5, r6, r4\n\t"                                                \
        "orr r4, r4, #1\n\t"                                                    \
        "str r4, [sp, #40]\n\t"                                                 \
        "b 0b\n\t")

S2RING_NAKED static void s2ring_rows16_fix(S2RING_ARG uint32_t *q, S2RING_ARG const int8_t *xm,
                                           S2RING_ARG const int8_t *xb, S2RING_ARG int8_t *out,
                                           S2RING_ARG const uint32_t *k)
{
    S2RING16_ROWS_ASM("add r7, r7, r7, asr #31\n\t", "add lr, lr, lr, asr #31\n\t");
}

S2RING_NAKED static void s2ring_rows16_m128(S2RING_ARG uint32_t *q, S2RING_ARG const int8_t *xm,
                                            S2RING_ARG const int8_t *xb, S2RING_ARG int8_t *out,
                                            S2RING_ARG const uint32_t *k)
{
    S2RING16_ROWS_ASM("", "");
}

#undef S2RING16_ROWS_ASM
#undef S2RING16_MID_BOT
#undef S2RING16_OUT
#undef S2RING16_ALL
#undef S2RING16_NONE
#undef S2RING16_STR
#undef S2RING16_XSTR

/* s2ring_rows16_fix's k from a row's (kv): the pairs it skips, rows and steps. */
static void s2ring_k16(uint32_t *k16, const uint32_t *kv, const s2ring_layer_t *g,
                       int32_t rows, size_t in_row)
{
    const int32_t pairs = (g->out_w - 2) / 2;
    memcpy(k16, kv, 16 * sizeof *k16);
    k16[9] = (uint32_t)(S2RING16_PAIRS - pairs);
    k16[13] = (uint32_t)rows;
    k16[14] = (uint32_t)(2 * in_row - (size_t)pairs * 4 * g->pix);
    k16[15] = (uint32_t)(8 * pairs);
}
#undef S2RING_ROW_ASM
#undef S2RING_REQ
#define S2RING_ASM 1
#endif

/* One output row of a channel: ring holds filter row 0's input row, mid and bot the
 * middle and bottom rows at this channel (NULL: padding); bot goes into the ring. */
static KILN_NOINLINE void s2ring_row(const s2ring_layer_t *g, uint32_t *ring,
                                     const int8_t *mid, const int8_t *bot,
                                     const s2ring_chan_t *ch, int8_t *out, const uint32_t *k)
{
    const int inside = mid != NULL && (bot != NULL || k != NULL);
    const int32_t lo = inside ? g->ox_lo : g->out_w;
    const int32_t hi = inside ? g->ox_hi : g->out_w;
    int32_t ox = 0;
    for (; ox < lo; ++ox) {
        s2ring_edge(g, ring, mid, bot, ch, out, ox);
    }
#if defined(S2RING_ASM)
    if (k != NULL && ox == g->ox_lo && g->asm_end > ox) {
        const size_t at = (size_t)(2 * ox - g->pad_l) * g->pix;
        (g->k == -255 ? s2ring_row_m128 : s2ring_row_fix)(
            ring + ox, mid + at, (bot != NULL ? bot : mid) + at, out + (size_t)ox * g->pix, k);
        ox = g->asm_end;
    }
#endif
    if (ox < hi) {
        const size_t pix = g->pix;
        const size_t at = (size_t)(2 * ox - g->pad_l) * pix;
        const int8_t *xm = mid + at;
        const int8_t *xb = bot + at;
        int32_t m0 = xm[0];
        int32_t b0 = xb[0];
        const int32_t w3 = ch->w[3], w4 = ch->w[4], w5 = ch->w[5], w8 = ch->w[8];
        const uint32_t a0 = ch->a0, a2 = ch->a2;
        const int32_t w2 = ch->w[2];
        uint32_t *q = ring + ox;
        int8_t *o = out + (size_t)ox * pix;
        uint32_t t0 = q[0];
        for (; ox < hi; ++ox) {
            const uint32_t t1 = q[1];
            int32_t acc = kiln_smlad(t0, a0, ch->bias);
            acc = kiln_smlabb(t1, (uint32_t)w2, acc);
            const int32_t m1 = xm[pix];
            const int32_t m2 = xm[2 * pix];
            acc += m0 * w3 + m1 * w4 + m2 * w5;
            const int32_t b1 = xb[pix];
            const int32_t b2 = xb[2 * pix];
            const uint32_t pair = s2ring_pack(b0, b1);
            acc = kiln_smlad(pair, a2, acc);
            acc += b2 * w8;
            *q++ = pair;
            t0 = t1;
            m0 = m2;
            b0 = b2;
            xm += 2 * pix;
            xb += 2 * pix;
            *o = kiln_dw_output(acc, ch->rq.multiplier2, ch->rq.right_shift, g->k,
                                g->act_min, g->act_max, g->full);
            o += pix;
        }
    }
    for (; ox < g->out_w; ++ox) {
        s2ring_edge(g, ring, mid, bot, ch, out, ox);
    }
    if (g->asm_flags & 2u && k != NULL) {
        return;         /* the short last output reads no ring pixel 2 out_w */
    }
    /* The last word: ring pixel 2 out_w (its lane 1 is no output's tap: not read). */
    ring[g->out_w] = s2ring_pack(s2ring_px(g, bot, 2 * g->out_w - g->pad_l), g->zp);
}

kiln_status_t kiln_dwconv2d_3x3_s2ring_s8(const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_requant_packed_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int8_t *filter,
                                          const int32_t *bias,
                                          const kiln_dims_t *output_dims, int8_t *output)
{
    if (ctx == NULL || ctx->buf == NULL || params == NULL ||
        !kiln_conv_params_valid(&params->conv) || params->depth_multiplier != 1 ||
        !kiln_requant_packed_valid(quant) || input == NULL || filter == NULL ||
        bias == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        !kiln_conv_geometry_valid(&params->conv, input_dims, filter_dims, output_dims) ||
        input_dims->n != output_dims->n || filter_dims->n != 1 ||
        filter_dims->c != input_dims->c || output_dims->c != input_dims->c ||
        filter_dims->h != 3 || filter_dims->w != 3 ||
        params->conv.dilation.h != 1 || params->conv.dilation.w != 1 ||
        params->conv.stride.h != 2 || params->conv.stride.w != 2 ||
        ((uintptr_t)ctx->buf & 3u) != 0 ||
        ctx->size < kiln_dwconv2d_3x3_s2ring_s8_get_buffer_size(output_dims)) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_c = input_dims->c;
    s2ring_layer_t g;
    g.in_h = input_dims->h;
    g.in_w = input_dims->w;
    g.out_w = output_dims->w;
    g.pad_l = p->padding.w;
    g.pad_t = p->padding.h;
    g.pix = (size_t)in_c;
    g.zp = -p->input_offset;
    /* Outputs whose taps 2ox - pad_l .. + 2 are all in the image. */
    g.ox_lo = kiln_min_i32((g.pad_l + 1) / 2, g.out_w);
    g.ox_hi = g.in_w - 3 + g.pad_l >= 0
                  ? kiln_max_i32(kiln_min_i32((g.in_w - 3 + g.pad_l) / 2 + 1, g.out_w), g.ox_lo)
                  : g.ox_lo;
    g.k = 1 + 2 * p->output_offset;
    g.act_min = p->activation.min;
    g.act_max = p->activation.max;
    g.full = g.act_min == -128 && g.act_max == 127;
    /* The assembly row (full int8 clamp): outputs [ox_lo, ox_hi), plus a last one
     * whose only padding is its third column of taps (SAME), short. */
    const int32_t last_ix = 2 * (g.out_w - 1) - g.pad_l;
    const int short_last = g.ox_hi == g.out_w - 1 && g.ox_hi >= g.ox_lo && last_ix >= 0 &&
                           last_ix + 2 == g.in_w;
    g.asm_end = g.ox_hi + (short_last ? 1 : 0);
    g.asm_flags = (uint32_t)((g.ox_hi - g.ox_lo) & 1) | (short_last ? 2u : 0u);
    uint32_t *ring = (uint32_t *)ctx->buf;
    const size_t in_row = (size_t)input_dims->w * g.pix;
    const size_t out_row = (size_t)output_dims->w * g.pix;
    const size_t image_bytes = (size_t)input_dims->h * in_row;
    const size_t out_bytes = (size_t)output_dims->h * out_row;
    for (int32_t b = 0; b < input_dims->n; ++b) {
        const int8_t *image = input + (size_t)b * image_bytes;
        int8_t *out = output + (size_t)b * out_bytes;
        for (int32_t c = 0; c < in_c; ++c) {
            s2ring_chan_t ch;
            int32_t sum = 0;
            for (int32_t t = 0; t < 9; ++t) {
                ch.w[t] = filter[(size_t)t * g.pix + (size_t)c];
                sum += ch.w[t];
            }
            ch.a0 = s2ring_pack(ch.w[0], ch.w[1]);
            ch.a2 = s2ring_pack(ch.w[6], ch.w[7]);
            ch.bias = bias[c] + p->input_offset * sum;
            ch.rq = kiln_dw_rq_packed(quant, c);
            /* The assembly row's stack (S2_*), and its twin for a last output row
             * whose bottom row is padding (zero weights, their zero-point products
             * in the bias; the ring it writes is not read again). */
            uint32_t k[2][16];
            const int32_t zp = g.zp;
            for (int v = 0; v < 2; ++v) {
                const int32_t w20 = v ? 0 : ch.w[6], w21 = v ? 0 : ch.w[7];
                const int32_t w22 = v ? 0 : ch.w[8];
                const int32_t bias_v = ch.bias + (v ? zp * (ch.w[6] + ch.w[7] + ch.w[8]) : 0);
                uint32_t *kv = k[v];
                kv[0] = kv[3] = (uint32_t)bias_v;
                kv[1] = ch.a0;
                kv[2] = s2ring_pack(ch.w[2], ch.w[5]);
                kv[4] = s2ring_pack(ch.w[3], ch.w[4]);
                kv[5] = s2ring_pack(w20, w21);
                kv[6] = (uint32_t)w22;
                kv[7] = (uint32_t)ch.rq.multiplier2;
                kv[8] = (uint32_t)ch.rq.right_shift | (uint32_t)g.k << 8;
                kv[9] = (uint32_t)(uintptr_t)(ring + g.ox_lo + (g.ox_hi - g.ox_lo) % 2 +
                                              (g.ox_hi - g.ox_lo) / 2 * 2);
                kv[10] = (uint32_t)g.pix;
                kv[11] = (uint32_t)(bias_v + zp * (ch.w[2] + ch.w[5] + w22));
                kv[12] = g.asm_flags;
                kv[13] = 1;
                kv[14] = (uint32_t)(2 * in_row);
                kv[15] = (uint32_t)out_row;
            }
#if defined(S2RING_ASM)
            const int use_asm = g.full && g.asm_end > g.ox_lo;
#else
            const int use_asm = 0;      /* the C row; k unused */
            (void)k;
#endif
            /* Filter row 0's input row of output row 0 into the ring. */
            const int8_t *top = -g.pad_t >= 0 && -g.pad_t < g.in_h
                                    ? image + (size_t)(-g.pad_t) * in_row + c : NULL;
            const int32_t ring_lo = top != NULL ? g.ox_lo : g.out_w;
            const int32_t ring_hi =
                top != NULL && g.in_w - 2 + g.pad_l >= 0
                    ? kiln_max_i32(kiln_min_i32((g.in_w - 2 + g.pad_l) / 2 + 1, g.out_w), ring_lo)
                    : ring_lo;
            int32_t m = 0;
            for (; m < ring_lo; ++m) {
                s2ring_ring_word(&g, ring, top, m);
            }
            if (m < ring_hi) {
                /* Words whose two pixels are in the image: no bounds to test. */
                const int8_t *x = top + (size_t)(2 * m - g.pad_l) * g.pix;
                for (; m < ring_hi; ++m) {
                    ring[m] = s2ring_pack(x[0], x[g.pix]);
                    x += 2 * g.pix;
                }
            }
            for (; m <= g.out_w; ++m) {
                s2ring_ring_word(&g, ring, top, m);
            }
            int32_t oy = 0;
#if defined(S2RING_ASM)
            /* At 16 channels (VWW's 48x48x16), the rows with pixel offsets as
             * immediates (s2ring_rows16_fix): SAME with no padding left, in_w =
             * 2 out_w. */
            const int rows16 = use_asm && g.pix == 16 && g.ox_lo == 0 && g.pad_l == 0 &&
                               g.asm_end == g.out_w && (g.asm_flags & 2u) &&
                               g.out_w % 2 == 0 && g.out_w >= 2 &&
                               g.out_w <= 2 * S2RING16_PAIRS + 2;
            uint32_t k16[16];
            if (use_asm && g.ox_lo == 0 && g.asm_end == g.out_w && (g.asm_flags & 2u) &&
                g.pad_t <= 1) {
                /* Whole rows in one call (rows with their three input rows in the
                 * image, from the first): the short last output leaves ring word
                 * out_w the zero point, as the first ring line has it. */
                const int32_t rows =
                    g.in_h - 3 + g.pad_t < 0
                        ? 0 : kiln_min_i32(output_dims->h, (g.in_h - 3 + g.pad_t) / 2 + 1);
                if (rows > 0 && rows16) {
                    s2ring_k16(k16, k[0], &g, rows, in_row);
                    const int8_t *mid = image + (size_t)(1 - g.pad_t) * in_row + c;
                    (g.k == -255 ? s2ring_rows16_m128 : s2ring_rows16_fix)(
                        ring, mid, mid + in_row, out + (size_t)c, k16);
                    oy = rows;
                } else if (rows > 0) {
                    k[0][13] = (uint32_t)rows;
                    const int8_t *mid = image + (size_t)(1 - g.pad_t) * in_row + c;
                    (g.k == -255 ? s2ring_row_m128 : s2ring_row_fix)(
                        ring, mid, mid + in_row, out + (size_t)c, k[0]);
                    k[0][13] = 1;
                    oy = rows;
                }
            }
#endif
            for (; oy < output_dims->h; ++oy) {
                const int32_t r = 2 * oy - g.pad_t;
                const int8_t *mid = r + 1 >= 0 && r + 1 < g.in_h
                                        ? image + (size_t)(r + 1) * in_row + c : NULL;
                const int8_t *bot = r + 2 >= 0 && r + 2 < g.in_h
                                        ? image + (size_t)(r + 2) * in_row + c : NULL;
                const uint32_t *kr = NULL;
                if (use_asm && mid != NULL) {
                    kr = bot != NULL ? k[0] : oy == output_dims->h - 1 ? k[1] : NULL;
                }
#if defined(S2RING_ASM)
                if (rows16 && kr == k[1]) {
                    /* The last output row, its bottom row padding: k[1]'s zero
                     * weights read the middle row again for it. */
                    s2ring_k16(k16, k[1], &g, 1, in_row);
                    (g.k == -255 ? s2ring_rows16_m128 : s2ring_rows16_fix)(
                        ring, mid, mid, out + (size_t)oy * out_row + (size_t)c, k16);
                    continue;
                }
#endif
                s2ring_row(&g, ring, mid, bot, &ch, out + (size_t)oy * out_row + (size_t)c, kr);
            }
        }
    }
    return KILN_OK;
}
