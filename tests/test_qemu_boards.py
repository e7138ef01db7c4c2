"""Standalone firmware on every QEMU board: outputs identical to tflite-micro, timing deterministic."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from conftest import REPO, model_path, require_tool
from reference import run_reference

from kiln.compiler.errors import DeviceError
from kiln.project_gen import create_project, list_boards
from kiln.project_gen.cli_commands import cmd_run
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


def test_host_driven_firmware_on_qemu(tmp_path):
    x = np.load(DIGITS_X)[5]
    p = create_project(DIGITS, board="mps2-an386", out_dir=tmp_path / "p", mode="host-driven")
    with p.connect() as session:
        [y] = session.run(x[None])
        assert session.device.board == "mps2-an386"
    np.testing.assert_array_equal(y, reference(DIGITS, x[None]))


def test_a_fault_ends_the_run_with_a_clear_error(tmp_path):
    p = create_project(DIGITS, board="mps2-an385", out_dir=tmp_path / "p")
    main_c = tmp_path / "p" / "src" / "main.c"
    main_c.write_text(main_c.read_text().replace(
        "kiln_platform_init();", "kiln_platform_init();\n    __builtin_trap();", 1))
    with pytest.raises(DeviceError, match=r"faulted \(exception 0x03\)"):
        p.run(timeout=30)


def test_run_command_on_a_model_for_a_qemu_board(tmp_path, capsys):
    args = argparse.Namespace(model=str(DIGITS), board="lm3s6965evb", input=[str(DIGITS_X)],
                              output=str(tmp_path / "out.npz"))
    assert cmd_run(args) == 0
    out = capsys.readouterr().out
    assert "instructions (QEMU -icount shift=6) per inference on lm3s6965evb" in out
    y = np.load(tmp_path / "out.npz")["output_0"]
    assert y.shape == (360, 10)
    labels = np.load(REPO / "examples" / "digits" / "digits_test_y.npy")
    assert np.mean(y.argmax(axis=1) == labels) > 0.95
