/*
 * resize.h - int8 RESIZE_BILINEAR on NHWC, as TFLite's integer resize computes it
 * (reference_ops::ResizeBilinearInteger, which tflite-micro runs for int8).
 *
 * The compiler computes, for every output row y, the two input rows y0[y], y1[y]
 * it blends and the weight fy[y] of y1 in 1/1024 steps (y0 gets 1024 - fy); the
 * same for columns. TFLite derives them from its 10-bit fixed-point scale and
 * coordinate mode (align_corners, half_pixel_centers); the lowering
 * (compiler/codegen/ops/resize.py) does that once, so the kernel only blends:
 *
 *   s = in[y0][x0] (1024 - fy)(1024 - fx) + in[y1][x0] fy (1024 - fx)
 *     + in[y0][x1] (1024 - fy) fx + in[y1][x1] fy fx
 *   out = (s + (s > 0 ? 2^19 : -2^19)) / 2^20      (C division: towards zero)
 *
 * The input and output share one scale and zero point (TFLite's rule), so the
 * blend of the raw integers is the blend of the real values. The compiler proves
 * |s| fits int32_t for the model's tables (codegen/bounds.py); every table index
 * is checked against the input here.
 */
#ifndef KILN_RESIZE_H
#define KILN_RESIZE_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    kiln_dims_t input;          /* N, H, W, C */
    kiln_dims_t output;         /* N, out H, out W, C */
    const int32_t *y0;          /* output.h entries in [0, input.h) */
    const int32_t *y1;          /* output.h entries in [0, input.h) */
    const int32_t *fy;          /* output.h weights of y1, in 1/1024 */
    const int32_t *x0;          /* output.w entries in [0, input.w) */
    const int32_t *x1;          /* output.w entries in [0, input.w) */
    const int32_t *fx;          /* output.w weights of x1, in 1/1024 */
} kiln_resize_bilinear_params_t;

kiln_status_t kiln_resize_bilinear_s8(const kiln_resize_bilinear_params_t *params,
                                      const int8_t *input, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_RESIZE_H */
