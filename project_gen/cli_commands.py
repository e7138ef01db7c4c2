"""The `kiln boards` and `kiln project create|build` subcommands, and `kiln run` on a board.

kiln.compiler.cli wires the first two in with `add_parsers(subparsers)`; its
own `kiln run` hands a project directory, or a model with a board other than
the host, to `cmd_run` here. Each handler takes the parsed args and returns the
exit code; user mistakes raise KilnError, which the CLI prints as one line
with exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from kiln.compiler.arrays_io import (check_output_path, files_read, print_samples, read_inputs,
                                     write_outputs)
from kiln.compiler.cli import add_optimize_argument
from kiln.compiler.compile import flash_fit_note, scratch_tables_note, tuning_note
from kiln.compiler.errors import InputError
from kiln.compiler.escape import terminal
from kiln.compiler.fsutil import atomic_write_text

from .boards import BOARD_PATH_VARIABLE, is_kiln_board, list_boards, new_board_toml
from .flash import add_flash_arguments, flash_if_asked, flash_project, launched_by
from .console import RunResult
from kiln.compiler.inputs import random_inputs
from .project import MANIFEST, MODES, Project, create_project
from .qemu import ICOUNT_SHIFT, ticks_to_instructions
from .sizes import SizeReport
from .toolchain import QEMU_ARM, have_tool


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("boards", help="list the boards and what each can do here",
                              epilog="Boards of your own: --board ./NAME.toml anywhere, or put "
                                     "NAME.toml in a folder of KILN_BOARD_PATH (searched "
                                     "before kiln's own boards).")
    p.add_argument("--json", action="store_true", help="print the boards as JSON")
    p.add_argument("--new", metavar="NAME",
                   help="write a commented board file for a new board NAME (with -o)")
    p.add_argument("--like", metavar="BOARD", default="mps2-an386",
                   help="the board --new starts from (default mps2-an386)")
    p.add_argument("-o", "--output", metavar="NAME.toml", help="where --new writes")
    p.add_argument("--force", action="store_true", help="let --new replace an existing file")
    p.set_defaults(handler=cmd_boards)

    f = subparsers.add_parser("flash", help="flash a built project onto its (real) board",
                              epilog="How: --flash-command, else the board file's flashing "
                                     "table (a command, or pyOCD's target). QEMU and host "
                                     "boards are not flashed: `kiln run` launches them.")
    f.add_argument("project", help="a project directory (built first if needed)")
    add_flash_arguments(f, flash_switch=False)
    f.set_defaults(handler=cmd_flash)

    project = subparsers.add_parser("project", help="create or build a firmware project")
    psub = project.add_subparsers(dest="project_command", required=True)
    c = psub.add_parser("create", help="render a firmware project for a board")
    c.add_argument("model", help="a .tflite or .onnx model")
    c.add_argument("--board", "-b", required=True, help="board name (see `kiln boards`)")
    c.add_argument("-o", "--output-dir", required=True, help="the project directory")
    c.add_argument("--mode", choices=MODES, default="standalone")
    c.add_argument("--input", action="append", metavar="X.npy",
                   help="sample input baked into standalone firmware, one per model "
                        "input (N samples may be stacked on axis 0; float data is "
                        "quantized); default: fixed-seed random")
    c.add_argument("--force", action="store_true",
                   help="replace the kiln project already in the directory: kiln's own "
                        "files and build/ (files kiln did not make stay)")
    c.add_argument("--tuning-records", metavar="F",
                   help="kernel variants from tuning records (kiln tune); default heuristic "
                        "for layers without one")
    c.add_argument("--calibration", action="append", metavar="X.npy|DIR",
                   help="quantize a float model first, as `kiln compile --calibration` "
                        "(once per model input)")
    add_optimize_argument(c)
    from kiln.compiler.cli_args import add_model_options
    from kiln.compiler.quantize.cli import add_quantize_options

    add_model_options(c)

    add_quantize_options(c)
    c.set_defaults(handler=cmd_project_create)
    b = psub.add_parser("build", help="build a project with make and report its size")
    b.add_argument("dir", help="the project directory")
    b.set_defaults(handler=cmd_project_build)


def wants_project_run(args: argparse.Namespace) -> bool:
    """True when `kiln run` should go through a firmware project (cmd_run), not the host library."""
    target = Path(getattr(args, "model", None) or getattr(args, "target"))
    return target.is_dir() or (getattr(args, "board", None) or "host") != "host"


# -- kiln boards --------------------------------------------------------------

def _runs_here(runs_on: str) -> str:
    if runs_on == "qemu":
        return "yes (QEMU)" if have_tool(QEMU_ARM) else f"no ({QEMU_ARM} missing)"
    if runs_on == "host":
        return "yes"
    return "build only"


def cmd_boards(args: argparse.Namespace) -> int:
    if args.new is not None or args.output is not None:
        return _new_board(args)
    boards = list_boards()
    if args.json:
        rows = [{"name": b.name, "cpu": b.cpu, "fpu": b.fpu, "dsp": b.dsp,
                 "clock_hz": b.clock_hz, "runs_on": b.runs_on,
                 "flash_bytes": b.flash.size if b.flash else None,
                 "ram_bytes": b.ram.size if b.ram else None,
                 "uart": b.uart.kind, "timer": b.timer,
                 "qemu_machine": b.qemu.machine if b.qemu else None,
                 "runs_here": _runs_here(b.runs_on),
                 "file": None if is_kiln_board(b) else str(b.source)} for b in boards]
        print(json.dumps(rows, indent=2))
        return 0

    def kib(region) -> str:
        return "-" if region is None else f"{region.size // 1024:,} KB"

    header = f"{'board':<15}{'core':<6}{'flash':>9}{'RAM':>9}{'clock':>9}  {'uart':<15}{'timer':<8}runs here"
    print(header)
    for b in boards:
        clock = "-" if b.is_host else f"{b.clock_hz / 1e6:g} MHz"
        print(f"{b.name:<15}{b.core:<6}{kib(b.flash):>9}{kib(b.ram):>9}{clock:>9}  "
              f"{b.uart.kind:<15}{b.timer:<8}{_runs_here(b.runs_on)}")
    for b in boards:
        if not is_kiln_board(b):
            print(f"{terminal(b.name)}: {terminal(b.source)} ({BOARD_PATH_VARIABLE})")
    return 0


def _new_board(args: argparse.Namespace) -> int:
    """`kiln boards --new NAME [--like B] -o NAME.toml [--force]`."""
    if args.new is None or args.output is None:
        raise InputError("--new NAME and -o NAME.toml go together: kiln boards --new myboard "
                         "--like mps2-an386 -o myboard.toml")
    text = new_board_toml(args.new, args.like)
    out = Path(args.output)
    if os.path.lexists(out) and not args.force:
        raise InputError(f"{out} exists: kiln will not write over it; pass --force to "
                         f"replace it")
    if out.is_dir():
        raise InputError(f"{out} is a directory: name the board file, e.g. {out / (args.new + '.toml')}")
    atomic_write_text(out, text)
    print(f"wrote {out}: edit it, then `kiln project create MODEL --board {out} -o DIR`"
          + ("" if out.stem == args.new else
             f" (in a folder of {BOARD_PATH_VARIABLE} it must be named {args.new}.toml)"))
    return 0


def cmd_flash(args: argparse.Namespace) -> int:
    """`kiln flash PROJECT [--port URL] [--flash-command CMD]`."""
    target = Path(args.project)
    if target.is_file():
        raise InputError(f"{target} is a file: `kiln flash` takes a project directory "
                         f"(kiln project create MODEL --board B -o DIR)")
    project = Project.open(target)
    board = project.board
    how = launched_by(board)
    if how is not None:
        print(f"{board.name} runs on {how}: nothing to flash; `kiln run {project.path}` "
              f"builds it and launches it")
        return 0
    how = flash_project(project, args.port, args.flash_command)
    print(f"flashed {project.path} onto {board.name} with {terminal(how)}")
    return 0


# -- kiln project create / build ---------------------------------------------

def _load_inputs(paths: list[str] | None) -> list[np.ndarray] | None:
    return read_inputs(paths) if paths else None


def _print_size(project: Project, report: SizeReport) -> None:
    print(f"{project.elf} ({project.board.name}):")
    for line in report.lines():
        print("  " + line)


def _model_for_create(args: argparse.Namespace):
    """The model file as given, or with --calibration the compiled Artifact of the model
    quantized as `kiln compile --calibration` quantizes it."""
    from kiln.compiler.cli_args import model_options

    options = model_options(args)
    if not args.calibration and not options:
        return args.model, {"tuning_records": args.tuning_records, "optimize": args.optimize}
    from kiln.compiler import compile as kiln_compile, load
    from kiln.compiler.quantize.cli import quantize_for_compile

    from .boards import get_board

    graph = load(args.model, **options)      # --input-shape / --layout: read as asked
    if args.calibration:
        graph = quantize_for_compile(graph, args)
    art = kiln_compile(graph, board=get_board(args.board), tuning_records=args.tuning_records,
                       optimize=args.optimize)
    return art, {}


def cmd_project_create(args: argparse.Namespace) -> int:
    inputs = _load_inputs(args.input)
    model, compile_options = _model_for_create(args)
    project = create_project(model, board=args.board, out_dir=args.output_dir,
                             mode=args.mode, inputs=inputs, force=args.force,
                             inputs_origin=", ".join(args.input) if args.input else None,
                             protect=[args.model, *(args.input or ()), *(args.calibration or ()),
                                      *([args.tuning_records] if args.tuning_records else [])],
                             **compile_options)
    for note in (tuning_note(project.manifest), flash_fit_note(project.manifest),
                 scratch_tables_note(project.manifest)):
        if note:
            print(note)
    if project.replacement is not None:
        print(project.replacement.summary(project.path))
    if project.fit is not None:
        print(project.fit.line())
    print(f"created {project.path} ({project.mode}, {project.board.name}); "
          f"build it with `kiln project build {project.path}` or `make -C {project.path}`")
    return 0


def cmd_project_build(args: argparse.Namespace) -> int:
    project = Project.open(args.dir)
    report = project.build()
    _print_size(project, report)
    return 0


# -- kiln run -----------------------------------------------------------------

def _print_result(project: Project, result: RunResult) -> None:
    print_samples(result.samples)
    board = project.board
    if board.runs_on == "qemu":
        print(f"{result.instructions:,} instructions (QEMU -icount shift={ICOUNT_SHIFT}) per "
              f"inference on {board.name} ({result.ticks[0]:,} SysTick ticks at "
              f"{result.tick_hz / 1e6:g} MHz)")
    elif board.is_host:
        print(f"{result.seconds * 1e3:.3f} ms per inference on the host")
    else:
        print(f"{result.cycles:,} cycles per inference on {board.name}")
    if result.stack_bytes is not None:
        print(f"peak stack {result.stack_bytes:,} bytes")


def _save_outputs(path: str, result: RunResult) -> None:
    print(f"wrote {write_outputs(path, result.outputs)}")


def _run_host_driven(project: Project, inputs: list[np.ndarray] | None,
                     port: str | None) -> RunResult:
    xs = inputs if inputs is not None else random_inputs(project.input_specs)
    with project.connect(port=port) as session:
        outputs = session.run(xs)
        ticks = session.last_run_ticks or 0
        tick_hz = session.device.tick_hz
    result = RunResult(outputs=outputs, samples=[outputs], ticks=[ticks], tick_hz=tick_hz,
                       unit=project.board.tick_unit)
    if project.board.runs_on == "qemu" and port is None:
        result.instructions = result.cycles = ticks_to_instructions(ticks, tick_hz)
    elif not project.board.is_host:
        result.cycles = ticks
    return result


def cmd_run(args: argparse.Namespace) -> int:
    """`kiln run MODEL|DIR [--board B] [--input X.npy ...] [--output OUT.npz]` via a project.

    A DIR is a project made by `kiln project create` (built if needed; its own
    board, whatever --board says): standalone firmware runs with its baked
    inputs (or --input, baked in first), host-driven firmware over RPC (QEMU,
    the host, or a real board at args.port). A MODEL is compiled into a
    temporary standalone project for --board (default host). Reads args.model
    (or args.target), board, input, output and, when present, port and timeout.
    """
    target = Path(getattr(args, "model", None) or getattr(args, "target"))
    if getattr(args, "output", None):             # before building and running
        check_output_path(args.output, files_read(target, getattr(args, "input", None),
                                                  getattr(args, "tuning_records", None)))
    inputs = _load_inputs(getattr(args, "input", None))
    timeout = getattr(args, "timeout", None)
    if target.is_dir():
        if not (target / MANIFEST).exists():
            raise InputError(f"{target} is a directory but not a kiln project")
        project = Project.open(target)
        if project.mode == "host-driven":
            result = _run_host_driven(project, inputs, getattr(args, "port", None))
        else:
            if inputs is not None:
                n = project.set_inputs(inputs, origin=", ".join(args.input))
                print(f"replaced the sample inputs baked into {target} with {n} sample(s) "
                      f"from {', '.join(args.input)} (inputs.npz, src/kiln_inputs.c) and "
                      f"rebuilt it: later runs of {target} use them too")
            if flash_if_asked(project, args):
                print(f"the standalone firmware runs on {project.board.name} now and prints "
                      f"its KILN lines on its serial port")
                return 0
            result = project.run(timeout=timeout)
        if project.elf.exists():
            _print_size(project, project.size_report())
        _print_result(project, result)
    else:
        if not target.exists():
            raise InputError(f"{target}: no such model file or project directory")
        with tempfile.TemporaryDirectory(prefix="kiln-run-") as tmp:
            project = create_project(target, board=args.board or "host",
                                     out_dir=Path(tmp) / "project", inputs=inputs)
            result = project.run(timeout=timeout)
            _print_size(project, project.size_report())
            _print_result(project, result)
    if getattr(args, "output", None):
        _save_outputs(args.output, result)
    return 0
