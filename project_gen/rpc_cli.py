"""`kiln profile` and the host-driven side of `kiln run`: a cached host-driven project
per (model, board), launched on QEMU or the host, or reached on a real board by --port.

    kiln profile MODEL|DIR --board B [--port URL] [--json F] [--repeat N]
    kiln run MODEL --board B --port URL ...   (cmd_run_rpc; see add_parsers)

Handlers take the parsed args and return an exit code; a KilnError becomes one line
and exit code 2 in kiln.compiler.cli.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kiln.compiler.arrays_io import (check_output_path, files_read, print_samples, read_inputs,
                                     write_outputs)
from kiln.compiler.cli import add_optimize_argument
from kiln.compiler.cli_args import add_model_options, positive_float, repeat_count
from kiln.compiler.cache import cache_dir, cached_entry
from kiln.compiler.errors import InputError, KilnError
from kiln.compiler.escape import project_name
from kiln.compiler.frontend.tflite_reader import MAX_MODEL_BYTES
from kiln.compiler.fsutil import atomic_write_text, read_regular_file
from kiln.compiler.tune.records import MAX_RECORDS_BYTES
from kiln.compiler.compile import DEFAULT_OPTIMIZE, tuning_note
from kiln.compiler.paths import crt_dir, templates_dir

from .boards import board_digest, get_board
from .flash import add_flash_arguments, flash_if_asked
from .project import MANIFEST, Project, create_project, kiln_version
from .qemu import ticks_to_instructions
from .session import Profile, Session


def add_port_arguments(p: argparse.ArgumentParser) -> None:
    """--port / --chardev / --timeout, shared by `kiln run` and `kiln profile`."""
    p.add_argument("--port", metavar="URL",
                   help="a flashed board's serial port (pyserial URL: /dev/ttyACM0, "
                        "socket://HOST:PORT, …) instead of launching QEMU or the host build")
    p.add_argument("--chardev", choices=("pipe", "socket"), default="pipe",
                   help="QEMU serial link: stdio pipe (faster) or TCP socket")
    p.add_argument("--timeout", type=positive_float, default=None, metavar="S",
                   help="seconds a run may take on the device (default 60)")
    add_flash_arguments(p)


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("profile", help="per-layer cycles of a model on a board, over RPC "
                                   "(instructions on QEMU, ns on the host)")
    p.add_argument("model", help="a .tflite or .onnx model, or a host-driven project directory")
    p.add_argument("--board", "-b", default="host", help="board name (see `kiln boards`)")
    p.add_argument("--json", metavar="F", help="also write the profile as JSON")
    p.add_argument("--repeat", type=repeat_count, default=10,
                   help="timed whole-model runs to compare the layer sum against")
    p.add_argument("--tuning-records", metavar="F",
                   help="kernel variants from tuning records (kiln tune)")
    add_optimize_argument(p, default=None)
    add_model_options(p)
    add_port_arguments(p)
    p.set_defaults(handler=cmd_profile)


# -- the cached project ----------------------------------------------------------------

def _sources_digest() -> str:
    """Digest of kiln's C runtime, templates and Python code generator: a cached project is
    stale when any of them changes (a development install keeps its version string)."""
    import kiln.compiler

    h = hashlib.sha256(kiln_version().encode())
    python_roots = (Path(kiln.compiler.__file__).parent, Path(__file__).parent)
    for root in (crt_dir(), templates_dir(), *python_roots):
        for f in sorted(root.rglob("*")):
            if f.is_file() and f.suffix in (".c", ".h", ".j2", ".ld", ".S", ".py"):
                h.update(str(f.relative_to(root)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:12]


def cache_root() -> Path:
    return cache_dir("projects")


def _complete_project(folder: Path) -> Project | None:
    """The project in `folder` if it is a whole cached project: a host-driven kiln project
    with its firmware built; else None. Entries are renamed into place only once built, so
    anything else is an older kiln's or a damaged one, to be rebuilt."""
    try:
        project = Project.open(folder)
        elf = project.elf
        whole = project.mode == "host-driven" and elf.is_file() and elf.stat().st_size > 0
        return project if whole else None
    except (KilnError, OSError, KeyError, TypeError, ValueError):
        return None


def host_driven_project(target: str | Path, board: Any, cache: Path | None = None,
                        tuning_records: str | Path | None = None,
                        model_options: dict | None = None,
                        optimize: str | None = None) -> Project:
    """A host-driven project for `target`: the project DIR itself, or for a model file a
    project cached under ~/.cache/kiln/projects keyed by model, board (its name and
    facts: a board file may change), kiln sources and the tuning records' content.
    model_options: load()'s input_shapes / layout (--input-shape, --layout) for an ONNX
    model; an ONNX model is keyed by its loaded graph's sha256, which covers them and its
    external data files (the .onnx bytes alone do not). optimize: the compile goal
    (kiln.compiler.compile's; None: its default), part of the key.

    A cached project is created and built in a staging folder and renamed into place
    (kiln.compiler.cache): Ctrl-C or a crash leaves no entry, never a half-built one, and
    concurrent runs wait for the one building it and share it."""
    target = Path(target)
    if target.is_dir():
        if tuning_records is not None or optimize is not None:
            given = "--tuning-records" if tuning_records is not None else "--optimize"
            raise InputError(f"{target} is a project, compiled already: pass {given} "
                             f"to `kiln project create`, or give the model file")
        _refuse_model_options(target, model_options)
        if not (target / MANIFEST).exists():
            raise InputError(f"{target} is a directory but not a kiln project")
        project = Project.open(target)
        if project.mode != "host-driven":
            raise InputError(f"{target} is a standalone project; profiling needs a host-driven "
                             f"one (kiln project create … --mode host-driven)")
        return project
    if not target.is_file():
        raise InputError(f"{target}: no such model file or project directory")
    model_bytes = read_regular_file(target, "model", MAX_MODEL_BYTES)
    graph = None
    if model_options or _is_onnx(target, model_bytes):
        from kiln.compiler import load

        graph = load(target, **(model_options or {}))
        model_hash = graph.sha256[:16]
    else:                    # a .tflite is its bytes (and is not parsed on a cache hit)
        model_hash = hashlib.sha256(model_bytes).hexdigest()[:16]
    tuned = ""
    if tuning_records is not None:
        if not Path(tuning_records).is_file():
            raise InputError(f"{tuning_records}: no such tuning records file")
        records = read_regular_file(tuning_records, "tuning records file", MAX_RECORDS_BYTES)
        tuned = "-t" + hashlib.sha256(records).hexdigest()[:12]
    # The file name only labels the entry (the hash keys it): an identifier of bounded
    # length, so no byte of it makes an odd or over-long folder name.
    label = project_name(target.stem)[:40]
    # The board by name and by its facts: a board file (a path, KILN_BOARD_PATH) may
    # change under the same name; its digest keys the entry.
    spec = get_board(board)
    goal = optimize or DEFAULT_OPTIMIZE
    suffix = tuned + ("" if goal == DEFAULT_OPTIMIZE else f"-{goal}")
    out = (cache or cache_root()) / (f"{label}-{model_hash}-{spec.name}-{board_digest(spec)}-"
                                     f"{_sources_digest()}{suffix}")

    def build(staging: Path) -> None:
        model: Any = str(target)
        options: dict[str, Any] = {"tuning_records": tuning_records, "optimize": goal}
        if graph is not None:       # compiled from the graph loaded with its options
            from kiln.compiler import compile as kiln_compile

            model = kiln_compile(graph, board=spec, tuning_records=tuning_records,
                                 optimize=goal)
            options = {}
        project = create_project(model, board=spec, out_dir=staging,
                                 mode="host-driven", force=True, **options)
        project.build()      # the entry holds its firmware: a later run only reuses it

    opened: dict[Path, Project] = {}

    def complete(folder: Path) -> bool:       # keeps what it opened: a hit opens it once
        project = _complete_project(folder)
        if project is not None:
            opened[folder] = project
        return project is not None

    cached_entry(out, complete, build, f"the cached project {out.name}")
    return opened.get(out) or Project.open(out)


def _is_onnx(target: Path, data: bytes) -> bool:
    """As frontend.load picks its reader: by extension, else by content."""
    return target.suffix.lower() == ".onnx" or (len(data) >= 8 and data[4:8] != b"TFL3"
                                                and data[:1] == b"\x08")


def _refuse_model_options(target: Path, model_options: dict | None) -> None:
    if model_options:
        raise InputError(f"{target} is a project, compiled already: pass --input-shape/"
                         f"--layout to `kiln project create`, or give the model file")


def connect(project: Project, args: argparse.Namespace) -> Session:
    from .rpc_client import RpcOptions

    timeout = getattr(args, "timeout", None) or 60.0
    flash_if_asked(project, args)          # --flash / --flash-command: before connecting
    return project.connect(port=getattr(args, "port", None),
                           chardev=getattr(args, "chardev", "pipe"),
                           options=RpcOptions(command_timeout=timeout))


# -- kiln profile ------------------------------------------------------------------------

@dataclass
class LayerRow:
    index: int
    op: str
    kernel: str
    output_shape: list[int]
    macs: int
    cycles: int
    ticks: int
    percent: float
    macs_per_cycle: float


def ticks_to_cycles(project: Project, ticks: int, tick_hz: int, port: str | None) -> int:
    """Device ticks as the figure kiln reports: instructions on QEMU (-icount), cycles on a
    board (DWT/SysTick at the core clock), nanoseconds on the host."""
    if project.board.runs_on == "qemu" and port is None:
        return ticks_to_instructions(ticks, tick_hz)
    return ticks


def cycles_unit(project: Project, port: str | None) -> str:
    if project.board.runs_on == "qemu" and port is None:
        return "instructions"
    return "ns" if project.board.is_host else "cycles"


def profile_rows(project: Project, prof: Profile, port: str | None) -> list[LayerRow]:
    ops = project.manifest.get("ops", [])
    shapes = {t["id"]: t["shape"] for t in project.manifest.get("tensors", [])}
    total = sum(layer.ticks for layer in prof.layers) or 1
    rows = []
    for layer in prof.layers:
        op = ops[layer.index] if layer.index < len(ops) else {}
        cycles = ticks_to_cycles(project, layer.ticks, prof.tick_hz, port)
        macs = int(op.get("macs", 0))
        out_ids = op.get("outputs") or []
        rows.append(LayerRow(layer.index, op.get("type", layer.name), op.get("called", op.get("kernel", "")),
                             list(shapes.get(out_ids[0], [])) if out_ids else [], macs, cycles,
                             layer.ticks, 100.0 * layer.ticks / total,
                             macs / cycles if cycles else 0.0))
    return rows


def _host_driven(args: argparse.Namespace) -> Project:
    """The host-driven project `kiln profile` / `kiln run` talk to, saying what tuning
    records changed in it."""
    from kiln.compiler.cli_args import model_options

    records = getattr(args, "tuning_records", None)
    project = host_driven_project(args.model, args.board, tuning_records=records,
                                  model_options=model_options(args),
                                  optimize=getattr(args, "optimize", None))
    note = tuning_note(project.manifest) if records else None
    if note:
        print(note)
    return project


def cmd_profile(args: argparse.Namespace) -> int:
    if args.json:                # before building and running: never replace the model
        check_output_path(args.json, files_read(args.model, args.tuning_records), "--json")
    project = _host_driven(args)
    port = getattr(args, "port", None)
    unit = cycles_unit(project, port)
    with connect(project, args) as session:
        timing = session.time(repeat=max(1, args.repeat), warmup=1)
        prof = session.profile(warmup=0)
    rows = profile_rows(project, prof, port)
    layer_sum = sum(r.cycles for r in rows)
    whole = ticks_to_cycles(project, round(timing.mean_ticks), timing.tick_hz, port)
    total_macs = sum(r.macs for r in rows)
    kw = max([len("kernel")] + [len(r.kernel) for r in rows])    # names are never cut
    print(f"{'#':>3} {'op':<18} {'kernel':<{kw}} {'output':<16} {'MACs':>11} {unit:>13} "
          f"{'%':>6} {'MACs/' + unit[:5]:>10}")
    for r in rows:
        print(f"{r.index:>3} {r.op:<18} {r.kernel:<{kw}} {str(r.output_shape):<16} "
              f"{r.macs:>11,} {r.cycles:>13,} {r.percent:>6.1f} {r.macs_per_cycle:>10.3f}")
    diff = 100.0 * (layer_sum - whole) / whole if whole else 0.0
    print(f"layers {layer_sum:,} {unit}; whole model {whole:,} {unit} (mean of {timing.repeat}); "
          f"layer sum {diff:+.2f}% of whole; {total_macs:,} MACs, "
          f"{total_macs / whole if whole else 0:.3f} MACs per {unit[:-1] if unit.endswith('s') else unit}")
    if args.json:
        doc: dict[str, Any] = {
            "model": project.model_name, "board": project.board.name, "unit": unit,
            "tick_hz": prof.tick_hz, "total_cycles": layer_sum, "whole_model_cycles": whole,
            "whole_model_repeat": timing.repeat, "layer_sum_vs_whole_percent": round(diff, 3),
            "total_macs": total_macs, "layers": [asdict(r) for r in rows],
        }
        atomic_write_text(args.json, json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


# -- kiln run over RPC -------------------------------------------------------------------

def run_rpc(project: Project, inputs: list[np.ndarray] | None, args: argparse.Namespace
            ) -> tuple[list[list[np.ndarray]], list[int], int]:
    """Upload, run, download each sample of `inputs` (stacked on axis 0, as for every
    board): (outputs per sample, ticks per sample, tick_hz)."""
    from kiln.compiler.inputs import random_inputs, split_samples

    xs = inputs if inputs is not None else random_inputs(project.input_specs)
    samples = split_samples(xs, project.input_specs)
    results, ticks = [], []
    with connect(project, args) as session:
        for sample in samples:
            results.append(session.run(sample, timeout=getattr(args, "timeout", None)))
            ticks.append(session.last_run_ticks or 0)
        return results, ticks, session.device.tick_hz


def cmd_run_rpc(args: argparse.Namespace) -> int:
    """`kiln run MODEL|DIR --board B [--port URL]` through a (cached) host-driven project."""
    project = _host_driven(args)
    inputs = read_inputs(args.input) if getattr(args, "input", None) else None
    port = getattr(args, "port", None)
    if getattr(args, "output", None):             # before building and running
        check_output_path(args.output, files_read(args.model, getattr(args, "input", None),
                                                  getattr(args, "tuning_records", None)))
    results, ticks, tick_hz = run_rpc(project, inputs, args)
    print_samples(results)
    unit = cycles_unit(project, port)
    print(f"{ticks_to_cycles(project, ticks[0], tick_hz, port):,} {unit} per inference on "
          f"{project.board.name}{' at ' + port if port else ''}")
    if getattr(args, "output", None):
        outputs = [np.concatenate([r[o] for r in results], axis=0)
                   for o in range(len(results[0]))]
        print(f"wrote {write_outputs(args.output, outputs)}")
    return 0
