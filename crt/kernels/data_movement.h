/*
 * data_movement.h - ops that only move elements: TRANSPOSE, STRIDED_SLICE and
 * TILE (strided copies), CONCATENATION and PACK (concat), SPLIT, SPLIT_V and
 * UNPACK (split), PAD and PADV2 (pad), RESIZE_NEAREST_NEIGHBOR,
 * SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND.
 *
 * None of these kernels looks at values: they copy elements of `elem_size`
 * bytes (1, 2, 4 or 8), so the same kernel serves int8 activations and int32
 * shape tensors, and they carry no type suffix. Quantization is unchanged by
 * every one of them (the compiler checks that input and output agree).
 *
 * Shapes and strides are computed by the compiler: a kernel receives the
 * simplest view of its copy (size-1 dimensions dropped, contiguous runs merged),
 * so the innermost loop is a memcpy wherever the layout allows one. Strides and
 * offsets count elements, not bytes.
 */
#ifndef KILN_DATA_MOVEMENT_H
#define KILN_DATA_MOVEMENT_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Dimensions of a copy view. A 6-D TILE doubles its dimensions before merging. */
#define KILN_COPY_MAX_DIMS 8
/* Dimensions of a padded tensor. */
#define KILN_PAD_MAX_DIMS 6

/* `bytes` bytes from src to dst (not overlapping): a word at a time where both
 * are word aligned. For the copies the generated code and the banded kernels make
 * (the model's inputs into the arena, a band's rows into scratch) in place of
 * memcpy, which would link the C library's (308 B on a Cortex-M4) into a model
 * that otherwise needs none. */
void kiln_copy_bytes(void *dst, const void *src, size_t bytes);

/* A strided gather into a contiguous output:
 *   output[i_0, ..., i_{rank-1}] (row-major) =
 *       input[in_offset + sum_d i_d * in_stride[d]]
 * Strides may be negative (reversed slices) or 0 (TILE's repeats). in_size is
 * the number of input elements: the kernel refuses a view that reads outside. */
typedef struct {
    int32_t elem_size;                      /* 1, 2, 4 or 8 */
    int32_t rank;                           /* 1 .. KILN_COPY_MAX_DIMS */
    int32_t shape[KILN_COPY_MAX_DIMS];      /* output extents, outermost first, >= 1 */
    int32_t in_stride[KILN_COPY_MAX_DIMS];  /* input stride of each output dimension */
    int32_t in_offset;                      /* input element of output index 0 */
    int32_t in_size;                        /* input elements */
} kiln_copy_params_t;

/* Concatenation along one axis, seen as `outer` rows: each output row is the
 * inputs' rows, in order, input i contributing row_bytes[i] bytes (its extent
 * along the axis times everything inside it, times the element size). */
typedef struct {
    int32_t count;              /* number of inputs (or outputs, for split), >= 1 */
    int32_t outer;              /* product of the dimensions before the axis, >= 1 */
    const int32_t *row_bytes;   /* count entries, each >= 0 */
} kiln_concat_params_t;

/* PAD over up to KILN_PAD_MAX_DIMS dimensions, padded at the front with extent 1. */
typedef struct {
    int32_t elem_size;                      /* 1, 2, 4 or 8 */
    int32_t in_shape[KILN_PAD_MAX_DIMS];    /* input extents, >= 1 */
    int32_t before[KILN_PAD_MAX_DIMS];      /* padding before each dimension, >= 0 */
    int32_t after[KILN_PAD_MAX_DIMS];       /* padding after each dimension, >= 0 */
} kiln_pad_params_t;

/* RESIZE_NEAREST_NEIGHBOR: output pixel (y, x) copies input pixel
 * (y_map[y], x_map[x]); the maps are computed by the compiler with TFLite's
 * float arithmetic (align_corners / half_pixel_centers), so none runs here. */
typedef struct {
    int32_t elem_size;
    kiln_dims_t input;          /* N, H, W, C */
    kiln_dims_t output;         /* N, out H, out W, C */
    const int32_t *y_map;       /* output.h entries in [0, input.h) */
    const int32_t *x_map;       /* output.w entries in [0, input.w) */
} kiln_resize_nearest_params_t;

/* SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND on NHWC (a 3-D N, H, C tensor is
 * N, H, 1, C with block.w = 1). `margin` is the padding (space to batch) or
 * the crop (batch to space) before each spatial dimension. */
typedef struct {
    int32_t elem_size;
    kiln_dims_t input;
    kiln_dims_t output;
    kiln_tile_t block;          /* >= 1 */
    kiln_tile_t margin;         /* >= 0 */
} kiln_space_batch_params_t;

/* TRANSPOSE, STRIDED_SLICE, TILE: see kiln_copy_params_t. */
kiln_status_t kiln_strided_copy(const kiln_copy_params_t *params, const void *input,
                                void *output);

/* CONCATENATION, PACK: output row r = input 0 row r, input 1 row r, ... */
kiln_status_t kiln_concat(const kiln_concat_params_t *params, const void *const *inputs,
                          void *output);

/* SPLIT, SPLIT_V, UNPACK: the inverse of kiln_concat (outputs[i] receives
 * row_bytes[i] bytes of every input row). */
kiln_status_t kiln_split(const kiln_concat_params_t *params, const void *input,
                         void *const *outputs);

/* PAD, PADV2: positions outside the input hold *pad_value (elem_size bytes). */
kiln_status_t kiln_pad(const kiln_pad_params_t *params, const void *pad_value,
                       const void *input, void *output);

kiln_status_t kiln_resize_nearest(const kiln_resize_nearest_params_t *params,
                                  const void *input, void *output);

/* SPACE_TO_BATCH_ND: output batch (sy * block.w + sx) * input.n + b holds the
 * input pixels (y * block.h + sy - margin.h, x * block.w + sx - margin.w) of
 * batch b; positions in the padding hold *pad_value. */
kiln_status_t kiln_space_to_batch(const kiln_space_batch_params_t *params,
                                  const void *pad_value, const void *input, void *output);

/* BATCH_TO_SPACE_ND: the inverse, dropping the cropped rows and columns. */
kiln_status_t kiln_batch_to_space(const kiln_space_batch_params_t *params,
                                  const void *input, void *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_DATA_MOVEMENT_H */
