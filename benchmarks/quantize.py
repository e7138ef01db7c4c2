#!/usr/bin/env python3
"""Post-training quantization figures: kiln's int8 vs the float model, and the TF converter's.

    python benchmarks/quantize.py [--calib N] [--test N] [--methods minmax,mse,...]

For the digits CNN (its own calibration and test sets) and each MLPerf Tiny float model
(inputs synthesised "like the data" by tests/quantize_inputs.py: calibration seed 0,
test seed 1), per calibration method: calibration time (float inference + range
choice, the whole quantize() call), then kiln's int8 model compiled for the host and run
on the test inputs, compared with the float model (numpy float reference):
- agreement: share of test samples whose top class is the float model's (classifiers);
- SQNR: 10·log10(Σ float² / Σ (float − int8)²) over all outputs, in dB.
The TF converter's int8 model from shared/models, compiled and run by kiln the same way
(bit-exact with tflite-micro), gives the "TF int8" row. For AD (an autoencoder) only
SQNR is meaningful.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from _common import REPO, models_root, table

sys.path.insert(0, str(REPO / "tests"))
import quantize_inputs  # noqa: E402  (the input synthesisers live with the tests)

from kiln.compiler import compile, load  # noqa: E402
from kiln.compiler.quantize import FloatModel, prepare, quantize_with_report  # noqa: E402

MODELS = [  # (label, float model, TF converter's int8 model, classifier?)
    ("digits", "digits/digits_cnn_float", "digits/digits_cnn_int8", True),
    ("KWS (hybrid)", "mlperf_tiny/kws_ref_model_float32", "mlperf_tiny/kws_ref_model", True),
    ("VWW", "mlperf_tiny/vww_96_float", "mlperf_tiny/vww_96_int8", True),
    ("IC ResNet-8", "mlperf_tiny/pretrainedResnet", "mlperf_tiny/pretrainedResnet_quant", True),
    ("AD", "mlperf_tiny/ad01_fp32", "mlperf_tiny/ad01_int8", False),
]
VARIANTS = {
    "minmax": {"method": "minmax"},
    "minmax+bc": {"method": "minmax", "bias_correction": True},
    "percentile": {"method": "percentile"},
    "mse": {"method": "mse"},
    "mse+bc": {"method": "mse", "bias_correction": True},
}


def run_int8(graph, x: np.ndarray) -> np.ndarray:
    """Compile for the host, run every sample, dequantize the first output."""
    art = compile(graph, board="host")
    t_in, t_out = graph.tensor(graph.inputs[0]), graph.tensor(graph.outputs[0])
    s_in, z_in = t_in.quant.single()
    s_out, z_out = t_out.quant.single()
    xq = np.clip(np.floor(x / np.float32(s_in) + 0.5) + z_in, -128, 127).astype(np.int8)
    out = np.stack([art.run(xq[i:i + 1])[0] for i in range(len(x))])
    return ((out.astype(np.float32) - z_out) * np.float32(s_out)).reshape(len(x), -1)


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    ref, got = ref.astype(np.float64), got.astype(np.float64)
    return float(10 * np.log10(np.sum(ref ** 2) / max(np.sum((ref - got) ** 2), 1e-30)))


def data_for(stem: str, n_calib: int, n_test: int):
    if stem.startswith("digits"):
        d = models_root() / "digits"
        return (np.load(d / "digits_calib_x.npy"), np.load(d / "digits_test_x.npy"),
                np.load(d / "digits_test_y.npy"))
    name = stem.split("/")[-1]
    return quantize_inputs.inputs(name, n_calib, 0), quantize_inputs.inputs(name, n_test, 1), None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calib", type=int, default=200, help="MLPerf calibration samples")
    ap.add_argument("--test", type=int, default=100, help="MLPerf test samples")
    ap.add_argument("--methods", default=",".join(VARIANTS), help="comma-separated variants")
    args = ap.parse_args()
    root = models_root()
    if not root.is_dir():
        sys.exit(f"{root} not found: set KILN_MODELS to the shared/models folder")
    rows = []
    for label, stem, tf_stem, classifier in MODELS:
        path = root / f"{stem}.tflite"
        if not path.exists():
            print(f"skipping {label}: {path} not found", file=sys.stderr)
            continue
        g = load(path)
        calib, x, y = data_for(stem, args.calib, args.test)
        ref = FloatModel(prepare(g)).run_batched([x])[0].reshape(len(x), -1)

        def row(variant: str, out: np.ndarray, seconds: str) -> list[str]:
            agree = f"{(out.argmax(1) == ref.argmax(1)).mean():.1%}" if classifier else "-"
            acc = f"{(out.argmax(1) == y).mean():.2%}" if y is not None else "-"
            return [label, variant, str(len(calib)), str(len(x)), seconds, agree,
                    f"{sqnr_db(ref, out):.1f}", acc]

        if y is not None:
            rows.append([label, "float", "-", str(len(x)), "-", "100.0%", "inf",
                         f"{(ref.argmax(1) == y).mean():.2%}"])
        for variant in args.methods.split(","):
            start = time.perf_counter()
            q, report = quantize_with_report(g, calib, **VARIANTS[variant])
            seconds = time.perf_counter() - start
            rows.append(row(variant, run_int8(q, x), f"{seconds:.2f}"))
        tf_path = root / f"{tf_stem}.tflite"
        if tf_path.exists():
            rows.append(row("TF int8", run_int8(load(tf_path), x), "-"))
        print(f"done {label}", file=sys.stderr)
    print(table(rows, ["model", "int8 by", "calib N", "test N", "calib s", "agree w/ float",
                       "SQNR dB", "accuracy"]))


if __name__ == "__main__":
    main()
