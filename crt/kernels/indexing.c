/*
 * indexing.c - ARG_MAX, ARG_MIN, GATHER, MIRROR_PAD (see indexing.h).
 *
 * Elements are moved with memcpy of elem_size bytes, never through typed
 * pointers, so no alignment of the data is assumed. Index tensors (GATHER's
 * indices, ARG_*'s output) are int32_t or int64_t and are accessed as such.
 */
#include "indexing.h"

#include <string.h>

static int valid_elem_size(int32_t elem_size)
{
    return elem_size == 1 || elem_size == 2 || elem_size == 4 || elem_size == 8;
}

static int valid_index_size(int32_t index_size)
{
    return index_size == 4 || index_size == 8;
}

/* ---------------------------------------------------------------- ARG_MAX / ARG_MIN */

static kiln_status_t arg_min_max(const kiln_arg_params_t *params, const int8_t *input,
                                 void *output, int want_max)
{
    if (params == NULL || input == NULL || output == NULL || params->outer < 1 ||
        params->axis_size < 1 || params->inner < 1 || !valid_index_size(params->index_size)) {
        return KILN_ERR_ARG;
    }
    const int32_t axis_size = params->axis_size;
    const int32_t inner = params->inner;
    int32_t *out32 = (int32_t *)output;
    int64_t *out64 = (int64_t *)output;
    int32_t written = 0;
    for (int32_t o = 0; o < params->outer; ++o) {
        const int8_t *row = input + (ptrdiff_t)o * axis_size * inner;
        for (int32_t i = 0; i < inner; ++i) {
            int8_t best = row[i];
            int32_t best_index = 0;
            /* Strict comparison: a tie keeps the lowest index (TFLite's ArgMinMax). */
            for (int32_t k = 1; k < axis_size; ++k) {
                const int8_t v = row[(ptrdiff_t)k * inner + i];
                if (want_max ? v > best : v < best) {
                    best = v;
                    best_index = k;
                }
            }
            if (params->index_size == 4) {
                out32[written] = best_index;
            } else {
                out64[written] = best_index;
            }
            ++written;
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_arg_max_s8(const kiln_arg_params_t *params, const int8_t *input,
                              void *output)
{
    return arg_min_max(params, input, output, 1);
}

kiln_status_t kiln_arg_min_s8(const kiln_arg_params_t *params, const int8_t *input,
                              void *output)
{
    return arg_min_max(params, input, output, 0);
}

/* ---------------------------------------------------------------- GATHER */

kiln_status_t kiln_gather(const kiln_gather_params_t *params, const void *input,
                          const void *indices, void *output)
{
    if (params == NULL || input == NULL || indices == NULL || output == NULL ||
        !valid_elem_size(params->elem_size) || !valid_index_size(params->index_size) ||
        params->batch < 1 || params->outer < 1 || params->axis_size < 1 ||
        params->coords < 1 || params->inner < 1) {
        return KILN_ERR_ARG;
    }
    const size_t row_bytes = (size_t)params->inner * (size_t)params->elem_size;
    const int32_t *idx32 = (const int32_t *)indices;
    const int64_t *idx64 = (const int64_t *)indices;
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    for (int32_t b = 0; b < params->batch; ++b) {
        for (int32_t o = 0; o < params->outer; ++o) {
            /* First input row of (b, o): rows are inner elements long. */
            const size_t base = ((size_t)b * (size_t)params->outer + (size_t)o) *
                                (size_t)params->axis_size;
            for (int32_t c = 0; c < params->coords; ++c) {
                const size_t at = (size_t)b * (size_t)params->coords + (size_t)c;
                const int64_t index = params->index_size == 4 ? idx32[at] : idx64[at];
                if (index < 0 || index >= params->axis_size) {
                    return KILN_ERR_ARG;
                }
                memcpy(out, in + (base + (size_t)index) * row_bytes, row_bytes);
                out += row_bytes;
            }
        }
    }
    return KILN_OK;
}

/* ---------------------------------------------------------------- MIRROR_PAD */

kiln_status_t kiln_mirror_pad(const kiln_mirror_pad_params_t *params, const void *input,
                              void *output)
{
    if (params == NULL || input == NULL || output == NULL || params->offsets == NULL ||
        !valid_elem_size(params->elem_size) || params->rank < 1 ||
        params->rank > KILN_MIRROR_PAD_MAX_DIMS || params->run < 1 || params->in_size < 1) {
        return KILN_ERR_ARG;
    }
    /* The highest input element any output reaches is run - 1 past the sum of each
     * map's largest entry; every entry must be >= 0 and that sum inside the input. */
    const int32_t *map[KILN_MIRROR_PAD_MAX_DIMS];
    int64_t highest = params->run - 1;
    int32_t rows = 1;
    const int32_t *next = params->offsets;
    for (int32_t d = 0; d < params->rank; ++d) {
        if (params->shape[d] < 1) {
            return KILN_ERR_ARG;
        }
        map[d] = next;
        int32_t largest = 0;
        for (int32_t i = 0; i < params->shape[d]; ++i) {
            if (next[i] < 0) {
                return KILN_ERR_ARG;
            }
            largest = next[i] > largest ? next[i] : largest;
        }
        highest += largest;
        next += params->shape[d];
        rows *= params->shape[d];
    }
    if (highest >= params->in_size) {
        return KILN_ERR_ARG;
    }

    const size_t run_bytes = (size_t)params->run * (size_t)params->elem_size;
    const uint8_t *in = (const uint8_t *)input;
    uint8_t *out = (uint8_t *)output;
    int32_t index[KILN_MIRROR_PAD_MAX_DIMS] = {0};
    for (int32_t row = 0; row < rows; ++row) {
        size_t offset = 0;
        for (int32_t d = 0; d < params->rank; ++d) {
            offset += (size_t)map[d][index[d]];
        }
        memcpy(out, in + offset * (size_t)params->elem_size, run_bytes);
        out += run_bytes;
        /* Odometer, innermost dimension first. */
        for (int32_t d = params->rank - 1; d >= 0; --d) {
            if (++index[d] < params->shape[d]) {
                break;
            }
            index[d] = 0;
        }
    }
    return KILN_OK;
}
