#!/usr/bin/env python3
"""Instructions per MAC of every depthwise layer, before and after the blocked variants.

    python benchmarks/depthwise.py [--board mps2-an386] [--json OUT.json]

For KWS and VWW (MLPerf Tiny) and TFLM's micro_speech model, each compiled for the board
(QEMU, -icount: instructions, not cycles) twice: "before" with every depthwise layer on
the kernel kiln chose before dwconv_3x3_w8.c and the one-input-channel gemm existed (the
int16-packed 3x3 kernel where it applies, else the channel-blocked one, else the plain
kernel; forced through tuning records), "after" with today's defaults. Printed per
depthwise layer: output shape, kernel, MACs, instructions and instructions per MAC; per
model the whole inference (standalone firmware, one fixed-seed input, checked against
tflite-micro) and its flash (text + data).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import kiln.compiler as kc
from kiln.compiler.codegen.lowering import Target
from kiln.compiler.compile import target_for
from kiln.compiler.codegen.ops.conv import candidates
from kiln.compiler.tune import workload_key
from kiln.compiler.tune.workloads import layer_shapes
from kiln.project_gen import create_project, get_board

from _common import REPO, check_exact, models_root

MODELS = {"KWS": "mlperf_tiny/kws_ref_model.tflite", "VWW": "mlperf_tiny/vww_96_int8.tflite",
          "micro_speech": "external/tfm_micro_speech_quantized.tflite"}
# The variants kiln picked for a depthwise layer before, in order of preference.
OLD_DEFAULTS = ({"variant": "3x3", "ch_block": 4}, {"variant": "channels", "ch_block": 4},
                {"variant": "generic"})


def old_records(graph, board: str, target: Target, out: Path) -> Path:
    """A tuning records file that puts every depthwise layer on its former default."""
    entries = []
    for _, (op, shape) in layer_shapes(graph, target).items():
        if op != "DEPTHWISE_CONV_2D":
            continue
        options = candidates(op, shape, target)
        knobs = next(k for k in OLD_DEFAULTS if k in options)
        entries.append({"workload": workload_key(op, shape), "board": board, "knobs": knobs,
                        "status": "ok", "cycles": {"median": 1, "min": 1, "max": 1}})
    out.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return out


def measure(path: Path, board: str, records: Path | None, tmp: Path) -> dict:
    tmp.mkdir(parents=True)
    cmd = [str(Path(sys.executable).parent / "kiln"), "profile", str(path), "--board", board,
           "--json", str(tmp / "profile.json")]
    if records is not None:
        cmd += ["--tuning-records", str(records)]
    subprocess.run(cmd, check=True, capture_output=True, cwd=REPO)
    prof = json.loads((tmp / "profile.json").read_text())
    art = kc.compile(kc.load(path.read_bytes()), board=board,
                     tuning_records=str(records) if records else None)
    layers = [{"index": l["index"], "shape": l["output_shape"], "kernel": l["kernel"],
               "macs": l["macs"], "instructions": l["cycles"],
               "per_mac": l["cycles"] / l["macs"] if l["macs"] else None}
              for l in prof["layers"] if l["op"] == "DEPTHWISE_CONV_2D"]
    project = create_project(art, board=board, out_dir=tmp / "project")
    size = project.build()
    result = project.run()
    check = check_exact(path, project.sample_inputs()[0], result.outputs)
    return {"layers": layers, "instructions": result.instructions, "flash": size.flash.used,
            "arena": size.arena, "check": check}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="mps2-an386")
    parser.add_argument("--json", metavar="OUT.json", help="also write the figures as JSON")
    args = parser.parse_args()
    board = get_board(args.board)
    if board.runs_on != "qemu":
        print(f"{board.name} does not run under QEMU here", file=sys.stderr)
        return 2
    target = target_for(board.name)
    out = {}
    with tempfile.TemporaryDirectory(prefix="kiln-dw-") as tmp:
        for name, rel in MODELS.items():
            path = models_root() / rel
            if not path.exists():
                print(f"{name}: missing {path}")
                continue
            graph = kc.compile(kc.load(path.read_bytes()), board=board.name).graph
            records = old_records(graph, board.name, target, Path(tmp) / f"{name}.jsonl")
            before = measure(path, board.name, records, Path(tmp) / f"{name}-before")
            after = measure(path, board.name, None, Path(tmp) / f"{name}-after")
            out[name] = {"before": before, "after": after}
            print(f"\n{name} on {board.name}: depthwise layers, instructions per MAC "
                  "(QEMU -icount)")
            print(f"{'layer':>5}  {'output':<16}{'MACs':>9}  {'before':<32}{'instr/MAC':>9}"
                  f"  {'after':<32}{'instr/MAC':>9}")
            for b, a in zip(before["layers"], after["layers"]):
                print(f"{a['index']:>5}  {'x'.join(map(str, a['shape'][1:])):<16}{a['macs']:>9,}"
                      f"  {b['kernel']:<32}{b['per_mac']:>9.2f}  {a['kernel']:<32}"
                      f"{a['per_mac']:>9.2f}")
            print(f"whole model: {before['instructions']:,} -> {after['instructions']:,} "
                  f"instructions ({after['instructions'] / before['instructions']:.3f}x); "
                  f"flash {before['flash']:,} -> {after['flash']:,} B; arena "
                  f"{before['arena']:,} -> {after['arena']:,} B; "
                  f"{before['check']} / {after['check']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0 if all(r[k]["check"] != "DIFFERS" for r in out.values() for k in r) else 1


if __name__ == "__main__":
    sys.exit(main())
