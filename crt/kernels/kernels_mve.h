/*
 * kernels_mve.h - the Helium (MVE) variants of the int8 conv-family kernels,
 * ADD/SUB and pooling, for cores with the M-profile Vector Extension (Cortex-M55,
 * -mcpu=cortex-m55 with a hard-float ABI). Declared on every target; defined
 * only where the compiler has MVE integer support (__ARM_FEATURE_MVE & 1): the
 * compiler (kiln.compiler.codegen.ops: conv.candidates, elementwise.add_variant,
 * pool) calls them only on such boards.
 *
 * Bit-exact with the plain kernels of conv.h and with tflite-micro: the same
 * folded-bias int32 accumulators, and TFLite's double-rounding requantization
 * done four lanes at a time (see kiln_mve_requantize in conv_mve.h, proven
 * equal to kiln_requantize for every shift in [-31, 30], not only the fast
 * path's shift <= -2, so these variants need no requant_fast rewrite).
 *
 * Per-channel parameters come in blocks of four lanes, kiln_mve_quant4_t: the
 * folded bias, TFLite's multiplier and its shift split into a left shift
 * (max(shift, 0)) and a negated right shift (min(shift, 0)), the operand of
 * VRSHL. Channels past the last real one (a block's padding) are all zeros.
 */
#ifndef KILN_KERNELS_MVE_H
#define KILN_KERNELS_MVE_H

#include "conv.h"
#include "elementwise.h"
#include "pool.h"
#include "inplace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Four output channels' requantization (one per MVE lane). */
typedef struct {
    int32_t bias[4];            /* folded bias (conv.h), int32 */
    int32_t multiplier[4];      /* TFLite's, [2^30, 2^31), or 0 for a padding lane */
    int32_t left_shift[4];      /* max(shift, 0), [0, 30] */
    int32_t neg_right_shift[4]; /* min(shift, 0), [-31, 0] */
} kiln_mve_quant4_t;

/* CONV_2D with one group, any filter size, stride, dilation and padding, as
 * im2col + GEMM: per output pixel its receptive field, KH runs of R = KW * C_in
 * int8 values (a window inside the input, with dilation 1 along the width, is
 * read in place; others are gathered into scratch, padding as the input zero
 * point), times four filter rows at once with VMLADAVA.S8 (16 MACs an
 * instruction). Kernel rows of at most 16 values (first layers on 3 channels,
 * 1x1 on C <= 16) take straight-line paths: a window's runs loaded once a
 * pixel, one group a run.
 *   filter  packed from OHWI: per block of four output channels (C_out
 *           rounded up to 4, padding channels zero), per kernel row, per group
 *           of 16 k (R rounded up to 16, zeros past R), the 16 bytes of each of
 *           the four channels: ceil(C_out / 4) * KH * ceil(R / 16) * 64 bytes
 *   quant   ceil(C_out / 4) blocks, bias folded as in conv.h
 *   ctx     >= kiln_conv2d_mve_s8_get_buffer_size() bytes (NULL-able when 0)
 * Other arguments as kiln_conv2d_s8. */
kiln_status_t kiln_conv2d_mve_s8(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                 const kiln_mve_quant4_t *quant,
                                 const kiln_dims_t *input_dims, const int8_t *input,
                                 const kiln_dims_t *filter_dims, const int8_t *filter,
                                 const kiln_dims_t *output_dims, int8_t *output);

/* Scratch of kiln_conv2d_mve_s8: one receptive field, KH kernel rows of KW * C_in
 * values at a stride of whole 16-byte groups; none when every window lies inside
 * the input (no padding, dilation 1 along the width). Valid dims and params
 * (the kernel's own checks). */
int32_t kiln_conv2d_mve_s8_get_buffer_size(const kiln_conv_params_t *params,
                                           const kiln_dims_t *input_dims,
                                           const kiln_dims_t *filter_dims,
                                           const kiln_dims_t *output_dims);

/* kiln_conv2d_mve_s8 with every window gathered into one compact run of
 * K = KH * KW * C_in values (fewer padded groups when a kernel row is short,
 * e.g. KWS's 10x4 filter on one channel; a window of one kernel row inside the
 * input is read in place).
 *   filter  packed as kiln_conv2d_mve_s8's with one run of K per channel:
 *           ceil(C_out / 4) * ceil(K / 16) * 64 bytes
 *   ctx     >= kiln_conv2d_mve_im2col_s8_get_buffer_size(): K bytes, or none
 * Other arguments as kiln_conv2d_mve_s8. */
kiln_status_t kiln_conv2d_mve_im2col_s8(const kiln_context_t *ctx,
                                        const kiln_conv_params_t *params,
                                        const kiln_mve_quant4_t *quant,
                                        const kiln_dims_t *input_dims, const int8_t *input,
                                        const kiln_dims_t *filter_dims, const int8_t *filter,
                                        const kiln_dims_t *output_dims, int8_t *output);

int32_t kiln_conv2d_mve_im2col_s8_get_buffer_size(const kiln_conv_params_t *params,
                                                  const kiln_dims_t *input_dims,
                                                  const kiln_dims_t *filter_dims,
                                                  const kiln_dims_t *output_dims);

/* DEPTHWISE_CONV_2D with depth multiplier 1, any filter size, stride,
 * dilation and padding: sixteen channels a pass (eight channels of two
 * neighbouring pixels where C = 8 at stride 1), int8 input and filter loaded
 * into int16 lanes (VLDRB.S16) and multiplied (VMUL.I16), two taps' products
 * added in int16 where no filter value is -128, widened into int32 sums
 * (VMOVLB/VMOVLT.S16); outputs stored by byte scatters (VSTRB.32).
 *   filter  the model's 1HWC int8 filter, unchanged
 *   quant   per block of 8 channels two blocks, lanes (c0, c2, c4, c6),
 *           (c1, c3, c5, c7); bias folded: model bias + input_offset * sum
 *           of the channel's taps (padding reads as the zero point)
 *   ctx     >= kiln_dwconv2d_mve_s8_get_buffer_size(), 4-byte aligned: a
 *           pointer and an offset per tap, then one pixel of zero points */
kiln_status_t kiln_dwconv2d_mve_s8(const kiln_context_t *ctx, const kiln_dwconv_params_t *params,
                                   const kiln_mve_quant4_t *quant,
                                   const kiln_dims_t *input_dims, const int8_t *input,
                                   const kiln_dims_t *filter_dims, const int8_t *filter,
                                   const kiln_dims_t *output_dims, int8_t *output);

int32_t kiln_dwconv2d_mve_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                             const kiln_dims_t *filter_dims);

/* FULLY_CONNECTED: each input row times four filter rows at once (VMLADAVA.S8).
 *   filter  packed as kiln_conv2d_mve_s8's with K = depth: per block of four
 *           units, per group of 16 k, 16 bytes of each unit
 *   quant   ceil(units / 4) blocks, bias folded as in conv.h (filter_offset
 *           included); params->filter_offset is added at run time as
 *           filter_offset * sum(row)
 * No scratch. Other arguments as kiln_fully_connected_s8. */
kiln_status_t kiln_fully_connected_mve_s8(const kiln_fc_params_t *params,
                                          const kiln_mve_quant4_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int8_t *filter,
                                          const kiln_dims_t *output_dims, int8_t *output);

/* ADD and SUB (kiln_add_params_t's arithmetic, elementwise.h) four elements a
 * step. Inputs and output of the same dims; with broadcasting they run the
 * plain kernels (kiln_add_s8, kiln_sub_s8). The output may sit exactly on an
 * input. */
kiln_status_t kiln_add_mve_s8(const kiln_add_params_t *params,
                              const kiln_dims_t *input1_dims, const int8_t *input1,
                              const kiln_dims_t *input2_dims, const int8_t *input2,
                              const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_sub_mve_s8(const kiln_add_params_t *params,
                              const kiln_dims_t *input1_dims, const int8_t *input1,
                              const kiln_dims_t *input2_dims, const int8_t *input2,
                              const kiln_dims_t *output_dims, int8_t *output);

/* Banded twins (inplace.h: each band one call of the kernel above, so the
 * output may overlap the input as the planner allows); same arguments after
 * `band` and `ctx` (the copy area, then the kernel's own scratch). */
kiln_status_t kiln_conv2d_mve_banded_s8(const kiln_band_params_t *band,
                                        const kiln_context_t *ctx,
                                        const kiln_conv_params_t *params,
                                        const kiln_mve_quant4_t *quant,
                                        const kiln_dims_t *input_dims, const int8_t *input,
                                        const kiln_dims_t *filter_dims, const int8_t *filter,
                                        const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_conv2d_mve_im2col_banded_s8(const kiln_band_params_t *band,
                                               const kiln_context_t *ctx,
                                               const kiln_conv_params_t *params,
                                               const kiln_mve_quant4_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int8_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int8_t *filter,
                                               const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_dwconv2d_mve_banded_s8(const kiln_band_params_t *band,
                                          const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_mve_quant4_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int8_t *filter,
                                          const kiln_dims_t *output_dims, int8_t *output);

/* AVERAGE_POOL_2D and MAX_POOL_2D (pool.h's semantics and limits): the max 16
 * channels a vector, the average's sums four channels a vector (int32 lanes),
 * each divided by its window count as TFLite rounds. Arguments as
 * kiln_avgpool_s8 and kiln_maxpool_s8. */
kiln_status_t kiln_avgpool_mve_s8(const kiln_pool_params_t *params,
                                  const kiln_dims_t *input_dims, const int8_t *input,
                                  const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_maxpool_mve_s8(const kiln_pool_params_t *params,
                                  const kiln_dims_t *input_dims, const int8_t *input,
                                  const kiln_dims_t *output_dims, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KERNELS_MVE_H */
