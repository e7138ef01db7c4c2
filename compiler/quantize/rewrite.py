"""Float graph + calibration → int8 graph, in TFLite's int8 quantization scheme.

The scheme (what TFLite's converter writes, so the result also runs on TFLM):
- activations: int8, asymmetric, per tensor, range from calibration (widened to hold 0);
- CONV_2D / DEPTHWISE_CONV_2D weights: int8 symmetric per output channel (axis 0 of OHWI,
  axis 3 of 1HWC), zero point 0, values in [-127, 127]; FULLY_CONNECTED: per channel or
  per tensor (option);
- bias: int32, scale = input_scale × weight_scale[c], zero point 0 (a weight scale is
  raised where a bias would not fit in int32, as TFLite does);
- fixed output ranges: SOFTMAX and LOGISTIC 1/256 with zero point −128, TANH 1/128, 0;
- ops that move values without arithmetic (pooling, reshape, pad, concat, max/min,
  transpose, and RELU6, which TFLM clamps without rescaling) have one scale for their inputs and output: their tensors are merged into
  groups whose range is the union of the members'. A fixed scale passes through
  one-input ops; where it meets other inputs of a concat / max / min, or another fixed
  scale, a QUANTIZE (int8 → int8 requantize) op is inserted on that input.
- other float constants read as data (the addend of an ADD) become int8 per tensor.

Optional bias correction (Nagel et al., "Data-Free Quantization", empirical form):
the expected error a layer's rounded weights add to its output, ε·E[x] with ε the weight
rounding error and E[x] the per-channel mean of the layer's float input on the
calibration data, is subtracted from the bias.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError, ModelError
from ..frontend.control_flow import step_copies
from ..ir import Graph, Op, Quant, Tensor
from ..passes import fold_constants
from .calibrate import Calibration, asymmetric_params, choose_range
from .float_eval import OPS, const_value
from .lstm import LSTM, quantize_lstm
from .svdf import SVDF, quantize_svdf
from . import int16

INT32_MAX = (1 << 31) - 1

# Weight layers: per-channel axis of their weights.
WEIGHT_AXIS = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0, "TRANSPOSE_CONV": 0}
# (input, weights, bias) input indices of the weight layers whose order is not (0, 1, 2).
LAYER_INPUTS = {"TRANSPOSE_CONV": (2, 1, 3)}     # output_shape, weights, input, bias

# Ops whose inputs and output share one scale and zero point (TFLite's
# restrict_same_input_output_scale), with the indices of their data inputs.
SHARED_SCALE: dict[str, tuple[int, ...] | None] = {
    "MAX_POOL_2D": (0,), "AVERAGE_POOL_2D": (0,), "RESHAPE": (0,), "SQUEEZE": (0,),
    "EXPAND_DIMS": (0,), "PAD": (0,), "PADV2": (0, 2), "TRANSPOSE": (0,),
    "REDUCE_MAX": (0,), "REDUCE_MIN": (0,), "MAXIMUM": (0, 1), "MINIMUM": (0, 1),
    "CONCATENATION": None,                      # None: every input
    # TFLM's int8 RELU6 / RELU_N1_TO_1 clamp without rescaling: same scale in and out.
    "RELU6": (0,), "RELU_N1_TO_1": (0,),
    # Data movement: TFLM copies the raw integers (every output shares the scale).
    "STRIDED_SLICE": (0,), "SLICE": (0,), "GATHER": (0,), "SPLIT": (1,), "SPLIT_V": (0,),
    "RESIZE_NEAREST_NEIGHBOR": (0,), "RESIZE_BILINEAR": (0,),
}

# Ops whose int8 output range is fixed by the op, not by calibration.
FIXED_OUTPUT: dict[str, tuple[float, int]] = {
    "SOFTMAX": (1.0 / 256, -128),
    "LOGISTIC": (1.0 / 256, -128),
    "TANH": (1.0 / 128, 0),
    "LOG_SOFTMAX": (16.0 / 256, 127),        # TFLite's and TFLM's fixed int8 log softmax
}

# Inputs read as data (quantized like activations when constant); others are shapes/axes.
DATA_INPUTS: dict[str, tuple[int, ...]] = {
    "ADD": (0, 1), "SUB": (0, 1), "MUL": (0, 1), "MAXIMUM": (0, 1), "MINIMUM": (0, 1),
    "PADV2": (0, 2), "PRELU": (1,),
}

# Float ops the int8 rewrite does not handle (no int8 form in TFLite, or not yet here).
NOT_QUANTIZABLE = {"DIV", "SQUARED_DIFFERENCE", "DEQUANTIZE"}

# Op versions TFLite's converter writes for int8 tensors (op_version.cc).
INT8_VERSIONS = {
    "CONV_2D": 3, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 4, "AVERAGE_POOL_2D": 2,
    "MAX_POOL_2D": 2, "MEAN": 2, "SUM": 2, "REDUCE_MAX": 2, "REDUCE_MIN": 2, "SOFTMAX": 2,
    "ADD": 2, "SUB": 2, "MUL": 2, "MAXIMUM": 2, "MINIMUM": 2, "CONCATENATION": 2, "PAD": 2,
    "PADV2": 2, "TRANSPOSE": 2, "RELU": 2, "RELU6": 2, "LOGISTIC": 2, "TANH": 2,
    "QUANTIZE": 1, "DEQUANTIZE": 2, "RESHAPE": 1, "SQUEEZE": 1, "EXPAND_DIMS": 1,
    "HARD_SWISH": 1, "LEAKY_RELU": 1, "ABS": 2, "NEG": 1, "RELU_N1_TO_1": 1,
    "LOG_SOFTMAX": 2, "TRANSPOSE_CONV": 3, "STRIDED_SLICE": 2, "SLICE": 2, "GATHER": 2,
    "SPLIT": 2, "SPLIT_V": 2, "RESIZE_NEAREST_NEIGHBOR": 2, "RESIZE_BILINEAR": 2,
}


@dataclass
class RewriteOptions:
    method: str = "minmax"
    percentile: float = 99.99
    per_tensor: dict = field(default_factory=dict)   # tensor name or id → method
    fc_per_channel: bool = True
    bias_correction: bool = False
    io: str = "int8"
    activations: str = "int8"       # int16: the 16x8 scheme (int16.py)


# --- preparing the float graph ---------------------------------------------------------

def is_float_graph(graph: Graph) -> bool:
    """True if some op computes on float activations (a float or hybrid model)."""
    for op in graph.ops:
        if op.type in ("QUANTIZE", "DEQUANTIZE"):
            continue
        for tid in op.inputs + op.outputs:
            if tid >= 0 and not graph.tensor(tid).is_const and graph.tensor(tid).dtype == "float32":
                return True
    return False


def prepare(graph: Graph) -> Graph:
    """A pure float graph: constants folded, the int8 / fp16 weights of hybrid models
    dequantized to float32, and only ops the quantizer can evaluate and rewrite."""
    g = fold_constants(graph)
    for t in g.tensors:
        if t.is_const and t.quant is not None and t.dtype in ("int8", "uint8", "int16"):
            t.data, t.dtype, t.quant = const_value(t), "float32", None
        elif t.is_const and t.dtype == "float16":
            t.data, t.dtype = t.data.astype(np.float32), "float32"
    problems, float_ops, quantized_ops = [], [], 0
    for op in g.ops:
        acts = [g.tensor(t) for t in op.inputs + op.outputs if t >= 0 and not g.tensor(t).is_const]
        if any(t.dtype not in ("float32",) for t in acts):
            problems.append(f"{op.describe()} on {'/'.join(sorted({t.dtype for t in acts}))} tensors")
            quantized_ops += op.type not in ("QUANTIZE", "DEQUANTIZE")
        elif op.type in NOT_QUANTIZABLE or op.type not in OPS:
            problems.append(f"{op.describe()}")
        if acts and all(t.dtype == "float32" for t in acts):
            float_ops.append(op.describe())
    if quantized_ops and float_ops:
        # An int8 model with float ops left (after a DEQUANTIZE): those ops are what keeps
        # kiln from compiling it, and quantizing again cannot change them.
        raise ModelError(f"cannot quantize {graph.name}: it is quantized already, but for "
                         f"{', '.join(float_ops[:5])}{' ...' if len(float_ops) > 5 else ''} "
                         "on float32 tensors, which kiln cannot compile; kiln quantize takes "
                         "float models (and hybrid ones with int8/fp16 weights): re-convert "
                         "the float model with full-integer quantization, those ops included, "
                         "or drop them from the model")
    if problems:
        raise ModelError(f"cannot quantize {graph.name}: " + "; ".join(problems[:5])
                         + (f" and {len(problems) - 5} more" if len(problems) > 5 else "")
                         + " (the quantizer takes float models and hybrid models with "
                           "int8/fp16 weights)")
    g.verify()
    return g


# --- weights ------------------------------------------------------------------------------

def round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _channel_view(axis: int | None, ndim: int) -> tuple[int, ...]:
    shape = [1] * ndim
    if axis is not None:
        shape[axis] = -1
    return tuple(shape)


def quantize_weights(w: np.ndarray, axis: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 weights in [-127, 127]: (values, float32 scales per channel)."""
    if axis is None:
        m = np.array([np.abs(w).max() if w.size else 0.0])
    else:
        m = np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)).max(axis=1)
    scales = np.where(m > 0, m / 127.0, 1.0).astype(np.float32)
    return _quantize_with(w, scales, axis), scales


def _quantize_with(w: np.ndarray, scales: np.ndarray, axis: int | None) -> np.ndarray:
    s = scales.astype(np.float64).reshape(_channel_view(axis, w.ndim)) if axis is not None \
        else np.float64(scales[0])
    return np.clip(round_half_away(w.astype(np.float64) / s), -127, 127).astype(np.int8)


def _dequantize(q: np.ndarray, scales: np.ndarray, axis: int | None) -> np.ndarray:
    s = scales.reshape(_channel_view(axis, q.ndim)) if axis is not None else scales[0]
    return q.astype(np.float32) * s


# --- the rewrite ----------------------------------------------------------------------------

class _Groups:
    """Union-find over tensor ids; a group may carry a fixed (scale, zero_point)."""

    def __init__(self):
        self.parent: dict[int, int] = {}
        self.fixed: dict[int, tuple[float, int]] = {}

    def find(self, t: int) -> int:
        self.parent.setdefault(t, t)
        while self.parent[t] != t:
            self.parent[t] = self.parent[self.parent[t]]
            t = self.parent[t]
        return t

    def can_union(self, a: int, b: int) -> bool:
        fa, fb = self.fixed.get(self.find(a)), self.fixed.get(self.find(b))
        return fa is None or fb is None or fa == fb

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            fixed = self.fixed.pop(ra, None) or self.fixed.pop(rb, None)
            self.parent[ra] = rb
            if fixed is not None:
                self.fixed[rb] = fixed


class Rewriter:
    def __init__(self, graph: Graph, calibration: Calibration, options: RewriteOptions):
        self.g = copy.deepcopy(graph)
        self.cal = calibration
        self.opt = options
        self.bits16 = options.activations == "int16"
        self.act_dtype = "int16" if self.bits16 else "int8"
        self.fixed_output = int16.FIXED_OUTPUT if self.bits16 else FIXED_OUTPUT
        if options.io not in ("int8", "float"):
            raise InputError(f"io must be 'int8' or 'float', got {options.io!r}")
        self.groups = _Groups()
        self.requant: list[tuple[int, int]] = []      # (op index, input index) to requantize
        self._layer_consts: dict[tuple, int] = {}     # identical quantized weights, once

    # tensors -----------------------------------------------------------------------------
    def _new_tensor(self, name: str, shape, dtype: str, quant: Quant | None = None,
                    data: np.ndarray | None = None) -> int:
        tid = len(self.g.tensors)
        self.g.tensors.append(Tensor(id=tid, name=name, shape=tuple(shape), dtype=dtype,
                                     quant=quant, data=data))
        return tid

    def _layer_const(self, name: str, shape, dtype: str, quant: Quant, data: np.ndarray) -> int:
        """_new_tensor for a weight layer's weights or bias, shared by the layers that get
        identical ones (the steps of an unrolled RNN read one weight tensor)."""
        key = (name, tuple(shape), dtype, quant.scale.tobytes(), quant.zero_point.tobytes(),
               quant.axis, data.tobytes())
        if key not in self._layer_consts:
            self._layer_consts[key] = self._new_tensor(name, shape, dtype, quant, data)
        return self._layer_consts[key]

    def _is_act(self, tid: int) -> bool:
        return tid >= 0 and not self.g.tensor(tid).is_const and self.g.tensor(tid).dtype == "float32"

    def _method(self, t: Tensor) -> str:
        return self.opt.per_tensor.get(t.name, self.opt.per_tensor.get(t.id, self.opt.method))

    # scales of activations ------------------------------------------------------------------
    def _plan_groups(self) -> None:
        g, groups = self.g, self.groups
        for copies in step_copies(g).values():    # an unrolled loop: one scale per body tensor
            for tid in copies[1:]:
                if self._is_act(tid) and groups.can_union(tid, copies[0]):
                    groups.union(tid, copies[0])
        for op in g.ops:
            if op.type in self.fixed_output:
                groups.fixed[groups.find(op.outputs[0])] = self.fixed_output[op.type]
        for k, op in enumerate(g.ops):
            if op.type not in SHARED_SCALE:
                continue
            idx = SHARED_SCALE[op.type]
            idx = range(len(op.inputs)) if idx is None else idx
            out = op.outputs[0]
            for other in op.outputs[1:]:            # SPLIT: every output has the one scale
                if groups.can_union(other, out):
                    groups.union(other, out)
            acts = [i for i in idx if i < len(op.inputs) and self._is_act(op.inputs[i])]
            fixed = {groups.fixed.get(groups.find(op.inputs[i])) for i in acts}
            # A fixed input (a softmax output) sets the scale of a one-input op's output,
            # but not of a concat / max / min whose other inputs may range wider: there it
            # is requantized, unless every input has that same fixed scale.
            sole = len(acts) == 1 or (len(fixed) == 1 and None not in fixed)
            for i in acts:
                tid = op.inputs[i]
                is_fixed = groups.find(tid) in groups.fixed
                if (sole or not is_fixed) and groups.can_union(tid, out):
                    groups.union(tid, out)
                else:
                    self.requant.append((k, i))

    def _activation_params(self) -> dict[int, tuple[float, int]]:
        acts = [t.id for t in self.g.tensors if self._is_act(t.id)]
        ranges: dict[int, tuple[float, float]] = {}
        for tid in acts:
            s = self.cal.stats.get(tid)
            if s is None:
                continue
            lo, hi = choose_range(s, self._method(self.g.tensor(tid)), self.opt.percentile)
            root = self.groups.find(tid)
            plo, phi = ranges.get(root, (np.inf, -np.inf))
            ranges[root] = (min(plo, lo), max(phi, hi))
        params = {}
        for tid in acts:
            root = self.groups.find(tid)
            if root in self.groups.fixed:
                params[tid] = self.groups.fixed[root]
            else:
                params[tid] = (int16.symmetric_params if self.bits16 else asymmetric_params)(
                    *ranges.get(root, (0.0, 1.0)))
        return params

    # weight layers ----------------------------------------------------------------------------
    def _weight_layer(self, op: Op, params: dict[int, tuple[float, int]]) -> None:
        g = self.g
        xi, wi, bi = LAYER_INPUTS.get(op.type, (0, 1, 2))
        x, w_t = g.tensor(op.inputs[xi]), g.tensor(op.inputs[wi])
        if not w_t.is_const:
            raise ModelError(f"{op.describe()}: weights {w_t.name} are not constant; "
                             "the quantizer handles constant weights only")
        w = const_value(w_t)
        axis: int | None = WEIGHT_AXIS[op.type]
        if op.type == "FULLY_CONNECTED" and not self.opt.fc_per_channel:
            axis = None
        q, scales = quantize_weights(w, axis)
        if x.is_const and x.dtype == "float32":
            # A constant data input (an unrolled RNN's first step reads the zero initial
            # state): int8 data with its own range, as a constant operand of ADD.
            op.inputs[xi] = self._data_const(x.id, None)
            x = g.tensor(op.inputs[xi])
            params[x.id] = x.quant.single()
        in_scale = np.float32(params[x.id][0])
        has_bias = len(op.inputs) > bi and op.inputs[bi] >= 0
        n_out = w.shape[3] if op.type == "DEPTHWISE_CONV_2D" else w.shape[0]
        bias = (const_value(g.tensor(op.inputs[bi])) if has_bias
                else np.zeros(n_out, np.float32)).astype(np.float64)

        if self.opt.bias_correction and op.type not in LAYER_INPUTS:
            bias = bias - self._bias_error(op, w, _dequantize(q, scales, axis), x.id)
            has_bias = True
        has_bias = has_bias or self.bits16          # int16.py: 16x8 layers always get one
        bias_max = int16.BIAS_LIMIT if self.bits16 else INT32_MAX * 0.999

        if has_bias:
            # Raise a weight scale where its bias would overflow int32 (TFLite does the same).
            ch_scales = np.broadcast_to(scales, (n_out,)) if axis is not None else None
            bias_scale = (in_scale * (ch_scales if ch_scales is not None else scales[0])).astype(np.float64)
            limit = np.abs(bias) / bias_max
            if np.any(limit > bias_scale):
                if axis is None:
                    scales = np.array([max(scales[0], float(limit.max() / in_scale))], np.float32)
                else:
                    scales = np.maximum(scales, (limit / in_scale).astype(np.float32))
                q = _quantize_with(w, scales, axis)
            b_scale = (in_scale * scales).astype(np.float32)
            qb = round_half_away(bias / np.broadcast_to(b_scale.astype(np.float64), bias.shape))
            qb = np.clip(qb, -bias_max, bias_max).astype(np.int64 if self.bits16 else np.int32)
            b_name = g.tensor(op.inputs[bi]).name if len(op.inputs) > bi and op.inputs[bi] >= 0 \
                else f"{w_t.name}/bias"
            b_id = self._layer_const(b_name, (n_out,), "int64" if self.bits16 else "int32",
                                     Quant(b_scale, np.zeros(b_scale.size, np.int64), 0), qb)
            while len(op.inputs) <= bi:
                op.inputs.append(-1)
            op.inputs[bi] = b_id
        w_id = self._layer_const(w_t.name, w_t.shape, "int8",
                                 Quant(scales, np.zeros(scales.size, np.int64),
                                       axis if axis is not None else 0), q)
        op.inputs[wi] = w_id

    def _bias_error(self, op: Op, w: np.ndarray, wq: np.ndarray, x_id: int) -> np.ndarray:
        """ε·E[x] per output channel: the mean output error the rounded weights cause."""
        err = (wq - w).astype(np.float64)
        depth = w.shape[1] if op.type == "FULLY_CONNECTED" else self.g.tensor(x_id).shape[-1]
        mean = self.cal.stats[x_id].means.get(depth)
        if mean is None:
            return np.zeros(err.shape[3] if op.type == "DEPTHWISE_CONV_2D" else err.shape[0])
        mean = mean.astype(np.float64)
        if op.type == "FULLY_CONNECTED":
            return err @ mean
        if op.type == "CONV_2D":
            return np.einsum("ohwi,i->o", err, mean)
        mult = err.shape[3] // mean.size
        return err.sum(axis=(0, 1, 2)) * np.repeat(mean, mult)

    # other constants --------------------------------------------------------------------------
    def _data_const(self, tid: int, qp: tuple[float, int] | None) -> int:
        """A float constant read as data → int8 (with `qp`, or its own min/max range)."""
        t = self.g.tensor(tid)
        v = const_value(t)
        if self.bits16:
            scale, _ = qp if qp is not None else int16.symmetric_params(float(v.min()),
                                                                        float(v.max()))
            return self._new_tensor(t.name, t.shape, "int16",
                                    Quant(np.array([scale], np.float32), np.array([0], np.int64)),
                                    int16.quantize_data(v, scale))
        scale, zp = qp if qp is not None else asymmetric_params(float(v.min()), float(v.max()))
        q = np.clip(round_half_away(v / np.float32(scale)) + zp, -128, 127).astype(np.int8)
        return self._new_tensor(t.name, t.shape, "int8",
                                Quant(np.array([scale], np.float32), np.array([zp], np.int64)), q)

    # the whole graph ----------------------------------------------------------------------------
    def _check_per_tensor(self) -> None:
        acts = [t for t in self.g.tensors if self._is_act(t.id)]
        known = {t.name for t in acts} | {t.id for t in acts}
        unknown = [k for k in self.opt.per_tensor if k not in known]
        if unknown:
            names = ", ".join(t.name for t in acts[:6]) + (", ..." if len(acts) > 6 else "")
            raise InputError(f"per-tensor method for unknown activation tensor(s) "
                             f"{', '.join(map(repr, unknown))}; activations: {names}")

    def run(self) -> Graph:
        g = self.g
        if self.bits16:
            int16.check_ops(g)
        self._check_per_tensor()
        self._plan_groups()
        params = self._activation_params()
        requant = set(self.requant)
        weight_ops = [op for op in g.ops if op.type in WEIGHT_AXIS]
        for op in weight_ops:
            self._weight_layer(op, params)
        for op in g.ops:
            if op.type == LSTM:
                quantize_lstm(self, op, params)
            elif op.type == SVDF:
                quantize_svdf(self, op, params)

        ops: list[Op] = []
        for k, op in enumerate(g.ops):
            out_qp = params.get(op.outputs[0])
            shared = op.type in SHARED_SCALE
            data_idx = DATA_INPUTS.get(op.type, ())
            if op.type == "CONCATENATION":
                data_idx = tuple(range(len(op.inputs)))
            for i, tid in enumerate(op.inputs):
                if tid < 0:
                    continue
                t = g.tensor(tid)
                if (k, i) in requant:
                    # int8 → int8 requantize into the op's output scale.
                    new = self._new_tensor(f"{t.name}/requantized", t.shape, "float32")
                    params[new] = out_qp
                    ops.append(Op("QUANTIZE", [tid], [new], {}, index=op.index))
                    op.inputs[i] = new
                elif t.is_const and t.dtype == "float32" and i in data_idx:
                    op.inputs[i] = self._data_const(tid, out_qp if shared else None)
                elif t.is_const and t.dtype == "float32" and op.type not in WEIGHT_AXIS:
                    raise ModelError(f"{op.describe()}: float constant input {i} ({t.name}) "
                                     "has no int8 form here")
            if self.bits16:
                op.version = int16.VERSIONS[op.type]
                if op.type in ("ADD", "SUB"):
                    op.options["pot_scale_int16"] = False
            else:
                op.version = INT8_VERSIONS.get(op.type, op.version)
            if op.type == "FULLY_CONNECTED" and op.options.get("keep_num_dims"):
                op.version = 5
            if op.type == "TRANSPOSE_CONV" and op.options.get("fused_activation_function",
                                                              "NONE") != "NONE":
                op.version = 4                  # op_version.cc: a fused activation
            ops.append(op)
        g.ops = ops

        for tid, (scale, zp) in params.items():
            t = g.tensor(tid)
            t.dtype = self.act_dtype
            t.quant = Quant(np.array([scale], np.float32), np.array([zp], np.int64))
        if self.opt.io == "float":
            self._float_io()
        g = compact(g)
        g.verify()
        return g

    def _float_io(self) -> None:
        """Keep float model inputs/outputs: QUANTIZE after each input, DEQUANTIZE before
        each output. The float tensors keep the model's tensor names."""
        g = self.g
        first, last = [], []
        for k, tid in enumerate(g.inputs):
            t = g.tensor(tid)
            new = self._new_tensor(t.name, t.shape, "float32")
            t.name = f"{t.name}/{self.act_dtype}"
            first.append(Op("QUANTIZE", [new], [tid], {}, version=2 if self.bits16 else 1))
            g.inputs[k] = new
        for k, tid in enumerate(g.outputs):
            t = g.tensor(tid)
            new = self._new_tensor(t.name, t.shape, "float32")
            t.name = f"{t.name}/{self.act_dtype}"
            last.append(Op("DEQUANTIZE", [tid], [new], {}, version=3 if self.bits16 else 2))
            g.outputs[k] = new
        g.ops = first + g.ops + last


def compact(graph: Graph) -> Graph:
    """Drop tensors nothing refers to and renumber the rest in order."""
    used = sorted({t for op in graph.ops for t in op.inputs + op.outputs if t >= 0}
                  | set(graph.inputs) | set(graph.outputs))
    remap = {old: new for new, old in enumerate(used)}
    tensors = []
    for old in used:
        t = graph.tensors[old]
        t.id = remap[old]
        t.alias_of = None
        tensors.append(t)
    for op in graph.ops:
        op.inputs = [remap[t] if t >= 0 else -1 for t in op.inputs]
        op.outputs = [remap[t] for t in op.outputs]
    graph.tensors = tensors
    graph.inputs = [remap[t] for t in graph.inputs]
    graph.outputs = [remap[t] for t in graph.outputs]
    return graph


def mean_depths(graph: Graph) -> dict[int, set[int]]:
    """For bias correction: tensor id → depths K whose per-channel input means are needed."""
    wanted: dict[int, set[int]] = {}
    for op in graph.ops:
        if op.type in WEIGHT_AXIS and op.type not in LAYER_INPUTS and op.inputs[0] >= 0:
            w = graph.tensor(op.inputs[1])
            k = w.shape[1] if op.type == "FULLY_CONNECTED" else graph.tensor(op.inputs[0]).shape[-1]
            wanted.setdefault(op.inputs[0], set()).add(int(k))
    return wanted
