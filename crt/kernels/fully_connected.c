/*
 * fully_connected.c - FULLY_CONNECTED int8 kernel. Semantics and the
 * folded-bias contract are in conv.h.
 *
 * TFLM computes, per batch row x and unit u (filter row w),
 *     sum_k (w[k] + filter_offset) * (x[k] + input_offset) + bias[u]
 * which expands to
 *     sum_k w[k] * x[k]  +  filter_offset * sum_k x[k]  +  folded_bias[u]
 * with folded_bias[u] = bias[u] + input_offset * sum_k (w[k] + filter_offset),
 * a compile-time constant. The middle term is computed once per row, and only
 * when filter_offset != 0 (per-tensor weights with a zero point).
 * Overflow: |sum w * x| <= 128 * sum|w| and |filter_offset * sum x| <=
 * 128 * |filter_offset| * depth; the compiler checks that these plus
 * |bias| + 128 * sum|w + filter_offset| (the fold) stay below 2^31.
 */
#include "conv_internal.h"

kiln_status_t kiln_fully_connected_s8(const kiln_fc_params_t *params,
                                      const kiln_per_channel_requant_t *quant,
                                      const kiln_dims_t *input_dims, const int8_t *input,
                                      const kiln_dims_t *filter_dims, const int8_t *filter,
                                      const int32_t *bias,
                                      const kiln_dims_t *output_dims, int8_t *output)
{
    if (params == NULL || quant == NULL || quant->multiplier == NULL || quant->shift == NULL ||
        input == NULL || filter == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims)) {
        return KILN_ERR_ARG;
    }
    if (params->input_offset < -127 || params->input_offset > 128 ||
        params->filter_offset < -127 || params->filter_offset > 128 ||
        params->output_offset < -128 || params->output_offset > 127 ||
        params->activation.min < -128 || params->activation.min > params->activation.max ||
        params->activation.max > 127) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = filter_dims->c;
    const int32_t units = filter_dims->n;
    const int32_t batches = output_dims->n;
    if (input_dims->c != depth || input_dims->n != batches || output_dims->c != units) {
        return KILN_ERR_ARG;
    }
    for (int32_t b = 0; b < batches; ++b) {
        const int8_t *row = input + (size_t)b * (size_t)depth;
        int32_t row_term = 0;
        if (params->filter_offset != 0) {
            int32_t row_sum = 0;
            for (int32_t k = 0; k < depth; ++k) {
                row_sum += row[k];
            }
            row_term = params->filter_offset * row_sum;
        }
        kiln_row_times_filter_s8(row, filter, depth, bias, row_term, quant, units,
                                 params->output_offset, params->activation.min,
                                 params->activation.max, output + (size_t)b * (size_t)units);
    }
    return KILN_OK;
}
