#!/usr/bin/env python3
"""Firmware figures per model: flash, RAM and instructions per inference on a QEMU board.

    python benchmarks/firmware.py [--board mps2-an386] [--models DIR] [--json OUT.json]
                                  [--optimize {balanced,speed}]

Each MLPerf Tiny int8 model (from ../shared/models, or $KILN_MODELS) becomes a
standalone firmware project (one fixed-seed random input), is built with
arm-none-eabi-gcc -O2 and run under QEMU with -icount shift=6. Printed per model:
flash split into code (code, rodata, vectors), weights (the .kiln_weights
section) and the baked input; RAM split into the arena, other
statics and the measured peak stack (painted before the run); and instructions
per inference (SysTick ticks converted; one warm-up run first), next to
TFLM + CMSIS-NN on the same QEMU machine where ANCHORS.md has the figure.
--optimize is kiln's (default balanced; speed widens int8-pair layers to int16 pairs
while the flash allows and keeps every buffer apart) and applies to both the firmware
and the model's share.
Outputs are checked against tflite-micro when it is installed.

Two flash figures: the whole standalone firmware (with its baked sample input, the
UART/reporting harness and the startup code), and the model's own share, what
`kiln compile --board` pulls into any program (code, weights and the C library
functions it calls; benchmarks/flash_breakdown.py), checked against issue 17's flash
goal (weights + at most 16 KB of code). flash_breakdown.py says where the bytes go.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from kiln.compiler.compile import DEFAULT_OPTIMIZE
from kiln.project_gen import create_project, get_board

from _common import FLASH_GOAL, MLPERF, TFLM_CMSIS_NN, check_exact
from flash_breakdown import library_share

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="mps2-an386")
    parser.add_argument("--models", default=os.environ.get("KILN_MODELS",
                                                          str(REPO.parent / "shared" / "models")))
    parser.add_argument("--only", default="KWS,VWW,IC,AD", help="models, e.g. KWS,IC")
    parser.add_argument("--json", metavar="OUT.json", help="also write the figures as JSON")
    parser.add_argument("--optimize", choices=("balanced", "speed"), default=DEFAULT_OPTIMIZE,
                        help=f"kiln compile --optimize (default {DEFAULT_OPTIMIZE})")
    args = parser.parse_args()
    board = get_board(args.board)
    if board.runs_on != "qemu":
        print(f"{board.name} does not run under QEMU here", file=sys.stderr)
        return 2
    root = Path(args.models) / "mlperf_tiny"
    anchors = TFLM_CMSIS_NN.get(board.name, {})

    rows = []
    print(f"kiln standalone firmware on {board.name} (QEMU -icount shift=6, -O2, "
          f"--optimize {args.optimize}), bytes")
    head = (f"{'model':<24}{'flash':>9}{'code':>8}{'weights':>9}{'input':>7}{'model':>9}"
            f"{'goal':>9}{'RAM':>9}"
            f"{'arena':>8}{'static':>8}{'stack':>7}{'instructions':>14}{'TFLM+CMSIS-NN':>15}{'ratio':>7}  check")
    print(head)
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as tmp:
        goals = {MLPERF[k]: FLASH_GOAL[k] for k in MLPERF}
        for name in [MLPERF[k] for k in args.only.split(",")]:
            path = root / f"{name}.tflite"
            if not path.exists():
                print(f"{name:<24}missing: {path}")
                continue
            project = create_project(path, board=board, out_dir=Path(tmp) / name,
                                     optimize=args.optimize)
            size = project.build()
            result = project.run()
            anchor = anchors.get(name)
            share = library_share(path, board.name, Path(tmp) / f"{name}-lib", board.cpu_flags,
                                  optimize=args.optimize)
            row = {
                "model": name, "board": board.name, "optimize": args.optimize,
                "flash": size.flash.used, "code": size.code, "weights": size.weights,
                "input": size.inputs, "model_flash": share["total"],
                "model_weights": share.get("weights", 0), "flash_goal": goals[name],
                "ram": size.ram.used - size.stack_reserved + (result.stack_bytes or 0),
                "arena": size.arena, "static": size.static_ram - size.arena,
                "stack": result.stack_bytes, "instructions": result.instructions,
                "tflm_cmsis_nn": anchor, "check": check_exact(path, project.sample_inputs()[0], result.outputs),
            }
            rows.append(row)
            ratio = f"{row['instructions'] / anchor:.2f}x" if anchor else "-"
            print(f"{name:<24}{row['flash']:>9,}{row['code']:>8,}{row['weights']:>9,}"
                  f"{row['input']:>7,}{row['model_flash']:>9,}{row['flash_goal']:>9,}{row['ram']:>9,}{row['arena']:>8,}{row['static']:>8,}{row['stack']:>7,}"
                  f"{row['instructions']:>14,}{anchor or 0:>15,}{ratio:>7}  {row['check']}")
    print("flash = the whole firmware (code + weights + baked input); model = what the model "
          "alone pulls into a program (kiln compile --board as a library), against goal = "
          "issue 17's flash goal (weights + at most 16 KB of code)")
    print("RAM = arena + other statics + measured peak stack; instructions per inference are "
          "instructions (QEMU -icount), not cycles")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["check"] != "DIFFERS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
