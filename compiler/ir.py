"""Graph IR: tensors, ops and the graph, with a structural verify().

The IR mirrors what a TFLite subgraph holds, in plain dataclasses: tensor ids are
indices into `Graph.tensors`, op types are TFLite builtin names ("CONV_2D"), and op
options are a dict of already-decoded values (enum values as their TFLite names).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from .errors import ModelError

# dtype names used in the IR, as numpy dtypes.
DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "bool": np.dtype(np.bool_),
}

C_TYPES: dict[str, str] = {
    "float32": "float", "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t",
    "int32": "int32_t", "int64": "int64_t", "bool": "uint8_t",
}


class GraphError(ModelError):
    """Graph.verify() found a broken structural rule. `graph` is the graph it checked
    (its ids are in range, so the ops and their tensors' types can still be listed): the
    compiler names a model's unsupported ops before such a message (codegen.explain)."""

    def __init__(self, message: str, graph: "Graph"):
        super().__init__(message)
        self.graph = graph


@dataclass
class Quant:
    """Affine quantization: real = scale * (q - zero_point); per-channel along `axis`."""

    scale: np.ndarray        # float32, shape (1,) or (channels,)
    zero_point: np.ndarray   # int64, same shape as scale
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    def single(self) -> tuple[float, int]:
        """(scale, zero_point) of a per-tensor quantization."""
        return float(self.scale[0]), int(self.zero_point[0])


def same_quant(a: Quant | None, b: Quant | None) -> bool:
    """Whether two tensors' quantizations are the same (both none, or equal float32
    scales and zero points): data moved between them keeps its meaning."""
    if a is None or b is None:
        return a is None and b is None
    return (np.array_equal(a.scale.astype(np.float32), b.scale.astype(np.float32))
            and np.array_equal(a.zero_point, b.zero_point))


@dataclass
class Tensor:
    id: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    quant: Quant | None = None
    data: np.ndarray | None = None    # constant value (weights, shapes), else None
    alias_of: int | None = None       # a reshape-like view of another tensor's memory
    # Model state (TFLite's is_variable): never const, never an op output; the ops that
    # take it as an input read it and write it in place (SVDF, LSTM states), and it keeps
    # its value from one run to the next in its own region, apart from the arena.
    is_variable: bool = False

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        # Python ints: a numpy product would wrap in int64 on a hostile shape.
        return math.prod(int(d) for d in self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * DTYPES[self.dtype].itemsize

    @property
    def c_name(self) -> str:
        """A C identifier from the tensor's id and TFLite name: t12_conv_out.

        Always a valid identifier, whatever the name holds: `t`, the id, then at most 32
        of [a-z0-9_] (ASCII only: str.isalnum() alone accepts letters and digits such as
        é or ² that are no C identifier characters). Unique per tensor, since the id is
        the digits between `t` and the first `_`; and no other name in generated C starts
        with `t` and a digit (layer constants are l<N>_..., locals have fixed names).
        """
        return _c_name(self.id, self.name)


@lru_cache(maxsize=1 << 16)
def _c_name(tid: int, name: str) -> str:
    """Tensor.c_name, cached by (id, name): the planner and code generator ask for it
    hundreds of thousands of times on a long model, and a name may change (the quantizer
    renames tensors), so the cache is keyed on both rather than kept on the tensor."""
    tail = "".join(ch if ch.isascii() and ch.isalnum() else "_"
                   for ch in name.split("/")[-1].split(";")[0])
    tail = "_".join(p for p in tail.lower().split("_") if p)[:32]
    return f"t{tid}_{tail}" if tail else f"t{tid}"


@dataclass
class Op:
    type: str                       # TFLite builtin name, e.g. "CONV_2D"
    inputs: list[int]               # tensor ids; -1 for an omitted optional input
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)
    version: int = 1
    index: int = -1                 # position in the source model, for messages
    # Channels a pass removed ("outputs"/"inputs" → the tensor's original channel
    # indices; passes/dead_filters.py) and why, in plain text: kiln.json and the
    # layer's C comment show them.
    removed: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return f"op {self.index} ({self.type})"


@dataclass
class Graph:
    name: str
    tensors: list[Tensor]
    ops: list[Op]
    inputs: list[int]
    outputs: list[int]
    sha256: str = ""
    description: str = ""

    def __repr__(self) -> str:
        """One line: the tensors and ops are in `tensors` and `ops`."""
        return (f"Graph(name={self.name!r}, ops={len(self.ops)}, tensors={len(self.tensors)}, "
                f"inputs={self.inputs}, outputs={self.outputs}, sha256={self.sha256[:16]!r})")

    def tensor(self, tid: int) -> Tensor:
        return self.tensors[tid]

    def producers(self) -> dict[int, int]:
        """tensor id → index (in self.ops) of the op that writes it."""
        return {t: i for i, op in enumerate(self.ops) for t in op.outputs}

    def consumers(self) -> dict[int, list[int]]:
        """tensor id → indices of the ops that read it."""
        result: dict[int, list[int]] = {}
        for i, op in enumerate(self.ops):
            for t in op.inputs:
                if t >= 0:
                    result.setdefault(t, []).append(i)
        return result

    def variables(self) -> list[int]:
        """Ids of the variable tensors (model state), in id order."""
        return [t.id for t in self.tensors if t.is_variable]

    def storage_root(self, tid: int) -> int:
        """The tensor whose memory `tid` lives in (follows reshape aliases)."""
        while self.tensors[tid].alias_of is not None:
            tid = self.tensors[tid].alias_of
        return tid

    def verify(self) -> None:
        """Check the graph's structure; raise GraphError naming the first broken rule.

        Rules: tensor ids are in range and match their position; every op input is a
        constant, a variable (model state, there from the start), a model input, or written
        by an earlier op; every tensor is written at most once; no op writes a variable as
        its output and no variable is a constant, a view or a model input or output; model
        outputs are produced; constants match their declared shape.
        """
        try:
            self._verify()
        except GraphError:
            raise
        except ModelError as e:
            raise GraphError(str(e), self) from None

    def _verify(self) -> None:
        n = len(self.tensors)
        for i, t in enumerate(self.tensors):
            if t.id != i:
                raise ModelError(f"tensor {i} carries id {t.id}")
            if t.data is not None and tuple(t.data.shape) != tuple(t.shape):
                raise ModelError(f"tensor {i} ({t.name}) data shape {t.data.shape} != {t.shape}")
            if t.alias_of is not None and not 0 <= t.alias_of < n:
                raise ModelError(f"tensor {i} aliases missing tensor {t.alias_of}")
            if t.is_variable and (t.is_const or t.alias_of is not None):
                raise ModelError(f"tensor {i} ({t.name}) is a variable and a "
                                 f"{'constant' if t.is_const else 'view'}")
        for tid in [*self.inputs, *self.outputs]:
            if 0 <= tid < n and self.tensors[tid].is_variable:
                raise ModelError(f"model input or output tensor {tid} ({self.tensors[tid].name}) "
                                 "is a variable (model state)")
        available = ({t.id for t in self.tensors if t.is_const or t.is_variable}
                     | set(self.inputs))
        written: set[int] = set()
        for op in self.ops:
            for tid in op.inputs:
                if tid == -1:
                    continue
                if not 0 <= tid < n:
                    raise ModelError(f"{op.describe()} reads tensor {tid}, out of range")
                if tid not in available and self.storage_root(tid) not in available:
                    raise ModelError(f"{op.describe()} reads tensor {tid} "
                                     f"({self.tensors[tid].name}) before it is written")
            for tid in op.outputs:
                if not 0 <= tid < n:
                    raise ModelError(f"{op.describe()} writes tensor {tid}, out of range")
                if self.tensors[tid].is_variable:
                    raise ModelError(f"{op.describe()} writes tensor {tid} "
                                     f"({self.tensors[tid].name}), a variable, as its output")
                if tid in written or tid in self.inputs or self.tensors[tid].is_const:
                    raise ModelError(f"{op.describe()} writes tensor {tid}, already defined")
                written.add(tid)
                available.add(tid)
        for tid in self.outputs:
            if tid not in available and self.storage_root(tid) not in available:
                raise ModelError(f"model output tensor {tid} is never written")
