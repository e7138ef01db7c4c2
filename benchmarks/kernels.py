#!/usr/bin/env python3
"""Tuned vs default kernels: instructions per inference of the MLPerf Tiny int8 models.

    python benchmarks/kernels.py [--boards mps2-an385,mps2-an386,mps2-an500] [--records DIR]
                                 [--retune] [--workers 2] [--json OUT.json]

Per board and model: instructions per inference with kiln's default kernel variants and
with the variants the tuning records choose (benchmarks/records/<board>.jsonl), as
standalone firmware on QEMU (-icount shift=6, one warm-up run, a fixed-seed random input,
outputs checked against tflite-micro), next to TFLM with its reference kernels and TFLM +
CMSIS-NN on the same QEMU machine and compiler (ANCHORS.md); ratio = tuned / TFLM +
CMSIS-NN. Tuning wall time is what the records say `kiln tune` took for that model (its
sessions' elapsed time; workloads another model had measured already cost nothing), or
with --retune, the time of a fresh `kiln tune` into a temporary file.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from kiln.compiler import load
from kiln.compiler.tune import Records, TuneOptions, tune
from kiln.project_gen import create_project

from _common import MLPERF, REPO, TFLM_CMSIS_NN, TFLM_REFERENCE, check_exact, mlperf_model

RECORDS = REPO / "benchmarks" / "records"


def instructions(model: Path, board: str, records: Path | None, out: Path) -> tuple[int, str]:
    project = create_project(model, board=board, out_dir=out, tuning_records=records)
    result = project.run()
    return result.instructions, check_exact(model, project.sample_inputs()[0], result.outputs)


def wall_time_from_records(records: Records, stem: str, board: str) -> float | None:
    sessions: dict[str, float] = {}
    for e in records.entries:
        if e.get("model") == stem and e["board"] == board and "session" in e:
            sessions[e["session"]] = max(sessions.get(e["session"], 0.0), e.get("elapsed_s", 0.0))
    return sum(sessions.values()) if sessions else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="mps2-an385,mps2-an386,mps2-an500")
    parser.add_argument("--records", default=str(RECORDS), metavar="DIR",
                        help="folder of <board>.jsonl tuning records")
    parser.add_argument("--models", default=",".join(MLPERF), help="KWS,VWW,IC,AD")
    parser.add_argument("--retune", action="store_true",
                        help="time a fresh `kiln tune` of each model (into a temporary file)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", metavar="OUT.json")
    args = parser.parse_args()

    rows = []
    header = (f"{'board':<11} {'model':<5} {'default':>12} {'tuned':>12} {'TFLM ref':>12} "
              f"{'TFLM+CMSIS':>12} {'tuned/CMSIS':>11} {'tuning':>8}  check")
    print("instructions per inference, QEMU -icount shift=6 (standalone firmware, -O2)")
    print(header)
    for board in args.boards.split(","):
        records_path = Path(args.records) / f"{board}.jsonl"
        if not records_path.exists():
            print(f"{board}: no records at {records_path} (kiln tune MODEL --board {board} "
                  f"-o {records_path})")
            continue
        records = Records.load(records_path)
        for short in args.models.split(","):
            stem = MLPERF[short]
            model = mlperf_model(stem)
            with tempfile.TemporaryDirectory(prefix="kiln-kernels-") as tmp:
                default, check_d = instructions(model, board, None, Path(tmp) / "default")
                tuned, check_t = instructions(model, board, records_path, Path(tmp) / "tuned")
                if args.retune:
                    started = time.monotonic()
                    tune(load(model), board, Records.load(Path(tmp) / "r.jsonl", missing_ok=True),
                         TuneOptions(workers=args.workers), model_name=stem)
                    wall = time.monotonic() - started
                else:
                    wall = wall_time_from_records(records, stem, board)
            ref = TFLM_REFERENCE.get(board, {}).get(stem)
            cmsis = TFLM_CMSIS_NN.get(board, {}).get(stem)
            check = "bit-exact" if check_d == check_t == "bit-exact" else f"{check_d}/{check_t}"
            rows.append({"board": board, "model": short, "default": default, "tuned": tuned,
                         "tflm_reference": ref, "tflm_cmsis_nn": cmsis,
                         "ratio": round(tuned / cmsis, 4) if cmsis else None,
                         "tuning_wall_s": round(wall, 1) if wall is not None else None,
                         "check": check})
            print(f"{board:<11} {short:<5} {default:>12,} {tuned:>12,} "
                  f"{f'{ref:,}' if ref else '-':>12} {f'{cmsis:,}' if cmsis else '-':>12} "
                  f"{f'{tuned / cmsis:.3f}x' if cmsis else '-':>11} "
                  f"{f'{wall:.0f} s' if wall is not None else '-':>8}  {check}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["check"] == "bit-exact" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
