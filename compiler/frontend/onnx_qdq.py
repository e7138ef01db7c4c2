"""QDQ ONNX models: QuantizeLinear/DequantizeLinear pairs read as int8 tensors.

A QDQ model (what onnxruntime's `quantize_static` writes with QuantFormat.QDQ) is a float
graph in which every activation passes through a QuantizeLinear → DequantizeLinear pair
and every weight is an integer initializer read through a DequantizeLinear. kiln reads
it in two steps around the float converter (onnx_reader):

1. `split()` removes the pairs before conversion: each pair's output is renamed back to
   the value it quantizes, and that value's (scale, zero point) are recorded; each weight
   DequantizeLinear becomes the float initializer it computes ((q - zp) · scale in float32,
   as onnxruntime computes it), its parameters recorded (apply() recovers the integers
   from the floats, which survive kiln's layout transposes).
2. `apply()` turns the converted float Graph into the int8 Graph those parameters
   describe: activations int8 with their scale and zero point (uint8 ones shifted by 128,
   which is exact: q − 128 with zero point zp − 128 is the same real value), weights the
   recorded integers (recovered exactly from their float, transposed to kiln's layout),
   int32 biases at input scale × weight scale. Where a TFLite kernel needs parameters the
   model did not give (SOFTMAX's 1/256 output, one scale through a MAX_POOL_2D or a
   CONCATENATION), a QUANTIZE op requantizes to the model's: the outputs then differ from
   onnxruntime's by rounding only (docs/onnx.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..ir import Graph, Op, Quant, Tensor

_INT_TYPES = {2: "uint8", 3: "int8", 5: "int16", 6: "int32"}   # ONNX TensorProto elem types
QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
_QUANT_OPS = tuple(sorted(QDQ_OPS))
# Weight inputs of kiln's weight layers, and the IR axis of their output channels.
_WEIGHT_AXIS = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0, "TRANSPOSE_CONV": 0}


@dataclass
class QParams:
    scale: np.ndarray          # float32, (1,) or per channel
    zero_point: np.ndarray     # int64, same shape
    axis: int | None           # ONNX axis of a per-channel parameter set
    dtype: str                 # "int8", "uint8", "int16" or "int32"

    def same(self, other: "QParams") -> bool:
        return (self.dtype == other.dtype and np.array_equal(self.scale, other.scale)
                and np.array_equal(self.zero_point, other.zero_point))

    def as_int8(self) -> Quant:
        """The IR quantization, uint8 shifted to int8."""
        zp = self.zero_point - (128 if self.dtype == "uint8" else 0)
        return Quant(scale=self.scale.astype(np.float32), zero_point=zp.astype(np.int64))


@dataclass
class QdqInfo:
    activations: dict[str, QParams]                      # float value → its parameters
    constants: dict[str, QParams]                        # weight value → its parameters


def has_qdq(graph) -> bool:
    return any(n.op_type in _QUANT_OPS and n.domain in ("", "ai.onnx") for n in graph.node)


def _initializers(graph) -> dict[str, object]:
    return {t.name: t for t in graph.initializer}


def _constants(graph) -> dict[str, object]:
    """Every constant TensorProto by value name: the initializers and the value of each
    Constant node (where a QDQ model may keep its scales and zero points)."""
    found = _initializers(graph)
    for node in graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    found[node.output[0]] = a.t
    return found


def _const_array(consts: dict, name: str, what: str) -> np.ndarray:
    from onnx import numpy_helper

    if name not in consts:
        raise ModelError(f"{what} is not a constant: kiln reads QDQ models with constant "
                         "scales and zero points")
    return np.array(numpy_helper.to_array(consts[name]))


def _params(consts: dict, node, data_type: int | None) -> QParams:
    """The (scale, zero point, axis) of a QuantizeLinear / DequantizeLinear node."""
    from onnx import helper

    what = f"{node.op_type} {node.name or node.output[0]!r}"
    scale = _const_array(consts, node.input[1], f"the scale of {what}").astype(np.float32)
    if len(node.input) > 2 and node.input[2]:
        zp_arr = _const_array(consts, node.input[2], f"the zero point of {what}")
        dtype = _INT_TYPES.get(int(consts[node.input[2]].data_type), str(zp_arr.dtype))
        zp = zp_arr.astype(np.int64)
    else:
        dtype, zp = _INT_TYPES.get(data_type, "uint8"), np.zeros(scale.shape, np.int64)
    if dtype not in ("int8", "uint8", "int16", "int32"):
        raise ModelError(f"{what} quantizes to {dtype}; kiln reads int8, uint8, int16 and int32")
    per_axis = scale.ndim == 1 and scale.size > 1
    if scale.ndim > 1 or zp.ndim > 1 or zp.size != scale.size or scale.size == 0:
        raise ModelError(f"{what} has a scale of shape {list(scale.shape)} and a zero point of "
                         f"shape {list(zp.shape)}; kiln reads per-tensor or per-axis parameters")
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise ModelError(f"{what} has a non-positive or non-finite scale")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("block_size", 0):
        raise ModelError(f"{what} is blocked quantization (block_size); kiln reads per-tensor "
                         "or per-axis parameters")
    axis = int(attrs.get("axis", 1)) if per_axis else None
    return QParams(scale=scale.reshape(-1), zero_point=zp.reshape(-1), axis=axis, dtype=dtype)


def _rename(graph, old: str, new: str) -> None:
    for node in graph.node:
        for i, v in enumerate(node.input):
            if v == old:
                node.input[i] = new
        for i, v in enumerate(node.output):
            if v == old:
                node.output[i] = new
    for vo in graph.output:
        if vo.name == old:
            vo.name = new


def split(model) -> tuple[object, QdqInfo]:
    """The model without its QuantizeLinear/DequantizeLinear nodes, and what they said.
    Raises ModelError for quantization kiln cannot read as int8 tensors (a requantization
    between two parameter sets, a DequantizeLinear of an activation with no pair)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())   # the caller's stays whole
    graph = model.graph
    inits = _initializers(graph)
    consts = _constants(graph)
    info = QdqInfo(activations={}, constants={})
    consumers: dict[str, list] = {}
    for node in graph.node:
        for v in node.input:
            consumers.setdefault(v, []).append(node)
    graph_inputs = {vi.name: vi for vi in graph.input if vi.name not in inits}
    graph_outputs = {vo.name for vo in graph.output}
    drop: list = []

    def record(value: str, params: QParams) -> None:
        known = info.activations.get(value)
        if known is not None and not known.same(params):
            raise ModelError(f"value {value!r} is quantized twice with different parameters "
                             "(a requantization); kiln reads one QuantizeLinear per value")
        info.activations[value] = params

    for node in list(graph.node):
        if node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx"):
            continue
        src = node.input[0]
        if src in inits:                                   # a weight, bias or constant
            q = np.array(numpy_helper.to_array(inits[src]))
            params = _params(consts, node, int(inits[src].data_type))
            view = ((1,) * params.axis + (-1,) + (1,) * (q.ndim - params.axis - 1)
                    if params.axis is not None and params.scale.size > 1 else (-1,) if q.ndim else ())
            if params.axis is not None and params.scale.size > 1 and (
                    not -q.ndim <= params.axis < q.ndim or q.shape[params.axis] != params.scale.size):
                raise ModelError(f"DequantizeLinear of {src!r}: {params.scale.size} scales do not "
                                 f"match axis {params.axis} of shape {list(q.shape)}")
            if params.axis is not None and params.axis < 0:
                params.axis += q.ndim
            scale = params.scale.reshape(view) if q.ndim else params.scale[0]
            zp = params.zero_point.reshape(view) if q.ndim else params.zero_point[0]
            real = ((q.astype(np.int64) - zp).astype(np.float32) * scale).astype(np.float32)
            graph.initializer.append(numpy_helper.from_array(real, node.output[0]))
            info.constants[node.output[0]] = params
            drop.append(node)
        elif src in graph_inputs:                          # an integer model input
            params = _params(consts, node, graph_inputs[src].type.tensor_type.elem_type)
            graph_inputs[src].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
            _rename(graph, node.output[0], src)
            record(src, params)
            drop.append(node)

    for node in list(graph.node):
        if node.op_type != "QuantizeLinear" or node.domain not in ("", "ai.onnx"):
            continue
        value, quantized = node.input[0], node.output[0]
        params = _params(consts, node, None)
        pairs = consumers.get(quantized, [])
        if any(u.op_type != "DequantizeLinear" for u in pairs):
            raise ModelError(f"QuantizeLinear of {value!r} feeds a node other than "
                             "DequantizeLinear; kiln reads QDQ pairs")
        for dq in pairs:
            if not _params(consts, dq, None).same(params):
                raise ModelError(f"the QuantizeLinear/DequantizeLinear pair of {value!r} uses "
                                 "two parameter sets")
        # The pair's outputs become `value` again; a model output keeps its own name.
        names = [dq.output[0] for dq in pairs] + ([quantized] if quantized in graph_outputs else [])
        keep = next((n for n in names if n in graph_outputs), None)
        if keep is not None and value not in graph_inputs:
            _rename(graph, value, keep)
            value = keep
        for name in names:
            if name != value:
                _rename(graph, name, value)
        record(value, params)
        drop.extend([node] + pairs)

    for node in drop:
        graph.node.remove(node)
    left = [n for n in graph.node if n.op_type in _QUANT_OPS]
    if left:
        raise ModelError(f"{left[0].op_type} of {left[0].input[0]!r} is not part of a "
                         "QuantizeLinear → DequantizeLinear pair; kiln reads QDQ models "
                         "(onnxruntime.quantization.quantize_static, QuantFormat.QDQ)")
    for vo in graph.output:                     # int8 outputs: kiln's outputs are int8 anyway
        vo.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    del graph.value_info[:]                     # inferred again by the reader
    return model, info


# --- the converted graph → int8 --------------------------------------------------------

# Ops whose output holds the input's values moved or selected: a value with no pair of
# its own (a layout transpose kiln inserted) takes its neighbour's parameters.
_PASS_THROUGH = {"TRANSPOSE", "RESHAPE", "PAD", "SQUEEZE", "EXPAND_DIMS", "STRIDED_SLICE", "SLICE"}
# kiln's grouped Conv (onnx_reader._grouped_conv): the SPLIT's parts take its input's
# parameters, the per-group outputs those of the CONCATENATION joining them.
_SPLITS = {"SPLIT": 1, "SPLIT_V": 0}


def apply(graph: Graph, info: QdqInfo, sources: dict[int, tuple[str, int]]) -> Graph:
    """The int8 graph of a converted QDQ model. `sources` maps an IR constant made from a
    model initializer to (the initializer's value name, the ONNX axis of its output
    channels[, the first of them it holds: a group's part of a grouped Conv's weights])
    (onnx_reader records them for weights, biases and constant operands)."""
    from ..quantize.rewrite import FIXED_OUTPUT, SHARED_SCALE

    act = _activation_params(graph, info)
    tensors = graph.tensors
    for tid, quant in act.items():
        t = tensors[tid]
        t.dtype, t.quant = "int8", quant
    ops: list[Op] = []
    for op in graph.ops:
        if op.type in _WEIGHT_AXIS:
            _quantize_weight_op(graph, op, info, sources)
        else:
            for i, tid in enumerate(op.inputs):
                t = tensors[tid] if tid >= 0 else None
                if t is not None and t.is_const and t.dtype == "float32":
                    _quantize_operand(graph, op, i, info, sources)
        ops.extend(_requantized(graph, op, FIXED_OUTPUT, SHARED_SCALE))
    for i, op in enumerate(ops):
        op.index = i
    graph.ops = ops
    return graph


def _activation_params(graph: Graph, info: QdqInfo) -> dict[int, Quant]:
    """IR tensor id → int8 Quant for every activation; ModelError naming one without."""
    found: dict[int, Quant] = {}
    for t in graph.tensors:
        if not t.is_const and t.name in info.activations:
            params = info.activations[t.name]
            if params.dtype not in ("int8", "uint8"):
                raise ModelError(f"activation {t.name!r} is quantized to {params.dtype}; kiln "
                                 "reads int8 and uint8 QDQ activations")
            if params.scale.size != 1:
                raise ModelError(f"activation {t.name!r} has per-channel parameters; TFLite's "
                                 "int8 scheme quantizes activations per tensor")
            found[t.id] = params.as_int8()
    changed = True
    while changed:              # layout ops kiln inserted take their neighbour's parameters
        changed = False
        for op in graph.ops:
            if op.type in _SPLITS or op.type == "CONCATENATION":
                src, dst = ((op.inputs[_SPLITS[op.type]], op.outputs) if op.type in _SPLITS else
                            (op.outputs[0], [t for t in op.inputs if not graph.tensors[t].is_const]))
                if src in found:
                    for t in dst:
                        if t not in found:
                            found[t] = found[src]
                            changed = True
                continue
            c = _scalar_constant(graph, op)
            if c is not None:       # a HardSigmoid kiln lowered: MUL, ADD, MAXIMUM, MINIMUM
                x, y = op.inputs[0], op.outputs[0]
                if op.type == "MUL" and c > 0 and x in found and y not in found:
                    s, z = found[x].single()    # alpha·x: the same integers, scaled
                    found[y] = Quant(scale=np.array([s * c], np.float32),
                                     zero_point=np.array([z], np.int64))
                    changed = True
                elif op.type in ("MAXIMUM", "MINIMUM") and y in found and x not in found:
                    found[x] = found[y]         # clamping to y's range first changes nothing
                    changed = True
                continue
            if op.type not in _PASS_THROUGH:
                continue
            x, y = op.inputs[0], op.outputs[0]
            if x in found and y not in found:
                found[y] = found[x]
                changed = True
            elif y in found and x not in found and not graph.tensors[x].is_const:
                found[x] = found[y]
                changed = True
    for t in graph.tensors:
        if not t.is_const and t.id not in found and _used(graph, t.id):
            raise ModelError(f"value {t.name!r} has no QuantizeLinear/DequantizeLinear pair; "
                             "kiln reads QDQ models whose every activation is quantized "
                             "(quantize_static with the default op types; it leaves LSTM and "
                             "GRU in float: give kiln the float model and --calibration)")
    return found


def _scalar_constant(graph: Graph, op: Op) -> float | None:
    """The float scalar a MUL, ADD, MAXIMUM or MINIMUM applies to an activation, else None."""
    if op.type not in ("MUL", "ADD", "MAXIMUM", "MINIMUM") or len(op.inputs) != 2:
        return None
    x, c = (graph.tensors[t] for t in op.inputs)
    if x.is_const or not c.is_const or c.data.size != 1 or c.data.dtype.kind != "f":
        return None
    return float(c.data.reshape(-1)[0])


def _used(graph: Graph, tid: int) -> bool:
    return tid in graph.inputs or tid in graph.outputs or any(
        tid in op.inputs or tid in op.outputs for op in graph.ops)


def _quantize_weight_op(graph: Graph, op: Op, info: QdqInfo, sources: dict) -> None:
    from ..quantize.rewrite import LAYER_INPUTS, quantize_weights

    index = LAYER_INPUTS.get(op.type, (0, 1, 2))
    x, w, b = (graph.tensors[op.inputs[i]] if i < len(op.inputs) and op.inputs[i] >= 0 else None
               for i in index)
    axis = _WEIGHT_AXIS[op.type]
    channels = w.shape[axis]
    q, scales = _recorded_weights(w, axis, info, sources.get(w.id))
    if q is None:       # not the model's integers (BatchNormalization folded, Gemm alpha)
        q, scales = quantize_weights(w.data.astype(np.float32), axis)
    w.data, w.dtype = q, "int8"
    w.quant = Quant(scale=scales.astype(np.float32), zero_point=np.zeros(scales.size, np.int64),
                    axis=axis)
    if b is not None:
        in_scale = np.float64(x.quant.scale[0])
        b_scales = (in_scale * np.broadcast_to(scales.astype(np.float64), (channels,)))
        bq = np.round(b.data.astype(np.float64) / b_scales)
        if np.any(np.abs(bq) > (1 << 31) - 1):
            raise ModelError(f"the bias of {op.describe()} does not fit int32 at input scale × "
                             "weight scale")
        b.data, b.dtype = bq.astype(np.int32), "int32"
        b.quant = Quant(scale=b_scales.astype(np.float32),
                        zero_point=np.zeros(channels, np.int64), axis=0)


def _recorded_weights(w: Tensor, axis: int, info: QdqInfo, source):
    """(int8 values, scales) the model's DequantizeLinear gave these weights, recovered
    from their converted floats; (None, None) when they are not those integers."""
    if source is None or source[0] not in info.constants:
        return None, None
    params = info.constants[source[0]]
    if params.dtype not in ("int8", "uint8"):
        return None, None
    shift = 128 if params.dtype == "uint8" else 0
    if np.any(params.zero_point != shift):
        raise ModelError(f"weights {source[0]!r} are asymmetric (zero point "
                         f"{int(params.zero_point.reshape(-1)[0]) - shift} after int8); TFLite's "
                         "int8 kernels take symmetric weights: quantize_static with "
                         "weight_type=QuantType.QInt8 (the default) writes them")
    channels = w.shape[axis]
    first = source[2] if len(source) > 2 else 0     # a group's channels of a grouped Conv
    if params.scale.size == 1:
        scales = np.repeat(params.scale, channels)
    elif params.axis == source[1] and (params.scale.size == channels if len(source) < 3
                                       else params.scale.size >= first + channels):
        scales = params.scale[first:first + channels]
    else:
        return None, None
    view = [1] * w.data.ndim
    view[axis] = channels
    ratio = w.data.astype(np.float64) / scales.astype(np.float64).reshape(view)
    q = np.round(ratio)
    if np.max(np.abs(ratio - q), initial=0.0) > 1e-3 or np.any(np.abs(q) > 127):
        return None, None
    return q.astype(np.int8), scales.astype(np.float32)


def _quantize_operand(graph: Graph, op: Op, i: int, info: QdqInfo, sources: dict) -> None:
    """A float constant an op reads as data (an ADD's addend, a Clip bound): int8 with
    the parameters its DequantizeLinear gave, else those of the op's other input (MAXIMUM
    and MINIMUM compare in one scale), else its own range."""
    from ..quantize.calibrate import asymmetric_params

    t = graph.tensors[op.inputs[i]]
    if t.data.dtype.kind != "f":
        return
    source = sources.get(t.id)
    quant = None
    if source is not None and source[0] in info.constants:
        params = info.constants[source[0]]
        if params.dtype in ("int8", "uint8") and params.scale.size == 1:
            quant = params.as_int8()
    if quant is None and op.type in ("MAXIMUM", "MINIMUM"):
        other = graph.tensors[op.inputs[1 - i]]
        quant = other.quant
    if quant is None:
        scale, zp = asymmetric_params(float(t.data.min(initial=0.0)), float(t.data.max(initial=0.0)))
        quant = Quant(scale=np.array([scale], np.float32), zero_point=np.array([zp], np.int64))
    s, z = float(quant.scale[0]), int(quant.zero_point[0])
    q = np.clip(np.round(t.data.astype(np.float64) / s) + z, -128, 127)
    t.data, t.dtype, t.quant = q.astype(np.int8), "int8", quant


def _requantized(graph: Graph, op: Op, fixed: dict, shared: dict) -> list[Op]:
    """`op`, and QUANTIZE ops where a TFLite kernel needs other parameters than the
    model's: a fixed output range (SOFTMAX), or one scale in and out (MAX_POOL_2D, ...)."""
    tensors = graph.tensors
    before: list[Op] = []
    after: list[Op] = []
    y = tensors[op.outputs[0]] if op.outputs else None
    if y is None or y.quant is None:
        return [op]
    if op.type in fixed:
        scale, zp = fixed[op.type]
        want = Quant(scale=np.array([scale], np.float32), zero_point=np.array([zp], np.int64))
        if not _same(want, y.quant):
            inner = _new_tensor(graph, y, want, "_fixed")
            after.append(Op("QUANTIZE", [inner.id], [y.id]))
            op.outputs[0] = inner.id
    elif op.type in shared:
        data_inputs = shared[op.type] or tuple(range(len(op.inputs)))
        ref = y.quant
        for i in data_inputs:
            if i >= len(op.inputs) or op.inputs[i] < 0:
                continue
            x = tensors[op.inputs[i]]
            if x.quant is None or _same(x.quant, ref):
                continue
            if x.is_const:
                real = (x.data.astype(np.float64) - int(x.quant.zero_point[0])) * float(x.quant.scale[0])
                x.data = np.clip(np.round(real / float(ref.scale[0])) + int(ref.zero_point[0]),
                                 -128, 127).astype(np.int8)
                x.quant = ref
                continue
            moved = _new_tensor(graph, x, ref, f"_requant{op.index}")
            before.append(Op("QUANTIZE", [x.id], [moved.id]))
            op.inputs[i] = moved.id
        for k, tid in enumerate(op.outputs[1:], 1):   # SPLIT: one scale for every output
            out = tensors[tid]
            if out.quant is not None and not _same(out.quant, ref):
                inner = _new_tensor(graph, out, ref, "_shared")
                after.append(Op("QUANTIZE", [inner.id], [out.id]))
                op.outputs[k] = inner.id
    return before + [op] + after


def _same(a: Quant, b: Quant) -> bool:
    return (np.float32(a.scale[0]) == np.float32(b.scale[0])
            and int(a.zero_point[0]) == int(b.zero_point[0]))


def _new_tensor(graph: Graph, like: Tensor, quant: Quant, suffix: str) -> Tensor:
    t = Tensor(id=len(graph.tensors), name=like.name + suffix, shape=like.shape, dtype="int8",
               quant=quant)
    graph.tensors.append(t)
    return t
