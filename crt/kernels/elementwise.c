/*
 * elementwise.c - int8 ADD, SUB, MUL, MAXIMUM, MINIMUM and int16 ADD, SUB, MUL,
 * with broadcasting.
 *
 * Each op is a "row" function over a contiguous run of the output, reading
 * each input either elementwise (step 1) or as one broadcast scalar (step 0).
 * kiln_broadcast_rows() (broadcast.h) walks the outer n, h, w dims and calls the row function
 * once per run of c, or once for the whole tensor when nothing broadcasts.
 */
#include "elementwise.h"

#include "broadcast.h"
#include "kiln_math.h"

/* --- ADD / SUB ------------------------------------------------------------------ */

/* TFLite's MultiplyByQuantizedMultiplierSmallerThanOneExp: shift <= 0. */
static inline int32_t requant_below_one(int32_t x, int32_t multiplier, int32_t shift)
{
    return kiln_rounding_divide_by_pot(kiln_sat_rounding_doubling_high_mul(x, multiplier), -shift);
}

/* An input on the common scale. int8: |x + offset| <= 255, so with left_shift
 * <= 22 the shifted value stays below 2^30. int16 (offset 0, TFLM's symmetric
 * int16): |x| <= 2^15 and left_shift <= 15 (TFLM uses 15) keep it within 2^30.
 * The multiplier is below one, so the result is no larger, and the sum of two
 * fits int32. */
static inline int32_t add_input(int32_t x, int32_t offset, int32_t left_shift, kiln_requant_t r)
{
    return requant_below_one((x + offset) * (1 << left_shift), r.multiplier, r.shift);
}

/* The sum (or difference) of two values below 2^30 in magnitude fits int32. */
static inline int32_t add_output(int32_t raw, const kiln_add_params_t *p, int32_t lo,
                                 int32_t hi)
{
    const int32_t y = requant_below_one(raw, p->output.multiplier, p->output.shift) +
                      p->output_offset;
    return kiln_clamp(y, lo, hi);
}

/* One row of ADD (sign = +1) or SUB (sign = -1) over elements of type T: a - b
 * == a + (-b) exactly, as both are computed the same way before the sum. The
 * scalar side of a broadcast row is rescaled once. */
#define KILN_ADDSUB_ROW(name, T)                                                          \
    static inline void name(const kiln_add_params_t *p, const T *a, int32_t a_step,       \
                            const T *b, int32_t b_step, T *out, int32_t len,             \
                            int32_t sign, int32_t lo, int32_t hi)                        \
    {                                                                                     \
        const int32_t off1 = p->input1_offset;                                            \
        const int32_t off2 = p->input2_offset;                                            \
        const int32_t shift = p->left_shift;                                              \
        const kiln_requant_t r1 = p->input1;                                              \
        const kiln_requant_t r2 = p->input2;                                              \
        if (a_step != 0 && b_step != 0) {                                                 \
            for (int32_t i = 0; i < len; ++i) {                                           \
                const int32_t sa = add_input(a[i], off1, shift, r1);                      \
                const int32_t sb = add_input(b[i], off2, shift, r2);                      \
                out[i] = (T)add_output(sa + sign * sb, p, lo, hi);                        \
            }                                                                             \
        } else if (a_step == 0) {                                                         \
            const int32_t sa = add_input(a[0], off1, shift, r1);                          \
            for (int32_t i = 0; i < len; ++i) {                                           \
                const int32_t sb = add_input(b[i * b_step], off2, shift, r2);             \
                out[i] = (T)add_output(sa + sign * sb, p, lo, hi);                        \
            }                                                                             \
        } else {                                                                          \
            const int32_t sb = sign * add_input(b[0], off2, shift, r2);                   \
            for (int32_t i = 0; i < len; ++i) {                                           \
                out[i] = (T)add_output(add_input(a[i], off1, shift, r1) + sb, p, lo, hi); \
            }                                                                             \
        }                                                                                 \
    }

KILN_ADDSUB_ROW(addsub_row_s8, int8_t)
KILN_ADDSUB_ROW(addsub_row_s16, int16_t)

/* The activation clamp, further limited to the element type (a caller's range
 * wider than the type cannot make a store wrap). */
static void add_row(const void *params, const void *a, int32_t a_step, const void *b,
                    int32_t b_step, void *out, int32_t len)
{
    const kiln_add_params_t *p = (const kiln_add_params_t *)params;
    addsub_row_s8(p, (const int8_t *)a, a_step, (const int8_t *)b, b_step, (int8_t *)out,
                  len, 1, kiln_max_i32(p->activation.min, INT8_MIN),
                  kiln_min_i32(p->activation.max, INT8_MAX));
}

static void sub_row(const void *params, const void *a, int32_t a_step, const void *b,
                    int32_t b_step, void *out, int32_t len)
{
    const kiln_add_params_t *p = (const kiln_add_params_t *)params;
    addsub_row_s8(p, (const int8_t *)a, a_step, (const int8_t *)b, b_step, (int8_t *)out,
                  len, -1, kiln_max_i32(p->activation.min, INT8_MIN),
                  kiln_min_i32(p->activation.max, INT8_MAX));
}

static void add_row_s16(const void *params, const void *a, int32_t a_step, const void *b,
                        int32_t b_step, void *out, int32_t len)
{
    const kiln_add_params_t *p = (const kiln_add_params_t *)params;
    addsub_row_s16(p, (const int16_t *)a, a_step, (const int16_t *)b, b_step,
                   (int16_t *)out, len, 1, kiln_max_i32(p->activation.min, INT16_MIN),
                   kiln_min_i32(p->activation.max, INT16_MAX));
}

static void sub_row_s16(const void *params, const void *a, int32_t a_step, const void *b,
                        int32_t b_step, void *out, int32_t len)
{
    const kiln_add_params_t *p = (const kiln_add_params_t *)params;
    addsub_row_s16(p, (const int16_t *)a, a_step, (const int16_t *)b, b_step,
                   (int16_t *)out, len, -1, kiln_max_i32(p->activation.min, INT16_MIN),
                   kiln_min_i32(p->activation.max, INT16_MAX));
}

static int add_params_valid(const kiln_add_params_t *p)
{
    return p != NULL && p->left_shift >= 0 && p->left_shift <= 22 &&
           p->input1_offset >= -127 && p->input1_offset <= 128 &&
           p->input2_offset >= -127 && p->input2_offset <= 128 &&
           p->input1.shift <= 0 && p->input1.shift >= -31 &&
           p->input2.shift <= 0 && p->input2.shift >= -31 &&
           p->output.shift <= 0 && p->output.shift >= -31 &&
           p->activation.min <= p->activation.max;
}

/* int16: symmetric inputs (offset 0), left_shift <= 15: |x| << 15 <= 2^30. */
static int add_params_valid_s16(const kiln_add_params_t *p)
{
    return p != NULL && p->left_shift >= 0 && p->left_shift <= 15 &&
           p->input1_offset == 0 && p->input2_offset == 0 &&
           p->input1.shift <= 0 && p->input1.shift >= -31 &&
           p->input2.shift <= 0 && p->input2.shift >= -31 &&
           p->output.shift <= 0 && p->output.shift >= -31 &&
           p->activation.min <= p->activation.max;
}

kiln_status_t kiln_add_s8(const kiln_add_params_t *params,
                          const kiln_dims_t *input1_dims, const int8_t *input1,
                          const kiln_dims_t *input2_dims, const int8_t *input2,
                          const kiln_dims_t *output_dims, int8_t *output)
{
    if (!add_params_valid(params)) {
        return KILN_ERR_ARG;
    }
    return kiln_broadcast_rows(params, 1, input1_dims, input1, input2_dims, input2,
                               output_dims, output, add_row);
}

kiln_status_t kiln_sub_s8(const kiln_add_params_t *params,
                          const kiln_dims_t *input1_dims, const int8_t *input1,
                          const kiln_dims_t *input2_dims, const int8_t *input2,
                          const kiln_dims_t *output_dims, int8_t *output)
{
    if (!add_params_valid(params)) {
        return KILN_ERR_ARG;
    }
    return kiln_broadcast_rows(params, 1, input1_dims, input1, input2_dims, input2,
                               output_dims, output, sub_row);
}

kiln_status_t kiln_add_s16(const kiln_add_params_t *params,
                           const kiln_dims_t *input1_dims, const int16_t *input1,
                           const kiln_dims_t *input2_dims, const int16_t *input2,
                           const kiln_dims_t *output_dims, int16_t *output)
{
    if (!add_params_valid_s16(params)) {
        return KILN_ERR_ARG;
    }
    return kiln_broadcast_rows(params, 2, input1_dims, input1, input2_dims, input2,
                               output_dims, output, add_row_s16);
}

kiln_status_t kiln_sub_s16(const kiln_add_params_t *params,
                           const kiln_dims_t *input1_dims, const int16_t *input1,
                           const kiln_dims_t *input2_dims, const int16_t *input2,
                           const kiln_dims_t *output_dims, int16_t *output)
{
    if (!add_params_valid_s16(params)) {
        return KILN_ERR_ARG;
    }
    return kiln_broadcast_rows(params, 2, input1_dims, input1, input2_dims, input2,
                               output_dims, output, sub_row_s16);
}

kiln_status_t kiln_add_lut_table_s8(const kiln_add_lut_table_params_t *params, int32_t *table)
{
    /* The bounds keep every entry below 2^30 in magnitude, as the add needs: |x << 20|
     * <= 2^28, the multiplier below one, and |shifted_term| <= 128 << 19. */
    if (params == NULL || table == NULL || ((uintptr_t)table & 3u) != 0 ||
        (params->sign != 1 && params->sign != -1) || params->input.multiplier < 0 ||
        params->input.shift > 0 || params->input.shift < -31 ||
        params->input_offset < -127 || params->input_offset > 128 ||
        params->shifted_term < -(128 << 19) || params->shifted_term > (128 << 19)) {
        return KILN_ERR_ARG;
    }
    for (int32_t i = 0; i < 256; ++i) {
        const int32_t x = (i - 128 + params->input_offset) * (1 << 20);
        table[i] = params->sign * kiln_requantize(x, params->input.multiplier,
                                                  params->input.shift) -
                   params->shifted_term;
    }
    return KILN_OK;
}

/* One row of kiln_add_lut_s8; on whole rows the shifted input's sign is fixed at
 * compile time, so that its shift folds into the addition (or subtraction). */
static inline void add_lut_elements(const kiln_add_lut_params_t *p, const int32_t *table,
                                    const int8_t *u, int32_t u_step,
                                    const int8_t *v, int32_t v_step,
                                    int8_t *out, int32_t len, int32_t sign, int full_range)
{
    const int32_t multiplier = p->output.multiplier;
    const int32_t s1 = -p->output.shift - 2;       /* >= 0: add_lut_params_valid */
    const int32_t offset = p->output_offset;
    const int32_t offset2 = 2 * offset + 1;
    const int32_t lo = p->activation.min;
    const int32_t hi = p->activation.max;
    for (int8_t *const end = out + len; out != end; ++out) {
        const int32_t shifted = (int32_t)*v * (1 << 19);
        const int32_t raw = table[*u] + (sign > 0 ? shifted : -shifted);
        u += u_step;
        v += v_step;
        /* requant_below_one(raw, multiplier, shift) for shift <= -2 and a normalized
         * multiplier, as kiln_requantize_fast (conv_dsp.h, which proves it equal for
         * every int32 raw): the high word of raw * multiplier + (raw < 0 ? -2^30 : 2^30),
         * one SMLAL, then ((hi >> s1) + 1) >> 1 rounds as TFLite (kiln_output_packed). */
        const uint64_t round = ((uint64_t)(uint32_t)(raw >> 31) << 32) |
                               (((uint32_t)raw & UINT32_C(0x80000000)) | UINT32_C(0x40000000));
        const int64_t product = (int64_t)raw * multiplier + (int64_t)round;
        const int32_t top = (int32_t)(product >> 32) >> s1;
#if defined(__ARM_FEATURE_DSP)
        if (full_range) {
            /* floor((top + 1) / 2) + offset = floor((top + 2 * offset + 1) / 2), and the
             * clamp to [-128, 127] is SSAT, which halves first (kiln_output_packed_hi);
             * |top| < 2^30, so the sum fits. */
            int32_t y;
            __asm__("ssat %0, #8, %1, asr #1" : "=r"(y) : "r"(top + offset2));
            *out = (int8_t)y;
            continue;
        }
#else
        (void)full_range;
        (void)offset2;
#endif
        *out = (int8_t)kiln_clamp(((top + 1) >> 1) + offset, lo, hi);
    }
}

/* A row of kiln_add_lut_s8 where both inputs are whole rows (steps of one). */
static void add_lut_whole(const kiln_add_lut_params_t *p, const int8_t *a, const int8_t *b,
                          int8_t *out, int32_t len)
{
    const int32_t *table = p->table + 128;
    const int shifted_first = p->shifted_input == 1;
    const int8_t *u = shifted_first ? b : a;
    const int8_t *v = shifted_first ? a : b;
    if (p->shifted_sign > 0) {
#if defined(__ARM_FEATURE_DSP)
        if (p->activation.min == -128 && p->activation.max == 127) {   /* ADD, no clamp */
            add_lut_elements(p, table, u, 1, v, 1, out, len, 1, 1);
            return;
        }
#endif
        add_lut_elements(p, table, u, 1, v, 1, out, len, 1, 0);
    } else {
        add_lut_elements(p, table, u, 1, v, 1, out, len, -1, 0);
    }
}

static void add_lut_row(const void *params, const void *a_row, int32_t a_step,
                        const void *b_row, int32_t b_step, void *out_row, int32_t len)
{
    const kiln_add_lut_params_t *p = (const kiln_add_lut_params_t *)params;
    if (a_step != 0 && b_step != 0) {
        add_lut_whole(p, (const int8_t *)a_row, (const int8_t *)b_row, (int8_t *)out_row, len);
        return;
    }
    /* A broadcast input: the rarer case, one loop for either sign. */
    const int shifted_first = p->shifted_input == 1;
    const int8_t *u = (const int8_t *)(shifted_first ? b_row : a_row);
    const int8_t *v = (const int8_t *)(shifted_first ? a_row : b_row);
    add_lut_elements(p, p->table + 128, u, shifted_first ? b_step : a_step, v,
                     shifted_first ? a_step : b_step, (int8_t *)out_row, len, p->shifted_sign,
                     0);
}

static int add_lut_params_valid(const kiln_add_lut_params_t *params)
{
    return params != NULL && params->table != NULL &&
           (params->shifted_input == 1 || params->shifted_input == 2) &&
           (params->shifted_sign == 1 || params->shifted_sign == -1) &&
           params->output.shift <= -2 && params->output.shift >= -31 &&
           params->output.multiplier >= (INT32_C(1) << 30) &&
           params->activation.min <= params->activation.max;
}

kiln_status_t kiln_add_lut_s8(const kiln_add_lut_params_t *params,
                              const kiln_dims_t *input1_dims, const int8_t *input1,
                              const kiln_dims_t *input2_dims, const int8_t *input2,
                              const kiln_dims_t *output_dims, int8_t *output)
{
    if (!add_lut_params_valid(params)) {
        return KILN_ERR_ARG;
    }
    return kiln_broadcast_rows(params, 1, input1_dims, input1, input2_dims, input2,
                               output_dims, output, add_lut_row);
}

static int same_dims(const kiln_dims_t *a, const kiln_dims_t *b)
{
    return a->n == b->n && a->h == b->h && a->w == b->w && a->c == b->c;
}

kiln_status_t kiln_add_lut_same_s8(const kiln_add_lut_params_t *params,
                                   const kiln_dims_t *input1_dims, const int8_t *input1,
                                   const kiln_dims_t *input2_dims, const int8_t *input2,
                                   const kiln_dims_t *output_dims, int8_t *output)
{
    if (!add_lut_params_valid(params) || input1 == NULL || input2 == NULL || output == NULL ||
        input1_dims == NULL || input2_dims == NULL || output_dims == NULL ||
        !same_dims(input1_dims, output_dims) || !same_dims(input2_dims, output_dims) ||
        output_dims->n < 1 || output_dims->h < 1 || output_dims->w < 1 || output_dims->c < 1) {
        return KILN_ERR_ARG;
    }
    const int64_t count = (int64_t)output_dims->n * output_dims->h * output_dims->w *
                          output_dims->c;
    if (count > INT32_MAX) {
        return KILN_ERR_ARG;
    }
    add_lut_whole(params, input1, input2, output, (int32_t)count);
    return KILN_OK;
}

/* --- MUL ------------------------------------------------------------------------ */

/* int8: |(x1 + off1) * (x2 + off2)| <= 255 * 255 < 2^16; int16 (offsets 0):
 * |x1 * x2| <= 2^30. Either product fits int32. kiln_requantize with its shift
 * split hoisted out of the loop: a positive shift is applied before the
 * multiply with TFLite's int32 wrap-around. */
typedef struct {
    int32_t multiplier;
    int32_t left_shift;
    int32_t right_shift;
    int32_t offset;
    int32_t lo;
    int32_t hi;
} mul_out_t;

static inline int32_t mul_output(int32_t product, const mul_out_t *q)
{
    const int32_t shifted = (int32_t)((uint32_t)product << q->left_shift);
    const int32_t y = kiln_rounding_divide_by_pot(
        kiln_sat_rounding_doubling_high_mul(shifted, q->multiplier), q->right_shift) + q->offset;
    return kiln_clamp(y, q->lo, q->hi);
}

/* The output stage of a MUL, its clamp limited to the element range [lo, hi]. */
static mul_out_t mul_out(const kiln_mul_params_t *p, int32_t lo, int32_t hi)
{
    const mul_out_t q = {p->output.multiplier, p->output.shift > 0 ? p->output.shift : 0,
                         p->output.shift > 0 ? 0 : -p->output.shift, p->output_offset,
                         kiln_max_i32(p->activation.min, lo),
                         kiln_min_i32(p->activation.max, hi)};
    return q;
}

#define KILN_MUL_ROW(name, T, LO, HI)                                                     \
    static void name(const void *params, const void *a_row, int32_t a_step,              \
                     const void *b_row, int32_t b_step, void *out_row, int32_t len)      \
    {                                                                                     \
        const kiln_mul_params_t *p = (const kiln_mul_params_t *)params;                   \
        const T *a = (const T *)a_row;                                                    \
        const T *b = (const T *)b_row;                                                    \
        T *out = (T *)out_row;                                                            \
        const mul_out_t q = mul_out(p, LO, HI);                                           \
        const int32_t off1 = p->input1_offset;                                            \
        const int32_t off2 = p->input2_offset;                                            \
        if (a_step != 0 && b_step != 0) {                                                 \
            for (int32_t i = 0; i < len; ++i) {                                           \
                out[i] = (T)mul_output((a[i] + off1) * (b[i] + off2), &q);                \
            }                                                                             \
        } else if (a_step == 0) {                                                         \
            const int32_t va = a[0] + off1;                                               \
            for (int32_t i = 0; i < len; ++i) {                                           \
                out[i] = (T)mul_output(va * (b[i * b_step] + off2), &q);                  \
            }                                                                             \
        } else {                                                                          \
            const int32_t vb = b[0] + off2;                                               \
            for (int32_t i = 0; i < len; ++i) {                                           \
                out[i] = (T)mul_output((a[i] + off1) * vb, &q);                           \
            }                                                                             \
        }                                                                                 \
    }

KILN_MUL_ROW(mul_row, int8_t, INT8_MIN, INT8_MAX)
KILN_MUL_ROW(mul_row_s16, int16_t, INT16_MIN, INT16_MAX)

kiln_status_t kiln_mul_s8(const kiln_mul_params_t *params,
                          const kiln_dims_t *input1_dims, const int8_t *input1,
                          const kiln_dims_t *input2_dims, const int8_t *input2,
                          const kiln_dims_t *output_dims, int8_t *output)
{
    if (params == NULL || params->output.shift < -31 || params->output.shift > 30 ||
        params->input1_offset < -127 || params->input1_offset > 128 ||
        params->input2_offset < -127 || params->input2_offset > 128 ||
        params->activation.min > params->activation.max) {
        return KILN_ERR_ARG;
    }
    return kiln_broadcast_rows(params, 1, input1_dims, input1, input2_dims, input2,
                               output_dims, output, mul_row);
}

kiln_status_t kiln_mul_s16(const kiln_mul_params_t *params,
                           const kiln_dims_t *input1_dims, const int16_t *input1,
                           const kiln_dims_t *input2_dims, const int16_t *input2,
                           const kiln_dims_t *output_dims, int16_t *output)
{
    if (params == NULL || params->output.shift < -31 || params->output.shift > 30 ||
        params->input1_offset != 0 || params->input2_offset != 0 ||
        params->activation.min > params->activation.max) {
        return KILN_ERR_ARG;
    }
    return kiln_broadcast_rows(params, 2, input1_dims, input1, input2_dims, input2,
                               output_dims, output, mul_row_s16);
}

/* --- MAXIMUM / MINIMUM --------------------------------------------------------------- */

static void maximum_row(const void *params, const void *a_row, int32_t a_step,
                        const void *b_row, int32_t b_step, void *out_row, int32_t len)
{
    const int8_t *a = (const int8_t *)a_row;
    const int8_t *b = (const int8_t *)b_row;
    int8_t *out = (int8_t *)out_row;
    (void)params;
    for (int32_t i = 0; i < len; ++i) {
        const int8_t x = a[i * a_step];
        const int8_t y = b[i * b_step];
        out[i] = x > y ? x : y;
    }
}

static void minimum_row(const void *params, const void *a_row, int32_t a_step,
                        const void *b_row, int32_t b_step, void *out_row, int32_t len)
{
    const int8_t *a = (const int8_t *)a_row;
    const int8_t *b = (const int8_t *)b_row;
    int8_t *out = (int8_t *)out_row;
    (void)params;
    for (int32_t i = 0; i < len; ++i) {
        const int8_t x = a[i * a_step];
        const int8_t y = b[i * b_step];
        out[i] = x < y ? x : y;
    }
}

kiln_status_t kiln_maximum_s8(const kiln_dims_t *input1_dims, const int8_t *input1,
                              const kiln_dims_t *input2_dims, const int8_t *input2,
                              const kiln_dims_t *output_dims, int8_t *output)
{
    return kiln_broadcast_rows(NULL, 1, input1_dims, input1, input2_dims, input2,
                               output_dims, output, maximum_row);
}

static void maximum_row_s16(const void *params, const void *a_row, int32_t a_step,
                            const void *b_row, int32_t b_step, void *out_row, int32_t len)
{
    const int16_t *a = (const int16_t *)a_row;
    const int16_t *b = (const int16_t *)b_row;
    int16_t *out = (int16_t *)out_row;
    (void)params;
    for (int32_t i = 0; i < len; ++i) {
        const int16_t x = a[i * a_step];
        const int16_t y = b[i * b_step];
        out[i] = x > y ? x : y;
    }
}

kiln_status_t kiln_maximum_s16(const kiln_dims_t *input1_dims, const int16_t *input1,
                               const kiln_dims_t *input2_dims, const int16_t *input2,
                               const kiln_dims_t *output_dims, int16_t *output)
{
    return kiln_broadcast_rows(NULL, 2, input1_dims, input1, input2_dims, input2,
                               output_dims, output, maximum_row_s16);
}

kiln_status_t kiln_minimum_s8(const kiln_dims_t *input1_dims, const int8_t *input1,
                              const kiln_dims_t *input2_dims, const int8_t *input2,
                              const kiln_dims_t *output_dims, int8_t *output)
{
    return kiln_broadcast_rows(NULL, 1, input1_dims, input1, input2_dims, input2,
                               output_dims, output, minimum_row);
}

static void minimum_row_s16(const void *params, const void *a_row, int32_t a_step,
                            const void *b_row, int32_t b_step, void *out_row, int32_t len)
{
    const int16_t *a = (const int16_t *)a_row;
    const int16_t *b = (const int16_t *)b_row;
    int16_t *out = (int16_t *)out_row;
    (void)params;
    for (int32_t i = 0; i < len; ++i) {
        const int16_t x = a[i * a_step];
        const int16_t y = b[i * b_step];
        out[i] = x < y ? x : y;
    }
}

kiln_status_t kiln_minimum_s16(const kiln_dims_t *input1_dims, const int16_t *input1,
                               const kiln_dims_t *input2_dims, const int16_t *input2,
                               const kiln_dims_t *output_dims, int16_t *output)
{
    return kiln_broadcast_rows(NULL, 2, input1_dims, input1, input2_dims, input2,
                               output_dims, output, minimum_row_s16);
}
