/*
 * kiln_types.h - types shared by every kiln kernel.
 *
 * Every kernel has the same argument shape: op params, quant params, then
 * (dims, data) pairs, inputs const, output last, and returns kiln_status_t.
 * Tensors are NHWC int8 unless a kernel says otherwise. Kernels never
 * allocate: scratch memory comes from the arena, and its size from the
 * kernel's own kiln_<op>_get_buffer_size() where it needs any.
 */
#ifndef KILN_TYPES_H
#define KILN_TYPES_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    KILN_OK = 0,
    KILN_ERR_ARG = 1,         /* an argument is outside the kernel's documented range */
    KILN_ERR_UNSUPPORTED = 2  /* a valid combination this kernel does not implement */
} kiln_status_t;

/* Shape of a 4-D NHWC tensor (lower-rank tensors pad with leading 1s). */
typedef struct {
    int32_t n;
    int32_t h;
    int32_t w;
    int32_t c;
} kiln_dims_t;

/* A 2-D extent: strides, paddings, dilations, kernel sizes. */
typedef struct {
    int32_t h;
    int32_t w;
} kiln_tile_t;

/* One fixed-point multiplier: real = multiplier * 2^(shift - 31), multiplier in [2^30, 2^31). */
typedef struct {
    int32_t multiplier;
    int32_t shift;
} kiln_requant_t;

/* Per-output-channel multipliers (conv, depthwise conv, per-channel fully connected). */
typedef struct {
    const int32_t *multiplier;
    const int32_t *shift;
} kiln_per_channel_requant_t;

/* Fused activation as an int8 clamp range, already in the output's quantized domain. */
typedef struct {
    int32_t min;
    int32_t max;
} kiln_activation_t;

/* Scratch memory handed to a kernel: a slice of the arena. */
typedef struct {
    void *buf;
    int32_t size;
} kiln_context_t;

#ifdef __cplusplus
}
#endif

#endif /* KILN_TYPES_H */
