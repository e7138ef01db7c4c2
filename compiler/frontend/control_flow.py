"""WHILE and IF (control flow over subgraphs) → straight-line ops in the main graph.

Keras writes GRU and SimpleRNN (unroll=False) as a tf.while_loop, which TF's converter
keeps as a WHILE op: its loop variables (a step counter, the time index, the hidden
state, the output TensorArray, the input sequence) go through a `cond` subgraph
(`time < steps && i < max_iterations`) and a `body` subgraph (one cell step).

kiln unrolls such a loop here, at read time: it evaluates the condition on the loop
variables it knows at compile time (the counters start as constants and the body adds
constants to them), and while it holds, copies the body's ops into the main graph with
fresh tensors, the counters folded to constants (so the body's GATHER of "input at
time t" reads a constant index). The body's constants (the weights) are shared by every
copy. A WHILE whose condition reads anything computed at run time has no static trip
count and is refused, naming the tensor. IF with a constant condition becomes the ops
of the branch it takes; one decided at run time is refused.

Why unroll rather than emit a C loop: the existing kernels, the memory planner and the
code generator apply unchanged (every step is an ordinary layer, bit-exact by the same
tests), and the planner reuses the arena across steps. The cost is code: one kernel call
per op and step (a 20-step GRU is 20 × 19 layers; measured in the README). A C loop
would need loop-carried buffers in the planner and layer code parameterised by the step;
unrolling stays below MAX_UNROLLED_OPS ops, past which a model is refused with a message
that says so. The TF converter's recurrent models are 8–100 steps of 10–25 ops.
"""

from __future__ import annotations

import copy
import re
from typing import Callable

import numpy as np

from ..errors import ModelError
from ..ir import DTYPES, Graph, Op, Tensor, same_quant

CONTROL_OPS = ("WHILE", "IF")
MAX_TRIPS = 4096              # iterations of one WHILE
MAX_UNROLLED_OPS = 20_000     # ops all loops of a model may add
MAX_WORK = 200_000            # subgraph ops visited (folded or not): nested loops that
                              # fold everything add no op, yet must not run for ever
_MAX_DEPTH = 8                # nested WHILE/IF

Subgraph = tuple[list[Tensor], list[Op], list[int], list[int]]

# Integer and boolean ops on constants evaluated here (the loop counters and the
# condition), with TFLite's semantics: int32 results that would wrap are left as ops.
_BINARY = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply,
           "MAXIMUM": np.maximum, "MINIMUM": np.minimum,
           "LESS": np.less, "LESS_EQUAL": np.less_equal, "GREATER": np.greater,
           "GREATER_EQUAL": np.greater_equal, "EQUAL": np.equal, "NOT_EQUAL": np.not_equal,
           "LOGICAL_AND": np.logical_and, "LOGICAL_OR": np.logical_or}
_VIEWS = ("CAST", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "IDENTITY")   # the value, re-typed
_FOLD_DTYPES = ("int32", "int64", "bool")
# Folded here: counters and conditions, a few values each. Larger integer arithmetic stays
# an op (passes/fold_constants.py may fold it, within its own bound): a hostile loop
# cannot make each of its thousands of steps allocate a large array.
_MAX_FOLD_ELEMENTS = 1 << 12
# An unrolled copy's name: <body tensor>@<tag>, the tag "step<N>" in a loop, prefixed by
# the tags of the loops and branches around it ("step2.then.step0").
_STEP_NAME = re.compile(r"(.*)@((?:[a-z]+\d*\.)*)step\d+")


def step_copies(graph: Graph) -> dict[tuple[str, str], list[int]]:
    """(body tensor name, the loop's tags bar its step) → ids of its unrolled copies with
    two or more steps (names <name>@[<tag>.]step<N>, as this module writes them): the
    quantizer gives each such group one scale, as TF's converter quantizes a loop's body
    once, so the steps share their lookup tables, multipliers and biases."""
    groups: dict[tuple[str, str], list[int]] = {}
    for t in graph.tensors:
        m = _STEP_NAME.fullmatch(t.name)
        if m and not t.is_const:
            groups.setdefault((m.group(1), m.group(2)), []).append(t.id)
    return {k: v for k, v in groups.items() if len(v) > 1}


class _NotStatic(Exception):
    """The condition reads a value known only at run time (tensor, in the subgraph)."""

    def __init__(self, tensor: Tensor):
        super().__init__(tensor.name)
        self.tensor = tensor


def _fold(op: Op, inputs: list[Tensor], out: Tensor) -> np.ndarray | None:
    """The constant value of `op`'s one output, or None where it is not folded here."""
    if len(op.outputs) != 1 or out.dtype not in _FOLD_DTYPES or any(
            t is None or not t.is_const or t.dtype not in _FOLD_DTYPES for t in inputs):
        return None
    if max([out.size] + [t.size for t in inputs]) > _MAX_FOLD_ELEMENTS:
        return None
    if op.options.get("fused_activation_function", "NONE") not in ("NONE", None):
        return None
    if op.type in _BINARY and len(inputs) == 2:
        a, b = (t.data.astype(np.int64) if t.dtype != "bool" else t.data for t in inputs)
        value = _BINARY[op.type](a, b)
    elif op.type == "LOGICAL_NOT" and inputs:
        value = np.logical_not(inputs[0].data)
    elif op.type in _VIEWS and inputs:
        value = inputs[0].data.astype(np.int64)
    else:
        return None
    if value.size != out.size:
        return None
    if out.dtype != "bool":
        info = np.iinfo(DTYPES[out.dtype])
        if value.size and (value.min() < info.min or value.max() > info.max):
            return None     # it would wrap: left to the op
    return np.asarray(value).astype(DTYPES[out.dtype]).reshape(out.shape)


class _Unroller:
    def __init__(self, graph: Graph, read_subgraph: Callable[[int], Subgraph],
                 n_subgraphs: int):
        self.g = graph
        self.read_subgraph = read_subgraph
        self.n_subgraphs = n_subgraphs
        self._subgraphs: dict[int, Subgraph] = {}
        self._shared: dict[tuple[int, int], int] = {}   # (subgraph, tensor) → main tensor
        self.ops: list[Op] = []
        self.added = 0
        self.work = 0

    # --- tensors --------------------------------------------------------------------
    def subgraph(self, k: int, op: Op) -> Subgraph:
        if not isinstance(k, int) or not 0 < k < self.n_subgraphs:
            raise ModelError(f"{op.describe()} names subgraph {k!r}, out of range (the "
                             f"model has {self.n_subgraphs})")
        if k not in self._subgraphs:
            self._subgraphs[k] = self.read_subgraph(k)
        return self._subgraphs[k]

    def _add(self, like: Tensor, name: str, data: np.ndarray | None = None) -> int:
        t = copy.copy(like)
        t.id, t.name, t.quant = len(self.g.tensors), name, copy.deepcopy(like.quant)
        t.data, t.alias_of = data, None
        self.g.tensors.append(t)
        return t.id

    def shared(self, k: int, tid: int) -> int:
        """A constant or variable of subgraph k in the main graph, once for all steps."""
        key = (k, tid)
        if key not in self._shared:
            t = self.subgraph(k, Op("?", [], []))[0][tid]
            self._shared[key] = self._add(t, t.name, t.data)   # a variable stays one
        return self._shared[key]

    # --- one subgraph, inlined --------------------------------------------------------
    def inline(self, k: int, args: list[int], call: Op, depth: int, tag: str,
               emit: bool = True) -> list[int]:
        """Subgraph k applied to main-graph tensors `args`: its ops appended (with fresh
        tensors named <name>@<tag>), their results returned. With emit=False nothing may
        be appended (a condition): an op that does not fold raises _NotStatic."""
        tensors, ops, inputs, outputs = self.subgraph(k, call)
        if len(inputs) != len(args):
            raise ModelError(f"{call.describe()} passes {len(args)} values to subgraph {k}, "
                             f"which takes {len(inputs)}")
        env: dict[int, int] = {}
        for sub_in, arg in zip(inputs, args):
            a, s = self.g.tensor(arg), tensors[sub_in]
            if a.dtype != s.dtype or tuple(a.shape) != tuple(s.shape):
                raise ModelError(f"{call.describe()}: subgraph {k} takes {s.name} as {s.dtype} "
                                 f"{list(s.shape)}, given {a.name} ({a.dtype} {list(a.shape)}); "
                                 "kiln unrolls loops whose values keep one static shape")
            _check_quant(call, a, s)
            env[sub_in] = arg

        def lookup(tid: int) -> int:
            if tid < 0:
                return tid
            if tid in env:
                return env[tid]
            t = tensors[tid]
            if t.is_const or t.is_variable:
                return self.shared(k, tid)
            raise ModelError(f"{call.describe()}: subgraph {k} reads tensor {tid} ({t.name}) "
                             "before it is written")

        for op in ops:
            self.work += 1
            if self.work > MAX_WORK:
                raise ModelError(f"{call.describe()}: unrolling its control flow visits more "
                                 f"than {MAX_WORK:,} ops (loops nested too deep or too long "
                                 "to unroll)")
            ids = [lookup(t) for t in op.inputs]
            if op.type in CONTROL_OPS:
                sub = copy.copy(op)
                sub.inputs = ids
                results = self.lower(sub, depth + 1, emit, tag)
                _check_results(op, [tensors[o] for o in op.outputs],
                               [self.g.tensor(r) for r in results])
                env.update(zip(op.outputs, results))
                continue
            ins = [self.g.tensor(t) if t >= 0 else None for t in ids]
            value = _fold(op, ins, tensors[op.outputs[0]]) if op.outputs else None
            if value is not None:
                out = tensors[op.outputs[0]]
                env[op.outputs[0]] = self._add(out, f"{out.name}@{tag}", value)
                continue
            if not emit:
                culprit = next((t for t in ins if t is not None and not t.is_const),
                               tensors[op.outputs[0]] if op.outputs else None)
                if culprit is None:
                    raise ModelError(f"{op.describe()} in condition subgraph {k} writes nothing")
                raise _NotStatic(culprit)
            new = Op(type=op.type, inputs=ids, outputs=[], options=copy.deepcopy(op.options),
                     version=op.version, index=call.index,
                     notes=[f"unrolled from {call.describe()}: subgraph {k} op {op.index}, "
                            f"{tag}"])
            for o in op.outputs:
                env[o] = self._add(tensors[o], f"{tensors[o].name}@{tag}")
                new.outputs.append(env[o])
            self.ops.append(new)
            self.added += 1
            if self.added > MAX_UNROLLED_OPS:
                raise ModelError(f"{call.describe()}: unrolling gives more than "
                                 f"{MAX_UNROLLED_OPS:,} ops; kiln unrolls loops and this "
                                 "one is too long for a microcontroller's code")
        return [lookup(t) for t in outputs]

    # --- WHILE and IF ----------------------------------------------------------------
    def lower(self, op: Op, depth: int = 0, emit: bool = True, tag: str = "") -> list[int]:
        if depth > _MAX_DEPTH:
            raise ModelError(f"{op.describe()}: control flow nested more than {_MAX_DEPTH} deep")
        prefix = f"{tag}." if tag else ""
        if op.type == "IF":
            if not op.inputs or op.inputs[0] < 0:
                raise ModelError(f"{op.describe()} takes a condition as its first input")
            cond = self.g.tensor(op.inputs[0])
            if not cond.is_const or cond.dtype != "bool" or cond.size != 1:
                if not emit:
                    raise _NotStatic(cond)
                raise ModelError(f"{op.describe()}: its condition {cond.name} is computed at "
                                 "run time; kiln compiles IF with a constant condition only "
                                 "(it takes the branch at compile time)")
            branch = "then" if bool(cond.data.reshape(-1)[0]) else "else"
            k = op.options.get(f"{branch}_subgraph_index")
            return self.inline(k, op.inputs[1:], op, depth, f"{prefix}{branch}", emit)
        cond_k = op.options.get("cond_subgraph_index")
        body_k = op.options.get("body_subgraph_index")
        if any(t < 0 for t in op.inputs):
            raise ModelError(f"{op.describe()} has an omitted loop value")
        values = list(op.inputs)
        for trip in range(MAX_TRIPS + 1):
            try:
                result = self.inline(cond_k, values, op, depth + 1, f"{prefix}cond{trip}",
                                     emit=False)
            except _NotStatic as e:
                if not emit:
                    raise
                raise ModelError(f"{op.describe()}: its loop condition (subgraph {cond_k}) "
                                 f"depends on {e.tensor.name}, computed at run time, so the "
                                 "trip count is not static; kiln unrolls loops with a static "
                                 "trip count only") from None
            if len(result) != 1:
                raise ModelError(f"{op.describe()}: its condition subgraph {cond_k} writes "
                                 f"{len(result)} outputs (one boolean expected)")
            c = self.g.tensor(result[0])
            if c.dtype != "bool" or c.size != 1:
                raise ModelError(f"{op.describe()}: its condition is {c.dtype} "
                                 f"{list(c.shape)}, not one boolean")
            if not bool(c.data.reshape(-1)[0]):
                return values
            if trip == MAX_TRIPS:
                raise ModelError(f"{op.describe()} loops more than {MAX_TRIPS:,} times; "
                                 "kiln unrolls loops and this one is too long")
            values = self.inline(body_k, values, op, depth + 1, f"{prefix}step{trip}", emit)
            if len(values) != len(op.inputs):
                raise ModelError(f"{op.describe()}: its body subgraph {body_k} writes "
                                 f"{len(values)} values for {len(op.inputs)} loop values")
        raise AssertionError("unreachable")


def _check_results(op: Op, outputs: list[Tensor], results: list[Tensor]) -> None:
    """The values a WHILE/IF computes fit the outputs it declares."""
    if len(results) != len(outputs):
        raise ModelError(f"{op.describe()} writes {len(outputs)} outputs for "
                         f"{len(results)} values")
    for a, b in zip(outputs, results):
        if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
            raise ModelError(f"{op.describe()}: output {a.name} is {a.dtype} "
                             f"{list(a.shape)}, its subgraph computes {b.dtype} "
                             f"{list(b.shape)}")
        _check_quant(op, b, a)


def _check_quant(op: Op, value: Tensor, into: Tensor) -> None:
    """tflite-micro copies a value's bytes into a subgraph's input (or out to the op's
    output) and reads them with that tensor's quantization; kiln passes the value itself,
    so the two must agree (a converter writes them equal)."""
    if not same_quant(value.quant, into.quant):
        raise ModelError(f"{op.describe()}: {value.name} passes into {into.name} with another "
                         "quantization (scale or zero point); tflite-micro would read its "
                         "bytes in the new one, kiln takes loop values that keep theirs")


def lower_control_flow(graph: Graph, read_subgraph: Callable[[int], Subgraph],
                       n_subgraphs: int) -> Graph:
    """`graph` (subgraph 0) with every WHILE and IF replaced by the ops it runs (module
    doc); the graph itself if it has none. `read_subgraph(k)` reads subgraph k."""
    if not any(op.type in CONTROL_OPS for op in graph.ops):
        return graph
    u = _Unroller(graph, read_subgraph, n_subgraphs)
    rename: dict[int, int] = {}
    for op in graph.ops:
        op.inputs = [rename.get(t, t) for t in op.inputs]
        if op.type not in CONTROL_OPS:
            u.ops.append(op)
            continue
        results = u.lower(op)
        _check_results(op, [graph.tensor(o) for o in op.outputs],
                       [graph.tensor(r) for r in results])
        rename.update(zip(op.outputs, results))
    graph.ops = u.ops
    outputs = [rename.get(t, t) for t in graph.outputs]
    for tid in outputs:
        t = graph.tensor(tid)
        if t.is_const or tid in graph.inputs:
            what = "constant" if t.is_const else "model input"
            raise ModelError(f"model output {t.name} is a {what} passed through control "
                             "flow; kiln needs an op to write it")
    graph.outputs = outputs
    return graph
