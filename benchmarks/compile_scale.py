"""Compile time against the number of ops: long chains of int8 element-wise layers.

    python benchmarks/compile_scale.py [--sizes 1000 5000 10000] [--op ADD|RELU|CONV]
        [--optimize speed|balanced|memory]

Each model is a chain of `--op` layers over a (1, 8) int8 tensor, built in memory with
tests/tflite_builder.py and compiled for the host board (no C is built); CONV is a
MobileNet-like chain over 12x12 maps (depthwise 3x3, then a pointwise conv whose width
cycles through 8, 16, 24 channels), where layers may write over their input and the
overlap search has work to do. The table gives wall and CPU seconds of
kiln.compiler.compile and the CPU time per op: flat when compile time is linear in the
ops (placement used to be quadratic: 10,000 ops took over 300 s).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, table

sys.path.insert(0, str(REPO / "tests"))
from tflite_builder import (OpSpec, TensorSpec, bias_spec, build_model, chain_model,  # noqa: E402
                            weight_spec)

import numpy as np  # noqa: E402

from kiln.compiler import compile  # noqa: E402


def conv_chain_model(n: int) -> bytes:
    """n layers alternating depthwise 3x3 (SAME) and pointwise convs over 12x12 maps."""
    rng = np.random.default_rng(0)
    widths = (8, 16, 24)
    ts = [TensorSpec((1, 12, 12, 8), scale=0.05, zero_point=0, name="x")]
    ops = []
    for i in range(n):
        x = len(ts) - 1
        c_in = ts[x].shape[3]
        if i % 2 == 0:
            w = weight_spec((1, 3, 3, c_in), rng, per_channel_axis=3)
            options = {"padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1,
                       "fused_activation_function": "RELU6"}
            op, c_out = "DEPTHWISE_CONV_2D", c_in
        else:
            c_out = widths[(i // 2) % 3]
            w = weight_spec((c_out, 1, 1, c_in), rng, per_channel_axis=0)
            options = {"padding": "VALID", "stride_w": 1, "stride_h": 1,
                       "fused_activation_function": "NONE"}
            op = "CONV_2D"
        ts.append(w)
        ts.append(bias_spec(c_out, rng, 0.05, w.scale))
        ts.append(TensorSpec((1, 12, 12, c_out), scale=0.05, zero_point=0, name=f"a{i}"))
        ops.append(OpSpec(op, [x, len(ts) - 3, len(ts) - 2], [len(ts) - 1], options))
    return build_model(ops, ts, [0], [len(ts) - 1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000])
    ap.add_argument("--op", default="ADD", choices=["ADD", "RELU", "CONV"])
    ap.add_argument("--optimize", default="balanced", choices=["speed", "balanced", "memory"])
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = Path(tmp) / f"chain{n}.tflite"
            path.write_bytes(conv_chain_model(n) if args.op == "CONV" else chain_model(n, args.op))
            wall, cpu = time.perf_counter(), time.process_time()
            art = compile(str(path), board="host", optimize=args.optimize)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            rows.append([f"{n:,}", f"{wall:.2f}", f"{cpu:.2f}", f"{cpu / n * 1e6:.0f}",
                         f"{art.report['arena_bytes']:,}"])
    print(f"compile time of {args.op} chains (host board, {args.optimize}):")
    print(table(rows, ["ops", "wall s", "CPU s", "CPU us/op", "arena B"]))


if __name__ == "__main__":
    main()
