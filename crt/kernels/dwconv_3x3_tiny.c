/*
 * dwconv_3x3_tiny.c - DEPTHWISE_CONV_2D with a 3x3 filter onto a 3x3 output map,
 * depth multiplier 1, no dilation, strides 1 or 2, any padding, any number of
 * channels: kiln_dwconv2d_3x3_tiny_s8, for the last depthwise layers of
 * MobileNet-style models (VWW's 6x6 -> 3x3 at stride 2 and 3x3 -> 3x3 at stride
 * 1). Semantics in conv.h, primitives in conv_dsp.h.
 *
 * Per channel it reads kiln_dwconv2d_3x3_planes_s8's flash record
 * (kiln_dw_planes_channel_t: weight pairs (w0, w1), (w1, w2) per filter row, the
 * bias as the model has it, multiplier2, rsk) and computes only the taps that lie
 * in the image: no zero ring, no padding tap.
 *
 * On cores with the DSP extension two geometries run in assembly, a block of four
 * channels at a time, straight-line code (the others, clamped activations and the
 * last C % 4 channels run the C path below):
 *   S1: input 3x3, stride 1, SAME (padding 1 all round): 49 real taps of 81.
 *   S2: input 6x6, stride 2, SAME (padding 0 top/left, 1 bottom/right): 64 of 81.
 * A block's input is read once, as words of four channels: PKHBT / PKHTB pair two
 * pixels' bytes (channels 0, 1 / 2, 3), SXTAB16 (ror #8) widens them to the int16
 * pairs (x_a + input_offset, x_b + input_offset) of one channel, stored in scratch
 * (at most 288 bytes); then a channel at a time its pairs meet the record's weight
 * pairs in SMLAD (two taps), and a lone tap in SMLATT / SMLABT. With (x0, x1, x2)
 * an input row's real columns at stride 1 and A = (x0, x1), B = (x1, x2), a filter
 * row adds to output pixels 0, 1, 2 of its output row
 *   A.(w1, w2);  A.(w0, w1) + x2 w2 (SMLATT B, (w1, w2));  B.(w0, w1)
 * (4 instructions, 7 MACs). At stride 2 with D0 = (x0, x1), D1 = (x2, x3),
 * D2 = (x4, x5):
 *   D0.(w0, w1) + x2 w2;  D1.(w0, w1) + x4 w2 (SMLABT D, (w1, w2));  D2.(w0, w1)
 * (5 instructions, 8 MACs). The first tap of a pixel adds the bias. Requantization
 * as kiln_dw_output (dwconv_3x3_planes.c's assembly): SMMLAR, ADD asr #31, ASR by
 * rsk's low byte, ADD rsk asr #8, SSAT asr #1, six instructions with the STRB.
 *
 * On QEMU mps2-an386 (VWW, bit-exact), instructions a MAC (81 a channel, padding
 * taps counted; the call and its argument checks included) against the planes
 * kernel's: 3x3 -> 3x3 2.76 -> 1.64, 6x6 -> 3x3 3.64 -> 2.26.
 *
 * Overflow: |w * (x + input_offset)| <= 128 * 255; the compiler checks
 * |bias| + 256 * sum|w| < 2^31 per channel (conv.h), and every partial sum here is
 * the bias plus a subset of the taps.
 */
#include "conv_dsp.h"

/* Bytes of scratch a block of four channels needs: S2's six input rows of three
 * pairs (S1 takes three rows of two). */
#define TINY_SCRATCH_BYTES (6 * 3 * 4 * 4)

int32_t kiln_dwconv2d_3x3_tiny_s8_get_buffer_size(const kiln_conv_params_t *params,
                                                  const kiln_dims_t *output_dims)
{
    if (params == NULL || output_dims == NULL || output_dims->h != 3 || output_dims->w != 3 ||
        params->stride.h < 1 || params->stride.h > 2 || params->stride.w < 1 ||
        params->stride.w > 2) {
        return 0;
    }
    return TINY_SCRATCH_BYTES;
}

#if defined(__ARM_FEATURE_DSP) && defined(__thumb2__)
#if defined(__clang__)
#define TINY_NAKED __attribute__((naked, noinline))
#else
#define TINY_NAKED __attribute__((naked, noinline, noipa))
#endif
#define TINY_ARG __attribute__((unused))

/*
 * The blocks of four channels of one image. Arguments: in (the image), out (its
 * output), rec (channel 0's record) and args = {blocks, C, (input_offset,
 * input_offset), scratch}. Registers: r3 C and lr 3 C throughout; in the fill r0
 * the source pixel, r11 the offsets, r12 the scratch; in a channel's pass r0 its
 * pairs, r1 its output, r2 channel 0's record, r4/r5 weight pairs (then
 * multiplier2, rsk), r6-r8 input pairs, r9-r11 an output row's sums, r12 the bias.
 * The four channels of a block are unrolled: 5 instructions a channel fewer than a
 * loop (VWW's 3x3 maps: 147 and 167 instructions a layer, for 2.6 KB of code).
 * Stack (24 bytes under the saved registers): [0] the next block's input, [4] its
 * output, [8] its first record, [12] blocks left, [16] offsets, [20] scratch.
 */
#define TINY_ENTRY                                                               \
    "push {r4-r11, lr}\n\t"                                                       \
    "ldm r3, {r4-r7}\n\t"                 /* blocks, C, offsets, scratch */       \
    "mov r3, r5\n\t"                                                              \
    "add lr, r3, r3, lsl #1\n\t"                                                  \
    "push {r0, r1, r2, r4, r6, r7}\n\t"                                           \
    "1:\n\t"                              /* a block */                           \
    "ldr r0, [sp]\n\t"                                                            \
    "add r4, r0, #4\n\t"                                                          \
    "str r4, [sp]\n\t"                                                            \
    "ldrd r11, r12, [sp, #16]\n\t"

/* Its four channels, unrolled (their pairs, records and outputs at immediate
 * offsets): r0 the pairs, r1 channel 0's output, r2 its record. */
#define TINY_CHANNELS                                                            \
    "ldrd r1, r2, [sp, #4]\n\t"                                                   \
    "ldr r0, [sp, #20]\n\t"

/* After a channel: r1 back to output row 0, one channel on. */
#define TINY_CHANNEL_END                                                         \
    "sub r1, r1, lr, lsl #1\n\t"                                                 \
    "add r1, r1, #1\n\t"

/* After a block: the next one's output and records, then the next block. */
#define TINY_EXIT                                                                \
    "add r2, r2, #144\n\t"                                                       \
    "strd r1, r2, [sp, #4]\n\t"                                                  \
    "ldr r4, [sp, #12]\n\t"                                                      \
    "subs r4, r4, #1\n\t"                                                        \
    "str r4, [sp, #12]\n\t"                                                      \
    "bne 1b\n\t"                                                                 \
    "add sp, sp, #24\n\t"                                                        \
    "pop {r4-r11, pc}\n\t"

#define TINY_BIAS(j) "ldr r12, [r2, #(36 * " #j " + 24)]\n\t"

/* An output row's three sums of channel j requantized (kiln_dw_output) and stored
 * at out, out + C, out + 2 C. */
#define TINY_REQUANT(j)                                                          \
    "ldrd r4, r5, [r2, #(36 * " #j " + 28)]\n\t" /* multiplier2, rsk */           \
    "smmlar r9, r9, r4, r9\n\t"                                                   \
    "smmlar r10, r10, r4, r10\n\t"                                                \
    "smmlar r11, r11, r4, r11\n\t"                                                \
    "add r9, r9, r9, asr #31\n\t"                                                 \
    "add r10, r10, r10, asr #31\n\t"                                              \
    "add r11, r11, r11, asr #31\n\t"                                              \
    "asr r9, r9, r5\n\t"                                                          \
    "asr r10, r10, r5\n\t"                                                        \
    "asr r11, r11, r5\n\t"                                                        \
    "add r9, r9, r5, asr #8\n\t"                                                  \
    "add r10, r10, r5, asr #8\n\t"                                                \
    "add r11, r11, r5, asr #8\n\t"                                                \
    "ssat r9, #8, r9, asr #1\n\t"                                                 \
    "ssat r10, #8, r10, asr #1\n\t"                                               \
    "ssat r11, #8, r11, asr #1\n\t"                                               \
    "strb r9, [r1]\n\t"                                                           \
    "strb r10, [r1, r3]\n\t"                                                      \
    "strb r11, [r1, r3, lsl #1]\n\t"

/* S1's fill of input row y: pixels P0, P1, P2 (r4-r6); channel j's pairs A, B at
 * scratch + 32 y + 8 j. */
#define S1_FILL_ROW(y)                                                           \
    "ldr r4, [r0]\n\t"                                                            \
    "ldr r5, [r0, r3]\n\t"                                                        \
    "ldr r6, [r0, r3, lsl #1]\n\t"                                                \
    "add r0, r0, lr\n\t"                                                          \
    "pkhbt r7, r4, r5, lsl #16\n\t"       /* bytes (a0 a1 b0 b1): A of ch 0, 1 */ \
    "pkhtb r8, r5, r4, asr #16\n\t"       /* (a2 a3 b2 b3): A of ch 2, 3 */       \
    "pkhbt r4, r5, r6, lsl #16\n\t"       /* B of ch 0, 1 */                      \
    "pkhtb r5, r6, r5, asr #16\n\t"       /* B of ch 2, 3 */                      \
    "sxtab16 r6, r11, r7\n\t"                                                     \
    "sxtab16 r9, r11, r4\n\t"                                                     \
    "strd r6, r9, [r12, #(32 * " #y ")]\n\t"                                      \
    "sxtab16 r6, r11, r7, ror #8\n\t"                                             \
    "sxtab16 r9, r11, r4, ror #8\n\t"                                             \
    "strd r6, r9, [r12, #(32 * " #y " + 8)]\n\t"                                  \
    "sxtab16 r6, r11, r8\n\t"                                                     \
    "sxtab16 r9, r11, r5\n\t"                                                     \
    "strd r6, r9, [r12, #(32 * " #y " + 16)]\n\t"                                 \
    "sxtab16 r6, r11, r8, ror #8\n\t"                                             \
    "sxtab16 r9, r11, r5, ror #8\n\t"                                             \
    "strd r6, r9, [r12, #(32 * " #y " + 24)]\n\t"

/* S1: filter row k on input row y into output row's sums, each added to a0..a2
 * (r12, the bias, for a row's first). */
#define S1_TAPS_(j, k, y, a0, a1, a2)                                            \
    "ldrd r4, r5, [r2, #(36 * " #j " + 8 * " #k ")]\n\t" /* (w0, w1), (w1, w2) */ \
    "ldrd r6, r7, [r0, #(32 * " #y " + 8 * " #j ")]\n\t" /* A, B */               \
    "smlad r9, r6, r5, " a0 "\n\t"                                                \
    "smlad r10, r6, r4, " a1 "\n\t"                                               \
    "smlatt r10, r7, r5, r10\n\t"                                                 \
    "smlad r11, r7, r4, " a2 "\n\t"

/* (BIAS3 / SUMS3 expand to three arguments before S1_TAPS_ / S2_TAPS_ see them.) */
#define S1_TAPS(j, k, y, a) S1_TAPS_(j, k, y, a)
#define BIAS3 "r12", "r12", "r12"
#define SUMS3 "r9", "r10", "r11"

/* Channel j: output row 0 from filter rows 1, 2 on input rows 0, 1 (row 0 is
 * padding), row 1 from all three on rows 0..2, row 2 from rows 0, 1 on rows 1, 2. */
#define S1_CHANNEL(j)                                                            \
    TINY_BIAS(j)                                                                  \
    S1_TAPS(j, 1, 0, BIAS3) S1_TAPS(j, 2, 1, SUMS3) TINY_REQUANT(j)               \
    "add r1, r1, lr\n\t"                                                         \
    S1_TAPS(j, 0, 0, BIAS3) S1_TAPS(j, 1, 1, SUMS3) S1_TAPS(j, 2, 2, SUMS3)       \
    TINY_REQUANT(j)                                                               \
    "add r1, r1, lr\n\t"                                                         \
    S1_TAPS(j, 0, 1, BIAS3) S1_TAPS(j, 1, 2, SUMS3) TINY_REQUANT(j)               \
    TINY_CHANNEL_END

TINY_NAKED static void tiny_s1(TINY_ARG const int8_t *in, TINY_ARG int8_t *out,
                               TINY_ARG const kiln_dw_planes_channel_t *rec,
                               TINY_ARG const uint32_t *args)
{
    __asm__ volatile(
        TINY_ENTRY
        S1_FILL_ROW(0) S1_FILL_ROW(1) S1_FILL_ROW(2)
        TINY_CHANNELS
        S1_CHANNEL(0) S1_CHANNEL(1) S1_CHANNEL(2) S1_CHANNEL(3)
        TINY_EXIT);
}

/* S2's fill of input row y (r0 at its pixel 0, then at the next row's): pixels
 * P0..P5 (r4-r9), pairs (P0, P1), (P2, P3), (P4, P5) packed for channels 0, 1
 * (r10, r4, r6) and 2, 3 (r5, r7, r9); channel j's D0..D2 at scratch + 48 y + 12 j,
 * stored in that order (r12 moves on). */
#define S2_FILL_ROW                                                              \
    "ldr r4, [r0]\n\t"                                                            \
    "ldr r5, [r0, r3]\n\t"                                                        \
    "ldr r6, [r0, r3, lsl #1]\n\t"                                                \
    "add r0, r0, lr\n\t"                                                          \
    "ldr r7, [r0]\n\t"                                                            \
    "ldr r8, [r0, r3]\n\t"                                                        \
    "ldr r9, [r0, r3, lsl #1]\n\t"                                                \
    "add r0, r0, lr\n\t"                                                          \
    "pkhbt r10, r4, r5, lsl #16\n\t"                                              \
    "pkhtb r5, r5, r4, asr #16\n\t"                                               \
    "pkhbt r4, r6, r7, lsl #16\n\t"                                               \
    "pkhtb r7, r7, r6, asr #16\n\t"                                               \
    "pkhbt r6, r8, r9, lsl #16\n\t"                                               \
    "pkhtb r9, r9, r8, asr #16\n\t"                                               \
    "sxtab16 r1, r11, r10\n\t"                                                    \
    "sxtab16 r2, r11, r4\n\t"                                                     \
    "sxtab16 r8, r11, r6\n\t"                                                     \
    "stm r12!, {r1, r2, r8}\n\t"                                                  \
    "sxtab16 r1, r11, r10, ror #8\n\t"                                            \
    "sxtab16 r2, r11, r4, ror #8\n\t"                                             \
    "sxtab16 r8, r11, r6, ror #8\n\t"                                             \
    "stm r12!, {r1, r2, r8}\n\t"                                                  \
    "sxtab16 r1, r11, r5\n\t"                                                     \
    "sxtab16 r2, r11, r7\n\t"                                                     \
    "sxtab16 r8, r11, r9\n\t"                                                     \
    "stm r12!, {r1, r2, r8}\n\t"                                                  \
    "sxtab16 r1, r11, r5, ror #8\n\t"                                             \
    "sxtab16 r2, r11, r7, ror #8\n\t"                                             \
    "sxtab16 r8, r11, r9, ror #8\n\t"                                             \
    "stm r12!, {r1, r2, r8}\n\t"

/* S2: channel j's pairs of input row y into r6-r8. */
#define S2_ROW(j, y)                                                             \
    "ldrd r6, r7, [r0, #(48 * " #y " + 12 * " #j ")]\n\t"                         \
    "ldr r8, [r0, #(48 * " #y " + 12 * " #j " + 8)]\n\t"

/* S2: filter row k on the pairs in r6-r8. */
#define S2_TAPS_(j, k, a0, a1, a2)                                               \
    "ldrd r4, r5, [r2, #(36 * " #j " + 8 * " #k ")]\n\t"                          \
    "smlad r9, r6, r4, " a0 "\n\t"                                                \
    "smlabt r9, r7, r5, r9\n\t"                                                   \
    "smlad r10, r7, r4, " a1 "\n\t"                                               \
    "smlabt r10, r8, r5, r10\n\t"                                                 \
    "smlad r11, r8, r4, " a2 "\n\t"

#define S2_TAPS(j, k, a) S2_TAPS_(j, k, a)

/* Channel j: output row oy from filter row k on input row 2 oy + k (row 6 is
 * padding); input rows 2 and 4 stay in r6-r8 from one output row to the next. */
#define S2_CHANNEL(j)                                                            \
    TINY_BIAS(j)                                                                  \
    S2_ROW(j, 0) S2_TAPS(j, 0, BIAS3) S2_ROW(j, 1) S2_TAPS(j, 1, SUMS3)           \
    S2_ROW(j, 2) S2_TAPS(j, 2, SUMS3) TINY_REQUANT(j)                             \
    "add r1, r1, lr\n\t"                                                         \
    S2_TAPS(j, 0, BIAS3) S2_ROW(j, 3) S2_TAPS(j, 1, SUMS3) S2_ROW(j, 4)           \
    S2_TAPS(j, 2, SUMS3) TINY_REQUANT(j)                                          \
    "add r1, r1, lr\n\t"                                                         \
    S2_TAPS(j, 0, BIAS3) S2_ROW(j, 5) S2_TAPS(j, 1, SUMS3) TINY_REQUANT(j)        \
    TINY_CHANNEL_END

TINY_NAKED static void tiny_s2(TINY_ARG const int8_t *in, TINY_ARG int8_t *out,
                               TINY_ARG const kiln_dw_planes_channel_t *rec,
                               TINY_ARG const uint32_t *args)
{
    __asm__ volatile(
        TINY_ENTRY
        S2_FILL_ROW S2_FILL_ROW S2_FILL_ROW S2_FILL_ROW S2_FILL_ROW S2_FILL_ROW
        TINY_CHANNELS
        S2_CHANNEL(0) S2_CHANNEL(1) S2_CHANNEL(2) S2_CHANNEL(3)
        TINY_EXIT);
}

#define TINY_ASM 1
#endif

/* A pair's int16 lanes (conv_dsp.h has them only for cores without DSP). */
static inline int32_t tiny_lane0(uint32_t x) { return (int32_t)(int16_t)(uint16_t)x; }
static inline int32_t tiny_lane1(uint32_t x) { return (int32_t)(int16_t)(uint16_t)(x >> 16); }

/* An output pixel's taps in the image: filter rows [ky0, ky1), columns [kx0, kx1),
 * the input pixel of tap (ky0, kx0) at `at` (in pixels). */
typedef struct {
    int32_t ky0, ky1, kx0, kx1, at;
} tiny_window_t;

/* What the C path needs of the layer: the nine output pixels' windows. */
typedef struct {
    tiny_window_t win[9];
    int32_t in_w, in_c, input_offset, act_min, act_max;
} tiny_layer_t;

/* [k0, k1): the taps k of a window starting at input index `origin` that land in
 * [0, size). */
static void tiny_range(int32_t origin, int32_t size, int32_t *k0, int32_t *k1)
{
    *k0 = origin < 0 ? -origin : 0;
    *k1 = size - origin < 3 ? size - origin : 3;
    *k1 = *k1 > *k0 ? *k1 : *k0;
}

static void tiny_windows(tiny_layer_t *g, const kiln_conv_params_t *p, int32_t in_h)
{
    for (int32_t i = 0; i < 9; ++i) {
        tiny_window_t *v = &g->win[i];
        const int32_t y = (i / 3) * p->stride.h - p->padding.h;
        const int32_t x = (i % 3) * p->stride.w - p->padding.w;
        tiny_range(y, in_h, &v->ky0, &v->ky1);
        tiny_range(x, g->in_w, &v->kx0, &v->kx1);
        /* (an empty window, all padding, reads nothing: `at` stays in the image) */
        const int empty = v->ky1 == v->ky0 || v->kx1 == v->kx0;
        v->at = empty ? 0 : (y + v->ky0) * g->in_w + x + v->kx0;
    }
}

/* One channel's nine outputs in C, any geometry: each output's taps that lie in the
 * image (TFLite's reference skips the others), the weights from the record's
 * pairs: w[r][0], w[r][1] = taps[r][0]'s lanes, w[r][2] = taps[r][1]'s lane 1. */
static KILN_ALWAYS_INLINE void channel_c(const tiny_layer_t *g, const int8_t *in,
                                         const kiln_dw_planes_channel_t *ch, int8_t *out,
                                         int full_range)
{
    int32_t w[3][3];
    for (int32_t r = 0; r < 3; ++r) {
        w[r][0] = tiny_lane0(ch->taps[r][0]);
        w[r][1] = tiny_lane1(ch->taps[r][0]);
        w[r][2] = tiny_lane1(ch->taps[r][1]);
    }
    const int32_t right_shift = (int32_t)(ch->rsk & 0xFFu);
    const int32_t k = (int32_t)ch->rsk >> 8;
    const int32_t m2 = (int32_t)ch->multiplier2;
    const size_t step = (size_t)g->in_c;
    const size_t row_step = (size_t)g->in_w * step;
    for (int32_t i = 0; i < 9; ++i, out += step) {
        const tiny_window_t *v = &g->win[i];
        const int8_t *row = in + (size_t)v->at * step;
        int32_t acc = ch->bias;
        for (int32_t ky = v->ky0; ky < v->ky1; ++ky, row += row_step) {
            const int8_t *px = row;
            for (int32_t kx = v->kx0; kx < v->kx1; ++kx, px += step) {
                acc += w[ky][kx] * (*px + g->input_offset);
            }
        }
        *out = kiln_dw_output(acc, m2, right_shift, k, g->act_min, g->act_max, full_range);
    }
}

/* One instantiation per full_range: the constant folded in each. */
static KILN_NOINLINE void channel_full(const tiny_layer_t *g, const int8_t *in,
                                       const kiln_dw_planes_channel_t *ch, int8_t *out)
{
    channel_c(g, in, ch, out, 1);
}

static KILN_NOINLINE void channel_clamped(const tiny_layer_t *g, const int8_t *in,
                                          const kiln_dw_planes_channel_t *ch, int8_t *out)
{
    channel_c(g, in, ch, out, 0);
}

kiln_status_t kiln_dwconv2d_3x3_tiny_s8(const kiln_context_t *ctx,
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
    const int32_t scratch = kiln_dwconv2d_3x3_tiny_s8_get_buffer_size(&params->conv, output_dims);
    if (scratch == 0 || ctx->size < scratch) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_c = input_dims->c;
    const int full_range = p->activation.min == -128 && p->activation.max == 127;
    const size_t image_bytes = (size_t)input_dims->h * (size_t)input_dims->w * (size_t)in_c;
    const size_t out_bytes = 9u * (size_t)in_c;
    int32_t c0 = 0;         /* the channels the assembly leaves to C */
#if defined(TINY_ASM)
    /* The geometries with straight-line assembly (a SAME layer's padding, as TFLite
     * computes it: S1 one all round; S2 none top/left). */
    const int equal = p->stride.h == p->stride.w && p->padding.h == p->padding.w &&
                      input_dims->h == input_dims->w;
    const int s1 = equal && p->stride.w == 1 && input_dims->w == 3 && p->padding.w == 1;
    const int s2 = equal && p->stride.w == 2 && input_dims->w == 6 && p->padding.w == 0;
    uint32_t args[4] = {(uint32_t)(in_c / 4), (uint32_t)in_c,
                        (uint32_t)(uint16_t)p->input_offset * 0x10001u,
                        (uint32_t)(uintptr_t)ctx->buf};
    if (full_range && (s1 || s2) && in_c >= 4) {
        c0 = in_c / 4 * 4;
    }
#endif
    /* The C path's layer, set only when it runs (not zeroed: nine windows). */
    tiny_layer_t g;
    if (c0 < in_c) {
        g.in_w = input_dims->w;
        g.in_c = in_c;
        g.input_offset = p->input_offset;
        g.act_min = p->activation.min;
        g.act_max = p->activation.max;
        tiny_windows(&g, p, input_dims->h);
    }
    for (int32_t b = 0; b < input_dims->n; ++b) {
        const int8_t *image = input + (size_t)b * image_bytes;
        int8_t *out = output + (size_t)b * out_bytes;
#if defined(TINY_ASM)
        if (c0 > 0) {
            (s1 ? tiny_s1 : tiny_s2)(image, out, channels, args);
        }
#endif
        for (int32_t c = c0; c < in_c; ++c) {
            (full_range ? channel_full : channel_clamped)(&g, image + c, channels + c, out + c);
        }
    }
    return KILN_OK;
}
