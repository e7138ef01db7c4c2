"""Figures of docs/onnx.md for the ONNX ops of tests/test_onnx_ops_more.py: per model, the
SQNR of kiln's int8 build against onnxruntime's float outputs (kiln's quantizer, calibration
that includes the test samples, as tests/test_onnx.py's `check`), and for the QDQ model
onnxruntime's quantize_static writes in each of four modes (per-tensor/per-channel weights
× int8/uint8 activations), the share of output elements within 1 LSB of onnxruntime
running it and the largest difference ("-" where quantize_static itself fails).

    python benchmarks/onnx_ops_more.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from _common import REPO

sys.path.insert(0, str(REPO / "tests"))

import test_onnx  # noqa: E402
import test_onnx_qdq  # noqa: E402
from test_onnx import check  # noqa: E402
from test_onnx_ops_more import ALONE, CASES, after_weight_layer, qdq_with_prelu  # noqa: E402
from test_onnx_qdq import MODES, compare, qdq_model  # noqa: E402

from kiln.compiler import load  # noqa: E402


def main() -> None:
    modes = [f"{'pc' if pc else 'pt'}-{act}" for pc, act in MODES]
    print(f"| model | SQNR dB | {' | '.join(modes)} |")
    print("|---|---|" + "---|" * len(modes))
    for name in sorted(CASES):
        test_onnx.RNG = np.random.default_rng(41)
        test_onnx_qdq.RNG = np.random.default_rng(42)
        data = CASES[name]()
        g = load(data)
        _, sqnr = check(data, g.tensor(g.inputs[0]).shape[1:])
        cells = []
        for mode in MODES:
            test_onnx_qdq.RNG = np.random.default_rng(42)
            make = qdq_with_prelu if name.startswith("prelu") else qdq_model
            source = data if name.startswith(ALONE) else after_weight_layer(data)
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    within, worst, _ = compare(make(source, *mode, Path(tmp)), tflm=False)
                cells.append(f"{within:.1%} ≤1, max {worst}")
            except Exception:       # onnxruntime's quantizer refuses the model
                cells.append("-")
        print(f"| {name} | {sqnr:.1f} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
