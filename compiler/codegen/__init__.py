"""C code generation: lower every op, plan the arena, write the sources."""

from __future__ import annotations

import numpy as np

from ..errors import InputError, ModelError
from ..ir import Graph, GraphError
from ..memory_plan import (Buffer, Overlap, Plan, live_bytes, lower_bound, place_state,
                           plan as plan_memory)
from . import bounds, ops  # noqa: F401  (ops registers the lowerings)
from .ops.conv import lean_entries
from .ops.inplace import OverlapMode, banded_code, flat_banded_gemm, overlap_modes
from .emit import EmittedLayer, Names, model_c, model_h, weights_c, weights_h
from .lowering import LOWERINGS, LowerCtx, Target

_PASS_THROUGH_FLOAT = {"QUANTIZE", "DEQUANTIZE"}


# How to re-convert a model kiln refuses for its quantization (uint8, float ops left in
# an int8 model): TF's converter, full-integer quantization.
_RECONVERT = ("re-convert it from the float model with the TF converter's full-integer "
              "quantization (optimizations=[tf.lite.Optimize.DEFAULT], a "
              "representative_dataset, supported_ops=[tf.lite.OpsSet.TFLITE_BUILTINS_INT8], "
              "inference_input_type=inference_output_type=tf.int8), or quantize the float "
              "model with kiln quantize")


def _signature(graph: Graph, op) -> str:
    ins = ",".join(graph.tensor(t).dtype.replace("unsupported:", "") for t in op.inputs if t >= 0)
    outs = ",".join(graph.tensor(t).dtype.replace("unsupported:", "") for t in op.outputs)
    return f"{ins} -> {outs}"


def _activations(graph: Graph, op) -> list:
    return [graph.tensor(t) for t in op.inputs + op.outputs
            if t >= 0 and not graph.tensor(t).is_const]


def _refuse(problems: dict[tuple[str, str], list[int]], graph: Graph) -> None:
    """Raise one ModelError listing `problems` (op type, reason) → op indices, if any."""
    if not problems:
        return
    n = sum(len(v) for v in problems.values())
    parts = [f"{op_type} (op{'s' if len(idx) > 1 else ''} {', '.join(map(str, idx))}; {reason})"
             for (op_type, reason), idx in problems.items()]
    raise ModelError(f"{n} op(s) in {graph.name} cannot be compiled: " + "; ".join(parts))


def _check_uint8(graph: Graph) -> None:
    """A legacy asymmetric uint8 model (uint8 activations in compute ops) is refused as a
    whole, with how to convert it again: kiln's kernels are int8 (TFLite's scheme since
    TF 2.3; tflite-micro dropped most uint8 kernels)."""
    ops = [op for op in graph.ops if op.type not in _PASS_THROUGH_FLOAT
           and any(t.dtype == "uint8" and t.quant is not None for t in _activations(graph, op))]
    if ops:
        listed = ", ".join(f"op {op.index} {op.type}" for op in ops[:3])
        raise ModelError(
            f"{graph.name} is a uint8 (legacy asymmetric) quantized model ({listed}"
            f"{', ...' if len(ops) > 3 else ''} on uint8 tensors): kiln compiles int8 models; "
            + _RECONVERT)


def unsupported_ops(graph: Graph, robust: bool = False) -> dict[tuple[str, str], list[int]]:
    """(op type, signature: reason) → indices of the ops kiln cannot compile, judged op by
    op (types, options, the lowering's check). Float ops whose op type kiln lowers are not
    listed here (check_supported says to quantize them). With `robust`, for a graph that
    failed verify(): a lowering's check that raises is skipped, not trusted."""
    problems: dict[tuple[str, str], list[int]] = {}
    for layer, op in enumerate(graph.ops):
        signature = _signature(graph, op)
        reg = LOWERINGS.get(op.type)
        if reg is None:
            problems.setdefault((op.type, f"{signature}: op not supported"), []).append(op.index)
            continue
        activations = _activations(graph, op)
        if op.type not in _PASS_THROUGH_FLOAT and any(t.dtype == "float32" for t in activations):
            continue
        # A zero-size activation: every kernel refuses dims < 1 at run time, so it is
        # refused here, for every op at once, where the message can say which tensor.
        empty = [t for t in activations if t.size == 0]
        if empty:
            problems.setdefault((op.type, f"{signature}: tensor {empty[0].name} "
                                 f"{list(empty[0].shape)} is empty"), []).append(op.index)
            continue
        if reg.check is None:
            continue
        try:
            reason = reg.check(LowerCtx(graph=graph, op=op, layer=layer))
        except Exception:
            if not robust:
                raise
            continue
        if reason:
            problems.setdefault((op.type, f"{signature}: {reason}"), []).append(op.index)
    return problems


def explain(error: GraphError) -> ModelError:
    """The error to show for a model that failed verify(): its unsupported ops first (the
    structural message after them), or the structural error itself if every op is
    supported. So a user learns that an op is missing, not only that a tensor is read
    before it is written."""
    graph = error.graph
    try:
        _check_uint8(graph)
        _refuse(unsupported_ops(graph, robust=True), graph)
    except ModelError as e:
        return ModelError(f"{e}; besides, the graph is malformed: {error}")
    except Exception:       # a graph too broken to list: its structural message says why
        return error
    return error


def check_supported(graph: Graph) -> None:
    """Raise one ModelError naming every op kiln cannot compile, with the reason.

    Problems are grouped by op type and reason: "CONV_2D (ops 0, 2: float32 ...): why".
    The ops come first: a uint8 model is refused as such, then every op without a
    lowering or refused by its lowering's check, then float ops (quantize the model),
    and only then limits: a tensor too large for int32 indexing, and each op's proof
    that its kernel's int32 arithmetic cannot overflow (bounds.py).
    """
    _check_uint8(graph)
    problems = unsupported_ops(graph)
    float_ops = [op for op in graph.ops if op.type in LOWERINGS
                 and op.type not in _PASS_THROUGH_FLOAT
                 and any(t.dtype == "float32" for t in _activations(graph, op))]
    # Quantized already, but for the float ops: kiln quantize refuses such a model.
    mixed = float_ops and any(op.type not in _PASS_THROUGH_FLOAT and op not in float_ops
                              and _activations(graph, op) for op in graph.ops)
    if float_ops and not problems:
        listed = (", ".join(f"op {op.index} {op.type}" for op in float_ops[:3])
                  + (", ..." if len(float_ops) > 3 else ""))
        if mixed:
            from ..quantize.float_tail import quantize_float_tail
            hint = ("`kiln quantize MODEL -o OUT.tflite` moves it into int8 with TFLite's "
                    "fixed output quantization (no calibration needed)"
                    if quantize_float_tail(graph) is not None else
                    f"kiln quantize takes float models: {_RECONVERT}")
            raise ModelError(
                f"{graph.name} is quantized but for {len(float_ops)} op(s) that compute in "
                f"float ({listed}, after a DEQUANTIZE); kiln compiles int8 ops only and "
                f"{hint}")
        raise ModelError(
            f"{graph.name} computes in float ({listed}); kiln compiles int8 models: quantize it "
            "with calibration data (--calibration X.npy on kiln compile, run, validate or "
            "project create; or kiln quantize)")
    why = ("float activations in a quantized model (re-convert it with full-integer "
           "quantization)" if mixed else "float activations (quantize the model first)")
    for op in float_ops:
        problems.setdefault((op.type, f"{_signature(graph, op)}: {why}"), []).append(op.index)
    _refuse(problems, graph)
    bounds.check_tensors(graph)
    for layer, op in enumerate(graph.ops):
        reason = bounds.op_problem(LowerCtx(graph=graph, op=op, layer=layer))
        if reason:
            problems.setdefault((op.type, f"{_signature(graph, op)}: {reason}"),
                                []).append(op.index)
    _refuse(problems, graph)


OPTIMIZE = ("speed", "balanced", "memory")


def arena_buffers(graph: Graph, layers: list[EmittedLayer],
             extra_scratch: dict[int, int] | None = None) -> list[Buffer]:
    """Lifetimes of every arena buffer over the layer steps (`extra_scratch`: bytes a
    chosen overlap mode adds to a layer's scratch)."""
    extra_scratch = extra_scratch or {}
    n = len(graph.ops)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for tid in graph.inputs:
        root = graph.storage_root(tid)
        first[root] = 0
        last[root] = max(last.get(root, 0), 0)
    for step, op in enumerate(graph.ops):
        for tid in op.inputs:
            # Variables (model state) live in the state region, never in the arena.
            if tid >= 0 and not graph.tensor(tid).is_const and not graph.tensor(tid).is_variable:
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
        size = e.code.scratch_bytes + extra_scratch.get(step, 0)
        if size:
            buffers.append(Buffer(name=f"l{step}_scratch", size=size,
                                  first=step, last=step, kind="scratch"))
    return buffers


# --- overlaps: which layers may write over their input, and which ones do ---------------

def _overlap_candidates(graph: Graph, layers: list[EmittedLayer]) -> dict[int, list[OverlapMode]]:
    """Per layer, the overlap modes its kernel declares whose input dies at that layer
    (read there for the last time, not a model output) and whose output is born there."""
    by_name = {b.name: b for b in arena_buffers(graph, layers)}
    keep = {graph.storage_root(t) for t in graph.outputs}
    out: dict[int, list[OverlapMode]] = {}
    for step, e in enumerate(layers):
        y = graph.storage_root(e.op.outputs[0]) if len(e.op.outputs) == 1 else None
        if y is None or graph.tensor(y).c_name not in by_name:
            continue
        modes = []
        for m in overlap_modes(graph, e.op, step, e.code):
            x = graph.storage_root(m.input_id)
            xb = by_name.get(graph.tensor(x).c_name)
            if (xb is not None and x != y and x not in keep and xb.last == step
                    and by_name[graph.tensor(y).c_name].first == step):
                modes.append(m)
        if modes:
            out[step] = modes
    return out


def _plan_with(graph: Graph, layers: list[EmittedLayer], choice: dict[int, OverlapMode],
               polish: bool = False) -> Plan:
    overlaps = []
    for step, m in sorted(choice.items()):
        e = layers[step]
        overlaps.append(Overlap(
            input=graph.tensor(graph.storage_root(m.input_id)).c_name,
            output=graph.tensor(graph.storage_root(e.op.outputs[0])).c_name,
            allowed=m.allowed, rule=f"{e.code.kernel} {m.describe()}", layer=step))
    extra = {step: m.extra_scratch for step, m in choice.items()}
    # The search compares with the no-overlap plan itself: no need to place without too.
    return plan_memory(arena_buffers(graph, layers, extra), overlaps, also_without=not overlaps,
                       polish=polish)


# Layers whose overlap modes the search tries one by one (the most crowded steps first).
_SEARCH_LAYERS = 12


def _footprint(m: OverlapMode, x_size: int, y_size: int) -> int:
    """Bytes input + output + extra scratch span at their tightest allowed placement."""
    spans = []
    for delta in (m.forward_max, m.backward_min, *m.points):
        if delta is not None:
            spans.append(max(x_size, delta + y_size) - min(0, delta))
    return min(spans, default=x_size + y_size) + m.extra_scratch


def _try(graph: Graph, layers: list[EmittedLayer], best: Plan, choice: dict[int, OverlapMode],
         step: int, alt: OverlapMode | None, accept_equal: bool) -> tuple[Plan, dict] | None:
    trial = {s: m for s, m in choice.items() if s != step}
    if alt is not None:
        trial[step] = alt
    p = _plan_with(graph, layers, trial)
    better = p.arena_bytes <= best.arena_bytes if accept_equal else p.arena_bytes < best.arena_bytes
    return (p, trial) if better else None


def choose_overlaps(graph: Graph, layers: list[EmittedLayer], optimize: str = "speed",
                    ) -> tuple[Plan, dict[int, OverlapMode]]:
    """The memory plan and the overlap mode of each layer that may use one.

    speed: no overlaps (the layer-by-layer plan). memory: every layer takes its most
    compact mode, then the layers of the most crowded steps (those whose buffers cannot
    fit the arena side by side) try their other modes one at a time, keeping what shrinks
    the arena, and the buffers are placed once more moving single ones earlier in the
    order (memory_plan._polish; about a second on VWW). balanced: the memory plan (before
    that last placement), then overlaps that cost cycles are dropped where their step fits
    without them, and the remaining ones replaced by a cheaper mode (fewer bands, no copy)
    where that does not grow the arena."""
    if optimize not in OPTIMIZE:
        raise InputError(f"optimize must be one of {', '.join(OPTIMIZE)} (got {optimize!r})")
    candidates = _overlap_candidates(graph, layers) if optimize != "speed" else {}
    best, choice = _plan_with(graph, layers, {}), {}
    if not candidates:
        return best, choice
    names = {b.name: b for b in arena_buffers(graph, layers)}

    def sizes(step: int, m: OverlapMode) -> tuple[int, int]:
        x = names[graph.tensor(graph.storage_root(m.input_id)).c_name].size
        y = names[graph.tensor(graph.storage_root(layers[step].op.outputs[0])).c_name].size
        return x, y

    compact = {s: min(ms, key=lambda m: (_footprint(m, *sizes(s, m)), m.cost))
               for s, ms in candidates.items()}
    p = _plan_with(graph, layers, compact)
    if p.arena_bytes < best.arena_bytes:
        best, choice = p, compact
    # Steps whose buffers (no overlaps) exceed the arena need an overlap to fit it.
    live = live_bytes(list(names.values()))     # aligned bytes alive per step
    crowded = sorted((s for s in candidates if live[s] > best.arena_bytes),
                     key=lambda s: -live[s])[:_SEARCH_LAYERS]
    for step in crowded:
        for alt in [None, *candidates[step]]:
            if alt is not choice.get(step):
                found = _try(graph, layers, best, choice, step, alt, accept_equal=False)
                if found:
                    best, choice = found
    if optimize == "balanced":
        costly = [s for s, m in choice.items() if m.costs_cycles]
        spare = [s for s in costly if live[s] <= best.arena_bytes]
        trial = {s: m for s, m in choice.items() if s not in spare}
        p = _plan_with(graph, layers, trial)
        if p.arena_bytes <= best.arena_bytes:
            best, choice = p, trial
        for step in sorted((s for s in choice if choice[s].costs_cycles),
                           key=lambda s: -live[s])[:_SEARCH_LAYERS]:
            cheaper = sorted((m for m in candidates[step] if m.cost < choice[step].cost),
                             key=lambda m: m.cost)
            for alt in [None, *cheaper]:
                found = _try(graph, layers, best, choice, step, alt, accept_equal=True)
                if found:
                    best, choice = found
                    break
    if choice and optimize == "memory":     # placed once more, buffers moved (slower)
        p = _plan_with(graph, layers, choice, polish=True)
        if p.arena_bytes < best.arena_bytes:
            best = p
    return best, choice


def apply_overlaps(graph: Graph, layers: list[EmittedLayer], plan: Plan,
                    choice: dict[int, OverlapMode]) -> list[EmittedLayer]:
    """Layers whose output the plan puts over their input call the banded kernels, in
    the order the offset difference needs."""
    out = list(layers)
    for step, m in choice.items():
        x = plan.by_name[graph.tensor(graph.storage_root(m.input_id)).c_name]
        y = plan.by_name[graph.tensor(graph.storage_root(layers[step].op.outputs[0])).c_name]
        if (x.offset >= y.offset + y.size or y.offset >= x.offset + x.size
                or m.name in ("exact", "ordered")):
            continue
        delta = y.offset - x.offset
        reverse = not m.forward(delta)
        assert not reverse or (m.backward_min is not None and delta >= m.backward_min)
        e = layers[step]
        out[step] = EmittedLayer(op=e.op, code=banded_code(e.code, m, reverse),
                                 pointers=e.pointers)
    return out


def state_buffers(graph: Graph) -> list[Buffer]:
    """The state region's buffers: every variable tensor an op reads (model state)."""
    read = {t for op in graph.ops for t in op.inputs if t >= 0}
    return place_state([(graph.tensor(t).c_name, graph.tensor(t).nbytes)
                        for t in graph.variables() if t in read], len(graph.ops))


def lower(graph: Graph, target: Target | None = None,
          layer_knobs: dict[int, dict] | None = None) -> tuple[list[EmittedLayer], dict]:
    """Lower every op for `target` (default: the host); `layer_knobs` forces the
    variant knobs of some layers (by position in graph.ops), e.g. from tuning."""
    check_supported(graph)
    consts: dict = {}
    same_consts: dict = {}
    layers = []
    target = target or Target()
    layer_knobs = layer_knobs or {}
    for step, op in enumerate(graph.ops):
        ctx = LowerCtx(graph=graph, op=op, layer=step, consts=consts, target=target,
                       knobs=layer_knobs.get(step), same_consts=same_consts)
        code = LOWERINGS[op.type].fn(ctx)
        layers.append(EmittedLayer(op=op, code=code, pointers=dict(ctx.pointers)))
    return layers, consts


def generate(graph: Graph, version: str, target: Target | None = None,
             layer_knobs: dict[int, dict] | None = None, optimize: str = "speed",
             split_weights: bool = False,
             ) -> tuple[dict[str, str], Plan, list[EmittedLayer], dict]:
    """Lower, plan (with overlaps as `optimize` asks, see choose_overlaps) and emit.
    `split_weights`: each weights array in a section of its own (a multi-region board).
    Returns (files, plan, layers, consts)."""
    layers, consts = lower(graph, target, layer_knobs)     # unsupported ops named first
    for tid in graph.outputs:
        if graph.tensor(graph.storage_root(tid)).is_const:
            raise ModelError(f"model output {graph.tensor(tid).name} is a constant; nothing to compute")
    plan, choice = choose_overlaps(graph, layers, optimize)
    bounds.check_plan(plan, consts)
    plan.bound_without_overlaps = lower_bound(arena_buffers(graph, layers))
    layers = lean_entries(flat_banded_gemm(apply_overlaps(graph, layers, plan, choice)))
    plan.state = state_buffers(graph)
    bounds.require_int32("the memory plan", "the model state's size in bytes", plan.state_bytes)
    return (emit_sources(graph, layers, consts, plan, version, split_weights=split_weights),
            plan, layers, consts)


def emit_sources(graph: Graph, layers: list[EmittedLayer], consts: dict, plan: Plan,
                 version: str, prefix: str | None = None,
                 split_weights: bool = False) -> dict[str, str]:
    """model.h, model.c, weights.h and weights.c of lowered layers placed by `plan`; with a
    `prefix` P (a checked C identifier, kiln.compiler.export), P.h and P.c exporting P_*
    names only."""
    offsets = {t.id: plan.by_name[t.c_name].offset for t in graph.tensors
               if t.c_name in plan.by_name}
    state = {b.name: b for b in plan.state}
    state_offsets = {t.id: state[t.c_name].offset for t in graph.tensors
                     if t.is_variable and t.c_name in state}
    scratch = {i: plan.by_name[f"l{i}_scratch"].offset for i, e in enumerate(layers)
               if e.code.scratch_bytes}
    const_list = [consts[k] for k in consts]  # insertion order: layer order, deterministic
    if prefix is not None:
        names = Names.for_prefix(prefix)
        return {
            names.header: model_h(graph, plan, offsets, len(layers), version, names),
            f"{prefix}.c": model_c(graph, plan, offsets, layers, scratch, version, names,
                                   const_list, state_offsets),
        }
    return {
        "model.h": model_h(graph, plan, offsets, len(layers), version),
        "model.c": model_c(graph, plan, offsets, layers, scratch, version,
                           state_offsets=state_offsets),
        "weights.h": weights_h(const_list, version, split_weights),
        "weights.c": weights_c(const_list, version, split_weights),
    }


def weights_bytes(consts: dict) -> int:
    return int(sum(np.asarray(c.values).nbytes for c in consts.values()))
