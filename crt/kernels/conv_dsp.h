/*
 * conv_dsp.h - primitives of the SIMD conv-family variants (conv2d_gemm.c,
 * dwconv_3x3.c, dwconv_channels.c, fully_connected_rows.c). Private: not included by
 * kiln_kernels.h.
 *
 * On cores with the DSP extension (__ARM_FEATURE_DSP: Cortex-M4, M7, M33,
 * M55) these are ACLE intrinsics, one instruction each; elsewhere (host, M0,
 * M3) they are plain C with the same results, so the same kernels, data
 * layouts and tests run everywhere.
 *
 * Packed pairs. A uint32_t holds two int16 lanes: lane 0 in bits 0-15,
 * lane 1 in bits 16-31. kiln_sxtb16() of four int8 bytes (b0, b1, b2, b3)
 * gives the pair (b0, b2) and kiln_sxtb16_ror8() the pair (b1, b3); every
 * packed layout below groups values by four in that order, (k0, k2) then
 * (k1, k3), so the dual MAC pairs the same k of both operands.
 */
#ifndef KILN_CONV_DSP_H
#define KILN_CONV_DSP_H

#include <string.h>

#include "conv_internal.h"

#if defined(__ARM_FEATURE_DSP)
#include <arm_acle.h>
#endif

/* GCC's first scheduling pass hoists every load of an unrolled MAC block
 * ahead of its uses and then spills registers on Cortex-M, and its
 * induction-variable pass turns dwconv's nine `tap[t] + c` into nine pointers
 * it spills and reloads; the SIMD kernels are written in the order they
 * should run, so they keep it. (Functions defined before this pragma are not
 * inlined into those after it: only out-of-loop helpers come before.) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__arm__)
#pragma GCC optimize("no-schedule-insns")
#endif

/* Four int8 values from any address as one little-endian word (an
 * unaligned LDR on cores that allow it, byte loads elsewhere). */
static inline uint32_t kiln_load_s8x4(const int8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

#if defined(__ARM_FEATURE_DSP)

/* acc + lane0(a) * lane0(b) + lane1(a) * lane1(b) (SMLAD). */
static inline int32_t kiln_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlad((int16x2_t)a, (int16x2_t)b, acc);
}

/* acc + lane0(a) * lane0(b) (SMLABB) and acc + lane1(a) * lane1(b) (SMLATT). */
static inline int32_t kiln_smlabb(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlabb((int32_t)a, (int32_t)b, acc);
}

static inline int32_t kiln_smlatt(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlatt((int32_t)a, (int32_t)b, acc);
}

/* Bytes 0 and 2 sign-extended into lanes 0 and 1 (SXTB16). */
static inline uint32_t kiln_sxtb16(uint32_t x)
{
    return (uint32_t)__sxtb16((int8x4_t)x);
}

/* Bytes 1 and 3 sign-extended into lanes 0 and 1: SXTB16 with its rotate,
 * one instruction (GCC 12 does not fuse a separate rotate into it). */
static inline uint32_t kiln_sxtb16_ror8(uint32_t x)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}

/* Lane by lane int16 sums (SADD16; the callers' sums never wrap). */
static inline uint32_t kiln_sadd16(uint32_t a, uint32_t b)
{
    return (uint32_t)__sadd16((int16x2_t)a, (int16x2_t)b);
}

/* kiln_smlad where the sum may leave int32 and wraps (modulo 2^32, as SMLAD
 * does): the int8 channel-pair kernels' "raw" accumulators (conv.h). */
static inline int32_t kiln_smlad_wrap(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlad((int16x2_t)a, (int16x2_t)b, acc);
}

/* a = p[0], b = p[1], p += 2, as one LDRD with write-back (p word aligned).
 * The "m" operand tells the compiler which memory the load reads. */
#define KILN_LOAD_PAIR(a, b, p)                                                  \
    __asm__("ldrd %0, %1, [%2], #8"                                              \
            : "=r"(a), "=r"(b), "+r"(p)                                          \
            : "m"(*(const uint32_t(*)[2])(p)))

#else /* plain C twins */

static inline int32_t kiln_lane0(uint32_t x) { return (int32_t)(int16_t)(uint16_t)x; }
static inline int32_t kiln_lane1(uint32_t x) { return (int32_t)(int16_t)(uint16_t)(x >> 16); }

/* The sums here never leave int32 (each kernel proves it), so SMLAD's
 * wrap-around (and Q flag) never comes into play. */
static inline int32_t kiln_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    return acc + kiln_lane0(a) * kiln_lane0(b) + kiln_lane1(a) * kiln_lane1(b);
}

static inline int32_t kiln_smlad_wrap(uint32_t a, uint32_t b, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(kiln_lane0(a) * kiln_lane0(b)) +
                     (uint32_t)(kiln_lane1(a) * kiln_lane1(b)));
}

static inline int32_t kiln_smlabb(uint32_t a, uint32_t b, int32_t acc)
{
    return acc + kiln_lane0(a) * kiln_lane0(b);
}

static inline int32_t kiln_smlatt(uint32_t a, uint32_t b, int32_t acc)
{
    return acc + kiln_lane1(a) * kiln_lane1(b);
}

static inline uint32_t kiln_pack16(int32_t lo, int32_t hi)
{
    return (uint32_t)(uint16_t)lo | ((uint32_t)(uint16_t)hi << 16);
}

static inline uint32_t kiln_sadd16(uint32_t a, uint32_t b)
{
    return kiln_pack16(kiln_lane0(a) + kiln_lane0(b), kiln_lane1(a) + kiln_lane1(b));
}

static inline uint32_t kiln_sxtb16(uint32_t x)
{
    return kiln_pack16((int8_t)(uint8_t)x, (int8_t)(uint8_t)(x >> 16));
}

static inline uint32_t kiln_sxtb16_ror8(uint32_t x)
{
    return kiln_pack16((int8_t)(uint8_t)(x >> 8), (int8_t)(uint8_t)(x >> 24));
}

#define KILN_LOAD_PAIR(a, b, p)                                                  \
    do {                                                                         \
        (a) = (p)[0];                                                            \
        (b) = (p)[1];                                                            \
        (p) += 2;                                                                \
    } while (0)

#endif /* __ARM_FEATURE_DSP */

#if defined(__GNUC__)
#define KILN_ALWAYS_INLINE inline __attribute__((always_inline))
#define KILN_NOINLINE __attribute__((noinline))
#else
#define KILN_ALWAYS_INLINE inline
#define KILN_NOINLINE
#endif

/*
 * kiln_requantize(acc, multiplier, shift) for shift <= -2, from the
 * precomputed kiln_requant_fast_t of the channel (conv.h): six instructions
 * on Cortex-M4 (AND, ORR, ASR, SMLAL, ADD, ASR).
 *
 * Why it equals TFLite's double rounding (kiln_math.h), with e = -shift >= 2,
 * m = multiplier in [2^30, 2^31), any int32 acc = x:
 * 1. TFLite's rounding doubling high multiply, (x*m + nudge) / 2^31 with
 *    nudge 2^30 or 1 - 2^30 by sign and a division truncating toward zero,
 *    is r = floor((x*m + 2^30) / 2^31) for both signs (for x*m = -c < 0:
 *    trunc((-c + 1 - 2^30) / 2^31) = -floor((c + 2^30 - 1) / 2^31)
 *    = floor((-c + 2^30) / 2^31)).
 * 2. Rounding r / 2^e half away from zero is floor((r + 2^(e-1) - [r < 0]) / 2^e),
 *    and [x < 0] may stand for [r < 0]: they differ only when r = 0, where both
 *    give 0. Nesting floors (floor((floor(a) + k) / n) = floor((a + k) / n)):
 *    out = floor((x*m + 2^30 - [x < 0] * 2^31 + 2^(e-2) * 2^32) / 2^(e-1) / 2^32)
 *        = (hi + 2^(e-2)) >> (e - 1), hi = the high word of
 *    x*m + (x < 0 ? -2^30 : 2^30), one SMLAL onto (x >> 31 : sign bit | 2^30).
 * 3. No overflow: |x*m| < 2^62; |hi| < 2^30, so hi + 2^(e-2) fits int32.
 * The host tests compare it with kiln_requantize on random and edge values.
 */
static KILN_ALWAYS_INLINE int32_t kiln_requantize_fast(int32_t acc, const kiln_requant_fast_t *q)
{
    const uint64_t round = ((uint64_t)(uint32_t)(acc >> 31) << 32) |
                           (((uint32_t)acc & UINT32_C(0x80000000)) | UINT32_C(0x40000000));
    const int64_t p = (int64_t)acc * q->multiplier + (int64_t)round;
    return ((int32_t)(p >> 32) + q->round) >> q->right_shift;
}

/* kiln_requantize_fast, then the output zero point and the clamp. With
 * full_range (a constant: the clamp is [-128, 127]) the clamp is one SSAT;
 * kernels instantiate their loops for both (KILN_ALWAYS_INLINE bodies). */
static inline int8_t kiln_output_fast(int32_t acc, const kiln_requant_fast_t *q,
                                      int32_t output_offset, int32_t act_min, int32_t act_max,
                                      int full_range)
{
    int32_t v = kiln_requantize_fast(acc, q) + output_offset;
    if (full_range) {
#if defined(__ARM_FEATURE_DSP)
        return (int8_t)__ssat(v, 8);
#else
        act_min = -128;
        act_max = 127;
#endif
    }
    v = v > act_min ? v : act_min;      /* written for IT blocks, not branches */
    v = v < act_max ? v : act_max;
    return (int8_t)v;
}

/*
 * Depthwise blocks of four channels (dwconv_3x3.c, dwconv_channels.c). One
 * word of input, four channels' int8 values at one tap, splits into the
 * pairs (c0, c2) and (c1, c3), multiplied lane by lane (SMLABB / SMLATT) by
 * the tap's two packed filter words, which `w` then steps past. a0..a3 are
 * the caller's accumulators of channels c0..c3.
 */
#define KILN_DW_TAP4(x, w, a0, a1, a2, a3)                                       \
    do {                                                                         \
        const uint32_t even_ = kiln_sxtb16(x);                                   \
        const uint32_t odd_ = kiln_sxtb16_ror8(x);                               \
        uint32_t we_;                                                            \
        uint32_t wo_;                                                            \
        KILN_LOAD_PAIR(we_, wo_, w);                                             \
        (a0) = kiln_smlabb(even_, we_, a0);                                      \
        (a2) = kiln_smlatt(even_, we_, a2);                                      \
        (a1) = kiln_smlabb(odd_, wo_, a1);                                       \
        (a3) = kiln_smlatt(odd_, wo_, a3);                                       \
    } while (0)

/* Requantizes a0..a3 into o[0..3] with q[0..3] (out_off, act_min, act_max
 * and full_range in scope, as in kiln_output_fast); all four before the
 * first store, which the compiler must assume may alias q. */
#define KILN_DW_STORE4(o, q, a0, a1, a2, a3)                                     \
    do {                                                                         \
        const int8_t y0_ = kiln_output_fast(a0, &(q)[0], out_off, act_min, act_max, full_range); \
        const int8_t y1_ = kiln_output_fast(a1, &(q)[1], out_off, act_min, act_max, full_range); \
        const int8_t y2_ = kiln_output_fast(a2, &(q)[2], out_off, act_min, act_max, full_range); \
        const int8_t y3_ = kiln_output_fast(a3, &(q)[3], out_off, act_min, act_max, full_range); \
        (o)[0] = y0_;                                                            \
        (o)[1] = y1_;                                                            \
        (o)[2] = y2_;                                                            \
        (o)[3] = y3_;                                                            \
    } while (0)

/*
 * kiln_output_fast in five instructions (dwconv_3x3_w8.c, dwconv_3x3_px2.c)
 * (SMMLAR, ADD, ASR, ADD, SSAT) from a channel's (multiplier', right_shift),
 * multiplier' = 2 * multiplier - 2^32 (an int32: multiplier is in [2^30, 2^31)),
 * and the layer's k = 1 + 2 *
 * output_offset. With e = right_shift + 1 = -shift, x = acc:
 * 1. r = x + floor((x * multiplier' + 2^31) / 2^32)          SMMLAR
 *      = floor((2 * x * multiplier + 2^31) / 2^32) = floor((x * m + 2^30) / 2^31),
 *    TFLite's rounding doubling high multiply (see kiln_requantize_fast, step 1),
 *    for any int32 x (|x * 2m| < 2^63; r fits int32, r > -2^31).
 * 2. TFLite's rounding division of r by 2^e is floor((t + 2^(e-1)) / 2^e) with
 *    t = r - [r < 0] = r + (r >> 31) (no overflow: r > -2^31). Nesting floors,
 *    floor((t + 2^(e-1)) / 2^e) = floor((floor(t / 2^(e-1)) + 1) / 2)
 *    = ((t >> right_shift) + 1) >> 1.
 * 3. Plus the output zero point: ((t >> right_shift) + 1 + 2 * output_offset) >> 1,
 *    the last shift inside the SSAT (|t >> right_shift| <= 2^30: no overflow).
 * The tests compare it with kiln_requantize (host) and TFLM (QEMU).
 */
typedef struct {
    int32_t multiplier2, right_shift;
} kiln_dw_rq_t;

static KILN_ALWAYS_INLINE int32_t kiln_dw_mulhigh(int32_t acc, int32_t multiplier2)
{
#if defined(__ARM_FEATURE_DSP)
    int32_t r;
    __asm__("smmlar %0, %1, %2, %1" : "=r"(r) : "r"(acc), "r"(multiplier2));
    return r;
#else
    const int64_t m = (int64_t)((uint32_t)multiplier2 >> 1);
    return (int32_t)(((int64_t)acc * m + ((int64_t)1 << 30)) >> 31);
#endif
}

/* u = twice the requantized value plus the output zero point, plus one (step 3 above):
 * halved, then clamped to the activation range (one SSAT where it is the full int8 range). */
static KILN_ALWAYS_INLINE int8_t kiln_dw_clamp(int32_t u, int32_t act_min, int32_t act_max,
                                               int full_range)
{
    if (full_range) {
#if defined(__ARM_FEATURE_DSP)
        int32_t v;
        __asm__("ssat %0, #8, %1, asr #1" : "=r"(v) : "r"(u));
        return (int8_t)v;
#else
        act_min = -128;
        act_max = 127;
#endif
    }
    int32_t v = u >> 1;
    v = v > act_min ? v : act_min;      /* written for IT blocks, not branches */
    v = v < act_max ? v : act_max;
    return (int8_t)v;
}

/* Requantized, plus the output zero point, clamped: k = 1 + 2 * output_offset. */
static KILN_ALWAYS_INLINE int8_t kiln_dw_output(int32_t acc, int32_t multiplier2,
                                                int32_t right_shift, int32_t k, int32_t act_min,
                                                int32_t act_max, int full_range)
{
    const int32_t r = kiln_dw_mulhigh(acc, multiplier2);
    return kiln_dw_clamp(((r + (r >> 31)) >> right_shift) + k, act_min, act_max, full_range);
}

/* Channel c's kiln_dw_rq_t from a kiln_requant_packed_t (TFLite's multiplier and
 * shift, shift in [-31, -2]): derived once per block of channels by a kernel
 * that keeps five bytes a channel in flash (kiln_requant_fast_t: twelve). */
static inline kiln_dw_rq_t kiln_dw_rq_packed(const kiln_requant_packed_t *p, int32_t c)
{
    const kiln_dw_rq_t rq = {(int32_t)((uint32_t)p->multiplier[c] << 1),
                             -(int32_t)p->shift[c] - 1};
    return rq;
}

/* The arguments every SIMD depthwise kernel needs (conv.h): depth
 * multiplier 1, as many output as input channels, a word-aligned packed
 * filter, a folded bias and `scratch` bytes of context (its
 * _get_buffer_size). Each kernel checks its filter size and channels on top. */
static inline int kiln_dw_fast_args_valid(const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_requant_fast_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int32_t *filter,
                                          const int32_t *bias, const kiln_dims_t *output_dims,
                                          const int8_t *output, int32_t scratch)
{
    if (ctx == NULL || params == NULL || !kiln_conv_params_valid(&params->conv) ||
        params->depth_multiplier != 1 || quant == NULL || input == NULL || filter == NULL ||
        bias == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        !kiln_conv_geometry_valid(&params->conv, input_dims, filter_dims, output_dims) ||
        ((uintptr_t)filter & 3u) != 0) {
        return 0;
    }
    const int32_t in_c = input_dims->c;
    return input_dims->n == output_dims->n && filter_dims->n == 1 && filter_dims->c == in_c &&
           output_dims->c == in_c && ctx->buf != NULL && ctx->size >= scratch;
}

/*
 * Int8 channel pairs (the "p8" filters of conv.h). A filter word of the pair of
 * channels (c, d) holds, at two k, c's weight in bytes 0 and 2 and in bytes 1
 * and 3 the byte that makes each 16-bit half equal w_c + 256 * w_d (the
 * compiler stores w_d - [w_c < 0] there). Against a pair of int16 values x:
 *   SMLAD(word, x)         adds  sum x * w_c + 256 * sum x * w_d   ("raw")
 *   SMLAD(SXTB16(word), x) adds  sum x * w_c                       ("even")
 * so one SXTB16 and two SMLAD give four MACs, the same SMLAD count as int16
 * pairs with half the filter bytes. With both sums started at the same value,
 * raw - even = 256 * sum x * w_d modulo 2^32, and this gives back d's sum
 * exactly while |sum x * w_d| < 2^23: the compiler keeps 128 * sum |w_d| below
 * that (x is int8), and otherwise does not pick these kernels.
 */
static inline int32_t kiln_pair_odd(int32_t raw, int32_t even)
{
    return (int32_t)((uint32_t)raw - (uint32_t)even) >> 8;
}

/* Whether a kiln_requant_packed_t has its tables. */
static inline int kiln_requant_packed_valid(const kiln_requant_packed_t *p)
{
    return p != NULL && p->multiplier != NULL && p->shift != NULL;
}

#if defined(__ARM_FEATURE_DSP)
/* __ssat(v >> 1, 8) in one instruction (SSAT's operand shift; GCC does not
 * fold an ASR into its __ssat builtin). */
static inline int32_t kiln_ssat8_asr1(int32_t v)
{
    int32_t r;
    __asm__("ssat %0, #8, %1, asr #1" : "=r"(r) : "r"(v));
    return r;
}
#endif

/*
 * The rest of kiln_output_packed from the product's high word hi. With a
 * full-range clamp the rounding "+1" rides on the output offset:
 * floor(((hi >> s1) + 1 + 2 * output_offset) / 2) = (((hi >> s1) + 1) >> 1) +
 * output_offset exactly (an even term leaves floor(x / 2) unchanged but for
 * itself), so one ADD of 2 * output_offset + 1 (hoisted: the same for every
 * output) and an SSAT that shifts by one replace the ADD of 1, the ADD with
 * shift and the SSAT. |hi >> s1| < 2^30, so the sum fits int32.
 */
static inline int8_t kiln_output_packed_hi(int32_t hi, int32_t s1, int32_t output_offset,
                                           int32_t act_min, int32_t act_max, int full_range)
{
#if defined(__ARM_FEATURE_DSP)
    if (full_range) {
        return (int8_t)kiln_ssat8_asr1((hi >> s1) + (2 * output_offset + 1));
    }
#endif
    int32_t v = ((hi >> s1) + 1) >> 1;
    v += output_offset;
    if (full_range) {
#if defined(__ARM_FEATURE_DSP)
        return (int8_t)__ssat(v, 8);
#else
        act_min = -128;
        act_max = 127;
#endif
    }
    v = v > act_min ? v : act_min;
    v = v < act_max ? v : act_max;
    return (int8_t)v;
}


/*
 * kiln_output_fast from a kiln_requant_packed_t channel: multiplier m and
 * s1 = -shift - 2 (>= 0). kiln_requantize_fast's (hi + 2^s1) >> (s1 + 1)
 * is computed as ((hi >> s1) + 1) >> 1, the same floor((hi + 2^s1) / 2^(s1 + 1))
 * (floor((floor(a) + 1) / 2) = floor((a + 1) / 2)), so no rounding constant
 * has to be stored or derived per channel.
 */
static inline int8_t kiln_output_packed(int32_t acc, int32_t m, int32_t s1, int32_t output_offset,
                                        int32_t act_min, int32_t act_max, int full_range)
{
    const uint64_t round = ((uint64_t)(uint32_t)(acc >> 31) << 32) |
                           (((uint32_t)acc & UINT32_C(0x80000000)) | UINT32_C(0x40000000));
    const int64_t p = (int64_t)acc * m + (int64_t)round;
    return kiln_output_packed_hi((int32_t)(p >> 32), s1, output_offset, act_min, act_max,
                                 full_range);
}

/* x, which the compiler may no longer treat as a constant or relate to the
 * value it came from (kept in a register; no instruction). */
static inline uint32_t kiln_opaque_u32(uint32_t x)
{
#if defined(__GNUC__)
    __asm__("" : "+r"(x));
#endif
    return x;
}

/* kiln_output_packed with k40 = 2^30 passed in (through kiln_opaque_u32, by a
 * kernel requantizing many outputs): held in a register, the rounding term's
 * low word is one ORR of the sign (acc < 0 ? 0x80000000 : 0) into it, where
 * the immediates take an AND and an ORR; the same value. */
static inline int8_t kiln_output_packed_k(int32_t acc, int32_t m, int32_t s1, uint32_t k40,
                                          int32_t output_offset, int32_t act_min,
                                          int32_t act_max, int full_range)
{
    const uint32_t sign = kiln_opaque_u32((uint32_t)(acc >> 31));
    const uint64_t round = ((uint64_t)sign << 32) | (k40 | (sign << 31));
    const int64_t p = (int64_t)acc * m + (int64_t)round;
    return kiln_output_packed_hi((int32_t)(p >> 32), s1, output_offset, act_min, act_max,
                                 full_range);
}

/* s1 of channel c (shift in [-31, -2], as the compiler emits). */
static inline int32_t kiln_packed_s1(const kiln_requant_packed_t *p, int32_t c)
{
    return -(int32_t)p->shift[c] - 2;
}

/* kiln_packed_s1 of one shift entry as ~shift - 1 (the same value), two
 * instructions: GCC otherwise builds -shift - 2 as three, 0xff00fffe being
 * no immediate. */
static inline int32_t kiln_packed_s1_k(int8_t shift)
{
    return (int32_t)kiln_opaque_u32(~(uint32_t)(int32_t)shift) - 1;
}

/* Rounds a dot-product depth up to whole groups of four. */
static inline int32_t kiln_round_up4(int32_t k)
{
    return (k + 3) & ~3;
}

/* The arguments of a 3x3, multiplier-1, undilated depthwise kernel that reads the
 * compiler's channel records (kiln_dw_planes_channel_t: the planes and tiny kernels):
 * every pointer set, the scratch and the records word aligned, the dims valid and
 * consistent (the kernel then checks its own scratch size against ctx->size). */
static inline int kiln_dw3x3_records_args_valid(const kiln_context_t *ctx,
                                                const kiln_dwconv_params_t *params,
                                                const kiln_dw_planes_channel_t *channels,
                                                const kiln_dims_t *input_dims,
                                                const int8_t *input,
                                                const kiln_dims_t *filter_dims,
                                                const kiln_dims_t *output_dims,
                                                const int8_t *output)
{
    return ctx != NULL && ctx->buf != NULL && ((uintptr_t)ctx->buf & 3u) == 0 &&
           params != NULL && kiln_conv_params_valid(&params->conv) &&
           params->depth_multiplier == 1 && channels != NULL &&
           ((uintptr_t)channels & 3u) == 0 && input != NULL && output != NULL &&
           kiln_dims_valid(input_dims) && kiln_dims_valid(filter_dims) &&
           kiln_dims_valid(output_dims) &&
           kiln_conv_geometry_valid(&params->conv, input_dims, filter_dims, output_dims) &&
           input_dims->n == output_dims->n && filter_dims->n == 1 &&
           filter_dims->c == input_dims->c && output_dims->c == input_dims->c &&
           filter_dims->h == 3 && filter_dims->w == 3 && params->conv.dilation.h == 1 &&
           params->conv.dilation.w == 1;
}

#endif /* KILN_CONV_DSP_H */
