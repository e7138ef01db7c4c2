"""Cross builds (arm-none-eabi-gcc): every board links, real boards build KWS, sizes are checked."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import REPO, model_path, require_tool

from kiln.compiler import compile, load
from kiln.compiler.errors import BoardError
from kiln.project_gen import create_project, get_board, list_boards
from kiln.project_gen.elf import read_elf

pytestmark = pytest.mark.cross

DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"
REAL_BOARDS = sorted(b.name for b in list_boards() if b.runs_on == "board")


@pytest.fixture(autouse=True)
def _toolchain():
    require_tool("arm-none-eabi-gcc")
    require_tool("make")


@pytest.mark.parametrize("board", REAL_BOARDS)
def test_real_boards_build_the_example(tmp_path, board):
    # (The QEMU boards build and run it in test_qemu_boards.py.)
    p = create_project(DIGITS, board=board, out_dir=tmp_path / "p")
    report = p.build()
    b = get_board(board)
    assert 0 < report.flash.used <= b.flash.size and 0 < report.ram.used <= b.ram.size
    assert report.weights >= 2000 and report.stack_reserved == b.stack_bytes
    elf = read_elf(p.elf)
    # The weights sit in flash, the arena in RAM.
    assert b.flash.contains(elf.section(".kiln_weights").addr)
    assert b.ram.contains(elf.symbols["kiln_arena"].value)
    assert (tmp_path / "p" / "build" / "firmware.hex").exists()


@pytest.mark.slow
@pytest.mark.parametrize("board", REAL_BOARDS)
def test_real_boards_build_kws(tmp_path, board):
    p = create_project(model_path("kws_ref_model"), board=board, out_dir=tmp_path / "p")
    report = p.build()
    assert report.weights > 20_000 and report.flash.used < get_board(board).flash.size
    assert p.manifest["size"]["flash"]["used"] == report.flash.used


def test_link_time_overflow_names_region_and_bytes(tmp_path):
    # Weights (2.3 KB) pass the pre-build check on an 8 KB flash; code does not fit with them.
    tiny = dataclasses.replace(get_board("mps2-an386"),
                               flash=dataclasses.replace(get_board("mps2-an386").flash, size=8192))
    art = compile(load(DIGITS), board="mps2-an386")
    # create_project links it already (its code estimate may not fit): the linker's figure.
    with pytest.raises(BoardError, match=r"^digits_int8 does not fit mps2-an386: FLASH overflows "
                                         r"by [\d,]+ bytes \(the board has 8,192\)$"):
        create_project(art, board=tiny, out_dir=tmp_path / "p")
    assert not (tmp_path / "p").exists()
