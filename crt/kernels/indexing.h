/*
 * indexing.h - ops that pick elements by index: ARG_MAX and ARG_MIN (which
 * write indices), GATHER (which reads them), MIRROR_PAD (a copy through
 * per-dimension index maps the compiler computes).
 *
 * SLICE, DEPTH_TO_SPACE and SPACE_TO_DEPTH need no kernel of their own: the
 * compiler reduces them to kiln_strided_copy (data_movement.h).
 *
 * As in data_movement.h, the copying kernels look at no values: they move
 * elements of `elem_size` bytes (1, 2, 4 or 8) and carry no type suffix;
 * quantization is unchanged (the compiler checks that input and output agree).
 * Extents and offsets count elements, not bytes. Every shape is a compile-time
 * constant of the generated call.
 */
#ifndef KILN_INDEXING_H
#define KILN_INDEXING_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Dimensions of a mirror-padded tensor (after trailing unpadded ones fold into the run). */
#define KILN_MIRROR_PAD_MAX_DIMS 6

/* ARG_MAX / ARG_MIN over one axis of a tensor seen as [outer, axis_size, inner]:
 *   output[o * inner + i] = the k in [0, axis_size) whose input[(o * axis_size + k) * inner + i]
 *   is largest (smallest); on ties the lowest k, as TFLite's strict comparison gives. */
typedef struct {
    int32_t outer;          /* product of the dimensions before the axis, >= 1 */
    int32_t axis_size;      /* >= 1 */
    int32_t inner;          /* product of the dimensions after the axis, >= 1 */
    int32_t index_size;     /* output element: 4 (int32_t) or 8 (int64_t) */
} kiln_arg_params_t;

/* GATHER with TFLite's batch_dims, the input seen as [batch, outer, axis_size, inner]
 * and the indices as [batch, coords]:
 *   output[b, o, c, :] = input[b, o, indices[b, c], :]
 * An index outside [0, axis_size) makes the kernel return KILN_ERR_ARG (TFLite
 * fails the invoke the same way); the output is then partly written. */
typedef struct {
    int32_t elem_size;      /* 1, 2, 4 or 8 */
    int32_t batch;          /* product of the first batch_dims dimensions, >= 1 */
    int32_t outer;          /* product of the dimensions from batch_dims to the axis, >= 1 */
    int32_t axis_size;      /* >= 1 */
    int32_t coords;         /* indices per batch, >= 1 */
    int32_t inner;          /* elements after the axis, >= 1 */
    int32_t index_size;     /* indices element: 4 (int32_t) or 8 (int64_t) */
} kiln_gather_params_t;

/* A copy through per-dimension maps, output row-major over `shape`, each output
 * position a run of `run` contiguous input elements:
 *   output[(i_0, ..., i_{rank-1}) * run + r] =
 *       input[offsets_0[i_0] + ... + offsets_{rank-1}[i_{rank-1}] + r]
 * `offsets` holds the maps one after another (shape[0] entries, then shape[1],
 * ...), each entry the input element offset of that output index along its
 * dimension. MIRROR_PAD's reflections are all in the maps. in_size is the
 * number of input elements: the kernel refuses maps that read outside. */
typedef struct {
    int32_t elem_size;                          /* 1, 2, 4 or 8 */
    int32_t rank;                               /* 1 .. KILN_MIRROR_PAD_MAX_DIMS */
    int32_t shape[KILN_MIRROR_PAD_MAX_DIMS];    /* output extents, >= 1 */
    int32_t run;                                /* elements per map entry, >= 1 */
    int32_t in_size;                            /* input elements */
    const int32_t *offsets;                     /* sum(shape) entries, >= 0 */
} kiln_mirror_pad_params_t;

kiln_status_t kiln_arg_max_s8(const kiln_arg_params_t *params, const int8_t *input,
                              void *output);

kiln_status_t kiln_arg_min_s8(const kiln_arg_params_t *params, const int8_t *input,
                              void *output);

/* GATHER: see kiln_gather_params_t; `indices` holds batch * coords entries. */
kiln_status_t kiln_gather(const kiln_gather_params_t *params, const void *input,
                          const void *indices, void *output);

/* MIRROR_PAD (REFLECT and SYMMETRIC): see kiln_mirror_pad_params_t. */
kiln_status_t kiln_mirror_pad(const kiln_mirror_pad_params_t *params, const void *input,
                              void *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_INDEXING_H */
