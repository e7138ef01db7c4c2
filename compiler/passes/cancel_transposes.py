"""Cancel layout transposes: no shuffle of the data between layers where none is needed.

An imported ONNX graph holds rank-4 values NHWC; a model that permutes its own tensors
(PyTorch's x.permute(0, 2, 3, 1) ... .permute(0, 3, 1, 2) around a layer that does not
care, a channels-last block) becomes TRANSPOSE → elementwise ops → TRANSPOSE in kiln's
layout. This pass removes such shuffles:

- two TRANSPOSEs in a row become one (the composed permutation), or none when they undo
  each other: the readers of the second read the first's input;
- a TRANSPOSE whose only reader starts a chain of layout-agnostic elementwise ops (each
  the sole reader of the one before: unary ops, and binary ops whose other operand is a
  constant, permuted back here, or the sole output of a TRANSPOSE by the same
  permutation, a residual branch, which goes too) that ends in another TRANSPOSE is moved
  through the chain into it: the chain computes on the unpermuted data, and the closing
  TRANSPOSE permutes by the two composed, or goes too where it undid the first (the
  chain's last op then writes what it wrote).

Elementwise ops compute each element on its own, so the order of the elements they
read does not change any value: the results are bit-identical. Nothing a model's caller
sees changes (model inputs and outputs keep their tensors and shapes). TRANSPOSE's own
rule (input and output quantized alike) keeps every int8 value's meaning.
"""

from __future__ import annotations

import copy

import numpy as np

from ..ir import Graph, Op

# One input, output element i from input element i (options are per-element constants).
_UNARY = {"RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LOGISTIC", "TANH", "LEAKY_RELU",
          "HARD_SWISH", "ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT", "SQUARE", "ELU", "GELU",
          "QUANTIZE", "DEQUANTIZE", "CAST", "FLOOR", "CEIL", "ROUND", "SIN", "COS"}
# Two inputs broadcast elementwise (the other operand a constant or a permuted activation).
_BINARY = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW"}


def cancel_transposes(graph: Graph) -> Graph:
    """A copy of `graph` with this pass applied (the graph itself is unchanged)."""
    return cancel_transposes_in_place(copy.deepcopy(graph))


def cancel_transposes_in_place(graph: Graph) -> Graph:
    changed = True
    while changed:              # each rewrite removes at least one op: this ends
        changed = _merge_pairs(graph) or _sink_through_chain(graph)
    return graph


def _perm(graph: Graph, op: Op) -> tuple[int, ...] | None:
    """A TRANSPOSE's permutation, if it is a constant of the right length."""
    if op.type != "TRANSPOSE" or len(op.inputs) < 2 or op.inputs[1] < 0:
        return None
    t = graph.tensor(op.inputs[1])
    if not t.is_const:
        return None
    perm = tuple(int(p) for p in np.asarray(t.data).reshape(-1))
    rank = len(graph.tensor(op.inputs[0]).shape)
    return perm if sorted(perm) == list(range(rank)) else None


def _compose(first: tuple[int, ...], second: tuple[int, ...]) -> tuple[int, ...]:
    """transpose(transpose(x, first), second) == transpose(x, result)."""
    return tuple(first[p] for p in second)


def _new_perm(graph: Graph, perm: tuple[int, ...], like: int) -> int:
    """A new constant int32 permutation tensor (named after tensor `like`)."""
    from ..ir import Tensor

    tid = len(graph.tensors)
    data = np.array(perm, np.int32)
    graph.tensors.append(Tensor(id=tid, name=graph.tensor(like).name + "_perm",
                                shape=data.shape, dtype="int32", data=data))
    return tid


def _replace_reads(graph: Graph, old: int, new: int) -> None:
    for op in graph.ops:
        op.inputs = [new if t == old else t for t in op.inputs]


def _merge_pairs(graph: Graph) -> bool:
    """TRANSPOSE → TRANSPOSE: one transpose, or none. True when the graph changed."""
    producers = graph.producers()
    outputs = set(graph.outputs)
    for i, second in enumerate(graph.ops):
        p2 = _perm(graph, second)
        if p2 is None or second.inputs[0] not in producers:
            continue
        first = graph.ops[producers[second.inputs[0]]]
        p1 = _perm(graph, first)
        if p1 is None:
            continue
        source = first.inputs[0]
        composed = _compose(p1, p2)
        if composed == tuple(range(len(composed))):
            if second.outputs[0] in outputs:
                continue            # the model's output tensor must be written by an op
            _replace_reads(graph, second.outputs[0], source)
            del graph.ops[i]
        else:
            second.inputs = [source, _new_perm(graph, composed, second.outputs[0])]
        _drop_unread(graph, first)
        return True
    return False


def _drop_unread(graph: Graph, op: Op) -> None:
    """Remove `op` when nothing reads its output any more (and it is no model output)."""
    out = op.outputs[0]
    if out in graph.outputs or any(out in other.inputs for other in graph.ops):
        return
    graph.ops.remove(op)


def _operands(graph: Graph, op: Op, value: int, perm: tuple[int, ...],
              producers: dict[int, int], consumers: dict[int, list[int]]) -> list | None:
    """How `op` reads once the permute of `value` by `perm` moves past it, or None when
    it cannot: `op` computes elementwise on `value`, its output of the same shape, and
    each other input is a constant (to be permuted back: ("const", index, data)) or the
    sole output of a TRANSPOSE by the same `perm` (read unpermuted: ("transposed",
    index, that TRANSPOSE))."""
    out_shape = graph.tensor(value).shape
    if len(op.outputs) != 1 or graph.tensor(op.outputs[0]).shape != out_shape:
        return None
    if op.type in _UNARY:
        return [] if [t for t in op.inputs if t >= 0] == [value] else None
    if op.type not in _BINARY or len(op.inputs) != 2 or value not in op.inputs:
        return None
    if op.inputs[0] == op.inputs[1]:
        return []                                   # x op x: both read the moved value
    index = 1 if op.inputs[0] == value else 0
    other = graph.tensor(op.inputs[index])
    if other.is_const:
        if other.quant is not None and other.quant.per_channel:
            return None                             # its channel axis would move
        if other.data.ndim > len(perm):
            return None
        padded = other.data.reshape((1,) * (len(perm) - other.data.ndim) + other.data.shape)
        return [("const", index, padded.transpose(np.argsort(perm)))]
    maker = producers.get(other.id)
    if maker is None or len(consumers.get(other.id, ())) != 1:
        return None
    transpose = graph.ops[maker]
    if _perm(graph, transpose) != perm or other.shape != out_shape:
        return None
    return [("transposed", index, transpose)]


def _sink_through_chain(graph: Graph) -> bool:
    """TRANSPOSE → elementwise ops → TRANSPOSE: the first moves into the last."""
    consumers = graph.consumers()
    producers = graph.producers()
    outputs = set(graph.outputs)
    for first in graph.ops:
        p1 = _perm(graph, first)
        if p1 is None:
            continue
        chain, value = [], first.outputs[0]
        while value not in outputs and len(consumers.get(value, ())) == 1:
            reader = graph.ops[consumers[value][0]]
            fixes = _operands(graph, reader, value, p1, producers, consumers)
            if fixes is None:
                break
            chain.append((reader, value, fixes))
            value = reader.outputs[0]
        if not chain or value in outputs or len(consumers.get(value, ())) != 1:
            continue
        closing = graph.ops[consumers[value][0]]
        p2 = _perm(graph, closing)
        if p2 is None:
            continue
        source = first.inputs[0]
        shape = graph.tensor(source).shape
        # The chain reads the unpermuted data; its values take the source's shape (each
        # is read by the next op only); constants are permuted back, the other operand
        # of a binary op read before its own TRANSPOSE. Where the closing TRANSPOSE
        # undoes the first, the last op writes its output and both go; else it permutes
        # by the two composed.
        reader, read, _ = chain[0]
        reader.inputs = [source if t == read else t for t in reader.inputs]
        dropped = [first]
        for op, _, fixes in chain:
            for kind, index, what in fixes:
                if kind == "const":
                    op.inputs[index] = _new_const(graph, op.inputs[index], what)
                else:
                    op.inputs[index] = what.inputs[0]
                    dropped.append(what)
        for op, _, _ in chain[:-1]:
            graph.tensor(op.outputs[0]).shape = shape
        last = chain[-1][0]
        composed = _compose(p1, p2)
        if composed == tuple(range(len(composed))):
            last.outputs = [closing.outputs[0]]
            graph.ops.remove(closing)
        else:
            graph.tensor(last.outputs[0]).shape = shape
            closing.inputs = [last.outputs[0], _new_perm(graph, composed, closing.outputs[0])]
        for op in dropped:
            _drop_unread(graph, op)
        return True
    return False


def _new_const(graph: Graph, like: int, data: np.ndarray) -> int:
    """A constant like tensor `like` (dtype, quantization) holding `data`."""
    from ..ir import Tensor

    t = graph.tensor(like)
    tid = len(graph.tensors)
    data = np.ascontiguousarray(data)
    graph.tensors.append(Tensor(id=tid, name=t.name, shape=tuple(data.shape), dtype=t.dtype,
                                quant=copy.deepcopy(t.quant), data=data))
    return tid
