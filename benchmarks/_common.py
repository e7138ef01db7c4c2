"""Helpers the benchmark scripts share: where the models are, TFLM's own figures."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MLPERF = {"KWS": "kws_ref_model", "VWW": "vww_96_int8", "IC": "pretrainedResnet_quant",
          "AD": "ad01_int8"}

# Instructions per Invoke() of TFLM on QEMU, same compiler (../shared/ANCHORS.md): with its
# reference kernels (measured on mps2-an386 only) and with CMSIS-NN.
TFLM_REFERENCE = {
    "mps2-an386": {"kws_ref_model": 43_041_675, "vww_96_int8": 100_251_540,
                   "pretrainedResnet_quant": 107_402_211, "ad01_int8": 1_952_271},
}
TFLM_CMSIS_NN = {
    "mps2-an386": {"kws_ref_model": 7_698_888, "vww_96_int8": 24_101_962,
                   "pretrainedResnet_quant": 29_863_456, "ad01_int8": 582_950},
    "mps2-an500": {"kws_ref_model": 7_644_685, "vww_96_int8": 24_025_588,
                   "pretrainedResnet_quant": 30_026_666, "ad01_int8": 583_248},
}


def check_exact(model: Path, inputs: list, outputs: list) -> str:
    """'bit-exact' when tflite-micro's interpreter gives the same outputs for `inputs`."""
    import numpy as np

    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
        return "unchecked"
    interp = runtime.Interpreter.from_bytes(model.read_bytes())
    for i, x in enumerate(inputs):
        interp.set_input(x, i)
    interp.invoke()
    same = all(np.array_equal(interp.get_output(i), y) for i, y in enumerate(outputs))
    return "bit-exact" if same else "DIFFERS"


def models_root() -> Path:
    return Path(os.environ.get("KILN_MODELS", REPO.parent / "shared" / "models"))


def mlperf_model(stem: str) -> Path:
    path = models_root() / "mlperf_tiny" / f"{stem}.tflite"
    if not path.exists():
        sys.exit(f"{path} not found: set KILN_MODELS to the shared/models folder")
    return path


def tflm_arena(path: Path) -> tuple[int, int]:
    """(total, activation head) bytes of TFLM's arena for the model, from its allocator log.

    The log is printed by C code, so it is read from a child process's output.
    """
    code = ("from tflite_micro.python.tflite_micro import runtime\n"
            f"runtime.Interpreter.from_file({str(path)!r}, arena_size=1 << 22).print_allocations()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    total = int(re.search(r"allocation total (\d+)", out).group(1))
    head = int(re.search(r"allocation head (\d+)", out).group(1))
    return total, head


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).rjust(w) if i else str(c).ljust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])
