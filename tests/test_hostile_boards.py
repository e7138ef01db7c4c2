"""Hostile board files: every value is typed and range-checked before it reaches C, a linker
script, a Makefile or a QEMU command line (issue 19: `description`, UART clock and `tx_pin`
strings landed as C tokens, `dsp = "no"` read as true, negative baud/clock built as `-5u`).

Each error is one line naming the file and the key."""

from __future__ import annotations

import copy
import os

import pytest

from kiln.compiler.errors import BoardError, KilnError
from kiln.project_gen import boards as boards_mod
from kiln.project_gen.boards import (MAX_BOARD_FILE_BYTES, get_board, list_boards,
                                     load_board_file, parse_board)

GOOD = {
    "name": "myboard", "description": "Vendor board (MCU): Cortex-M4F", "cpu": "cortex-m4",
    "fpu": "fpv4-sp-d16", "dsp": True, "clock_hz": 80_000_000, "runs_on": "board",
    "stack_bytes": 4096,
    "flash": {"origin": 0x08000000, "size": 0x100000},
    "ram": {"origin": 0x20000000, "size": 0x40000},
    "extra_regions": [{"name": "CCM", "origin": 0x10000000, "size": 0x10000}],
    "uart": {"kind": "stm32-usart-v2", "base": 0x40004400, "baud": 115200, "clock_hz": 40_000_000},
    "timer": {"kind": "dwt"},
    "init": [{"reg": 0x40021058, "set": 0x20000}, {"reg": 0x48000000, "clear": 0xF0, "set": 0xA0}],
}
NRF = {**GOOD, "uart": {"kind": "nrf", "base": 0x40002000, "tx_pin": 6, "rx_pin": 8}}
QEMU = {**GOOD, "runs_on": "qemu", "timer": {"kind": "systick"},
        "qemu": {"machine": "mps2-an386", "args": ["-m", "16M"]}}
HOST = {"name": "host", "cpu": "host", "clock_hz": 1_000_000_000, "runs_on": "host",
        "uart": {"kind": "posix"}, "timer": {"kind": "posix"}}


def with_value(base: dict, path: tuple, value) -> dict:
    data = copy.deepcopy(base)
    node = data
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return data


def refused(data: dict, match: str) -> str:
    with pytest.raises(BoardError, match=match) as e:
        parse_board(data, source="boards/myboard.toml")
    text = str(e.value)
    assert "\n" not in text and text.startswith("boards/myboard.toml: "), text
    return text


def test_the_good_boards_parse():
    b = parse_board(GOOD)
    assert (b.dsp, b.uart.clock_hz, b.extra_regions[0].name, len(b.init)) == (True, 40_000_000, "CCM", 2)
    assert parse_board(NRF).uart.tx_pin == 6
    assert parse_board(QEMU).qemu.args == ("-m", "16M")
    assert parse_board(HOST).is_host


def test_every_shipped_board_passes_the_schema():
    assert len(list_boards()) >= 11      # they are loaded through load_board_file


# --- the attacks of the issue ----------------------------------------------------------

@pytest.mark.parametrize("path, value, key", [
    (("description",), "x */\n#define memcpy(d, s, n) memset(d, 85, n)\n/*", "description"),
    (("description",), "ok\x1b[2J", "description"),
    (("description",), "bidi \u202e override", "description"),
    (("uart", "clock_hz"), "1u\n#error injected", r"uart\.clock_hz"),
    (("uart", "clock_hz"), "$(shell touch /tmp/kiln-pwned)", r"uart\.clock_hz"),
    (("uart", "tx_pin"), "6u; system(\"id\")", r"uart\.tx_pin"),
    (("uart", "rx_pin"), "8 /*", r"uart\.rx_pin"),
])
def test_strings_never_become_c_tokens(path, value, key):
    base = NRF if path[-1] in ("tx_pin", "rx_pin") else GOOD
    refused(with_value(base, path, value), key)


@pytest.mark.parametrize("value", ["no", "false", 0, 1, "", [], {}])
def test_dsp_must_be_a_boolean(value):
    """`dsp = "no"` was read as bool("no") == True."""
    refused(with_value(GOOD, ("dsp",), value), r"dsp: must be true or false")


@pytest.mark.parametrize("path", [("clock_hz",), ("uart", "baud"), ("uart", "clock_hz")])
@pytest.mark.parametrize("value", [-5, 0, -(2**40)])
def test_negative_or_zero_rates_are_refused(path, value):
    refused(with_value(GOOD, path, value), ".".join(path) + r": .* out of range")


# --- the class: every field, every wrong type ------------------------------------------

INT_FIELDS = [
    (GOOD, ("clock_hz",)), (GOOD, ("stack_bytes",)),
    (GOOD, ("flash", "origin")), (GOOD, ("flash", "size")),
    (GOOD, ("ram", "origin")), (GOOD, ("ram", "size")),
    (GOOD, ("uart", "base")), (GOOD, ("uart", "baud")), (GOOD, ("uart", "clock_hz")),
    (NRF, ("uart", "tx_pin")), (NRF, ("uart", "rx_pin")),
    (GOOD, ("init", 0, "reg")), (GOOD, ("init", 1, "set")), (GOOD, ("init", 1, "clear")),
    (GOOD, ("extra_regions", 0, "origin")), (GOOD, ("extra_regions", 0, "size")),
]


def _key(path: tuple) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


@pytest.mark.parametrize("base, path", INT_FIELDS, ids=[_key(p) for _, p in INT_FIELDS])
@pytest.mark.parametrize("value", [True, False, "4096", 4096.0, "0x1000", [1], {"v": 1}, None])
def test_integer_fields_take_integers_only(base, path, value):
    """`True` is an int in Python, a string is not a number, 4096.0 is a float."""
    refused(with_value(base, path, value), _key(path).replace("[", r"\[").replace("]", r"\]")
            + ": must be an integer")


@pytest.mark.parametrize("path, value", [
    (("clock_hz",), 2**32),                         # KILN_CLOCK_HZ is a 32-bit `u` constant
    (("stack_bytes",), 100), (("stack_bytes",), 2**40), (("stack_bytes",), 4100),
    (("flash", "origin"), 2**32), (("flash", "size"), 0), (("flash", "size"), 2**32 + 1),
    (("ram", "origin"), 0xFFFF0000),                # origin + size past 4 GB
    (("ram", "origin"), 0x08000000),                # overlaps flash
    (("uart", "base"), 2**32), (("uart", "base"), 0x40004401),
    (("uart", "baud"), 10**9), (("uart", "baud"), 50_000_000),
    (("uart", "clock_hz"), 2**31),                  # uart_pl011.c: 4 * clock in 32 bits
    (("init", 0, "reg"), 2**32), (("init", 0, "reg"), 0x40021059),
    (("init", 1, "set"), 2**32), (("init", 1, "clear"), -1),
    (("extra_regions", 0, "size"), 2**33),
])
def test_out_of_range_values_are_refused(path, value):
    refused(with_value(GOOD, path, value), _key(path).split(".")[0].split("[")[0])


@pytest.mark.parametrize("pin", [-1, 32, 1 << 40])
def test_nrf_pins_are_small_non_negative_ints(pin):
    """uart_nrf.c shifts `1u << pin`: 32 and above is undefined behaviour."""
    refused(with_value(NRF, ("uart", "tx_pin"), pin), r"uart\.tx_pin")


def test_nrf_constraints():
    refused(with_value(NRF, ("uart", "rx_pin"), 6), r"uart\.rx_pin: is the same pin")
    refused(with_value(NRF, ("uart", "baud"), 9600), r"uart\.baud: an nrf UART runs at 115200")
    refused(with_value(GOOD, ("uart", "tx_pin"), 3), r"uart\.tx_pin: only an nrf UART")


@pytest.mark.parametrize("path, value", [
    (("cpu",), ["cortex-m4"]), (("cpu",), "cortex-m4 -fplugin=x.so"), (("cpu",), 4),
    (("fpu",), "fpv5-d16"),                          # not on an M4
    (("fpu",), {"x": 1}), (("runs_on",), ["qemu"]), (("runs_on",), "QEMU"),
    (("uart", "kind"), ["cmsdk"]), (("uart", "kind"), "cmsdk.c; rm"),
    (("timer", "kind"), ["dwt"]), (("timer", "kind"), "dwt "),
    (("uart",), "cmsdk"), (("timer",), "dwt"), (("flash",), [0, 1024]), (("init",), {"reg": 0}),
    (("init",), [1, 2]), (("extra_regions",), {"origin": 0, "size": 1}),
])
def test_choices_and_tables_have_their_type(path, value):
    refused(with_value(GOOD, path, value), _key(path).split(".")[0])


def test_dsp_only_on_cores_that_have_it():
    refused({**GOOD, "cpu": "cortex-m0", "fpu": "none"}, r"dsp: a cortex-m0 has no DSP")


@pytest.mark.parametrize("name", ["", "My Board", "../evil", "a\nb", "x" * 49, "-x", "a$b",
                                  "a;b", "é", 7, None])
def test_names_are_safe_identifiers(name):
    refused(with_value(GOOD, ("name",), name), "name: must be lower-case letters")


@pytest.mark.parametrize("description", ["x" * 201, 5, ["a"], "line\nbreak", "tab\there",
                                         "nul\x00", "del\x7f", "sep\u2028"])
def test_descriptions_are_one_bounded_line(description):
    refused(with_value(GOOD, ("description",), description), "description")


def test_descriptions_may_hold_plain_unicode():
    assert parse_board({**GOOD, "description": "Carte « maison » — 80 MHz"}).description.startswith("Carte")


@pytest.mark.parametrize("qemu, key", [
    ({"machine": "mps2 an386"}, r"qemu\.machine"),
    ({"machine": "mps2-an386;touch x"}, r"qemu\.machine"),
    ({"machine": "$(shell id)"}, r"qemu\.machine"),
    ({"machine": ["mps2-an386"]}, r"qemu\.machine"),
    ({"machine": "mps2-an386", "args": "-m 16M"}, r"qemu\.args"),
    ({"machine": "mps2-an386", "args": ["-m"]}, r"qemu\.args: must be option, value pairs"),
    ({"machine": "mps2-an386", "args": ["-plugin", "file=evil.so"]}, r"qemu\.args\[0\]"),
    ({"machine": "mps2-an386", "args": ["-chardev", "file,id=x,path=out"]}, r"qemu\.args\[0\]"),
    ({"machine": "mps2-an386", "args": ["-m", "16M $(shell id)"]}, r"qemu\.args\[1\]"),
    ({"machine": "mps2-an386", "args": ["-m", "/etc/passwd"]}, r"qemu\.args\[1\]"),
    ({"machine": "mps2-an386", "args": ["-m", 16]}, r"qemu\.args\[1\]"),
    ({"args": []}, r"qemu\.machine: missing"),
])
def test_qemu_command_line_is_conservative(qemu, key):
    """qemu.machine and args reach `$(QEMU) ...` in the Makefile and QEMU's argv."""
    refused({**QEMU, "qemu": qemu}, key)


def test_qemu_table_only_with_runs_on_qemu():
    refused({**GOOD, "qemu": {"machine": "mps2-an386"}}, r"qemu: a qemu table is for runs_on = 'qemu'")


@pytest.mark.parametrize("key", ["flash", "ram", "init", "qemu"])
def test_the_host_board_has_no_memory_map(key):
    refused({**HOST, key: GOOD.get(key) or QEMU[key]}, f"{key}: the host board")


@pytest.mark.parametrize("path, typo, hint", [
    ((), "clock_Hz", "clock_hz"),
    ((), "dps", "dsp"),
    (("uart",), "buad", "baud"),
    (("uart",), "clock", "clock_hz"),
    (("flash",), "length", None),
    (("init", 0), "sett", "set"),
    (("qemu",), "arg", "args"),
])
def test_unknown_keys_are_refused_with_the_known_ones(path, typo, hint):
    data = copy.deepcopy(QEMU if path == ("qemu",) else GOOD)
    node = data
    for k in path:
        node = node[k]
    node[typo] = 1
    text = refused(data, f"unknown key .*{typo}")
    assert "known keys" in text
    if hint:
        assert f"did you mean '{hint}'" in text


def test_the_host_uart_takes_only_kind():
    refused(with_value(HOST, ("uart", "baud"), 9600), r"uart\.baud: a posix UART")


# --- files ------------------------------------------------------------------------------

GOOD_TOML = """
name = "myboard"
description = "Vendor board: Cortex-M4F"
cpu = "cortex-m4"
fpu = "fpv4-sp-d16"
dsp = true
clock_hz = 80_000_000
flash = { origin = 0x08000000, size = 0x100000 }
ram = { origin = 0x20000000, size = 0x40000 }
uart = { kind = "cmsdk", base = 0x40004000 }
timer = { kind = "dwt" }
"""


@pytest.mark.parametrize("line, key", [
    ('dsp = "no"', "dsp"),
    ('description = "x */\\n#error injected"', "description"),
    ("clock_hz = -5", "clock_hz"),
    ('uart = { kind = "cmsdk", base = 0x40004000, baud = -9600 }', r"uart\.baud"),
    ('uart = { kind = "cmsdk", base = 0x40004000, clock_hz = "8000000u\\n#error x" }', r"uart\.clock_hz"),
    ("clock_Hz = 1", "unknown key 'clock_Hz'"),
])
def test_board_files_from_toml(tmp_path, line, key):
    """The TOML text of the issue's attacks, through load_board_file."""
    lines = [x for x in GOOD_TOML.splitlines() if x.split(" = ")[0] != line.split(" = ")[0]]
    path = tmp_path / "myboard.toml"
    path.write_text("\n".join(lines + [line]) + "\n")
    with pytest.raises(BoardError, match=key) as e:
        load_board_file(path)
    assert str(e.value).startswith(str(path)) and "\n" not in str(e.value)


def test_a_good_board_file_loads(tmp_path):
    path = tmp_path / "myboard.toml"
    path.write_text(GOOD_TOML)
    assert load_board_file(path).source == path


@pytest.mark.parametrize("kind", ["fifo", "dir", "big", "binary", "toml"])
def test_board_files_that_are_no_board_files(tmp_path, kind):
    path = tmp_path / "myboard.toml"
    if kind == "fifo":
        os.mkfifo(path)                 # must not hang
    elif kind == "dir":
        path.mkdir()
    elif kind == "big":
        path.write_text(GOOD_TOML + "#" * MAX_BOARD_FILE_BYTES)
    elif kind == "binary":
        path.write_bytes(b"name = \"\xff\xfe\"\n")
    else:
        path.write_text("name = [\n")
    with pytest.raises(KilnError) as e:
        load_board_file(path)
    assert "\n" not in str(e.value) and str(path) in str(e.value)


# --- the paths that read board files: get_board, compile, project create ------------------

@pytest.fixture
def boards_dir(tmp_path, monkeypatch):
    """A boards folder holding one board file the test writes; kiln's board cache reset."""
    monkeypatch.setattr(boards_mod, "boards_dir", lambda: tmp_path)
    boards_mod._all_boards.cache_clear()
    yield tmp_path
    boards_mod._all_boards.cache_clear()


def test_compile_reads_boards_through_the_schema(boards_dir):
    """compile() read board TOML itself (target_for: bool("no") is true); now get_board."""
    import kiln.compiler as kc

    (boards_dir / "myboard.toml").write_text(GOOD_TOML.replace("dsp = true", 'dsp = "no"'))
    with pytest.raises(BoardError, match=r"myboard\.toml: dsp: must be true or false"):
        get_board("myboard")
    with pytest.raises(BoardError, match=r"dsp: must be true or false"):
        kc.compile("/nonexistent.tflite", board="myboard")


def test_board_names_are_looked_up_never_joined_into_paths(boards_dir, tmp_path, monkeypatch):
    """A name is looked up; a value holding '/' or ending in .toml is a board file's path
    (issue 15), read as given, never joined to kiln's boards folder."""
    import kiln.compiler as kc

    (boards_dir / "myboard.toml").write_text(GOOD_TOML)
    monkeypatch.chdir(tmp_path / "..")
    for name in ("../myboard", str(boards_dir / "myboard"), "myboard.toml"):
        with pytest.raises(KilnError, match=r"cannot read board file .*No such file"):
            kc.compile("/nonexistent.tflite", board=name)
    for name in ("..", "my board", "MyBoard"):
        with pytest.raises(BoardError, match="unknown board"):
            kc.compile("/nonexistent.tflite", board=name)
    with pytest.raises(BoardError, match="a board is named by a string"):
        get_board(["mps2-an386"])


def test_board_objects_pass_the_same_schema():
    """A Board built in Python (the API takes one) is checked like a board file."""
    import dataclasses

    from kiln.project_gen import create_project

    good = get_board("mps2-an386")
    assert get_board(dataclasses.replace(good, flash=dataclasses.replace(good.flash, size=8192)))
    for bad in (dataclasses.replace(good, description="a\n#error x"),
                dataclasses.replace(good, dsp="no"),
                dataclasses.replace(good, clock_hz=-5),
                dataclasses.replace(good, uart=dataclasses.replace(good.uart, baud="115200u;")),
                dataclasses.replace(good, qemu=dataclasses.replace(good.qemu, args=("-plugin", "x")))):
        with pytest.raises(BoardError):
            get_board(bad)
        with pytest.raises(BoardError):
            create_project("/nonexistent.tflite", bad, "/nonexistent/out")


@pytest.mark.parametrize("line", ['dsp = "no"', "clock_hz = -5",
                                  'description = "x */\\n#define memcpy(d, s, n) memset(d, 85, n)"'])
def test_project_create_refuses_a_hostile_board_in_one_line(boards_dir, tmp_path, capsys, line):
    from kiln.compiler.cli import main

    key = line.split(" = ")[0]
    text = "\n".join(x for x in GOOD_TOML.splitlines() if not x.startswith(key + " ")) + "\n" + line
    (boards_dir / "myboard.toml").write_text(text + "\n")
    model = tmp_path / "m.tflite"
    model.write_bytes(b"not read: the board is checked first")
    code = main(["project", "create", str(model), "--board", "myboard", "-o", str(tmp_path / "fw")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"myboard.toml: {key}: " in err[0], err
    assert not (tmp_path / "fw").exists()
