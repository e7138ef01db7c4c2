/*
 * lstm.c - int8 UNIDIRECTIONAL_SEQUENCE_LSTM with an int16 cell state (see lstm.h).
 *
 * One unit at a time: its four gates, its cell update and its new hidden value
 * depend on no other unit of the step except through the old hidden row, which
 * stays untouched until the step's last unit is done (the new row is built in
 * the scratch). The arithmetic is tflite-micro's, step by step: int32 dot
 * products, requantization to int16 Q3.12, saturating int16 additions, the
 * table-interpolated int16 sigmoid and tanh, and requantized int16 products.
 */
#include "lstm.h"

#include <string.h>

#include "kiln_math.h"

/* sigmoid(i / 24) in Q0.16 for i = 0..255, as TFLite and CMSIS-NN tabulate it
 * (sigmoid_table_uint16; a fitted table, not every entry is the rounded
 * function value, so it is data here, not recomputed). The int16 sigmoid and
 * tanh interpolate between neighbouring entries; tanh(x) = 2 sigmoid(2x) - 1. */
static const uint16_t kiln_sigmoid_table[256] = {
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149,
    40794, 41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369,
    47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169,
    53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370,
    60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302,
    62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
    63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786,
    64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079,
    65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234, 65246, 65258,
    65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
    65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498,
    65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522,
    65523, 65523, 65524, 65524, 65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528,
    65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530, 65530, 65530, 65531, 65531,
    65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65534, 65535,
};

/* floor(x / 2^shift) for any sign (an arithmetic right shift, spelled without
 * relying on the implementation-defined >> of negative values). */
static inline int32_t floor_shift(int32_t x, int32_t shift)
{
    if (x >= 0) {
        return x >> shift;
    }
    return -(int32_t)((((uint32_t)0 - (uint32_t)x) + ((UINT32_C(1) << shift) - 1u)) >> shift);
}

static inline int32_t clamp_s16(int32_t x)
{
    return kiln_clamp(x, INT16_MIN, INT16_MAX);
}

/* Q3.12 -> Q0.15: the table input is 3x (the table step is 1/24 and 9
 * fractional bits are interpolated: 2^12 / 2^9 / 24 = 1/3). */
int16_t kiln_lstm_sigmoid_s16(int16_t x)
{
    const int32_t v = 3 * (int32_t)x;
    const uint32_t a = (uint32_t)(v < 0 ? -v : v);
    const uint32_t index = a >> 9;
    uint32_t r;
    if (index >= 255u) {
        r = UINT32_C(0x7FFF) << 10;
    } else {
        const uint32_t lo = kiln_sigmoid_table[index];
        const uint32_t hi = kiln_sigmoid_table[index + 1u];
        r = (lo << 9) + (a & 0x1FFu) * (hi - lo);     /* the table increases: hi >= lo */
    }
    /* sigmoid(-x) = 1 - sigmoid(x); round to Q0.15 (r < 2^25 in both branches). */
    r = v >= 0 ? r + (1u << 9) : (UINT32_C(1) << 25) - r + (1u << 9) - 1u;
    return (int16_t)(r >> 10);
}

/* tanh through the sigmoid table: the scaled input v indexes it with 8
 * fractional bits (twice the sigmoid's argument), and 2 sigmoid - 1 is
 * formed in the 2^23 offset below. */
int16_t kiln_lstm_tanh_s16(int16_t x, int32_t multiplier, int32_t shift)
{
    const int32_t rounding = shift > 0 ? (INT32_C(1) << (shift - 1)) : 0;
    const int32_t v = floor_shift((int32_t)x * multiplier + rounding, shift);
    const uint32_t a = (uint32_t)(v < 0 ? -v : v);
    const uint32_t index = a >> 8;
    int32_t r;
    if (index >= 255u) {
        r = (int32_t)(UINT32_C(0xFFFF) << 8);
    } else {
        const uint32_t lo = kiln_sigmoid_table[index];
        const uint32_t hi = kiln_sigmoid_table[index + 1u];
        r = (int32_t)((lo << 8) + (a & 0xFFu) * (hi - lo));
    }
    r = v >= 0 ? r - (INT32_C(1) << 23) + (1 << 7) : -r + (INT32_C(1) << 23) + (1 << 7) - 1;
    return (int16_t)floor_shift(r, 8);
}

/* A requantized int32 dot product of one weight row, clamped to int16. */
static inline int32_t fc_unit(const int8_t *weights, const int8_t *x, int32_t depth,
                              int32_t bias, const kiln_requant_t *rq)
{
    int32_t acc = bias;
    for (int32_t k = 0; k < depth; ++k) {
        acc += (int32_t)weights[k] * (int32_t)x[k];
    }
    return clamp_s16(kiln_requantize(acc, rq->multiplier, rq->shift));
}

/* One gate's pre-activation of unit u: both FCs, added with int16 saturation. */
static inline int16_t gate_unit(const kiln_lstm_gate_s8_t *g, const kiln_lstm_params_t *p,
                                int32_t u, const int8_t *x, const int8_t *h)
{
    const int32_t from_input = fc_unit(g->input_weights + u * p->input_size, x, p->input_size,
                                       g->input_bias[u], &g->input_requant);
    const int32_t from_hidden = fc_unit(g->recurrent_weights + u * p->state_size, h,
                                        p->state_size, g->recurrent_bias[u],
                                        &g->recurrent_requant);
    return (int16_t)clamp_s16(from_input + from_hidden);
}

static inline int32_t mul_rq(int32_t a, int32_t b, const kiln_requant_t *rq)
{
    return kiln_requantize(a * b, rq->multiplier, rq->shift);
}

int32_t kiln_lstm_s8_get_buffer_size(const kiln_lstm_params_t *params)
{
    return params->state_size;
}

kiln_status_t kiln_lstm_s8(const kiln_context_t *ctx, const kiln_lstm_params_t *params,
                           const int8_t *input, int8_t *hidden_state, int16_t *cell_state,
                           int8_t *output)
{
    const kiln_lstm_params_t *p = params;
    if (p->batches < 0 || p->time_steps < 0 || p->input_size < 1 || p->state_size < 1 ||
        p->cell_tanh_shift < 0 || p->cell_tanh_shift > 31 || p->cell_clip < -1 ||
        ctx == NULL || ctx->buf == NULL || ctx->size < p->state_size) {
        return KILN_ERR_ARG;
    }
    int8_t *new_hidden = (int8_t *)ctx->buf;
    for (int32_t b = 0; b < p->batches; ++b) {
        int8_t *h = hidden_state + b * p->state_size;
        int16_t *cell = cell_state + b * p->state_size;
        for (int32_t t = 0; t < p->time_steps; ++t) {
            const int32_t row = p->time_major ? t * p->batches + b : b * p->time_steps + t;
            const int8_t *x = input + row * p->input_size;
            for (int32_t u = 0; u < p->state_size; ++u) {
                const int32_t f = kiln_lstm_sigmoid_s16(gate_unit(&p->forget, p, u, x, h));
                const int32_t i = kiln_lstm_sigmoid_s16(gate_unit(&p->input, p, u, x, h));
                const int32_t g = kiln_lstm_tanh_s16(gate_unit(&p->cell, p, u, x, h), 3, 0);
                const int32_t o = kiln_lstm_sigmoid_s16(gate_unit(&p->output, p, u, x, h));
                /* |products| <= 2^30: int16 x int16. */
                const int32_t kept = clamp_s16(mul_rq(f, cell[u], &p->forget_times_cell));
                const int32_t added = clamp_s16(mul_rq(i, g, &p->input_times_cell));
                int32_t c = clamp_s16(kept + added);
                if (p->cell_clip >= 0) {
                    c = kiln_clamp(c, -p->cell_clip, p->cell_clip);
                }
                cell[u] = (int16_t)c;
                const int32_t th = kiln_lstm_tanh_s16((int16_t)c, p->cell_tanh_multiplier,
                                                      p->cell_tanh_shift);
                new_hidden[u] = (int8_t)kiln_clamp(
                    mul_rq(th, o, &p->tanh_times_output) + p->hidden_zero_point, -128, 127);
            }
            memcpy(h, new_hidden, (size_t)p->state_size);
            memcpy(output + row * p->state_size, new_hidden, (size_t)p->state_size);
        }
    }
    return KILN_OK;
}
