/*
 * lstm.h - UNIDIRECTIONAL_SEQUENCE_LSTM with int8 activations, int8 weights
 * and int32 biases (s8), or int16 activations, int8 weights and int64 biases
 * (s16, "16x8"), and an int16 cell state, as tflite-micro's integer LSTM
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
 *   h'[u]   = clamp(rq(tanh(cell) * o) + hidden_zero_point)   int8 or int16
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

/* What both variants share: the cell update and the sizes. */
typedef struct {
    const uint16_t *sigmoid_table;     /* 256 entries: sigmoid(i / 24) in Q0.16 */
    kiln_requant_t forget_times_cell;  /* Q0.15 x cell -> cell */
    kiln_requant_t input_times_cell;   /* Q0.15 x Q0.15 -> cell */
    kiln_requant_t tanh_times_output;  /* Q0.15 x Q0.15 -> hidden */
    int32_t hidden_zero_point;         /* 0 for int16 activations */
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
} kiln_lstm_cell_t;

/* int8 activations: one gate's two fully connected layers, weights row-major
 * [unit][depth], int32 accumulators. The biases are folded: input_bias = gate
 * bias + input_offset * row sum of input_weights, recurrent_bias =
 * hidden_offset * row sum of recurrent_weights, so each dot product reads the
 * raw int8 values. */
typedef struct {
    const int8_t *input_weights;      /* [state_size][input_size] */
    const int8_t *recurrent_weights;  /* [state_size][state_size] */
    const int32_t *input_bias;        /* [state_size] */
    const int32_t *recurrent_bias;    /* [state_size] */
    kiln_requant_t input_requant;     /* input FC accumulator -> Q3.12 */
    kiln_requant_t recurrent_requant; /* recurrent FC accumulator -> Q3.12 */
} kiln_lstm_gate_s8_t;

typedef struct {
    kiln_lstm_cell_t cell;
    kiln_lstm_gate_s8_t forget_gate;
    kiln_lstm_gate_s8_t input_gate;
    kiln_lstm_gate_s8_t cell_gate;
    kiln_lstm_gate_s8_t output_gate;
} kiln_lstm_s8_params_t;

/* int16 activations (16x8, zero points 0): int64 accumulators requantized by
 * kiln_requantize64 (the caller bounds them below 2^47); the input FC adds the
 * int64 gate bias, the recurrent FC has none (as TFLM). */
typedef struct {
    const int8_t *input_weights;      /* [state_size][input_size] */
    const int8_t *recurrent_weights;  /* [state_size][state_size] */
    const int64_t *bias;              /* [state_size] */
    kiln_requant_t input_requant;     /* shift in [-31, 7] */
    kiln_requant_t recurrent_requant;
} kiln_lstm_gate_s16_t;

typedef struct {
    kiln_lstm_cell_t cell;
    kiln_lstm_gate_s16_t forget_gate;
    kiln_lstm_gate_s16_t input_gate;
    kiln_lstm_gate_s16_t cell_gate;
    kiln_lstm_gate_s16_t output_gate;
} kiln_lstm_s16_params_t;

/* Scratch: the new hidden row, state_size activations (bytes: state_size for
 * s8, 2 * state_size for s16). */
int32_t kiln_lstm_s8_get_buffer_size(const kiln_lstm_s8_params_t *params);
int32_t kiln_lstm_s16_get_buffer_size(const kiln_lstm_s16_params_t *params);

/* hidden_state [batches][state_size] and cell_state [batches][state_size] are
 * read and updated in place (the model's variable tensors); output must not
 * overlap any other argument. */
kiln_status_t kiln_lstm_s8(const kiln_context_t *ctx, const kiln_lstm_s8_params_t *params,
                           const int8_t *input, int8_t *hidden_state, int16_t *cell_state,
                           int8_t *output);
kiln_status_t kiln_lstm_s16(const kiln_context_t *ctx, const kiln_lstm_s16_params_t *params,
                            const int16_t *input, int16_t *hidden_state, int16_t *cell_state,
                            int16_t *output);

/* TFLM's int16 sigmoid and tanh on one value (exposed for tests): Q3.12 in,
 * Q0.15 out; tanh's input scaling as in kiln_lstm_params_t. */
int16_t kiln_lstm_sigmoid_s16(const uint16_t *table, int16_t x);
int16_t kiln_lstm_tanh_s16(const uint16_t *table, int16_t x, int32_t multiplier, int32_t shift);

#ifdef __cplusplus
}
#endif

#endif /* KILN_LSTM_H */
