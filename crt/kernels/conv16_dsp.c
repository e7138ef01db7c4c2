/*
 * conv16_dsp.c - SIMD variants of the 16x8 CONV_2D, FULLY_CONNECTED and
 * DEPTHWISE_CONV_2D (conv.h). int16 activations come in pairs already: one
 * SMLAD (conv_dsp.h; plain C on cores without the DSP extension) multiplies
 * two of them by two weights the compiler packed as int16 pairs, so the conv
 * inner loop is one word load of input per four channels' two MACs each; the
 * depthwise kernel multiplies lane by lane (SMLABB / SMLATT), four channels
 * per two input words.
 *
 * The _w8 variants keep the weights int8 (the plain kernels' flash) and widen
 * them with SXTB16 at run time: the compiler stores each group of four
 * weights k0..k3 of a row as the bytes (k0, k2, k1, k3), so SXTB16 gives the
 * pair (k0, k1) and SXTB16 ror 8 the pair (k2, k3), the order of the input's
 * pairs (x0, x1) and (x2, x3).
 *
 * Exactness: each SMLAD adds at most 2 * 32768 * 128 = 2^23 in magnitude, so
 * KILN_PAIR_BLOCK = 128 of them stay below 2^30 in an int32 partial sum,
 * widened to the int64 sum once per block; the sum is the exact one the plain
 * kernels (conv16.c) form, and the output the same kiln_conv16_output.
 */
#include "conv_dsp.h"

#define KILN_PAIR_BLOCK 128
#define KILN_QUAD_BLOCK (KILN_PAIR_BLOCK / 2)

/* Two int16 values from any 2-byte aligned address as one word, lane 0 first
 * (an unaligned LDR on cores that allow it). */
static inline uint32_t load_s16x2(const int16_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* s0, s1 = sums over `pairs` words of the int16 pairs at x times the packed
 * rows w0, w1 (exact, see above). */
static KILN_ALWAYS_INLINE void dot2_pairs(const int16_t *x, const uint32_t *w0,
                                          const uint32_t *w1, int32_t pairs,
                                          int64_t *s0, int64_t *s1)
{
    int64_t a0 = 0;
    int64_t a1 = 0;
    int32_t j = 0;
    while (j < pairs) {
        const int32_t end = pairs - j > KILN_PAIR_BLOCK ? j + KILN_PAIR_BLOCK : pairs;
        int32_t p0 = 0;
        int32_t p1 = 0;
        for (; j < end; ++j) {
            const uint32_t v = load_s16x2(x + 2 * j);
            p0 = kiln_smlad(v, w0[j], p0);
            p1 = kiln_smlad(v, w1[j], p1);
        }
        a0 += p0;
        a1 += p1;
    }
    *s0 = a0;
    *s1 = a1;
}

/* dot2_pairs for four rows: each input word serves four channels. */
static KILN_ALWAYS_INLINE void dot4_pairs(const int16_t *x, const uint32_t *w0,
                                          const uint32_t *w1, const uint32_t *w2,
                                          const uint32_t *w3, int32_t pairs, int64_t *s)
{
    int64_t a0 = 0;
    int64_t a1 = 0;
    int64_t a2 = 0;
    int64_t a3 = 0;
    int32_t j = 0;
    while (j < pairs) {
        const int32_t end = pairs - j > KILN_PAIR_BLOCK ? j + KILN_PAIR_BLOCK : pairs;
        int32_t p0 = 0;
        int32_t p1 = 0;
        int32_t p2 = 0;
        int32_t p3 = 0;
        for (; j < end; ++j) {
            const uint32_t v = load_s16x2(x + 2 * j);
            p0 = kiln_smlad(v, w0[j], p0);
            p1 = kiln_smlad(v, w1[j], p1);
            p2 = kiln_smlad(v, w2[j], p2);
            p3 = kiln_smlad(v, w3[j], p3);
        }
        a0 += p0;
        a1 += p1;
        a2 += p2;
        a3 += p3;
    }
    s[0] = a0;
    s[1] = a1;
    s[2] = a2;
    s[3] = a3;
}

/* dot2_pairs with int8 weights: `quads` words of four bytes (k0, k2, k1, k3). */
static KILN_ALWAYS_INLINE void dot2_quads(const int16_t *x, const uint32_t *w0,
                                          const uint32_t *w1, int32_t quads,
                                          int64_t *s0, int64_t *s1)
{
    int64_t a0 = 0;
    int64_t a1 = 0;
    int32_t j = 0;
    while (j < quads) {
        const int32_t end = quads - j > KILN_QUAD_BLOCK ? j + KILN_QUAD_BLOCK : quads;
        int32_t p0 = 0;
        int32_t p1 = 0;
        for (; j < end; ++j) {
            const uint32_t v01 = load_s16x2(x + 4 * j);
            const uint32_t v23 = load_s16x2(x + 4 * j + 2);
            const uint32_t b0 = w0[j];
            const uint32_t b1 = w1[j];
            p0 = kiln_smlad(v01, kiln_sxtb16(b0), p0);
            p0 = kiln_smlad(v23, kiln_sxtb16_ror8(b0), p0);
            p1 = kiln_smlad(v01, kiln_sxtb16(b1), p1);
            p1 = kiln_smlad(v23, kiln_sxtb16_ror8(b1), p1);
        }
        a0 += p0;
        a1 += p1;
    }
    *s0 = a0;
    *s1 = a1;
}

/* Weight i (0..2) of the partial last word of a _w8 row: bytes (k0, k2, k1). */
static inline int32_t quad_tail_weight(uint32_t word, int32_t i)
{
    static const uint8_t byte_of[3] = {0, 2, 1};
    return (int32_t)(int8_t)(uint8_t)(word >> (8 * byte_of[i]));
}

/* One row: x of `depth` int16 values (a whole number of pairs is read, so an
 * odd depth's last value is taken alone) times out_ch packed rows of
 * row_words words each, plus row_term (FULLY_CONNECTED's filter_offset * sum x),
 * outputs into out[first .. first + out_ch). */
static void row_times_pairs(const int16_t *x, int32_t depth, const uint32_t *filter,
                            int32_t row_words, int64_t row_term, int32_t first, int32_t out_ch,
                            const int64_t *bias64, const int32_t *bias32, int wide,
                            const kiln_per_channel_requant_t *quant, int32_t act_min,
                            int32_t act_max, int16_t *out)
{
    const int32_t pairs = depth / 2;
    const int odd = depth & 1;
    int32_t c = 0;
    for (; c + 4 <= out_ch; c += 4) {
        const uint32_t *w = filter + (size_t)c * (size_t)row_words;
        int64_t sums[4];
        dot4_pairs(x, w, w + row_words, w + 2 * row_words, w + 3 * row_words, pairs, sums);
        for (int32_t i = 0; i < 4; ++i) {
            int64_t sum = sums[i] + row_term;
            if (odd) {
                sum += (int32_t)x[depth - 1] *
                       (int32_t)(int16_t)(uint16_t)w[(size_t)i * (size_t)row_words + pairs];
            }
            out[first + c + i] = kiln_conv16_output(sum, bias64, bias32, wide, first + c + i,
                                                    quant, act_min, act_max);
        }
    }
    for (; c < out_ch; c += 2) {
        const int32_t oc = first + c;
        const uint32_t *w0 = filter + (size_t)c * (size_t)row_words;
        const uint32_t *w1 = c + 1 < out_ch ? w0 + row_words : w0;
        int64_t s0;
        int64_t s1;
        dot2_pairs(x, w0, w1, pairs, &s0, &s1);
        s0 += row_term;
        s1 += row_term;
        if (odd) {
            /* The last word of a row holds the last weight in lane 0 (lane 1 is 0). */
            s0 += (int32_t)x[depth - 1] * (int32_t)(int16_t)(uint16_t)w0[pairs];
            s1 += (int32_t)x[depth - 1] * (int32_t)(int16_t)(uint16_t)w1[pairs];
        }
        out[oc] = kiln_conv16_output(s0, bias64, bias32, wide, oc, quant, act_min, act_max);
        if (c + 1 < out_ch) {
            out[oc + 1] = kiln_conv16_output(s1, bias64, bias32, wide, oc + 1, quant, act_min,
                                             act_max);
        }
    }
}

/* row_times_pairs for _w8 rows of (depth + 3) / 4 words; a depth that is not
 * a multiple of four leaves its last values to take alone. */
static void row_times_quads(const int16_t *x, int32_t depth, const uint32_t *filter,
                            int32_t row_words, int64_t row_term, int32_t first, int32_t out_ch,
                            const int64_t *bias64, const int32_t *bias32, int wide,
                            const kiln_per_channel_requant_t *quant, int32_t act_min,
                            int32_t act_max, int16_t *out)
{
    const int32_t quads = depth / 4;
    const int32_t rest = depth % 4;
    for (int32_t c = 0; c < out_ch; c += 2) {
        const int32_t oc = first + c;
        const uint32_t *w0 = filter + (size_t)c * (size_t)row_words;
        const uint32_t *w1 = c + 1 < out_ch ? w0 + row_words : w0;
        int64_t s0;
        int64_t s1;
        dot2_quads(x, w0, w1, quads, &s0, &s1);
        s0 += row_term;
        s1 += row_term;
        for (int32_t i = 0; i < rest; ++i) {
            const int32_t v = x[4 * quads + i];
            s0 += v * quad_tail_weight(w0[quads], i);
            s1 += v * quad_tail_weight(w1[quads], i);
        }
        out[oc] = kiln_conv16_output(s0, bias64, bias32, wide, oc, quant, act_min, act_max);
        if (c + 1 < out_ch) {
            out[oc + 1] = kiln_conv16_output(s1, bias64, bias32, wide, oc + 1, quant, act_min,
                                             act_max);
        }
    }
}

/* ---- CONV_2D ------------------------------------------------------------ */

int32_t kiln_conv2d_dsp_s16_get_buffer_size(const kiln_dims_t *input_dims,
                                            const kiln_dims_t *filter_dims)
{
    return kiln_conv2d_s16_get_buffer_size(input_dims, filter_dims);
}

static kiln_status_t conv2d_dsp_s16(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                    const kiln_per_channel_requant_t *quant,
                                    const kiln_dims_t *input_dims, const int16_t *input,
                                    const kiln_dims_t *filter_dims, const int32_t *filter,
                                    const int64_t *bias64, const int32_t *bias32, int wide,
                                    int w8, const kiln_dims_t *output_dims, int16_t *output)
{
    if (ctx == NULL || ctx->buf == NULL || !kiln_conv16_params_valid(params) ||
        !kiln_requant_valid(quant) || input == NULL || filter == NULL || output == NULL ||
        ((uintptr_t)filter & 3u) != 0 || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        !kiln_conv_geometry_valid(params, input_dims, filter_dims, output_dims)) {
        return KILN_ERR_ARG;
    }
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t group_c = filter_dims->c;
    const int32_t out_c = output_dims->c;
    const int32_t scratch = kiln_conv2d_dsp_s16_get_buffer_size(input_dims, filter_dims);
    if (in_c % group_c != 0 || input_dims->n != output_dims->n || filter_dims->n != out_c ||
        out_c % (in_c / group_c) != 0 || scratch == 0 || ctx->size < scratch) {
        return KILN_ERR_ARG;
    }
    const int32_t groups = in_c / group_c;
    const int32_t group_out_c = out_c / groups;
    const int32_t patch_size = k_h * k_w * group_c;
    const int32_t row_words = w8 ? (patch_size + 3) / 4 : (patch_size + 1) / 2;
    const uint32_t *packed = (const uint32_t *)filter;
    int16_t *patch = (int16_t *)ctx->buf;

    int16_t *out = output;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int16_t *image = input + (size_t)b * (size_t)in_h * (size_t)in_w * (size_t)in_c;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t iy0 = oy * params->stride.h - params->padding.h;
            for (int32_t ox = 0; ox < output_dims->w; ++ox, out += out_c) {
                const int32_t ix0 = ox * params->stride.w - params->padding.w;
                for (int32_t g = 0; g < groups; ++g) {
                    int16_t *dst = patch;
                    for (int32_t ky = 0; ky < k_h; ++ky) {
                        const int32_t iy = iy0 + ky * params->dilation.h;
                        for (int32_t kx = 0; kx < k_w; ++kx, dst += group_c) {
                            const int32_t ix = ix0 + kx * params->dilation.w;
                            if (iy < 0 || iy >= in_h || ix < 0 || ix >= in_w) {
                                memset(dst, 0, (size_t)group_c * sizeof(int16_t));
                            } else {
                                memcpy(dst, image + ((size_t)iy * (size_t)in_w + (size_t)ix) *
                                                    (size_t)in_c + (size_t)g * (size_t)group_c,
                                       (size_t)group_c * sizeof(int16_t));
                            }
                        }
                    }
                    const int32_t first = g * group_out_c;
                    const uint32_t *rows = packed + (size_t)first * (size_t)row_words;
                    if (w8) {
                        row_times_quads(patch, patch_size, rows, row_words, 0, first,
                                        group_out_c, bias64, bias32, wide, quant,
                                        params->activation.min, params->activation.max, out);
                    } else {
                        row_times_pairs(patch, patch_size, rows, row_words, 0, first,
                                        group_out_c, bias64, bias32, wide, quant,
                                        params->activation.min, params->activation.max, out);
                    }
                }
            }
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_conv2d_dsp_s16(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                  const kiln_per_channel_requant_t *quant,
                                  const kiln_dims_t *input_dims, const int16_t *input,
                                  const kiln_dims_t *filter_dims, const int32_t *filter,
                                  const int64_t *bias,
                                  const kiln_dims_t *output_dims, int16_t *output)
{
    return conv2d_dsp_s16(ctx, params, quant, input_dims, input, filter_dims, filter, bias, NULL,
                          1, 0, output_dims, output);
}

kiln_status_t kiln_conv2d_dsp_b32_s16(const kiln_context_t *ctx,
                                      const kiln_conv_params_t *params,
                                      const kiln_per_channel_requant_t *quant,
                                      const kiln_dims_t *input_dims, const int16_t *input,
                                      const kiln_dims_t *filter_dims, const int32_t *filter,
                                      const int32_t *bias,
                                      const kiln_dims_t *output_dims, int16_t *output)
{
    return conv2d_dsp_s16(ctx, params, quant, input_dims, input, filter_dims, filter, NULL, bias,
                          0, 0, output_dims, output);
}

kiln_status_t kiln_conv2d_dsp_w8_s16(const kiln_context_t *ctx,
                                     const kiln_conv_params_t *params,
                                     const kiln_per_channel_requant_t *quant,
                                     const kiln_dims_t *input_dims, const int16_t *input,
                                     const kiln_dims_t *filter_dims, const int32_t *filter,
                                     const int64_t *bias,
                                     const kiln_dims_t *output_dims, int16_t *output)
{
    return conv2d_dsp_s16(ctx, params, quant, input_dims, input, filter_dims, filter, bias, NULL,
                          1, 1, output_dims, output);
}

kiln_status_t kiln_conv2d_dsp_w8_b32_s16(const kiln_context_t *ctx,
                                         const kiln_conv_params_t *params,
                                         const kiln_per_channel_requant_t *quant,
                                         const kiln_dims_t *input_dims, const int16_t *input,
                                         const kiln_dims_t *filter_dims, const int32_t *filter,
                                         const int32_t *bias,
                                         const kiln_dims_t *output_dims, int16_t *output)
{
    return conv2d_dsp_s16(ctx, params, quant, input_dims, input, filter_dims, filter, NULL, bias,
                          0, 1, output_dims, output);
}

/* ---- FULLY_CONNECTED ---------------------------------------------------- */

static kiln_status_t fully_connected_dsp_s16(const kiln_fc_params_t *params,
                                             const kiln_per_channel_requant_t *quant,
                                             const kiln_dims_t *input_dims,
                                             const int16_t *input,
                                             const kiln_dims_t *filter_dims,
                                             const int32_t *filter, const int64_t *bias64,
                                             const int32_t *bias32, int wide, int w8,
                                             const kiln_dims_t *output_dims, int16_t *output)
{
    if (params == NULL || !kiln_requant_valid(quant) || input == NULL || filter == NULL ||
        output == NULL || ((uintptr_t)filter & 3u) != 0 || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims)) {
        return KILN_ERR_ARG;
    }
    if (params->input_offset != 0 || params->output_offset != 0 ||
        params->filter_offset < -127 || params->filter_offset > 128 ||
        params->activation.min < INT16_MIN || params->activation.min > params->activation.max ||
        params->activation.max > INT16_MAX) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = filter_dims->c;
    const int32_t units = filter_dims->n;
    const int32_t batches = output_dims->n;
    if (input_dims->c != depth || input_dims->n != batches || output_dims->c != units) {
        return KILN_ERR_ARG;
    }
    for (int32_t b = 0; b < batches; ++b) {
        const int16_t *row = input + (size_t)b * (size_t)depth;
        int16_t *out = output + (size_t)b * (size_t)units;
        /* sum_k (w + filter_offset) * x = sum_k w * x + filter_offset * sum_k x */
        int64_t row_term = 0;
        if (params->filter_offset != 0) {
            int64_t row_sum = 0;
            for (int32_t k = 0; k < depth; ++k) {
                row_sum += row[k];
            }
            row_term = params->filter_offset * row_sum;
        }
        if (w8) {
            row_times_quads(row, depth, (const uint32_t *)filter, (depth + 3) / 4, row_term, 0,
                            units, bias64, bias32, wide, quant, params->activation.min,
                            params->activation.max, out);
        } else {
            row_times_pairs(row, depth, (const uint32_t *)filter, (depth + 1) / 2, row_term, 0,
                            units, bias64, bias32, wide, quant, params->activation.min,
                            params->activation.max, out);
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_fully_connected_dsp_s16(const kiln_fc_params_t *params,
                                           const kiln_per_channel_requant_t *quant,
                                           const kiln_dims_t *input_dims, const int16_t *input,
                                           const kiln_dims_t *filter_dims,
                                           const int32_t *filter, const int64_t *bias,
                                           const kiln_dims_t *output_dims, int16_t *output)
{
    return fully_connected_dsp_s16(params, quant, input_dims, input, filter_dims, filter, bias,
                                   NULL, 1, 0, output_dims, output);
}

kiln_status_t kiln_fully_connected_dsp_b32_s16(const kiln_fc_params_t *params,
                                               const kiln_per_channel_requant_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int16_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int32_t *filter, const int32_t *bias,
                                               const kiln_dims_t *output_dims, int16_t *output)
{
    return fully_connected_dsp_s16(params, quant, input_dims, input, filter_dims, filter, NULL,
                                   bias, 0, 0, output_dims, output);
}

kiln_status_t kiln_fully_connected_dsp_w8_s16(const kiln_fc_params_t *params,
                                              const kiln_per_channel_requant_t *quant,
                                              const kiln_dims_t *input_dims,
                                              const int16_t *input,
                                              const kiln_dims_t *filter_dims,
                                              const int32_t *filter, const int64_t *bias,
                                              const kiln_dims_t *output_dims, int16_t *output)
{
    return fully_connected_dsp_s16(params, quant, input_dims, input, filter_dims, filter, bias,
                                   NULL, 1, 1, output_dims, output);
}

kiln_status_t kiln_fully_connected_dsp_w8_b32_s16(const kiln_fc_params_t *params,
                                                  const kiln_per_channel_requant_t *quant,
                                                  const kiln_dims_t *input_dims,
                                                  const int16_t *input,
                                                  const kiln_dims_t *filter_dims,
                                                  const int32_t *filter, const int32_t *bias,
                                                  const kiln_dims_t *output_dims,
                                                  int16_t *output)
{
    return fully_connected_dsp_s16(params, quant, input_dims, input, filter_dims, filter, NULL,
                                   bias, 0, 1, output_dims, output);
}

/* ---- DEPTHWISE_CONV_2D -------------------------------------------------- */

/* The weight of lane `lane` (0..3) of a block's tap: words [(c0, c1)][(c2, c3)]. */
static inline int32_t dw_weight(const uint32_t *tap, int32_t lane)
{
    return (int32_t)(int16_t)(uint16_t)(tap[lane / 2] >> (16 * (lane % 2)));
}

kiln_status_t kiln_dwconv2d_ch4_s16(const kiln_dwconv_params_t *params,
                                    const kiln_per_channel_requant_t *quant,
                                    const kiln_dims_t *input_dims, const int16_t *input,
                                    const kiln_dims_t *filter_dims, const int32_t *filter,
                                    const int64_t *bias,
                                    const kiln_dims_t *output_dims, int16_t *output)
{
    if (params == NULL || !kiln_conv16_params_valid(&params->conv) ||
        params->depth_multiplier != 1 || !kiln_requant_valid(quant) || input == NULL ||
        filter == NULL || output == NULL || ((uintptr_t)filter & 3u) != 0 ||
        !kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims) ||
        !kiln_conv_geometry_valid(&params->conv, input_dims, filter_dims, output_dims)) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t c_n = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    /* At most 256 taps: every int32 sum below stays under 2^30. */
    if (input_dims->n != output_dims->n || filter_dims->n != 1 || filter_dims->c != c_n ||
        output_dims->c != c_n || (int64_t)k_h * k_w > 2 * KILN_PAIR_BLOCK) {
        return KILN_ERR_ARG;
    }
    const int32_t taps = k_h * k_w;
    const int32_t blocks = c_n / 4;
    const size_t x_row = (size_t)p->dilation.h * (size_t)in_w * (size_t)c_n;
    const size_t x_col = (size_t)p->dilation.w * (size_t)c_n;
    const uint32_t *packed = (const uint32_t *)filter;
    const int32_t act_min = p->activation.min;
    const int32_t act_max = p->activation.max;

    int16_t *out = output;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int16_t *image = input + (size_t)b * (size_t)in_h * (size_t)in_w * (size_t)c_n;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t iy0 = oy * p->stride.h - p->padding.h;
            int32_t ky0;
            int32_t ky1;
            kiln_tap_range(iy0, in_h, k_h, p->dilation.h, &ky0, &ky1);
            for (int32_t ox = 0; ox < output_dims->w; ++ox, out += c_n) {
                const int32_t ix0 = ox * p->stride.w - p->padding.w;
                int32_t kx0;
                int32_t kx1;
                kiln_tap_range(ix0, in_w, k_w, p->dilation.w, &kx0, &kx1);
                if (ky0 == ky1 || kx0 == kx1) {
                    for (int32_t c = 0; c < c_n; ++c) {     /* no tap inside */
                        out[c] = kiln_conv16_output(0, bias, NULL, 1, c, quant, act_min,
                                                    act_max);
                    }
                    continue;
                }
                const int16_t *corner = image + ((size_t)(iy0 + ky0 * p->dilation.h) *
                                                 (size_t)in_w +
                                                 (size_t)(ix0 + kx0 * p->dilation.w)) *
                                                (size_t)c_n;
                const int32_t first_tap = ky0 * k_w + kx0;
                for (int32_t cb = 0; cb < blocks; ++cb) {
                    const int16_t *x_r = corner + 4 * cb;
                    const uint32_t *w_r = packed + ((size_t)cb * (size_t)taps +
                                                    (size_t)first_tap) * 2;
                    int32_t a0 = 0;
                    int32_t a1 = 0;
                    int32_t a2 = 0;
                    int32_t a3 = 0;
                    for (int32_t ky = ky0; ky < ky1; ++ky, x_r += x_row, w_r += 2 * k_w) {
                        const int16_t *x_t = x_r;
                        const uint32_t *w_t = w_r;
                        for (int32_t kx = kx0; kx < kx1; ++kx, x_t += x_col, w_t += 2) {
                            const uint32_t v01 = load_s16x2(x_t);
                            const uint32_t v23 = load_s16x2(x_t + 2);
                            a0 = kiln_smlabb(v01, w_t[0], a0);
                            a1 = kiln_smlatt(v01, w_t[0], a1);
                            a2 = kiln_smlabb(v23, w_t[1], a2);
                            a3 = kiln_smlatt(v23, w_t[1], a3);
                        }
                    }
                    int16_t *o = out + 4 * cb;
                    o[0] = kiln_conv16_output(a0, bias, NULL, 1, 4 * cb, quant, act_min, act_max);
                    o[1] = kiln_conv16_output(a1, bias, NULL, 1, 4 * cb + 1, quant, act_min,
                                              act_max);
                    o[2] = kiln_conv16_output(a2, bias, NULL, 1, 4 * cb + 2, quant, act_min,
                                              act_max);
                    o[3] = kiln_conv16_output(a3, bias, NULL, 1, 4 * cb + 3, quant, act_min,
                                              act_max);
                }
                /* The channels past the last whole block, one by one (lanes of the
                 * zero-padded last block of the packed filter). */
                for (int32_t c = 4 * blocks; c < c_n; ++c) {
                    const int16_t *x_r = corner + c;
                    const uint32_t *w_r = packed + ((size_t)blocks * (size_t)taps +
                                                    (size_t)first_tap) * 2;
                    int32_t acc = 0;
                    for (int32_t ky = ky0; ky < ky1; ++ky, x_r += x_row, w_r += 2 * k_w) {
                        const int16_t *x_t = x_r;
                        const uint32_t *w_t = w_r;
                        for (int32_t kx = kx0; kx < kx1; ++kx, x_t += x_col, w_t += 2) {
                            acc += (int32_t)*x_t * dw_weight(w_t, c % 4);
                        }
                    }
                    out[c] = kiln_conv16_output(acc, bias, NULL, 1, c, quant, act_min, act_max);
                }
            }
        }
    }
    return KILN_OK;
}
