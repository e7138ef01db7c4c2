"""Standalone firmware on every QEMU board: outputs identical to tflite-micro, timing deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import REPO, model_path, require_tool
from reference import run_reference

from kiln.project_gen import create_project, list_boards
from kiln.project_gen.elf import read_elf

pytestmark = [pytest.mark.cross, pytest.mark.qemu]

DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"
DIGITS_X = REPO / "examples" / "digits" / "digits_test_x.npy"
QEMU_BOARDS = sorted(b.name for b in list_boards() if b.runs_on == "qemu")


@pytest.fixture(autouse=True)
def _tools():
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")


def reference(model, samples: np.ndarray) -> np.ndarray:
    buf = model.read_bytes()
    return np.concatenate([run_reference(buf, x[None])[0] for x in samples])


@pytest.mark.parametrize("board", QEMU_BOARDS)
def test_digits_bit_exact_on_every_qemu_board(tmp_path, board):
    x = np.load(DIGITS_X)[:4]
    p = create_project(DIGITS, board=board, out_dir=tmp_path / "p", inputs=[x])
    r = p.run()
    np.testing.assert_array_equal(r.outputs[0], reference(DIGITS, x))
    elf = read_elf(p.elf)      # the weights sit in flash, the arena in RAM
    assert p.board.flash.contains(elf.section(".kiln_weights").addr)
    assert p.board.ram.contains(elf.symbols["kiln_arena"].value)
    assert r.unit == "instructions (QEMU -icount)"
    assert 10_000 < r.instructions < 5_000_000 and r.cycles == r.instructions
    assert 0 < r.stack_bytes < p.board.stack_bytes


def test_instruction_count_is_deterministic(tmp_path):
    # -icount makes the count a property of the binary and its input.
    p = create_project(DIGITS, board="mps2-an386", out_dir=tmp_path / "p")
    assert p.run().ticks == p.run().ticks


@pytest.mark.slow
@pytest.mark.parametrize("board, model", [
    ("lm3s6965evb", "kws_ref_model"),
    ("netduinoplus2", "kws_ref_model"),
    ("mps2-an385", "ad01_int8"),
    ("mps2-an500", "kws_ref_model"),
    ("mps3-an547", "pretrainedResnet_quant"),
])
def test_mlperf_model_on_other_boards(tmp_path, board, model):
    path = model_path(model)
    p = create_project(path, board=board, out_dir=tmp_path / "p")
    r = p.run()
    x = p.sample_inputs()[0]      # the fixed-seed random sample baked into the firmware
    np.testing.assert_array_equal(r.outputs[0], run_reference(path.read_bytes(), x)[0])
