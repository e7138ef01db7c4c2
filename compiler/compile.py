"""compile(): Graph → Artifact (passes, lowering, memory plan, C sources, report)."""

from __future__ import annotations

import json

import numpy as np

from .artifact import Artifact
from .codegen import explain, weights_bytes
from .codegen.lowering import Target
from .errors import BoardError
from .frontend import as_graph
from .ir import Graph, GraphError
from .memory_plan import lower_bound, peak_step
from .passes import optimize as optimize_graph
from .schedule import build_schedule
from .tune.records import as_records
from .tune.workloads import workload_key

KILN_VERSION = "0.1.0"
DEFAULT_OPTIMIZE = "balanced"


def board_name(board) -> str:
    """A board given by name or as a kiln.project_gen Board object: its name."""
    name = getattr(board, "name", board)
    if not isinstance(name, str):
        raise BoardError(f"board must be a board name such as 'mps2-an386' (see `kiln boards`), "
                         f"not {type(board).__name__}")
    return name


# Flash a firmware needs besides the weights (kiln's runtime, kernels, RPC server, startup),
# kept free when choosing variants to fit: measured 5.1-20.8 KB standalone and 8.4-24.5 KB
# host-driven for the MLPerf models on every board (benchmarks/fit_check.py). Only the
# variant choice uses it: whether the firmware fits is kiln.project_gen.sizes's verdict
# (code bounded per model, and a link when in doubt).
CODE_RESERVE_BYTES = 32 * 1024


def _board_spec(board):
    """The validated Board `board` names (kiln.project_gen.boards.get_board, the one reader
    of board files, so the compiler sees the same typed values as the firmware): a name,
    looked up, never joined into a path; a board file's path; or a Board."""
    from kiln.project_gen.boards import get_board   # a later stage: imported when used
    return get_board(board)


def weights_budget(board) -> int | None:
    """Bytes of flash the weights may take on `board` (a name, board file path or Board;
    None: no limit, the host). On a board with several memory regions: every region the
    weights may go to (kiln.project_gen.regions.weights_capacity)."""
    if board == "host":
        return None
    spec = _board_spec(board)
    if spec.flash is None:
        return None
    if spec.multi_region:
        from kiln.project_gen.regions import weights_capacity
        from kiln.project_gen.sizes import OTHER_STATIC_RAM
        return weights_capacity(spec, CODE_RESERVE_BYTES, OTHER_STATIC_RAM["host-driven"])
    return spec.flash.size - CODE_RESERVE_BYTES


def target_for(board) -> Target:
    """The CPU features of `board` that kernel variants depend on (its board file)."""
    if board == "host":
        return Target()
    spec = _board_spec(board)
    return Target() if spec.is_host else Target(board=spec.name, cpu=spec.cpu, dsp=spec.dsp,
                                                mve=spec.cpu == "cortex-m55")


def _tensor_io(graph: Graph, tid: int) -> dict:
    t = graph.tensor(tid)
    scale, zp = (t.quant.single() if t.quant is not None and not t.quant.per_channel
                 else (None, None))
    return {"name": t.name, "id": tid, "shape": list(t.shape), "dtype": t.dtype,
            "scale": scale, "zero_point": zp}


def tuning_note(report: dict) -> str | None:
    """One line on what tuning records did to a compile (None without records)."""
    t = report.get("tuning") or {}
    if not t.get("records"):
        return None
    text = (f"kernel variants of {t['tuned_layers']} of {t['tunable_layers']} tunable layers "
            f"from {t['records']}")
    if t["tuned_layers"] < t["tunable_layers"]:
        text += " (the others: default variant)"
    boards = t.get("record_boards") or []
    if boards and report["board"] not in boards:
        text += f"; the file has records for {', '.join(boards)}, none for {report['board']}"
    return text


def flash_fit_note(report: dict) -> str | None:
    """One line on the layers compile() moved to smaller-weight variants, if any."""
    moves = report.get("flash_fit") or []
    if not moves:
        return None
    saved = sum(m["saved_bytes"] for m in moves)
    layers = ", ".join(f"{m['layer']} ({m['to'].get('variant')})" for m in moves)
    return (f"weights exceed the flash of {report['board']} with the fastest variants: "
            f"layer(s) {layers} use variants with int8 weights ({saved:,} B saved, "
            f"some speed lost)")


def scratch_tables_note(report: dict) -> str | None:
    """One line on the ADD/SUB layers that build their table at run time, if any."""
    moves = report.get("scratch_tables") or []
    if not moves:
        return None
    saved = sum(m["saved_bytes"] for m in moves)
    layers = ", ".join(str(m["layer"]) for m in moves)
    return (f"layer(s) {layers} build their ADD/SUB table at run time in scratch ({saved:,} B "
            f"of flash saved, the arena unchanged; --optimize speed keeps them in flash)")


def compile(graph: Graph, board: str = "host", tuning_records=None,  # noqa: A001
            optimize: str = DEFAULT_OPTIMIZE) -> Artifact:
    """Compile an int8 graph to C for `board`. Raises ModelError / BoardError on bad input.

    `tuning_records` (a .jsonl path or a kiln.compiler.tune.Records) picks each tunable
    layer's kernel variant: the fastest record of its workload on this board; layers
    without one keep the default variant. When the weights then exceed the board's flash
    (less CODE_RESERVE_BYTES), layers move to variants with smaller weights
    (kiln.compiler.codegen.fit; report["flash_fit"] lists the moves).
    `optimize` trades arena bytes for cycles (kiln.compiler.codegen.choose_overlaps):
    "speed" plans every buffer apart (layer by layer), "balanced" lets a layer write over
    the input it reads last wherever that lowers the peak, "memory" wherever it can.
    `graph` may also be a .tflite path, `board` a board file's path (holding '/' or ending
    in .toml) or a kiln.project_gen Board."""
    if not isinstance(board, str):
        board_name(board)          # BoardError for what is neither a name nor a Board
    spec = _board_spec(board)      # resolved once: a board file is read once
    board = spec.name
    records = as_records(tuning_records)
    try:
        source = as_graph(graph)
        source.verify()         # a graph built or changed in Python: checked here
    except GraphError as e:     # a malformed graph: its unsupported ops are named first
        raise explain(e) from None
    g = optimize_graph(source)
    target = target_for(spec)
    split = spec.multi_region       # weights array by array across memory regions
    budget = weights_budget(spec)
    # Each layer's kernel variant and why, decided in one stage (kiln.compiler.schedule:
    # defaults, tuning records, shared code, speed widening, flash budget), with the
    # generated code of its last decision.
    schedule, (files, plan, layers, consts) = build_schedule(
        g, KILN_VERSION, target, records, optimize, budget, split_weights=split)
    workload_keys = {i: workload_key(e.op.type, e.code.shape) for i, e in enumerate(layers)
                     if e.code.shape is not None}
    offsets = {b.name: b.offset for b in plan.buffers}
    offsets.update({b.name: f"state:{b.offset}" for b in plan.state})
    report = {
        "kiln_version": KILN_VERSION,
        "model": {"name": g.name, "sha256": g.sha256},
        "board": board,
        "inputs": [_tensor_io(g, t) for t in g.inputs],
        "outputs": [_tensor_io(g, t) for t in g.outputs],
        "arena_bytes": plan.arena_bytes,
        "arena_lower_bound_bytes": plan.lower_bound,
        "optimize": optimize,
        "arena_bound_without_overlaps_bytes": plan.bound_without_overlaps,
        "peak_layer": peak_step(plan),
        "overlaps": [{"layer": o.layer, "input": o.input, "output": o.output,
                      "offset_delta": delta, "kernel": layers[o.layer].code.kernel,
                      "banded": "kiln_band_params_t" in layers[o.layer].code.body,
                      "rule": o.rule} for o, delta in plan.shared()],
        # Model state (variable tensors), kept across runs apart from the arena (.bss).
        "state_bytes": plan.state_bytes,
        "state_plan": [{"buffer": b.name, "offset": b.offset, "size": b.size}
                       for b in plan.state],
        "tensor_lower_bound_bytes": lower_bound([b for b in plan.buffers if b.kind == "tensor"]),
        "scratch_bytes": sum(b.size for b in plan.buffers if b.kind == "scratch"),
        "weights_bytes": weights_bytes(consts),
        "weights_budget_bytes": budget,
        # Layers moved to variants with smaller weights so the model fits the flash.
        "flash_fit": schedule.flash_fit,
        # Small layers moved onto a kernel other layers link anyway (less code).
        "shared_code": schedule.shared_code,
        # --optimize speed: layers moved to int16-pair filters (faster, bigger) that fit.
        "speed_widen": schedule.speed_widen,
        # ADD/SUB tables built at run time in scratch instead of flash (arena unchanged).
        "scratch_tables": schedule.scratch_tables,
        "tuning": {"records": str(records.path) if records is not None and records.path
                   else None,
                   "tunable_layers": len(workload_keys), "tuned_layers": len(schedule.tuned),
                   "record_boards": sorted({e["board"] for e in records.entries})
                   if records is not None else [],
                   # lines of the records file that are not tuning records (skipped)
                   "unreadable_lines": records.skipped_lines if records is not None else 0},
        "ops": [{"index": i, "tflite_index": e.op.index, "type": e.op.type,
                 "inputs": list(e.op.inputs), "outputs": list(e.op.outputs),
                 "macs": e.code.macs, "kernel": e.code.kernel,
                 **({"called": e.code.called} if e.code.called else {}),
                 **({"knobs": e.code.knobs} if e.code.knobs else {}),
                 **({"workload": workload_keys[i], "tuned": i in schedule.tuned}
                    if i in workload_keys else {}),
                 # the variant this layer runs and why (kiln.compiler.schedule)
                 "schedule": schedule.entry(i, e.code),
                 "scratch_bytes": e.code.scratch_bytes,
                 # channels passes/dead_filters.py removed (original indices) and why
                 **({"removed_channels": {**e.op.removed, "notes": e.op.notes}}
                    if e.op.removed else {})} for i, e in enumerate(layers)],
        "tensors": [{"id": t.id, "name": t.name, "shape": list(t.shape), "dtype": t.dtype,
                     "offset": ("const" if t.is_const else
                                offsets.get(g.tensor(g.storage_root(t.id)).c_name, "unused")),
                     **({"alias_of": t.alias_of} if t.alias_of is not None else {})}
                    for t in g.tensors],
        "memory_plan": [{"buffer": b.name, "offset": b.offset, "size": b.size,
                         "first_step": b.first, "last_step": b.last, "kind": b.kind}
                        for b in sorted(plan.buffers, key=lambda b: (b.offset, b.name))],
    }
    if split:       # where each buffer goes among the board's regions
        from kiln.project_gen.regions import place_model
        report["placement"] = place_model(report, [(c.name, max(int(np.asarray(c.values).nbytes), 1))
                                                   for c in consts.values()], spec)
    files = dict(files)
    files["kiln.json"] = json.dumps(report, indent=2) + "\n"
    return Artifact(graph=g, board=board, files=files, plan=plan, report=report,
                    layers=layers, consts=consts, board_spec=spec)
