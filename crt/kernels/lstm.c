/*
 * lstm.c - int8 and int16 (16x8) UNIDIRECTIONAL_SEQUENCE_LSTM with an int16 cell
 * state (see lstm.h).
 *
 * One unit at a time: its four gates, its cell update and its new hidden value
 * depend on no other unit of the step except through the old hidden row, which
 * stays untouched until the step's last unit is done (the new row is built in
 * the scratch). The arithmetic is tflite-micro's, step by step: int32 (s8)
 * or int64 (s16) dot products, requantization to int16 Q3.12, saturating
 * int16 additions, the table-interpolated int16 sigmoid and tanh, and
 * requantized int16 products.
 */
#include "lstm.h"

#include <string.h>

#include "kiln_math.h"

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
int16_t kiln_lstm_sigmoid_s16(const uint16_t *table, int16_t x)
{
    const int32_t v = 3 * (int32_t)x;
    const uint32_t a = (uint32_t)(v < 0 ? -v : v);
    const uint32_t index = a >> 9;
    uint32_t r;
    if (index >= 255u) {
        r = UINT32_C(0x7FFF) << 10;
    } else {
        const uint32_t lo = table[index];
        const uint32_t hi = table[index + 1u];
        r = (lo << 9) + (a & 0x1FFu) * (hi - lo);     /* the table increases: hi >= lo */
    }
    /* sigmoid(-x) = 1 - sigmoid(x); round to Q0.15 (r < 2^25 in both branches). */
    r = v >= 0 ? r + (1u << 9) : (UINT32_C(1) << 25) - r + (1u << 9) - 1u;
    return (int16_t)(r >> 10);
}

/* tanh through the sigmoid table: the scaled input v indexes it with 8
 * fractional bits (twice the sigmoid's argument), and 2 sigmoid - 1 is
 * formed in the 2^23 offset below. */
int16_t kiln_lstm_tanh_s16(const uint16_t *table, int16_t x, int32_t multiplier, int32_t shift)
{
    const int32_t rounding = shift > 0 ? (INT32_C(1) << (shift - 1)) : 0;
    const int32_t v = floor_shift((int32_t)x * multiplier + rounding, shift);
    const uint32_t a = (uint32_t)(v < 0 ? -v : v);
    const uint32_t index = a >> 8;
    int32_t r;
    if (index >= 255u) {
        r = (int32_t)(UINT32_C(0xFFFF) << 8);
    } else {
        const uint32_t lo = table[index];
        const uint32_t hi = table[index + 1u];
        r = (int32_t)((lo << 8) + (a & 0xFFu) * (hi - lo));
    }
    r = v >= 0 ? r - (INT32_C(1) << 23) + (1 << 7) : -r + (INT32_C(1) << 23) + (1 << 7) - 1;
    return (int16_t)floor_shift(r, 8);
}

/* A requantized int32 dot product of one weight row, clamped to int16. */
static inline int32_t fc_s8(const int8_t *weights, const int8_t *x, int32_t depth,
                            int32_t bias, const kiln_requant_t *rq)
{
    int32_t acc = bias;
    for (int32_t k = 0; k < depth; ++k) {
        acc += (int32_t)weights[k] * (int32_t)x[k];
    }
    return clamp_s16(kiln_requantize(acc, rq->multiplier, rq->shift));
}

static inline int32_t fc_s16(const int8_t *weights, const int16_t *x, int32_t depth,
                             int64_t bias, const kiln_requant_t *rq)
{
    int64_t acc = bias;
    for (int32_t k = 0; k < depth; ++k) {
        acc += (int32_t)weights[k] * (int32_t)x[k];
    }
    return clamp_s16(kiln_requantize64(acc, rq->multiplier, rq->shift));
}

/* One gate's pre-activation of unit u: both FCs, added with int16 saturation. */
static inline int16_t gate_s8(const kiln_lstm_gate_s8_t *g, const kiln_lstm_cell_t *p,
                              int32_t u, const int8_t *x, const int8_t *h)
{
    const int32_t from_input = fc_s8(g->input_weights + u * p->input_size, x, p->input_size,
                                     g->input_bias[u], &g->input_requant);
    const int32_t from_hidden = fc_s8(g->recurrent_weights + u * p->state_size, h,
                                      p->state_size, g->recurrent_bias[u], &g->recurrent_requant);
    return (int16_t)clamp_s16(from_input + from_hidden);
}

static inline int16_t gate_s16(const kiln_lstm_gate_s16_t *g, const kiln_lstm_cell_t *p,
                               int32_t u, const int16_t *x, const int16_t *h)
{
    const int32_t from_input = fc_s16(g->input_weights + u * p->input_size, x, p->input_size,
                                      g->bias[u], &g->input_requant);
    const int32_t from_hidden = fc_s16(g->recurrent_weights + u * p->state_size, h,
                                       p->state_size, 0, &g->recurrent_requant);
    return (int16_t)clamp_s16(from_input + from_hidden);
}

static inline int32_t mul_rq(int32_t a, int32_t b, const kiln_requant_t *rq)
{
    return kiln_requantize(a * b, rq->multiplier, rq->shift);
}

/* The cell update of one unit from its four gate pre-activations (forget,
 * input, cell, output); returns the new hidden value, requantized and offset
 * but not yet clamped to the activation type. */
static inline int32_t update_unit(const kiln_lstm_cell_t *p, int16_t forget, int16_t input,
                                  int16_t cell_gate, int16_t output, int16_t *cell)
{
    const uint16_t *table = p->sigmoid_table;
    const int32_t f = kiln_lstm_sigmoid_s16(table, forget);
    const int32_t i = kiln_lstm_sigmoid_s16(table, input);
    const int32_t g = kiln_lstm_tanh_s16(table, cell_gate, 3, 0);
    const int32_t o = kiln_lstm_sigmoid_s16(table, output);
    /* |products| <= 2^30: int16 x int16. */
    const int32_t kept = clamp_s16(mul_rq(f, *cell, &p->forget_times_cell));
    const int32_t added = clamp_s16(mul_rq(i, g, &p->input_times_cell));
    int32_t c = clamp_s16(kept + added);
    if (p->cell_clip >= 0) {
        c = kiln_clamp(c, -p->cell_clip, p->cell_clip);
    }
    *cell = (int16_t)c;
    const int32_t th = kiln_lstm_tanh_s16(table, (int16_t)c, p->cell_tanh_multiplier,
                                          p->cell_tanh_shift);
    return mul_rq(th, o, &p->tanh_times_output) + p->hidden_zero_point;
}

static int cell_params_valid(const kiln_context_t *ctx, const kiln_lstm_cell_t *p,
                             int32_t scratch_bytes)
{
    return p->batches >= 0 && p->time_steps >= 0 && p->input_size >= 1 &&
           p->state_size >= 1 && p->cell_tanh_shift >= 0 && p->cell_tanh_shift <= 31 &&
           p->cell_clip >= -1 && p->sigmoid_table != NULL && ctx != NULL &&
           ctx->buf != NULL && ctx->size >= scratch_bytes;
}

int32_t kiln_lstm_s8_get_buffer_size(const kiln_lstm_s8_params_t *params)
{
    return params->cell.state_size;
}

int32_t kiln_lstm_s16_get_buffer_size(const kiln_lstm_s16_params_t *params)
{
    return 2 * params->cell.state_size;
}

/* Both kernels walk the batch rows, then the steps, then the units; a row of
 * the input and output is `row` = t * batches + b (time major) or
 * b * time_steps + t. */
kiln_status_t kiln_lstm_s8(const kiln_context_t *ctx, const kiln_lstm_s8_params_t *params,
                           const int8_t *input, int8_t *hidden_state, int16_t *cell_state,
                           int8_t *output)
{
    const kiln_lstm_cell_t *p = &params->cell;
    if (!cell_params_valid(ctx, p, kiln_lstm_s8_get_buffer_size(params))) {
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
                const int32_t v = update_unit(p, gate_s8(&params->forget_gate, p, u, x, h),
                                              gate_s8(&params->input_gate, p, u, x, h),
                                              gate_s8(&params->cell_gate, p, u, x, h),
                                              gate_s8(&params->output_gate, p, u, x, h),
                                              &cell[u]);
                new_hidden[u] = (int8_t)kiln_clamp(v, INT8_MIN, INT8_MAX);
            }
            memcpy(h, new_hidden, (size_t)p->state_size);
            memcpy(output + row * p->state_size, new_hidden, (size_t)p->state_size);
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_lstm_s16(const kiln_context_t *ctx, const kiln_lstm_s16_params_t *params,
                            const int16_t *input, int16_t *hidden_state, int16_t *cell_state,
                            int16_t *output)
{
    const kiln_lstm_cell_t *p = &params->cell;
    if (!cell_params_valid(ctx, p, kiln_lstm_s16_get_buffer_size(params))) {
        return KILN_ERR_ARG;
    }
    int16_t *new_hidden = (int16_t *)ctx->buf;
    const size_t row_bytes = (size_t)p->state_size * sizeof(int16_t);
    for (int32_t b = 0; b < p->batches; ++b) {
        int16_t *h = hidden_state + b * p->state_size;
        int16_t *cell = cell_state + b * p->state_size;
        for (int32_t t = 0; t < p->time_steps; ++t) {
            const int32_t row = p->time_major ? t * p->batches + b : b * p->time_steps + t;
            const int16_t *x = input + row * p->input_size;
            for (int32_t u = 0; u < p->state_size; ++u) {
                const int32_t v = update_unit(p, gate_s16(&params->forget_gate, p, u, x, h),
                                              gate_s16(&params->input_gate, p, u, x, h),
                                              gate_s16(&params->cell_gate, p, u, x, h),
                                              gate_s16(&params->output_gate, p, u, x, h),
                                              &cell[u]);
                new_hidden[u] = (int16_t)clamp_s16(v);
            }
            memcpy(h, new_hidden, row_bytes);
            memcpy(output + row * p->state_size, new_hidden, row_bytes);
        }
    }
    return KILN_OK;
}
