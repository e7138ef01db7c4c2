/*
 * fully_connected_rows.c - FULLY_CONNECTED blocked four filter rows at a time
 * on packed int16 pairs (SMLAD on cores with the DSP extension, plain C
 * elsewhere). Semantics in conv.h, primitives in conv_dsp.h.
 *
 * Each input row is converted once into scratch as int16 pairs (k0, k2),
 * (k1, k3) per group of four k; the filter rows were packed the same way at
 * compile time, with the filter zero point already added (w + filter_offset
 * fits int16), so the inner loop is a plain dual MAC: per group of four k,
 * one LDRD of input and four LDRD + eight SMLAD for the four rows.
 *
 * Overflow: |sum (w + filter_offset) * x| <= 128 * sum|w + filter_offset|
 * and the folded bias adds at most |bias| + 128 * that; the compiler checks
 * that these stay below 2^31 (see fully_connected.c).
 */
#include "conv_dsp.h"

int32_t kiln_fully_connected_rows_s8_get_buffer_size(const kiln_dims_t *filter_dims)
{
    return filter_dims == NULL ? 0 : 2 * kiln_round_up4(filter_dims->c);
}

/* Four rows: w is the block (per group: A, B of row 0, then rows 1, 2, 3). */
#define FC_GROUP_4ROWS()                                                         \
    do {                                                                         \
        uint32_t xa;                                                             \
        uint32_t xb;                                                             \
        uint32_t wa;                                                             \
        uint32_t wb;                                                             \
        KILN_LOAD_PAIR(xa, xb, col);                                             \
        KILN_LOAD_PAIR(wa, wb, w);                                               \
        a0 = kiln_smlad(wa, xa, a0);                                             \
        a0 = kiln_smlad(wb, xb, a0);                                             \
        KILN_LOAD_PAIR(wa, wb, w);                                               \
        a1 = kiln_smlad(wa, xa, a1);                                             \
        a1 = kiln_smlad(wb, xb, a1);                                             \
        KILN_LOAD_PAIR(wa, wb, w);                                               \
        a2 = kiln_smlad(wa, xa, a2);                                             \
        a2 = kiln_smlad(wb, xb, a2);                                             \
        KILN_LOAD_PAIR(wa, wb, w);                                               \
        a3 = kiln_smlad(wa, xa, a3);                                             \
        a3 = kiln_smlad(wb, xb, a3);                                             \
    } while (0)

static void dot_4rows(const uint32_t *w, const uint32_t *col, int32_t groups4, int32_t acc[4])
{
    int32_t a0 = acc[0];
    int32_t a1 = acc[1];
    int32_t a2 = acc[2];
    int32_t a3 = acc[3];
    for (int32_t n = groups4 / 2; n > 0; --n) {     /* two groups per trip */
        FC_GROUP_4ROWS();
        FC_GROUP_4ROWS();
    }
    if (groups4 % 2 != 0) {
        FC_GROUP_4ROWS();
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

static int32_t dot_1row(const uint32_t *w, const uint32_t *col, int32_t groups4, int32_t acc)
{
    for (int32_t n = groups4; n > 0; --n) {
        uint32_t xa;
        uint32_t xb;
        uint32_t wa;
        uint32_t wb;
        KILN_LOAD_PAIR(xa, xb, col);
        KILN_LOAD_PAIR(wa, wb, w);
        acc = kiln_smlad(wa, xa, acc);
        acc = kiln_smlad(wb, xb, acc);
    }
    return acc;
}

kiln_status_t kiln_fully_connected_rows_s8(const kiln_context_t *ctx,
                                           const kiln_fc_params_t *params,
                                           const kiln_requant_fast_t *quant,
                                           const kiln_dims_t *input_dims, const int8_t *input,
                                           const kiln_dims_t *filter_dims, const int32_t *filter,
                                           const int32_t *bias,
                                           const kiln_dims_t *output_dims, int8_t *output)
{
    if (ctx == NULL || params == NULL || quant == NULL || input == NULL || filter == NULL ||
        bias == NULL || output == NULL ||
        !kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims) || ((uintptr_t)filter & 3u) != 0) {
        return KILN_ERR_ARG;
    }
    if (params->input_offset < -127 || params->input_offset > 128 || params->filter_offset != 0 ||
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
    if (ctx->buf == NULL || ctx->size < kiln_fully_connected_rows_s8_get_buffer_size(filter_dims) ||
        ((uintptr_t)ctx->buf & 3u) != 0) {
        return KILN_ERR_ARG;
    }
    const int32_t groups4 = kiln_round_up4(depth) / 4;
    const int32_t out_off = params->output_offset;
    const int32_t act_min = params->activation.min;
    const int32_t act_max = params->activation.max;
    uint32_t *col = (uint32_t *)ctx->buf;

    for (int32_t bt = 0; bt < batches; ++bt) {
        const int8_t *row = input + (size_t)bt * (size_t)depth;
        /* The row as pairs; a partial last group is padded with zeros (the
         * packed filter is zero there too). */
        for (int32_t g = 0; g < groups4; ++g) {
            uint32_t v;
            if (4 * g + 4 <= depth) {
                v = kiln_load_s8x4(row + 4 * g);
            } else {
                int8_t tail[4] = {0, 0, 0, 0};
                memcpy(tail, row + 4 * g, (size_t)(depth - 4 * g));
                v = kiln_load_s8x4(tail);
            }
            col[2 * g] = kiln_sxtb16(v);
            col[2 * g + 1] = kiln_sxtb16_ror8(v);
        }
        int8_t *out = output + (size_t)bt * (size_t)units;
        const uint32_t *w = (const uint32_t *)filter;
        int32_t u = 0;
        for (; u + 4 <= units; u += 4) {
            int32_t acc[4] = {bias[u], bias[u + 1], bias[u + 2], bias[u + 3]};
            dot_4rows(w, col, groups4, acc);
            w += 8 * groups4;
            for (int32_t j = 0; j < 4; ++j) {
                out[u + j] = kiln_output_fast(acc[j], &quant[u + j], out_off, act_min, act_max, 0);
            }
        }
        for (; u < units; ++u) {
            const int32_t acc = dot_1row(w, col, groups4, bias[u]);
            w += 2 * groups4;
            out[u] = kiln_output_fast(acc, &quant[u], out_off, act_min, act_max, 0);
        }
    }
    return KILN_OK;
}
