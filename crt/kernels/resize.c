/* resize.c - int8 RESIZE_BILINEAR (see resize.h). */
#include "resize.h"

#include <stddef.h>

static int valid_map(const int32_t *map, int32_t n, int32_t limit)
{
    for (int32_t i = 0; i < n; ++i) {
        if (map[i] < 0 || map[i] >= limit) {
            return 0;
        }
    }
    return 1;
}

kiln_status_t kiln_resize_bilinear_s8(const kiln_resize_bilinear_params_t *params,
                                      const int8_t *input, int8_t *output)
{
    if (params == NULL || input == NULL || output == NULL || params->y0 == NULL ||
        params->y1 == NULL || params->fy == NULL || params->x0 == NULL ||
        params->x1 == NULL || params->fx == NULL ||
        params->input.n != params->output.n || params->input.c != params->output.c) {
        return KILN_ERR_ARG;
    }
    const int32_t ih = params->input.h, iw = params->input.w, c = params->input.c;
    const int32_t oh = params->output.h, ow = params->output.w;
    if (!valid_map(params->y0, oh, ih) || !valid_map(params->y1, oh, ih) ||
        !valid_map(params->x0, ow, iw) || !valid_map(params->x1, ow, iw)) {
        return KILN_ERR_ARG;
    }
    for (int32_t b = 0; b < params->input.n; ++b) {
        const int8_t *image = input + (size_t)b * (size_t)ih * (size_t)iw * (size_t)c;
        for (int32_t y = 0; y < oh; ++y) {
            const int8_t *row0 = image + (size_t)params->y0[y] * (size_t)iw * (size_t)c;
            const int8_t *row1 = image + (size_t)params->y1[y] * (size_t)iw * (size_t)c;
            const int32_t wy1 = params->fy[y];
            const int32_t wy0 = 1024 - wy1;
            for (int32_t x = 0; x < ow; ++x) {
                const int32_t wx1 = params->fx[x];
                const int32_t wx0 = 1024 - wx1;
                /* The four taps' weights (their products stay below 2^22 in
                 * magnitude: the compiler checked the tables). */
                const int32_t w00 = wy0 * wx0, w10 = wy1 * wx0;
                const int32_t w01 = wy0 * wx1, w11 = wy1 * wx1;
                const int8_t *p00 = row0 + (size_t)params->x0[x] * (size_t)c;
                const int8_t *p01 = row0 + (size_t)params->x1[x] * (size_t)c;
                const int8_t *p10 = row1 + (size_t)params->x0[x] * (size_t)c;
                const int8_t *p11 = row1 + (size_t)params->x1[x] * (size_t)c;
                for (int32_t k = 0; k < c; ++k) {
                    const int32_t s = p00[k] * w00 + p10[k] * w10 + p01[k] * w01 +
                                      p11[k] * w11;
                    const int32_t round = s > 0 ? (1 << 19) : -(1 << 19);
                    *output++ = (int8_t)((s + round) / (1 << 20));
                }
            }
        }
    }
    return KILN_OK;
}
