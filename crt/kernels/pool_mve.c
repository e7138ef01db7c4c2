/*
 * pool_mve.c - kiln_avgpool_mve_s8 and kiln_maxpool_mve_s8 (kernels_mve.h): int8
 * AVERAGE_POOL_2D and MAX_POOL_2D on Helium, the semantics of pool.h. The max
 * takes 16 channels a vector; the average sums four channels a vector in int32
 * lanes and divides each sum by its window count with the core's divider.
 * Compiled to nothing without MVE.
 */
#include "conv_mve.h"
#include "pool.h"

#if defined(KILN_MVE)

/* pool.h's limits: the window at most 2^16 positions, every index in int32. */
static int args_valid(const kiln_pool_params_t *p, const kiln_dims_t *in, const int8_t *input,
                      const kiln_dims_t *out, const int8_t *output)
{
    return p != NULL && in != NULL && out != NULL && input != NULL && output != NULL &&
           p->stride.h >= 1 && p->stride.w >= 1 && p->filter.h >= 1 && p->filter.w >= 1 &&
           p->padding.h >= 0 && p->padding.w >= 0 &&
           p->filter.h <= (INT32_C(1) << 16) / p->filter.w &&
           p->activation.min >= -128 && p->activation.max <= 127 &&
           p->activation.min <= p->activation.max && in->n >= 1 && in->h >= 1 &&
           in->w >= 1 && in->c >= 1 && out->n == in->n && out->c == in->c && out->h >= 1 &&
           out->w >= 1 &&
           (int64_t)(out->h - 1) * p->stride.h + p->padding.h + p->filter.h + in->h <=
               INT32_MAX &&
           (int64_t)(out->w - 1) * p->stride.w + p->padding.w + p->filter.w + in->w <=
               INT32_MAX;
}

/* The window of output pixel (oy, ox) clipped to the input: rows [y0, y1),
 * columns [x0, x1) (empty when it misses the input). */
typedef struct {
    int32_t y0, y1, x0, x1;
} window_t;

static window_t clipped(const kiln_pool_params_t *p, const kiln_dims_t *in, int32_t oy,
                        int32_t ox)
{
    const int32_t top = oy * p->stride.h - p->padding.h;
    const int32_t left = ox * p->stride.w - p->padding.w;
    const window_t w = {kiln_max_i32(top, 0), kiln_min_i32(top + p->filter.h, in->h),
                        kiln_max_i32(left, 0), kiln_min_i32(left + p->filter.w, in->w)};
    return w;
}

kiln_status_t kiln_avgpool_mve_s8(const kiln_pool_params_t *params,
                                  const kiln_dims_t *input_dims, const int8_t *input,
                                  const kiln_dims_t *output_dims, int8_t *output)
{
    if (!args_valid(params, input_dims, input, output_dims, output)) {
        return KILN_ERR_ARG;
    }
    const int32_t ch = input_dims->c, in_w = input_dims->w;
    const int32_t lo = params->activation.min, hi = params->activation.max;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int8_t *image = input + b * input_dims->h * in_w * ch;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            for (int32_t ox = 0; ox < output_dims->w; ++ox, output += ch) {
                const window_t w = clipped(params, input_dims, oy, ox);
                if (w.y1 <= w.y0 || w.x1 <= w.x0) {
                    return KILN_ERR_ARG;        /* an empty window, as TFLite */
                }
                const int32_t count = (w.y1 - w.y0) * (w.x1 - w.x0);
                for (int32_t c = 0; c < ch; c += 4) {
                    const mve_pred16_t lanes = vctp32q((uint32_t)(ch - c));
                    /* |sum| <= 128 * 2^16: int32 */
                    int32x4_t sum = vdupq_n_s32(0);
                    for (int32_t y = w.y0; y < w.y1; ++y) {
                        const int8_t *px = image + (y * in_w + w.x0) * ch + c;
                        for (int32_t x = w.x0; x < w.x1; ++x, px += ch) {
                            sum = vaddq_s32(sum, vldrbq_z_s32(px, lanes));
                        }
                    }
                    int32_t s[4];
                    vst1q_s32(s, sum);
                    const int32_t n = kiln_min_i32(4, ch - c);
                    for (int32_t l = 0; l < n; ++l) {
                        /* TFLite: (sum +- count / 2) / count, C's truncating division */
                        const int32_t avg = s[l] > 0 ? (s[l] + count / 2) / count
                                                     : (s[l] - count / 2) / count;
                        output[c + l] = (int8_t)kiln_clamp(avg, lo, hi);
                    }
                }
            }
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_maxpool_mve_s8(const kiln_pool_params_t *params,
                                  const kiln_dims_t *input_dims, const int8_t *input,
                                  const kiln_dims_t *output_dims, int8_t *output)
{
    if (!args_valid(params, input_dims, input, output_dims, output)) {
        return KILN_ERR_ARG;
    }
    const int32_t ch = input_dims->c, in_w = input_dims->w;
    const int8x16_t lo = vdupq_n_s8((int8_t)params->activation.min);
    const int8x16_t hi = vdupq_n_s8((int8_t)params->activation.max);
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int8_t *image = input + b * input_dims->h * in_w * ch;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            for (int32_t ox = 0; ox < output_dims->w; ++ox, output += ch) {
                const window_t w = clipped(params, input_dims, oy, ox);
                for (int32_t c = 0; c < ch; c += 16) {
                    const mve_pred16_t lanes = vctp8q((uint32_t)(ch - c));
                    int8x16_t max = vdupq_n_s8(INT8_MIN);   /* an empty window: -128 */
                    for (int32_t y = w.y0; y < w.y1; ++y) {
                        const int8_t *px = image + (y * in_w + w.x0) * ch + c;
                        for (int32_t x = w.x0; x < w.x1; ++x, px += ch) {
                            max = vmaxq_s8(max, vldrbq_z_s8(px, lanes));
                        }
                    }
                    vstrbq_p_s8(output + c, vminq_s8(vmaxq_s8(max, lo), hi), lanes);
                }
            }
        }
    }
    return KILN_OK;
}

#else

/* ISO C wants a translation unit to declare something. */
typedef int kiln_pool_mve_unused_t;

#endif /* KILN_MVE */
