"""compile(): Graph → Artifact (passes, lowering, memory plan, C sources, report)."""

from __future__ import annotations

import json
import tomllib

from .artifact import Artifact
from .codegen import generate, weights_bytes
from .codegen.lowering import Target
from .errors import BoardError
from .ir import Graph
from .memory_plan import lower_bound, peak_step
from .passes import optimize as optimize_graph
from .paths import boards_dir

KILN_VERSION = "0.1.0"
DEFAULT_OPTIMIZE = "balanced"


def _check_board(board: str) -> None:
    if board == "host":
        return
    if not (boards_dir() / f"{board}.toml").exists():
        known = sorted(p.stem for p in boards_dir().glob("*.toml"))
        raise BoardError(f"unknown board {board!r}; known boards: {', '.join(known) or 'host'}")


def target_for(board: str) -> Target:
    """The CPU features of `board` that kernel variants depend on (boards/<board>.toml)."""
    if board == "host":
        return Target()
    with open(boards_dir() / f"{board}.toml", "rb") as f:
        spec = tomllib.load(f)
    return Target(board=board, cpu=str(spec.get("cpu", "")), dsp=bool(spec.get("dsp", False)))


def _tensor_io(graph: Graph, tid: int) -> dict:
    t = graph.tensor(tid)
    scale, zp = (t.quant.single() if t.quant is not None and not t.quant.per_channel
                 else (None, None))
    return {"name": t.name, "id": tid, "shape": list(t.shape), "dtype": t.dtype,
            "scale": scale, "zero_point": zp}


def compile(graph: Graph, board: str = "host", tuning_records=None,  # noqa: A001
            optimize: str = DEFAULT_OPTIMIZE) -> Artifact:
    """Compile an int8 graph to C for `board`. Raises ModelError / BoardError on bad input.

    `optimize` trades arena bytes for cycles (kiln.compiler.codegen.choose_overlaps):
    "speed" plans every buffer apart (layer by layer), "balanced" lets a layer write over
    the input it reads last wherever that lowers the peak, "memory" wherever it can."""
    _check_board(board)
    g = optimize_graph(graph)
    files, plan, layers, consts = generate(g, KILN_VERSION, target_for(board),
                                           optimize=optimize)
    offsets = {b.name: b.offset for b in plan.buffers}
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
        "tensor_lower_bound_bytes": lower_bound([b for b in plan.buffers if b.kind == "tensor"]),
        "scratch_bytes": sum(b.size for b in plan.buffers if b.kind == "scratch"),
        "weights_bytes": weights_bytes(consts),
        "ops": [{"index": i, "tflite_index": e.op.index, "type": e.op.type,
                 "inputs": list(e.op.inputs), "outputs": list(e.op.outputs),
                 "macs": e.code.macs, "kernel": e.code.kernel,
                 **({"knobs": e.code.knobs} if e.code.knobs else {}),
                 "scratch_bytes": e.code.scratch_bytes} for i, e in enumerate(layers)],
        "tensors": [{"id": t.id, "name": t.name, "shape": list(t.shape), "dtype": t.dtype,
                     "offset": ("const" if t.is_const else
                                offsets.get(g.tensor(g.storage_root(t.id)).c_name, "unused")),
                     **({"alias_of": t.alias_of} if t.alias_of is not None else {})}
                    for t in g.tensors],
        "memory_plan": [{"buffer": b.name, "offset": b.offset, "size": b.size,
                         "first_step": b.first, "last_step": b.last, "kind": b.kind}
                        for b in sorted(plan.buffers, key=lambda b: (b.offset, b.name))],
    }
    files = dict(files)
    files["kiln.json"] = json.dumps(report, indent=2) + "\n"
    return Artifact(graph=g, board=board, files=files, plan=plan, report=report)
