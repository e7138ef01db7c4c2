/*
 * conv_internal.h - helpers shared by the conv-family kernels (conv2d.c,
 * fully_connected.c, dwconv.c, transpose_conv.c, conv16*.c). Private: not part of the
 * kernel API and not included by kiln_kernels.h.
 */
#ifndef KILN_CONV_INTERNAL_H
#define KILN_CONV_INTERNAL_H

#include "conv.h"
#include "kiln_math.h"

/* All four dims at least 1. */
static inline int kiln_dims_valid(const kiln_dims_t *d)
{
    return d != NULL && d->n > 0 && d->h > 0 && d->w > 0 && d->c > 0;
}

/* The parameters every conv-family kernel shares are in range. */
static inline int kiln_conv_params_valid(const kiln_conv_params_t *p)
{
    return p != NULL && p->stride.h > 0 && p->stride.w > 0 && p->dilation.h > 0 &&
           p->dilation.w > 0 && p->padding.h >= 0 && p->padding.w >= 0 &&
           p->input_offset >= -127 && p->input_offset <= 128 &&
           p->output_offset >= -128 && p->output_offset <= 127 &&
           p->activation.min >= -128 && p->activation.min <= p->activation.max &&
           p->activation.max <= 127;
}

/* The index arithmetic of a sliding window along one axis stays in int32: every
 * value the kernels form (window origin out * stride - padding, tap index
 * origin + k * dilation, the clipped tap range) is at most
 * (out - 1) * stride + padding + (filter - 1) * dilation + dilation + in, here
 * computed in int64 (each term < 2^62). The compiler refuses models beyond it
 * (compiler/codegen/bounds.py), so this only guards direct callers. Dims >= 1. */
static inline int kiln_window_fits(int32_t in, int32_t out, int32_t filter, int32_t stride,
                                   int32_t dilation, int32_t padding)
{
    const int64_t reach = (int64_t)(out - 1) * stride + padding +
                          (int64_t)(filter - 1) * dilation + dilation + in;
    return reach <= INT32_MAX;
}

/* kiln_window_fits along both axes of a conv-family layer (valid dims and params). */
static inline int kiln_conv_geometry_valid(const kiln_conv_params_t *p,
                                           const kiln_dims_t *input_dims,
                                           const kiln_dims_t *filter_dims,
                                           const kiln_dims_t *output_dims)
{
    return kiln_window_fits(input_dims->h, output_dims->h, filter_dims->h, p->stride.h,
                            p->dilation.h, p->padding.h) &&
           kiln_window_fits(input_dims->w, output_dims->w, filter_dims->w, p->stride.w,
                            p->dilation.w, p->padding.w);
}

/* acc -> requantize -> add the output zero point -> clamp -> int8. */
static inline int8_t kiln_conv_output(int32_t acc, int32_t multiplier, int32_t shift,
                                      int32_t output_offset, int32_t act_min, int32_t act_max)
{
    const int32_t scaled = kiln_requantize(acc, multiplier, shift) + output_offset;
    return (int8_t)kiln_clamp(scaled, act_min, act_max);
}

/* Inner loops run over fixed blocks of this many int8 values: a loop with a
 * constant trip count is one compilers vectorise even at -O2 (GCC's "very
 * cheap" cost model) and unroll cleanly on cores without SIMD. */
#define KILN_CONV_BLOCK 16

/*
 * One row times a filter matrix: for every oc in [0, out_ch)
 *
 *     out[oc] = output(bias[oc] + row_term + sum_k row[k] * filter[oc * depth + k])
 *
 * `bias` is folded (or NULL for zeros); `row_term` is a per-row correction
 * (FULLY_CONNECTED's filter_offset * sum(row)). This is the inner loop of
 * CONV_2D (row = one receptive field) and FULLY_CONNECTED (row = one batch);
 * four output channels at a time share every load of `row`.
 * Overflow: |sum_k row[k] * filter[k]| <= 128 * sum|filter|; with the
 * compiler's bound on the folded bias (conv.h) and on row_term, every partial
 * sum fits int32.
 */
static inline void kiln_row_times_filter_s8(const int8_t *row, const int8_t *filter,
                                            int32_t depth, const int32_t *bias,
                                            int32_t row_term,
                                            const kiln_per_channel_requant_t *quant,
                                            int32_t out_ch, int32_t output_offset,
                                            int32_t act_min, int32_t act_max, int8_t *out)
{
    const int32_t blocked = depth - depth % KILN_CONV_BLOCK;
    int32_t oc = 0;
    for (; oc + 4 <= out_ch; oc += 4) {
        const int8_t *w0 = filter + (size_t)oc * (size_t)depth;
        const int8_t *w1 = w0 + depth;
        const int8_t *w2 = w1 + depth;
        const int8_t *w3 = w2 + depth;
        int32_t a0 = row_term;
        int32_t a1 = row_term;
        int32_t a2 = row_term;
        int32_t a3 = row_term;
        if (bias != NULL) {
            a0 += bias[oc];
            a1 += bias[oc + 1];
            a2 += bias[oc + 2];
            a3 += bias[oc + 3];
        }
        int32_t k = 0;
        for (; k < blocked; k += KILN_CONV_BLOCK) {
            for (int32_t j = 0; j < KILN_CONV_BLOCK; ++j) {
                const int32_t x = row[k + j];
                a0 += x * w0[k + j];
                a1 += x * w1[k + j];
                a2 += x * w2[k + j];
                a3 += x * w3[k + j];
            }
        }
        if (depth - k >= KILN_CONV_BLOCK / 2) {
            for (int32_t j = 0; j < KILN_CONV_BLOCK / 2; ++j) {
                const int32_t x = row[k + j];
                a0 += x * w0[k + j];
                a1 += x * w1[k + j];
                a2 += x * w2[k + j];
                a3 += x * w3[k + j];
            }
            k += KILN_CONV_BLOCK / 2;
        }
        for (; k < depth; ++k) {
            const int32_t x = row[k];
            a0 += x * w0[k];
            a1 += x * w1[k];
            a2 += x * w2[k];
            a3 += x * w3[k];
        }
        out[oc] = kiln_conv_output(a0, quant->multiplier[oc], quant->shift[oc],
                                   output_offset, act_min, act_max);
        out[oc + 1] = kiln_conv_output(a1, quant->multiplier[oc + 1], quant->shift[oc + 1],
                                       output_offset, act_min, act_max);
        out[oc + 2] = kiln_conv_output(a2, quant->multiplier[oc + 2], quant->shift[oc + 2],
                                       output_offset, act_min, act_max);
        out[oc + 3] = kiln_conv_output(a3, quant->multiplier[oc + 3], quant->shift[oc + 3],
                                       output_offset, act_min, act_max);
    }
    for (; oc < out_ch; ++oc) {
        const int8_t *w = filter + (size_t)oc * (size_t)depth;
        int32_t acc = row_term + (bias != NULL ? bias[oc] : 0);
        int32_t k = 0;
        for (; k < blocked; k += KILN_CONV_BLOCK) {
            for (int32_t j = 0; j < KILN_CONV_BLOCK; ++j) {
                acc += (int32_t)row[k + j] * w[k + j];
            }
        }
        for (; k < depth; ++k) {
            acc += (int32_t)row[k] * w[k];
        }
        out[oc] = kiln_conv_output(acc, quant->multiplier[oc], quant->shift[oc],
                                   output_offset, act_min, act_max);
    }
}

/* ---- 16x8 (conv16.c, conv16_dsp.c; semantics in conv.h) ---------------- */

/* [k0, k1): the filter taps k (0 <= k < filter) of a window starting at
 * `origin` whose input index origin + k * dilation is inside [0, in). Empty
 * (k0 == k1) when none is. The values stay in int32 (kiln_window_fits). */
static inline void kiln_tap_range(int32_t origin, int32_t in, int32_t filter, int32_t dilation,
                                  int32_t *k0, int32_t *k1)
{
    const int32_t lo = origin < 0 ? (-origin + dilation - 1) / dilation : 0;
    int32_t hi = 0;
    if (origin < in) {
        hi = (in - 1 - origin) / dilation + 1;
        hi = hi < filter ? hi : filter;
    }
    *k0 = lo < filter ? lo : filter;
    *k1 = hi > *k0 ? hi : *k0;
}

/* The parameters of a 16x8 layer are in range (offsets 0, int16 clamp). */
static inline int kiln_conv16_params_valid(const kiln_conv_params_t *p)
{
    return p != NULL && p->stride.h > 0 && p->stride.w > 0 && p->dilation.h > 0 &&
           p->dilation.w > 0 && p->padding.h >= 0 && p->padding.w >= 0 &&
           p->input_offset == 0 && p->output_offset == 0 &&
           p->activation.min >= INT16_MIN && p->activation.min <= p->activation.max &&
           p->activation.max <= INT16_MAX;
}

static inline int kiln_requant_valid(const kiln_per_channel_requant_t *quant)
{
    return quant != NULL && quant->multiplier != NULL && quant->shift != NULL;
}

/* One output value. Wide: int64 bias and kiln_requantize64. Narrow: the int32
 * accumulator TFLM wraps (the exact sum reduced modulo 2^32) and
 * kiln_requantize. Then the activation clamp. */
static inline int16_t kiln_conv16_output(int64_t sum, const int64_t *bias64,
                                         const int32_t *bias32, int wide, int32_t oc,
                                         const kiln_per_channel_requant_t *quant,
                                         int32_t act_min, int32_t act_max)
{
    int32_t scaled;
    if (wide) {
        const int64_t acc = sum + (bias64 != NULL ? bias64[oc] : 0);
        scaled = kiln_requantize64(acc, quant->multiplier[oc], quant->shift[oc]);
    } else {
        const uint32_t wrapped = (uint32_t)(uint64_t)sum +
                                 (bias32 != NULL ? (uint32_t)bias32[oc] : 0u);
        scaled = kiln_requantize((int32_t)wrapped, quant->multiplier[oc], quant->shift[oc]);
    }
    return (int16_t)kiln_clamp(scaled, act_min, act_max);
}

#endif /* KILN_CONV_INTERNAL_H */
