"""An int8 model's float LOG_SOFTMAX tail, moved into int8.

A converter that quantized a model but left its closing LOG_SOFTMAX in float writes
`... -> DEQUANTIZE -> LOG_SOFTMAX (float32) -> output` (MIT's PTQ LeNet does). kiln runs
no float op, and re-calibrating the whole model would throw its quantization away.
LOG_SOFTMAX needs no calibration: TFLite's int8 form has a fixed output quantization
(scale 16/256, zero point 127). So the tail becomes
`... -> LOG_SOFTMAX (int8 -> int8) -> DEQUANTIZE -> output`, what full-integer
conversion writes, and the model output stays float32.
"""

from __future__ import annotations

import copy

import numpy as np

from ..ir import Graph, Quant
from .rewrite import FIXED_OUTPUT, INT8_VERSIONS

# Ops moved: those whose int8 output quantization is fixed by the op (brief: LOG_SOFTMAX).
TAIL_OPS = ("LOG_SOFTMAX",)


def _float_ops(graph: Graph) -> list[int]:
    """Indices of the ops that compute on float32 activations (not QUANTIZE/DEQUANTIZE)."""
    out = []
    for k, op in enumerate(graph.ops):
        if op.type in ("QUANTIZE", "DEQUANTIZE"):
            continue
        acts = [graph.tensor(t) for t in op.inputs + op.outputs
                if t >= 0 and not graph.tensor(t).is_const]
        if any(t.dtype == "float32" for t in acts):
            out.append(k)
    return out


def quantize_float_tail(graph: Graph) -> Graph | None:
    """The graph with every float op moved into int8 as the module says, or None when
    some float op is not such a tail (or there is none)."""
    float_ops = _float_ops(graph)
    if not float_ops:
        return None
    g = copy.deepcopy(graph)
    producers, consumers = g.producers(), g.consumers()
    for k in float_ops:
        op = g.ops[k]
        if op.type not in TAIL_OPS or len(op.inputs) != 1 or len(op.outputs) != 1:
            return None
        x, y = op.inputs[0], op.outputs[0]
        d = producers.get(x)
        if d is None or g.ops[d].type != "DEQUANTIZE" or consumers.get(x) != [k]:
            return None
        src = g.tensor(g.ops[d].inputs[0])
        if src.dtype != "int8" or src.quant is None or src.quant.per_channel:
            return None
        if y not in g.outputs or consumers.get(y) or g.tensor(y).shape != src.shape:
            return None
        # x, DEQUANTIZE's float output, becomes LOG_SOFTMAX's int8 output; DEQUANTIZE
        # then reads it and writes the model output y. The two ops swap places.
        scale, zero_point = FIXED_OUTPUT[op.type]
        t = g.tensor(x)
        t.dtype, t.shape = "int8", src.shape
        t.quant = Quant(scale=np.array([scale], dtype=np.float32),
                        zero_point=np.array([zero_point], dtype=np.int64))
        deq = g.ops[d]
        op.inputs, op.outputs = [src.id], [x]
        op.version = INT8_VERSIONS.get(op.type, op.version)
        deq.inputs, deq.outputs = [x], [y]
        g.ops[d], g.ops[k] = op, deq
    g.verify()
    return g
