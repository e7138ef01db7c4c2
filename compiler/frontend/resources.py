"""Resource variables (a tf.Variable, as TF's converter writes it) → variable tensors.

The converter writes a tf.Variable as ops on a RESOURCE handle:

    CALL_ONCE (init_subgraph_index k)      runs subgraph k on the first invoke only
    VAR_HANDLE (container, shared_name)    → handle
    READ_VARIABLE (handle)                 → value
    ASSIGN_VARIABLE (handle, value)        (no output)

tflite-micro keeps one buffer per resource (found by its names), sized and quantized
like the first value assigned to it (ASSIGN_VARIABLE's prepare allocates it: subgraph 0's
ops in order, then the other subgraphs'), and fills it, when allocated and on every
reset(), with that value's zero point cast to int8 (0 without quantization). CALL_ONCE
runs its subgraph once per interpreter: a reset() does not run it again, so after a
reset the variable holds the fill value, not the init subgraph's.

kiln's IR has one form of model state, the variable tensor (Tensor.is_variable). Here
each resource becomes one: the handle tensor of its first VAR_HANDLE, given the dtype,
shape and quantization of the value tflite-micro allocates it from. Then

    VAR_HANDLE                    dropped (its uses read the variable)
    READ_VARIABLE(var) → value    a copy out of the state
    ASSIGN_VARIABLE(var, value)   a copy into the state (no outputs)
    CALL_ONCE(var1, init1, ...)   copies the constants its init subgraph assigns, on the
                                  first run only (the layer keeps its own flag, which
                                  kiln_reset leaves alone, as tflite-micro's reset does)
"""

from __future__ import annotations

import copy
from typing import Callable

from ..errors import ModelError
from ..ir import Graph, Op, Tensor

RESOURCE_OPS = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")
# Ops an init subgraph may hold: kiln runs it at compile time, as constants.
_INIT_OPS = ("VAR_HANDLE", "ASSIGN_VARIABLE")

Subgraph = tuple[list[Tensor], list[Op], list[int], list[int]]


def _key(op: Op) -> tuple[str, str]:
    return (str(op.options.get("container") or ""), str(op.options.get("shared_name") or ""))


def _handles(ops: list[Op], where: str) -> dict[int, tuple[str, str]]:
    """handle tensor id → resource key, from the VAR_HANDLE ops of one subgraph."""
    out = {}
    for op in ops:
        if op.type == "VAR_HANDLE":
            if op.inputs or len(op.outputs) != 1:
                raise ModelError(f"{op.describe()}{where} takes no input and writes one handle")
            out[op.outputs[0]] = _key(op)
    return out


def _operand(op: Op, handles: dict[int, tuple[str, str]], where: str) -> tuple[str, str]:
    """The resource key the handle input of READ_/ASSIGN_VARIABLE `op` names."""
    expected = (1, 1) if op.type == "READ_VARIABLE" else (2, 0)
    if (len(op.inputs), len(op.outputs)) != expected or min(op.inputs) < 0:
        raise ModelError(f"{op.describe()}{where} takes {expected[0]} input(s) and writes "
                         f"{expected[1]} output(s)")
    if op.inputs[0] not in handles:
        raise ModelError(f"{op.describe()}{where} reads a handle no VAR_HANDLE writes")
    return handles[op.inputs[0]]


def _init_values(graph: Graph, read_subgraph: Callable[[int], Subgraph], index: int,
                 n_subgraphs: int, call: Op) -> list[tuple[tuple[str, str], Tensor]]:
    """(resource key, constant value) assigned by CALL_ONCE's init subgraph `index`."""
    if not isinstance(index, int) or not 0 < index < n_subgraphs:
        raise ModelError(f"{call.describe()} names init subgraph {index!r}, out of range "
                         f"(the model has {n_subgraphs})")
    tensors, ops, _, _ = read_subgraph(index)
    where = f" in CALL_ONCE's init subgraph {index}"
    others = sorted({op.type for op in ops if op.type not in _INIT_OPS})
    if others:
        raise ModelError(f"{call.describe()}: its init subgraph {index} computes with "
                         f"{', '.join(others)}; kiln takes init subgraphs that assign "
                         "constants to variables (VAR_HANDLE and ASSIGN_VARIABLE only)")
    handles = _handles(ops, where)
    out = []
    for op in ops:
        if op.type == "ASSIGN_VARIABLE":
            key = _operand(op, handles, where)
            value = tensors[op.inputs[1]]
            if not value.is_const:
                raise ModelError(f"{op.describe()}{where} assigns {value.name}, which is not "
                                 "a constant")
            out.append((key, value))
    return out


def resource_variables(graph: Graph, read_subgraph: Callable[[int], Subgraph],
                       n_subgraphs: int) -> Graph:
    """`graph` (subgraph 0) with its resource variables as variable tensors (see the
    module doc); the graph itself if it has none. `read_subgraph(k)` reads subgraph k."""
    if not any(op.type in RESOURCE_OPS for op in graph.ops):
        return graph
    handles = _handles(graph.ops, "")
    inits: dict[int, list[tuple[tuple[str, str], Tensor]]] = {}   # id(CALL_ONCE op) → values
    for op in graph.ops:
        if op.type == "CALL_ONCE":
            if op.inputs or op.outputs:
                raise ModelError(f"{op.describe()} takes no inputs and writes no outputs")
            index = op.options.get("init_subgraph_index")
            inits[id(op)] = _init_values(graph, read_subgraph, index, n_subgraphs, op)
    # The value each resource is allocated from: the first one assigned to it, subgraph 0
    # first (tflite-micro prepares subgraph 0's ops before the init subgraphs').
    template: dict[tuple[str, str], Tensor] = {}
    for op in graph.ops:
        if op.type in ("READ_VARIABLE", "ASSIGN_VARIABLE"):
            key = _operand(op, handles, "")
            if op.type == "ASSIGN_VARIABLE":
                template.setdefault(key, graph.tensor(op.inputs[1]))
    for values in inits.values():
        for key, value in values:
            template.setdefault(key, value)
    # One variable tensor per resource: the handle tensor of its first VAR_HANDLE.
    variable: dict[tuple[str, str], int] = {}
    for tid, key in handles.items():
        if key not in variable or tid < variable[key]:
            variable[key] = tid
    for key, tid in variable.items():
        value = template.get(key)
        name = key[1] or f"resource {tid}"
        if value is None:
            raise ModelError(f"resource variable {name} is read but never assigned "
                             "(tflite-micro allocates a variable where a value is assigned)")
        _check_fill(value, name)
        t = graph.tensor(tid)
        t.dtype, t.shape, t.quant = value.dtype, tuple(value.shape), copy.deepcopy(value.quant)
        t.data, t.is_variable, t.name = None, True, name
    var_of = {h: variable[key] for h, key in handles.items()}
    for op in graph.ops:        # a handle is only ever READ_/ASSIGN_VARIABLE's first input
        used = op.inputs[1:] if op.type in ("READ_VARIABLE", "ASSIGN_VARIABLE") else op.inputs
        if any(t in handles for t in used):
            raise ModelError(f"{op.describe()} reads a resource handle; only READ_VARIABLE "
                             "and ASSIGN_VARIABLE take one")
    if any(t in handles for t in graph.inputs + graph.outputs):
        raise ModelError("a resource handle is a model input or output")

    ops: list[Op] = []
    for op in graph.ops:
        if op.type == "VAR_HANDLE":
            continue
        if op.type in ("READ_VARIABLE", "ASSIGN_VARIABLE"):
            var = graph.tensor(var_of[op.inputs[0]])
            value = graph.tensor(op.outputs[0] if op.type == "READ_VARIABLE" else op.inputs[1])
            _check_same_bytes(op, var, value)
            op.inputs = [var.id, *op.inputs[1:]]
        elif op.type == "CALL_ONCE":
            op.inputs = []
            for key, value in inits[id(op)]:
                if key not in variable:     # initialized, never used: nothing to keep
                    continue
                var = graph.tensor(variable[key])
                const = copy.deepcopy(value)
                const.id = len(graph.tensors)
                const.name = f"{var.name}_init"
                graph.tensors.append(const)
                _check_same_bytes(op, var, const)
                op.inputs += [var.id, const.id]
            if not op.inputs:               # it initializes nothing this graph reads
                continue
        ops.append(op)
    graph.ops = ops
    return graph


def _check_fill(value: Tensor, name: str) -> None:
    """tflite-micro fills a resource with its zero point cast to int8; kiln's reset fills
    int8 variables with their zero point and others with 0, which agree unless a
    non-int8 value has a zero point other than 0 (no converter writes one)."""
    if value.dtype != "int8" and value.quant is not None and value.quant.zero_point.size \
            and int(value.quant.zero_point[0]) != 0:
        raise ModelError(f"resource variable {name} is {value.dtype} with zero point "
                         f"{int(value.quant.zero_point[0])}; kiln takes resource variables "
                         "of int8, or of other types with zero point 0")


def _check_same_bytes(op: Op, var: Tensor, value: Tensor) -> None:
    if value.dtype != var.dtype or value.nbytes != var.nbytes:
        raise ModelError(f"{op.describe()}: {value.name} ({value.dtype} {list(value.shape)}) "
                         f"does not match resource variable {var.name} ({var.dtype} "
                         f"{list(var.shape)})")
