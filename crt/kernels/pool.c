/*
 * pool.c - int8 and int16 AVERAGE_POOL_2D and MAX_POOL_2D (see pool.h).
 *
 * Both kernels walk the output pixels and, for each, reduce the clipped
 * window over a block of channels held in a small local array: the inner loop
 * runs over contiguous channels of one input pixel (a constant trip count for
 * full blocks, which compilers unroll or vectorise), and the local array
 * cannot alias the output. The average divides by multiplication.
 */
#include <string.h>

#include "pool.h"

#include "kiln_math.h"

/* Channels reduced together; the accumulators live on the stack (128 bytes). */
#define KILN_POOL_BLOCK 32

/* Largest window (pool.h): |sum| + count / 2 < 2^24 (int8) or 2^31 (int16) for the
 * exact division below. */
#define KILN_POOL_MAX_WINDOW (INT32_C(1) << 16)
#define KILN_POOL_MAX_WINDOW_S16 (INT32_C(1) << 15)

/* Division by a window count without a divide per element: for 0 <= a < 2^32
 * and 1 <= d <= 2^l, m = ceil(2^(32 + l) / d) gives (a * m) >> (32 + l) ==
 * floor(a / d) exactly (the error m * d - 2^(32 + l) is below d <= 2^l, so it
 * adds less than a / (d * 2^32) < 1 / d; Granlund & Montgomery 1994). With
 * a < 2^31 and m <= 2^33 the product fits in 64 bits. */
typedef struct {
    uint64_t multiplier;
    int32_t shift;
    int32_t divisor;
} pool_divisor_t;

/* floor(n / d) for 1 <= d <= 2^16 by long division in 16-bit digits: a remainder below
 * d times 2^16 plus a digit stays below 2^32, so 32-bit divides suffice, and the
 * firmware needs no 64-bit division from libgcc (about 750 B of flash). */
static uint64_t div_u64_small(uint64_t n, uint32_t d)
{
    uint64_t q = 0;
    uint32_t r = 0;
    for (int32_t shift = 48; shift >= 0; shift -= 16) {
        const uint32_t cur = (r << 16) | (uint32_t)((n >> shift) & 0xFFFFu);
        q = (q << 16) | (cur / d);
        r = cur % d;
    }
    return q;
}

static pool_divisor_t make_divisor(int32_t d)
{
    int32_t l = 0;
    while ((INT32_C(1) << l) < d) {
        ++l;
    }
    /* d <= KILN_POOL_MAX_WINDOW = 2^16 (check_args) */
    const uint64_t power = UINT64_C(1) << (32 + l);
    const pool_divisor_t r = {div_u64_small(power + (uint64_t)d - 1, (uint32_t)d), 32 + l, d};
    return r;
}

/* sum / count rounded half away from zero, as TFLite's integer average pool
 * ((sum +- count / 2) / count with C's truncating division): the magnitude is
 * floor((|sum| + count / 2) / count), the sign the sum's. */
static int32_t rounded_average(int32_t sum, const pool_divisor_t *count)
{
    const uint32_t a = (uint32_t)(sum < 0 ? -sum : sum) + (uint32_t)(count->divisor / 2);
    const int32_t q = (int32_t)(((uint64_t)a * count->multiplier) >> count->shift);
    return sum > 0 ? q : -q;
}

/* The rows [*first, *last) of a window starting at `origin` that fall inside
 * [0, size); empty (first >= last) when the window misses the input. */
static void clip_window(int32_t origin, int32_t filter, int32_t size,
                        int32_t *first, int32_t *last)
{
    *first = kiln_max_i32(0, -origin);
    *last = kiln_min_i32(filter, size - origin);
}

static kiln_status_t check_args(const kiln_pool_params_t *params,
                                const kiln_dims_t *input_dims, const void *input,
                                const kiln_dims_t *output_dims, const void *output,
                                int32_t type_min, int32_t type_max)
{
    if (params == NULL || input_dims == NULL || output_dims == NULL ||
        input == NULL || output == NULL) {
        return KILN_ERR_ARG;
    }
    if (params->stride.h < 1 || params->stride.w < 1 || params->filter.h < 1 ||
        params->filter.w < 1 || params->padding.h < 0 || params->padding.w < 0 ||
        params->filter.h > KILN_POOL_MAX_WINDOW / params->filter.w) {
        return KILN_ERR_ARG;
    }
    if (params->activation.min < type_min || params->activation.max > type_max ||
        params->activation.min > params->activation.max) {
        return KILN_ERR_ARG;
    }
    if (input_dims->n < 1 || input_dims->h < 1 || input_dims->w < 1 || input_dims->c < 1 ||
        output_dims->n != input_dims->n || output_dims->c != input_dims->c ||
        output_dims->h < 1 || output_dims->w < 1) {
        return KILN_ERR_ARG;
    }
    /* The window origin out * stride - padding and the clip size - origin stay in
     * int32 (the compiler's bound, codegen/bounds.py; this guards direct callers). */
    if ((int64_t)(output_dims->h - 1) * params->stride.h + params->padding.h +
            params->filter.h + input_dims->h > INT32_MAX ||
        (int64_t)(output_dims->w - 1) * params->stride.w + params->padding.w +
            params->filter.w + input_dims->w > INT32_MAX) {
        return KILN_ERR_ARG;
    }
    return KILN_OK;
}

/* The window's average as TFLite computes it, (sum +- count / 2) / count with C's
 * truncating division, then the clamp: the magnitude is (|sum| + count / 2) / count,
 * the sign the sum's. One unsigned divide an output (UDIV; on cores without one,
 * libgcc's __aeabi_uidiv, which make_divisor already needs). */
#if defined(__GNUC__)
__attribute__((noinline))      /* inlined, it costs the caller more than the call */
#endif
static int8_t global_average(int32_t sum, int32_t count, int32_t act_min, int32_t act_max)
{
    const uint32_t a = (uint32_t)(sum < 0 ? -sum : sum) + (uint32_t)(count / 2);
    const int32_t q = (int32_t)(a / (uint32_t)count);
    return (int8_t)kiln_clamp(sum > 0 ? q : -q, act_min, act_max);
}

/*
 * The sums of four neighbouring channels over n pixels `stride` bytes apart,
 * added to s[0..3]. With DSP, two words of 16-bit lanes hold them, (c0, c2) and
 * (c1, c3), each pixel's word added by two SXTAB16 (lane by lane: no carry
 * between lanes); n <= KILN_POOL_LANE_PIXELS values of magnitude <= 128 sum to
 * within [-32768, 32512], so no lane overflows. Elsewhere four int32 sums.
 */
#define KILN_POOL_LANE_PIXELS 256

#if defined(__GNUC__)
__attribute__((noinline))      /* inlined, the channel loop spills around it */
#endif
static void block_sums(const int8_t *p, int32_t count, int32_t stride, int32_t block,
                       int32_t *s)
{
    if (block < 4) {                /* the last one to three channels, one at a time */
        for (int32_t k = 0; k < block; ++k) {
            for (int32_t j = 0; j < count; ++j) {
                s[k] += p[k + j * stride];
            }
        }
        return;
    }
    while (count > 0) {
        const int32_t n = kiln_min_i32(count, KILN_POOL_LANE_PIXELS);
        const int8_t *end = p + n * stride;
#if defined(__ARM_FEATURE_DSP)
        uint32_t even = 0, odd = 0;
        for (; p != end; p += stride) {
            uint32_t v;
            memcpy(&v, p, sizeof v);    /* one LDR: the cores with DSP load unaligned words */
            __asm__("sxtab16 %0, %0, %1" : "+r"(even) : "r"(v));
            __asm__("sxtab16 %0, %0, %1, ror #8" : "+r"(odd) : "r"(v));
        }
        s[0] += (int16_t)even;
        s[1] += (int16_t)odd;
        s[2] += (int32_t)even >> 16;
        s[3] += (int32_t)odd >> 16;
#else
        for (; p != end; p += stride) {
            s[0] += p[0];
            s[1] += p[1];
            s[2] += p[2];
            s[3] += p[3];
        }
#endif
        count -= n;
    }
}

kiln_status_t kiln_avgpool_global_s8(const kiln_pool_params_t *params,
                                     const kiln_dims_t *input_dims, const int8_t *input,
                                     const kiln_dims_t *output_dims, int8_t *output)
{
    if (params == NULL || input_dims == NULL || output_dims == NULL || input == NULL ||
        output == NULL || input_dims->n < 1 || input_dims->h < 1 || input_dims->w < 1 ||
        input_dims->c < 1 || input_dims->h > KILN_POOL_MAX_WINDOW / input_dims->w ||
        output_dims->n != input_dims->n || output_dims->h != 1 || output_dims->w != 1 ||
        output_dims->c != input_dims->c || params->padding.h != 0 || params->padding.w != 0 ||
        params->filter.h < input_dims->h || params->filter.w < input_dims->w ||
        params->activation.min < INT8_MIN || params->activation.max > INT8_MAX ||
        params->activation.min > params->activation.max) {
        return KILN_ERR_ARG;
    }
    /* |sum| <= 128 * count <= 2^23: no overflow. */
    const int32_t count = input_dims->h * input_dims->w;
    const int32_t channels = input_dims->c;
    for (int32_t b = 0; b < input_dims->n; ++b) {
        for (int32_t c = 0; c < channels; c += 4) {
            const int32_t block = kiln_min_i32(channels - c, 4);
            int32_t s[4] = {0, 0, 0, 0};
            block_sums(input + c, count, channels, block, s);
            for (int32_t k = 0; k < block; ++k) {
                output[c + k] = global_average(s[k], count, params->activation.min,
                                               params->activation.max);
            }
        }
        input += (size_t)count * channels;
        output += channels;
    }
    return KILN_OK;
}

/* The two kernels for one element type T (int8_t, int16_t), NAME_s8 / NAME_s16:
 *
 * add_pixel / max_pixel: sum[j] += row[j] or max[j] = max(max[j], row[j]) for one
 * window pixel; a full block has a constant trip count, which compilers unroll
 * or vectorise.
 *
 * avgpool: |sum| <= 2^15 * count (count <= 2^16 for int8, 2^15 for int16,
 * checked below) < 2^31: no overflow, and rounded_average's a < 2^31.
 *
 * maxpool: an empty window reads nothing: its max stays the type's minimum. */
#define KILN_POOL_KERNELS(T, SUFFIX, T_MIN, T_MAX, MAX_WINDOW)                              \
    static void add_pixel_##SUFFIX(int32_t *sum, const T *row, int32_t n)                  \
    {                                                                                      \
        if (n == KILN_POOL_BLOCK) {                                                        \
            for (int32_t j = 0; j < KILN_POOL_BLOCK; ++j) {                                \
                sum[j] += row[j];                                                          \
            }                                                                              \
        } else {                                                                           \
            for (int32_t j = 0; j < n; ++j) {                                              \
                sum[j] += row[j];                                                          \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
                                                                                           \
    static void max_pixel_##SUFFIX(T *max, const T *row, int32_t n)                        \
    {                                                                                      \
        if (n == KILN_POOL_BLOCK) {                                                        \
            for (int32_t j = 0; j < KILN_POOL_BLOCK; ++j) {                                \
                max[j] = row[j] > max[j] ? row[j] : max[j];                                \
            }                                                                              \
        } else {                                                                           \
            for (int32_t j = 0; j < n; ++j) {                                              \
                max[j] = row[j] > max[j] ? row[j] : max[j];                                \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
                                                                                           \
    kiln_status_t kiln_avgpool_##SUFFIX(const kiln_pool_params_t *params,                  \
                                        const kiln_dims_t *input_dims, const T *input,     \
                                        const kiln_dims_t *output_dims, T *output)         \
    {                                                                                      \
        const kiln_status_t status =                                                       \
            check_args(params, input_dims, input, output_dims, output, T_MIN, T_MAX);      \
        if (status != KILN_OK) {                                                           \
            return status;                                                                 \
        }                                                                                  \
        if (params->filter.h > (MAX_WINDOW) / params->filter.w) {                          \
            return KILN_ERR_ARG;                                                           \
        }                                                                                  \
        const int32_t in_h = input_dims->h;                                                \
        const int32_t in_w = input_dims->w;                                                \
        const int32_t channels = input_dims->c;                                            \
        const int32_t out_h = output_dims->h;                                              \
        const int32_t out_w = output_dims->w;                                              \
        const int32_t act_min = params->activation.min;                                    \
        const int32_t act_max = params->activation.max;                                    \
        pool_divisor_t divisor = make_divisor(1);                                          \
                                                                                           \
        for (int32_t b = 0; b < input_dims->n; ++b) {                                      \
            const T *in_batch = input + (size_t)b * in_h * in_w * channels;                \
            for (int32_t out_y = 0; out_y < out_h; ++out_y) {                              \
                const int32_t in_y0 = out_y * params->stride.h - params->padding.h;        \
                int32_t ky_first, ky_last;                                                 \
                clip_window(in_y0, params->filter.h, in_h, &ky_first, &ky_last);           \
                for (int32_t out_x = 0; out_x < out_w; ++out_x) {                          \
                    const int32_t in_x0 = out_x * params->stride.w - params->padding.w;    \
                    int32_t kx_first, kx_last;                                             \
                    clip_window(in_x0, params->filter.w, in_w, &kx_first, &kx_last);       \
                    if (ky_first >= ky_last || kx_first >= kx_last) {                      \
                        return KILN_ERR_ARG; /* a window with no input: no average */      \
                    }                                                                      \
                    const int32_t count = (ky_last - ky_first) * (kx_last - kx_first);     \
                    if (count != divisor.divisor) {                                        \
                        divisor = make_divisor(count); /* changes only at the borders */   \
                    }                                                                      \
                    T *out_px = output + (((size_t)b * out_h + out_y) * out_w + out_x) *   \
                                             channels;                                     \
                    for (int32_t c0 = 0; c0 < channels; c0 += KILN_POOL_BLOCK) {           \
                        const int32_t n = kiln_min_i32(KILN_POOL_BLOCK, channels - c0);    \
                        int32_t sum[KILN_POOL_BLOCK];                                      \
                        for (int32_t j = 0; j < n; ++j) {                                  \
                            sum[j] = 0;                                                    \
                        }                                                                  \
                        for (int32_t ky = ky_first; ky < ky_last; ++ky) {                  \
                            const T *row = in_batch + ((size_t)(in_y0 + ky) * in_w +       \
                                                       (in_x0 + kx_first)) * channels + c0; \
                            for (int32_t kx = kx_first; kx < kx_last; ++kx) {              \
                                add_pixel_##SUFFIX(sum, row, n);                           \
                                row += channels;                                           \
                            }                                                              \
                        }                                                                  \
                        for (int32_t j = 0; j < n; ++j) {                                  \
                            out_px[c0 + j] = (T)kiln_clamp(rounded_average(sum[j], &divisor), \
                                                           act_min, act_max);              \
                        }                                                                  \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
        return KILN_OK;                                                                    \
    }                                                                                      \
                                                                                           \
    kiln_status_t kiln_maxpool_##SUFFIX(const kiln_pool_params_t *params,                  \
                                        const kiln_dims_t *input_dims, const T *input,     \
                                        const kiln_dims_t *output_dims, T *output)         \
    {                                                                                      \
        const kiln_status_t status =                                                       \
            check_args(params, input_dims, input, output_dims, output, T_MIN, T_MAX);      \
        if (status != KILN_OK) {                                                           \
            return status;                                                                 \
        }                                                                                  \
        const int32_t in_h = input_dims->h;                                                \
        const int32_t in_w = input_dims->w;                                                \
        const int32_t channels = input_dims->c;                                            \
        const int32_t out_h = output_dims->h;                                              \
        const int32_t out_w = output_dims->w;                                              \
        const T act_min = (T)params->activation.min;                                       \
        const T act_max = (T)params->activation.max;                                       \
                                                                                           \
        for (int32_t b = 0; b < input_dims->n; ++b) {                                      \
            const T *in_batch = input + (size_t)b * in_h * in_w * channels;                \
            for (int32_t out_y = 0; out_y < out_h; ++out_y) {                              \
                const int32_t in_y0 = out_y * params->stride.h - params->padding.h;        \
                int32_t ky_first, ky_last;                                                 \
                clip_window(in_y0, params->filter.h, in_h, &ky_first, &ky_last);           \
                for (int32_t out_x = 0; out_x < out_w; ++out_x) {                          \
                    const int32_t in_x0 = out_x * params->stride.w - params->padding.w;    \
                    int32_t kx_first, kx_last;                                             \
                    clip_window(in_x0, params->filter.w, in_w, &kx_first, &kx_last);       \
                    T *out_px = output + (((size_t)b * out_h + out_y) * out_w + out_x) *   \
                                             channels;                                     \
                    const int32_t ky_end = kx_first < kx_last ? ky_last : ky_first;        \
                    for (int32_t c0 = 0; c0 < channels; c0 += KILN_POOL_BLOCK) {           \
                        const int32_t n = kiln_min_i32(KILN_POOL_BLOCK, channels - c0);    \
                        T max[KILN_POOL_BLOCK];                                            \
                        for (int32_t j = 0; j < KILN_POOL_BLOCK; ++j) {                    \
                            max[j] = (T)(T_MIN);                                           \
                        }                                                                  \
                        for (int32_t ky = ky_first; ky < ky_end; ++ky) {                   \
                            const T *row = in_batch + ((size_t)(in_y0 + ky) * in_w +       \
                                                       (in_x0 + kx_first)) * channels + c0; \
                            for (int32_t kx = kx_first; kx < kx_last; ++kx) {              \
                                max_pixel_##SUFFIX(max, row, n);                           \
                                row += channels;                                           \
                            }                                                              \
                        }                                                                  \
                        for (int32_t j = 0; j < n; ++j) {                                  \
                            const T v = max[j] < act_min ? act_min : max[j];               \
                            out_px[c0 + j] = v > act_max ? act_max : v;                    \
                        }                                                                  \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
        return KILN_OK;                                                                    \
    }

KILN_POOL_KERNELS(int8_t, s8, INT8_MIN, INT8_MAX, KILN_POOL_MAX_WINDOW)
KILN_POOL_KERNELS(int16_t, s16, INT16_MIN, INT16_MAX, KILN_POOL_MAX_WINDOW_S16)
