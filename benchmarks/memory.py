"""Arena size per MLPerf Tiny model: kiln with and without overlaps vs the bound vs TFLM.

    python benchmarks/memory.py [--qemu]

kiln's arena holds every activation and kernel scratch buffer. "speed" plans every buffer
apart (layer by layer) and cannot go below the bound: the largest set of tensors and
scratch alive at once. "balanced" (the default) and "memory" let layers write over the
input they read last (kiln.compiler.codegen.ops.inplace): balanced only where that lowers
the peak, memory wherever it can. The M4 column is the balanced arena for mps2-an386 (its
SIMD kernels need more scratch). TFLM's figures come from the tflite-micro interpreter's
recording allocator. With --qemu, the instruction count of the balanced build on QEMU
mps2-an386 is compared with the speed build (needs arm-none-eabi-gcc and QEMU).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
from _common import MLPERF, mlperf_model, table, tflm_arena

from kiln.compiler import compile, load


def _instructions(art) -> int:
    from kiln.project_gen import create_project

    x = [np.random.default_rng(0).integers(-128, 128, size=i["shape"]).astype(np.int8)
         for i in art.report["inputs"]]
    p = create_project(art, board="mps2-an386", out_dir=tempfile.mkdtemp(prefix="kiln-mem-"),
                       mode="standalone")
    p.build()
    return p.run(*x).instructions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--qemu", action="store_true",
                        help="also count instructions on QEMU mps2-an386 (speed vs balanced)")
    args = parser.parse_args()
    rows = []
    for short, stem in MLPERF.items():
        path = mlperf_model(stem)
        g = load(path)
        start = time.perf_counter()
        arts = {opt: compile(g, board="host", optimize=opt)
                for opt in ("speed", "balanced", "memory")}
        elapsed = (time.perf_counter() - start) / 3
        m4 = compile(g, board="mps2-an386", optimize="balanced").report["arena_bytes"]
        r, b = arts["speed"].report, arts["balanced"].report
        # The speed build's bound: with ADD's tables in flash, as TFLM's kernels need
        # none; the balanced build's run-time tables are scratch it places only where
        # the arena keeps its size, and would raise its own bound (ResNet-8 +880 B).
        bound = r["arena_bound_without_overlaps_bytes"]
        tflm_total, tflm_head = tflm_arena(path)
        peak = b["peak_layer"]
        row = [short, f"{r['arena_bytes']:,}", f"{bound:,}", f"{b['arena_bytes']:,}",
               f"{100.0 * (b['arena_bytes'] - bound) / bound:+.1f}%",
               f"{arts['memory'].report['arena_bytes']:,}", f"{m4:,}",
               f"{len(b['overlaps'])}", f"{peak} {b['ops'][peak]['type'] if peak >= 0 else ''}",
               f"{tflm_total:,}", f"{tflm_head:,}", f"{elapsed:.2f}"]
        if args.qemu:
            speed_i = _instructions(compile(g, board="mps2-an386", optimize="speed"))
            bal_i = _instructions(compile(g, board="mps2-an386", optimize="balanced"))
            row += [f"{speed_i:,}", f"{bal_i:,} ({100.0 * (bal_i - speed_i) / speed_i:+.2f}%)"]
        rows.append(row)
    header = ["model", "speed arena B", "bound B", "balanced B", "vs bound", "memory B",
              "M4 balanced B", "overlaps", "peak layer", "TFLM arena B", "TFLM activations B",
              "compile s"]
    if args.qemu:
        header += ["speed instr (QEMU)", "balanced instr"]
    print(table(rows, header))


if __name__ == "__main__":
    main()
