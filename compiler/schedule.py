"""The per-layer schedule: which kernel variant (knobs) each layer runs, and why.

One stage decides it (issue 17 item 7), in this order, each rule only reading the
decisions before it (the rules themselves: codegen/fit.py and tune/records.py):
1. default: the lowering's first candidate for the target (codegen/ops/conv.py), knobs None;
2. tuning records: the fastest record of the layer's workload on the board whose knobs are
   still a candidate ("tuning record <file>:<line>");
3. shared code: small untuned fully connected layers onto the convolutions' gemm
   (fit.share_code), when that spares the firmware a kernel and does not grow the arena;
   tables in scratch (balanced and memory builds): ADD/SUB tables built at run time in
   their layer's scratch instead of flash (fit.tables_to_scratch), all at once where the
   arena keeps its size, else one at a time (the first _TABLE_TRIALS);
4. --optimize speed: untuned int8-pair layers widened to their int16-pair twin while the
   weights fit the flash budget (fit.widen_for_speed);
5. flash budget: while the weights exceed it, layers move to variants with smaller weights
   (fit.fit_weights).
Steps 3-5 look at the generated weights, kernels and arena, so the stage lowers the graph between
them (codegen.generate, which only reads the knobs it is given); the last generation is the
compile's. Schedule.choose is the one way a rule changes a layer: it records the reason,
and kiln.json reports it per layer (ops[i].schedule = {kernel, knobs, why}).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .codegen import generate, weights_bytes
from .codegen.fit import fit_weights, share_code, tables_to_scratch, widen_for_speed
from .codegen.lowering import Target
from .codegen.ops.conv import candidates
from .ir import Graph
from .tune.records import Records
from .tune.workloads import knobs_id, layer_shapes, workload_key

DEFAULT = "default"
FIXED = "fixed: no tunable variants"
# Trials of one table at a time when not every table fits beside the arena's buffers.
_TABLE_TRIALS = 8


@dataclass
class Schedule:
    """step → the knobs codegen gets for it (absent: the default variant) and the reasons."""
    knobs: dict[int, dict] = field(default_factory=dict)
    why: dict[int, list[str]] = field(default_factory=dict)
    tuned: set[int] = field(default_factory=set)       # layers whose knobs came from records
    flash_fit: list[dict] = field(default_factory=list)     # fit.fit_weights moves
    shared_code: list[dict] = field(default_factory=list)   # fit.share_code moves
    speed_widen: list[dict] = field(default_factory=list)   # fit.widen_for_speed moves
    scratch_tables: list[dict] = field(default_factory=list)  # fit.tables_to_scratch moves

    def choose(self, step: int, knobs: dict, why: str) -> None:
        """Run layer `step` with `knobs` because of `why` (after any earlier reasons)."""
        self.knobs[step] = knobs
        self.why.setdefault(step, []).append(why)

    def reason(self, step: int, tunable: bool = True) -> str:
        return "; then ".join(self.why.get(step) or [DEFAULT if tunable else FIXED])

    def entry(self, step: int, code) -> dict:
        """kiln.json's ops[step].schedule for the layer lowered as `code` (EmittedCode)."""
        return {"kernel": code.kernel, "knobs": code.knobs or {},
                "why": self.reason(step, code.shape is not None)}


def _record_source(records: Records, entry: dict) -> str:
    where = str(records.path) if records.path is not None else "(in memory)"
    line = records.line_of(entry)
    return f"tuning record {where}:{line}" if line is not None else f"tuning record {where}"


def tuned_knobs(shapes: dict, target: Target, records: Records) -> dict[int, dict]:
    """step → the best record, for the tunable layers (`shapes`: workloads.layer_shapes).
    A layer without a usable record keeps the default variant (the first candidate); a
    record whose knobs are no longer a candidate (an older kiln) is ignored."""
    keys = {step: workload_key(op_type, shape) for step, (op_type, shape) in shapes.items()}
    options = {keys[step]: {knobs_id(k) for k in candidates(op_type, shape, target)}
               for step, (op_type, shape) in shapes.items()}
    best = records.best(target.board, options)
    return {step: best[key] for step, key in keys.items() if key in best}


def _fit_why(move: dict) -> str:
    to = move["to"]
    kind = "int8 weights" if to.get("weights") == "p8" else f"smaller weights {knobs_id(to)}"
    return f"flash budget: {kind} ({move['saved_bytes']:,} B saved)"


def build_schedule(graph: Graph, version: str, target: Target, records: Records | None,
                   optimize: str, budget: int | None, split_weights: bool = False):
    """(Schedule, the generation with it: codegen.generate's (files, plan, layers, consts)).

    `graph`: optimized; `budget`: the bytes the weights may take (None: no limit). Each
    rule of codegen/fit.py returns the knobs it would run with and its moves; the moves are
    applied here, one Schedule.choose each, which gives the same knobs."""
    def gen(s: Schedule):
        return generate(graph, version, target, layer_knobs=s.knobs, optimize=optimize,
                        split_weights=split_weights)

    s = Schedule()
    found: list[dict] = []

    def shapes() -> dict:
        """The tunable layers (workloads.layer_shapes): lowered once, when a rule needs them."""
        if not found:
            found.append(layer_shapes(graph, target))
        return found[0]

    if records is not None:
        for step, rec in tuned_knobs(shapes(), target, records).items():
            s.choose(step, rec["knobs"], _record_source(records, rec))
            s.tuned.add(step)
    out = gen(s)

    def kept(moves: list[dict], why) -> bool:
        """Apply `moves` (each with the reason why(move)) to s if the generation with them
        has no larger arena than the current one (their scratch fits beside it)."""
        nonlocal out
        trial = Schedule(knobs=dict(s.knobs), why={k: list(v) for k, v in s.why.items()})
        for m in moves:
            trial.choose(m["layer"], m["to"], why(m))
        trial_out = gen(trial)
        if trial_out[1].arena_bytes > out[1].arena_bytes:
            return False
        s.knobs, s.why, out = trial.knobs, trial.why, trial_out
        return True

    _, shared = share_code(out[2], s.knobs, target)
    if shared and kept(shared, lambda m: f"shared code: {m['why']}"):
        s.shared_code = shared
    if optimize != "speed":
        tables = tables_to_scratch(out[2])

        def in_scratch(m: dict) -> str:
            return (f"flash: its table built at run time in the layer's scratch "
                    f"({m['saved_bytes']:,} B of flash saved; the arena keeps its size)")
        if tables and kept(tables, in_scratch):
            s.scratch_tables = tables
        else:
            s.scratch_tables = [m for m in tables[:_TABLE_TRIALS] if kept([m], in_scratch)]
    if optimize == "speed":
        _, s.speed_widen = widen_for_speed(graph, target, shapes(), s.knobs,
                                           weights_bytes(out[3]), budget)
        for m in s.speed_widen:
            s.choose(m["layer"], m["to"],
                     f"speed: widened to int16-pair filters (+{m['added_bytes']:,} B of "
                     f"weights, within the flash budget)")
        if s.speed_widen:
            out = gen(s)
    if budget is not None and weights_bytes(out[3]) > budget:
        _, s.flash_fit = fit_weights(graph, target, shapes(), s.knobs,
                                     weights_bytes(out[3]), budget)
        for m in s.flash_fit:
            s.choose(m["layer"], m["to"], _fit_why(m))
        if s.flash_fit:
            out = gen(s)
    return s, out
