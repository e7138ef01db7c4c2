"""Board files: every boards/*.toml loads, says what its hardware is, and bad files fail clearly."""

from __future__ import annotations

import pytest

from kiln.compiler.errors import BoardError
from kiln.project_gen.boards import get_board, list_boards, parse_board

QEMU_BOARDS = {  # board -> (QEMU machine, cpu), from DESIGN.md
    "mps2-an385": ("mps2-an385", "cortex-m3"),
    "mps2-an386": ("mps2-an386", "cortex-m4"),
    "mps2-an500": ("mps2-an500", "cortex-m7"),
    "mps3-an547": ("mps3-an547", "cortex-m55"),
    "netduinoplus2": ("netduinoplus2", "cortex-m4"),
    "lm3s6965evb": ("lm3s6965evb", "cortex-m3"),
    "microbit": ("microbit", "cortex-m0"),
}
REAL_BOARDS = {"nucleo-l4r5zi", "nucleo-f746zg", "nrf52840dk"}


def test_every_board_is_there():
    names = {b.name for b in list_boards()}
    assert names == set(QEMU_BOARDS) | REAL_BOARDS | {"host"}


@pytest.mark.parametrize("name", sorted(QEMU_BOARDS))
def test_qemu_boards(name):
    b = get_board(name)
    machine, cpu = QEMU_BOARDS[name]
    assert b.runs_on == "qemu" and b.qemu.machine == machine and b.cpu == cpu
    assert b.timer == "systick"        # DWT CYCCNT reads 0 under QEMU
    assert b.tick_unit == "instructions (QEMU -icount)"


@pytest.mark.parametrize("name", sorted(REAL_BOARDS))
def test_real_boards_count_cycles_and_bring_up_their_uart(name):
    b = get_board(name)
    assert b.runs_on == "board" and b.qemu is None and b.timer == "dwt"
    assert b.tick_unit == "cycles"
    if b.uart.kind.startswith("stm32"):
        assert b.init, "an STM32 UART needs its clock gate and pin mux pokes"


def test_memory_sizes_from_the_datasheets():
    kb = 1024
    expected = {  # (flash, RAM) in KB
        "lm3s6965evb": (256, 64), "microbit": (256, 16), "netduinoplus2": (1024, 128),
        "mps3-an547": (512, 512), "nucleo-l4r5zi": (2048, 640),
        "nucleo-f746zg": (1024, 320), "nrf52840dk": (1024, 256),
    }
    for name, (flash, ram) in expected.items():
        b = get_board(name)
        assert (b.flash.size, b.ram.size) == (flash * kb, ram * kb), name
    assert get_board("netduinoplus2").flash.origin == 0x08000000
    an547 = get_board("mps3-an547")     # ITCM, DTCM, then QEMU's other memories
    assert [(r.name, r.origin, r.size // kb) for r in an547.memories] == [
        ("ITCM", 0, 512), ("DTCM", 0x20000000, 512), ("ISRAM", 0x21000000, 4096),
        ("SRAM", 0x01000000, 2048), ("DDR", 0x60000000, 2 * kb * kb)]


def test_cpu_flags():
    assert get_board("mps2-an386").cpu_flags == [
        "-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"]
    assert get_board("mps2-an500").cpu_flags[2] == "-mfpu=fpv5-d16"
    assert get_board("nucleo-f746zg").cpu_flags[2] == "-mfpu=fpv5-sp-d16"
    assert get_board("microbit").cpu_flags == ["-mcpu=cortex-m0", "-mthumb", "-mfloat-abi=soft"]
    assert get_board("mps3-an547").cpu_flags == ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"]
    assert get_board("host").cpu_flags == []


def test_unknown_board_suggests_a_name():
    with pytest.raises(BoardError, match=r"unknown board 'mps2-an368'.*mps2-an386"):
        get_board("mps2-an368")


MINIMAL = {
    "name": "x", "cpu": "cortex-m4", "clock_hz": 1_000_000, "runs_on": "board",
    "flash": {"origin": 0, "size": 1024}, "ram": {"origin": 0x20000000, "size": 1024},
    "uart": {"kind": "cmsdk", "base": 0x40004000}, "timer": {"kind": "dwt"},
}


def test_a_minimal_board_parses():
    b = parse_board(MINIMAL)
    assert b.stack_bytes == 4096 and b.uart.baud == 115200 and b.fpu == "none"


@pytest.mark.parametrize("change, message", [
    ({"cpu": "cortex-a53"}, "cpu 'cortex-a53'"),
    ({"uart": {"kind": "usb"}}, "uart.kind"),
    ({"timer": {"kind": "rtc"}}, "timer.kind"),
    ({"flash": {"origin": 0}}, "flash needs origin and size"),
    ({"runs_on": "qemu"}, "needs a qemu"),
    ({"uart": {"kind": "nrf", "base": 0x40002000}}, "tx_pin"),
    ({"clock_hz": -1}, "clock_hz"),
    ({"init": [{"set": 1}]}, r"init\[0\] needs reg"),
    ({"uart": {"kind": "posix"}}, "cpu 'host' goes with"),
])
def test_bad_board_files_name_the_problem(change, message):
    with pytest.raises(BoardError, match=message):
        parse_board({**MINIMAL, **change}, source="x.toml")


def test_missing_key_is_named():
    data = dict(MINIMAL)
    del data["clock_hz"]
    with pytest.raises(BoardError, match="x.toml: missing key 'clock_hz'"):
        parse_board(data, source="x.toml")
