"""Compile time against the number of ops: long chains of int8 element-wise layers.

    python benchmarks/compile_scale.py [--sizes 1000 5000 10000] [--op ADD|RELU]

Each model is a chain of `--op` layers over a (1, 8) int8 tensor, built in memory with
tests/tflite_builder.py and compiled for the host board (no C is built). The table gives
wall and CPU seconds of kiln.compiler.compile and the CPU time per op: flat when compile
time is linear in the ops (placement used to be quadratic: 10,000 ops took over 300 s).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, table

sys.path.insert(0, str(REPO / "tests"))
from tflite_builder import chain_model  # noqa: E402

from kiln.compiler import compile  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000])
    ap.add_argument("--op", default="ADD", choices=["ADD", "RELU"])
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = Path(tmp) / f"chain{n}.tflite"
            path.write_bytes(chain_model(n, args.op))
            wall, cpu = time.perf_counter(), time.process_time()
            art = compile(str(path), board="host")
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            rows.append([f"{n:,}", f"{wall:.2f}", f"{cpu:.2f}", f"{cpu / n * 1e6:.0f}",
                         f"{art.report['arena_bytes']:,}"])
    print(f"compile time of {args.op} chains (host board, balanced):")
    print(table(rows, ["ops", "wall s", "CPU s", "CPU us/op", "arena B"]))


if __name__ == "__main__":
    main()
