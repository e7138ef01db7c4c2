"""The four MLPerf Tiny int8 models as standalone firmware on QEMU mps2-an386, vs tflite-micro."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import MLPERF_INT8, model_path, require_tool
from reference import run_reference

from kiln.project_gen import create_project

pytestmark = [pytest.mark.cross, pytest.mark.qemu, pytest.mark.slow]


@pytest.mark.parametrize("model", MLPERF_INT8)
def test_mlperf_bit_exact_on_mps2_an386(tmp_path, model):
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    path = model_path(model)
    p = create_project(path, board="mps2-an386", out_dir=tmp_path / "p")
    size = p.build()
    r = p.run()
    [x] = p.sample_inputs()                      # fixed-seed random, baked into the firmware
    ref = run_reference(path.read_bytes(), x)
    for i, (got, want) in enumerate(zip(r.outputs, ref)):
        diff = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
        assert diff.size == 0, f"output {i} differs at {diff[:20].tolist()}"
    assert r.instructions > 0 and size.weights > 0
    print(f"{model}: {r.instructions:,} instructions, flash {size.flash.used:,} B, "
          f"RAM {size.ram.used:,} B, stack {r.stack_bytes:,} B")
