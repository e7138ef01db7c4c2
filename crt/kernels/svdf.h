/*
 * svdf.h - int8 SVDF (singular value decomposition filter), with its state.
 *
 * Layouts (B batches, I inputs, F filters, M memory size, rank R, U = F / R
 * units):
 *   input            [B][I]     int8
 *   weights_feature  [F][I]     int8 (zero point ignored, as in TFLite)
 *   weights_time     [F][M]     state type (int16 or int8)
 *   bias             [U]        int32, or NULL for none
 *   state            [B][F][M]  state type; read and written in place, kept
 *                               between calls (the model's persistent state)
 *   output           [B][U]     int8
 *
 * One call is one time step, as TFLite's integer SVDF computes it:
 *   1. the whole state moves one element towards its start (each filter's
 *      memory drops its oldest value);
 *   2. feature: state[b][f][M - 1] = narrow(clamp(requant(sum_i wf[f][i] *
 *      (in[b][i] - input_zp), feature_requant)) + state_zp), the clamp to the
 *      state type's range and the narrowing a two's complement wrap;
 *   3. time: t[b][f] = sum_m wt[f][m] * (state[b][f][m] - state_zp);
 *   4. out[b][u] = clamp(requant(bias[u] + sum_r t[b][u * R + r],
 *      output_requant) + output_zp, -128, 127).
 * Every sum wraps modulo 2^32 as TFLite's int32 accumulators do, so results
 * are bit-exact with tflite-micro whatever the data. The fused activation is
 * not applied: TFLite's integer kernels leave it to the output quantization
 * (the converter gives a RELU SVDF an output range that starts at 0).
 */
#ifndef KILN_SVDF_H
#define KILN_SVDF_H

#include "kiln_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t batches;              /* B >= 1 */
    int32_t input_size;           /* I >= 1 */
    int32_t filters;              /* F >= 1, a multiple of rank */
    int32_t memory_size;          /* M >= 1 */
    int32_t rank;                 /* R >= 1 */
    int32_t input_zero_point;     /* [-128, 127] */
    int32_t state_zero_point;     /* within the state type's range */
    int32_t output_zero_point;    /* [-128, 127] */
    kiln_requant_t feature_requant;  /* input * feature weight -> state scale */
    kiln_requant_t output_requant;   /* state * time weight -> output scale */
} kiln_svdf_params_t;

/* SVDF with int16 state and time weights (what TF's converter writes). Returns
 * KILN_ERR_ARG on a dimension or zero point outside the ranges above. */
kiln_status_t kiln_svdf_s8_state_s16(const kiln_svdf_params_t *params,
                                     const int8_t *input, const int8_t *weights_feature,
                                     const int16_t *weights_time, const int32_t *bias,
                                     int16_t *state, int8_t *output);

/* SVDF with int8 state and time weights (tflite-micro's int8 variant). */
kiln_status_t kiln_svdf_s8_state_s8(const kiln_svdf_params_t *params,
                                    const int8_t *input, const int8_t *weights_feature,
                                    const int8_t *weights_time, const int32_t *bias,
                                    int8_t *state, int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* KILN_SVDF_H */
