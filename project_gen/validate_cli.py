"""`kiln validate`: a model on a target against kiln's host build and a float model.

    kiln validate MODEL --board B [--data X.npy ...] [--labels Y.npy] [--float F.tflite]
                  [--calibration C.npy] [--per-layer [N]] [--samples N] [--json F] [--port URL]
    kiln validate PROJECT_DIR --tflite MODEL [...]      (a host-driven project as built)

Exit code 0 when the target's outputs (and, with --per-layer, every layer's) equal the
host reference's on every sample, 1 when they do not, 2 on bad input. The engine is
kiln.project_gen.validate; docs/validate.md describes the report.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from kiln.compiler.arrays_io import check_output_path, files_read, read_inputs, read_npy
from kiln.compiler.cache import cache_dir
from kiln.compiler.cli_args import add_model_options, model_options, positive_int
from kiln.compiler.errors import InputError
from kiln.compiler.escape import terminal
from kiln.compiler.fsutil import atomic_write_bytes, atomic_write_text
from kiln.compiler.inputs import TensorSpec, random_inputs, split_samples
from kiln.compiler.ir import Graph

from .project import Project
from .rpc_cli import (add_port_arguments, connect, cycles_unit, host_driven_project,
                      ticks_to_cycles)
from .validate import (FloatReference, Inputs, Progress, Target, dequantize_spec, format_report,
                       json_safe, labels_as_classes, validate)

EXIT_MATCH, EXIT_DIFFERS = 0, 1
DEFAULT_RANDOM_SAMPLES = 10


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    from kiln.compiler.quantize.cli import add_quantize_options

    p = subparsers.add_parser(
        "validate", help="run a model on a board and compare it with kiln's host build "
                         "(bit-exact) and the float model: metrics, accuracy, per layer",
        epilog="Exit code 0: the target matches the host reference on every sample; 1: it "
               "does not; 2: bad input.")
    p.add_argument("model", help="a .tflite or .onnx model (float with --calibration), or a "
                                 "host-driven project directory (with --tflite)")
    p.add_argument("--board", "-b", default=None, help="board name (default host; a project "
                                                       "runs on its own board)")
    p.add_argument("--tflite", metavar="MODEL",
                   help="with a project directory: the model it was built from")
    p.add_argument("--data", action="append", default=[], metavar="X.npy",
                   help="input samples stacked on axis 0 (repeat per model input; float data "
                        f"is quantized); default {DEFAULT_RANDOM_SAMPLES} fixed-seed random samples")
    p.add_argument("--labels", metavar="Y.npy", help="class per sample (or one-hot): top-1 "
                                                     "accuracy of target, host and float")
    p.add_argument("--float", dest="float_model", metavar="F.tflite",
                   help="the float model to compare with (default: MODEL when float, else "
                        "the int8 model's float twin from its dequantized weights)")
    p.add_argument("--calibration", action="append", metavar="X.npy|DIR",
                   help="quantize a float MODEL first (once per model input)")
    p.add_argument("--samples", type=positive_int, metavar="N",
                   help="validate the first N samples only")
    p.add_argument("--per-layer", nargs="?", type=positive_int, const=1, default=0, metavar="N",
                   help="also compare every layer's output on the first N samples (default 1)")
    p.add_argument("--json", metavar="F", help="write the whole report as JSON")
    add_port_arguments(p)
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run on a worker of a Ray farm (auto, HOST:PORT): QEMU on a node, or "
                        "a board `kiln farm serve` offers (docs/farm.md)")
    add_quantize_options(p)
    add_model_options(p)
    p.set_defaults(handler=cmd_validate)


# -- the models ----------------------------------------------------------------------------

def _quantized_file(graph: Graph, args: argparse.Namespace) -> Path:
    """A float model quantized with --calibration, as `kiln compile` does, written to the
    cache under a name keyed by its bytes: the host reference and the target's project
    are then built from one and the same file."""
    from kiln.compiler.quantize.cli import quantize_for_compile

    return _cached_tflite(quantize_for_compile(graph, args),
                          f"kiln int8 quantization of {graph.name} for kiln validate")


def _cached_tflite(graph: Graph, description: str) -> Path:
    """`graph` written as a .tflite in the cache, named by its bytes."""
    from kiln.compiler.frontend.tflite_writer import write

    data = write(graph, description=description)
    folder = cache_dir("validate")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{graph.name}-{hashlib.sha256(data).hexdigest()[:16]}.tflite"
    if not path.is_file():
        atomic_write_bytes(path, data)
    return path


def _models(args: argparse.Namespace, model_file: Path) -> tuple[Path, FloatReference]:
    """(the int8 .tflite the target and host run, the float reference)."""
    from kiln.compiler import load
    from kiln.compiler.quantize import is_float_graph
    from kiln.compiler.quantize.float_twin import float_twin

    options = model_options(args)         # --input-shape / --layout of an ONNX model
    graph = load(model_file, **options)
    if is_float_graph(graph):
        if not args.calibration:
            raise InputError(f"{model_file} is a float model: give --calibration X.npy to "
                             f"quantize it first (as `kiln compile` does)")
        int8_file, float_graph, kind = _quantized_file(graph, args), graph, "model"
    else:
        if args.calibration:
            print(f"note: {terminal(graph.name)} is an int8 model already; --calibration is "
                  f"ignored")
        int8_file, float_graph, kind = model_file, None, "twin"
        if options:   # a QDQ .onnx read with them: the int8 model every later step loads
            int8_file = _cached_tflite(graph, f"{graph.name} (QDQ ONNX, sha256 "
                                              f"{graph.sha256[:16]}) for kiln validate")
    twin = _evaluable(float_twin(load(int8_file)), "its float twin")
    if args.float_model:
        float_options = options if Path(args.float_model).suffix.lower() == ".onnx" else {}
        float_graph = load(args.float_model, **float_options)
        kind = f"--float {Path(args.float_model).name}"
        if not is_float_graph(float_graph):
            raise InputError(f"--float {args.float_model} is not a float model")
    float_graph = _evaluable(float_graph, "the float model") if float_graph is not None else twin
    return int8_file, FloatReference(float_graph, kind if float_graph is not None else "none",
                                     twin)


def _evaluable(graph: Graph, what: str) -> Graph | None:
    """`graph` if kiln's float evaluator runs every op of it, else None with a note: the
    comparison with the host build does not need it."""
    from kiln.compiler.errors import ModelError
    from kiln.compiler.quantize.float_eval import FloatModel

    try:
        FloatModel(graph)
    except ModelError as e:
        print(f"note: no float figures from {what}: {terminal(e)}")
        return None
    return graph


def _project_dir(args: argparse.Namespace) -> Project | None:
    """The host-driven project DIR given as MODEL (its model file by --tflite), or None
    for a model file (its project is cached once the int8 model is known)."""
    target = Path(args.model)
    if not target.is_dir():
        if args.tflite:
            raise InputError("--tflite is for a project directory; MODEL is a model file already")
        return None
    if not args.tflite:
        raise InputError(f"{target} is a project: give the model it was built from with "
                         f"--tflite MODEL (the host reference is compiled from it)")
    project = host_driven_project(target, args.board or "host")
    if args.board is not None and args.board != project.board.name:
        raise InputError(f"{target} is a project for {project.board.name}, not {args.board}")
    return project


# -- the data ------------------------------------------------------------------------------

def _inputs(args: argparse.Namespace, specs: list[TensorSpec]) -> Inputs:
    if args.data:
        arrays = read_inputs(args.data)
    else:
        randoms = [random_inputs(specs, seed=s) for s in range(args.samples or DEFAULT_RANDOM_SAMPLES)]
        arrays = [np.concatenate([r[i].reshape((1, *specs[i].shape)) for r in randoms])
                  for i in range(len(specs))]
    samples = split_samples(arrays, specs)[: args.samples]
    floats = []
    for i, (x, spec) in enumerate(zip(arrays, specs)):
        if np.asarray(x).dtype.kind == "f":      # the float model sees the data as given
            as_float = TensorSpec(spec.name, spec.shape, np.dtype(np.float32), None, None)
            stack = np.stack([s[0] for s in split_samples([x], [as_float])][: len(samples)])
        else:                                    # integer data: its real values
            stack = dequantize_spec(np.stack([s[i] for s in samples]), spec)
        floats.append(stack)
    labels = None
    if args.labels:
        labels = labels_as_classes(read_npy(args.labels, "labels"), len(samples))
    return Inputs(samples, floats, labels)


# -- the command ----------------------------------------------------------------------------

def cmd_validate(args: argparse.Namespace) -> int:
    from kiln.compiler import compile, load

    if args.json:                     # before anything runs: never replace a file read
        check_output_path(args.json, files_read(args.model, args.tflite, args.data, args.labels,
                                                args.float_model, args.calibration), "--json")
    project = _project_dir(args)
    model_file = Path(args.tflite if project is not None else args.model)
    int8_file, reference = _models(args, model_file)
    host = compile(load(int8_file), board="host")
    if project is None:
        project = host_driven_project(int8_file, args.board or "host")
    elif project.manifest.get("model", {}).get("sha256") != host.report["model"]["sha256"]:
        raise InputError(f"{args.model} was built from another model than {model_file} "
                         f"(sha256 differ)")
    data = _inputs(args, project.input_specs)
    port = getattr(args, "port", None)
    where = f"{project.board.name}{' at ' + port if port else ''}"
    farm = None
    if args.ray is not None:            # a worker of the farm instead of a local target
        from kiln.compiler.tune.farm import farm_session

        if port or args.flash or args.flash_command:
            raise InputError("with --ray, boards are served by `kiln farm serve` on their "
                             "hosts: drop --port/--flash*")
        farm = farm_session(args.ray, project, args.timeout or 60.0)
        port, where = farm.port, f"{project.board.name} ({farm.where})"
    unit = cycles_unit(project, port)
    print(f"validating {terminal(host.graph.name)} on {where}: {len(data.samples)} sample(s) "
          f"against the host build and the float model ({reference.kind})")
    progress = Progress("samples", len(data.samples))
    with farm or connect(project, args) as session:
        hz = session.device.tick_hz
        report = validate(Target(session, project.manifest), host, reference, data,
                          per_layer=args.per_layer,
                          cycles=lambda t: ticks_to_cycles(project, t, hz, port),
                          progress=progress)
    doc = {"model": host.graph.name, "board": project.board.name, "port": port, "unit": unit,
           **report.doc}
    for line in format_report(doc, unit):
        print(line)
    if report.matches:
        print(f"result: the target matches the host reference on every sample (exit {EXIT_MATCH})")
    else:
        print(f"result: the target DIFFERS from the host reference (exit {EXIT_DIFFERS}): a "
              f"toolchain, board or kiln fault; the host build is bit-exact with tflite-micro")
    if args.json:
        atomic_write_text(args.json, json.dumps(json_safe(doc), indent=2) + "\n")
        print(f"wrote {args.json}")
    sys.stdout.flush()
    return EXIT_MATCH if report.matches else EXIT_DIFFERS
