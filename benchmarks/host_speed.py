"""Host latency: kiln's compiled model vs the tflite-micro interpreter's invoke().

    python benchmarks/host_speed.py [--repeat N]

Same process, same inputs; median of N timed runs after one warm-up. Outputs are
checked to be identical before timing.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _common import MLPERF, mlperf_model, table
from tflite_micro.python.tflite_micro import runtime

from kiln.compiler import compile, load


def _median_time(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    rows = []
    for short, stem in MLPERF.items():
        path = mlperf_model(stem)
        art = compile(load(path), board="host")
        spec = art.report["inputs"][0]
        x = np.random.default_rng(0).integers(-128, 128, size=spec["shape"]).astype(np.int8)
        interp = runtime.Interpreter.from_file(str(path), arena_size=1 << 22)

        def tflm():
            interp.set_input(x, 0)
            interp.invoke()
            return interp.get_output(0)

        ours = art.run(x)[0]
        assert np.array_equal(ours, tflm()), f"{short}: kiln and TFLM outputs differ"
        t_kiln = _median_time(lambda: art.run(x), args.repeat)
        t_tflm = _median_time(tflm, args.repeat)
        rows.append([short, f"{t_kiln * 1e3:.3f}", f"{t_tflm * 1e3:.3f}", f"{t_kiln / t_tflm:.2f}x"])
    print(table(rows, ["model", "kiln ms", "tflite-micro ms", "kiln / TFLM"]))


if __name__ == "__main__":
    main()
