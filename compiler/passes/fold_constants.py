"""Fold ops whose result is known at compile time into constant tensors.

Keras models exported with a `None` batch compute reshape targets and initial states
at run time (SHAPE → STRIDED_SLICE → PACK → RESHAPE, or → FILL for an LSTM's zero
state). With static shapes every such op has a constant result; folding it leaves a
plain RESHAPE with a constant shape, or a constant state.
What folds: ops that only read static shapes (SHAPE, RANK, ZEROS_LIKE), FILL of a
constant value (TFLite has no ONES_LIKE: the converter writes SHAPE → FILL for it),
and integer (int32/int64) shape arithmetic on constants. Math on weights and
activations (float or quantized values) stays in its ops, so nothing needs TFLite's
rounding reproduced here.
"""

from __future__ import annotations

import copy
import math

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


_SHAPE_DTYPES = (np.int32, np.int64)
# Integer element-wise shape arithmetic (TFLite's int32 semantics: FLOOR_DIV and
# FLOOR_MOD round toward -inf like numpy; an int32 result that wraps is not folded).
_INT_BINARY = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply,
               "FLOOR_DIV": np.floor_divide, "FLOOR_MOD": np.mod,
               "MAXIMUM": np.maximum, "MINIMUM": np.minimum}


# Inputs an op needs before it can be evaluated (a hostile model may give fewer).
_ARITY = {"FILL": 2, "RANGE": 3, "BROADCAST_ARGS": 2, "SLICE": 3, "TRANSPOSE": 2, "TILE": 2,
          "BROADCAST_TO": 2, "STRIDED_SLICE": 4, "GATHER": 2, "REDUCE_PROD": 2, "SUM": 2,
          "REDUCE_MAX": 2, "REDUCE_MIN": 2, **{k: 2 for k in _INT_BINARY}}


def _ints(x: np.ndarray | None) -> np.ndarray:
    """`x` if it holds int32/int64 shape values, else _CannotFold."""
    if x is None or x.dtype.type not in _SHAPE_DTYPES:
        raise _CannotFold
    return x


def _exact(wide, dtype: np.dtype) -> np.ndarray:
    """Python-int results as `dtype`; _CannotFold where one does not fit (it would wrap)."""
    out = np.asarray(wide, dtype=object)
    info = np.iinfo(dtype)
    if out.size and (min(out.reshape(-1)) < info.min or max(out.reshape(-1)) > info.max):
        raise _CannotFold
    return out.astype(dtype)


def _out_dtype(graph: Graph, op: Op, k: int = 0) -> np.dtype:
    return DTYPES[graph.tensor(op.outputs[k]).dtype]


# A folded tensor is stored as a constant; anything larger stays an op (and a model
# declaring a huge tensor cannot make this pass allocate it).
MAX_FOLD_ELEMENTS = 1 << 20


def _room(count: int, graph: Graph, op: Op) -> None:
    """_CannotFold unless `count` elements are what the op's output declares, and few."""
    out = graph.tensor(op.outputs[0])
    if count != out.size or count > MAX_FOLD_ELEMENTS:
        raise _CannotFold


def _static(graph: Graph, op: Op, t: list) -> list[np.ndarray] | None:
    """Ops whose result depends on their input's static shape only (not its values)."""
    if op.type == "SHAPE":
        return [np.array(t[0].shape, dtype=np.int32)]
    if op.type == "RANK":
        return [np.array(len(t[0].shape), dtype=np.int32)]
    if op.type == "ZEROS_LIKE":         # raw zeros, whatever the quantization (TFLite's)
        _room(t[0].size, graph, op)
        return [np.zeros(t[0].shape, dtype=_out_dtype(graph, op))]
    return None


def _axes(axis: np.ndarray, rank: int) -> tuple[int, ...]:
    out = []
    for a in _ints(axis).reshape(-1).tolist():
        if not -rank <= a < rank:
            raise _CannotFold
        out.append(a % rank)
    return tuple(sorted(set(out)))


def _evaluate(graph: Graph, op: Op) -> list[np.ndarray]:
    if not op.outputs:
        raise _CannotFold
    t = [graph.tensor(i) if i >= 0 else None for i in op.inputs]
    v = [x.data if x is not None else None for x in t]
    if t and t[0] is not None:
        static = _static(graph, op, t)
        if static is not None:
            return static
    if any(x is None for x in v) or len(v) < _ARITY.get(op.type, 1):
        raise _CannotFold
    if op.type == "FILL":
        dims = _ints(v[0]).reshape(-1)
        if v[1].size != 1 or (dims < 0).any():
            raise _CannotFold
        _room(math.prod(int(d) for d in dims), graph, op)
        return [np.full(tuple(int(d) for d in dims), v[1].reshape(()), dtype=_out_dtype(graph, op))]
    if op.type in _INT_BINARY and op.options.get("fused_activation_function", "NONE") == "NONE":
        a, b = _ints(v[0]), _ints(v[1])
        if op.type in ("FLOOR_DIV", "FLOOR_MOD") and (b == 0).any():
            raise _CannotFold
        try:
            _room(math.prod(np.broadcast_shapes(a.shape, b.shape)), graph, op)
        except ValueError:
            raise _CannotFold from None
        wide = _INT_BINARY[op.type](a.astype(object), b.astype(object))
        return [_exact(wide, np.result_type(a.dtype, b.dtype))]
    if op.type == "RANGE":
        start, limit, delta = (_ints(x).reshape(()) for x in v[:3])
        if int(delta) == 0:
            raise _CannotFold
        _room(max(0, -(-(int(limit) - int(start)) // int(delta))), graph, op)
        return [np.arange(int(start), int(limit), int(delta))]
    if op.type == "BROADCAST_ARGS":
        try:
            return [np.array(np.broadcast_shapes(tuple(_ints(v[0]).tolist()),
                                                 tuple(_ints(v[1]).tolist())))]
        except ValueError:
            raise _CannotFold from None
    if op.type in ("REDUCE_PROD", "SUM", "REDUCE_MAX", "REDUCE_MIN"):
        fn = {"REDUCE_PROD": np.prod, "SUM": np.sum, "REDUCE_MAX": np.max,
              "REDUCE_MIN": np.min}[op.type]
        x = _ints(v[0])
        axes = _axes(v[1], x.ndim)
        if x.size == 0 or any(x.shape[a] == 0 for a in axes):
            raise _CannotFold
        keep = bool(op.options.get("keep_dims", False))
        return [_exact(fn(x.astype(object), axis=axes, keepdims=keep), x.dtype)]
    if op.type == "SLICE":
        x, begin, size = _ints(v[0]), _ints(v[1]).reshape(-1), _ints(v[2]).reshape(-1)
        if len(begin) != x.ndim or len(size) != x.ndim:
            raise _CannotFold
        index = []
        for d, (b, n) in enumerate(zip(begin.tolist(), size.tolist())):
            end = x.shape[d] if n == -1 else b + n
            if not 0 <= b <= end <= x.shape[d]:
                raise _CannotFold
            index.append(slice(b, end))
        return [x[tuple(index)]]
    if op.type == "TRANSPOSE":
        x, perm = _ints(v[0]), _ints(v[1]).reshape(-1).tolist()
        if sorted(p % max(x.ndim, 1) for p in perm) != list(range(x.ndim)):
            raise _CannotFold
        return [np.transpose(x, [p % x.ndim for p in perm])]
    if op.type in ("TILE", "BROADCAST_TO"):
        x, arg = _ints(v[0]), _ints(v[1]).reshape(-1)
        _room(math.prod(int(e) for e in arg) * (x.size if op.type == "TILE" else 1), graph, op)
        try:
            if op.type == "TILE":
                if len(arg) != x.ndim or (arg < 0).any():
                    raise _CannotFold
                return [np.tile(x, arg.tolist())]
            return [np.broadcast_to(x, tuple(arg.tolist())).copy()]
        except ValueError:
            raise _CannotFold from None
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
        idx = _ints(v[1])
        if (idx < 0).any() or (idx >= v[0].shape[0]).any():
            raise _CannotFold                 # TFLite fails the op; so does kiln's kernel
        return [v[0][idx]]
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
            dtype = DTYPES.get(out.dtype, np.asarray(val).dtype)
            out.data = np.asarray(val, dtype=dtype).reshape(out.shape)
    graph.ops = kept
    return graph
