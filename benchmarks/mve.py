#!/usr/bin/env python3
"""Helium (MVE) vs DSP kernels on the Cortex-M55: instructions per inference of the MLPerf
Tiny int8 models on QEMU mps3-an547.

    python benchmarks/mve.py [--models KWS,VWW,IC,AD] [--json OUT.json]

Per model, two standalone firmwares for mps3-an547 (-icount, one warm-up run, the same
fixed-seed random input, outputs checked against tflite-micro): kiln's default build,
whose conv-family layers get the MVE variants (crt/kernels/kernels_mve.h), and the
build the board ran before them, every tunable layer forced through tuning records to
its first non-MVE candidate (the DSP kernels, SMLAD). ratio = MVE / DSP; the goal is
at most 0.5 per model. Per layer: `kiln profile MODEL --board mps3-an547` (MVE), with
--tuning-records of dsp_records() for the DSP side.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from kiln.compiler import compile as kiln_compile, load
from kiln.compiler.codegen.ops.conv import candidates
from kiln.compiler.compile import target_for
from kiln.compiler.tune import Records, workload_key
from kiln.compiler.tune.workloads import layer_shapes
from kiln.project_gen import create_project

from _common import MLPERF, check_exact, mlperf_model

BOARD = "mps3-an547"
GOAL = 0.5


def dsp_records(model: bytes, board: str = BOARD) -> Records:
    """Tuning records that put every tunable layer of `model` on its first non-MVE
    candidate on `board`: the kernels it ran before the MVE variants."""
    target = target_for(board)
    graph = kiln_compile(load(model), board=board).graph
    entries = []
    for op, shape in layer_shapes(graph, target).values():
        knobs = next(k for k in candidates(op, shape, target) if k["variant"] != "mve")
        entries.append({"workload": workload_key(op, shape), "board": board, "knobs": knobs,
                        "status": "ok", "cycles": {"median": 1, "min": 1, "max": 1}})
    return Records(entries=entries)


def run(model: Path, out: Path, records: Records | None) -> dict:
    project = create_project(model, board=BOARD, out_dir=out, tuning_records=records)
    result = project.run()
    return {"instructions": result.instructions,
            "exact": check_exact(model, project.sample_inputs()[0], result.outputs),
            "kernels": sorted({o["kernel"] for o in project.manifest["ops"]})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MLPERF), help="KWS,VWW,IC,AD")
    parser.add_argument("--json", metavar="OUT.json")
    args = parser.parse_args()
    results = {}
    print(f"{'model':6} {'DSP':>12} {'MVE':>12} {'MVE/DSP':>8}  outputs")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            path = mlperf_model(MLPERF[name])
            dsp = run(path, Path(tmp) / f"{name}-dsp", dsp_records(path.read_bytes()))
            mve = run(path, Path(tmp) / f"{name}-mve", None)
            ratio = mve["instructions"] / dsp["instructions"]
            results[name] = {"dsp": dsp, "mve": mve, "ratio": ratio}
            exact = "bit-exact" if dsp["exact"] == mve["exact"] == "bit-exact" else \
                f"DSP {dsp['exact']}, MVE {mve['exact']}"
            print(f"{name:6} {dsp['instructions']:>12,} {mve['instructions']:>12,} "
                  f"{ratio:>8.3f}  {exact}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    worst = max(r["ratio"] for r in results.values())
    print(f"worst MVE/DSP {worst:.3f} (goal <= {GOAL})")
    return 0 if worst <= GOAL and all(
        r["dsp"]["exact"] == r["mve"]["exact"] == "bit-exact" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
