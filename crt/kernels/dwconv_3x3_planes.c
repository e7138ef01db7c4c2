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
 * no tap tests the image's bounds and the bias is used as given. The four
 * planes' rows lie side by side (plane j of row y at word (4 y + j) * 16), so
 * the fill writes a pixel's four channels and the rows read a filter's three
 * rows by immediate offsets. Then, per channel, its record (conv.h: the
 * compiler's weight pairs (w0, w1) and (w1, w2) per filter row, bias and
 * requantization, one LDM) stays in registers for all output pixels: a filter
 * row is two instructions a pixel, nine MACs in six (SMLAD on a word,
 * SMLABT/SMLATB on the half it shares with the next pixel):
 *   stride 2, pixel ox:      SMLAD(word ox, (w0, w1)) + SMLABT(word ox + 1, (w1, w2))
 *   stride 1, pixel 2j:      SMLAD(word j, (w0, w1))  + SMLABT(word j + 1, (w1, w2))
 *   stride 1, pixel 2j + 1:  SMLATB(word j, (w0, w1)) + SMLAD(word j + 1, (w1, w2))
 * (the words in plane columns counted from output 0's first tap). At stride 2 both
 * ways on rows of six or twelve (VWW's 12x12 and 6x6 stride-2 layers) six pixels a
 * time (block_s2_six, _twelve; with fills of 12 or 24 columns, 6x6 outputs or an
 * even number of rows of twelve, all whole blocks in one call, fill included:
 * blocks_s2_six, _twelve), else pairs. The fill (fill_rows, asm) has unrolled
 * twins for rows of whole quads and of exactly 12 or 24 columns. On mps2-an386
 * (QEMU instructions per MAC, padding taps counted): VWW's layer 7 (12x12x32,
 * stride 2) 2.34, layer 11 (6x6x60, stride 2) 2.39, layer 9 (12x12x64) 2.10,
 * layers 13-21 (6x6) 2.32-2.39.
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
 * rows are PLANE_RW words, of which the outputs read the first
 * ((W - 1) * stride_w + 3 + 1) / 2: whole words plus the word the last pixel's
 * SMLABT reads past an odd column count. The four planes' rows lie side by side:
 * PLANE_ROW words from a row of plane j to the next row of it. */
#define PLANE_RW 16
#define PLANE_ROW (4 * PLANE_RW)
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
 * analysis, so it assumes the call reads its arguments' memory and writes `out`. */
#if defined(__clang__)
#define PLANES_NAKED __attribute__((naked, noinline))
#else
#define PLANES_NAKED __attribute__((naked, noinline, noipa))
#endif
#define PLANES_ARG __attribute__((unused))

/*
 * The full-range rows of the n channels of a block in assembly, fourteen
 * registers live in the pixel loops. Arguments: p (word 0 of the first output
 * row's first plane row of the block's plane 0; plane j is 16 words on, the
 * filter's other rows 64 and 128 words on), out (channel 0's first output byte),
 * rec (channel 0's kiln_dw_planes_channel_t) and args = {n, C, output bytes
 * (H * W * C), bytes of an output row's pairs, bytes p skips at a row's end}.
 * Output rows follow each other in memory (HWC), so out steps by C throughout; p
 * skips to the next plane row at each row's end (W odd: the _odd twins, after the
 * last pixel). The requantization is
 * kiln_dw_output's with right_shift and k in one register, rsk = right_shift |
 * k << 8: ASR by a register shifts by its low byte (right_shift, 1..30), and
 * rsk >> 8 (arithmetic) is k, as right_shift < 256.
 *
 * Stack frame (52 bytes under the saved registers): [0] bias, [4] bias, [8]
 * multiplier2, [12] rsk, [16] out_end, [20] p of the next channel, [24] out of the
 * next channel, [28] its record, [32] args, [36] channels left, [40] bytes of a
 * row's pairs, [44] bytes p skips.
 */
#define PLANES_BLOCK_ENTRY                                                       \
    "push {r4-r11, lr}\n\t"                                                      \
    "sub sp, sp, #52\n\t"                                                        \
    "strd r0, r1, [sp, #20]\n\t"                                                 \
    "strd r2, r3, [sp, #28]\n\t"                                                 \
    "ldr r4, [r3]\n\t"                                                           \
    "ldrd r5, r6, [r3, #12]\n\t"                                                 \
    "str r4, [sp, #36]\n\t"                                                      \
    "strd r5, r6, [sp, #40]\n\t"                                                 \
    "1:\n\t"                              /* a channel */                         \
    "ldr r3, [sp, #28]\n\t"                                                      \
    "ldm r3!, {r4-r9}\n\t"                /* (w0, w1), (w1, w2) of rows 0..2 */  \
    "ldm r3!, {r10-r12}\n\t"              /* bias, multiplier2, rsk */           \
    "str r3, [sp, #28]\n\t"                                                      \
    "strd r10, r10, [sp]\n\t"                                                    \
    "strd r11, r12, [sp, #8]\n\t"                                                \
    "ldrd r0, r1, [sp, #20]\n\t"                                                 \
    "add r2, r0, #64\n\t"                 /* the next channel's plane, output */ \
    "add r3, r1, #1\n\t"                                                         \
    "strd r2, r3, [sp, #20]\n\t"                                                 \
    "ldr r12, [sp, #32]\n\t"                                                     \
    "ldrd r10, r3, [r12, #4]\n\t"         /* C, output bytes */                  \
    "add r3, r3, r1\n\t"                                                         \
    "str r3, [sp, #16]\n\t"

#define PLANES_REQUANT_PAIR                                                      \
    "ldrd r3, r12, [sp, #8]\n\t"          /* multiplier2, rsk */                 \
    "smmlar lr, lr, r3, lr\n\t"                                                  \
    "smmlar r11, r11, r3, r11\n\t"                                               \
    "add lr, lr, lr, asr #31\n\t"                                                \
    "add r11, r11, r11, asr #31\n\t"                                             \
    "asr lr, lr, r12\n\t"                                                        \
    "asr r11, r11, r12\n\t"                                                      \
    "add lr, lr, r12, asr #8\n\t"                                                \
    "add r11, r11, r12, asr #8\n\t"                                              \
    "ssat lr, #8, lr, asr #1\n\t"                                                \
    "ssat r11, #8, r11, asr #1\n\t"                                              \
    "strb lr, [r1]\n\t"                                                          \
    "strb r11, [r1, r10]\n\t"                                                    \
    "add r1, r1, r10, lsl #1\n\t"

#define PLANES_REQUANT_ONE                                                       \
    "ldrd r3, r12, [sp, #8]\n\t"                                                 \
    "smmlar lr, lr, r3, lr\n\t"                                                  \
    "add lr, lr, lr, asr #31\n\t"                                                \
    "asr lr, lr, r12\n\t"                                                        \
    "add lr, lr, r12, asr #8\n\t"                                                \
    "ssat lr, #8, lr, asr #1\n\t"                                                \
    "strb lr, [r1]\n\t"                                                          \
    "add r1, r1, r10\n\t"

/* A row's end (p to the next plane row, out past the row), then the next
 * channel. */
#define PLANES_BLOCK_EXIT                                                        \
    "5:\n\t"                                                                     \
    "ldr r3, [sp, #44]\n\t"                                                      \
    "add r0, r0, r3\n\t"                                                         \
    "ldr r3, [sp, #16]\n\t"                                                      \
    "cmp r1, r3\n\t"                                                             \
    "bne 2b\n\t"                                                                 \
    "ldr r3, [sp, #36]\n\t"                                                      \
    "subs r3, r3, #1\n\t"                                                        \
    "str r3, [sp, #36]\n\t"                                                      \
    "bne 1b\n\t"                                                                 \
    "add sp, sp, #52\n\t"                                                        \
    "pop {r4-r11, pc}\n\t"

#define PLANES_S1_ROWS \
    "2:\n\t"                            /* an output row */ \
    "ldr r2, [sp, #40]\n\t" \
    "add r2, r2, r1\n\t"                /* the end of its pairs */ \
    "3:\n\t" \
    "ldrd lr, r11, [sp]\n\t"            /* bias, bias */ \
    "ldrd r3, r12, [r0], #4\n\t"        /* filter row 0: words j, j + 1 */ \
    "smlad lr, r3, r4, lr\n\t" \
    "smlatb r11, r3, r4, r11\n\t" \
    "smlabt lr, r12, r5, lr\n\t" \
    "smlad r11, r12, r5, r11\n\t" \
    "ldrd r3, r12, [r0, #252]\n\t"      /* row 1 (p has moved one word) */ \
    "smlad lr, r3, r6, lr\n\t" \
    "smlatb r11, r3, r6, r11\n\t" \
    "smlabt lr, r12, r7, lr\n\t" \
    "smlad r11, r12, r7, r11\n\t" \
    "ldrd r3, r12, [r0, #508]\n\t"      /* row 2 */ \
    "smlad lr, r3, r8, lr\n\t" \
    "smlatb r11, r3, r8, r11\n\t" \
    "smlabt lr, r12, r9, lr\n\t" \
    "smlad r11, r12, r9, r11\n\t" \
    PLANES_REQUANT_PAIR \
    "cmp r1, r2\n\t" \
    "bne 3b\n\t"

#define PLANES_S1_LAST \
    "ldr lr, [sp]\n\t"                  /* the last pixel, even */ \
    "ldrd r3, r12, [r0]\n\t" \
    "smlad lr, r3, r4, lr\n\t" \
    "smlabt lr, r12, r5, lr\n\t" \
    "ldrd r3, r12, [r0, #256]\n\t" \
    "smlad lr, r3, r6, lr\n\t" \
    "smlabt lr, r12, r7, lr\n\t" \
    "ldrd r3, r12, [r0, #512]\n\t" \
    "smlad lr, r3, r8, lr\n\t" \
    "smlabt lr, r12, r9, lr\n\t" \
    PLANES_REQUANT_ONE

/* Stride 1: pixels 2j and 2j + 1 a time (W >= 2), then a last even pixel when W
 * is odd; p moves a word a pair. */
PLANES_NAKED static void block_s1_even(PLANES_ARG const uint32_t *p, PLANES_ARG int8_t *out,
                                       PLANES_ARG const kiln_dw_planes_channel_t *rec,
                                       PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(PLANES_BLOCK_ENTRY PLANES_S1_ROWS PLANES_BLOCK_EXIT);
}

/* ... and W odd: its last pixel after the pairs. */
PLANES_NAKED static void block_s1_odd(PLANES_ARG const uint32_t *p, PLANES_ARG int8_t *out,
                                      PLANES_ARG const kiln_dw_planes_channel_t *rec,
                                      PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(PLANES_BLOCK_ENTRY PLANES_S1_ROWS PLANES_S1_LAST
                     PLANES_BLOCK_EXIT);
}

#define PLANES_S2_ROWS \
    "lsr r5, r5, #16\n\t" \
    "pkhbt r5, r5, r7\n\t"              /* (w02, w12) */ \
    "lsr r7, r9, #16\n\t"               /* (w22, 0) */ \
    "2:\n\t" \
    "ldr r2, [sp, #40]\n\t" \
    "add r2, r2, r1\n\t" \
    "3:\n\t" \
    "ldrd lr, r11, [sp]\n\t" \
    "ldrd r3, r12, [r0], #8\n\t"        /* filter row 0: words ox, ox + 1 */ \
    "ldr r9, [r0]\n\t"                  /* ox + 2 */ \
    "smlad lr, r3, r4, lr\n\t" \
    "smlabb lr, r12, r5, lr\n\t" \
    "smlad r11, r12, r4, r11\n\t" \
    "smlabb r11, r9, r5, r11\n\t" \
    "ldrd r3, r12, [r0, #248]\n\t"      /* row 1 (p has moved two words) */ \
    "ldr r9, [r0, #256]\n\t" \
    "smlad lr, r3, r6, lr\n\t" \
    "smlabt lr, r12, r5, lr\n\t" \
    "smlad r11, r12, r6, r11\n\t" \
    "smlabt r11, r9, r5, r11\n\t" \
    "ldrd r3, r12, [r0, #504]\n\t"      /* row 2 */ \
    "ldr r9, [r0, #512]\n\t" \
    "smlad lr, r3, r8, lr\n\t" \
    "smlabb lr, r12, r7, lr\n\t" \
    "smlad r11, r12, r8, r11\n\t" \
    "smlabb r11, r9, r7, r11\n\t" \
    PLANES_REQUANT_PAIR \
    "cmp r1, r2\n\t" \
    "bne 3b\n\t"

#define PLANES_S2_LAST \
    "ldr lr, [sp]\n\t"                  /* the last pixel */ \
    "ldrd r3, r12, [r0]\n\t" \
    "smlad lr, r3, r4, lr\n\t" \
    "smlabb lr, r12, r5, lr\n\t" \
    "ldrd r3, r12, [r0, #256]\n\t" \
    "smlad lr, r3, r6, lr\n\t" \
    "smlabt lr, r12, r5, lr\n\t" \
    "ldrd r3, r12, [r0, #512]\n\t" \
    "smlad lr, r3, r8, lr\n\t" \
    "smlabb lr, r12, r7, lr\n\t" \
    PLANES_REQUANT_ONE

/* Stride 2: pixels ox and ox + 1 a time (W >= 2) from words ox .. ox + 2 of each
 * filter row, then a last pixel when W is odd; p moves two words a pair. The
 * third taps' weights in two registers: r5 = (w02, w12), r7 = (w22, -). */
PLANES_NAKED static void block_s2_even(PLANES_ARG const uint32_t *p, PLANES_ARG int8_t *out,
                                       PLANES_ARG const kiln_dw_planes_channel_t *rec,
                                       PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(PLANES_BLOCK_ENTRY PLANES_S2_ROWS PLANES_BLOCK_EXIT);
}

/* ... and W odd: its last pixel after the pairs. */
PLANES_NAKED static void block_s2_odd(PLANES_ARG const uint32_t *p, PLANES_ARG int8_t *out,
                                      PLANES_ARG const kiln_dw_planes_channel_t *rec,
                                      PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(PLANES_BLOCK_ENTRY PLANES_S2_ROWS PLANES_S2_LAST
                     PLANES_BLOCK_EXIT);
}

/*
 * Stride 2 both ways, rows of six or twelve outputs (VWW's 6x6 and 12x12 stride-2
 * layers): six
 * pixels a time, their sums in six registers (r5, r6, r9, r10, r11, lr), a filter
 * row's seven plane words read two at a time (LDRD into r2-r4) and its weights
 * ((w0, w1), (w1, w2): one LDRD from the frame) per filter row: pixel i
 * SMLAD(word i, (w0, w1)) + SMLABT(word i + 1, (w1, w2)). Per six pixels 91
 * instructions (one LDM of six biases, 3 x 17 a filter row, one LDM of the
 * requantization constants and C, 2C, 3C, 30 to requantize, eight to store), against
 * 105 as three pairs; four more a row. Arguments: p, out, rec as the blocks', args =
 * {n, C, output bytes}; p moves two plane rows (512 bytes) an output row, by the
 * writeback of a load.
 *
 * Stack frame (96 bytes under the saved registers): [0..20] the bias six times,
 * [24..44] the weights of filter rows 0..2, and from r12 = sp + 48: [0] multiplier2,
 * [4] rsk, [8] C, [12] 2 C, [16] 3 C, [20] unused, [24] out_end, [28]
 * p of the next channel, [32] out of the next channel, [36] its record, [40]
 * channels left, [44] output bytes.
 */
#define HEX_ENTRY                                                                \
    "push {r4-r11, lr}\n\t"                                                      \
    "sub sp, sp, #96\n\t"                                                        \
    "add r12, sp, #48\n\t"                                                       \
    "strd r0, r1, [r12, #28]\n\t"                                                \
    "str r2, [r12, #36]\n\t"                                                     \
    "ldm r3, {r4-r6}\n\t"                 /* n, C, output bytes */               \
    "str r4, [r12, #40]\n\t"                                                     \
    "str r5, [r12, #8]\n\t"                                                      \
    "lsl r8, r5, #1\n\t"                                                         \
    "add r9, r5, r5, lsl #1\n\t"                                                 \
    "strd r8, r9, [r12, #12]\n\t"                                                \
    "str r6, [r12, #44]\n\t"

/* A channel: its record into the frame, p and out to it, out_end; then its rows
 * (label 2). */
#define HEX_CHANNEL                                                              \
    "1:\n\t"                              /* a channel */                        \
    "ldr r3, [r12, #36]\n\t"                                                     \
    "ldm r3!, {r2, r4-r11}\n\t"           /* taps, bias, multiplier2, rsk */     \
    "str r3, [r12, #36]\n\t"                                                     \
    "strd r10, r11, [r12]\n\t"                                                   \
    "add r3, sp, #24\n\t"                                                        \
    "stm r3, {r2, r4-r8}\n\t"                                                    \
    "strd r9, r9, [sp]\n\t"                                                      \
    "strd r9, r9, [sp, #8]\n\t"                                                  \
    "strd r9, r9, [sp, #16]\n\t"                                                 \
    "ldrd r0, r1, [r12, #28]\n\t"                                                \
    "add r2, r0, #64\n\t"                 /* the next channel's plane, output */ \
    "add r3, r1, #1\n\t"                                                         \
    "strd r2, r3, [r12, #28]\n\t"                                                \
    "ldr r3, [r12, #44]\n\t"                                                     \
    "add r3, r3, r1\n\t"                                                         \
    "str r3, [r12, #24]\n\t"                                                     \
    "2:\n\t"                              /* an output row */

/* Filter row t of the six pixels: its word 0 at r0 + b bytes, words 0 and 1 loaded
 * by load0 (which moves p to the next output row in the first six's filter row 2:
 * p stays at a row's word 0 until then). Word 6 by LDRD too (its twin, word 7 of the
 * 16-word row, unused), which takes the second six's negative offsets. */
#define HEX_TAPS(t, b, load0)                                                    \
    "ldrd r7, r8, [sp, #(24 + 8 * " #t ")]\n\t"                                   \
    load0                                                                        \
    "smlad r5, r2, r7, r5\n\t"                                                   \
    "smlabt r5, r3, r8, r5\n\t"                                                  \
    "smlad r6, r3, r7, r6\n\t"                                                   \
    "ldrd r2, r4, [r0, #(" b " + 8)]\n\t"                                         \
    "smlabt r6, r2, r8, r6\n\t"                                                  \
    "smlad r9, r2, r7, r9\n\t"                                                   \
    "smlabt r9, r4, r8, r9\n\t"                                                  \
    "smlad r10, r4, r7, r10\n\t"                                                 \
    "ldrd r2, r3, [r0, #(" b " + 16)]\n\t"                                        \
    "smlabt r10, r2, r8, r10\n\t"                                                \
    "smlad r11, r2, r7, r11\n\t"                                                 \
    "smlabt r11, r3, r8, r11\n\t"                                                \
    "smlad lr, r3, r7, lr\n\t"                                                   \
    "ldrd r2, r3, [r0, #(" b " + 24)]\n\t"                                        \
    "smlabt lr, r2, r8, lr\n\t"

#define HEX_RQ(x)                                                                \
    "smmlar " x ", " x ", r2, " x "\n\t"                                          \
    "add " x ", " x ", " x ", asr #31\n\t"                                        \
    "asr " x ", " x ", r3\n\t"                                                    \
    "add " x ", " x ", r3, asr #8\n\t"                                            \
    "ssat " x ", #8, " x ", asr #1\n\t"

/* Six pixels: sums (the filter rows as taps), requantization (kiln_dw_output, as
 * PLANES_REQUANT_PAIR), stores; out past them. */
#define HEX_SIX(taps)                                                            \
    "ldm sp, {r5, r6, r9, r10, r11, lr}\n\t"                                     \
    taps                                                                         \
    "ldm r12, {r2-r4, r7, r8}\n\t"        /* multiplier2, rsk, C, 2C, 3C */       \
    HEX_RQ("r5") HEX_RQ("r6") HEX_RQ("r9") HEX_RQ("r10") HEX_RQ("r11")         \
    HEX_RQ("lr")                                                                 \
    "strb r5, [r1]\n\t"                                                          \
    "strb r6, [r1, r4]\n\t"                                                      \
    "strb r9, [r1, r7]\n\t"                                                      \
    "strb r10, [r1, r8]\n\t"                                                     \
    "add r1, r1, r4, lsl #2\n\t"                                                 \
    "strb r11, [r1]\n\t"                                                         \
    "strb lr, [r1, r4]\n\t"                                                      \
    "add r1, r1, r4, lsl #1\n\t"

/* The first six of a row (words 0..6; p moves two plane rows), the second (words
 * 6..12, from p's new place). */
#define HEX_FIRST                                                                \
    HEX_SIX(HEX_TAPS(0, "0", "ldrd r2, r3, [r0]\n\t")                            \
            HEX_TAPS(1, "256", "ldrd r2, r3, [r0, #256]\n\t")                    \
            HEX_TAPS(2, "0", "ldrd r2, r3, [r0, #512]!\n\t"))
#define HEX_SECOND                                                               \
    HEX_SIX(HEX_TAPS(0, "(24 - 512)", "ldrd r2, r3, [r0, #(24 - 512)]\n\t")      \
            HEX_TAPS(1, "(24 - 256)", "ldrd r2, r3, [r0, #(24 - 256)]\n\t")      \
            HEX_TAPS(2, "24", "ldrd r2, r3, [r0, #24]\n\t"))

/* A row's end (p has moved), then the next channel. */
#define HEX_EXIT                                                                 \
    "ldr r3, [r12, #24]\n\t"              /* out_end */                          \
    "cmp r1, r3\n\t"                                                             \
    "bne 2b\n\t"                                                                 \
    "ldr r3, [r12, #40]\n\t"                                                     \
    "subs r3, r3, #1\n\t"                                                        \
    "str r3, [r12, #40]\n\t"                                                     \
    "bne 1b\n\t"                                                                 \
    "add sp, sp, #96\n\t"                                                        \
    "pop {r4-r11, pc}\n\t"

PLANES_NAKED static void block_s2_six(PLANES_ARG const uint32_t *p, PLANES_ARG int8_t *out,
                                      PLANES_ARG const kiln_dw_planes_channel_t *rec,
                                      PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(HEX_ENTRY HEX_CHANNEL HEX_FIRST HEX_EXIT);
}

PLANES_NAKED static void block_s2_twelve(PLANES_ARG const uint32_t *p,
                                         PLANES_ARG int8_t *out,
                                         PLANES_ARG const kiln_dw_planes_channel_t *rec,
                                         PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(HEX_ENTRY HEX_CHANNEL HEX_FIRST HEX_SECOND HEX_EXIT);
}

/* Four pixels of the four channels: src (r0) and q (r1) past them; C in r4, 3 C in
 * r5, the offsets in r6; r7-r12 scratch. FILL_QUAD_STEP: src moved by src_step and
 * q by q_bytes instead (a row's last quad straight to the next row's start). */
#define FILL_QUAD FILL_QUAD_STEP("add r0, r0, r4, lsl #2\n\t", "8")
#define FILL_QUAD_STEP(src_step, q_bytes) \
    "ldr r7, [r0]\n\t"                  /* pixels a, b, c, d */    \
    "ldr r8, [r0, r4]\n\t"                                         \
    "ldr r9, [r0, r4, lsl #1]\n\t"                                 \
    "ldr r10, [r0, r5]\n\t"                                        \
    src_step                                                       \
    "pkhbt r11, r7, r8, lsl #16\n\t"    /* bytes (a0 a1 b0 b1) */  \
    "pkhbt r12, r9, r10, lsl #16\n\t"   /* (c0 c1 d0 d1) */        \
    "pkhtb r8, r8, r7, asr #16\n\t"     /* (a2 a3 b2 b3) */        \
    "pkhtb r10, r10, r9, asr #16\n\t"   /* (c2 c3 d2 d3) */        \
    "sxtab16 r7, r6, r11\n\t"           /* plane 0: (a, b) */      \
    "sxtab16 r9, r6, r12\n\t"           /* (c, d) */               \
    "sxtab16 r11, r6, r11, ror #8\n\t"  /* plane 1 */              \
    "sxtab16 r12, r6, r12, ror #8\n\t"                             \
    "strd r11, r12, [r1, #64]\n\t"                                 \
    "sxtab16 r11, r6, r8\n\t"           /* plane 2 */              \
    "sxtab16 r12, r6, r10\n\t"                                     \
    "strd r11, r12, [r1, #128]\n\t"                                \
    "sxtab16 r11, r6, r8, ror #8\n\t"   /* plane 3 */              \
    "sxtab16 r12, r6, r10, ror #8\n\t"                             \
    "strd r11, r12, [r1, #192]\n\t"                                \
    "strd r7, r9, [r1], #" q_bytes "\n\t"

/* The image part of the planes of four channels, every image row the outputs read:
 * src (the first such row), q (its plane 0 word holding column 0, or the word
 * below when pad_w is odd), and args = {C, (input_offset, input_offset), flags (1:
 * pad_w is odd, column 0 goes in a word's upper half; 2: a last column in a word's
 * lower half; 4: a pair of columns after the quads), rows, bytes src skips at a
 * row's end, bytes q skips there, bytes of plane words the column quads fill}.
 * 22 instructions per four pixels of four channels (PKH pairs the pixels' bytes,
 * SXTAB16 widens two planes' words a time); a lone column's word has zeros in its
 * other half (padding, or a column no output reads). */
PLANES_NAKED static void fill_rows(PLANES_ARG const int8_t *src, PLANES_ARG uint32_t *q,
                                   PLANES_ARG int32_t unused,
                                   PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(
        "push {r4-r11, lr}\n\t"
        "ldm r3!, {r4-r6, lr}\n\t"          /* C, offsets, flags, rows */
        "ldm r3, {r7-r9}\n\t"
        "push {r7-r9}\n\t"                /* [sp]: src skip, q skip, quad bytes */
        "mov r3, r6\n\t"                  /* flags */
        "mov r6, r5\n\t"                  /* offsets */
        "add r5, r4, r4, lsl #1\n\t"        /* 3 C */
        "3:\n\t"
        "tst r3, #1\n\t"
        "beq 4f\n\t"
        "ldr r7, [r0]\n\t"                  /* column 0 alone, in the upper halves */
        "add r0, r0, r4\n\t"
        "sxtab16 r9, r6, r7\n\t"            /* (c0, c2) */
        "sxtab16 r7, r6, r7, ror #8\n\t"    /* (c1, c3) */
        "lsl r11, r9, #16\n\t"
        "lsl r10, r7, #16\n\t"
        "bfc r9, #0, #16\n\t"
        "bfc r7, #0, #16\n\t"
        "str r10, [r1, #64]\n\t"
        "str r9, [r1, #128]\n\t"
        "str r7, [r1, #192]\n\t"
        "str r11, [r1], #4\n\t"
        "4:\n\t"
        "ldr r2, [sp, #8]\n\t"
        "add r2, r2, r1\n\t"
        "cmp r2, r1\n\t"
        "beq 6f\n\t"
        "5:\n\t"
        FILL_QUAD
        "cmp r1, r2\n\t"
        "bne 5b\n\t"
        "6:\n\t"
        "tst r3, #4\n\t"
        "beq 7f\n\t"
        "ldr r7, [r0]\n\t"                  /* a pair of columns */
        "ldr r8, [r0, r4]\n\t"
        "add r0, r0, r4, lsl #1\n\t"
        "pkhbt r11, r7, r8, lsl #16\n\t"
        "pkhtb r8, r8, r7, asr #16\n\t"
        "sxtab16 r7, r6, r11\n\t"
        "sxtab16 r11, r6, r11, ror #8\n\t"
        "sxtab16 r9, r6, r8\n\t"
        "sxtab16 r8, r6, r8, ror #8\n\t"
        "str r11, [r1, #64]\n\t"
        "str r9, [r1, #128]\n\t"
        "str r8, [r1, #192]\n\t"
        "str r7, [r1], #4\n\t"
        "7:\n\t"
        "tst r3, #2\n\t"
        "beq 8f\n\t"
        "ldr r7, [r0]\n\t"                  /* a last column alone, lower halves */
        "sxtab16 r9, r6, r7\n\t"
        "sxtab16 r7, r6, r7, ror #8\n\t"
        "uxth r11, r9\n\t"
        "uxth r10, r7\n\t"
        "lsr r9, r9, #16\n\t"
        "lsr r7, r7, #16\n\t"
        "str r11, [r1]\n\t"
        "str r10, [r1, #64]\n\t"
        "str r9, [r1, #128]\n\t"
        "str r7, [r1, #192]\n\t"
        "8:\n\t"
        "ldrd r7, r8, [sp]\n\t"             /* the next row */
        "add r0, r0, r7\n\t"
        "add r1, r1, r8\n\t"
        "subs lr, lr, #1\n\t"
        "bne 3b\n\t"
        "add sp, sp, #12\n\t"
        "pop {r4-r11, pc}\n\t");
}

/* fill_rows when pad_w is even and the row's columns are whole quads (flags 0; VWW's
 * stride-2 maps): no per-row tests, 6 instructions a row on top of the quads. */
#define FILL_ROWS_QUADS(quads)                                                   \
    "push {r4-r11, lr}\n\t"                                                      \
    "ldrd r4, r6, [r3]\n\t"             /* C, offsets */                        \
    "ldr lr, [r3, #12]\n\t"             /* rows */                              \
    "ldrd r7, r8, [r3, #16]\n\t"                                                 \
    "push {r7, r8}\n\t"                 /* [sp]: src skip, q skip */            \
    "ldr r3, [r3, #24]\n\t"             /* quad bytes */                        \
    "add r5, r4, r4, lsl #1\n\t"        /* 3 C */                               \
    "3:\n\t"                                                                     \
    "add r2, r1, r3\n\t"                                                         \
    "5:\n\t"                                                                     \
    quads                                                                        \
    "cmp r1, r2\n\t"                                                             \
    "bne 5b\n\t"                                                                 \
    "ldrd r7, r8, [sp]\n\t"             /* the next row */                      \
    "add r0, r0, r7\n\t"                                                         \
    "add r1, r1, r8\n\t"                                                         \
    "subs lr, lr, #1\n\t"                                                        \
    "bne 3b\n\t"                                                                 \
    "add sp, sp, #8\n\t"                                                         \
    "pop {r4-r11, pc}\n\t"

PLANES_NAKED static void fill_rows_quads(PLANES_ARG const int8_t *src, PLANES_ARG uint32_t *q,
                                         PLANES_ARG int32_t unused,
                                         PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(FILL_ROWS_QUADS(FILL_QUAD));
}

/* ... and rows of exactly 12 or 24 columns (VWW's stride-2 inputs): a row's quads
 * unrolled, no loop in the row; 4 instructions a row on top of the quads. */
#define FILL_ROWS_WHOLE(quads)                                                   \
    "push {r4-r11, lr}\n\t"                                                      \
    "ldrd r4, r6, [r3]\n\t"               /* C, offsets */                        \
    "ldr lr, [r3, #12]\n\t"               /* rows */                              \
    "ldrd r2, r3, [r3, #16]\n\t"          /* src skip, q skip */                  \
    "add r5, r4, r4, lsl #1\n\t"          /* 3 C */                               \
    "3:\n\t"                                                                     \
    quads                                                                        \
    "add r0, r0, r2\n\t"                                                         \
    "add r1, r1, r3\n\t"                                                         \
    "subs lr, lr, #1\n\t"                                                        \
    "bne 3b\n\t"                                                                 \
    "pop {r4-r11, pc}\n\t"

PLANES_NAKED static void fill_rows_12(PLANES_ARG const int8_t *src, PLANES_ARG uint32_t *q,
                                      PLANES_ARG int32_t unused,
                                      PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(FILL_ROWS_WHOLE(FILL_QUAD FILL_QUAD FILL_QUAD));
}

PLANES_NAKED static void fill_rows_24(PLANES_ARG const int8_t *src, PLANES_ARG uint32_t *q,
                                      PLANES_ARG int32_t unused,
                                      PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(FILL_ROWS_WHOLE(FILL_QUAD FILL_QUAD FILL_QUAD FILL_QUAD FILL_QUAD
                                     FILL_QUAD));
}

/*
 * Every whole block of four channels of a call in one routine (stride 2 both ways,
 * the fill's rows of exactly 12 or 24 columns: VWW's layers 11 and 7): per block its
 * fill (FILL_ROWS_WHOLE's row loop, a row's last quad straight to the next row) and
 * then its four channels. No call, C loop or frame setup per block. blocks_s2_six:
 * 6x6 outputs, a channel's six rows straight (no row ends, no out_end); _twelve: rows
 * of twelve, an even number of them, two a time. Arguments: p (the planes, as
 * block_s2_six's), out, rec (channel 0's), args = {blocks, C, output bytes, src (the
 * fill's, block 0), q (the fill's), offsets, rows, src step} (fill_setup's; src
 * step: from a row's last quad to the next row, 4 C + its src skip; q's is a
 * constant, a plane row less the quads before). The frame is block_s2_six's, 32
 * bytes more: from r12 = sp + 48, [48] blocks left, [52] src of the next block, [56]
 * q, [60] offsets, [64] rows, [68] src step; [28] and [32] hold the block's p and
 * out (_six: only between its fill and channels). Between blocks out and the record
 * need no change (the next channel's are the next block's first); p goes back to
 * plane 0.
 */
#define HEX_BLOCKS_SETUP                                                         \
    "push {r4-r11, lr}\n\t"                                                      \
    "sub sp, sp, #128\n\t"                                                       \
    "add r12, sp, #48\n\t"                                                       \
    "strd r0, r1, [r12, #28]\n\t"                                                \
    "str r2, [r12, #36]\n\t"                                                     \
    "ldm r3!, {r4-r6}\n\t"                /* blocks, C, output bytes */          \
    "str r4, [r12, #48]\n\t"                                                     \
    "str r5, [r12, #8]\n\t"                                                      \
    "lsl r8, r5, #1\n\t"                                                         \
    "add r9, r5, r5, lsl #1\n\t"                                                 \
    "strd r8, r9, [r12, #12]\n\t"                                                \
    "str r6, [r12, #44]\n\t"                                                     \
    "ldm r3, {r4-r8}\n\t"                 /* src, q, offsets, rows, src step */  \
    "add r3, r12, #52\n\t"                                                       \
    "stm r3, {r4-r8}\n\t"

/* A block's fill (its last quad a row by last_quad), r12 back to the frame. */
#define HEX_BLOCKS_FILL(quads, last_quad)                                        \
    "0:\n\t"                              /* a block: its fill */                \
    "ldr r4, [r12, #8]\n\t"               /* C */                                \
    "ldrd r0, r1, [r12, #52]\n\t"         /* src, q */                           \
    "add r3, r0, #4\n\t"                                                         \
    "str r3, [r12, #52]\n\t"                                                     \
    "ldrd r6, lr, [r12, #60]\n\t"         /* offsets, rows */                    \
    "ldr r2, [r12, #68]\n\t"              /* 4 C + src skip */                   \
    "add r5, r4, r4, lsl #1\n\t"          /* 3 C */                              \
    "3:\n\t"                                                                     \
    quads                                                                        \
    last_quad                                                                    \
    "subs lr, lr, #1\n\t"                                                        \
    "bne 3b\n\t"                                                                 \
    "add r12, sp, #48\n\t"                /* the fill used r12 */

/* A block's end: the next block's fill, or the return. */
#define HEX_BLOCKS_NEXT                                                          \
    "ldr r3, [r12, #48]\n\t"                                                     \
    "subs r3, r3, #1\n\t"                                                        \
    "beq 9f\n\t"                                                                 \
    "str r3, [r12, #48]\n\t"                                                     \
    "b 0b\n\t"                                                                   \
    "9:\n\t"                                                                     \
    "add sp, sp, #128\n\t"                                                       \
    "pop {r4-r11, pc}\n\t"

/* A row's last fill quad: src by r2 (4 C + src skip) and q by q_bytes (256 bytes, a
 * plane row, less the 8 of each quad before) to the next row. */
#define BLOCKS_LAST_QUAD(q_bytes) FILL_QUAD_STEP("add r0, r0, r2\n\t", q_bytes)

/* blocks_s2_six: [40] p's end (past the block's four planes, the same for all
 * blocks), [44] output bytes less 1. A channel: its record into the frame (as
 * HEX_CHANNEL), six rows (p moves 6 x 512 bytes, out the channel's output bytes),
 * then p and out straight to the next channel's (64 bytes on from its start; 1). */
#define HEX6_SETUP                                                               \
    "ldr r6, [r12, #44]\n\t"                                                     \
    "sub r6, r6, #1\n\t"                                                         \
    "str r6, [r12, #44]\n\t"                                                     \
    "add r4, r0, #256\n\t"                                                       \
    "str r4, [r12, #40]\n\t"

#define HEX6_CHANNELS                                                            \
    "ldrd r0, r1, [r12, #28]\n\t"         /* the block's p and out */            \
    "1:\n\t"                              /* a channel */                        \
    "ldr r3, [r12, #36]\n\t"                                                     \
    "ldm r3!, {r2, r4-r11}\n\t"           /* taps, bias, multiplier2, rsk */     \
    "str r3, [r12, #36]\n\t"                                                     \
    "strd r10, r11, [r12]\n\t"                                                   \
    "add r3, sp, #24\n\t"                                                        \
    "stm r3, {r2, r4-r8}\n\t"                                                    \
    "strd r9, r9, [sp]\n\t"                                                      \
    "strd r9, r9, [sp, #8]\n\t"                                                  \
    "strd r9, r9, [sp, #16]\n\t"                                                 \
    HEX_FIRST HEX_FIRST HEX_FIRST HEX_FIRST HEX_FIRST HEX_FIRST                  \
    "subw r0, r0, #(6 * 512 - 64)\n\t"                                           \
    "ldr r3, [r12, #44]\n\t"                                                     \
    "sub r1, r1, r3\n\t"                                                         \
    "ldr r3, [r12, #40]\n\t"                                                     \
    "cmp r0, r3\n\t"                                                             \
    "bne 1b\n\t"                                                                 \
    "str r1, [r12, #32]\n\t"              /* the next block's out */

/* blocks_s2_twelve: [40] channels left. Two output rows' end, a channel's. */
#define HEX12_CHANNELS_END                                                       \
    "ldr r3, [r12, #24]\n\t"              /* out_end */                          \
    "cmp r1, r3\n\t"                                                             \
    "bne 2b\n\t"                                                                 \
    "ldr r3, [r12, #40]\n\t"                                                     \
    "subs r3, r3, #1\n\t"                                                        \
    "str r3, [r12, #40]\n\t"                                                     \
    "bne 1b\n\t"                                                                 \
    "ldr r3, [r12, #28]\n\t"              /* p back to plane 0 */                \
    "sub r3, r3, #256\n\t"                                                       \
    "str r3, [r12, #28]\n\t"

PLANES_NAKED static void blocks_s2_six(PLANES_ARG const uint32_t *p, PLANES_ARG int8_t *out,
                                       PLANES_ARG const kiln_dw_planes_channel_t *rec,
                                       PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(HEX_BLOCKS_SETUP HEX6_SETUP
                     HEX_BLOCKS_FILL(FILL_QUAD FILL_QUAD, BLOCKS_LAST_QUAD("240"))
                     HEX6_CHANNELS HEX_BLOCKS_NEXT);
}

PLANES_NAKED static void blocks_s2_twelve(PLANES_ARG const uint32_t *p,
                                          PLANES_ARG int8_t *out,
                                          PLANES_ARG const kiln_dw_planes_channel_t *rec,
                                          PLANES_ARG const uint32_t *args)
{
    __asm__ volatile(HEX_BLOCKS_SETUP
                     HEX_BLOCKS_FILL(FILL_QUAD FILL_QUAD FILL_QUAD FILL_QUAD FILL_QUAD,
                                     BLOCKS_LAST_QUAD("216"))
                     "movs r3, #4\n\t"
                     "str r3, [r12, #40]\n\t"
                     HEX_CHANNEL HEX_FIRST HEX_SECOND HEX_FIRST HEX_SECOND
                     HEX12_CHANNELS_END HEX_BLOCKS_NEXT);
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

#if defined(PLANES_ASM)
typedef void fill_fn_t(const int8_t *src, uint32_t *q, int32_t unused, const uint32_t *args);

/* fill_rows' call for blocks of four channels, the same for all blocks of a call:
 * its function, the word offset of q in the planes and its args. */
typedef struct {
    fill_fn_t *fn;
    size_t q;
    uint32_t args[7];
} fill_call_t;

/* 0 when no image word lies in the columns read (no fill at all). */
static int fill_setup(fill_call_t *f, int32_t rows, int32_t cols, int32_t in_h,
                      int32_t in_w, int32_t in_c, int32_t pad_h, int32_t pad_w,
                      uint32_t off2)
{
    /* Input columns [0, ix_end) land in the columns read (plane columns [pad_w, cols));
     * the plane rows of image rows: [pad_h, min(rows, in_h + pad_h)). */
    int32_t ix_end = cols - pad_w;
    ix_end = ix_end < in_w ? ix_end : in_w;
    const int32_t py_end = rows < in_h + pad_h ? rows : in_h + pad_h;
    if (ix_end <= 0 || py_end <= pad_h) {
        return 0;
    }
    const int32_t odd = pad_w & 1;
    const int32_t rest = ix_end - odd;
    const uint32_t flags = (uint32_t)odd | (uint32_t)(rest & 1) << 1 |
                           (uint32_t)(rest & 2) << 1;
    /* Columns src and words q move along a row: the lone first column's, the
     * quads' and the pair's (a last lone column is read and written in place). */
    const uint32_t src_cols = (uint32_t)(ix_end - (rest & 1));
    const uint32_t q_words = (uint32_t)(odd + rest / 2);
    PLANES_STATIC_ASSERT(PLANE_RW == 16);   /* fill_rows' offsets: 64-byte planes */
    f->fn = flags != 0    ? fill_rows
            : rest == 12    ? fill_rows_12
            : rest == 24    ? fill_rows_24
                            : fill_rows_quads;
    f->q = (size_t)pad_h * PLANE_ROW + (size_t)(pad_w / 2);
    f->args[0] = (uint32_t)in_c;
    f->args[1] = off2;
    f->args[2] = flags;
    f->args[3] = (uint32_t)(py_end - pad_h);
    f->args[4] = ((uint32_t)in_w - src_cols) * (uint32_t)in_c;
    f->args[5] = 4u * (PLANE_ROW - q_words);
    f->args[6] = 8u * (uint32_t)(rest / 4);
    return 1;
}
/* Stride 2 both ways, 6x6 outputs or rows of twelve (an even number of them), fills
 * of whole rows of 12 or 24 columns (VWW's layers 11 and 7): all whole blocks of
 * four channels of image (a batch's) in one call (blocks_s2_six, _twelve), the fill's
 * arguments as fill_setup sets them. The channels done: 0 where they do not apply.
 * Out of line, the fill set up again: the caller's block loop keeps its registers. */
static KILN_NOINLINE int32_t blocks_s2(const kiln_conv_params_t *p,
                                       const kiln_dims_t *input_dims,
                                       const kiln_dims_t *output_dims, uint32_t *planes,
                                       const int8_t *image, int8_t *out,
                                       const kiln_dw_planes_channel_t *channels,
                                       uint32_t off2)
{
    const int32_t in_c = input_dims->c;
    const int32_t out_w = output_dims->w;
    fill_call_t fill;
    if (in_c < 4 || (out_w == 6 ? output_dims->h != 6
                                : out_w != 12 || (output_dims->h & 1) != 0) ||
        p->stride.w != 2 || p->stride.h != 2 ||
        !fill_setup(&fill, plane_rows(output_dims->h, 2), 2 * plane_row_words(out_w, 2),
                    input_dims->h, input_dims->w, in_c, p->padding.h, p->padding.w, off2) ||
        fill.fn != (out_w == 6 ? fill_rows_12 : fill_rows_24) ||
        fill.args[5] + 8u * (uint32_t)out_w / 2u != 4u * PLANE_ROW) {
        return 0;
    }
    const size_t out_bytes = (size_t)output_dims->h * (size_t)out_w * (size_t)in_c;
    const uint32_t args[8] = {
        (uint32_t)in_c / 4u, (uint32_t)in_c, (uint32_t)out_bytes, (uint32_t)(uintptr_t)image,
        (uint32_t)(uintptr_t)(planes + fill.q), fill.args[1], fill.args[3],
        4u * (uint32_t)in_c + fill.args[4]};
    (out_w == 6 ? blocks_s2_six : blocks_s2_twelve)(planes, out, channels, args);
    return in_c & ~3;
}
#endif

/* The image part of the four planes of channels c.. c + n - 1 in C (host, M3, and a
 * last block of fewer than four channels): plane column px holds input column
 * px - pad_w; words outside the image keep their zeros. */
static void fill_planes(uint32_t *planes, int32_t rows, int32_t cols, const int8_t *image,
                        int32_t in_h, int32_t in_w, int32_t in_c, int32_t pad_h,
                        int32_t pad_w, int32_t n, uint32_t off2)
{
    /* Input columns [0, ix_end) land in the columns read (plane columns [pad_w, cols)). */
    int32_t ix_end = cols - pad_w;
    ix_end = ix_end < in_w ? ix_end : in_w;
    if (ix_end <= 0) {
        return;
    }
    for (int32_t py = 0; py < rows; ++py) {
        const int32_t iy = py - pad_h;
        if (iy < 0 || iy >= in_h) {
            continue;
        }
        const int8_t *src = image + ((size_t)iy * (size_t)in_w) * (size_t)in_c;
        uint32_t *q = planes + (size_t)py * PLANE_ROW + (size_t)(pad_w / 2);
        int32_t ix = 0;
        if (pad_w & 1) {        /* column 0 in a word's upper half, padding below */
            const uint32_t x = load_px(src, n);
            const uint32_t e = sxtab16(off2, x);
            const uint32_t o = sxtab16_ror8(off2, x);
            q[0] = e << 16;
            q[PLANE_RW] = o << 16;
            q[2 * PLANE_RW] = e & 0xFFFF0000u;
            q[3 * PLANE_RW] = o & 0xFFFF0000u;
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
            q[PLANE_RW] = (oa & 0xFFFFu) | (ob << 16);
            q[2 * PLANE_RW] = (eb & 0xFFFF0000u) | (ea >> 16);
            q[3 * PLANE_RW] = (ob & 0xFFFF0000u) | (oa >> 16);
        }
        if (ix < ix_end) {      /* a last column in a word's lower half */
            const uint32_t x = load_px(src + (size_t)ix * step, n);
            const uint32_t e = sxtab16(off2, x);
            const uint32_t o = sxtab16_ror8(off2, x);
            q[0] = e & 0xFFFFu;
            q[PLANE_RW] = o & 0xFFFFu;
            q[2 * PLANE_RW] = e >> 16;
            q[3 * PLANE_RW] = o >> 16;
        }
    }
}

/* Zeros in the ring: the words of the plane rows the outputs read that the fill
 * never writes (rows outside [py0, py1); in those, words outside [w0, w1)), for
 * all four planes; the image part is rewritten per block. On VWW's maps a tenth
 * of the words memset would clear. Plain loops: GCC would make them memset calls. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
static inline void zero_word4(uint32_t *r)
{
    r[0] = 0;
    r[PLANE_RW] = 0;
    r[2 * PLANE_RW] = 0;
    r[3 * PLANE_RW] = 0;
}

static void zero_ring(uint32_t *planes, int32_t rows, int32_t row_words, int32_t py0,
                      int32_t py1, int32_t w0, int32_t w1)
{
    w0 = w0 < row_words ? w0 : row_words;
    w1 = w1 < row_words ? w1 : row_words;
    py1 = py1 > py0 ? py1 : py0;
    for (int32_t py = 0; py < rows; ++py) {     /* the rows outside: whole */
        if (py == py0) {
            py = py1;
            if (py >= rows) {
                break;
            }
        }
        for (int32_t w = 0; w < row_words; ++w) {
            zero_word4(planes + (size_t)py * PLANE_ROW + (size_t)w);
        }
    }
    /* The rows inside: a column at a time down them (VWW: the right pad's). */
    for (int32_t w = 0; w < row_words; ++w) {
        if (w == w0) {
            w = w1;
            if (w >= row_words) {
                break;
            }
        }
        uint32_t *r = planes + (size_t)py0 * PLANE_ROW + (size_t)w;
        for (int32_t py = py0; py < py1; ++py, r += PLANE_ROW) {
            zero_word4(r);
        }
    }
}

/* What one channel's pass needs. */
typedef struct {
    int32_t out_h, out_w, stride_h, stride_w, in_c;
    int32_t act_min, act_max;
} planes_layer_t;

/* All output pixels of one channel from its plane P (output 0's first tap at word 0,
 * rows PLANE_ROW words apart), in C: pixel ox's first tap is plane column
 * ox * stride_w, in a word's lower half when even (SMLAD, then SMLABT on the next
 * word), its upper half when odd (SMLATB, then SMLAD on the next word). */
static KILN_ALWAYS_INLINE void channel_c(const planes_layer_t *g, const uint32_t *P,
                                         const kiln_dw_planes_channel_t *ch, int8_t *out,
                                         int full_range)
{
    const size_t step = (size_t)g->in_c;
    const size_t row_step = (size_t)g->stride_h * PLANE_ROW;
    const int32_t right_shift = (int32_t)(ch->rsk & 0xFFu);
    const int32_t k = (int32_t)ch->rsk >> 8;
    const int32_t m2 = (int32_t)ch->multiplier2;
    for (int32_t oy = 0; oy < g->out_h; ++oy, P += row_step) {
        for (int32_t ox = 0; ox < g->out_w; ++ox, out += step) {
            const int32_t col = ox * g->stride_w;
            const uint32_t *r = P + col / 2;
            int32_t acc = ch->bias;
            for (int32_t t = 0; t < 3; ++t, r += PLANE_ROW) {
                if (col & 1) {
                    acc = smlatb(r[0], ch->taps[t][0], acc);
                    acc = kiln_smlad(r[1], ch->taps[t][1], acc);
                } else {
                    acc = kiln_smlad(r[0], ch->taps[t][0], acc);
                    acc = smlabt(r[1], ch->taps[t][1], acc);
                }
            }
            *out = kiln_dw_output(acc, m2, right_shift, k, g->act_min, g->act_max, full_range);
        }
    }
}

/* One instantiation per full_range: the constant folded in each. */
static KILN_NOINLINE void channel_full(const planes_layer_t *g, const uint32_t *P,
                                       const kiln_dw_planes_channel_t *ch, int8_t *out)
{
    channel_c(g, P, ch, out, 1);
}

static KILN_NOINLINE void channel_clamped(const planes_layer_t *g, const uint32_t *P,
                                          const kiln_dw_planes_channel_t *ch, int8_t *out)
{
    channel_c(g, P, ch, out, 0);
}

kiln_status_t kiln_dwconv2d_3x3_planes_s8(const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_dw_planes_channel_t *channels,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims,
                                          const kiln_dims_t *output_dims, int8_t *output)
{
    if (!kiln_dw3x3_records_args_valid(ctx, params, channels, input_dims, input, filter_dims,
                                       output_dims, output)) {
        return KILN_ERR_ARG;
    }
    const int32_t scratch = kiln_dwconv2d_3x3_planes_s8_get_buffer_size(&params->conv, output_dims);
    if (scratch == 0 || ctx->size < scratch) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_c = input_dims->c;
    const int32_t rows = plane_rows(output_dims->h, p->stride.h);
    const int32_t row_words = plane_row_words(output_dims->w, p->stride.w);
    const int32_t cols = 2 * row_words;
    uint32_t *planes = (uint32_t *)ctx->buf;
    {
        /* What fill_planes writes: image rows, plane words from pad_w / 2 to the one
         * holding the last input column read. */
        int32_t ix_end = cols - p->padding.w;
        ix_end = ix_end < input_dims->w ? ix_end : input_dims->w;
        int32_t py1 = rows < input_dims->h + p->padding.h ? rows : input_dims->h + p->padding.h;
        py1 = ix_end > 0 ? py1 : 0;
        zero_ring(planes, rows, row_words, p->padding.h, py1, p->padding.w / 2,
                  (p->padding.w + ix_end + 1) / 2);
    }
    const planes_layer_t g = {
        .out_h = output_dims->h, .out_w = output_dims->w, .stride_h = p->stride.h,
        .stride_w = p->stride.w, .in_c = in_c,
        .act_min = p->activation.min, .act_max = p->activation.max,
    };
    const int full_range = p->activation.min == -128 && p->activation.max == 127;
    const uint32_t off2 = (uint32_t)(uint16_t)p->input_offset * 0x10001u;
    const size_t image_bytes = (size_t)input_dims->h * (size_t)input_dims->w * (size_t)in_c;
    const size_t out_bytes = (size_t)output_dims->h * (size_t)output_dims->w * (size_t)in_c;
#if defined(PLANES_ASM)
    /* The assembly rows: full range, at least one pair a row. */
    const int use_asm = full_range && output_dims->w >= 2;
    const uint32_t pairs = (uint32_t)output_dims->w / 2;
    const uint32_t advance = (uint32_t)p->stride.w * 4u * pairs;     /* p's, a row */
    uint32_t args[5] = {
        0, (uint32_t)in_c, (uint32_t)out_bytes, 2u * pairs * (uint32_t)in_c,
        4u * (uint32_t)p->stride.h * PLANE_ROW - advance};
    fill_call_t fill;
    const int fill_asm = fill_setup(&fill, rows, cols, input_dims->h, input_dims->w, in_c,
                                    p->padding.h, p->padding.w, off2);
    /* Stride 2 both ways on rows of six or twelve: six pixels a time (block_s2_six,
     * _twelve). */
    const int six = (output_dims->w == 6 || output_dims->w == 12) && p->stride.h == 2;
    uint32_t six_args[3] = {0, (uint32_t)in_c, (uint32_t)out_bytes};
    /* ... all whole blocks in one call where blocks_s2_six / _twelve apply. */
    const int blocks = use_asm && six && p->stride.w == 2 && fill_asm;
#endif
    for (int32_t b = 0; b < input_dims->n; ++b) {
        const int8_t *image = input + (size_t)b * image_bytes;
        int8_t *out = output + (size_t)b * out_bytes;
        int32_t c0 = 0;
#if defined(PLANES_ASM)
        if (blocks) {
            c0 = blocks_s2(p, input_dims, output_dims, planes, image, out, channels, off2);
        }
#endif
        for (int32_t c = c0; c < in_c; c += 4) {
            const int32_t n = in_c - c < 4 ? in_c - c : 4;
#if defined(PLANES_ASM)
            if (n == 4) {
                if (fill_asm) {
                    fill.fn(image + c, planes + fill.q, 0, fill.args);
                }
            } else
#endif
            {
                fill_planes(planes, rows, cols, image + c, input_dims->h, input_dims->w,
                            in_c, p->padding.h, p->padding.w, n, off2);
            }
#if defined(PLANES_ASM)
            if (use_asm) {
                args[0] = (uint32_t)n;
                six_args[0] = (uint32_t)n;
                const int odd = output_dims->w & 1;
                if (p->stride.w == 2 && six) {
                    (output_dims->w == 6 ? block_s2_six : block_s2_twelve)(
                        planes, out + c, channels + c, six_args);
                } else if (p->stride.w == 2) {
                    (odd ? block_s2_odd : block_s2_even)(planes, out + c, channels + c, args);
                } else {
                    (odd ? block_s1_odd : block_s1_even)(planes, out + c, channels + c, args);
                }
                continue;
            }
#endif
            for (int32_t j = 0; j < n; ++j) {      /* plane j: channel c + j */
                (full_range ? channel_full : channel_clamped)(
                    &g, planes + (size_t)j * PLANE_RW, channels + c + j, out + c + j);
            }
        }
    }
    return KILN_OK;
}
