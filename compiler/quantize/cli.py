"""`kiln quantize` and the quantization options of `kiln compile --calibration`.

    kiln quantize MODEL --calibration X.npy|DIR [--calibration ...] -o OUT.tflite [--force]
    kiln compile  MODEL --calibration X.npy|DIR -o DIR [quantize options]

`--calibration` is given once per model input: a .npy with a batch axis, or a directory
of .npy files holding one sample each. The CLI (compiler/cli.py) turns every KilnError
into one line and exit code 2.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..cli_args import add_model_options, model_options, positive_int
from ..errors import InputError
from ..escape import terminal
from ..ir import Graph
from .calibrate import METHODS


def add_quantize_options(p: argparse.ArgumentParser) -> None:
    """The options of the quantizer (shared by `kiln quantize` and `kiln compile`)."""
    g = p.add_argument_group("quantization")
    g.add_argument("--calibration-method", choices=METHODS, default="minmax",
                   help="how activation ranges are chosen (default: minmax, as TFLite)")
    g.add_argument("--percentile", type=float, default=99.99,
                   help="for --calibration-method percentile (default 99.99)")
    g.add_argument("--tensor-method", action="append", default=[], metavar="NAME=METHOD",
                   help="range method for one tensor, by name (repeatable)")
    g.add_argument("--bias-correction", action="store_true",
                   help="subtract the mean error of the rounded weights from the biases")
    g.add_argument("--fc-per-tensor", action="store_true",
                   help="one weight scale per FULLY_CONNECTED layer (default: per channel)")
    g.add_argument("--activations", choices=("int8", "int16"), default="int8",
                   help="int16: 16x8 quantization (int16 activations, int8 weights, int64 "
                        "biases), as TF's converter's int16x8 mode; model I/O int16")
    g.add_argument("--io", choices=("int8", "float"), default="int8",
                   help="model input/output type (float: QUANTIZE/DEQUANTIZE at the edges)")
    g.add_argument("--max-samples", type=positive_int, metavar="N",
                   help="calibrate on at most N samples")


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "quantize", help="quantize a float or hybrid .tflite to int8 (or 16x8) with "
                         "calibration data",
        description="Post-training int8 quantization (TFLite's scheme) of a float or hybrid "
                    "model, calibrated on your data, written as a .tflite.")
    p.add_argument("model", help="a float or hybrid (int8 weights, float activations) .tflite, "
                                 "a float .onnx, or a QDQ .onnx (exported as it is quantized)")
    p.add_argument("--calibration", action="append", metavar="X.npy|DIR",
                   help="calibration samples: a .npy with a batch axis or a directory of "
                        ".npy samples; once per model input (not for a QDQ .onnx)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.tflite")
    p.add_argument("--force", action="store_true",
                   help="replace OUT.tflite if it exists (never the input model)")
    add_quantize_options(p)
    add_model_options(p)
    p.set_defaults(handler=cmd_quantize)

    compile_parser = subparsers.choices.get("compile")
    if compile_parser is not None:
        add_quantize_options(compile_parser)


def _options(args) -> dict:
    per_tensor = {}
    for item in getattr(args, "tensor_method", None) or []:
        name, sep, method = item.rpartition("=")
        if not sep or not name:
            raise InputError(f"--tensor-method {item!r} is not NAME=METHOD")
        per_tensor[name] = method
    return {
        "method": getattr(args, "calibration_method", "minmax"),
        "percentile": getattr(args, "percentile", 99.99),
        "per_tensor": per_tensor,
        "bias_correction": getattr(args, "bias_correction", False),
        "fc_per_channel": not getattr(args, "fc_per_tensor", False),
        "io": getattr(args, "io", "int8"),
        "activations": getattr(args, "activations", "int8"),
        "max_samples": getattr(args, "max_samples", None),
    }


def _paths(calibration) -> list[str]:
    return [calibration] if isinstance(calibration, str) else list(calibration)


def _quantize(graph: Graph, args):
    from . import is_float_graph, load_calibration, quantize_with_report

    if not is_float_graph(graph):
        return graph, None
    data = load_calibration(graph, _paths(args.calibration))
    return quantize_with_report(graph, data, **_options(args))


def _describe(q: Graph, report) -> str:
    io = []
    for role, ids in (("input", q.inputs), ("output", q.outputs)):
        for tid in ids:
            t = q.tensor(tid)
            quant = f" scale={t.quant.scale[0]:.6g} zero_point={int(t.quant.zero_point[0])}" \
                if t.quant is not None else ""
            io.append(f"  {role} {t.name} {list(t.shape)} {t.dtype}{quant}")
    return (f"quantized {q.name}: {len(q.ops)} ops, calibrated on {report.samples} sample(s) "
            f"({report.method}) in {report.calibration_seconds:.2f} s\n" + "\n".join(io))


def quantize_for_compile(graph: Graph, args) -> Graph:
    """For `kiln compile/run --calibration`: the int8 graph to compile (a graph that is
    int8 already is returned as is, with a note)."""
    q, report = _quantize(graph, args)
    if report is None:
        print(f"note: {terminal(graph.name)} is an int8 model already; --calibration is ignored")
    else:
        print(_describe(q, report))
    return q


def check_output(model: str | Path, out: str | Path, force: bool,
                 calibration: list[str] | None = None) -> None:
    """Refuse an output that is the input model or a calibration file (always, even with
    force; through links and hard links too), a directory, or an existing file unless
    force; checked before the calibration runs."""
    from ..arrays_io import files_read
    from ..fsutil import refuse_overwriting_inputs, same_file

    model, out = Path(model), Path(out)
    if same_file(out, model):                   # the model was read: it exists
        raise InputError(f"{out} is the input model; kiln will not write over it, even "
                         f"with --force: choose another output file")
    refuse_overwriting_inputs(out, files_read(calibration), "-o")
    if out.is_dir():
        raise InputError(f"{out} is a directory: give the output .tflite file name")
    if os.path.lexists(out) and not force:
        raise InputError(f"{out} exists: choose another file or pass --force to replace it")
    if not out.parent.is_dir():
        why = "is not a directory" if out.parent.exists() else "does not exist"
        raise InputError(f"cannot write {out}: {out.parent} {why}")


def _write_model(q: Graph, out: Path, description: str) -> None:
    """Write through a temporary file renamed over `out` (tflite_writer.save), so a
    failed or interrupted write leaves `out` as it was, and a link at `out` is
    replaced, never written through."""
    from ..frontend.tflite_writer import save

    save(q, out, description=description)


def cmd_quantize(args) -> int:
    from .. import load
    from . import is_float_graph, load_calibration, quantize_with_report
    from .float_tail import quantize_float_tail

    graph = load(args.model, **model_options(args))
    if not is_float_graph(graph):
        if not graph.description.startswith("ONNX"):
            raise InputError(f"{args.model} computes in int8 already; nothing to quantize")
        # A QDQ .onnx carries its quantization: written as the int8 .tflite it describes.
        check_output(args.model, args.output, getattr(args, "force", False))
        _write_model(graph, Path(args.output), f"kiln: {graph.name} (QDQ ONNX, sha256 "
                                               f"{graph.sha256[:16]}) as int8 TFLite")
        if args.calibration:
            print("note: the model is quantized (QDQ) already; --calibration is ignored")
        print(f"wrote {args.output}")
        return 0
    tail = quantize_float_tail(graph)
    if tail is not None:
        # An int8 model with a float LOG_SOFTMAX after its DEQUANTIZE: moved into int8
        # with TFLite's fixed quantization, no calibration (quantize/float_tail.py).
        check_output(args.model, args.output, getattr(args, "force", False))
        _write_model(tail, Path(args.output), f"kiln: {graph.name} (sha256 "
                                              f"{graph.sha256[:16]}) with its float "
                                              "LOG_SOFTMAX in int8")
        if args.calibration:
            print("note: only the float LOG_SOFTMAX tail was quantized (a fixed output "
                  "quantization); --calibration is ignored")
        print(f"wrote {args.output}")
        return 0
    if not args.calibration:
        raise InputError(f"{args.model} computes in float: give calibration samples with "
                         "--calibration X.npy (or a directory of .npy samples)")
    data = load_calibration(graph, _paths(args.calibration))
    options = _options(args)
    # Every input is read and checked; refuse the output before the slow part.
    check_output(args.model, args.output, getattr(args, "force", False),
                 _paths(args.calibration))
    q, report = quantize_with_report(graph, data, **options)
    kind = "16x8" if options["activations"] == "int16" else "int8"
    _write_model(q, Path(args.output), f"kiln {kind} quantization of {graph.name} "
                                       f"(sha256 {graph.sha256[:16]}, {report.method}, "
                                       f"{report.samples} samples)")
    print(_describe(q, report))
    print(f"wrote {args.output}")
    return 0
