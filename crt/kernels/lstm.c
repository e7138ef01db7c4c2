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

/* The int8 dot products in packed dual MACs (SMLAD on two int16 lanes, four
 * int8 values per word) on cores with the DSP extension; elsewhere a plain
 * loop (the packed primitives' plain-C twins would be slower there). Tests
 * define KILN_LSTM_PACKED to run the packed loop on the host too. */
#if defined(__ARM_FEATURE_DSP) && !defined(KILN_LSTM_PACKED)
#define KILN_LSTM_PACKED
#endif
#ifdef KILN_LSTM_PACKED
#include "conv_dsp.h"     /* kiln_load_s8x4, kiln_sxtb16(_ror8), kiln_smlad */
#endif

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

/* Four dot products of one input vector with the same row of four weight
 * matrices (one per gate), added to acc: each input value is loaded once for
 * four products. */
static inline void dot4_s8(const int8_t *w0, const int8_t *w1, const int8_t *w2,
                           const int8_t *w3, const int8_t *x, int32_t depth, int32_t acc[4])
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    int32_t k = 0;
#ifdef KILN_LSTM_PACKED
    /* Lanes (k, k+2) then (k+1, k+3) of both operands (conv_dsp.h); the
     * lowering bounds every partial sum within int32, so SMLAD never wraps. */
    for (; k + 4 <= depth; k += 4) {
        const uint32_t xv = kiln_load_s8x4(x + k);
        const uint32_t x02 = kiln_sxtb16(xv), x13 = kiln_sxtb16_ror8(xv);
        uint32_t wv = kiln_load_s8x4(w0 + k);
        a0 = kiln_smlad(kiln_sxtb16_ror8(wv), x13, kiln_smlad(kiln_sxtb16(wv), x02, a0));
        wv = kiln_load_s8x4(w1 + k);
        a1 = kiln_smlad(kiln_sxtb16_ror8(wv), x13, kiln_smlad(kiln_sxtb16(wv), x02, a1));
        wv = kiln_load_s8x4(w2 + k);
        a2 = kiln_smlad(kiln_sxtb16_ror8(wv), x13, kiln_smlad(kiln_sxtb16(wv), x02, a2));
        wv = kiln_load_s8x4(w3 + k);
        a3 = kiln_smlad(kiln_sxtb16_ror8(wv), x13, kiln_smlad(kiln_sxtb16(wv), x02, a3));
    }
#endif
    for (; k < depth; ++k) {
        const int32_t v = x[k];
        a0 += (int32_t)w0[k] * v;
        a1 += (int32_t)w1[k] * v;
        a2 += (int32_t)w2[k] * v;
        a3 += (int32_t)w3[k] * v;
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

static inline void dot4_s16(const int8_t *w0, const int8_t *w1, const int8_t *w2,
                            const int8_t *w3, const int16_t *x, int32_t depth, int64_t acc[4])
{
    int64_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    for (int32_t k = 0; k < depth; ++k) {
        const int32_t v = x[k];
        a0 += (int32_t)w0[k] * v;
        a1 += (int32_t)w1[k] * v;
        a2 += (int32_t)w2[k] * v;
        a3 += (int32_t)w3[k] * v;
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* The pre-activations of unit u for the gates in TFLM's order (forget, input,
 * cell, output): each gate's input FC and recurrent FC, each requantized to
 * int16 and clamped, then added with int16 saturation. */
static void gates_s8(const kiln_lstm_s8_params_t *p, int32_t u, const int8_t *x,
                     const int8_t *h, int16_t pre[4])
{
    const kiln_lstm_gate_s8_t *g[4] = {&p->forget_gate, &p->input_gate, &p->cell_gate,
                                       &p->output_gate};
    const int32_t in = p->cell.input_size, n = p->cell.state_size;
    int32_t from_input[4], from_hidden[4];
    for (int i = 0; i < 4; ++i) {
        from_input[i] = g[i]->input_bias[u];
        from_hidden[i] = g[i]->recurrent_bias[u];
    }
    dot4_s8(g[0]->input_weights + u * in, g[1]->input_weights + u * in,
            g[2]->input_weights + u * in, g[3]->input_weights + u * in, x, in, from_input);
    dot4_s8(g[0]->recurrent_weights + u * n, g[1]->recurrent_weights + u * n,
            g[2]->recurrent_weights + u * n, g[3]->recurrent_weights + u * n, h, n, from_hidden);
    for (int i = 0; i < 4; ++i) {
        const kiln_requant_t *ri = &g[i]->input_requant, *rh = &g[i]->recurrent_requant;
        pre[i] = (int16_t)clamp_s16(
            clamp_s16(kiln_requantize(from_input[i], ri->multiplier, ri->shift)) +
            clamp_s16(kiln_requantize(from_hidden[i], rh->multiplier, rh->shift)));
    }
}

static void gates_s16(const kiln_lstm_s16_params_t *p, int32_t u, const int16_t *x,
                      const int16_t *h, int16_t pre[4])
{
    const kiln_lstm_gate_s16_t *g[4] = {&p->forget_gate, &p->input_gate, &p->cell_gate,
                                        &p->output_gate};
    const int32_t in = p->cell.input_size, n = p->cell.state_size;
    int64_t from_input[4], from_hidden[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; ++i) {
        from_input[i] = g[i]->bias[u];
    }
    dot4_s16(g[0]->input_weights + u * in, g[1]->input_weights + u * in,
             g[2]->input_weights + u * in, g[3]->input_weights + u * in, x, in, from_input);
    dot4_s16(g[0]->recurrent_weights + u * n, g[1]->recurrent_weights + u * n,
             g[2]->recurrent_weights + u * n, g[3]->recurrent_weights + u * n, h, n,
             from_hidden);
    for (int i = 0; i < 4; ++i) {
        const kiln_requant_t *ri = &g[i]->input_requant, *rh = &g[i]->recurrent_requant;
        pre[i] = (int16_t)clamp_s16(
            clamp_s16(kiln_requantize64(from_input[i], ri->multiplier, ri->shift)) +
            clamp_s16(kiln_requantize64(from_hidden[i], rh->multiplier, rh->shift)));
    }
}

static inline int32_t mul_rq(int32_t a, int32_t b, const kiln_requant_t *rq)
{
    return kiln_requantize(a * b, rq->multiplier, rq->shift);
}

/* The cell update of one unit from its four gate pre-activations (forget,
 * input, cell, output); returns the new hidden value, requantized and offset
 * but not yet clamped to the activation type. */
static inline int32_t update_unit(const kiln_lstm_cell_t *p, const int16_t pre[4], int16_t *cell)
{
    const uint16_t *table = p->sigmoid_table;
    const int32_t f = kiln_lstm_sigmoid_s16(table, pre[0]);
    const int32_t i = kiln_lstm_sigmoid_s16(table, pre[1]);
    const int32_t g = kiln_lstm_tanh_s16(table, pre[2], 3, 0);
    const int32_t o = kiln_lstm_sigmoid_s16(table, pre[3]);
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
                int16_t pre[4];
                gates_s8(params, u, x, h, pre);
                new_hidden[u] = (int8_t)kiln_clamp(update_unit(p, pre, &cell[u]), INT8_MIN,
                                                   INT8_MAX);
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
                int16_t pre[4];
                gates_s16(params, u, x, h, pre);
                new_hidden[u] = (int16_t)clamp_s16(update_unit(p, pre, &cell[u]));
            }
            memcpy(h, new_hidden, row_bytes);
            memcpy(output + row * p->state_size, new_hidden, row_bytes);
        }
    }
    return KILN_OK;
}
