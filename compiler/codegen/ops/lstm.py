"""Lowering: UNIDIRECTIONAL_SEQUENCE_LSTM, int16 cell state, with int8 activations
(kiln_lstm_s8) or int16 activations and int64 biases (16x8, kiln_lstm_s16).

tflite-micro runs one integer LSTM: the standard (Keras) cell, with all four gates, no
peephole, projection or layer norm (kernels/lstm_eval.cc's ValidateTensorStatus refuses
the rest), hidden and cell state as variable tensors updated in place. Every parameter
is derived here as its Prepare (lstm_eval_common.cc) derives it:

- each gate's two FCs (input → gate, hidden → gate) requantize their int32 accumulator
  (int8) or int64 one (int16, TFLM's int64 MultiplyByQuantizedMultiplier) to int16
  Q3.12 (scale 2^-12) with TFLM's FC multiplier: input_scale × weight_scale / 2^-12 in
  double; only the input FC has a bias;
- the products: forget × cell → cell at 2^-15 · s_cell / s_cell, input × cell gate →
  cell at 2^-30 / s_cell, tanh(cell) × output → hidden at 2^-30 / s_hidden (double);
- tanh(cell) scales its input by the cell scale's power of two p = round(log2 s_cell)
  (TFLite's CheckedLog2, in float32): a left shift 12 + p of the input ×3, or a
  rounding right shift when negative;
- sigmoid and tanh interpolate in the sigmoid table of int16 LOGISTIC and TANH
  (ops/activation.py), passed to the kernel as a constant;
- the cell clip, cell_clip / s_cell in double, truncated to int16 (clipping applies
  whenever cell_clip > 0, even if it quantizes to 0).

The intermediate tensors the converter attaches to the op are not read: TFLM's current
kernel derives every scale from the tensors above.
"""

from __future__ import annotations

import math

import numpy as np

from ...numerics import quantize_multiplier
from ..bounds import Extreme, extremes
from ..lowering import LayerCode, LowerCtx, c_float, lowering, qparams
from .activation import checked_log2, sigmoid_table_u16

# Input positions (tensorflow/lite/kernels/lstm_shared.h).
INPUT = 0
INPUT_WEIGHTS = {"input": 1, "forget": 2, "cell": 3, "output": 4}
RECURRENT_WEIGHTS = {"input": 5, "forget": 6, "cell": 7, "output": 8}
PEEPHOLE = (9, 10, 11)
BIASES = {"input": 12, "forget": 13, "cell": 14, "output": 15}
PROJECTION = (16, 17)
HIDDEN_STATE, CELL_STATE = 18, 19
LAYER_NORM = (20, 21, 22, 23)
GATES = ("forget", "input", "cell", "output")

_Q3_12 = 2.0 ** -12           # gate pre-activations
_Q0_15 = 2.0 ** -15           # gate outputs


def cell_scale_power(cell_scale: float) -> int:
    """CheckedLog2's exponent of the cell scale: TFLM's LSTM uses it whether or not the
    scale is a power of two."""
    return checked_log2(cell_scale)[0]


def tanh_scaling(power: int) -> tuple[int, int]:
    """(multiplier, right shift) of TFLM's int16 Tanh for an input of scale 2^power."""
    left = 15 + power - 3
    return (3 << left, 0) if left >= 0 else (3, -left)


def _check(ctx: LowerCtx) -> str | None:
    op = ctx.op
    if len(op.inputs) != 24 or len(op.outputs) != 1:
        return f"expected 24 inputs and 1 output, got {len(op.inputs)} and {len(op.outputs)}"
    missing = [name for name, i in {**{f"input-to-{g} weights": INPUT_WEIGHTS[g] for g in GATES},
                                     **{f"recurrent-to-{g} weights": RECURRENT_WEIGHTS[g]
                                        for g in GATES},
                                     **{f"{g} gate bias": BIASES[g] for g in GATES}}.items()
               if ctx.input(i) is None]
    present = [what for what, idx in (("peephole (cell-to-gate weights)", PEEPHOLE),
                                      ("projection", PROJECTION),
                                      ("layer normalization", LAYER_NORM))
               if any(ctx.input(i) is not None for i in idx)]
    if ctx.input(INPUT_WEIGHTS["input"]) is None:
        present.insert(0, "CIFG (coupled input and forget gates: no input gate weights)")
    if op.options.get("diagonal_recurrent_tensors"):
        present.append("diagonal recurrent weights")
    if present:
        return (f"LSTM variants are not supported: {', '.join(present)} "
                "(tflite-micro's integer LSTM runs the standard cell only)")
    if missing:
        return f"missing {', '.join(missing)}"
    x, y = ctx.input(INPUT), ctx.output(0)
    h, c = ctx.input(HIDDEN_STATE), ctx.input(CELL_STATE)
    if x is None or h is None or c is None:
        return "missing input, hidden state or cell state"
    if not (h.is_variable and c.is_variable):
        return "the hidden and cell states must be variable tensors"
    if x.dtype not in ("int8", "int16") or y.dtype != x.dtype or h.dtype != x.dtype:
        return (f"{x.dtype} input, {h.dtype} hidden state and {y.dtype} output are not "
                "supported (all int8, or all int16)")
    wide = x.dtype == "int16"
    if c.dtype != "int16":
        return f"{c.dtype} cell state is not supported (int16 only)"
    weights = [ctx.input(i) for i in (*INPUT_WEIGHTS.values(), *RECURRENT_WEIGHTS.values())]
    biases = [ctx.input(i) for i in BIASES.values()]
    for w in weights:
        if w.dtype != "int8" or not w.is_const or w.quant is None:
            return f"weights {w.name!r} must be constant int8, got {w.dtype}"
        if w.quant.per_channel:
            return f"per-channel weights {w.name!r} are not supported (TFLM: per tensor)"
        if qparams(w)[1] != 0:
            return f"weights {w.name!r} have zero point {qparams(w)[1]} (must be 0)"
    bias_type = "int64" if wide else "int32"
    for b in biases:
        if b.dtype != bias_type or not b.is_const:
            return (f"bias {b.name!r} must be constant {bias_type} with {x.dtype} "
                    f"activations, got {b.dtype}")
    for t in (x, y, h, c):
        if t.quant is None or t.quant.per_channel:
            return f"tensor {t.name!r} needs per-tensor quantization"
    for t in (x, y, h, c, *weights):
        if not (math.isfinite(qparams(t)[0]) and qparams(t)[0] > 0):
            return f"tensor {t.name!r} has scale {qparams(t)[0]} (must be finite and > 0)"
        if wide and qparams(t)[1] != 0:
            return f"int16 tensor {t.name!r} has zero point {qparams(t)[1]} (must be 0)"
    if qparams(c)[1] != 0:
        return f"cell state zero point {qparams(c)[1]} (must be 0)"
    o = op.options
    if o.get("fused_activation_function") != "TANH":
        return (f"cell activation {o.get('fused_activation_function')} is not supported "
                "(TANH only, as tflite-micro)")
    if not float(o.get("cell_clip", 0.0)) >= 0.0:
        return f"cell_clip {o.get('cell_clip')} must be >= 0"
    if len(x.shape) != 3 or len(y.shape) != 3:
        return f"input and output must be 3-D, got {list(x.shape)} and {list(y.shape)}"
    batches, steps, depth = _sizes(ctx)
    state = int(weights[1].shape[0]) if weights[1].shape else 0
    if state < 1 or depth < 1:
        return f"empty state or input ({state} units, input size {depth})"
    for w in weights[:4]:
        if tuple(w.shape) != (state, depth):
            return f"input weights {list(w.shape)} != [{state}, {depth}]"
    for w in weights[4:]:
        if tuple(w.shape) != (state, state):
            return f"recurrent weights {list(w.shape)} != [{state}, {state}]"
    for b in biases:
        if tuple(b.shape) != (state,):
            return f"bias {list(b.shape)} != [{state}]"
    if h.size != batches * state or c.size != batches * state:
        return f"states of {h.size} and {c.size} values != {batches} batches x {state} units"
    if tuple(y.shape) != (x.shape[0], x.shape[1], state):
        return f"output {list(y.shape)} != {[x.shape[0], x.shape[1], state]}"
    power = cell_scale_power(qparams(c)[0])
    if not -40 <= power <= 2:
        return f"cell state scale {qparams(c)[0]:.6g} (2^{power}) is outside [2^-40, 2^2]"
    for name, (mult, shift) in _multipliers(ctx).items():
        # kiln_requantize64 (the int16 FCs) takes shifts up to 7, kiln_requantize 30.
        if shift > (7 if wide and name.endswith(("_input", "_recurrent")) else 30):
            return f"{name} scale is too large (multiplier shift {shift})"
    if wide:
        # TFLM's int64 requantization takes accumulators below 2^47.
        for g in GATES:
            for w, bias in ((ctx.input(INPUT_WEIGHTS[g]), ctx.input(BIASES[g]).data),
                            (ctx.input(RECURRENT_WEIGHTS[g]), 0)):
                worst = np.abs(bias) + 32768 * np.abs(w.data.astype(np.int64)).sum(axis=1)
                if int(worst.max()) >= 1 << 47:
                    return f"{g} gate: the int64 accumulator could reach 2^47 ({int(worst.max())})"
        return None
    # The accumulators: |bias + input_offset · row sum| + 128 · sum|w|, as kiln folds them.
    for g in GATES:
        for w, offset, bias in ((ctx.input(INPUT_WEIGHTS[g]), -qparams(x)[1],
                                 ctx.input(BIASES[g]).data),
                                (ctx.input(RECURRENT_WEIGHTS[g]), -qparams(h)[1], 0)):
            ws = w.data.astype(np.int64)
            worst = np.abs(bias + offset * ws.sum(axis=1)) + 256 * np.abs(ws).sum(axis=1)
            if int(worst.max()) > (1 << 31) - 1:
                return (f"{g} gate: the int32 accumulator could overflow "
                        f"(worst case {int(worst.max())})")
    return None


def _sizes(ctx: LowerCtx) -> tuple[int, int, int]:
    """(batches, time steps, input size) from the input's layout."""
    x = ctx.input(INPUT)
    if ctx.op.options.get("time_major"):
        return int(x.shape[1]), int(x.shape[0]), int(x.shape[2])
    return int(x.shape[0]), int(x.shape[1]), int(x.shape[2])


def _fc_multiplier(in_scale: float, w_scale: float) -> tuple[int, int]:
    """A gate FC's multiplier onto Q3.12: input_scale × weight_scale / 2^-12 with the
    product in double, as tflite-micro's CalculateOpDataFullyConnected derives it (measured:
    on scales where a float32 product rounds the multiplier differently, TFLM's FC and LSTM
    outputs follow the double one, int8 and int16 alike)."""
    return quantize_multiplier(float(np.float32(in_scale)) * float(np.float32(w_scale)) / _Q3_12)


def _multipliers(ctx: LowerCtx) -> dict[str, tuple[int, int]]:
    x, h, c = ctx.input(INPUT), ctx.input(HIDDEN_STATE), ctx.input(CELL_STATE)
    s_x, s_h, s_c = qparams(x)[0], qparams(h)[0], qparams(c)[0]
    out = {}
    for g in GATES:
        out[f"{g}_input"] = _fc_multiplier(s_x, qparams(ctx.input(INPUT_WEIGHTS[g]))[0])
        out[f"{g}_recurrent"] = _fc_multiplier(s_h, qparams(ctx.input(RECURRENT_WEIGHTS[g]))[0])
    # CreateInterGateMulParams: float32 scales multiplied and divided in double.
    s_c, s_h = float(np.float32(s_c)), float(np.float32(s_h))
    out["forget_times_cell"] = quantize_multiplier(_Q0_15 * s_c / s_c)
    out["input_times_cell"] = quantize_multiplier(_Q0_15 * _Q0_15 / s_c)
    out["tanh_times_output"] = quantize_multiplier(_Q0_15 * _Q0_15 / s_h)
    return out


def quantized_cell_clip(cell_clip: float, cell_scale: float) -> int:
    """CreateLstmCellStateInfo: clip / scale in double, clamped to int16, truncated; -1
    (kiln's "no clipping") when cell_clip is 0."""
    if not cell_clip > 0.0:
        return -1
    q = min(max(float(np.float32(cell_clip)) / float(np.float32(cell_scale)), -32768.0), 32767.0)
    return int(math.trunc(q))


@extremes("UNIDIRECTIONAL_SEQUENCE_LSTM")
def _lstm_extremes(ctx: LowerCtx) -> list[Extreme]:
    """lstm.c's index arithmetic: the row (b * time_steps + t, or t * batches + b) times
    the input and state sizes, and the weight row offsets u * depth; each bounded by a
    tensor's size, listed so that a hostile shape is named here."""
    batches, steps, depth = _sizes(ctx)
    state = int(ctx.input(INPUT_WEIGHTS["forget"]).shape[0])
    rows = batches * steps
    return [("row * input_size", rows * depth), ("row * state_size", rows * state),
            ("u * input_size", state * depth), ("u * state_size", state * state),
            ("b * state_size", batches * state)]


def _gate_c(ctx: LowerCtx, g: str, mults: dict[str, tuple[int, int]]) -> str:
    """One gate's initializer: kiln_lstm_gate_s8_t (folded int32 biases) or _s16_t."""
    x, h = ctx.input(INPUT), ctx.input(HIDDEN_STATE)
    w_in, w_rec = ctx.input(INPUT_WEIGHTS[g]), ctx.input(RECURRENT_WEIGHTS[g])
    mi, si = mults[f"{g}_input"]
    mr, sr = mults[f"{g}_recurrent"]
    requants = f"{{{mi}, {si}}}, {{{mr}, {sr}}}"
    if x.dtype == "int16":
        return (f"    .{g}_gate = {{{ctx.ptr(w_in)}, {ctx.ptr(w_rec)}, "
                f"{ctx.ptr(ctx.input(BIASES[g]))}, {requants}}},\n")
    bias = ctx.input(BIASES[g]).data.astype(np.int64)
    # TFLM adds the input offset inside the dot product; folded here (lstm.h).
    in_bias = bias - qparams(x)[1] * w_in.data.astype(np.int64).sum(axis=1)
    rec_bias = -qparams(h)[1] * w_rec.data.astype(np.int64).sum(axis=1)
    in_b = ctx.const(f"{g}_input_bias", in_bias.astype(np.int32), "int32_t",
                     f"{g} gate bias + input offset x row sums of the input weights")
    rec_b = ctx.const(f"{g}_recurrent_bias", rec_bias.astype(np.int32), "int32_t",
                      f"hidden offset x row sums of the recurrent-to-{g} weights")
    return f"    .{g}_gate = {{{ctx.ptr(w_in)}, {ctx.ptr(w_rec)}, {in_b}, {rec_b}, {requants}}},\n"


@lowering("UNIDIRECTIONAL_SEQUENCE_LSTM", check=_check)
def lower_lstm(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(INPUT), ctx.output(0)
    h, c = ctx.input(HIDDEN_STATE), ctx.input(CELL_STATE)
    o = ctx.op.options
    variant = "s16" if x.dtype == "int16" else "s8"
    batches, steps, depth = _sizes(ctx)
    state = int(ctx.input(INPUT_WEIGHTS["forget"]).shape[0])
    mults = _multipliers(ctx)
    s_c = qparams(c)[0]
    power = cell_scale_power(s_c)
    tanh_mult, tanh_shift = tanh_scaling(power)
    clip = quantized_cell_clip(float(o.get("cell_clip", 0.0)), s_c)
    table = ctx.const("sigmoid_table", sigmoid_table_u16(), "uint16_t",
                      "sigmoid(i / 24) in Q0.16, i = 0..255")
    (fm, fs), (im, is_), (tm, ts) = (mults[k] for k in
                                     ("forget_times_cell", "input_times_cell", "tanh_times_output"))
    lines = [f"static const kiln_lstm_{variant}_params_t params = {{\n",
             "    .cell = {\n"
             f"        .sigmoid_table = {table},\n"
             f"        .forget_times_cell = {{{fm}, {fs}}},\n"
             f"        .input_times_cell = {{{im}, {is_}}},\n"
             f"        .tanh_times_output = {{{tm}, {ts}}},\n"
             f"        .hidden_zero_point = {qparams(h)[1]},\n"
             f"        .cell_clip = {clip},\n"
             f"        .cell_tanh_multiplier = {tanh_mult},\n"
             f"        .cell_tanh_shift = {tanh_shift},\n"
             f"        .batches = {batches},\n"
             f"        .time_steps = {steps},\n"
             f"        .input_size = {depth},\n"
             f"        .state_size = {state},\n"
             f"        .time_major = {1 if o.get('time_major') else 0},\n"
             "    },\n"]
    lines += [_gate_c(ctx, g, mults) for g in GATES]
    scratch = state * (2 if variant == "s16" else 1)
    kernel = f"kiln_lstm_{variant}"
    lines.append("};\n"
                 f"const kiln_context_t ctx = {{scratch, {scratch}}};\n"
                 f"return {kernel}(&ctx, &params, {ctx.ptr(x)}, {ctx.ptr(h)}, {ctx.ptr(c)}, "
                 f"{ctx.ptr(y)});\n")
    macs = batches * steps * 4 * state * (depth + state)
    summary = (f"{state} units, {steps} steps x {batches} batches"
               f"{' (time major)' if o.get('time_major') else ''}, cell scale 2^{power}"
               + (f", cell clip {c_float(float(o['cell_clip']))[:-1]}" if clip >= 0 else ""))
    return LayerCode(kernel=kernel, body="".join(lines), scratch_bytes=scratch,
                     macs=macs, summary=summary)
