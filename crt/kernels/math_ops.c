/*
 * math_ops.c - int8 and int16 SQUARED_DIFFERENCE, int8 PRELU, with broadcasting.
 *
 * Each op is an element function of two values, made a row function
 * by KILN_ROW_OF for kiln_broadcast_rows() (broadcast.h), the walk the
 * elementwise ops use.
 */
#include "math_ops.h"

#include "broadcast.h"
#include "kiln_math.h"

/* One row of an element function over elements of type T: the row form
 * kiln_broadcast_rows() takes. The element function returns the unclamped
 * int32 result; the row clamps it to [LO, HI]. */
#define KILN_ROW_OF(element, name, T, LO, HI)                                            \
    static void name(const void *params, const void *a_row, int32_t a_step,             \
                     const void *b_row, int32_t b_step, void *out_row, int32_t len)     \
    {                                                                                    \
        const T *a = (const T *)a_row;                                                   \
        const T *b = (const T *)b_row;                                                   \
        T *out = (T *)out_row;                                                           \
        for (int32_t i = 0; i < len; ++i) {                                              \
            out[i] = (T)kiln_clamp(element(params, a[i * a_step], b[i * b_step]), LO, HI); \
        }                                                                                \
    }

/* --- SQUARED_DIFFERENCE ---------------------------------------------------------- */

/* int8: |x + offset| <= 255 and left_shift <= 7: the shifted value is below
 * 2^15. int16: offsets 0, left_shift 0, |x| <= 2^15. Either way the multiplier
 * is at most one half, so |a|, |b| <= 2^14, |a - b| <= 2^15 and
 * (a - b)^2 <= 2^30 < 2^31. */
static int32_t squared_difference(const void *params, int32_t x1, int32_t x2)
{
    const kiln_squared_difference_params_t *p = (const kiln_squared_difference_params_t *)params;
    const int32_t a = kiln_requantize((x1 + p->input1_offset) * (1 << p->left_shift),
                                      p->input1.multiplier, p->input1.shift);
    const int32_t b = kiln_requantize((x2 + p->input2_offset) * (1 << p->left_shift),
                                      p->input2.multiplier, p->input2.shift);
    const int32_t diff = a - b;
    return kiln_requantize(diff * diff, p->output.multiplier, p->output.shift) +
           p->output_offset;
}
KILN_ROW_OF(squared_difference, squared_difference_row, int8_t, INT8_MIN, INT8_MAX)
KILN_ROW_OF(squared_difference, squared_difference_row_s16, int16_t, INT16_MIN, INT16_MAX)

kiln_status_t kiln_squared_difference_s8(const kiln_squared_difference_params_t *params,
                                         const kiln_dims_t *input1_dims, const int8_t *input1,
                                         const kiln_dims_t *input2_dims, const int8_t *input2,
                                         const kiln_dims_t *output_dims, int8_t *output)
{
    if (params == NULL || params->left_shift < 0 || params->left_shift > 7 ||
        params->input1.shift > 0 || params->input1.shift < -31 ||
        params->input2.shift > 0 || params->input2.shift < -31 ||
        params->output.shift > 30 || params->output.shift < -31 ||
        params->input1_offset < -127 || params->input1_offset > 128 ||
        params->input2_offset < -127 || params->input2_offset > 128) {
        return KILN_ERR_ARG;
    }
    return kiln_broadcast_rows(params, 1, input1_dims, input1, input2_dims, input2,
                               output_dims, output, squared_difference_row);
}

kiln_status_t kiln_squared_difference_s16(const kiln_squared_difference_params_t *params,
                                          const kiln_dims_t *input1_dims, const int16_t *input1,
                                          const kiln_dims_t *input2_dims, const int16_t *input2,
                                          const kiln_dims_t *output_dims, int16_t *output)
{
    if (params == NULL || params->left_shift != 0 || params->input1_offset != 0 ||
        params->input2_offset != 0 || params->input1.shift > 0 || params->input1.shift < -31 ||
        params->input2.shift > 0 || params->input2.shift < -31 ||
        params->output.shift > 30 || params->output.shift < -31) {
        return KILN_ERR_ARG;
    }
    return kiln_broadcast_rows(params, 2, input1_dims, input1, input2_dims, input2,
                               output_dims, output, squared_difference_row_s16);
}

/* --- PRELU ------------------------------------------------------------------------ */

/* |v| <= 255 and |alpha + alpha_offset| <= 255: the product fits int32. */
static int32_t prelu(const void *params, int32_t x, int32_t alpha)
{
    const kiln_prelu_params_t *p = (const kiln_prelu_params_t *)params;
    const int32_t v = x + p->input_offset;
    int32_t y;
    if (v >= 0) {
        y = kiln_requantize(v, p->positive.multiplier, p->positive.shift);
    } else {
        y = kiln_requantize(v * (alpha + p->alpha_offset), p->negative.multiplier,
                            p->negative.shift);
    }
    return y + p->output_offset;
}
KILN_ROW_OF(prelu, prelu_row, int8_t, INT8_MIN, INT8_MAX)

kiln_status_t kiln_prelu_s8(const kiln_prelu_params_t *params,
                            const kiln_dims_t *input_dims, const int8_t *input,
                            const kiln_dims_t *alpha_dims, const int8_t *alpha,
                            const kiln_dims_t *output_dims, int8_t *output)
{
    if (params == NULL || params->positive.shift > 30 || params->positive.shift < -31 ||
        params->negative.shift > 30 || params->negative.shift < -31 ||
        params->input_offset < -127 || params->input_offset > 128 ||
        params->alpha_offset < -127 || params->alpha_offset > 128) {
        return KILN_ERR_ARG;
    }
    return kiln_broadcast_rows(params, 1, input_dims, input, alpha_dims, alpha, output_dims,
                               output, prelu_row);
}
