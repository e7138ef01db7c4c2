"""Arena of TF's space-to-batch dilated convolutions: folded into one dilated convolution
(kiln's default) vs run as written (SPACE_TO_BATCH_ND → conv → BATCH_TO_SPACE_ND over
batch-expanded tensors) vs tflite-micro running the pattern.

    python benchmarks/dilated.py

The layers are the converter's pattern (tests/test_pass_dilated.py builds them) at sizes
of audio and segmentation models: a TCN/WaveNet-style 1-D convolution and a
DeepLab-style depthwise one. Every kiln figure is checked bit-exact against TFLite's
reference kernels on the pattern before it is printed.
"""

from __future__ import annotations

import functools
import importlib
import sys
import tempfile
from pathlib import Path

from _common import REPO, table, tflm_arena

sys.path.insert(0, str(REPO / "tests"))

from reference import run_tflite_ref  # noqa: E402
from test_pass_dilated import Pattern, inputs_for, pattern_model  # noqa: E402

from kiln.compiler import compile, load  # noqa: E402
from kiln.compiler.passes import optimize  # noqa: E402

LAYERS = [
    Pattern("conv", 1, (1, 2), "SAME", size=(1, 128), kernel=(1, 3), cin=32, cout=32),
    Pattern("conv", 1, (1, 8), "SAME", size=(1, 128), kernel=(1, 3), cin=32, cout=32),
    Pattern("dw", 2, (2, 2), "SAME", size=(24, 24), kernel=(3, 3), cin=64),
    Pattern("dw", 2, (4, 4), "SAME", size=(24, 24), kernel=(3, 3), cin=64),
    Pattern("conv", 2, (2, 2), "VALID", size=(32, 32), kernel=(3, 3), cin=16, cout=16),
]


def _compile(model: bytes, fold: bool):
    module = importlib.import_module("kiln.compiler.compile")
    saved = module.optimize_graph
    module.optimize_graph = functools.partial(optimize, dilated=fold)
    try:
        return compile(load(model), board="host")
    finally:
        module.optimize_graph = saved


def main() -> None:
    rows = []
    for p in LAYERS:
        model = pattern_model([p])
        xs = inputs_for([p])
        want = run_tflite_ref(model, xs)[0].reshape(-1)
        arenas = []
        for fold in (True, False):
            art = _compile(model, fold)
            assert (art.run(*xs)[0].reshape(-1) == want).all(), (p.label, fold)
            arenas.append(art.report["arena_bytes"])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "m.tflite"
            path.write_bytes(model)
            _, tflm_head = tflm_arena(path)
        rows.append([p.label, f"{arenas[0]:,}", f"{arenas[1]:,}", f"{tflm_head:,}",
                     f"{arenas[1] / arenas[0]:.2f}x"])
    print(table(rows, ["layer", "kiln folded", "kiln as written", "TFLM head",
                       "saved"]))
    print("arena bytes; TFLM head = its activation arena for the pattern as written")


if __name__ == "__main__":
    main()
