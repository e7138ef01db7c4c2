/*
 * lstm.h - UNIDIRECTIONAL_SEQUENCE_LSTM with int8 activations, int8 weights,
 * int32 biases and an int16 cell state, as tflite-micro's integer LSTM
 * (kernels/lstm_eval.h: the standard Keras LSTM, no peephole, projection,
 * layer norm or CIFG).
 *
 * Per time step and batch row, for every unit u of the state:
 *
 *   gate_g[u] = act_g(sat16(FC_in_g(x)[u] + FC_rec_g(h)[u]))     g = f, i, c, o
 *
 * each FC an int32 dot product requantized to int16 Q3.12 and clamped; act
 * is sigmoid for f, i, o and tanh for c, int16 Q3.12 -> Q0.15 by TFLM's
 * interpolation in the 256-entry table of sigmoid(i / 24) in Q0.16 (the one
 * int16 LOGISTIC and TANH use; the compiler passes it). Then
 *
 *   cell[u] = clip(sat16(rq(f * cell) + rq(i * c)))             int16, in place
 *   h'[u]   = clamp8(rq(tanh(cell) * o) + hidden_zero_point)
 *
 * rq a requantization (kiln_requantize). The new hidden row h' replaces the
 * hidden state and is the step's output row once every unit is done (the
 * recurrent FCs of the step read the old row). Batch rows are independent,
 * so both layouts run row by row: batch-major input [batches][time][input],
 * time-major [time][batches][input]; the output has the input's layout with
 * state_size values per step.
 */
#ifndef KILN_LSTM_H
#define KILN_LSTM_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One gate: its two fully connected layers, weights row-major [unit][depth].
 * The biases are folded: input_bias = gate bias + input_offset * row sum of
 * input_weights, recurrent_bias = hidden_offset * row sum of
 * recurrent_weights, so each dot product reads the raw int8 values. */
typedef struct {
    const int8_t *input_weights;      /* [state_size][input_size] */
    const int8_t *recurrent_weights;  /* [state_size][state_size] */
    const int32_t *input_bias;        /* [state_size] */
    const int32_t *recurrent_bias;    /* [state_size] */
    kiln_requant_t input_requant;     /* input FC accumulator -> Q3.12 */
    kiln_requant_t recurrent_requant; /* recurrent FC accumulator -> Q3.12 */
} kiln_lstm_gate_s8_t;

typedef struct {
    const uint16_t *sigmoid_table;     /* 256 entries: sigmoid(i / 24) in Q0.16 */
    kiln_lstm_gate_s8_t forget;
    kiln_lstm_gate_s8_t input;
    kiln_lstm_gate_s8_t cell;
    kiln_lstm_gate_s8_t output;
    kiln_requant_t forget_times_cell;  /* Q0.15 x cell -> cell */
    kiln_requant_t input_times_cell;   /* Q0.15 x Q0.15 -> cell */
    kiln_requant_t tanh_times_output;  /* Q0.15 x Q0.15 -> hidden */
    int32_t hidden_zero_point;
    int32_t cell_clip;                 /* cell clamped to [-cell_clip, cell_clip], 0..32767;
                                        -1: no clipping */
    /* tanh(cell): x * cell_tanh_multiplier, rounded right by cell_tanh_shift,
     * is the table input (TFLM's Tanh with the cell scale's power of two). */
    int32_t cell_tanh_multiplier;      /* 3 * 2^k, k in [0, 14] */
    int32_t cell_tanh_shift;           /* [0, 31] */
    int32_t batches;
    int32_t time_steps;
    int32_t input_size;
    int32_t state_size;
    int32_t time_major;                /* 1: input [time][batches][input] */
} kiln_lstm_params_t;

/* Scratch: state_size bytes (the new hidden row). */
int32_t kiln_lstm_s8_get_buffer_size(const kiln_lstm_params_t *params);

/* hidden_state [batches][state_size] and cell_state [batches][state_size] are
 * read and updated in place (the model's variable tensors); output must not
 * overlap any other argument. */
kiln_status_t kiln_lstm_s8(const kiln_context_t *ctx, const kiln_lstm_params_t *params,
                           const int8_t *input, int8_t *hidden_state, int16_t *cell_state,
                           int8_t *output);

/* TFLM's int16 sigmoid and tanh on one value (exposed for tests): Q3.12 in,
 * Q0.15 out; tanh's input scaling as in kiln_lstm_params_t. */
int16_t kiln_lstm_sigmoid_s16(const uint16_t *table, int16_t x);
int16_t kiln_lstm_tanh_s16(const uint16_t *table, int16_t x, int32_t multiplier, int32_t shift);

#ifdef __cplusplus
}
#endif

#endif /* KILN_LSTM_H */
