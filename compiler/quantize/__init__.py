"""Post-training quantization: float or hybrid graph → int8 graph (or 16x8: int16
activations, int8 weights, with activations="int16"; int16.py), in numpy.

    from kiln.compiler import load, quantize
    q = quantize(load("model_float.tflite"), calibration=x_calib)   # x_calib: (N, *input_shape)

Stages (one module each): `data` (calibration input forms and their checks) →
`float_eval` (vectorised float inference) → `calibrate` (ranges: min/max, percentile,
MSE) → `rewrite` (TFLite's int8 scheme). `kiln.compiler.frontend.tflite_writer` writes
the result as a .tflite; `cli` holds `kiln quantize` and `kiln compile --calibration`.
"""

from __future__ import annotations
from dataclasses import dataclass, field, fields

from ..errors import InputError
from ..frontend import as_graph
from ..ir import Graph
from .calibrate import METHODS, Calibration, collect
from .data import calibration_arrays, load_calibration
from .float_eval import FloatModel
from . import int16
from .rewrite import RewriteOptions, Rewriter, is_float_graph, mean_depths, prepare


@dataclass
class QuantizeOptions:
    """How to quantize. Defaults follow the TFLite converter."""

    method: str = "minmax"          # activation ranges: minmax | percentile | mse
    percentile: float = 99.99       # for method="percentile"
    per_tensor: dict = field(default_factory=dict)  # tensor name or id → method, overrides
    fc_per_channel: bool = True     # FULLY_CONNECTED weights per output channel
    bias_correction: bool = False   # subtract the mean error of rounded weights from biases
    io: str = "int8"                # int8: int8 model I/O; float: QUANTIZE/DEQUANTIZE at the edges
    activations: str = "int8"       # int16: 16x8 (int16 activations, int8 weights; int16.py),
                                    # model I/O int16 unless io="float"
    batch_size: int = 64            # samples per float inference call (memory bound)
    max_samples: int | None = None  # use at most this many calibration samples

    def check(self) -> None:
        # Each name says the CLI option too: these messages reach both audiences.
        for name, m in [("method (--calibration-method)", self.method)] + [
                (f"tensor {k!r} (--tensor-method)", v) for k, v in self.per_tensor.items()]:
            if m not in METHODS:
                raise InputError(f"{name} {m!r} is not a calibration method ({', '.join(METHODS)})")
        if not 50.0 < self.percentile <= 100.0:
            raise InputError(f"percentile (--percentile) {self.percentile} must be in (50, 100]")
        if self.activations not in ("int8", "int16"):
            raise InputError(f"activations (--activations) {self.activations!r} must be "
                             "'int8' or 'int16'")
        if self.io not in ("int8", "float"):
            raise InputError(f"io {self.io!r} must be 'int8' or 'float'")
        if self.batch_size < 1 or (self.max_samples is not None and self.max_samples < 1):
            raise InputError("batch_size and max_samples (--max-samples) must be at least 1")


@dataclass
class QuantizeReport:
    samples: int
    calibration_seconds: float
    method: str


def quantize(graph: Graph, calibration, **options) -> Graph:
    """Float or hybrid graph → int8 graph calibrated on `calibration`.

    `calibration`: an (N, *input_shape) array, one such array per model input, an iterable
    of samples, or a path (.npy or directory of .npy); see `kiln.compiler.quantize.data`.
    `graph` may also be a .tflite path. Options: the fields of QuantizeOptions. A graph
    that computes in int8 already is returned unchanged. Raises InputError (calibration data, options) or ModelError.
    """
    graph, _ = quantize_with_report(graph, calibration, **options)
    return graph


def quantize_with_report(graph: Graph, calibration, **options) -> tuple[Graph, QuantizeReport | None]:
    known = {f.name for f in fields(QuantizeOptions)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputError(f"unknown quantize option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    opts = QuantizeOptions(**options)
    opts.check()
    graph = as_graph(graph)
    if not is_float_graph(graph):
        return graph, None
    g = prepare(graph)
    if opts.activations == "int16":
        int16.check_ops(g)
    data = calibration_arrays(g, calibration)
    if opts.max_samples is not None:
        data = [x[:opts.max_samples] for x in data]
    model = FloatModel(g)
    histograms = opts.method != "minmax" or any(m != "minmax" for m in opts.per_tensor.values())
    cal = collect(model, data, histograms=histograms,
                  mean_depths=mean_depths(g) if opts.bias_correction else None,
                  batch=opts.batch_size)
    rw = RewriteOptions(method=opts.method, percentile=opts.percentile,
                        per_tensor=dict(opts.per_tensor), fc_per_channel=opts.fc_per_channel,
                        bias_correction=opts.bias_correction, io=opts.io,
                        activations=opts.activations)
    q = Rewriter(g, cal, rw).run()
    q.name = graph.name
    label = opts.method + (", int16 activations" if opts.activations == "int16" else "") + \
        (", bias correction" if opts.bias_correction else "") + \
        (f", {len(opts.per_tensor)} per-tensor override(s)" if opts.per_tensor else "")
    return q, QuantizeReport(samples=cal.samples, calibration_seconds=cal.seconds, method=label)


__all__ = ["quantize", "quantize_with_report", "QuantizeOptions", "QuantizeReport",
           "FloatModel", "Calibration", "calibration_arrays", "load_calibration", "prepare",
           "is_float_graph"]
