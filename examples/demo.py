#!/usr/bin/env python3
"""kiln's demo: the bundled digits CNN as bare-metal firmware on QEMU's Cortex-M4F board.

    python examples/demo.py [--board mps2-an386] [--samples 10] [--out build/demo]

Compiles examples/digits/digits_int8.tflite (made by make_digits_model.py from
scikit-learn's digits; remade if missing), generates a standalone firmware
project with the first test digits baked in, builds it with arm-none-eabi-gcc,
runs it on QEMU and prints each prediction against its label, then the
firmware's flash, RAM and instructions per inference.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from kiln.compiler import KilnError, compile, load
from kiln.project_gen import create_project

HERE = Path(__file__).resolve().parent
DIGITS = HERE / "digits"
MODEL = DIGITS / "digits_int8.tflite"


def digit_art(image: np.ndarray) -> list[str]:
    """An int8 8x8 digit (zero point -128) as 8 rows of shading."""
    shades = " .:-=+*#"
    levels = ((image.reshape(8, 8).astype(int) + 128) * len(shades)) // 256
    return ["".join(shades[v] * 2 for v in row) for row in levels]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="mps2-an386")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--out", default="build/demo", help="the firmware project directory")
    args = parser.parse_args()

    if not MODEL.exists():
        print("making the example model (numpy training, about 20 s)...")
        subprocess.run([sys.executable, str(HERE / "make_digits_model.py")], check=True)
    x = np.load(DIGITS / "digits_test_x.npy")[:args.samples]
    y = np.load(DIGITS / "digits_test_y.npy")[:args.samples]

    start = time.monotonic()
    art = compile(load(MODEL), board=args.board)
    project = create_project(art, board=args.board, out_dir=args.out, inputs=[x], force=True,
                             inputs_origin=f"first {len(x)} test digits")
    size = project.build()
    result = project.run()
    elapsed = time.monotonic() - start

    predictions = [int(np.argmax(out[0])) for out in result.samples]
    print(f"{MODEL.name} on {args.board} (QEMU {project.board.qemu.machine}), "
          f"project in {project.path}\n")
    for row in range(0, len(x), 5):
        chunk = range(row, min(row + 5, len(x)))
        arts = [digit_art(x[i]) for i in chunk]
        for line in range(8):
            print("   ".join(a[line] for a in arts))
        print("   ".join(f"{'label ' + str(y[i]):<8}{'pred ' + str(predictions[i]):>8}"
                         for i in chunk))
        print("   ".join(f"{'ok' if predictions[i] == y[i] else 'MISS':^16}" for i in chunk))
        print()
    hits = sum(int(p == t) for p, t in zip(predictions, y))
    print(f"{hits}/{len(y)} correct")
    for line in size.lines():
        print(line)
    print(f"{result.instructions:,} instructions per inference (QEMU -icount; "
          f"{result.ticks[0]:,} SysTick ticks), peak stack {result.stack_bytes:,} B")
    print(f"compile + generate + build + run: {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KilnError as e:
        print(f"demo: {e}", file=sys.stderr)
        sys.exit(2)
