/*
 * quantize.c - float <-> int8/int16 conversions at the model boundary, and the
 * int8 -> int16 requantization table.
 */
#include "quantize.h"

#include "kiln_math.h"

static int32_t dims_count(const kiln_dims_t *d)
{
    if (d == NULL || d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0) {
        return -1;
    }
    return d->n * d->h * d->w * d->c;
}

/* TFLM's AffineQuantize for one value: round(x / scale) + zero_point, clamped.
 * The quotient is a float32 division; rounding is half away from zero and done
 * exactly without libm: for |q| < 2^16 the truncation t and the fraction
 * q - t are exact floats. Beyond 2^16 the result saturates for any zero point
 * of an 8- or 16-bit type. */
static inline int32_t quantize_value(float x, float scale, int32_t zero_point, int32_t lo,
                                     int32_t hi)
{
    const float q = x / scale;
    if (q != q) {
        return zero_point;            /* NaN (TFLM's float->int cast is undefined here) */
    }
    if (q >= 65536.0f) {
        return hi;
    }
    if (q <= -65536.0f) {
        return lo;
    }
    int32_t r = (int32_t)q;           /* toward zero */
    const float fraction = q - (float)r;
    if (fraction >= 0.5f) {
        r += 1;
    } else if (fraction <= -0.5f) {
        r -= 1;
    }
    r += zero_point;
    return r < lo ? lo : (r > hi ? hi : r);
}

static int quantize_args_valid(const kiln_quantize_params_t *params, const void *input,
                               const kiln_dims_t *input_dims, const void *output,
                               const kiln_dims_t *output_dims)
{
    const int32_t count = dims_count(input_dims);
    return params != NULL && params->scale > 0.0f && input != NULL && output != NULL &&
           count >= 0 && count == dims_count(output_dims);
}

kiln_status_t kiln_quantize_f32_s8(const kiln_quantize_params_t *params,
                                   const kiln_dims_t *input_dims, const float *input,
                                   const kiln_dims_t *output_dims, int8_t *output)
{
    if (!quantize_args_valid(params, input, input_dims, output, output_dims) ||
        params->zero_point < INT8_MIN || params->zero_point > INT8_MAX) {
        return KILN_ERR_ARG;
    }
    const int32_t count = dims_count(input_dims);
    const float scale = params->scale;
    const int32_t zero_point = params->zero_point;
    for (int32_t i = 0; i < count; ++i) {
        output[i] = (int8_t)quantize_value(input[i], scale, zero_point, INT8_MIN, INT8_MAX);
    }
    return KILN_OK;
}

kiln_status_t kiln_quantize_f32_s16(const kiln_quantize_params_t *params,
                                    const kiln_dims_t *input_dims, const float *input,
                                    const kiln_dims_t *output_dims, int16_t *output)
{
    if (!quantize_args_valid(params, input, input_dims, output, output_dims) ||
        params->zero_point < INT16_MIN || params->zero_point > INT16_MAX) {
        return KILN_ERR_ARG;
    }
    const int32_t count = dims_count(input_dims);
    const float scale = params->scale;
    const int32_t zero_point = params->zero_point;
    for (int32_t i = 0; i < count; ++i) {
        output[i] = (int16_t)quantize_value(input[i], scale, zero_point, INT16_MIN, INT16_MAX);
    }
    return KILN_OK;
}

kiln_status_t kiln_dequantize_s8_f32(const kiln_quantize_params_t *params,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *output_dims, float *output)
{
    if (!quantize_args_valid(params, input, input_dims, output, output_dims) ||
        params->zero_point < INT8_MIN || params->zero_point > INT8_MAX) {
        return KILN_ERR_ARG;
    }
    const int32_t count = dims_count(input_dims);
    const float scale = params->scale;
    const int32_t zero_point = params->zero_point;
    for (int32_t i = 0; i < count; ++i) {
        output[i] = scale * (float)(input[i] - zero_point);
    }
    return KILN_OK;
}

kiln_status_t kiln_dequantize_s16_f32(const kiln_quantize_params_t *params,
                                      const kiln_dims_t *input_dims, const int16_t *input,
                                      const kiln_dims_t *output_dims, float *output)
{
    if (!quantize_args_valid(params, input, input_dims, output, output_dims) ||
        params->zero_point < INT16_MIN || params->zero_point > INT16_MAX) {
        return KILN_ERR_ARG;
    }
    const int32_t count = dims_count(input_dims);
    const float scale = params->scale;
    const int32_t zero_point = params->zero_point;
    for (int32_t i = 0; i < count; ++i) {
        output[i] = scale * (float)(input[i] - zero_point);
    }
    return KILN_OK;
}

kiln_status_t kiln_lut_s8_s16(const kiln_lut_s16_params_t *params,
                              const kiln_dims_t *input_dims, const int8_t *input,
                              const kiln_dims_t *output_dims, int16_t *output)
{
    const int32_t count = dims_count(input_dims);
    if (params == NULL || params->table == NULL || input == NULL || output == NULL ||
        count < 0 || count != dims_count(output_dims)) {
        return KILN_ERR_ARG;
    }
    const int16_t *table = params->table + 128;
    for (int32_t i = 0; i < count; ++i) {
        output[i] = table[input[i]];
    }
    return KILN_OK;
}

/* --- int16 requantization ------------------------------------------------------- */

/* One value of TFLM's Requantize, before the clamp to the output type. The
 * offset is added with int32 wrap-around, as TFLite's int32 addition. */
static inline int32_t requantize_value(int32_t x, const kiln_requantize_params_t *p)
{
    const int32_t r = kiln_requantize(x + p->input_offset, p->requant.multiplier,
                                      p->requant.shift);
    return (int32_t)((uint32_t)r + (uint32_t)p->output_offset);
}

static int requantize_args_valid(const kiln_requantize_params_t *params, const void *input,
                                 const kiln_dims_t *input_dims, const void *output,
                                 const kiln_dims_t *output_dims)
{
    const int32_t count = dims_count(input_dims);
    return params != NULL && input != NULL && output != NULL && count >= 0 &&
           count == dims_count(output_dims) && params->requant.shift >= -31 &&
           params->requant.shift <= 30 && params->input_offset >= -32767 &&
           params->input_offset <= 32768;
}

#define KILN_REQUANTIZE_S16(name, T, LO, HI)                                              \
    kiln_status_t name(const kiln_requantize_params_t *params,                          \
                       const kiln_dims_t *input_dims, const int16_t *input,             \
                       const kiln_dims_t *output_dims, T *output)                       \
    {                                                                                    \
        if (!requantize_args_valid(params, input, input_dims, output, output_dims)) {   \
            return KILN_ERR_ARG;                                                         \
        }                                                                                \
        const int32_t count = dims_count(input_dims);                                    \
        for (int32_t i = 0; i < count; ++i) {                                            \
            output[i] = (T)kiln_clamp(requantize_value(input[i], params), LO, HI);       \
        }                                                                                \
        return KILN_OK;                                                                  \
    }

KILN_REQUANTIZE_S16(kiln_requantize_s16_s8, int8_t, INT8_MIN, INT8_MAX)
KILN_REQUANTIZE_S16(kiln_requantize_s16_s16, int16_t, INT16_MIN, INT16_MAX)
KILN_REQUANTIZE_S16(kiln_requantize_s16_s32, int32_t, INT32_MIN, INT32_MAX)
