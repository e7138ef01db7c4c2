/*
 * data_movement.c - element-size-generic copies (see data_movement.h).
 *
 * Everything here is a loop around memcpy: the compiler has already reduced
 * each op to the simplest view of its copy, so the innermost run is as long as
 * the layout allows. Elements are moved with memcpy of elem_size bytes, never
 * through typed pointers, so no alignment is assumed.
 */
#include "data_movement.h"

#include <string.h>

void kiln_copy_bytes(void *dst, const void *src, size_t bytes)
{
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *s = (const uint8_t *)src;
    if ((((uintptr_t)d | (uintptr_t)s) & 3u) == 0) {
        for (; bytes >= 4; bytes -= 4, d += 4, s += 4) {
            uint32_t w;
            memcpy(&w, s, 4);       /* one LDR and one STR: no call */
            memcpy(d, &w, 4);
            /* Keeps GCC from turning the loop back into a memcpy call. */
            __asm__("" : "+r"(d));
        }
    }
    for (; bytes > 0; --bytes) {
        *d++ = *s++;
        __asm__("" : "+r"(d));
    }
}

static int valid_elem_size(int32_t elem_size)
{
    return elem_size == 1 || elem_size == 2 || elem_size == 4 || elem_size == 8;
}

/* n elements from src, `stride` elements apart, to contiguous dst. */
static void gather_run(uint8_t *dst, const uint8_t *src, int32_t n, ptrdiff_t stride,
                       int32_t elem_size)
{
    if (stride == 1) {
        memcpy(dst, src, (size_t)n * (size_t)elem_size);
        return;
    }
    switch (elem_size) {
    case 1:
        for (int32_t i = 0; i < n; ++i) {
            dst[i] = src[i * stride];
        }
        break;
    case 2:
        for (int32_t i = 0; i < n; ++i) {
            memcpy(dst + 2 * i, src + 2 * i * stride, 2);
        }
        break;
    case 4:
        for (int32_t i = 0; i < n; ++i) {
            memcpy(dst + 4 * i, src + 4 * i * stride, 4);
        }
        break;
    default:
        for (int32_t i = 0; i < n; ++i) {
            memcpy(dst + 8 * i, src + 8 * i * stride, 8);
        }
        break;
    }
}

/* n copies of the elem_size-byte value at `value`. */
static void fill_run(uint8_t *dst, const uint8_t *value, int32_t n, int32_t elem_size)
{
    if (elem_size == 1) {
        memset(dst, *value, (size_t)n);
        return;
    }
    for (int32_t i = 0; i < n; ++i) {
        memcpy(dst + (size_t)i * (size_t)elem_size, value, (size_t)elem_size);
    }
}

kiln_status_t kiln_strided_copy(const kiln_copy_params_t *params, const void *input,
                                void *output)
{
    if (params == NULL || input == NULL || output == NULL ||
        !valid_elem_size(params->elem_size) || params->rank < 1 ||
        params->rank > KILN_COPY_MAX_DIMS || params->in_size < 1) {
        return KILN_ERR_ARG;
    }
    /* Every index the view reaches lies between these two; both must be inside. */
    int64_t lowest = params->in_offset;
    int64_t highest = params->in_offset;
    int32_t rows = 1;
    for (int32_t d = 0; d < params->rank; ++d) {
        if (params->shape[d] < 1) {
            return KILN_ERR_ARG;
        }
        const int64_t span = (int64_t)(params->shape[d] - 1) * params->in_stride[d];
        if (span < 0) {
            lowest += span;
        } else {
            highest += span;
        }
        if (d < params->rank - 1) {
            rows *= params->shape[d];
        }
    }
    if (lowest < 0 || highest >= params->in_size) {
        return KILN_ERR_ARG;
    }

    const int32_t elem = params->elem_size;
    const int32_t last = params->rank - 1;
    const int32_t run = params->shape[last];
    const ptrdiff_t run_stride = params->in_stride[last];
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    int32_t index[KILN_COPY_MAX_DIMS] = {0};
    ptrdiff_t offset = params->in_offset;
    for (int32_t row = 0; row < rows; ++row) {
        gather_run(out, in + offset * elem, run, run_stride, elem);
        out += (size_t)run * (size_t)elem;
        /* Odometer over the outer dimensions, innermost first. */
        for (int32_t d = last - 1; d >= 0; --d) {
            offset += params->in_stride[d];
            if (++index[d] < params->shape[d]) {
                break;
            }
            offset -= (ptrdiff_t)params->in_stride[d] * params->shape[d];
            index[d] = 0;
        }
    }
    return KILN_OK;
}

static kiln_status_t check_concat(const kiln_concat_params_t *params, const void *const *ptrs,
                                  const void *single)
{
    if (params == NULL || ptrs == NULL || single == NULL || params->count < 1 ||
        params->outer < 1 || params->row_bytes == NULL) {
        return KILN_ERR_ARG;
    }
    for (int32_t i = 0; i < params->count; ++i) {
        if (params->row_bytes[i] < 0 || (ptrs[i] == NULL && params->row_bytes[i] > 0)) {
            return KILN_ERR_ARG;
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_concat(const kiln_concat_params_t *params, const void *const *inputs,
                          void *output)
{
    const kiln_status_t status = check_concat(params, inputs, output);
    if (status != KILN_OK) {
        return status;
    }
    uint8_t *out = (uint8_t *)output;
    for (int32_t r = 0; r < params->outer; ++r) {
        for (int32_t i = 0; i < params->count; ++i) {
            const size_t n = (size_t)params->row_bytes[i];
            memcpy(out, (const uint8_t *)inputs[i] + (size_t)r * n, n);
            out += n;
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_split(const kiln_concat_params_t *params, const void *input,
                         void *const *outputs)
{
    const kiln_status_t status = check_concat(params, (const void *const *)outputs, input);
    if (status != KILN_OK) {
        return status;
    }
    const uint8_t *in = (const uint8_t *)input;
    for (int32_t r = 0; r < params->outer; ++r) {
        for (int32_t i = 0; i < params->count; ++i) {
            const size_t n = (size_t)params->row_bytes[i];
            memcpy((uint8_t *)outputs[i] + (size_t)r * n, in, n);
            in += n;
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_pad(const kiln_pad_params_t *params, const void *pad_value,
                       const void *input, void *output)
{
    if (params == NULL || pad_value == NULL || input == NULL || output == NULL ||
        !valid_elem_size(params->elem_size)) {
        return KILN_ERR_ARG;
    }
    enum { D = KILN_PAD_MAX_DIMS };
    int32_t out_shape[D];
    int32_t in_stride[D];
    int32_t rows = 1;
    for (int32_t d = D - 1, stride = 1; d >= 0; --d) {
        if (params->in_shape[d] < 1 || params->before[d] < 0 || params->after[d] < 0) {
            return KILN_ERR_ARG;
        }
        out_shape[d] = params->in_shape[d] + params->before[d] + params->after[d];
        in_stride[d] = stride;
        stride *= params->in_shape[d];
        if (d < D - 1) {
            rows *= out_shape[d];
        }
    }
    const int32_t elem = params->elem_size;
    const uint8_t *value = (const uint8_t *)pad_value;
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    const int32_t before = params->before[D - 1];
    const int32_t width = params->in_shape[D - 1];
    const int32_t after = params->after[D - 1];
    int32_t index[D] = {0};   /* output index of the current row (last entry unused) */
    for (int32_t row = 0; row < rows; ++row) {
        int inside = 1;
        ptrdiff_t in_row = 0;
        for (int32_t d = 0; d < D - 1; ++d) {
            const int32_t i = index[d] - params->before[d];
            inside &= i >= 0 && i < params->in_shape[d];
            in_row += (ptrdiff_t)i * in_stride[d];
        }
        if (inside) {
            fill_run(out, value, before, elem);
            out += (size_t)before * (size_t)elem;
            memcpy(out, in + in_row * elem, (size_t)width * (size_t)elem);
            out += (size_t)width * (size_t)elem;
            fill_run(out, value, after, elem);
            out += (size_t)after * (size_t)elem;
        } else {
            const int32_t n = out_shape[D - 1];
            fill_run(out, value, n, elem);
            out += (size_t)n * (size_t)elem;
        }
        for (int32_t d = D - 2; d >= 0; --d) {
            if (++index[d] < out_shape[d]) {
                break;
            }
            index[d] = 0;
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_resize_nearest(const kiln_resize_nearest_params_t *params,
                                  const void *input, void *output)
{
    if (params == NULL || input == NULL || output == NULL || params->y_map == NULL ||
        params->x_map == NULL || !valid_elem_size(params->elem_size) ||
        params->input.n != params->output.n || params->input.c != params->output.c) {
        return KILN_ERR_ARG;
    }
    for (int32_t y = 0; y < params->output.h; ++y) {
        if (params->y_map[y] < 0 || params->y_map[y] >= params->input.h) {
            return KILN_ERR_ARG;
        }
    }
    for (int32_t x = 0; x < params->output.w; ++x) {
        if (params->x_map[x] < 0 || params->x_map[x] >= params->input.w) {
            return KILN_ERR_ARG;
        }
    }
    const size_t pixel = (size_t)params->input.c * (size_t)params->elem_size;
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    for (int32_t b = 0; b < params->input.n; ++b) {
        for (int32_t y = 0; y < params->output.h; ++y) {
            const uint8_t *in_row =
                in + ((size_t)b * params->input.h + (size_t)params->y_map[y]) *
                         params->input.w * pixel;
            for (int32_t x = 0; x < params->output.w; ++x) {
                memcpy(out, in_row + (size_t)params->x_map[x] * pixel, pixel);
                out += pixel;
            }
        }
    }
    return KILN_OK;
}

static kiln_status_t check_space_batch(const kiln_space_batch_params_t *p,
                                       const kiln_dims_t *batched, const kiln_dims_t *spatial)
{
    if (!valid_elem_size(p->elem_size) || p->block.h < 1 || p->block.w < 1 ||
        p->margin.h < 0 || p->margin.w < 0 || spatial->n < 1 || batched->c != spatial->c ||
        batched->n != spatial->n * p->block.h * p->block.w) {
        return KILN_ERR_ARG;
    }
    return KILN_OK;
}

kiln_status_t kiln_space_to_batch(const kiln_space_batch_params_t *params,
                                  const void *pad_value, const void *input, void *output)
{
    if (params == NULL || pad_value == NULL || input == NULL || output == NULL ||
        check_space_batch(params, &params->output, &params->input) != KILN_OK) {
        return KILN_ERR_ARG;
    }
    const kiln_dims_t *in_d = &params->input;
    const kiln_dims_t *out_d = &params->output;
    const int32_t elem = params->elem_size;
    const size_t pixel = (size_t)in_d->c * (size_t)elem;
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    for (int32_t ob = 0; ob < out_d->n; ++ob) {
        const int32_t b = ob % in_d->n;
        const int32_t shift_y = (ob / in_d->n) / params->block.w;
        const int32_t shift_x = (ob / in_d->n) % params->block.w;
        for (int32_t oy = 0; oy < out_d->h; ++oy) {
            const int32_t iy = oy * params->block.h + shift_y - params->margin.h;
            for (int32_t ox = 0; ox < out_d->w; ++ox) {
                const int32_t ix = ox * params->block.w + shift_x - params->margin.w;
                if (iy >= 0 && iy < in_d->h && ix >= 0 && ix < in_d->w) {
                    memcpy(out, in + (((size_t)b * in_d->h + iy) * in_d->w + ix) * pixel, pixel);
                } else {
                    fill_run(out, (const uint8_t *)pad_value, in_d->c, elem);
                }
                out += pixel;
            }
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_batch_to_space(const kiln_space_batch_params_t *params,
                                  const void *input, void *output)
{
    if (params == NULL || input == NULL || output == NULL ||
        check_space_batch(params, &params->input, &params->output) != KILN_OK) {
        return KILN_ERR_ARG;
    }
    const kiln_dims_t *in_d = &params->input;
    const kiln_dims_t *out_d = &params->output;
    const size_t pixel = (size_t)in_d->c * (size_t)params->elem_size;
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    for (int32_t ib = 0; ib < in_d->n; ++ib) {
        const int32_t b = ib % out_d->n;
        const int32_t shift_y = (ib / out_d->n) / params->block.w;
        const int32_t shift_x = (ib / out_d->n) % params->block.w;
        for (int32_t iy = 0; iy < in_d->h; ++iy) {
            const int32_t oy = iy * params->block.h + shift_y - params->margin.h;
            if (oy < 0 || oy >= out_d->h) {
                continue;
            }
            for (int32_t ix = 0; ix < in_d->w; ++ix) {
                const int32_t ox = ix * params->block.w + shift_x - params->margin.w;
                if (ox < 0 || ox >= out_d->w) {
                    continue;
                }
                memcpy(out + (((size_t)b * out_d->h + oy) * out_d->w + ox) * pixel,
                       in + (((size_t)ib * in_d->h + iy) * in_d->w + ix) * pixel, pixel);
            }
        }
    }
    return KILN_OK;
}
