"""Helpers the benchmark scripts share: where the models are, TFLM's own figures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MLPERF = {"KWS": "kws_ref_model", "VWW": "vww_96_int8", "IC": "pretrainedResnet_quant",
          "AD": "ad01_int8"}

# Instructions per Invoke() of TFLM on QEMU, same compiler (../shared/ANCHORS.md): with its
# reference kernels (measured on mps2-an386 only) and with CMSIS-NN. tests/ read it too.
_ANCHORS = json.loads((REPO / "benchmarks" / "anchors.json").read_text())
TFLM_REFERENCE: dict[str, dict[str, int]] = _ANCHORS["tflm_reference"]
TFLM_CMSIS_NN: dict[str, dict[str, int]] = _ANCHORS["tflm_cmsis_nn"]
# Issue 17's flash goal (the model's weights plus at most 16 KB of code), by short name.
FLASH_GOAL: dict[str, int] = {k: _ANCHORS["flash_goal"][m] for k, m in MLPERF.items()}


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
