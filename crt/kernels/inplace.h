/*
 * inplace.h - running conv-family layers band by band so that their output may
 * overlap their input in the arena (kiln's memory planner, issue 7).
 *
 * A banded kernel computes its output a few rows at a time (a "band") by
 * calling the ordinary kernel on the band's rows: the band's input rows
 * (halo included) become a smaller input image, with the padding that falls
 * inside the band. The ordinary kernel is treated as a black box: within one
 * call it may read its input and write its output in any order. What makes the
 * overlap safe is the order of the bands:
 *
 *   forward (reverse = 0): bands top to bottom. Band b may overwrite input
 *     rows no later band reads, so the output may start before the input:
 *     out - in <= min over b of (first input row of b * in_row_bytes
 *                                - end output row of b * out_row_bytes);
 *   backward (reverse = 1): bands bottom to top; the output may end after the
 *     input: out - in >= max over b of (end input row of b * in_row_bytes
 *                                       - first output row of b * out_row_bytes).
 *
 * With copy = 1 each band's input rows are first copied to scratch, so a band
 * may also overwrite its own input: "first/end input row of b" above become
 * those of the band after (forward) / before (backward) b. A 1x1 convolution
 * with as many output as input channels then runs exactly in place.
 *
 * kiln.compiler.codegen.ops.inplace derives these bounds from the same band
 * geometry (kiln_band_rows, Python twin `band_rows`), and the planner checks
 * every overlap against them. Batch must be 1.
 *
 * Scratch of a banded kernel: the band input copy (copy = 1, rounded up to
 * 8 bytes) followed by the ordinary kernel's own scratch.
 */
#ifndef KILN_INPLACE_H
#define KILN_INPLACE_H

#include "conv.h"
#include "data_movement.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a layer is split into bands. */
typedef struct {
    int32_t rows;       /* output rows per band, >= 1 (the last band may be shorter) */
    int32_t reverse;    /* 0: bands top to bottom; 1: bottom to top */
    int32_t copy;       /* 1: copy each band's input rows to scratch before computing it */
    int32_t flat;       /* 1: see the image as H * W rows of one pixel, so a band is `rows`
                         * pixels (1x1 filter, stride 1, no padding only) */
} kiln_band_params_t;

/* One band: output rows [out_row, out_row + out_rows) read input rows
 * [in_row, in_row + in_rows), with pad_top rows of padding above in_row. */
typedef struct {
    int32_t out_row;
    int32_t out_rows;
    int32_t in_row;
    int32_t in_rows;
    int32_t pad_top;
} kiln_band_t;

/* Number of bands of an output of out_h rows. */
int32_t kiln_band_count(const kiln_band_params_t *band, int32_t out_h);

/* Band `index` (0 = top) of a layer with this stride/padding/dilation
 * (params), input height in_h, filter height k_h and output height out_h. */
void kiln_band_rows(const kiln_band_params_t *band, const kiln_conv_params_t *params,
                    int32_t in_h, int32_t k_h, int32_t out_h, int32_t index, kiln_band_t *out);

/* Bytes of the band input copy (0 unless band->copy), rounded up to 8; dims as
 * the kernel sees them (flat: [1, H * W, 1, C]). */
int32_t kiln_band_copy_bytes(const kiln_band_params_t *band, const kiln_conv_params_t *params,
                             const kiln_dims_t *input_dims, int32_t k_h,
                             const kiln_dims_t *output_dims);

/* Banded twins of the conv.h kernels: same arguments after `band` and `ctx`
 * (ctx is the whole scratch: copy area, then the kernel's own scratch; it may
 * be {NULL, 0} when neither is needed). Return KILN_ERR_ARG on a bad band,
 * batch != 1 or too little scratch, else whatever the kernel returns. */
kiln_status_t kiln_conv2d_banded_s8(const kiln_band_params_t *band, const kiln_context_t *ctx,
                                    const kiln_conv_params_t *params,
                                    const kiln_per_channel_requant_t *quant,
                                    const kiln_dims_t *input_dims, const int8_t *input,
                                    const kiln_dims_t *filter_dims, const int8_t *filter,
                                    const int32_t *bias,
                                    const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_conv2d_1x1_banded_s8(const kiln_band_params_t *band,
                                        const kiln_context_t *ctx,
                                        const kiln_conv_params_t *params,
                                        const kiln_per_channel_requant_t *quant,
                                        const kiln_dims_t *input_dims, const int8_t *input,
                                        const kiln_dims_t *filter_dims, const int8_t *filter,
                                        const int32_t *bias,
                                        const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_conv2d_gemm_banded_s8(const kiln_band_params_t *band,
                                         const kiln_context_t *ctx,
                                         const kiln_conv_params_t *params,
                                         const kiln_requant_fast_t *quant,
                                         const kiln_dims_t *input_dims, const int8_t *input,
                                         const kiln_dims_t *filter_dims, const int32_t *filter,
                                         const int32_t *bias,
                                         const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_conv2d_gemm_oc4_banded_s8(const kiln_band_params_t *band,
                                             const kiln_context_t *ctx,
                                             const kiln_conv_params_t *params,
                                             const kiln_requant_fast_t *quant,
                                             const kiln_dims_t *input_dims, const int8_t *input,
                                             const kiln_dims_t *filter_dims,
                                             const int32_t *filter, const int32_t *bias,
                                             const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_conv2d_gemm_w8_banded_s8(const kiln_band_params_t *band,
                                            const kiln_context_t *ctx,
                                            const kiln_conv_params_t *params,
                                            const kiln_requant_fast_t *quant,
                                            const kiln_dims_t *input_dims, const int8_t *input,
                                            const kiln_dims_t *filter_dims,
                                            const int32_t *filter, const int32_t *bias,
                                            const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_conv2d_gemm_p8_banded_s8(const kiln_band_params_t *band,
                                            const kiln_context_t *ctx,
                                            const kiln_conv_params_t *params,
                                            const kiln_requant_packed_t *quant,
                                            const kiln_dims_t *input_dims, const int8_t *input,
                                            const kiln_dims_t *filter_dims,
                                            const int32_t *filter, const int32_t *bias,
                                            const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_conv2d_gemm_p8_full_banded_s8(const kiln_band_params_t *band,
                                                 const kiln_context_t *ctx,
                                                 const kiln_conv_params_t *params,
                                                 const kiln_requant_packed_t *quant,
                                                 const kiln_dims_t *input_dims,
                                                 const int8_t *input,
                                                 const kiln_dims_t *filter_dims,
                                                 const int32_t *filter, const int32_t *bias,
                                                 const kiln_dims_t *output_dims,
                                                 int8_t *output);

/* The two above for flat bands only (band->flat = 1: a 1x1, stride-1, unpadded
 * layer), without the row geometry the others link. */
kiln_status_t kiln_conv2d_gemm_p8_flat_banded_s8(const kiln_band_params_t *band,
                                                 const kiln_context_t *ctx,
                                                 const kiln_conv_params_t *params,
                                                 const kiln_requant_packed_t *quant,
                                                 const kiln_dims_t *input_dims,
                                                 const int8_t *input,
                                                 const kiln_dims_t *filter_dims,
                                                 const int32_t *filter, const int32_t *bias,
                                                 const kiln_dims_t *output_dims,
                                                 int8_t *output);

kiln_status_t kiln_conv2d_gemm_p8_full_flat_banded_s8(const kiln_band_params_t *band,
                                                      const kiln_context_t *ctx,
                                                      const kiln_conv_params_t *params,
                                                      const kiln_requant_packed_t *quant,
                                                      const kiln_dims_t *input_dims,
                                                      const int8_t *input,
                                                      const kiln_dims_t *filter_dims,
                                                      const int32_t *filter,
                                                      const int32_t *bias,
                                                      const kiln_dims_t *output_dims,
                                                      int8_t *output);

kiln_status_t kiln_dwconv2d_banded_s8(const kiln_band_params_t *band, const kiln_context_t *ctx,
                                      const kiln_dwconv_params_t *params,
                                      const kiln_per_channel_requant_t *quant,
                                      const kiln_dims_t *input_dims, const int8_t *input,
                                      const kiln_dims_t *filter_dims, const int8_t *filter,
                                      const int32_t *bias,
                                      const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_dwconv2d_3x3_banded_s8(const kiln_band_params_t *band,
                                          const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_requant_fast_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int32_t *filter,
                                          const int32_t *bias,
                                          const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_dwconv2d_ch4_banded_s8(const kiln_band_params_t *band,
                                          const kiln_context_t *ctx,
                                          const kiln_dwconv_params_t *params,
                                          const kiln_requant_fast_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int32_t *filter,
                                          const int32_t *bias,
                                          const kiln_dims_t *output_dims, int8_t *output);

kiln_status_t kiln_dwconv2d_3x3_w8_banded_s8(const kiln_band_params_t *band,
                                             const kiln_context_t *ctx,
                                             const kiln_dwconv_params_t *params,
                                             const kiln_requant_packed_t *quant,
                                             const kiln_dims_t *input_dims, const int8_t *input,
                                             const kiln_dims_t *filter_dims, const int8_t *filter,
                                             const int32_t *bias,
                                             const kiln_dims_t *output_dims, int8_t *output);

/* kiln_dwconv2d_3x3_px2v_s8 (dwconv_3x3_px2.c): one call over the whole layer when
 * the output lies a whole number of rows from the input and no band is copied. */
kiln_status_t kiln_dwconv2d_3x3_px2v_banded_s8(const kiln_band_params_t *band,
                                               const kiln_context_t *ctx,
                                               const kiln_dwconv_params_t *params,
                                               const kiln_requant_packed_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int8_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int8_t *filter, const int32_t *bias,
                                               const kiln_dims_t *output_dims, int8_t *output);

/* Its twin for kiln_dwconv2d_3x3_px2v_relu_s8's layers (conv.h). */
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
                                                    int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_INPLACE_H */
