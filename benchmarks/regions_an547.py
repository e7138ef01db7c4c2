"""Memory regions on mps3-an547: AD (MLPerf Tiny anomaly detection) with every layer on its
int16-weight variant (the fastest FULLY_CONNECTED kernels: 555 KB of weights, more than the
512 KB ITCM), built two ways and run on QEMU:

- spread: kiln's mps3-an547 board file (ITCM, DTCM, ISRAM, SRAM, DDR): the weights the
  ITCM cannot hold go to the DTCM, every layer keeps its fast variant;
- one region: the same machine described as its ITCM and one RAM (as kiln's board file
  did before regions): kiln moves layers to int8-weight variants until the weights fit
  the ITCM (codegen/fit.py).

    python benchmarks/regions_an547.py

Prints each build's region report (kiln project build's lines), its instructions per
inference (QEMU -icount: no memory timing, so the speed ranks change nothing here; on the
FPGA the TCMs are the zero-wait memories) and whether the outputs equal tflite-micro's.

Last run (Nov 2026, arm-none-eabi-gcc 12.2, QEMU 7.2): spread 555,136 B of weights,
505,984 in the ITCM and 49,152 in the DTCM, 270,358 instructions; one region: one layer
moved to int8 weights (473,216 B), 211,670 instructions (the M55's MVE int8
FULLY_CONNECTED is the faster kernel here); both bit-exact with tflite-micro.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import kiln.compiler as kc  # noqa: E402
from conftest import model_path  # noqa: E402
from kiln.project_gen import create_project  # noqa: E402
from kiln.project_gen.boards import Region, get_board  # noqa: E402
from reference import run_reference  # noqa: E402
from test_flash_fit import _int16_records  # noqa: E402


def main() -> int:
    an547 = get_board("mps3-an547")
    single = replace(an547, name="an547-itcm-only", extra_regions=(),
                     ram=Region("RAM", 0x21000000, 0x400000, kind="ram", exec=True))
    path = model_path("ad01_int8")
    g = kc.load(path)
    x = np.random.default_rng(7).integers(-128, 128, (1, 640), dtype=np.int8)
    want = run_reference(path.read_bytes(), x)[0]
    ok = True
    for label, board in (("spread", an547), ("one region", single)):
        art = kc.compile(g, board, tuning_records=_int16_records(g, board))
        moves = art.report["flash_fit"]
        with tempfile.TemporaryDirectory() as tmp:
            project = create_project(art, board, Path(tmp) / "fw", inputs=[x])
            size = project.build()
            result = project.run()
        same = bool(np.array_equal(result.outputs[0].reshape(want.shape), want))
        ok &= same
        print(f"{label}: {board.name}, weights {art.report['weights_bytes']:,} B, "
              f"{len(moves)} layer(s) moved to int8 weights, "
              f"{result.instructions:,} instructions, bit-exact {same}")
        for line in size.lines():
            print("    " + line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
