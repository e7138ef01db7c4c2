"""`kiln validate` figures: time for 1,000 digits samples on QEMU, and per-layer SQNR vs
float on the four MLPerf Tiny models (which layer loses most).

    .venv/bin/python benchmarks/validate.py [--samples 1000] [--board mps2-an386]
                                            [--per-layer-samples 8] [--layers] [--json F]

1. The digits test set (397 samples) tiled to --samples, validated on QEMU with labels, as
   a user runs it (`kiln validate` in a child process, after one warm-up run that builds
   the cached project), then where the time goes: the target's RPC loop (WRITE, RUN with
   its ACK, READ per sample over QEMU's stdio pipe), the host reference (cffi) and the
   float model (numpy, batched).
2. Each MLPerf int8 model against its float model (`--float`), layer by layer on the host
   board's firmware (bit-exact with QEMU's; QEMU would spend minutes reading VWW's 27 KB
   tensors over a 14 KB/s UART), on fixed-seed random int8 inputs (there is no MLPerf
   data here: the figures rank layers, they are not accuracy). SQNR of a layer's output
   vs the float model's tensor of the same name, and the layer's own SQNR (the noise it
   adds to its input's, noise-to-signal ratios adding): what its quantization costs.
Wall times depend on the machine's load; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, mlperf_model, models_root  # noqa: E402

FLOAT_TWINS = {"kws_ref_model": "kws_ref_model_float32", "vww_96_int8": "vww_96_float",
               "pretrainedResnet_quant": "pretrainedResnet", "ad01_int8": "ad01_fp32"}
NAMES = {"kws_ref_model": "KWS", "vww_96_int8": "VWW", "pretrainedResnet_quant": "ResNet-8",
         "ad01_int8": "AD"}
KILN = [sys.executable, "-m", "kiln.compiler.cli"]


def _kiln(*argv: object) -> tuple[int, float, str]:
    t0 = time.monotonic()
    proc = subprocess.run([*KILN, *map(str, argv)], capture_output=True, text=True, cwd=REPO)
    return proc.returncode, time.monotonic() - t0, proc.stdout + proc.stderr


def digits_timing(samples: int, board: str, work: Path) -> dict:
    digits = models_root() / "digits"
    model = digits / "digits_cnn_int8.tflite"
    x, y = np.load(digits / "digits_test_x.npy"), np.load(digits / "digits_test_y.npy")
    reps = -(-samples // len(x))
    np.save(work / "x.npy", np.concatenate([x] * reps)[:samples])
    np.save(work / "y.npy", np.concatenate([y] * reps)[:samples])
    argv = [model, "--board", board, "--data", work / "x.npy", "--labels", work / "y.npy",
            "--json", work / "digits.json"]
    _kiln("validate", *argv, "--samples", 2)                  # builds the cached project
    code, wall, out = _kiln("validate", *argv)
    if code != 0:
        sys.exit(f"kiln validate failed ({code}):\n{out}")
    doc = json.loads((work / "digits.json").read_text())
    return {"samples": samples, "board": board, "wall_s": wall,
            "accuracy": doc["accuracy"]["target"],
            "exact_rate": doc["outputs"][0]["vs_host"]["exact_rate"],
            "instructions": doc["per_inference"]["mean"], **_breakdown(model, board, work)}


def _breakdown(model: Path, board: str, work: Path) -> dict:
    """Seconds of each part of a validation of the same samples, measured apart."""
    from kiln.compiler import compile, load
    from kiln.compiler.inputs import split_samples
    from kiln.compiler.quantize.float_eval import FloatModel
    from kiln.compiler.quantize.float_twin import float_twin
    from kiln.project_gen.rpc_cli import connect, host_driven_project

    project = host_driven_project(model, board)
    x = np.load(work / "x.npy")
    samples = split_samples([x], project.input_specs)
    host = compile(load(model), board="host")
    t0 = time.monotonic()
    with connect(project, argparse.Namespace()) as session:
        t1 = time.monotonic()
        for s in samples:
            session.run(s)
        t2 = time.monotonic()
        requests = session.client.stats.requests
    for s in samples:
        host.run(*s)
    t3 = time.monotonic()
    FloatModel(float_twin(load(model))).run_batched([x.reshape(len(x), 1, 8, 8, 1)])
    t4 = time.monotonic()
    return {"connect_s": t1 - t0, "target_s": t2 - t1, "host_s": t3 - t2, "float_s": t4 - t3,
            "rpc_requests": requests}


def per_layer(stem: str, n: int, work: Path) -> dict:
    model, float_model = mlperf_model(stem), mlperf_model(FLOAT_TWINS[stem])
    out = work / f"{stem}.json"
    code, wall, text = _kiln("validate", model, "--board", "host", "--float", float_model,
                             "--samples", n, "--per-layer", n, "--json", out)
    if code not in (0, 1):
        sys.exit(f"kiln validate {stem} failed ({code}):\n{text}")
    doc = json.loads(out.read_text())
    return {"model": NAMES[stem], "wall_s": wall, "exact": doc["matches_host_reference"],
            "output_sqnr_db": doc["outputs"][0]["vs_float"]["sqnr_db"],
            "layers": doc["per_layer"]["layers"], "ranked": doc["per_layer"]["ranked_by_layer_sqnr"]}


def _db(v: float | None) -> str:
    return "exact" if v is None else f"{v:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--board", default="mps2-an386")
    ap.add_argument("--per-layer-samples", type=int, default=8)
    ap.add_argument("--layers", action="store_true", help="print every layer's row")
    ap.add_argument("--json", metavar="F")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        d = digits_timing(args.samples, args.board, work)
        print(f"digits, {d['samples']} samples on {d['board']}: kiln validate {d['wall_s']:.1f} s "
              f"wall ({d['exact_rate']:.2%} exact vs host, top-1 {d['accuracy']:.2%}, "
              f"{d['instructions']:,.0f} instructions/inference)")
        print(f"  apart: connect {d['connect_s']:.2f} s, target RPC loop {d['target_s']:.2f} s "
              f"({1000 * d['target_s'] / d['samples']:.2f} ms/sample, {d['rpc_requests']} "
              f"requests), host reference {d['host_s']:.2f} s, float model {d['float_s']:.2f} s")
        rows = [per_layer(stem, args.per_layer_samples, work) for stem in FLOAT_TWINS]
    print(f"\nper-layer SQNR vs float, {args.per_layer_samples} random samples, host board:")
    print(f"{'model':<9} {'layers':>6} {'output SQNR dB':>14}  noisiest layer (own SQNR dB, output SQNR dB)"
          f"   next")
    for r in rows:
        top = [r["layers"][i] for i in r["ranked"][:2]]
        desc = [f"{t['index']} {t['op']} ({t['layer_sqnr_db']:.1f}, {_db(t['sqnr_db'])})" for t in top]
        print(f"{r['model']:<9} {len(r['layers']):>6} {_db(r['output_sqnr_db']):>14}  "
              f"{desc[0] if desc else '-':<40} {desc[1] if len(desc) > 1 else ''}")
        if args.layers:
            for t in r["layers"]:
                print(f"    {t['index']:>3} {t['op']:<18} {str(t['output_shape']):<18} SQNR "
                      f"{_db(t['sqnr_db']):>6} own {_db(t['layer_sqnr_db']) if t['layer_sqnr_db'] is not None else '-':>6} ({t['float_from']})")
    if args.json:
        Path(args.json).write_text(json.dumps({"digits": d, "mlperf": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
