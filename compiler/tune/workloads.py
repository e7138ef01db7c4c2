"""Workloads: the distinct tunable layers of a model on a board.

A workload is what a kernel variant's speed depends on: the op, its tensor shapes and
geometry (the LayerShape its lowering derives, compiler/codegen/ops/conv.py) and the
board. Layers with the same key run the same code at the same speed, so they are
measured once, whichever model they come from; the weights do not enter the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..codegen import lower
from ..codegen.lowering import Target
from ..codegen.ops.conv import LayerShape, candidates
from ..ir import Graph, Op


def _dims(values: tuple[int, ...]) -> str:
    return "x".join(str(v) for v in values)


def workload_key(op_type: str, shape: LayerShape) -> str:
    """A readable, stable key: 'CONV_2D in 1x49x10x1 filter 64x10x4x1 out 1x25x5x64
    stride 2x2 dilation 1x1 pad 4,1 fast' (`mult` for depthwise, `clamped` when the
    activation narrows the int8 range, `slow` when the SIMD requantization cannot apply)."""
    parts = [op_type, "in", _dims(shape.input), "filter", _dims(shape.filter), "out",
             _dims(shape.output)]
    if op_type != "FULLY_CONNECTED":
        parts += ["stride", _dims(shape.stride), "dilation", _dims(shape.dilation),
                  "pad", f"{shape.padding[0]},{shape.padding[1]}"]
    if op_type == "DEPTHWISE_CONV_2D":
        parts += ["mult", str(shape.depth_multiplier)]
    parts.append("fast" if shape.requant_fast else "slow")
    if not shape.pairs8 and op_type in ("CONV_2D", "FULLY_CONNECTED"):
        parts.append("wide")            # no int8-pair filter (conv.py pairs8_ok)
    if shape.clamped:
        parts.append("clamped")
    if shape.dtype != "int8":
        parts.append(shape.dtype)           # 16x8 layers: their own kernels
    return " ".join(parts)


def knobs_id(knobs: dict) -> str:
    """Canonical text of a knobs dict (records compare knobs by it)."""
    return json.dumps(knobs, sort_keys=True, separators=(",", ":"))


@dataclass
class Workload:
    key: str
    op_type: str
    shape: LayerShape
    candidates: list[dict]              # default first
    graph: Graph                        # a model holding the layer (for the tuning build)
    op: Op
    layers: list[int] = field(default_factory=list)    # steps in that model using it
    macs: int = 0

    @property
    def reference(self) -> dict:
        """The plain reference kernel's knobs: every other candidate must match its output."""
        return {"variant": "generic"}


def layer_shapes(graph: Graph, target: Target) -> dict[int, tuple[str, LayerShape]]:
    """step → (op type, LayerShape) of every tunable layer of an optimized graph."""
    layers, _ = lower(graph, target)
    return {step: (e.op.type, e.code.shape) for step, e in enumerate(layers)
            if e.code.shape is not None}


def extract_workloads(graph: Graph, target: Target) -> list[Workload]:
    """The distinct workloads of an optimized graph, in first-use order."""
    layers, _ = lower(graph, target)
    found: dict[str, Workload] = {}
    for step, e in enumerate(layers):
        shape = e.code.shape
        if shape is None:
            continue
        key = workload_key(e.op.type, shape)
        w = found.get(key)
        if w is None:
            w = found[key] = Workload(key=key, op_type=e.op.type, shape=shape,
                                      candidates=candidates(e.op.type, shape, target),
                                      graph=graph, op=e.op, macs=e.code.macs)
        w.layers.append(step)
    return list(found.values())
