/*
 * conv.h - convolution-like int8 kernels: CONV_2D, DEPTHWISE_CONV_2D,
 * FULLY_CONNECTED and TRANSPOSE_CONV; their 16x8 forms (int16 activations)
 * are in the last section.
 *
 * Bit-exact with tflite-micro's reference kernels (integer_ops/conv.h,
 * depthwise_conv.h, fully_connected.h, transpose_conv.h): every output is
 *
 *     acc = bias[oc] + sum over taps of filter * (input + input_offset)
 *     out = clamp(kiln_requantize(acc, multiplier[oc], shift[oc]) + output_offset,
 *                 activation.min, activation.max)
 *
 * with padding taps contributing nothing (in the offset domain), i.e. a
 * padded input reads as the input zero point.
 *
 * Layouts: activations NHWC int8; CONV_2D and TRANSPOSE_CONV filters OHWI
 * (I = input channels per group); DEPTHWISE_CONV_2D filters 1HWC with
 * C = input channels * depth multiplier (output channel c reads input channel
 * c / depth_multiplier); FULLY_CONNECTED filters [units, depth] row-major.
 *
 * Folded bias. CONV_2D and FULLY_CONNECTED take a *folded* bias so their
 * inner loop is a plain int8 dot product:
 *
 *     bias[oc] = model_bias[oc] + input_offset * sum_k filter[oc][k]
 *                (FULLY_CONNECTED per-tensor: sum_k (filter[oc][k] + filter_offset))
 *
 * which the compiler derives (kiln.compiler.codegen.ops.conv). The CONV_2D
 * kernels read padded input as the input zero point (-input_offset) so the
 * fold holds at the borders too. DEPTHWISE_CONV_2D and TRANSPOSE_CONV take
 * the model's bias unchanged. A NULL bias means all zeros.
 *
 * Accumulators are int32. The compiler rejects a layer unless, for every
 * output channel, |model bias| + 256 * sum|filter| < 2^31: that bounds
 * TFLM's accumulator (|input + input_offset| <= 255) and kiln's folded one
 * (|folded bias| <= |bias| + 128 * sum|filter|, |input| <= 128), so no
 * accumulator here overflows for any input.
 *
 * Scratch: kernels that need it take a kiln_context_t and say how much with
 * their kiln_<op>_get_buffer_size(); the compiler computes the same number
 * when it picks the variant.
 */
#ifndef KILN_CONV_H
#define KILN_CONV_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parameters of CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV. */
typedef struct {
    kiln_tile_t stride;             /* >= 1 */
    kiln_tile_t padding;            /* padding before (top, left), >= 0; the far side is
                                     * whatever the output size implies */
    kiln_tile_t dilation;           /* >= 1; TRANSPOSE_CONV requires 1 */
    int32_t input_offset;           /* -input zero point, [-127, 128] */
    int32_t output_offset;          /* output zero point, [-128, 127] */
    kiln_activation_t activation;   /* clamp range, -128 <= min <= max <= 127 */
} kiln_conv_params_t;

/* Parameters of DEPTHWISE_CONV_2D. */
typedef struct {
    kiln_conv_params_t conv;
    int32_t depth_multiplier;       /* >= 1; output channels = input channels * this */
} kiln_dwconv_params_t;

/* Parameters of FULLY_CONNECTED. */
typedef struct {
    int32_t input_offset;           /* -input zero point, [-127, 128] */
    int32_t filter_offset;          /* -filter zero point, [-127, 128]; 0 for per-channel
                                     * weights (TFLM ignores their zero point) */
    int32_t output_offset;          /* output zero point, [-128, 127] */
    kiln_activation_t activation;   /* clamp range, -128 <= min <= max <= 127 */
} kiln_fc_params_t;

/* ---- CONV_2D ------------------------------------------------------------ */

/* General CONV_2D: any filter size, stride, dilation, padding and groups
 * (groups = input_dims->c / filter_dims->c). Each output pixel gathers its
 * receptive field into scratch (im2col, padding filled with the input zero
 * point) and multiplies it by the filter rows.
 *   input_dims  [N, H, W, C_in]          filter_dims [C_out, KH, KW, C_in / groups]
 *   output_dims [N, OH, OW, C_out]       bias        C_out folded values (see above)
 *   quant       C_out multipliers/shifts  ctx        >= kiln_conv2d_s8_get_buffer_size()
 * Returns KILN_ERR_ARG on NULL pointers, inconsistent dims or too little scratch. */
kiln_status_t kiln_conv2d_s8(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                             const kiln_per_channel_requant_t *quant,
                             const kiln_dims_t *input_dims, const int8_t *input,
                             const kiln_dims_t *filter_dims, const int8_t *filter,
                             const int32_t *bias,
                             const kiln_dims_t *output_dims, int8_t *output);

/* Scratch bytes kiln_conv2d_s8 needs: one receptive field, KH * KW * filter C. */
int32_t kiln_conv2d_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                       const kiln_dims_t *filter_dims);

/* CONV_2D with a 1x1 filter, one group, no padding (a 1x1 filter never pads),
 * any stride; dilation is irrelevant. No scratch: each output pixel is its
 * input pixel's channels times the filter matrix. Same arguments as
 * kiln_conv2d_s8 minus the context. */
kiln_status_t kiln_conv2d_1x1_s8(const kiln_conv_params_t *params,
                                 const kiln_per_channel_requant_t *quant,
                                 const kiln_dims_t *input_dims, const int8_t *input,
                                 const kiln_dims_t *filter_dims, const int8_t *filter,
                                 const int32_t *bias,
                                 const kiln_dims_t *output_dims, int8_t *output);

/* ---- DEPTHWISE_CONV_2D -------------------------------------------------- */

/* DEPTHWISE_CONV_2D, any filter size, stride, dilation, padding and depth
 * multiplier. No scratch.
 *   input_dims  [N, H, W, C_in]          filter_dims [1, KH, KW, C_in * depth_multiplier]
 *   output_dims [N, OH, OW, C_in * depth_multiplier]
 *   bias        the model's bias (not folded), one per output channel, or NULL */
kiln_status_t kiln_dwconv2d_s8(const kiln_dwconv_params_t *params,
                               const kiln_per_channel_requant_t *quant,
                               const kiln_dims_t *input_dims, const int8_t *input,
                               const kiln_dims_t *filter_dims, const int8_t *filter,
                               const int32_t *bias,
                               const kiln_dims_t *output_dims, int8_t *output);

/* ---- FULLY_CONNECTED ---------------------------------------------------- */

/* FULLY_CONNECTED: output[b][u] from input row b (depth values) and filter row u.
 *   input_dims  n = batches, c = depth (h = w = 1)
 *   filter_dims n = units,   c = depth (h = w = 1)
 *   output_dims n = batches, c = units (h = w = 1)
 *   bias        units folded values (see above), or NULL
 *   quant       units multipliers/shifts (per-tensor weights repeat one value) */
kiln_status_t kiln_fully_connected_s8(const kiln_fc_params_t *params,
                                      const kiln_per_channel_requant_t *quant,
                                      const kiln_dims_t *input_dims, const int8_t *input,
                                      const kiln_dims_t *filter_dims, const int8_t *filter,
                                      const int32_t *bias,
                                      const kiln_dims_t *output_dims, int8_t *output);

/* ---- TRANSPOSE_CONV ----------------------------------------------------- */

/* TRANSPOSE_CONV (int8): every input pixel scatters input * filter onto the
 * output at (in * stride - padding + filter position). Computed here as a
 * gather per output pixel, so it needs no scratch (TFLM uses an int32 buffer
 * of the whole output; integer sums do not depend on the order).
 *   input_dims  [N, H, W, C_in]          filter_dims [C_out, KH, KW, C_in]
 *   output_dims [N, OH, OW, C_out]       bias        the model's bias, or NULL
 *   params->dilation must be 1x1. */
kiln_status_t kiln_transpose_conv_s8(const kiln_conv_params_t *params,
                                     const kiln_per_channel_requant_t *quant,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *filter_dims, const int8_t *filter,
                                     const int32_t *bias,
                                     const kiln_dims_t *output_dims, int8_t *output);

/* ---- SIMD variants (conv2d_gemm.c, dwconv_3x3.c, dwconv_channels.c,
 *      fully_connected_rows.c) ---------------------------------------------
 *
 * Built for every core: on cores with the DSP extension (__ARM_FEATURE_DSP:
 * Cortex-M4, M7, M33, M55) their inner loops are dual 16-bit MACs (SMLAD),
 * elsewhere plain C with identical results. Their filters are packed at
 * compile time into int16 pairs, two per 32-bit word (lane 0 in the low
 * half): per group of four k (zero past the end), the pair A = (k0, k2) and
 * the pair B = (k1, k3); kiln_conv2d_gemm_w8_s8 alone keeps int8 weights,
 * four k per word, and splits them into the same pairs at run time. Filters
 * must be 4-byte aligned. Variants of one op differ only in their packing
 * and blocking, give the same results, and are listed with their knobs by
 * kiln.compiler.codegen.ops.conv.candidates(), which picks them on cores
 * with the DSP extension (a tuner times them).
 * They take a folded bias (never NULL) and requantize from
 * kiln_requant_fast_t, which needs every channel's shift <= -2: the compiler
 * rewrites a channel whose filter is all zeros (its output is a constant) to
 * an equivalent one, and otherwise keeps the plain kernels.
 */

/* One output channel's requantization, precomputed from TFLite's (multiplier,
 * shift) with shift <= -2 (see kiln_requantize_fast in conv_dsp.h):
 *   out = (high word of (acc * multiplier + (acc < 0 ? -2^30 : 2^30)) + round)
 *         >> right_shift */
typedef struct {
    int32_t multiplier;     /* [2^30, 2^31) */
    int32_t round;          /* 2^(-shift - 2) */
    int32_t right_shift;    /* -shift - 1, in [1, 30] */
} kiln_requant_fast_t;

/* The same in five bytes a channel, for the int8-pair kernels (_p8_): TFLite's
 * multiplier and shift per channel, shift in [-31, -2]; the kernel derives
 * round = 2^(-shift - 2) and right_shift = -shift - 1 itself. bias16: for the pixel-pair
 * depthwise kernels (kiln_dwconv2d_3x3_px2_s8 and its twins) only, the layer's biases as
 * int16 where every channel's fits (two bytes a channel instead of four), their `bias`
 * argument then NULL; NULL for every other kernel, which reads `bias`. */
typedef struct {
    const int32_t *multiplier;
    const int8_t *shift;
    const int16_t *bias16;
} kiln_requant_packed_t;

/* CONV_2D with one group, any filter size, stride, dilation and padding, as
 * im2col + GEMM blocked 2 output channels x 2 output pixels.
 *   filter  packed from OHWI with each kernel row of KW * C_in values padded
 *           with zeros to R = a multiple of 4, K = KH * R, G = K / 4: for each
 *           pair of channels (2q, 2q + 1), G groups of four words
 *           [A of 2q][A of 2q + 1][B of 2q][B of 2q + 1]; an odd last
 *           channel follows as G groups of [A][B]. C_out * K / 2 words.
 *   quant   C_out entries
 *   ctx     >= kiln_conv2d_gemm_s8_get_buffer_size(), 4-byte aligned
 * Other arguments as kiln_conv2d_s8. */
kiln_status_t kiln_conv2d_gemm_s8(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                  const kiln_requant_fast_t *quant,
                                  const kiln_dims_t *input_dims, const int8_t *input,
                                  const kiln_dims_t *filter_dims, const int32_t *filter,
                                  const int32_t *bias,
                                  const kiln_dims_t *output_dims, int8_t *output);

/* Scratch of kiln_conv2d_gemm_s8: two pixels' int16 columns, 4 * K bytes,
 * and one row of R bytes (K, R as above). The other two gemm variants need
 * the same. */
int32_t kiln_conv2d_gemm_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                            const kiln_dims_t *filter_dims);

/* kiln_conv2d_gemm_s8 blocked 4 output channels x 2 output pixels: each
 * column load serves twice the channels (faster when C_out is large enough).
 *   filter  packed as kiln_conv2d_gemm_s8's, but in blocks of four channels
 *           (4q .. 4q + 3): G groups of eight words, the four channels' A
 *           then their B, [A0][A1][A2][A3][B0][B1][B2][B3]; after the last
 *           whole block, a pair of channels as in kiln_conv2d_gemm_s8 if two
 *           or three remain, then a last single channel as [A][B] per group.
 *           C_out * K / 2 words.
 * Other arguments and the scratch as kiln_conv2d_gemm_s8. */
kiln_status_t kiln_conv2d_gemm_oc4_s8(const kiln_context_t *ctx,
                                      const kiln_conv_params_t *params,
                                      const kiln_requant_fast_t *quant,
                                      const kiln_dims_t *input_dims, const int8_t *input,
                                      const kiln_dims_t *filter_dims, const int32_t *filter,
                                      const int32_t *bias,
                                      const kiln_dims_t *output_dims, int8_t *output);

int32_t kiln_conv2d_gemm_oc4_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                                const kiln_dims_t *filter_dims);

/* kiln_conv2d_gemm_s8 with the filter kept int8 (half its flash), widened at
 * run time with SXTB16: slower, smaller.
 *   filter  from OHWI with each kernel row padded to R as above; a word holds
 *           four consecutive k of one channel, k0 in the low byte (SXTB16
 *           gives (k0, k2) = A, SXTB16 ror 8 gives (k1, k3) = B). For each
 *           pair of channels, G groups of two words [2q][2q + 1]; an odd last
 *           channel follows as G words. C_out * K / 4 words.
 * Other arguments and the scratch as kiln_conv2d_gemm_s8. */
kiln_status_t kiln_conv2d_gemm_w8_s8(const kiln_context_t *ctx,
                                     const kiln_conv_params_t *params,
                                     const kiln_requant_fast_t *quant,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *filter_dims, const int32_t *filter,
                                     const int32_t *bias,
                                     const kiln_dims_t *output_dims, int8_t *output);

int32_t kiln_conv2d_gemm_w8_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                               const kiln_dims_t *filter_dims);

/* kiln_conv2d_gemm_oc4_s8 with the filter kept int8 as channel pairs
 * (conv_dsp.h): as fast, half the flash.
 *   filter  from OHWI with each kernel row padded to R as above and C_out
 *           padded with a zero channel to even; for channels (c, d) and k
 *           the bytes b(c, k) = w(c, k) and h(d, k) = w(d, k) - [w(c, k) < 0]
 *           (in [-128, 127]); the pair's A word of a group is
 *           [b(c, k0)][h(d, k0)][b(c, k2)][h(d, k2)] (low byte first), its B
 *           word the same for k1, k3. Per block of four channels (two pairs
 *           p, q), G groups of [A of p][A of q][B of p][B of q]; after the
 *           last whole block, a last pair as G groups of [A][B].
 *           ceil(C_out / 2) * K / 2 words. 128 * sum_k |w(d, k)| < 2^23 for
 *           every second channel d of a pair.
 *   quant   C_out entries
 * Other arguments and the scratch as kiln_conv2d_gemm_s8. */
kiln_status_t kiln_conv2d_gemm_p8_s8(const kiln_context_t *ctx,
                                     const kiln_conv_params_t *params,
                                     const kiln_requant_packed_t *quant,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *filter_dims, const int32_t *filter,
                                     const int32_t *bias,
                                     const kiln_dims_t *output_dims, int8_t *output);

int32_t kiln_conv2d_gemm_p8_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                               const kiln_dims_t *filter_dims);

/* kiln_conv2d_gemm_p8_s8 for an activation of the full int8 range [-128, 127]
 * only (KILN_ERR_ARG otherwise): the same results without the clamping pixel loop
 * (about 1.2 KB of code on a Cortex-M4), for models none of whose int8-pair gemm
 * layers clamps. Scratch as kiln_conv2d_gemm_p8_s8. */
kiln_status_t kiln_conv2d_gemm_p8_full_s8(const kiln_context_t *ctx,
                                          const kiln_conv_params_t *params,
                                          const kiln_requant_packed_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int32_t *filter,
                                          const int32_t *bias,
                                          const kiln_dims_t *output_dims, int8_t *output);

/* DEPTHWISE_CONV_2D, 3x3 filter, depth multiplier 1, dilation 1, any stride
 * and padding, C a multiple of 4.
 *   filter  packed from 1HWC: per block of four channels, per tap (row-major),
 *           the words [(c0, c2)][(c1, c3)]: 18 words per block
 *   bias    folded: model bias + input_offset * sum of the channel's 9 taps
 *           (padding reads as the zero point)
 *   quant   C entries
 *   ctx     >= kiln_dwconv2d_3x3_s8_get_buffer_size(): one pixel of padding */
kiln_status_t kiln_dwconv2d_3x3_s8(const kiln_context_t *ctx, const kiln_dwconv_params_t *params,
                                   const kiln_requant_fast_t *quant,
                                   const kiln_dims_t *input_dims, const int8_t *input,
                                   const kiln_dims_t *filter_dims, const int32_t *filter,
                                   const int32_t *bias,
                                   const kiln_dims_t *output_dims, int8_t *output);

/* Scratch of kiln_dwconv2d_3x3_s8: C bytes. */
int32_t kiln_dwconv2d_3x3_s8_get_buffer_size(const kiln_dims_t *input_dims);

/* DEPTHWISE_CONV_2D, depth multiplier 1, any filter size, stride, dilation,
 * padding and C, in blocks of four channels; the last C % 4 channels in a
 * block of their own, whose missing channels have zero filters.
 *   filter  packed from 1HWC with C padded with zero channels to a multiple
 *           of 4: per block of four channels, per tap (row-major), the words
 *           [(c0, c2)][(c1, c3)]: 2 * KH * KW words per block
 *   bias    folded: model bias + input_offset * sum of the channel's taps
 *           (padding reads as the zero point)
 *   quant   C entries
 *   ctx     >= kiln_dwconv2d_ch4_s8_get_buffer_size(): one pixel of padding */
kiln_status_t kiln_dwconv2d_ch4_s8(const kiln_context_t *ctx, const kiln_dwconv_params_t *params,
                                   const kiln_requant_fast_t *quant,
                                   const kiln_dims_t *input_dims, const int8_t *input,
                                   const kiln_dims_t *filter_dims, const int32_t *filter,
                                   const int32_t *bias,
                                   const kiln_dims_t *output_dims, int8_t *output);

/* Scratch of kiln_dwconv2d_ch4_s8: C bytes. */
int32_t kiln_dwconv2d_ch4_s8_get_buffer_size(const kiln_dims_t *input_dims);

/* DEPTHWISE_CONV_2D, 3x3 filter, depth multiplier 1, dilation 1, any stride
 * and padding, C a multiple of 4 (dwconv_3x3_w8.c), with the filter as the
 * model has it:
 *   filter  1HWC int8, as is (no packing, no alignment needed)
 *   bias    C values, not folded (the kernel folds it where it reads padding
 *           as the zero point); never NULL
 *   quant   TFLite's multiplier and shift per channel (kiln_requant_packed_t)
 *   ctx     >= kiln_dwconv2d_3x3_w8_s8_get_buffer_size(): one pixel of padding */
kiln_status_t kiln_dwconv2d_3x3_w8_s8(const kiln_context_t *ctx,
                                      const kiln_dwconv_params_t *params,
                                      const kiln_requant_packed_t *quant,
                                      const kiln_dims_t *input_dims, const int8_t *input,
                                      const kiln_dims_t *filter_dims, const int8_t *filter,
                                      const int32_t *bias,
                                      const kiln_dims_t *output_dims, int8_t *output);

/* Scratch of kiln_dwconv2d_3x3_w8_s8: C bytes. */
int32_t kiln_dwconv2d_3x3_w8_s8_get_buffer_size(const kiln_dims_t *input_dims);

/* DEPTHWISE_CONV_2D, 3x3 filter, depth multiplier 1, dilation 1, horizontal
 * stride 1 (any vertical stride), any padding, any number of channels,
 * output pixels in horizontal pairs (dwconv_3x3_px2.c); arguments as
 * kiln_dwconv2d_3x3_w8_s8 (the model's int8 filter, the bias not folded, as int32,
 * or NULL with the biases as int16 in quant->bias16, the packed requantization):
 *   ctx     >= kiln_dwconv2d_3x3_px2_s8_get_buffer_size(), word aligned: a
 *           ring of three padded input rows of one block of four channels */
kiln_status_t kiln_dwconv2d_3x3_px2_s8(const kiln_context_t *ctx,
                                       const kiln_dwconv_params_t *params,
                                       const kiln_requant_packed_t *quant,
                                       const kiln_dims_t *input_dims, const int8_t *input,
                                       const kiln_dims_t *filter_dims, const int8_t *filter,
                                       const int32_t *bias,
                                       const kiln_dims_t *output_dims, int8_t *output);

/* Scratch of kiln_dwconv2d_3x3_px2_s8: 12 * (W rounded up to even + 2) bytes,
 * W the output width; less (at least 48) makes it go in tiles of the columns its
 * ring holds. */
int32_t kiln_dwconv2d_3x3_px2_s8_get_buffer_size(const kiln_dims_t *output_dims);

/* The same with the pairs along y (vertical stride 1, any horizontal stride):
 * for tall narrow maps (KWS's 25x5). Scratch 12 * (H rounded up to even + 2)
 * bytes, H the output height, or less as above. */
kiln_status_t kiln_dwconv2d_3x3_px2v_s8(const kiln_context_t *ctx,
                                        const kiln_dwconv_params_t *params,
                                        const kiln_requant_packed_t *quant,
                                        const kiln_dims_t *input_dims, const int8_t *input,
                                        const kiln_dims_t *filter_dims, const int8_t *filter,
                                        const int32_t *bias,
                                        const kiln_dims_t *output_dims, int8_t *output);

int32_t kiln_dwconv2d_3x3_px2v_s8_get_buffer_size(const kiln_dims_t *output_dims);

/* kiln_dwconv2d_3x3_px2_s8 and _px2v_s8 for a layer whose clamp is the int8 range
 * with the output zero point at -128 (a fused RELU, as MLPerf Tiny's models have)
 * and C a multiple of four only (KILN_ERR_ARG otherwise): the same results, without
 * the C line loop, last pixel and fill the others keep for any other layer (about
 * 600 B of code on a Cortex-M4), for models all of whose px2 layers are such.
 * Scratch as theirs. */
kiln_status_t kiln_dwconv2d_3x3_px2_relu_s8(const kiln_context_t *ctx,
                                            const kiln_dwconv_params_t *params,
                                            const kiln_requant_packed_t *quant,
                                            const kiln_dims_t *input_dims, const int8_t *input,
                                            const kiln_dims_t *filter_dims,
                                            const int8_t *filter, const int32_t *bias,
                                            const kiln_dims_t *output_dims, int8_t *output);
kiln_status_t kiln_dwconv2d_3x3_px2v_relu_s8(const kiln_context_t *ctx,
                                             const kiln_dwconv_params_t *params,
                                             const kiln_requant_packed_t *quant,
                                             const kiln_dims_t *input_dims, const int8_t *input,
                                             const kiln_dims_t *filter_dims,
                                             const int8_t *filter, const int32_t *bias,
                                             const kiln_dims_t *output_dims, int8_t *output);

/* DEPTHWISE_CONV_2D, 3x3 filter, depth multiplier 1, dilation 1, stride 2 both
 * ways, any padding, any number of channels (dwconv_3x3_s2ring.c): a channel at
 * a time over a ring of one widened input line; each channel's outputs in
 * raster order. Arguments as
 * kiln_dwconv2d_3x3_px2_s8; ctx >= kiln_dwconv2d_3x3_s2ring_s8_get_buffer_size(),
 * word aligned. */
kiln_status_t kiln_dwconv2d_3x3_s2ring_s8(const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_requant_packed_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int8_t *filter,
                                          const int32_t *bias,
                                          const kiln_dims_t *output_dims, int8_t *output);

/* Scratch of kiln_dwconv2d_3x3_s2ring_s8: 4 * (W + 1) bytes, W the output width. */
int32_t kiln_dwconv2d_3x3_s2ring_s8_get_buffer_size(const kiln_dims_t *output_dims);

/* One channel of kiln_dwconv2d_3x3_planes_s8, as the compiler lays it out in flash
 * (one LDM a channel, or one LDRD a filter row): taps[r] = {(w[r][0], w[r][1]),
 * (w[r][1], w[r][2])}, filter row r's taps as int16 pairs (first tap in the low
 * half); the bias as the model has it (not folded: the planes read padding as
 * zero); TFLite's multiplier doubled (multiplier2 = multiplier << 1) and rsk =
 * right_shift | k << 8, with right_shift = -shift - 1 (1..30) and k = 1 + 2 *
 * output_offset (kiln_dw_output). */
typedef struct {
    uint32_t taps[3][2];
    int32_t bias;
    uint32_t multiplier2;
    uint32_t rsk;
} kiln_dw_planes_channel_t;

/* DEPTHWISE_CONV_2D, 3x3 filter, depth multiplier 1, dilation 1, horizontal
 * stride 1 or 2 (any vertical stride), any padding, any number of channels,
 * a channel at a time over an int16 plane of it (dwconv_3x3_planes.c): for
 * small maps and stride 2.
 *   channels C records (above), word aligned: filter, bias and requantization
 *   ctx      >= kiln_dwconv2d_3x3_planes_s8_get_buffer_size(), word aligned:
 *            four planes of the input rows and columns the outputs read */
kiln_status_t kiln_dwconv2d_3x3_planes_s8(const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_dw_planes_channel_t *channels,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims,
                                          const kiln_dims_t *output_dims, int8_t *output);

/* Its scratch: 16 * ((H - 1) * stride_h + 3) * (((W - 1) * stride_w + 4) / 2) bytes,
 * H x W the output; 0 if stride_w is not 1 or 2. */
int32_t kiln_dwconv2d_3x3_planes_s8_get_buffer_size(const kiln_conv_params_t *params,
                                                    const kiln_dims_t *output_dims);

/* DEPTHWISE_CONV_2D, 3x3 filter onto a 3x3 output map, depth multiplier 1,
 * dilation 1, strides 1 or 2, any padding, any number of channels, only the taps
 * that lie in the image (dwconv_3x3_tiny.c: straight-line assembly for 3x3 -> 3x3
 * at stride 1 and 6x6 -> 3x3 at stride 2, SAME, on cores with DSP).
 *   channels C records as kiln_dwconv2d_3x3_planes_s8's, word aligned
 *   ctx      >= kiln_dwconv2d_3x3_tiny_s8_get_buffer_size(), word aligned: the
 *            int16 pairs of a block of four channels */
kiln_status_t kiln_dwconv2d_3x3_tiny_s8(const kiln_context_t *ctx,
                                        const kiln_dwconv_params_t *params,
                                        const kiln_dw_planes_channel_t *channels,
                                        const kiln_dims_t *input_dims, const int8_t *input,
                                        const kiln_dims_t *filter_dims,
                                        const kiln_dims_t *output_dims, int8_t *output);

/* Its scratch: 288 bytes for a 3x3 output at strides 1 or 2; 0 otherwise. */
int32_t kiln_dwconv2d_3x3_tiny_s8_get_buffer_size(const kiln_conv_params_t *params,
                                                  const kiln_dims_t *output_dims);

/* FULLY_CONNECTED blocked four rows at a time.
 *   filter  packed from [units, depth] with the filter zero point added
 *           (w + filter_offset): per block of four rows, per group,
 *           [A][B] of each row in turn; after the last whole block, a block
 *           of two rows the same way if two or three remain, then a last
 *           single row as [A][B] per group. units * round_up4(depth) / 2 words.
 *   params  filter_offset must be 0 (it is in the packed filter)
 *   bias    folded as kiln_fully_connected_s8's
 *   quant   units entries
 *   ctx     >= kiln_fully_connected_rows_s8_get_buffer_size(), 4-byte aligned */
kiln_status_t kiln_fully_connected_rows_s8(const kiln_context_t *ctx,
                                           const kiln_fc_params_t *params,
                                           const kiln_requant_fast_t *quant,
                                           const kiln_dims_t *input_dims, const int8_t *input,
                                           const kiln_dims_t *filter_dims, const int32_t *filter,
                                           const int32_t *bias,
                                           const kiln_dims_t *output_dims, int8_t *output);

/* Scratch of kiln_fully_connected_rows_s8: one input row as int16, depth
 * rounded up to 4, times 2 bytes. The rows2 and rows8 variants need the same. */
int32_t kiln_fully_connected_rows_s8_get_buffer_size(const kiln_dims_t *filter_dims);

/* FULLY_CONNECTED blocked eight rows at a time with the filter kept int8 as
 * row pairs (conv_dsp.h), and no scratch (the input is widened in registers).
 *   filter  from [units, depth] (filter_offset 0) with depth padded with zeros
 *           to a multiple of 4 and units with a zero row to even; the words of
 *           a pair of rows at a group of four k as kiln_conv2d_gemm_p8_s8's
 *           A and B. Per block of eight rows (four pairs), per group, [A][B]
 *           of each pair in turn; after the last whole block, each pair as
 *           G groups of [A][B]. ceil(units / 2) * round_up4(depth) / 2 words.
 *           128 * sum_k |w(d, k)| < 2^23 for every second row d of a pair.
 *   params  filter_offset must be 0
 *   bias    folded as kiln_fully_connected_s8's
 *   quant   units entries (kiln_requant_packed_t) */
kiln_status_t kiln_fully_connected_rows8_p8_s8(const kiln_fc_params_t *params,
                                               const kiln_requant_packed_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int8_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int32_t *filter, const int32_t *bias,
                                               const kiln_dims_t *output_dims, int8_t *output);

/* The per-tensor twins of kiln_fully_connected_rows8_p8_s8 (int8 row pairs) and
 * kiln_fully_connected_rows8_s8 (int16 pairs): one multiplier and shift for every
 * row, so on cores with the DSP extension one asm loop runs every whole block of
 * eight rows, the requantization of its outputs included (fully_connected_rows.c).
 * Neither needs scratch: the input is widened in registers.
 *   filter  _p8_pt_: as kiln_fully_connected_rows8_p8_s8's.
 *           _pt_: as kiln_fully_connected_rows8_s8's, the values doubled
 *           (2 * (w + filter_offset)).
 *   bias    accumulator starts. _p8_pt_: per pair of rows (c, d), b_c + 256 * b_d
 *           (modulo 2^32) then b_c, b the folded bias of kiln_fully_connected_s8;
 *           a lone last row pairs a zero one; ceil(units / 2) * 2 values.
 *           _pt_: 2 * b per row.
 *   quant   one entry: multiplier in [2^30, 2^31), shift in [-22, -2]
 *   params  filter_offset must be 0
 * The compiler picks them only where every row's |b| + 128 * sum |w| < 2^30
 * (twice the sum fits int32) and, for _p8_pt_, each pair's second row has
 * |b_d| + 128 * sum |w_d| < 2^23 (its sum comes back from raw - even). */
kiln_status_t kiln_fully_connected_rows8_p8_pt_s8(const kiln_fc_params_t *params,
                                                  const kiln_requant_packed_t *quant,
                                                  const kiln_dims_t *input_dims,
                                                  const int8_t *input,
                                                  const kiln_dims_t *filter_dims,
                                                  const int32_t *filter, const int32_t *bias,
                                                  const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_fully_connected_rows8_pt_s8(const kiln_fc_params_t *params,
                                               const kiln_requant_packed_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int8_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int32_t *filter, const int32_t *bias,
                                               const kiln_dims_t *output_dims, int8_t *output);

/* kiln_fully_connected_rows8_pt_s8 blocked six rows at a time (its asm loads two
 * rows' four words per LDM: 18 instructions a group of four k where eight rows
 * take 27 for 32 MACs).
 *   filter  per block of six rows, per group, [A][B] of each row in turn (values
 *           doubled); after the last whole block, blocks of three, then single rows.
 * Other arguments as kiln_fully_connected_rows8_pt_s8. */
kiln_status_t kiln_fully_connected_rows6_pt_s8(const kiln_fc_params_t *params,
                                               const kiln_requant_packed_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int8_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int32_t *filter, const int32_t *bias,
                                               const kiln_dims_t *output_dims, int8_t *output);

/* kiln_fully_connected_rows_s8 blocked two rows at a time.
 *   filter  per block of two rows, per group, [A][B] of each row in turn; an
 *           odd last row as [A][B] per group.
 * Other arguments as kiln_fully_connected_rows_s8. */
kiln_status_t kiln_fully_connected_rows2_s8(const kiln_context_t *ctx,
                                            const kiln_fc_params_t *params,
                                            const kiln_requant_fast_t *quant,
                                            const kiln_dims_t *input_dims, const int8_t *input,
                                            const kiln_dims_t *filter_dims,
                                            const int32_t *filter, const int32_t *bias,
                                            const kiln_dims_t *output_dims, int8_t *output);

int32_t kiln_fully_connected_rows2_s8_get_buffer_size(const kiln_dims_t *filter_dims);

/* kiln_fully_connected_rows_s8 blocked eight rows at a time (one input load
 * per eight rows: fewer instructions when units >= 8).
 *   filter  per block of eight rows, per group, [A][B] of each row in turn;
 *           after the last whole block, at most one block of four, one of
 *           two and one single row, largest first, each laid out the same way.
 * Other arguments as kiln_fully_connected_rows_s8. */
kiln_status_t kiln_fully_connected_rows8_s8(const kiln_context_t *ctx,
                                            const kiln_fc_params_t *params,
                                            const kiln_requant_fast_t *quant,
                                            const kiln_dims_t *input_dims, const int8_t *input,
                                            const kiln_dims_t *filter_dims,
                                            const int32_t *filter, const int32_t *bias,
                                            const kiln_dims_t *output_dims, int8_t *output);

int32_t kiln_fully_connected_rows8_s8_get_buffer_size(const kiln_dims_t *filter_dims);

/* ---- 16x8 (conv16.c) ------------------------------------------------------
 *
 * int16 activations, symmetric (zero point 0: params' input_offset and
 * output_offset must be 0), int8 weights (per channel or per tensor),
 * activation range within int16. Bit-exact with TFLM's 16x8 reference
 * kernels, which pick their arithmetic by the bias type:
 *
 *   int64 bias or none ("wide"; DEPTHWISE_CONV_2D and TRANSPOSE_CONV always):
 *     acc = bias[oc] + sum filter * input          exact in int64
 *     out = clamp(kiln_requantize64(acc, multiplier[oc], shift[oc]), min, max)
 *   int32 bias ("narrow"; CONV_2D and FULLY_CONNECTED only):
 *     TFLM accumulates in int32, wrapping on overflow; here the sum is taken
 *     in int64 and wrapped to int32 once (the same value: two's complement
 *     addition is exact modulo 2^32), then
 *     out = clamp(kiln_requantize(acc, multiplier[oc], shift[oc]), min, max)
 *
 * Padding taps read as 0 (the zero point) and add nothing. The compiler
 * refuses a wide layer unless |bias| + 32768 * sum|filter| < 2^47 for every
 * channel (TFLM's stated input range of the int64 requantization) and
 * shift <= 7, so nothing here overflows; narrow layers need shift <= 30.
 * Inner loops sum products (|x * w| <= 2^22) in int32 over blocks of at
 * most 256 terms and widen per block.
 */

/* CONV_2D 16x8, int64 bias (or NULL: zeros, still the wide arithmetic): any
 * filter size, stride, dilation, padding and groups, as kiln_conv2d_s8.
 * Each output pixel gathers its receptive field into scratch as int16.
 *   ctx  >= kiln_conv2d_s16_get_buffer_size() bytes, 2-byte aligned */
kiln_status_t kiln_conv2d_s16(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                              const kiln_per_channel_requant_t *quant,
                              const kiln_dims_t *input_dims, const int16_t *input,
                              const kiln_dims_t *filter_dims, const int8_t *filter,
                              const int64_t *bias,
                              const kiln_dims_t *output_dims, int16_t *output);

/* CONV_2D 16x8 with an int32 bias: the narrow arithmetic (NULL: zeros).
 * Arguments as kiln_conv2d_s16. */
kiln_status_t kiln_conv2d_b32_s16(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                  const kiln_per_channel_requant_t *quant,
                                  const kiln_dims_t *input_dims, const int16_t *input,
                                  const kiln_dims_t *filter_dims, const int8_t *filter,
                                  const int32_t *bias,
                                  const kiln_dims_t *output_dims, int16_t *output);

/* Scratch of both: one receptive field as int16, 2 * KH * KW * filter C bytes. */
int32_t kiln_conv2d_s16_get_buffer_size(const kiln_dims_t *input_dims,
                                        const kiln_dims_t *filter_dims);

/* DEPTHWISE_CONV_2D 16x8 (wide), any filter size, stride, dilation, padding
 * and depth multiplier; bias int64 or NULL. No scratch. */
kiln_status_t kiln_dwconv2d_s16(const kiln_dwconv_params_t *params,
                                const kiln_per_channel_requant_t *quant,
                                const kiln_dims_t *input_dims, const int16_t *input,
                                const kiln_dims_t *filter_dims, const int8_t *filter,
                                const int64_t *bias,
                                const kiln_dims_t *output_dims, int16_t *output);

/* FULLY_CONNECTED 16x8, int64 bias (or NULL, wide), dims as
 * kiln_fully_connected_s8; params->input_offset and output_offset must be 0,
 * filter_offset (per-tensor weights' -zero point) is applied as TFLM does. */
kiln_status_t kiln_fully_connected_s16(const kiln_fc_params_t *params,
                                       const kiln_per_channel_requant_t *quant,
                                       const kiln_dims_t *input_dims, const int16_t *input,
                                       const kiln_dims_t *filter_dims, const int8_t *filter,
                                       const int64_t *bias,
                                       const kiln_dims_t *output_dims, int16_t *output);

/* FULLY_CONNECTED 16x8 with an int32 bias: the narrow arithmetic (NULL: zeros). */
kiln_status_t kiln_fully_connected_b32_s16(const kiln_fc_params_t *params,
                                           const kiln_per_channel_requant_t *quant,
                                           const kiln_dims_t *input_dims, const int16_t *input,
                                           const kiln_dims_t *filter_dims,
                                           const int8_t *filter, const int32_t *bias,
                                           const kiln_dims_t *output_dims, int16_t *output);

/* SIMD variants (conv16_dsp.c): SMLAD on int16 pairs on cores with the DSP
 * extension, the same results in plain C elsewhere. Their filters are
 * packed at compile time as int16 pairs, each filter row (KH * KW * filter C
 * values of CONV_2D, depth values of FULLY_CONNECTED) on its own
 * (K + 1) / 2 words, lane 0 first, an odd row's last lane 0; 4-byte aligned.
 * The _w8 variants keep int8 weights: each row on (K + 3) / 4 words, per
 * group of four values k0..k3 the bytes (k0, k2, k1, k3) from the low byte,
 * zeros past the row's end. FULLY_CONNECTED applies params->filter_offset as
 * the plain kernel (kiln packs it into the int16 pairs and passes 0 there).
 * Other arguments and the scratch as their plain twins. */
kiln_status_t kiln_conv2d_dsp_s16(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                  const kiln_per_channel_requant_t *quant,
                                  const kiln_dims_t *input_dims, const int16_t *input,
                                  const kiln_dims_t *filter_dims, const int32_t *filter,
                                  const int64_t *bias,
                                  const kiln_dims_t *output_dims, int16_t *output);

kiln_status_t kiln_conv2d_dsp_b32_s16(const kiln_context_t *ctx,
                                      const kiln_conv_params_t *params,
                                      const kiln_per_channel_requant_t *quant,
                                      const kiln_dims_t *input_dims, const int16_t *input,
                                      const kiln_dims_t *filter_dims, const int32_t *filter,
                                      const int32_t *bias,
                                      const kiln_dims_t *output_dims, int16_t *output);

kiln_status_t kiln_conv2d_dsp_w8_s16(const kiln_context_t *ctx,
                                     const kiln_conv_params_t *params,
                                     const kiln_per_channel_requant_t *quant,
                                     const kiln_dims_t *input_dims, const int16_t *input,
                                     const kiln_dims_t *filter_dims, const int32_t *filter,
                                     const int64_t *bias,
                                     const kiln_dims_t *output_dims, int16_t *output);

kiln_status_t kiln_conv2d_dsp_w8_b32_s16(const kiln_context_t *ctx,
                                         const kiln_conv_params_t *params,
                                         const kiln_per_channel_requant_t *quant,
                                         const kiln_dims_t *input_dims, const int16_t *input,
                                         const kiln_dims_t *filter_dims, const int32_t *filter,
                                         const int32_t *bias,
                                         const kiln_dims_t *output_dims, int16_t *output);

/* Scratch of the four: as kiln_conv2d_s16_get_buffer_size. */
int32_t kiln_conv2d_dsp_s16_get_buffer_size(const kiln_dims_t *input_dims,
                                            const kiln_dims_t *filter_dims);

kiln_status_t kiln_fully_connected_dsp_s16(const kiln_fc_params_t *params,
                                           const kiln_per_channel_requant_t *quant,
                                           const kiln_dims_t *input_dims, const int16_t *input,
                                           const kiln_dims_t *filter_dims,
                                           const int32_t *filter, const int64_t *bias,
                                           const kiln_dims_t *output_dims, int16_t *output);

kiln_status_t kiln_fully_connected_dsp_b32_s16(const kiln_fc_params_t *params,
                                               const kiln_per_channel_requant_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int16_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int32_t *filter, const int32_t *bias,
                                               const kiln_dims_t *output_dims, int16_t *output);

kiln_status_t kiln_fully_connected_dsp_w8_s16(const kiln_fc_params_t *params,
                                              const kiln_per_channel_requant_t *quant,
                                              const kiln_dims_t *input_dims,
                                              const int16_t *input,
                                              const kiln_dims_t *filter_dims,
                                              const int32_t *filter, const int64_t *bias,
                                              const kiln_dims_t *output_dims, int16_t *output);

kiln_status_t kiln_fully_connected_dsp_w8_b32_s16(const kiln_fc_params_t *params,
                                                  const kiln_per_channel_requant_t *quant,
                                                  const kiln_dims_t *input_dims,
                                                  const int16_t *input,
                                                  const kiln_dims_t *filter_dims,
                                                  const int32_t *filter, const int32_t *bias,
                                                  const kiln_dims_t *output_dims,
                                                  int16_t *output);

/* DEPTHWISE_CONV_2D 16x8, depth multiplier 1, at most 256 taps, in blocks of
 * four channels (the last C % 4 one by one), SMLABB / SMLATT on int16 pairs.
 *   filter  packed from 1HWC, C zero-padded to a multiple of 4: per block of
 *           four channels, per tap (row-major), the int16 pairs
 *           [(c0, c1)][(c2, c3)]: 2 * KH * KW words per block; 4-byte aligned
 * Other arguments as kiln_dwconv2d_s16. No scratch. */
kiln_status_t kiln_dwconv2d_ch4_s16(const kiln_dwconv_params_t *params,
                                    const kiln_per_channel_requant_t *quant,
                                    const kiln_dims_t *input_dims, const int16_t *input,
                                    const kiln_dims_t *filter_dims, const int32_t *filter,
                                    const int64_t *bias,
                                    const kiln_dims_t *output_dims, int16_t *output);

/* TRANSPOSE_CONV 16x8 (wide), a gather per output pixel as
 * kiln_transpose_conv_s8; bias int64 or NULL; dilation 1x1. No scratch. */
kiln_status_t kiln_transpose_conv_s16(const kiln_conv_params_t *params,
                                      const kiln_per_channel_requant_t *quant,
                                      const kiln_dims_t *input_dims, const int16_t *input,
                                      const kiln_dims_t *filter_dims, const int8_t *filter,
                                      const int64_t *bias,
                                      const kiln_dims_t *output_dims, int16_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_CONV_H */
