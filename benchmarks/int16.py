#!/usr/bin/env python3
"""16x8 vs int8 quantization of the MLPerf Tiny float models: accuracy and speed.

    python benchmarks/int16.py [--calib N] [--test N] [--qemu BOARD]

For the digits CNN (its own calibration and test sets) and each MLPerf Tiny float model
(inputs synthesised "like the data" by tests/quantize_inputs.py: calibration seed 0,
test seed 1), `kiln quantize` with int8
and with int16 activations (`--activations int16`, 16x8), each compiled for the host and
run on the test inputs:
- SQNR: 10·log10(Σ float² / Σ (float − quantized)²) over all outputs, in dB;
- agreement: share of test samples whose top class is the float model's (classifiers);
- TFLM: whether tflite-micro runs the exported .tflite bit-identically on 4 samples.
With --qemu, each quantized model also runs as standalone firmware on that QEMU board
(default kernels, no tuning records): instructions per inference and weight bytes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import REPO, mlperf_model, models_root, table

sys.path.insert(0, str(REPO / "tests"))
import quantize_inputs  # noqa: E402  (the input synthesisers live with the tests)

from kiln.compiler import compile, load, quantize  # noqa: E402
from kiln.compiler.frontend.tflite_writer import write  # noqa: E402
from kiln.compiler.quantize import FloatModel, prepare  # noqa: E402

MODELS = [  # (label, float model, classifier?)
    ("digits", "digits", True),
    ("KWS", "kws_ref_model_float32", True),
    ("VWW", "vww_96_float", True),
    ("IC ResNet-8", "pretrainedResnet", True),
    ("AD", "ad01_fp32", False),
]


def _to_q(x: np.ndarray, t) -> np.ndarray:
    scale, zp = t.quant.single()
    info = np.iinfo(np.int16 if t.dtype == "int16" else np.int8)
    return np.clip(np.floor(x / np.float32(scale) + 0.5) + zp, info.min, info.max).astype(info.dtype)


def _from_q(q: np.ndarray, t) -> np.ndarray:
    scale, zp = t.quant.single()
    return (q.astype(np.float32) - zp) * np.float32(scale)


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    ref, got = ref.astype(np.float64), got.astype(np.float64)
    return float(10 * np.log10(np.sum(ref ** 2) / max(np.sum((ref - got) ** 2), 1e-30)))


def _tflm_same(model: bytes, xs: list[np.ndarray], outs: list[np.ndarray]) -> str:
    from reference import run_reference

    same = all(np.array_equal(run_reference(model, [x])[0].reshape(y.shape), y)
               for x, y in zip(xs, outs))
    return "bit-exact" if same else "DIFFERS"


def _qemu(q, board: str, folder: Path) -> tuple[int, int]:
    from kiln.project_gen import create_project

    path = folder / "model.tflite"
    path.write_bytes(write(q))
    p = create_project(path, board=board, out_dir=folder / "fw")
    size = p.build()
    return p.run().instructions, size.weights


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calib", type=int, default=128)
    ap.add_argument("--test", type=int, default=64)
    ap.add_argument("--qemu", metavar="BOARD", help="also run each model on this QEMU board")
    args = ap.parse_args()
    rows = []
    for label, stem, classifier in MODELS:
        if stem == "digits":
            d = models_root() / "digits"
            g = load(d / "digits_cnn_float.tflite")
            cal = np.load(d / "digits_calib_x.npy")[:args.calib]
            x = np.load(d / "digits_test_x.npy")[:args.test]
        else:
            g = load(mlperf_model(stem))
            cal = quantize_inputs.inputs(stem, args.calib, seed=0)
            x = quantize_inputs.inputs(stem, args.test, seed=1)
        ref = FloatModel(prepare(g)).run([x])[0].reshape(len(x), -1)
        for acts in ("int8", "int16"):
            q = quantize(g, cal, activations=acts)
            art = compile(q, board="host")
            xq = _to_q(x, q.tensor(q.inputs[0]))
            got = [art.run(xq[i:i + 1])[0] for i in range(len(x))]
            out = _from_q(np.stack(got), q.tensor(q.outputs[0])).reshape(len(x), -1)
            agree = f"{np.mean(out.argmax(1) == ref.argmax(1)):.3f}" if classifier else "-"
            row = [label, "16x8" if acts == "int16" else "int8", f"{_sqnr(ref, out):.1f}", agree,
                   _tflm_same(write(q), [xq[i:i + 1] for i in range(4)], got[:4])]
            if args.qemu:
                with tempfile.TemporaryDirectory() as tmp:
                    instructions, weights = _qemu(q, args.qemu, Path(tmp))
                row += [f"{instructions:,}", f"{weights:,}"]
            rows.append(row)
            print(" ".join(rows[-1]), flush=True, file=sys.stderr)
    header = ["model", "activations", "SQNR dB", "top-1 agree", "TFLM"]
    if args.qemu:
        header += [f"instructions ({args.qemu})", "weights B"]
    print(table(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
