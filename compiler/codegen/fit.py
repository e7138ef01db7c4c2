"""Variants that fit the flash: when the weights of the chosen kernel variants exceed the
board's flash, move layers to variants that store their weights in fewer bytes; and, for
`--optimize speed`, the other way where the flash has room.

The default SIMD variants keep filters int8 (channel/row pairs, conv.py pairs8_ok); their
int16-pair twins (the operand layout of the dual 16-bit MAC, no widening in the inner loop)
are a little faster and store twice the filter bytes, so a tuner's records may pick them.
Fitting: layer by layer, the move that saves the most bytes goes first, and each layer
moves to the earliest candidate (the default first, then by speed) storing fewer bytes
than its current one, until the weights fit or no move is left. Widening (speed builds):
layers still on their int8-pair default move to the int16 twin, the largest first, while
the weights stay within the budget. Both are deterministic: ties break on the layer index.
Sharing code (share_code): a small fully connected layer runs on the convolutions' gemm
kernel when that spares the firmware a kernel of its own. Tables in scratch
(tables_to_scratch): an ADD/SUB on the table variant builds its 1 KB table at run time in
its scratch instead of flash (balanced and memory builds, where the arena keeps its size).
These rules return knobs and moves only; kiln.compiler.schedule applies them, in order,
and records why each layer runs its variant (kiln.json ops[i].schedule).
"""

from __future__ import annotations

from ..ir import Graph
from .lowering import LOWERINGS, LowerCtx, Target
from .ops.conv import candidates
from .ops.elementwise import ADD_LUT_KERNELS, ADD_TABLE_BYTES, TABLE_IN_SCRATCH


def _layer_weight_bytes(graph: Graph, step: int, target: Target, knobs: dict | None) -> int:
    """Bytes of the constants one layer's lowering with `knobs` defines."""
    op = graph.ops[step]
    ctx = LowerCtx(graph=graph, op=op, layer=step, consts={}, target=target, knobs=knobs)
    LOWERINGS[op.type].fn(ctx)
    return int(sum(c.values.nbytes for c in ctx.consts.values()))


def fit_weights(graph: Graph, target: Target, shapes: dict[int, tuple[str, object]],
                layer_knobs: dict[int, dict], weights: int, budget: int
                ) -> tuple[dict[int, dict], list[dict]]:
    """(layer knobs that bring `weights` bytes under `budget` if any can, the moves made).

    shapes: step → (op type, LayerShape) of the tunable layers (workloads.layer_shapes).
    A move is {"layer", "from", "to", "saved_bytes"}."""
    knobs = dict(layer_knobs)
    moves: list[dict] = []
    if weights <= budget:
        return knobs, moves
    current: dict[int, tuple[dict, int]] = {}
    options: dict[int, list[tuple[dict, int]]] = {}
    for step, (op_type, shape) in shapes.items():
        cands = candidates(op_type, shape, target)
        chosen = knobs.get(step, cands[0])
        current[step] = (chosen, _layer_weight_bytes(graph, step, target, chosen))
        options[step] = [(k, _layer_weight_bytes(graph, step, target, k)) for k in cands
                         if k != chosen]
    while weights > budget:
        best = None
        for step in sorted(options):
            here = current[step][1]
            smaller = [(k, b) for k, b in options[step] if b < here]
            if smaller:
                k, b = smaller[0]                   # the fastest of the smaller ones
                if best is None or here - b > best[2]:
                    best = (step, (k, b), here - b)
        if best is None:
            break
        step, (k, b), saved = best
        moves.append({"layer": step, "from": current[step][0], "to": k, "saved_bytes": saved})
        current[step] = (k, b)
        knobs[step] = k
        weights -= saved
    return knobs, moves


def _wider(default: dict, cands: list[dict]) -> dict | None:
    """The int16-pair twin of an int8-pair default: the first candidate after it of the
    same variant without int8 weights (conv.py candidates: the fastest such)."""
    return next((k for k in cands[1:] if k["variant"] == default["variant"]
                 and k.get("weights") not in ("p8", "s8")), None)


def widen_for_speed(graph: Graph, target: Target, shapes: dict[int, tuple[str, object]],
                    layer_knobs: dict[int, dict], weights: int, budget: int | None
                    ) -> tuple[dict[int, dict], list[dict]]:
    """(layer knobs, moves) for `--optimize speed`: untuned layers on an int8-pair default
    take its int16 twin, the layer adding the most bytes (the most MACs) first, while the
    weights stay within `budget` (None: no limit). A move is {"layer", "from", "to",
    "added_bytes"}."""
    knobs = dict(layer_knobs)
    options = []
    for step, (op_type, shape) in shapes.items():
        if step in knobs:
            continue                            # tuned: the records decide
        cands = candidates(op_type, shape, target)
        default = cands[0]
        if default.get("weights") != "p8":
            continue
        wide = _wider(default, cands)
        if wide is None:
            continue
        added = (_layer_weight_bytes(graph, step, target, wide) -
                 _layer_weight_bytes(graph, step, target, default))
        options.append((-added, step, default, wide))
    moves: list[dict] = []
    for neg, step, default, wide in sorted(options, key=lambda o: (o[0], o[1])):
        if budget is not None and weights - neg > budget:
            continue
        weights -= neg
        knobs[step] = wide
        moves.append({"layer": step, "from": default, "to": wide, "added_bytes": -neg})
    return knobs, moves


# A FULLY_CONNECTED up to this many MACs costs a few thousand instructions on any of its
# kernels (ResNet-8's 640 MACs: 0.1% of the model), while its rows kernel costs about 3 KB
# of code on the M4 when no other layer needs it.
SHARE_MAX_MACS = 4096
_FC_ROWS_P8 = ("kiln_fully_connected_rows8_p8_s8", "kiln_fully_connected_rows8_p8_pt_s8")


def share_code(layers: list, layer_knobs: dict[int, dict], target: Target
               ) -> tuple[dict[int, dict], list[dict]]:
    """(layer knobs, moves): untuned FULLY_CONNECTED layers of at most SHARE_MAX_MACS on
    the int8-pair rows kernel run as 1x1 convolutions on the int8-pair gemm instead, when
    a convolution links the gemm anyway and no other layer needs the rows kernel: the
    firmware then carries one of the two kernels. `layers`: the lowered layers (codegen
    generate). A move is {"layer", "from", "to", "why"}."""
    def on_gemm(e) -> bool:
        return e.code.kernel.startswith("kiln_conv2d_gemm_p8")

    small = [i for i, e in enumerate(layers)
             if e.code.kernel in _FC_ROWS_P8 and e.code.macs <= SHARE_MAX_MACS
             and i not in layer_knobs]
    rows_needed = any(e.code.kernel in _FC_ROWS_P8 for i, e in enumerate(layers)
                      if i not in small)
    knobs = dict(layer_knobs)
    moves: list[dict] = []
    if not small or rows_needed or not any(on_gemm(e) for e in layers):
        return knobs, moves
    for i in small:
        e = layers[i]
        gemm = [k for k in candidates(e.op.type, e.code.shape, target) if k["variant"] == "gemm"]
        if not gemm:
            continue
        knobs[i] = gemm[0]
        moves.append({"layer": i, "from": e.code.knobs, "to": gemm[0],
                      "why": f"{e.code.macs} MACs: the convolutions' gemm instead of "
                             f"{e.code.kernel}, which no other layer needs"})
    return knobs, moves


def tables_to_scratch(layers: list) -> list[dict]:
    """Moves of the ADD/SUB layers whose table variant (kiln_add_lut_s8) stores its 1 KB
    table in flash to the same kernel building it at run time in the layer's scratch
    (knobs {"table": "scratch"}: 256 requantizations a call, about 4,000 instructions on a
    Cortex-M4). `layers`: the lowered layers (codegen generate); the schedule keeps the
    moves that leave the arena as it is. A move is {"layer", "to", "saved_bytes"}."""
    return [{"layer": i, "to": {"table": TABLE_IN_SCRATCH}, "saved_bytes": ADD_TABLE_BYTES}
            for i, e in enumerate(layers)
            if e.code.kernel in ADD_LUT_KERNELS and not e.code.knobs]
