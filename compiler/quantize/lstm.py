"""UNIDIRECTIONAL_SEQUENCE_LSTM in the quantizer: its float evaluation and its int8 form.

The int8 form is what TF's converter writes for tflite-micro's integer LSTM (8x8→16):
- input and output activations int8 asymmetric from calibration; the hidden state
  variable shares the output's scale and zero point (it is the previous step's output);
- the cell state variable int16 symmetric with a power-of-two scale 2^p / 32768, p the
  smallest integer in [0, 10] with 2^p >= max|cell| over calibration (TFLite's
  GetPowerOfTwoScale), so TFLM's tanh(cell) needs no multiplier;
- the eight weight matrices int8 symmetric per tensor (TFLM's LSTM has no per-channel
  form); the four gate biases int32 at float32(input_scale × input-to-gate weight
  scale), a weight scale raised where its bias would not fit.

With int16 activations (16x8, int16.py) the input, output and hidden state are int16
symmetric and the biases int64 (below int16.BIAS_LIMIT), the rest as above: TFLM's
EvalLstm<int16, int8, int16, int64>.

Calibration runs the float cell from a zero state for each sample (the Keras layer's
computation; the model's variables start at zero) and observes the cell state at every
step, for its scale.
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..ir import Op, Quant
from .int16 import BIAS_LIMIT

LSTM = "UNIDIRECTIONAL_SEQUENCE_LSTM"

# Input positions (tensorflow/lite/kernels/lstm_shared.h), gate order f, i, c, o as TFLM.
_INPUT_WEIGHTS = {"input": 1, "forget": 2, "cell": 3, "output": 4}
_RECURRENT_WEIGHTS = {"input": 5, "forget": 6, "cell": 7, "output": 8}
_BIASES = {"input": 12, "forget": 13, "cell": 14, "output": 15}
_VARIANTS = {"peephole": (9, 10, 11), "projection": (16, 17),
             "layer normalization": (20, 21, 22, 23)}
_HIDDEN, _CELL = 18, 19
_INT32_MAX = (1 << 31) - 1


def _check_standard(op: Op) -> None:
    """Refuse what tflite-micro's integer LSTM cannot run, naming it."""
    present = [name for name, idx in _VARIANTS.items()
               if any(i < len(op.inputs) and op.inputs[i] >= 0 for i in idx)]
    if len(op.inputs) < 20 or op.inputs[_INPUT_WEIGHTS["input"]] < 0:
        present.insert(0, "CIFG (no input gate)")
    if present:
        raise ModelError(f"{op.describe()}: LSTM variant(s) {', '.join(present)} cannot be "
                         "quantized (tflite-micro's integer LSTM runs the standard cell only)")
    act = op.options.get("fused_activation_function")
    if act != "TANH":
        raise ModelError(f"{op.describe()}: cell activation {act} (TANH only)")


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def float_lstm(c) -> np.ndarray:
    """The float LSTM over N samples (`c` is float_eval's op context), each from a zero
    state; the cell state at every step is reported as an observation of the cell
    variable (c.observed), for calibration."""
    op = c.op
    _check_standard(op)
    x = c.x(0).astype(np.float32)                      # (N, *input shape)
    time_major = bool(op.options.get("time_major"))
    if time_major:
        x = np.swapaxes(x, 1, 2)                       # (N, batches, steps, depth)
    n, batches, steps, _ = x.shape
    w_in = {g: c.c(i).astype(np.float32) for g, i in _INPUT_WEIGHTS.items()}
    w_rec = {g: c.c(i).astype(np.float32) for g, i in _RECURRENT_WEIGHTS.items()}
    bias = {g: c.c(i).astype(np.float32) for g, i in _BIASES.items()}
    units = w_in["forget"].shape[0]
    clip = float(op.options.get("cell_clip", 0.0))
    h = np.zeros((n, batches, units), np.float32)
    cell = np.zeros((n, batches, units), np.float32)
    outs, cells = [], []
    for t in range(steps):
        xt = x[:, :, t, :]
        pre = {g: xt @ w_in[g].T + h @ w_rec[g].T + bias[g] for g in _INPUT_WEIGHTS}
        cell = _sigmoid(pre["forget"]) * cell + _sigmoid(pre["input"]) * np.tanh(pre["cell"])
        if clip > 0:
            cell = np.clip(cell, -clip, clip)
        h = _sigmoid(pre["output"]) * np.tanh(cell)
        outs.append(h)
        cells.append(cell)
    y = np.stack(outs, axis=2)                         # (N, batches, steps, units)
    if time_major:
        y = np.swapaxes(y, 1, 2)
    c.observed[op.inputs[_CELL]] = np.stack(cells, axis=1).astype(np.float32)
    return c.shaped(y)


def power_of_two_scale(max_abs: float) -> float:
    """TFLite's int16 state scale: 2^p / 32768, p the smallest in [0, 10] with 2^p >= max_abs."""
    p = 0
    while p < 10 and 2.0 ** p < max_abs:
        p += 1
    return 2.0 ** (p - 15)


def _per_tensor_weights(values: np.ndarray, min_scale: float = 0.0) -> tuple[np.ndarray, float]:
    """Symmetric int8 in [-127, 127] with one float32 scale (at least min_scale)."""
    m = float(np.abs(values).max()) if values.size else 0.0
    scale = float(np.float32(max(m / 127.0 if m > 0 else 1.0, min_scale)))
    q = np.clip(np.sign(values) * np.floor(np.abs(values.astype(np.float64)) / scale + 0.5),
                -127, 127).astype(np.int8)
    return q, scale


def quantize_lstm(rw, op: Op, params: dict[int, tuple[float, int]]) -> None:
    """Rewrite one float LSTM op of the Rewriter `rw` into its int8 form (module doc).
    `params` holds the activations' (scale, zero point); the hidden state's is set to
    the output's, the cell state leaves it (it becomes int16 here)."""
    _check_standard(op)
    g = rw.g
    s_x = np.float32(params[op.inputs[0]][0])
    params[op.inputs[_HIDDEN]] = params[op.outputs[0]]
    cell = g.tensor(op.inputs[_CELL])
    params.pop(cell.id, None)
    stats = rw.cal.stats.get(cell.id)
    max_abs = max(abs(stats.min), abs(stats.max)) if stats is not None and stats.count else 0.0
    cell.dtype = "int16"
    cell.quant = Quant(np.array([power_of_two_scale(max_abs)], np.float32), np.zeros(1, np.int64))

    def new_const(tid: int, q: np.ndarray, dtype: str, scale: float) -> int:
        t = g.tensor(tid)
        return rw._new_tensor(t.name, t.shape, dtype,
                              Quant(np.array([scale], np.float32), np.zeros(1, np.int64)), q)

    wide = rw.act_dtype == "int16"
    bias_type, bias_max = ("int64", BIAS_LIMIT) if wide else ("int32", _INT32_MAX * 0.999)
    for gate, wi in _INPUT_WEIGHTS.items():
        w = g.tensor(op.inputs[wi]).data.astype(np.float32)
        b = g.tensor(op.inputs[_BIASES[gate]]).data.astype(np.float64)
        # A weight scale high enough that every bias fits at input × weight scale.
        min_scale = float(np.abs(b).max()) / bias_max / float(s_x) if b.size else 0.0
        qw, s_w = _per_tensor_weights(w, min_scale)
        b_scale = float(s_x * np.float32(s_w))
        qb = np.clip(np.sign(b) * np.floor(np.abs(b) / b_scale + 0.5), -bias_max, bias_max)
        op.inputs[_BIASES[gate]] = new_const(op.inputs[_BIASES[gate]], qb.astype(bias_type),
                                             bias_type, b_scale)
        op.inputs[wi] = new_const(op.inputs[wi], qw, "int8", s_w)
        ri = _RECURRENT_WEIGHTS[gate]
        qr, s_r = _per_tensor_weights(g.tensor(op.inputs[ri]).data.astype(np.float32))
        op.inputs[ri] = new_const(op.inputs[ri], qr, "int8", s_r)
