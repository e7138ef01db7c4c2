/* broadcast.c - the NHWC broadcast walk of the binary kernels (broadcast.h). */
#include "broadcast.h"

#include <stddef.h>

static int dims_valid(const kiln_dims_t *d)
{
    return d != NULL && d->n > 0 && d->h > 0 && d->w > 0 && d->c > 0;
}

static int dims_equal(const kiln_dims_t *a, const kiln_dims_t *b)
{
    return a->n == b->n && a->h == b->h && a->w == b->w && a->c == b->c;
}

/* Element strides with which an input of dims `in` is read along each dim of
 * `out` (n, h, w, c): 0 where it broadcasts. Returns 0 when an input dim is
 * neither the output dim nor 1. */
static int broadcast_strides(const kiln_dims_t *in, const kiln_dims_t *out, int32_t stride[4])
{
    const int32_t in_extent[4] = {in->n, in->h, in->w, in->c};
    const int32_t out_extent[4] = {out->n, out->h, out->w, out->c};
    int32_t step = 1;
    for (int i = 3; i >= 0; --i) {
        if (in_extent[i] == out_extent[i]) {
            stride[i] = step;
        } else if (in_extent[i] == 1) {
            stride[i] = 0;
        } else {
            return 0;
        }
        step *= in_extent[i];
    }
    return 1;
}

kiln_status_t kiln_broadcast_rows(const void *params, int32_t element_bytes,
                                  const kiln_dims_t *input1_dims, const void *input1,
                                  const kiln_dims_t *input2_dims, const void *input2,
                                  const kiln_dims_t *output_dims, void *output,
                                  kiln_row_fn_t row)
{
    if (input1 == NULL || input2 == NULL || output == NULL || element_bytes < 1 ||
        !dims_valid(input1_dims) ||
        !dims_valid(input2_dims) || !dims_valid(output_dims)) {
        return KILN_ERR_ARG;
    }
    int32_t s1[4];
    int32_t s2[4];
    if (!broadcast_strides(input1_dims, output_dims, s1) ||
        !broadcast_strides(input2_dims, output_dims, s2)) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = output_dims->c;
    if (dims_equal(input1_dims, output_dims) && dims_equal(input2_dims, output_dims)) {
        row(params, input1, 1, input2, 1, output,
            output_dims->n * output_dims->h * output_dims->w * depth);
        return KILN_OK;
    }
    /* Byte pointers: element offsets scaled by the element size (size_t, as the
     * byte offset of an int16 tensor may pass INT32_MAX / 2 elements). */
    const size_t size = (size_t)element_bytes;
    const char *in1 = (const char *)input1;
    const char *in2 = (const char *)input2;
    char *out = (char *)output;
    for (int32_t n = 0; n < output_dims->n; ++n) {
        for (int32_t h = 0; h < output_dims->h; ++h) {
            for (int32_t w = 0; w < output_dims->w; ++w) {
                const char *a = in1 + size * (size_t)(n * s1[0] + h * s1[1] + w * s1[2]);
                const char *b = in2 + size * (size_t)(n * s2[0] + h * s2[1] + w * s2[2]);
                row(params, a, s1[3], b, s2[3], out, depth);
                out += size * (size_t)depth;
            }
        }
    }
    return KILN_OK;
}
