"""Random UNIDIRECTIONAL_SEQUENCE_LSTM models (int8 and 16x8) against tflite-micro.

Each case draws sizes (batches, steps, input size, units), the layout, the cell scale's
power of two, the cell clip, the activation scales and zero points and the weight scale,
builds the model as tests/test_ops_lstm.py does, and compares kiln's host build with TFLM
exactly over three calls in a row, a reset and three more. Prints one line per mismatch
and a summary:

    python benchmarks/lstm_fuzz.py [--cases 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from test_ops_lstm import lstm_model, tflm_runs  # noqa: E402
from tflite_builder import rand_int  # noqa: E402

from kiln.compiler import compile as kiln_compile  # noqa: E402
from kiln.compiler import load  # noqa: E402
from kiln.compiler.errors import ModelError  # noqa: E402


def draw(rng: np.random.Generator) -> dict:
    int16 = bool(rng.random() < 0.4)
    case = dict(batches=int(rng.integers(1, 4)), steps=int(rng.integers(1, 12)),
                depth=int(rng.integers(1, 40)), units=int(rng.integers(1, 40)),
                time_major=bool(rng.random() < 0.5),
                cell_clip=float(rng.choice([0.0, 0.05, 0.5, 3.0, 10.0, 100.0])),
                cell_power=int(rng.integers(-16, -8)),
                weight_scale=float(np.exp(rng.uniform(np.log(0.002), np.log(0.1)))),
                input_q=(float(np.exp(rng.uniform(np.log(0.005), np.log(0.2)))),
                         int(rng.integers(-128, 128))),
                hidden_q=(float(np.exp(rng.uniform(np.log(0.003), np.log(0.02)))),
                          int(rng.integers(-128, 128))),
                activations="int16" if int16 else "int8")
    return case


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    start, exact, refused, bad = time.perf_counter(), 0, 0, 0
    for i in range(args.cases):
        case = draw(rng)
        model = lstm_model(np.random.default_rng(i), **case)
        try:
            art = kiln_compile(load(model), board="host")
        except ModelError as e:
            refused += 1
            print(f"case {i} refused: {e}  {case}")
            continue
        x = load(model).tensor(0)
        xs = [rand_int(x.shape, rng, x.dtype) for _ in range(6)]
        want = tflm_runs(model, xs, reset_before={3})
        got = []
        for k, xk in enumerate(xs):
            if k == 3:
                art.reset()
            got.append(art.run(xk)[0])
        if all(np.array_equal(g, w) for g, w in zip(got, want)):
            exact += 1
        else:
            bad += 1
            print(f"case {i} MISMATCH {case}")
    print(f"{args.cases} random LSTM models: {exact} bit-exact with tflite-micro over 6 calls, "
          f"{bad} mismatched, {refused} refused; {time.perf_counter() - start:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
