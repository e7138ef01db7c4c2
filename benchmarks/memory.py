"""Arena size per MLPerf Tiny model: kiln vs the live-tensor lower bound vs TFLM.

    python benchmarks/memory.py

kiln's arena holds every activation and kernel scratch buffer (scratch listed apart);
the lower bound is the largest set of tensors alive at once when running layer by layer;
TFLM's figures come from the tflite-micro interpreter's recording allocator.
"""

from __future__ import annotations

import time

from _common import MLPERF, mlperf_model, table, tflm_arena

from kiln.compiler import compile, load


def main() -> None:
    rows = []
    for short, stem in MLPERF.items():
        path = mlperf_model(stem)
        start = time.perf_counter()
        art = compile(load(path), board="host")
        elapsed = time.perf_counter() - start
        r = art.report
        tflm_total, tflm_head = tflm_arena(path)
        bound = r["tensor_lower_bound_bytes"]
        rows.append([short, f"{r['arena_bytes']:,}", f"{r['scratch_bytes']:,}", f"{bound:,}",
                     f"{100.0 * (r['arena_bytes'] - bound) / bound:+.1f}%",
                     f"{tflm_total:,}", f"{tflm_head:,}", f"{r['weights_bytes']:,}",
                     f"{elapsed:.2f}"])
    print(table(rows, ["model", "kiln arena B", "of which scratch", "tensor bound B", "vs bound",
                       "TFLM arena B", "TFLM activations B", "weights B", "compile s"]))


if __name__ == "__main__":
    main()
