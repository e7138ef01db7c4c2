"""The `kiln` command line. Every KilnError becomes one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

import numpy as np

from .compile import DEFAULT_OPTIMIZE, flash_fit_note, scratch_tables_note, tuning_note
from .cli_args import add_model_options, model_options
from .arrays_io import check_output_path, files_read, print_samples, read_inputs, write_outputs
from .errors import InputError, KilnError
from .ir import GraphError
from .escape import terminal

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT = 0, 1, 2

# Subcommands that live with their own stage (project_gen, quantize, tuning, RPC):
# each module offers add_parsers(subparsers). Missing modules are skipped.
_PLUGIN_MODULES = (
    "kiln.compiler.quantize.cli",
    "kiln.project_gen.cli_commands",
    "kiln.project_gen.rpc_cli",
    "kiln.compiler.tune.cli",
    "kiln.project_gen.validate_cli",
    "kiln.project_gen.farm_serve",
)


# --- commands ----------------------------------------------------------------------------

def cmd_info(args) -> int:
    from . import compile, load

    from .codegen import explain

    try:
        g = load(args.model, **model_options(args))
    except GraphError as e:
        if explain(e) is e:         # malformed, nothing else to say: the error
            raise
        g = e.graph                 # with unsupported ops: listed, compile() says which
    print(f"model {terminal(g.name)}  sha256 {g.sha256[:16]}  {len(g.ops)} ops, "
          f"{len(g.tensors)} tensors")
    for role, ids in (("input", g.inputs), ("output", g.outputs)):
        for tid in ids:
            t = g.tensor(tid)
            q = f" scale={t.quant.scale[0]:.6g} zp={t.quant.zero_point[0]}" if t.quant is not None else ""
            print(f"  {role:6} {terminal(t.name)} {list(t.shape)} {t.dtype}{q}")
    board = _board_arg(getattr(args, "board", None) or "host")
    try:
        art = compile(g, board=board, optimize=args.optimize)
    except KilnError as e:
        counts: dict[str, int] = {}
        for op in g.ops:
            counts[op.type] = counts.get(op.type, 0) + 1
        # op types of CUSTOM ops are the model's text ("CUSTOM:<name>")
        print("  ops: " + ", ".join(f"{terminal(k)}×{v}" for k, v in sorted(counts.items())))
        print(f"  not compilable as is: {terminal(e)}")
        return EXIT_OK
    r = art.report
    # Columns as wide as their longest entry (UNIDIRECTIONAL_SEQUENCE_LSTM is 28).
    w_op = max([22] + [len(op["type"]) for op in r["ops"]])
    w_kernel = max([26] + [len(op["kernel"]) for op in r["ops"]])
    print(f"{'#':>3} {'op':<{w_op}} {'kernel':<{w_kernel}} {'output shape':<18} {'MACs':>10}")
    for op in r["ops"]:
        # ASSIGN_VARIABLE and CALL_ONCE write the model state, no output
        shape = r["tensors"][op["outputs"][0]]["shape"] if op["outputs"] else "(state)"
        print(f"{op['index']:>3} {op['type']:<{w_op}} {op['kernel']:<{w_kernel}} {str(shape):<18} "
              f"{op['macs']:>10,}")
    total_macs = sum(op["macs"] for op in r["ops"])
    print(f"MACs {total_macs:,}  weights {r['weights_bytes']:,} B  arena {r['arena_bytes']:,} B "
          f"(scratch {r['scratch_bytes']:,} B)")
    if r.get("state_bytes"):
        print(f"state {r['state_bytes']:,} B: kept from one run to the next (model.h "
              f"KILN_STATE_BYTES, static; kiln_reset() resets it)")
    print(_memory_line(art))
    if board != "host":
        _print_fit(art, board, args.mode)
    if args.memory_plot:
        from .memory_plot import save_memory_plot

        print(f"wrote {save_memory_plot(r, args.memory_plot, reads=[args.model])}")
    return EXIT_OK


def _board_arg(board: str):
    """A board name, or the Board a path to a board file names (kiln.project_gen)."""
    from kiln.project_gen.boards import get_board

    return board if board == "host" else get_board(board)


def _print_fit(art, board, mode: str) -> None:
    """The fit verdict `kiln project create` (mode) and then the build reach on the
    artifact's board: create_project's own check, in a scratch folder."""
    import tempfile

    from kiln.project_gen import create_project
    from kiln.project_gen.sizes import code_bound

    from .errors import FitError

    r = art.report
    state = f", state {r['state_bytes']:,} B" if r.get("state_bytes") else ""
    print(f"on {terminal(art.board)}: weights {r['weights_bytes']:,} B, "
          f"arena {r['arena_bytes']:,} B{state}, code at most {code_bound(r, mode):,} B "
          f"(estimate, {mode})")
    with tempfile.TemporaryDirectory(prefix="kiln-info-") as tmp:
        try:
            project = create_project(art, board=board,
                                     out_dir=os.path.join(tmp, "project"), mode=mode)
        except FitError as e:
            print(f"does not fit: {terminal(str(e).split(': ', 1)[-1])}")
            return
    print(project.fit.line())


def _memory_line(art) -> str:
    """Peak arena, the layer that sets it, and the layer-by-layer bound without overlaps."""
    r = art.report
    peak = r["peak_layer"]
    where = f"layer {peak} ({r['ops'][peak]['type']})" if 0 <= peak < len(r["ops"]) else "-"
    return (f"peak arena {r['arena_bytes']:,} B at {where}, optimize={r['optimize']}; "
            f"bound without overlaps {r['arena_bound_without_overlaps_bytes']:,} B; "
            f"{len(r['overlaps'])} layer(s) write over their input")


def _load_for_compile(args):
    from . import load

    g = load(args.model, **model_options(args))
    calibration = getattr(args, "calibration", None)
    if calibration:
        from .quantize.cli import quantize_for_compile

        g = quantize_for_compile(g, args)
    return g


def cmd_compile(args) -> int:
    from . import compile
    from .artifact import MANIFEST, SOURCE_FILES
    from .export import check_prefix
    from .fsutil import refuse_overwriting_inputs

    # -o DIR: none of the files written there may be one this command reads.
    prefix = check_prefix(args.prefix)
    reads = files_read(args.model, args.tuning_records, getattr(args, "calibration", None))
    own = (f"{prefix}.h", f"{prefix}.c", f"{prefix}.mk") if prefix else (*SOURCE_FILES, "model.mk")
    for name in (*own, MANIFEST, "CMakeLists.txt"):
        refuse_overwriting_inputs(os.path.join(args.output, name), reads, "-o")
    g = _load_for_compile(args)
    art = compile(g, board=args.board, tuning_records=args.tuning_records, optimize=args.optimize)
    out = art.save(args.output, force=args.force, prefix=prefix)
    r = art.report
    written = sorted({n.split("/")[0] + ("/" if "/" in n else "") for n in art.saved_files})
    print(f"wrote {', '.join(written)} to {out}")
    print(f"arena {r['arena_bytes']:,} B, weights {r['weights_bytes']:,} B, {len(r['ops'])} layers")
    print(_memory_line(art))
    for note in (flash_fit_note(r), scratch_tables_note(r)):
        if note:
            print(note)
    if args.tuning_records:
        t = r["tuning"]
        print(tuning_note(r))
        if t["unreadable_lines"]:
            print(f"kiln: warning: {args.tuning_records}: skipped {t['unreadable_lines']} line(s) "
                  f"that are not tuning records", file=sys.stderr)
    _warn_if_too_large(art, args.board)
    return EXIT_OK


def _warn_if_too_large(art, board) -> None:
    """The C is written either way (it may go into a user's own firmware), but a model
    whose weights or arena alone exceed the board is worth a warning now, not at link."""
    from kiln.project_gen.boards import get_board
    from kiln.project_gen.sizes import check_fits

    from .errors import FitError

    if art.board == "host":
        return
    r = art.report
    try:
        check_fits(art.graph.name, get_board(board), r["weights_bytes"],
                   r["arena_bytes"] + r.get("state_bytes", 0))
    except FitError as e:
        print(f"kiln: warning: {terminal(e)}", file=sys.stderr)


# Ops that never become a kernel call: views of their input (alias_reshapes) and shape
# arithmetic on constants (fold_constants).
_GRAPH_LEVEL_OPS = {"RESHAPE": "view", "SQUEEZE": "view", "EXPAND_DIMS": "view",
                    "VAR_HANDLE": "model state (a variable tensor)",
                    # frontend/control_flow.py: Keras GRU/SimpleRNN loops, into plain layers
                    "WHILE": "unrolled (static trip count)",
                    "IF": "inlined (constant condition)",
                    # compiler/passes/fold_constants.py: shape arithmetic the converter
                    # writes (an LSTM's zero state: SHAPE → STRIDED_SLICE → PACK → FILL)
                    **{op: "folded when constant" for op in (
                        "SHAPE", "CAST", "FILL", "ZEROS_LIKE", "RANK", "RANGE",
                        "BROADCAST_ARGS", "REDUCE_PROD", "FLOOR_DIV", "FLOOR_MOD")}}


def cmd_ops(args) -> int:
    """`kiln ops`: every op type a model may use, with the module that lowers it."""
    from .codegen.lowering import LOWERINGS

    rows = {t: lw.fn.__module__.rsplit(".", 1)[-1] for t, lw in LOWERINGS.items()}
    rows.update({t: how for t, how in _GRAPH_LEVEL_OPS.items() if t not in rows})
    if args.json:
        print(json.dumps([{"op": t, "lowered_by": rows[t]} for t in sorted(rows)], indent=2))
        return EXIT_OK
    width = max(map(len, rows))
    for t in sorted(rows):
        print(f"{t:<{width}}  {rows[t]}")
    print(f"{len(rows)} op types; int8 activations, and int16 (16x8 models) where TFLM runs "
          f"the op at int16 (each op's check names what it refuses); bit-exact with TFLM's "
          f"reference kernels (TFLite's where TFLM lacks one)")
    return EXIT_OK


def cmd_run(args) -> int:
    """`kiln run`: where the model runs decides who runs it.

    - a model on the host board: the host shared library (cffi), the fastest path;
    - a project directory: the project as it was created (standalone or host-driven);
    - a model on any other board, or with --port: a cached host-driven project over RPC.
    """
    from pathlib import Path as _Path

    from kiln.project_gen import cli_commands, rpc_cli

    target = _Path(args.model)
    chosen_board, args.board = args.board, args.board or "host"
    if target.is_dir():
        from kiln.project_gen.project import Project

        if getattr(args, "tuning_records", None):
            raise InputError(f"{target} is a project, compiled already: pass --tuning-records "
                             f"to `kiln project create`, or give the model file")
        if model_options(args):
            raise InputError(f"{target} is a project, compiled already: pass --input-shape/"
                             f"--layout to `kiln project create`, or give the model file")
        if getattr(args, "optimize", None):
            raise InputError(f"{target} is a project, compiled already: pass --optimize "
                             f"to `kiln project create`, or give the model file")

        from kiln.project_gen.boards import get_board

        project = Project.open(target)
        if chosen_board is not None and get_board(chosen_board).name != project.board.name:
            raise InputError(f"{target} is a project for {project.board.name}, not "
                             f"{chosen_board}: drop --board, or create a project for "
                             f"{chosen_board}")
        if project.mode == "host-driven":
            return rpc_cli.cmd_run_rpc(args)
        return cli_commands.cmd_run(args)
    if args.board != "host" or getattr(args, "port", None):
        if getattr(args, "calibration", None):
            raise InputError("--calibration with --board: quantize first (kiln quantize), "
                             "then run the int8 model")
        return rpc_cli.cmd_run_rpc(args)
    return cmd_run_host(args)


def cmd_run_host(args) -> int:
    """`kiln run MODEL --board host`: the host library, on inputs checked like every board's.

    --input arrays go through the same split_samples as projects and RPC (shape
    rules, float quantized, integers that fit). One sample prints `output i ...`;
    N stacked samples print `sample s output i ...` as standalone firmware does,
    and --output then holds each output's samples concatenated on axis 0.
    """
    from . import inputs as model_inputs

    from . import compile

    if args.output:                               # before compiling and running
        check_output_path(args.output, files_read(args.model, args.input, args.tuning_records,
                                                  getattr(args, "calibration", None)))
    arrays = read_inputs(args.input) if args.input else None
    g = _load_for_compile(args)
    art = compile(g, board="host", tuning_records=getattr(args, "tuning_records", None),
                  optimize=getattr(args, "optimize", None) or DEFAULT_OPTIMIZE)
    note = tuning_note(art.report)
    if note:
        print(note)
    specs = [model_inputs.TensorSpec.from_report(e) for e in art.report["inputs"]]
    if arrays is None:
        arrays = model_inputs.random_inputs(specs)
    samples = model_inputs.split_samples(arrays, specs)
    results = [art.run(*sample) for sample in samples]
    print_samples(results)
    outputs = [np.concatenate([r[o] for r in results], axis=0) for o in range(len(results[0]))]
    if args.output:
        print(f"wrote {write_outputs(args.output, outputs)}")
    return EXIT_OK


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="a .tflite or .onnx model, or a project directory")
    p.add_argument("--board", default=None,
                   help="board to run on (default host; a project runs on its own board)")
    p.add_argument("--input", action="append", default=[], metavar="X.npy",
                   help="an input array (repeat per model input); default: fixed-seed random")
    p.add_argument("--output", metavar="OUT.npz", help="write outputs as output_0, output_1, ...")
    p.add_argument("--tuning-records", metavar="F",
                   help="kernel variants from tuning records (kiln tune)")
    add_optimize_argument(p, default=None)
    add_model_options(p)
    from kiln.project_gen.rpc_cli import add_port_arguments

    add_port_arguments(p)


def add_optimize_argument(p: argparse.ArgumentParser, default: str | None = DEFAULT_OPTIMIZE
                          ) -> None:
    """--optimize; default None where giving it on a project folder (compiled already)
    is an error, so the command can tell it was given."""
    p.add_argument("--optimize", choices=("speed", "balanced", "memory"), default=default,
                   help="speed: every buffer apart; balanced: layers write over their input "
                        "where that lowers the peak arena; memory: wherever they can "
                        f"(default {DEFAULT_OPTIMIZE})")


class _Parser(argparse.ArgumentParser):
    """argparse with kiln's error shape: one line on stderr and exit code 2, like every
    other bad input (argparse prints a usage block first; --help still shows it)."""

    def error(self, message: str):
        print(f"kiln: error: {terminal(message)} (see `{terminal(self.prog)} --help`)",
              file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def build_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    parser = _Parser(prog="kiln", description="Compile TFLite (and float ONNX) models to C for microcontrollers.")
    parser.add_argument("--version", action="version", version="kiln 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("ops", help="list the TFLite ops kiln compiles")
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.set_defaults(handler=cmd_ops)

    p = sub.add_parser("info", help="ops, shapes, MACs, weight bytes, arena estimate")
    p.add_argument("model")
    p.add_argument("--board", default="host",
                   help="the board compiled for: its kernels, weights and arena, and whether "
                        "the firmware fits it (the verdict `kiln project create` reaches)")
    p.add_argument("--mode", choices=("standalone", "host-driven"), default="standalone",
                   help="the firmware the fit verdict is for (default standalone)")
    add_optimize_argument(p)
    p.add_argument("--memory-plot", metavar="OUT.svg",
                   help="draw the arena over time (buffers as boxes) to an SVG file")
    add_model_options(p)
    p.set_defaults(handler=cmd_info)

    p = sub.add_parser("compile", help="compile a model to C sources and kiln.json")
    p.add_argument("model")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.add_argument("--board", default="host")
    p.add_argument("--calibration", action="append", metavar="X.npy|DIR",
                   help="quantize a float model first (once per model input)")
    p.add_argument("--tuning-records", metavar="F",
                   help="kernel variants from tuning records (kiln tune); default heuristic "
                        "for layers without one")
    p.add_argument("--force", action="store_true", help="write into a non-empty directory")
    p.add_argument("--prefix", metavar="P",
                   help="a C identifier: write P.h, P.c, P.mk and export only P_* names "
                        "(P_run, P_ARENA_BYTES...), so several models link into one program")
    add_optimize_argument(p)
    add_model_options(p)
    p.set_defaults(handler=cmd_compile)

    p = sub.add_parser(
        "run", help="run a model (host, QEMU or a board) and print its outputs",
        epilog="On a standalone project DIR, --input replaces the sample inputs baked into "
               "the project (inputs.npz, src/kiln_inputs.c) and rebuilds it, so later runs "
               "of DIR use them too; without --input it runs the inputs it has.")
    add_run_arguments(p)
    p.add_argument("--calibration", action="append", metavar="X.npy|DIR",
                   help="quantize a float model first")
    p.set_defaults(handler=cmd_run)
    return parser, sub


def _tolerant_streams() -> None:
    """Print what cannot be encoded (a non-UTF-8 file name, decoded by Python to lone
    surrogates) as backslash escapes instead of raising UnicodeEncodeError mid-output."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)   # absent on test captures
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    _tolerant_streams()
    parser, sub = build_parser()
    for name in _PLUGIN_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and name.startswith(e.name):
                continue
            raise
        module.add_parsers(sub)
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return int(args.handler(args) or 0)
    except KilnError as e:
        if isinstance(e, GraphError):   # a malformed graph: its unsupported ops first
            from .codegen import explain

            e = explain(e)
        # terminal(): a message may quote a model's text; it stays one line, no escapes
        print(f"kiln: error: {terminal(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:      # `kiln ... | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as e:         # a path the user gave that cannot be read or written
        where = f": {e.filename}" if e.filename else ""
        print(f"kiln: error: {terminal(e.strerror or e)}{terminal(where)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("kiln: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
