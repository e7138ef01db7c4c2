/*
 * fully_connected_mve.c - kiln_fully_connected_mve_s8 (kernels_mve.h):
 * FULLY_CONNECTED on Helium, four units at a time sharing each load of the
 * input row. Compiled to nothing without MVE.
 */
#include "conv_mve.h"

#if defined(KILN_MVE)

kiln_status_t kiln_fully_connected_mve_s8(const kiln_fc_params_t *params,
                                          const kiln_mve_quant4_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int8_t *filter,
                                          const kiln_dims_t *output_dims, int8_t *output)
{
    if (params == NULL || quant == NULL || input == NULL || filter == NULL || output == NULL ||
        !kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims) || filter_dims->c != input_dims->c ||
        output_dims->c != filter_dims->n || output_dims->n != input_dims->n ||
        params->filter_offset < -127 || params->filter_offset > 128 ||
        params->activation.min < -128 || params->activation.min > params->activation.max ||
        params->activation.max > 127) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = filter_dims->c;
    const int32_t units = filter_dims->n;
    const int32_t block_bytes = (depth + 15) / 16 * 64;
    const int32_t off = params->output_offset;
    const int32_t lo = params->activation.min, hi = params->activation.max;
    for (int32_t b = 0; b < input_dims->n; ++b, input += depth, output += units) {
        /* sum_k (w + filter_offset) x = sum_k w x + filter_offset * sum_k x; the
         * folded bias holds input_offset * sum_k (w + filter_offset). Unsigned:
         * the parts may wrap, the whole fits int32 (conv.h). */
        const uint32_t row_term = params->filter_offset == 0 ? 0u :
            (uint32_t)params->filter_offset * (uint32_t)kiln_mve_sum(input, depth);
        const int32x4_t term = vdupq_n_s32((int32_t)row_term);
        const int8_t *w = filter;
        const kiln_mve_quant4_t *q = quant;
        for (int32_t u = 0; u < units; u += 4, w += block_bytes, ++q) {
            const int32x4_t acc = vaddq_s32(kiln_mve_dot4(input, 0, 1, depth, w), term);
            vstrbq_p_s32(output + u, kiln_mve_output4(acc, q, off, lo, hi),
                         vctp32q((uint32_t)(units - u)));
        }
    }
    return KILN_OK;
}

#else

/* ISO C wants a translation unit to declare something. */
typedef int kiln_fully_connected_mve_unused_t;

#endif /* KILN_MVE */
