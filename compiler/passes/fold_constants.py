"""Fold ops whose result is known at compile time into constant tensors.

Keras models exported with a `None` batch compute reshape targets at run time
(SHAPE → STRIDED_SLICE → PACK → RESHAPE). With static shapes every such op has a
constant result; folding it leaves a plain RESHAPE with a constant shape.
Only small integer shape arithmetic is folded; weights math stays in its ops.
"""

from __future__ import annotations

import copy

import numpy as np

from ..ir import DTYPES, Graph, Op


def _strided_slice(op: Op, x: np.ndarray, begin, end, strides) -> np.ndarray:
    o = op.options
    if o.get("ellipsis_mask", 0) or o.get("new_axis_mask", 0) or x.ndim != 1:
        raise _CannotFold
    b, e, s = int(begin[0]), int(end[0]), int(strides[0])
    if o.get("begin_mask", 0) & 1:
        b = None
    if o.get("end_mask", 0) & 1:
        e = None
    if o.get("shrink_axis_mask", 0) & 1:
        return np.asarray(x[b])
    return x[slice(b, e, s)]


class _CannotFold(Exception):
    pass


def _evaluate(graph: Graph, op: Op) -> list[np.ndarray]:
    t = [graph.tensor(i) if i >= 0 else None for i in op.inputs]
    v = [x.data if x is not None else None for x in t]
    if op.type == "SHAPE":
        return [np.array(t[0].shape, dtype=np.int32)]
    if any(x is None for x in v):
        raise _CannotFold
    if op.type == "STRIDED_SLICE":
        return [_strided_slice(op, v[0], v[1], v[2], v[3])]
    if op.type == "PACK":
        return [np.stack(v, axis=op.options.get("axis", 0))]
    if op.type == "CONCATENATION":
        return [np.concatenate(v, axis=op.options.get("axis", 0))]
    if op.type in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
        out = graph.tensor(op.outputs[0])
        return [v[0].reshape(out.shape)]
    if op.type == "CAST":
        return [v[0].astype(DTYPES[graph.tensor(op.outputs[0]).dtype])]
    if op.type == "GATHER" and v[0].ndim == 1:
        return [v[0][v[1]]]
    if op.type in ("ADD", "SUB", "MUL") and v[0].dtype == np.int32 and op.options.get(
            "fused_activation_function", "NONE") == "NONE":
        fn = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply}[op.type]
        return [fn(v[0], v[1]).astype(np.int32)]
    if op.type == "DEQUANTIZE" and t[0].quant is not None:
        q = t[0].quant
        shape = [1] * v[0].ndim
        if v[0].ndim:
            shape[q.axis] = -1
        scale = q.scale.reshape(shape) if q.per_channel else q.scale[0]
        zp = q.zero_point.reshape(shape) if q.per_channel else q.zero_point[0]
        return [((v[0].astype(np.float32) - zp) * scale).astype(np.float32)]
    if op.type == "DEQUANTIZE" and v[0].dtype == np.float16:
        return [v[0].astype(np.float32)]
    raise _CannotFold


def fold_constants(graph: Graph) -> Graph:
    """A copy of `graph` with this pass applied (the graph itself is unchanged)."""
    return fold_constants_in_place(copy.deepcopy(graph))


def fold_constants_in_place(graph: Graph) -> Graph:
    model_outputs = set(graph.outputs)
    kept = []
    for op in graph.ops:
        try:
            values = _evaluate(graph, op)
        except _CannotFold:
            kept.append(op)
            continue
        outs = [graph.tensor(i) for i in op.outputs]
        if any(o.id in model_outputs for o in outs) or any(
                int(np.prod(o.shape, dtype=np.int64)) != np.asarray(val).size
                for o, val in zip(outs, values)):
            kept.append(op)
            continue
        for out, val in zip(outs, values):
            out.data = np.asarray(val, dtype=DTYPES.get(out.dtype, np.asarray(val).dtype)).reshape(out.shape)
    graph.ops = kept
    return graph
