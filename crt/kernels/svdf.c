/*
 * svdf.c - int8 SVDF with int16 or int8 state (see svdf.h).
 *
 * Loop order: one pass over the filters. For each, the newest memory value is
 * computed, then the filter's memory row moves one place towards its start
 * while it is reduced with the time weights (one load, one store and one
 * multiply-accumulate per element), and a unit's rank filters are summed
 * straight into its accumulator: no scratch, no separate shift. TFLite shifts
 * the whole state buffer by one element instead; the element that crosses into
 * the previous row lands in its last slot, which the newest value overwrites,
 * so the two agree. The results equal TFLite's separate feature, time and
 * reduce passes because every sum is taken modulo 2^32 (unsigned arithmetic,
 * defined in C), where the order of additions does not matter.
 *
 * Where a SIMD variant would pay: the feature dot (I multiply-accumulates per
 * filter, int8 x int8, SMLAD after SXTB16 as conv's DSP kernels do) and the
 * time dot (M per filter, int16 x int16: SMLAD on pairs directly) are the
 * whole cost; a DSP build could process two filters per pass.
 */
#include "svdf.h"

#include "kiln_math.h"

/* A sum taken modulo 2^32 back to int32_t, without relying on the
 * implementation-defined conversion of an out-of-range unsigned value. */
static inline int32_t wrap_i32(uint32_t x)
{
    return x <= (uint32_t)INT32_MAX ? (int32_t)x : -(int32_t)(~x) - 1;
}

/* The state types' two's complement narrowing of an int32 (TFLite's store). */
static inline int16_t wrap_i16(int32_t x)
{
    const int32_t low = (int32_t)((uint32_t)x & 0xFFFFu);
    return (int16_t)(low > INT16_MAX ? low - 0x10000 : low);
}

static inline int8_t wrap_i8(int32_t x)
{
    const int32_t low = (int32_t)((uint32_t)x & 0xFFu);
    return (int8_t)(low > INT8_MAX ? low - 0x100 : low);
}

/* sum_i w[i] * (x[i] - zp): each product is within +-128 * 255, the sum mod 2^32. */
static int32_t feature_dot(const int8_t *x, const int8_t *w, int32_t n, int32_t zp)
{
    uint32_t acc = 0;
    for (int32_t i = 0; i < n; ++i) {
        acc += (uint32_t)((int32_t)w[i] * ((int32_t)x[i] - zp));
    }
    return wrap_i32(acc);
}

/* The feature result requantized into the state's scale and clamped to the
 * state type's range [lo, hi]; the zero point is added after the clamp and may
 * wrap when narrowed, as in tflite-micro (only a non-zero state zero point,
 * which TF's converter never writes for int16 state, can make it wrap). */
static int32_t state_value(int32_t dot, const kiln_svdf_params_t *p, int32_t lo, int32_t hi)
{
    const int32_t scaled = kiln_requantize(dot, p->feature_requant.multiplier,
                                           p->feature_requant.shift);
    return kiln_clamp(scaled, lo, hi) + p->state_zero_point;
}

static int8_t output_value(uint32_t acc, const kiln_svdf_params_t *p)
{
    const int32_t scaled = kiln_requantize(wrap_i32(acc), p->output_requant.multiplier,
                                           p->output_requant.shift);
    return (int8_t)kiln_clamp(scaled + p->output_zero_point, -128, 127);
}

/* Dimensions >= 1, filters a multiple of rank, the state's element count
 * within int32 (the compiler proves it; a hand-written call is checked), and
 * the zero points within their types. */
static kiln_status_t check_params(const kiln_svdf_params_t *p, int32_t state_min,
                                  int32_t state_max)
{
    if (p->batches < 1 || p->input_size < 1 || p->filters < 1 || p->memory_size < 1 ||
        p->rank < 1 || p->filters % p->rank != 0) {
        return KILN_ERR_ARG;
    }
    if ((int64_t)p->batches * p->filters * p->memory_size > INT32_MAX ||
        (int64_t)p->batches * p->input_size > INT32_MAX ||
        (int64_t)p->filters * p->input_size > INT32_MAX) {
        return KILN_ERR_ARG;
    }
    if (p->input_zero_point < -128 || p->input_zero_point > 127 ||
        p->output_zero_point < -128 || p->output_zero_point > 127 ||
        p->state_zero_point < state_min || p->state_zero_point > state_max) {
        return KILN_ERR_ARG;
    }
    return KILN_OK;
}

/* One time step over state (and time weights) of type T: the newest value is
 * clamped to [LO, HI], its zero point added, and narrowed by WRAP. */
#define KILN_SVDF_STEP(name, T, LO, HI, WRAP)                                              \
    kiln_status_t name(const kiln_svdf_params_t *params, const int8_t *input,            \
                       const int8_t *weights_feature, const T *weights_time,             \
                       const int32_t *bias, T *state, int8_t *output)                    \
    {                                                                                    \
        if (params == NULL || input == NULL || weights_feature == NULL ||                \
            weights_time == NULL || state == NULL || output == NULL ||                   \
            check_params(params, LO, HI) != KILN_OK) {                                   \
            return KILN_ERR_ARG;                                                         \
        }                                                                                \
        const int32_t n_in = params->input_size, n_mem = params->memory_size;            \
        const int32_t rank = params->rank, units = params->filters / rank;               \
        const int32_t in_zp = params->input_zero_point;                                  \
        const int32_t state_zp = params->state_zero_point;                               \
        for (int32_t b = 0; b < params->batches; ++b) {                                 \
            const int8_t *x = input + b * n_in;                                          \
            T *state_b = state + b * params->filters * n_mem;                            \
            for (int32_t u = 0; u < units; ++u) {                                        \
                uint32_t acc = bias != NULL ? (uint32_t)bias[u] : 0u;                    \
                for (int32_t r = 0; r < rank; ++r) {                                     \
                    const int32_t f = u * rank + r;                                      \
                    T *row = state_b + f * n_mem;                                        \
                    const T *wt = weights_time + f * n_mem;                              \
                    /* 2. Filter f's newest memory value. */                             \
                    const int32_t dot = feature_dot(x, weights_feature + f * n_in, n_in, \
                                                    in_zp);                              \
                    const T newest = WRAP(state_value(dot, params, LO, HI));             \
                    /* 1 and 3. The row moves one place towards its start as it is     \
                     * reduced with the time weights: |w| <= 2^15 and |state - zp| <=   \
                     * 2^16 - 1, so each product fits in int32. */                       \
                    for (int32_t m = 0; m < n_mem - 1; ++m) {                            \
                        const T older = row[m + 1];                                      \
                        row[m] = older;                                                  \
                        acc += (uint32_t)((int32_t)wt[m] * ((int32_t)older - state_zp)); \
                    }                                                                    \
                    row[n_mem - 1] = newest;                                             \
                    acc += (uint32_t)((int32_t)wt[n_mem - 1] *                           \
                                      ((int32_t)newest - state_zp));                     \
                }                                                                        \
                /* 4. The unit's rank filters (and bias) to the output. */               \
                output[b * units + u] = output_value(acc, params);                      \
            }                                                                            \
        }                                                                                \
        return KILN_OK;                                                                  \
    }

KILN_SVDF_STEP(kiln_svdf_s8_state_s16, int16_t, INT16_MIN, INT16_MAX, wrap_i16)
KILN_SVDF_STEP(kiln_svdf_s8_state_s8, int8_t, INT8_MIN, INT8_MAX, wrap_i8)
