"""Float reference inference of a Graph in numpy, vectorised over a batch of samples.

Every value carries one extra leading axis, the *sample* axis: a tensor of IR shape
`(1, 8, 8, 1)` holds an array `(N, 1, 8, 8, 1)` for N samples. Each op folds that axis
into its own batch axis (or broadcasts over it) and returns `(N, *output.shape)`, so
ops never care about the model's own batch dimension, and calibration runs N samples
in one numpy call per op.

Constants are read as float32; int8 constants with a quantization (the weights of a
"hybrid" model) are dequantized. Arithmetic is float32, as TFLite's float kernels.
The op semantics follow TFLite's reference kernels (SAME padding puts the odd pixel
after, average pooling divides by the number of in-bounds taps, ...).
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from ..errors import InputError, ModelError
from ..ir import Graph, Op, Quant, Tensor
from .lstm import LSTM, float_lstm
from .svdf import SVDF, float_svdf

Observer = Callable[[int, np.ndarray], None]


def dequantize(data: np.ndarray, q: Quant, axis_offset: int = 0) -> np.ndarray:
    """(data - zero_point) * scale as float32, per channel on q.axis (+ axis_offset, for
    arrays with leading sample axes)."""
    shape = [1] * data.ndim
    if q.per_channel:
        shape[q.axis + axis_offset] = -1
    scale = q.scale.astype(np.float32).reshape(shape) if q.per_channel else np.float32(q.scale[0])
    zp = q.zero_point.reshape(shape) if q.per_channel else q.zero_point[0]
    return ((data.astype(np.float32) - zp) * scale).astype(np.float32)


def const_value(t: Tensor) -> np.ndarray:
    """A constant tensor as float32 (int8 with a quantization is dequantized; int32 is
    read as is: a hybrid model's biases are float)."""
    data = t.data
    if data is None:
        raise ModelError(f"tensor {t.id} ({t.name}) is not a constant")
    if t.quant is not None and data.dtype.kind in "iu" and t.dtype != "int32":
        return dequantize(data, t.quant)
    return data.astype(np.float32)


# --- shape helpers ------------------------------------------------------------------

def _out_size_and_pad(size: int, k: int, stride: int, dilation: int, padding: str) -> tuple[int, int]:
    """TFLite's ComputePaddingHeightWidth: (output size, padding before)."""
    eff_k = (k - 1) * dilation + 1
    if padding == "SAME":
        out = (size + stride - 1) // stride
        total = max((out - 1) * stride + eff_k - size, 0)
        return out, total // 2
    if padding == "VALID":
        return (size - eff_k) // stride + 1, 0
    raise ModelError(f"padding {padding!r} is not SAME or VALID")


def _pad_spatial(x: np.ndarray, kh: int, kw: int, o: dict, value: float = 0.0):
    """Pad an NHWC array for a window op; returns (padded, out_h, out_w, sh, sw, dh, dw)."""
    _, h, w, _ = x.shape
    sh, sw = int(o.get("stride_h", 1)), int(o.get("stride_w", 1))
    dh = int(o.get("dilation_hfactor", o.get("dilation_h_factor", 1)) or 1)
    dw = int(o.get("dilation_wfactor", o.get("dilation_w_factor", 1)) or 1)
    padding = o.get("padding", "VALID")
    oh, ph = _out_size_and_pad(h, kh, sh, dh, padding)
    ow, pw = _out_size_and_pad(w, kw, sw, dw, padding)
    if oh <= 0 or ow <= 0:
        raise ModelError(f"window {kh}x{kw} does not fit input {h}x{w}")
    need_h = (oh - 1) * sh + (kh - 1) * dh + 1
    need_w = (ow - 1) * sw + (kw - 1) * dw + 1
    after_h, after_w = max(need_h - h - ph, 0), max(need_w - w - pw, 0)
    if ph or pw or after_h or after_w:
        x = np.pad(x, ((0, 0), (ph, after_h), (pw, after_w), (0, 0)), constant_values=value)
    return x, oh, ow, sh, sw, dh, dw


def _taps(xp: np.ndarray, oh: int, ow: int, sh: int, sw: int, dh: int, dw: int, ky: int, kx: int):
    """The input pixels tap (ky, kx) of the window sees, for every output pixel."""
    y0, x0 = ky * dh, kx * dw
    return xp[:, y0:y0 + (oh - 1) * sh + 1:sh, x0:x0 + (ow - 1) * sw + 1:sw, :]


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "NONE": lambda x: x,
    "RELU": lambda x: np.maximum(x, 0),
    "RELU6": lambda x: np.clip(x, 0, 6),
    "RELU_N1_TO_1": lambda x: np.clip(x, -1, 1),
    "TANH": np.tanh,
}


def _activation(x: np.ndarray, op: Op) -> np.ndarray:
    name = op.options.get("fused_activation_function", "NONE")
    fn = _ACTIVATIONS.get(name)
    if fn is None:
        raise ModelError(f"{op.describe()}: fused activation {name} is not supported")
    return fn(x)


def _nhwc(x: np.ndarray, t: Tensor) -> np.ndarray:
    """(N, *shape) of a rank-4 tensor → (N·batch, H, W, C)."""
    if len(t.shape) != 4:
        raise ModelError(f"tensor {t.id} ({t.name}) must be 4-D (NHWC), has shape {list(t.shape)}")
    return x.reshape((-1,) + tuple(t.shape[1:]))


# --- the ops --------------------------------------------------------------------------

class _Ctx:
    """What an op implementation sees: its op, the graph, and a value lookup."""

    def __init__(self, graph: Graph, op: Op, values: dict[int, np.ndarray], n: int,
                 state: dict[int, np.ndarray] | None = None):
        self.graph, self.op, self.values, self.n = graph, op, values, n
        self.state = {} if state is None else state     # variables kept across runs (SVDF)
        self.observed: dict[int, np.ndarray] = {}   # other tensors the op computes (LSTM cell)

    def tensor(self, i: int) -> Tensor:
        return self.graph.tensor(self.op.inputs[i])

    def has(self, i: int) -> bool:
        return i < len(self.op.inputs) and self.op.inputs[i] >= 0

    def x(self, i: int) -> np.ndarray:
        """Input i with the sample axis (constants broadcast to N samples)."""
        t = self.tensor(i)
        if t.is_const:
            return np.broadcast_to(const_value(t), (self.n,) + tuple(t.shape))
        return self.values[t.id]

    def c(self, i: int) -> np.ndarray:
        """Input i as a constant (weights, bias, axes)."""
        t = self.tensor(i)
        if not t.is_const:
            raise ModelError(f"{self.op.describe()}: input {i} ({t.name}) must be a constant")
        return const_value(t) if t.dtype.startswith("float") or t.quant is not None else t.data

    def out(self, i: int = 0) -> Tensor:
        return self.graph.tensor(self.op.outputs[i])

    def shaped(self, y: np.ndarray, i: int = 0) -> np.ndarray:
        shape = (self.n,) + tuple(self.out(i).shape)
        if y.size != int(np.prod(shape, dtype=np.int64)):
            raise ModelError(f"{self.op.describe()}: computed {y.size // max(self.n, 1)} values "
                             f"per sample, output {self.out(i).name} holds {self.out(i).size}")
        return np.ascontiguousarray(y, dtype=np.float32).reshape(shape)


def _conv2d(c: _Ctx) -> np.ndarray:
    x = _nhwc(c.x(0), c.tensor(0))
    w = c.c(1)                                      # OHWI
    o, kh, kw, cin = w.shape
    if cin != x.shape[-1]:
        raise ModelError(f"{c.op.describe()}: grouped convolution is not supported")
    xp, oh, ow, sh, sw, dh, dw = _pad_spatial(x, kh, kw, c.op.options)
    acc = np.zeros((x.shape[0], oh, ow, o), np.float32)
    for ky in range(kh):
        for kx in range(kw):
            acc += _taps(xp, oh, ow, sh, sw, dh, dw, ky, kx) @ w[:, ky, kx, :].T
    if c.has(2):
        acc += c.c(2)
    return c.shaped(_activation(acc, c.op))


def _depthwise(c: _Ctx) -> np.ndarray:
    x = _nhwc(c.x(0), c.tensor(0))
    w = c.c(1)                                      # 1HW(C·M)
    _, kh, kw, oc = w.shape
    mult = oc // x.shape[-1]
    if mult * x.shape[-1] != oc:
        raise ModelError(f"{c.op.describe()}: {oc} output channels for {x.shape[-1]} inputs")
    xp, oh, ow, sh, sw, dh, dw = _pad_spatial(x, kh, kw, c.op.options)
    if mult > 1:
        xp = np.repeat(xp, mult, axis=-1)           # output channel c·M+m reads input c
    acc = np.zeros((x.shape[0], oh, ow, oc), np.float32)
    for ky in range(kh):
        for kx in range(kw):
            acc += _taps(xp, oh, ow, sh, sw, dh, dw, ky, kx) * w[0, ky, kx, :]
    if c.has(2):
        acc += c.c(2)
    return c.shaped(_activation(acc, c.op))


def _fully_connected(c: _Ctx) -> np.ndarray:
    w = c.c(1)                                      # (units, depth)
    if c.op.options.get("weights_format", 0) not in (0, "DEFAULT"):
        raise ModelError(f"{c.op.describe()}: shuffled weights are not supported")
    x = c.x(0).reshape(c.n, -1, w.shape[1])
    y = x @ w.T
    if c.has(2):
        y = y + c.c(2)
    return c.shaped(_activation(y, c.op))


def _pool(c: _Ctx) -> np.ndarray:
    x = _nhwc(c.x(0), c.tensor(0))
    o = c.op.options
    kh, kw = int(o["filter_height"]), int(o["filter_width"])
    if c.op.type == "MAX_POOL_2D":
        xp, oh, ow, sh, sw, dh, dw = _pad_spatial(x, kh, kw, o, value=-np.inf)
        acc = np.full((x.shape[0], oh, ow, x.shape[-1]), -np.inf, np.float32)
        for ky in range(kh):
            for kx in range(kw):
                np.maximum(acc, _taps(xp, oh, ow, sh, sw, dh, dw, ky, kx), out=acc)
    else:
        xp, oh, ow, sh, sw, dh, dw = _pad_spatial(x, kh, kw, o)
        ones, *_ = _pad_spatial(np.ones((1,) + x.shape[1:3] + (1,), np.float32), kh, kw, o)
        acc = np.zeros((x.shape[0], oh, ow, x.shape[-1]), np.float32)
        count = np.zeros((1, oh, ow, 1), np.float32)
        for ky in range(kh):
            for kx in range(kw):
                acc += _taps(xp, oh, ow, sh, sw, dh, dw, ky, kx)
                count += _taps(ones, oh, ow, sh, sw, dh, dw, ky, kx)
        acc /= count                                # only in-bounds taps count
    return c.shaped(_activation(acc, c.op))


def _axes(c: _Ctx, index: int, rank: int) -> tuple[int, ...]:
    axes = np.atleast_1d(c.c(index)).astype(np.int64)
    return tuple(sorted({int(a) % rank + 1 for a in axes}))   # +1: the sample axis


def _reduce(c: _Ctx) -> np.ndarray:
    rank = len(c.tensor(0).shape)
    axes = _axes(c, 1, rank)
    fn = {"MEAN": np.mean, "SUM": np.sum, "REDUCE_MAX": np.max, "REDUCE_MIN": np.min}[c.op.type]
    return c.shaped(fn(c.x(0), axis=axes))


def _softmax(c: _Ctx) -> np.ndarray:
    x = c.x(0) * np.float32(c.op.options.get("beta", 1.0))
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return c.shaped(e / e.sum(axis=-1, keepdims=True))


def _log_softmax(c: _Ctx) -> np.ndarray:
    x = c.x(0)
    shifted = x - x.max(axis=-1, keepdims=True)
    return c.shaped(shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)))


def _broadcast_operands(c: _Ctx) -> list[np.ndarray]:
    """Inputs aligned to the output's rank, sample axis first (numpy broadcasting does the rest)."""
    rank = len(c.out().shape)
    result = []
    for i in range(len(c.op.inputs)):
        t = c.tensor(i)
        pad = (1,) * (rank - len(t.shape))
        if t.is_const:
            result.append(c.c(i).astype(np.float32).reshape((1,) + pad + tuple(t.shape)))
        else:
            result.append(c.values[t.id].reshape((c.n,) + pad + tuple(t.shape)))
    return result


_BINARY = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide,
           "MAXIMUM": np.maximum, "MINIMUM": np.minimum,
           "SQUARED_DIFFERENCE": lambda a, b: (a - b) ** 2}


def _binary(c: _Ctx) -> np.ndarray:
    a, b = _broadcast_operands(c)
    y = _BINARY[c.op.type](a, b)
    y = np.broadcast_to(y, (c.n,) + tuple(c.out().shape))
    return c.shaped(_activation(y, c.op))


_UNARY = {
    "RELU": lambda x: np.maximum(x, 0),
    "RELU6": lambda x: np.clip(x, 0, 6),
    "RELU_N1_TO_1": lambda x: np.clip(x, -1, 1),
    "LOGISTIC": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "TANH": np.tanh,
    "HARD_SWISH": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "ABS": np.abs,
    "NEG": np.negative,
}


def _unary(c: _Ctx) -> np.ndarray:
    if c.op.type == "LEAKY_RELU":
        alpha = np.float32(c.op.options.get("alpha", 0.2))
        x = c.x(0)
        return c.shaped(np.where(x >= 0, x, alpha * x))
    return c.shaped(_UNARY[c.op.type](c.x(0)))


def _reshape(c: _Ctx) -> np.ndarray:
    return c.shaped(c.x(0))


def _concat(c: _Ctx) -> np.ndarray:
    rank = len(c.out().shape)
    axis = int(c.op.options.get("axis", 0)) % rank + 1
    parts = [c.x(i) for i in range(len(c.op.inputs))]
    return c.shaped(_activation(np.concatenate(parts, axis=axis), c.op))


def _pad(c: _Ctx) -> np.ndarray:
    pads = np.asarray(c.c(1), dtype=np.int64).reshape(-1, 2)
    value = float(c.c(2).reshape(-1)[0]) if c.op.type == "PADV2" and c.has(2) else 0.0
    widths = [(0, 0)] + [(int(a), int(b)) for a, b in pads]
    return c.shaped(np.pad(c.x(0), widths, constant_values=value))


def _transpose(c: _Ctx) -> np.ndarray:
    perm = [0] + [int(p) + 1 for p in np.asarray(c.c(1)).reshape(-1)]
    return c.shaped(np.transpose(c.x(0), perm))


def _identity(c: _Ctx) -> np.ndarray:
    # QUANTIZE / DEQUANTIZE between float tensors of a float graph: the float value.
    return c.shaped(c.x(0))


# Ops the ONNX frontend maps onto (they also appear in float .tflite models). A function
# may return a list: one array per output (SPLIT).

def _transpose_conv(c: _Ctx) -> np.ndarray:
    """TFLite's TransposeConv: every input pixel scatters its filter into the output at
    stride steps, the output window starting `padding` rows/cols in (SAME: the padding a
    forward conv of the output would have)."""
    x = _nhwc(c.x(2), c.tensor(2))
    w = c.c(1)                                      # OHWI
    o, kh, kw, _ = w.shape
    _, oh, ow, _ = c.out().shape
    sh, sw = int(c.op.options.get("stride_h", 1)), int(c.op.options.get("stride_w", 1))
    padding = c.op.options.get("padding", "VALID")
    _, ph = _out_size_and_pad(oh, kh, sh, 1, padding)
    _, pw = _out_size_and_pad(ow, kw, sw, 1, padding)
    n, h, wd, _ = x.shape
    full = np.zeros((n, max((h - 1) * sh + kh, ph + oh), max((wd - 1) * sw + kw, pw + ow), o),
                    np.float32)
    for ky in range(kh):
        for kx in range(kw):
            full[:, ky:ky + (h - 1) * sh + 1:sh, kx:kx + (wd - 1) * sw + 1:sw, :] += \
                x @ w[:, ky, kx, :].T
    acc = full[:, ph:ph + oh, pw:pw + ow, :]
    if c.has(3):
        acc = acc + c.c(3)
    return c.shaped(_activation(acc, c.op))


def _prelu(c: _Ctx) -> np.ndarray:
    x, alpha = _broadcast_operands(c)
    y = np.broadcast_to(np.where(x >= 0, x, alpha * x), (c.n,) + tuple(c.out().shape))
    return c.shaped(y)


def _strided_slice(c: _Ctx) -> np.ndarray:
    from ..codegen.ops.data_movement import strided_slice_view

    o = c.op.options
    spec = [np.asarray(c.c(i)).reshape(-1).astype(np.int64).tolist() for i in (1, 2, 3)]
    view, _ = strided_slice_view(
        c.tensor(0).shape, *spec, begin_mask=o.get("begin_mask", 0), end_mask=o.get("end_mask", 0),
        shrink_axis_mask=o.get("shrink_axis_mask", 0), ellipsis_mask=o.get("ellipsis_mask", 0),
        new_axis_mask=o.get("new_axis_mask", 0), offset=bool(o.get("offset", False)))
    index = view.gather(np.arange(c.tensor(0).size, dtype=np.int64))
    return c.shaped(c.x(0).reshape(c.n, -1)[:, index.reshape(-1)])


def _slice(c: _Ctx) -> np.ndarray:
    shape = c.tensor(0).shape
    begin = np.asarray(c.c(1)).reshape(-1).astype(np.int64)
    size = np.asarray(c.c(2)).reshape(-1).astype(np.int64)
    index = [slice(None)] + [slice(int(b), int(d) if s < 0 else int(b + s))
                             for b, s, d in zip(begin, size, shape)]
    return c.shaped(c.x(0)[tuple(index)])


def _split(c: _Ctx) -> list[np.ndarray]:
    data, axis_i = (1, 0) if c.op.type == "SPLIT" else (0, 2)
    rank = len(c.tensor(data).shape)
    axis = int(np.asarray(c.c(axis_i)).reshape(-1)[0]) % rank
    sizes = [c.out(i).shape[axis] for i in range(len(c.op.outputs))]
    parts = np.split(c.x(data), np.cumsum(sizes)[:-1], axis=axis + 1)
    return [c.shaped(p, i) for i, p in enumerate(parts)]


def _gather(c: _Ctx) -> np.ndarray:
    if c.op.options.get("batch_dims", 0):
        raise ModelError(f"{c.op.describe()}: GATHER with batch_dims is not supported")
    rank = len(c.tensor(0).shape)
    axis = int(c.op.options.get("axis", 0)) % rank
    indices = np.asarray(c.c(1)).astype(np.int64)
    size = c.tensor(0).shape[axis]
    if np.any(indices < 0) or np.any(indices >= size):
        raise ModelError(f"{c.op.describe()}: indices outside [0, {size})")
    return c.shaped(np.take(c.x(0), indices, axis=axis + 1))


def _resize_nearest(c: _Ctx) -> np.ndarray:
    from ..codegen.ops.data_movement import nearest_map

    x = _nhwc(c.x(0), c.tensor(0))
    _, oh, ow, _ = c.out().shape
    ac = bool(c.op.options.get("align_corners", False))
    hp = bool(c.op.options.get("half_pixel_centers", False))
    ys = nearest_map(x.shape[1], oh, ac, hp)
    xs = nearest_map(x.shape[2], ow, ac, hp)
    return c.shaped(x[:, ys][:, :, xs])


def _bilinear_taps(in_size: int, out_size: int, ac: bool, hp: bool):
    """TFLite's float ComputeInterpolationValues: (lower, upper, weight of the upper)."""
    f32 = np.float32
    scale = f32(in_size - 1) / f32(out_size - 1) if ac and out_size > 1 else f32(in_size) / f32(out_size)
    i = np.arange(out_size, dtype=np.float32)
    v = ((i + f32(0.5)) * scale - f32(0.5)) if hp else i * scale
    lo = np.maximum(np.floor(v), 0).astype(np.int64)
    hi = np.minimum(np.ceil(v).astype(np.int64), in_size - 1)
    return lo, hi, (v - lo).astype(np.float32)


def _resize_bilinear(c: _Ctx) -> np.ndarray:
    x = _nhwc(c.x(0), c.tensor(0))
    _, oh, ow, _ = c.out().shape
    ac = bool(c.op.options.get("align_corners", False))
    hp = bool(c.op.options.get("half_pixel_centers", False))
    y0, y1, fy = _bilinear_taps(x.shape[1], oh, ac, hp)
    x0, x1, fx = _bilinear_taps(x.shape[2], ow, ac, hp)
    fy, fx = fy[None, :, None, None], fx[None, None, :, None]
    top = x[:, y0][:, :, x0] * (1 - fx) + x[:, y0][:, :, x1] * fx
    bottom = x[:, y1][:, :, x0] * (1 - fx) + x[:, y1][:, :, x1] * fx
    return c.shaped(top * (1 - fy) + bottom * fy)


OPS: dict[str, Callable[[_Ctx], np.ndarray]] = {
    "CONV_2D": _conv2d,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
    "AVERAGE_POOL_2D": _pool,
    "MAX_POOL_2D": _pool,
    "MEAN": _reduce, "SUM": _reduce, "REDUCE_MAX": _reduce, "REDUCE_MIN": _reduce,
    "SOFTMAX": _softmax,
    "LOG_SOFTMAX": _log_softmax,
    **{k: _binary for k in _BINARY},
    **{k: _unary for k in list(_UNARY) + ["LEAKY_RELU"]},
    "RESHAPE": _reshape, "SQUEEZE": _reshape, "EXPAND_DIMS": _reshape,
    "CONCATENATION": _concat,
    "PAD": _pad, "PADV2": _pad,
    "TRANSPOSE": _transpose,
    "DEQUANTIZE": _identity,
    LSTM: float_lstm,
    SVDF: float_svdf,
    "TRANSPOSE_CONV": _transpose_conv,
    "PRELU": _prelu,
    "STRIDED_SLICE": _strided_slice,
    "SLICE": _slice,
    "SPLIT": _split, "SPLIT_V": _split,
    "GATHER": _gather,
    "RESIZE_NEAREST_NEIGHBOR": _resize_nearest,
    "RESIZE_BILINEAR": _resize_bilinear,
}


# --- the evaluator ------------------------------------------------------------------------

class FloatModel:
    """Runs a float graph on batches of samples; optionally reports every activation.

        model = FloatModel(graph)
        outputs = model.run([x])               # x: (N, *input_shape) per model input
        model.run([x], observe=lambda tid, value: ...)   # value: (N, *tensor.shape)
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        unsupported = sorted({op.type for op in graph.ops if op.type not in OPS})
        if unsupported:
            raise ModelError(f"the quantizer cannot evaluate op(s) {', '.join(unsupported)} "
                             f"in float (supported: {', '.join(sorted(OPS))})")
        # Variable tensors' values, kept from one run to the next (an SVDF's state runs
        # over the samples in order, as a stateful model in its interpreter); reset() zeroes.
        self.state: dict[int, np.ndarray] = {}
        # Step after which each activation is no longer read: frees memory on big batches.
        self._last_use: dict[int, int] = {}
        for step, op in enumerate(graph.ops):
            for tid in op.inputs:
                if tid >= 0:
                    self._last_use[tid] = step

    def run(self, inputs: list[np.ndarray], observe: Observer | None = None) -> list[np.ndarray]:
        g = self.graph
        if len(inputs) != len(g.inputs):
            raise InputError(f"{g.name} takes {len(g.inputs)} input(s), got {len(inputs)}")
        n = int(inputs[0].shape[0])
        values: dict[int, np.ndarray] = {}
        for tid, x in zip(g.inputs, inputs):
            t = g.tensor(tid)
            x = np.asarray(x, dtype=np.float32)
            if x.shape[0] != n or x[0].size != t.size:
                raise InputError(f"input {t.name} takes samples of shape {list(t.shape)}, "
                                 f"got an array of shape {list(x.shape)}")
            values[tid] = x.reshape((n,) + tuple(t.shape))
            if observe is not None:
                observe(tid, values[tid])
        keep = set(g.outputs)
        for step, op in enumerate(g.ops):
            ctx = _Ctx(g, op, values, n, self.state)
            y = OPS[op.type](ctx)
            ys = y if isinstance(y, list) else [y]      # a list: one array per output
            for tid, value in zip(op.outputs, ys):
                values[tid] = value
                if observe is not None:
                    observe(tid, value)
            if observe is not None:
                for tid, value in ctx.observed.items():
                    observe(tid, value)
            for tid in op.inputs:
                if tid >= 0 and self._last_use.get(tid) == step and tid not in keep:
                    values.pop(tid, None)
        return [values[t] if t in values else np.broadcast_to(const_value(g.tensor(t)), (n,) + g.tensor(t).shape)
                for t in g.outputs]

    def reset(self) -> None:
        """Back to the initial (zero) state of the model's variables."""
        self.state.clear()

    def run_batched(self, inputs: list[np.ndarray], batch: int = 64,
                    observe: Observer | None = None) -> list[np.ndarray]:
        """`run` in chunks of `batch` samples (bounded memory), outputs concatenated."""
        n = int(inputs[0].shape[0])
        chunks = [self.run([x[i:i + batch] for x in inputs], observe) for i in range(0, n, batch)]
        return [np.concatenate(parts, axis=0) for parts in zip(*chunks)]


def iter_batches(inputs: list[np.ndarray], batch: int) -> Iterable[list[np.ndarray]]:
    n = int(inputs[0].shape[0])
    for i in range(0, n, batch):
        yield [x[i:i + batch] for x in inputs]
