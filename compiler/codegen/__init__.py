"""C code generation: lower every op, plan the arena, write the sources."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..ir import Graph
from ..memory_plan import Buffer, Plan, plan as plan_memory
from . import ops  # noqa: F401  (registers the lowerings)
from .emit import EmittedLayer, model_c, model_h, weights_c, weights_h
from .lowering import LOWERINGS, LowerCtx, Target

_PASS_THROUGH_FLOAT = {"QUANTIZE", "DEQUANTIZE"}


def check_supported(graph: Graph) -> None:
    """Raise one ModelError naming every op kiln cannot compile, with the reason.

    Problems are grouped by op type and reason: "CONV_2D (ops 0, 2: float32 ...): why".
    """
    problems: dict[tuple[str, str], list[int]] = {}
    float_ops: list[str] = []
    for layer, op in enumerate(graph.ops):
        ins = ",".join(graph.tensor(t).dtype.replace("unsupported:", "") for t in op.inputs if t >= 0)
        outs = ",".join(graph.tensor(t).dtype.replace("unsupported:", "") for t in op.outputs)
        signature = f"{ins} -> {outs}"
        activations = [graph.tensor(t) for t in op.inputs + op.outputs
                       if t >= 0 and not graph.tensor(t).is_const]
        if op.type not in _PASS_THROUGH_FLOAT and any(t.dtype == "float32" for t in activations):
            float_ops.append(f"op {op.index} {op.type}")
            continue
        reg = LOWERINGS.get(op.type)
        if reg is None:
            problems.setdefault((op.type, f"{signature}: op not supported"), []).append(op.index)
            continue
        if reg.check is not None:
            reason = reg.check(LowerCtx(graph=graph, op=op, layer=layer))
            if reason:
                problems.setdefault((op.type, f"{signature}: {reason}"), []).append(op.index)
    if float_ops and not problems:
        raise ModelError(
            f"{graph.name} computes in float ({', '.join(float_ops[:3])}"
            f"{', ...' if len(float_ops) > 3 else ''}); kiln compiles int8 models: quantize it "
            "with calibration data (kiln compile MODEL --calibration X.npy, or kiln quantize)")
    for text in float_ops:
        problems.setdefault((text.split()[-1], "float activations (quantize the model first)"),
                            []).append(int(text.split()[1]))
    if problems:
        n = sum(len(v) for v in problems.values())
        parts = [f"{op_type} (op{'s' if len(idx) > 1 else ''} {', '.join(map(str, idx))}; {reason})"
                 for (op_type, reason), idx in problems.items()]
        raise ModelError(f"{n} op(s) in {graph.name} cannot be compiled: " + "; ".join(parts))


def _buffers(graph: Graph, layers: list[EmittedLayer]) -> list[Buffer]:
    """Lifetimes of every arena buffer over the layer steps."""
    n = len(graph.ops)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for tid in graph.inputs:
        root = graph.storage_root(tid)
        first[root] = 0
        last[root] = max(last.get(root, 0), 0)
    for step, op in enumerate(graph.ops):
        for tid in op.inputs:
            if tid >= 0 and not graph.tensor(tid).is_const:
                root = graph.storage_root(tid)
                last[root] = max(last.get(root, step), step)
        for tid in op.outputs:
            root = graph.storage_root(tid)
            first.setdefault(root, step)
            last[root] = max(last.get(root, step), step)
    for tid in graph.outputs:
        root = graph.storage_root(tid)
        if not graph.tensor(root).is_const:
            last[root] = max(n - 1, 0)
            first.setdefault(root, 0)
    buffers = [Buffer(name=graph.tensor(t).c_name, size=graph.tensor(t).nbytes,
                      first=first[t], last=last[t]) for t in sorted(first)]
    for step, e in enumerate(layers):
        if e.code.scratch_bytes:
            buffers.append(Buffer(name=f"l{step}_scratch", size=e.code.scratch_bytes,
                                  first=step, last=step, kind="scratch"))
    return buffers


def lower(graph: Graph, target: Target | None = None,
          layer_knobs: dict[int, dict] | None = None) -> tuple[list[EmittedLayer], dict]:
    """Lower every op for `target` (default: the host); `layer_knobs` forces the
    variant knobs of some layers (by position in graph.ops), e.g. from tuning."""
    check_supported(graph)
    consts: dict = {}
    layers = []
    target = target or Target()
    layer_knobs = layer_knobs or {}
    for step, op in enumerate(graph.ops):
        ctx = LowerCtx(graph=graph, op=op, layer=step, consts=consts, target=target,
                       knobs=layer_knobs.get(step))
        code = LOWERINGS[op.type].fn(ctx)
        layers.append(EmittedLayer(op=op, code=code, pointers=dict(ctx.pointers)))
    return layers, consts


def generate(graph: Graph, version: str, target: Target | None = None,
             layer_knobs: dict[int, dict] | None = None,
             ) -> tuple[dict[str, str], Plan, list[EmittedLayer], dict]:
    """Lower, plan and emit. Returns (files, plan, layers, consts)."""
    for tid in graph.outputs:
        if graph.tensor(graph.storage_root(tid)).is_const:
            raise ModelError(f"model output {graph.tensor(tid).name} is a constant; nothing to compute")
    layers, consts = lower(graph, target, layer_knobs)
    plan = plan_memory(_buffers(graph, layers))
    offsets = {t.id: plan.by_name[t.c_name].offset for t in graph.tensors
               if t.c_name in plan.by_name}
    scratch = {i: plan.by_name[f"l{i}_scratch"].offset for i, e in enumerate(layers)
               if e.code.scratch_bytes}
    const_list = [consts[k] for k in consts]  # insertion order: layer order, deterministic
    files = {
        "model.h": model_h(graph, plan, offsets, len(layers), version),
        "model.c": model_c(graph, plan, offsets, layers, scratch, version),
        "weights.h": weights_h(const_list, version),
        "weights.c": weights_c(const_list, version),
    }
    return files, plan, layers, consts


def weights_bytes(consts: dict) -> int:
    return int(sum(np.asarray(c.values).nbytes for c in consts.values()))
