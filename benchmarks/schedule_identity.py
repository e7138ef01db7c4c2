"""Generated C before and after a compiler change, byte for byte (issue 17 item 7: the
per-layer schedule is a refactor and must not change any generated file but kiln.json).

    python benchmarks/schedule_identity.py OUT [--root TREE]

compiles the four MLPerf Tiny models for mps2-an386, mps3-an547, lm3s6965evb and host,
with and without benchmarks/records/mps2-an386.jsonl, in --optimize speed and balanced,
and writes every generated file under OUT/<model>/<board>/<records>/<optimize>/.
`--root TREE` imports kiln from a copy of the repository (e.g. a `git archive` of the
commit before the change) instead of the working tree, so that other edits in the tree do
not enter the comparison. Then `diff -r OUT_BEFORE OUT_AFTER -x kiln.json` must be empty
(kiln.json gains ops[i].schedule). Prints the seconds each compile took.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
MODELS = ["kws_ref_model.tflite", "vww_96_int8.tflite", "pretrainedResnet_quant.tflite",
          "ad01_int8.tflite"]
BOARDS = ["mps2-an386", "mps3-an547", "lm3s6965evb", "host"]
RECORDS = HERE / "benchmarks" / "records" / "mps2-an386.jsonl"


def _use_tree(root: Path) -> None:
    """Point the editable install's package mapping at `root` before kiln is imported."""
    import __editable___kiln_0_1_0_finder as finder
    for name, path in list(finder.MAPPING.items()):
        finder.MAPPING[name] = str(root / Path(path).name)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--root", type=Path)
    ap.add_argument("--models", default="/work/shared/models/mlperf_tiny")
    args = ap.parse_args()
    if args.root is not None:
        _use_tree(args.root.resolve())
    from kiln.compiler import compile as kiln_compile
    import kiln.compiler
    print("kiln from", Path(kiln.compiler.__file__).parent, flush=True)
    records = RECORDS if args.root is None else args.root / "benchmarks/records/mps2-an386.jsonl"
    for model in MODELS:
        for board in BOARDS:
            for rec in (None, records):
                for optimize in ("speed", "balanced"):
                    t0 = time.perf_counter()
                    art = kiln_compile(str(Path(args.models) / model), board=board,
                                       tuning_records=str(rec) if rec else None,
                                       optimize=optimize)
                    out = (args.out / Path(model).stem / board /
                           ("records" if rec else "default") / optimize)
                    out.mkdir(parents=True, exist_ok=True)
                    for name, text in sorted(art.files.items()):
                        p = out / name
                        p.parent.mkdir(parents=True, exist_ok=True)
                        p.write_text(text) if isinstance(text, str) else p.write_bytes(text)
                    print(f"{time.perf_counter() - t0:6.2f} s  {model} {board} "
                          f"{'records' if rec else 'default'} {optimize}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
