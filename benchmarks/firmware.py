#!/usr/bin/env python3
"""Firmware figures per model: flash, RAM and instructions per inference on a QEMU board.

    python benchmarks/firmware.py [--board mps2-an386] [--models DIR] [--json OUT.json]

Each MLPerf Tiny int8 model (from ../shared/models, or $KILN_MODELS) becomes a
standalone firmware project (one fixed-seed random input), is built with
arm-none-eabi-gcc -O2 and run under QEMU with -icount shift=6. Printed per model:
flash split into code (code, rodata, vectors), weights (the .kiln_weights
section) and the baked input; RAM split into the arena, other
statics and the measured peak stack (painted before the run); and instructions
per inference (SysTick ticks converted; one warm-up run first), next to
TFLM + CMSIS-NN on the same QEMU machine where ANCHORS.md has the figure.
Outputs are checked against tflite-micro when it is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from kiln.project_gen import create_project, get_board

from _common import TFLM_CMSIS_NN, check_exact

REPO = Path(__file__).resolve().parents[1]
MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="mps2-an386")
    parser.add_argument("--models", default=os.environ.get("KILN_MODELS",
                                                          str(REPO.parent / "shared" / "models")))
    parser.add_argument("--json", metavar="OUT.json", help="also write the figures as JSON")
    args = parser.parse_args()
    board = get_board(args.board)
    if board.runs_on != "qemu":
        print(f"{board.name} does not run under QEMU here", file=sys.stderr)
        return 2
    root = Path(args.models) / "mlperf_tiny"
    anchors = TFLM_CMSIS_NN.get(board.name, {})

    rows = []
    print(f"kiln standalone firmware on {board.name} (QEMU -icount shift=6, -O2), bytes")
    head = (f"{'model':<24}{'flash':>9}{'code':>8}{'weights':>9}{'input':>7}{'RAM':>9}"
            f"{'arena':>8}{'static':>8}{'stack':>7}{'instructions':>14}{'TFLM+CMSIS-NN':>15}{'ratio':>7}  check")
    print(head)
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as tmp:
        for name in MODELS:
            path = root / f"{name}.tflite"
            if not path.exists():
                print(f"{name:<24}missing: {path}")
                continue
            project = create_project(path, board=board, out_dir=Path(tmp) / name)
            size = project.build()
            result = project.run()
            anchor = anchors.get(name)
            row = {
                "model": name, "board": board.name,
                "flash": size.flash.used, "code": size.code, "weights": size.weights,
                "input": size.inputs,
                "ram": size.ram.used - size.stack_reserved + (result.stack_bytes or 0),
                "arena": size.arena, "static": size.static_ram - size.arena,
                "stack": result.stack_bytes, "instructions": result.instructions,
                "tflm_cmsis_nn": anchor, "check": check_exact(path, project.sample_inputs()[0], result.outputs),
            }
            rows.append(row)
            ratio = f"{row['instructions'] / anchor:.2f}x" if anchor else "-"
            print(f"{name:<24}{row['flash']:>9,}{row['code']:>8,}{row['weights']:>9,}"
                  f"{row['input']:>7,}{row['ram']:>9,}{row['arena']:>8,}{row['static']:>8,}{row['stack']:>7,}"
                  f"{row['instructions']:>14,}{anchor or 0:>15,}{ratio:>7}  {row['check']}")
    print("RAM = arena + other statics + measured peak stack; instructions per inference are "
          "instructions (QEMU -icount), not cycles")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["check"] != "DIFFERS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
