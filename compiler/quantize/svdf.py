"""SVDF in the quantizer: its float evaluation (state carried) and its int8 form.

A float SVDF layer keeps, per batch row and filter, the last M feature activations in its
state variable (layout [batch][filter][memory]). Each run, as TFLite's float kernel:
shift the whole state left by one value, write this run's features (input · feature
weights) into each filter's last slot, take each filter's dot product with its time
weights, sum the filters of each unit (rank of them), add the bias, apply the fused
activation.

Calibration runs it over the calibration samples in order, the state carried from one
sample to the next, as TF's converter calibrates (its interpreter is invoked sample
after sample with no reset); FloatModel.reset() starts a pass from the zero state. The
state is observed after every sample, for its scale.

The int8 form is TFLite's quantization of SVDF (operator_property.cc), which
tflite-micro's integer kernel runs:
- input and output int8 asymmetric from calibration (a RELU output's range starts at 0);
- feature weights int8 symmetric, one scale;
- time weights int16 symmetric with 10 significant bits (values in [-511, 511]): the
  state × time products are summed in int32, the 6 spare bits are for that sum;
- state int16 symmetric from calibration (max |state| → 32767);
- bias int32 at state scale × time weight scale.
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..ir import Op, Quant
from .lstm import _per_tensor_weights

SVDF = "SVDF"
_INPUT, _W_FEATURE, _W_TIME, _BIAS, _STATE = range(5)
_TIME_BITS = 10
_ACTIVATIONS = {"NONE": lambda v: v, "RELU": lambda v: np.maximum(v, 0),
                "RELU6": lambda v: np.clip(v, 0, 6), "RELU_N1_TO_1": lambda v: np.clip(v, -1, 1),
                "TANH": np.tanh}


def _shape(op: Op, c) -> tuple[int, int, int, int, int]:
    """(batches, input size, filters, memory, rank), checked."""
    if len(op.inputs) != 5 or any(op.inputs[i] < 0 for i in (0, 1, 2, 4)):
        raise ModelError(f"{op.describe()}: SVDF takes input, feature weights, time weights, "
                         "(bias,) state")
    x, wf, wt, st = c.tensor(_INPUT), c.tensor(_W_FEATURE), c.tensor(_W_TIME), c.tensor(_STATE)
    rank = int(op.options.get("rank", 0))
    if len(x.shape) != 2 or len(wf.shape) != 2 or len(wt.shape) != 2 or len(st.shape) != 2:
        raise ModelError(f"{op.describe()}: SVDF tensors are 2-D")
    batches, size = x.shape
    filters, memory = wt.shape
    if rank < 1 or filters % rank or tuple(wf.shape) != (filters, size) \
            or tuple(st.shape) != (batches, filters * memory) or not st.is_variable:
        raise ModelError(f"{op.describe()}: SVDF shapes do not fit (input {list(x.shape)}, "
                         f"feature weights {list(wf.shape)}, time weights {list(wt.shape)}, "
                         f"state {list(st.shape)}, rank {rank})")
    return int(batches), int(size), int(filters), int(memory), rank


def float_svdf(c) -> np.ndarray:
    """The float SVDF over N samples in order, its state in c.state (carried from the
    previous call); every sample's state is reported as an observation (c.observed)."""
    op = c.op
    batches, _, filters, memory, rank = _shape(op, c)
    act = _ACTIVATIONS.get(op.options.get("fused_activation_function", "NONE"))
    if act is None:
        raise ModelError(f"{op.describe()}: fused activation "
                         f"{op.options.get('fused_activation_function')} is not supported")
    wf = c.c(_W_FEATURE).astype(np.float32)
    wt = c.c(_W_TIME).astype(np.float32)
    bias = c.c(_BIAS).astype(np.float32) if c.has(_BIAS) else np.float32(0)
    sid = op.inputs[_STATE]
    state = c.state.get(sid)
    if state is None:
        state = np.zeros(batches * filters * memory, np.float32)
    features = c.x(_INPUT).reshape(c.n, batches, -1) @ wf.T      # (N, batches, filters)
    outs, states = [], []
    for n in range(c.n):
        state = np.concatenate([state[1:], state[:1]])          # shift left by one value
        s = state.reshape(batches, filters, memory)
        s[:, :, -1] = features[n]
        per_filter = (s * wt).sum(axis=-1)                       # (batches, filters)
        units = per_filter.reshape(batches, filters // rank, rank).sum(axis=-1)
        outs.append(act(units + bias))
        states.append(state.copy())
    c.state[sid] = state
    c.observed[sid] = np.stack(states).reshape((c.n,) + tuple(c.tensor(_STATE).shape))
    return c.shaped(np.stack(outs))


def _symmetric(values: np.ndarray, bits: int) -> tuple[np.ndarray, float]:
    """Symmetric with `bits` significant bits: values in ±(2^(bits-1) - 1), one scale."""
    top = (1 << (bits - 1)) - 1
    m = float(np.abs(values).max()) if values.size else 0.0
    scale = float(np.float32(m / top if m > 0 else 1.0))
    q = np.clip(np.sign(values) * np.floor(np.abs(values.astype(np.float64)) / scale + 0.5),
                -top, top)
    return q, scale


def quantize_svdf(rw, op: Op, params: dict[int, tuple[float, int]]) -> None:
    """Rewrite one float SVDF op of the Rewriter `rw` into its int8 form (module doc);
    the state leaves `params` (it becomes int16 here)."""
    g = rw.g
    act = op.options.get("fused_activation_function", "NONE")
    if act not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        raise ModelError(f"{op.describe()}: an SVDF with fused {act} cannot be quantized "
                         "(tflite-micro's integer SVDF applies no activation: a clamping "
                         "one is the output's range, a TANH would be lost)")
    state = g.tensor(op.inputs[_STATE])
    params.pop(state.id, None)
    stats = rw.cal.stats.get(state.id)
    max_abs = max(abs(stats.min), abs(stats.max)) if stats is not None and stats.count else 0.0
    s_state = float(np.float32(max_abs / 32767.0 if max_abs > 0 else 1.0 / 32767.0))
    state.dtype = "int16"
    state.quant = Quant(np.array([s_state], np.float32), np.zeros(1, np.int64))

    def new_const(tid: int, q: np.ndarray, dtype: str, scale: float) -> int:
        t = g.tensor(tid)
        return rw._new_tensor(t.name, t.shape, dtype,
                              Quant(np.array([scale], np.float32), np.zeros(1, np.int64)),
                              q.astype(dtype))

    qf, s_f = _per_tensor_weights(g.tensor(op.inputs[_W_FEATURE]).data.astype(np.float32))
    op.inputs[_W_FEATURE] = new_const(op.inputs[_W_FEATURE], qf, "int8", s_f)
    qt, s_t = _symmetric(g.tensor(op.inputs[_W_TIME]).data.astype(np.float32), _TIME_BITS)
    op.inputs[_W_TIME] = new_const(op.inputs[_W_TIME], qt, "int16", s_t)
    if op.inputs[_BIAS] >= 0:
        b = g.tensor(op.inputs[_BIAS]).data.astype(np.float64)
        b_scale = float(np.float32(np.float32(s_state) * np.float32(s_t)))
        # tflite-micro's prepare requires |bias scale - state scale x time scale| < 1e-5
        # in double: the float32 bias scale misses the product by more once the state's
        # range reaches the hundreds (a float model whose SVDF activations blow up).
        if abs(b_scale - float(np.float32(s_state)) * float(np.float32(s_t))) >= 1e-5:
            raise ModelError(f"{op.describe()}: its state reaches {max_abs:.3g} on the "
                             "calibration data, too wide for tflite-micro's int8 SVDF (its "
                             "bias scale, state x time weight scale, would miss the product "
                             "by 1e-5 or more in float32); calibrate with data in the range "
                             "the model expects")
        limit = (1 << 31) - 1
        qb = np.clip(np.sign(b) * np.floor(np.abs(b) / b_scale + 0.5), -limit, limit)
        op.inputs[_BIAS] = new_const(op.inputs[_BIAS], qb, "int32", b_scale)
    op.version = 3
