/*
 * broadcast.h - the NHWC broadcast walk shared by the binary kernels
 * (elementwise.c, math_ops.c), for elements of any size (int8, int16).
 * Private to crt/kernels: not in kiln_kernels.h.
 *
 * An op is a "row" function over a contiguous run of the output, reading each
 * input either elementwise (step 1) or as one broadcast scalar (step 0).
 * kiln_broadcast_rows() walks the outer n, h, w dims and calls it once per run
 * of c, or once for the whole tensor when nothing broadcasts.
 */
#ifndef KILN_BROADCAST_H
#define KILN_BROADCAST_H

#include "kiln_types.h"

/* a, b and out point to elements of the kernel's own type (the row function
 * casts them); the steps are in elements. */
typedef void (*kiln_row_fn_t)(const void *params, const void *a, int32_t a_step,
                              const void *b, int32_t b_step, void *out, int32_t len);

/* KILN_ERR_ARG for a NULL pointer, an empty dim, or an input dim that is
 * neither the output's nor 1; else KILN_OK after `row` covered the output. */
kiln_status_t kiln_broadcast_rows(const void *params, int32_t element_bytes,
                                  const kiln_dims_t *input1_dims, const void *input1,
                                  const kiln_dims_t *input2_dims, const void *input2,
                                  const kiln_dims_t *output_dims, void *output,
                                  kiln_row_fn_t row);

#endif /* KILN_BROADCAST_H */
