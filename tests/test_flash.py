"""Flashing (issue 15): `kiln flash`, `--flash` / `--flash-command` on run and profile, and
the board file's `flashing` table, with a script standing in for a probe: it records the
arguments it received and a digest of the file it was handed."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from kiln.compiler.cli import main
from kiln.compiler.errors import BoardError, KilnError
from kiln.project_gen.boards import get_board, load_board_file
from kiln.project_gen.flash import flash_command_line, flash_firmware, run_flash_command
from kiln.project_gen.project import Project

from conftest import require_tool

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits_int8.tflite"

PROBE = """\
import hashlib, json, sys
from pathlib import Path
log = Path(sys.argv[1])
args = sys.argv[2:]
files = {a: hashlib.sha256(Path(a).read_bytes()).hexdigest() for a in args if Path(a).is_file()}
with log.open("a") as f:
    f.write(json.dumps({"args": args, "files": files}) + "\\n")
sys.exit(3 if "--fail" in args else 0)
"""


@pytest.fixture
def probe(tmp_path) -> tuple[str, Path]:
    """(the shell words that run the stand-in probe, its log)."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    log = tmp_path / "probe log.jsonl"      # part of the user's own command: quoted by them
    return f"{sys.executable} {script} '{log}'", log


def records(log: Path) -> list[dict]:
    import json
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def real_board_file(folder: Path, flashing: str | None) -> Path:
    """A board of one's own that runs on a real board (nucleo-l4r5zi's facts)."""
    out = folder / "myst.toml"
    assert main(["boards", "--new", "myst", "--like", "nucleo-l4r5zi", "-o", str(out),
                 "--force"]) == 0
    if flashing:
        out.write_text(out.read_text() + f"flashing = {flashing}\n")
    return out


@pytest.fixture
def built(tmp_path, probe, capsys) -> Project:
    """A standalone project for a real board whose file flashes with the stand-in probe."""
    require_tool("arm-none-eabi-gcc")
    command, _ = probe
    board = real_board_file(tmp_path, '{ command = "' + command.replace('"', '\\"') +
                            ' --hex {hex} --port {port} {elf}" }')
    assert main(["project", "create", str(DIGITS), "--board", str(board),
                 "-o", str(tmp_path / "p")]) == 0
    capsys.readouterr()
    return Project.open(tmp_path / "p")


# --- the runner ------------------------------------------------------------------------------

def test_placeholders_are_quoted_and_only_four_exist(tmp_path):
    files = {k: tmp_path / f"a b;c/firmware.{k}" for k in ("elf", "hex", "bin")}
    line = flash_command_line("flash {hex} {port} {{literal}}", files, "/dev/tty$(x)")
    assert line == f"flash '{files['hex']}' '/dev/tty$(x)' {{literal}}"
    for bad in ("x {elf.__class__}", "x {0}", "x {}", "x {hex!r}", "x {hex:>9}", "x {nope}",
                "x {", "", "x \x1b[2J", "x \u202e"):
        with pytest.raises(BoardError) as e:
            flash_command_line(bad, files, "p")
        assert "\n" not in str(e.value)
    with pytest.raises(KilnError, match=r"uses \{port\}: pass the board's port"):
        flash_command_line("x {port}", files, None)


def test_a_failing_flash_command_is_one_line(tmp_path, probe):
    command, log = probe
    (tmp_path / "firmware.hex").write_text(":00000001FF\n")
    files = {k: tmp_path / f"firmware.{k}" for k in ("elf", "hex", "bin")}
    with pytest.raises(KilnError, match=r"flash command failed \(3\)") as e:
        run_flash_command(command + " {hex} --fail", files)
    assert "\n" not in str(e.value)
    with pytest.raises(KilnError, match="firmware.elf does not exist: build the project"):
        run_flash_command(command + " {elf}", files)
    assert len(records(log)) == 1                   # the second never ran


def test_board_files_name_how_they_are_flashed(tmp_path):
    path = real_board_file(tmp_path, '{ command = "st-flash write {bin} 0x08000000" }')
    assert load_board_file(path).flashing.command == "st-flash write {bin} 0x08000000"
    path = real_board_file(tmp_path, '{ pyocd_target = "stm32l4r5zitx" }')
    assert load_board_file(path).flashing.pyocd_target == "stm32l4r5zitx"
    for bad, why in (('{ command = "x {elf.__class__}" }', "not a placeholder"),
                     ('{ command = "x", pyocd_target = "y" }', "not both"),
                     ('{ pyocd_target = "a b" }', "pyOCD target"),
                     ('{ commnd = "x" }', "did you mean 'command'"),
                     ("{ }", "needs command or pyocd_target")):
        path = real_board_file(tmp_path, bad)
        with pytest.raises(BoardError, match=why) as e:
            load_board_file(path)
        assert "\n" not in str(e.value) and str(path) in str(e.value)
    qemu = (tmp_path / "q.toml")
    qemu.write_text(Path(get_board("mps2-an386").source).read_text().replace(
        'name = "mps2-an386"', 'name = "q"') + 'flashing = { command = "x" }\n')
    with pytest.raises(BoardError, match="flashing: is for runs_on = 'board'"):
        load_board_file(qemu)


def test_pyocd_is_an_optional_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyocd", None)    # as if not installed, wherever it is
    path = real_board_file(tmp_path, '{ pyocd_target = "stm32l4r5zitx" }')
    with pytest.raises(BoardError, match=r"pip install 'kiln\[flash\]'") as e:
        flash_firmware(load_board_file(path), tmp_path)
    assert "\n" not in str(e.value)


def test_qemu_and_host_boards_have_nothing_to_flash(tmp_path, capsys):
    for name in ("mps2-an386", "host"):
        with pytest.raises(BoardError, match="nothing to flash; `kiln run` launches it"):
            flash_firmware(get_board(name), tmp_path, command="true")
    assert main(["project", "create", str(DIGITS), "--board", "mps2-an386",
                 "-o", str(tmp_path / "q")]) == 0
    capsys.readouterr()
    assert main(["flash", str(tmp_path / "q"), "--flash-command", "touch {hex}.flashed"]) == 0
    out = capsys.readouterr().out
    assert "runs on QEMU (mps2-an386): nothing to flash" in out and "kiln run" in out
    assert not list(tmp_path.rglob("*.flashed"))


# --- kiln flash --------------------------------------------------------------------------------

@pytest.mark.cross
def test_kiln_flash_hands_the_probe_the_projects_firmware(built, probe, capsys):
    _, log = probe
    port = "/dev/tty ACM0;echo pwned"               # one argument, whatever it holds
    assert main(["flash", str(built.path), "--port", port]) == 0
    assert f"flashed {built.path} onto myst with" in capsys.readouterr().out
    (rec,) = records(log)
    hex_file, elf = built.path / "build" / "firmware.hex", built.path / "build" / "firmware.elf"
    assert rec["args"] == ["--hex", str(hex_file.absolute()), "--port", port,
                           str(elf.absolute())]
    assert rec["files"] == {str(hex_file.absolute()): sha(hex_file),
                            str(elf.absolute()): sha(elf)}
    assert hex_file.read_text().startswith(":")            # Intel hex, as built

    # --flash-command replaces the board file's way; {bin} is the raw image
    command = probe[0]
    assert main(["flash", str(built.path), "--flash-command", command + " {bin}"]) == 0
    bin_file = (built.path / "build" / "firmware.bin").absolute()
    assert records(log)[1] == {"args": [str(bin_file)], "files": {str(bin_file): sha(bin_file)}}

    # the board file's command needs the port it names; a failing probe is one line
    capsys.readouterr()
    assert main(["flash", str(built.path)]) == 2
    assert "uses {port}: pass the board's port" in capsys.readouterr().err
    assert main(["flash", str(built.path), "--flash-command", command + " --fail"]) == 2
    err = capsys.readouterr().err
    assert "flash command failed (3)" in err and err.count("\n") == 1
    assert main(["flash", str(built.path / "kiln.json")]) == 2


@pytest.mark.cross
def test_run_flash_flashes_a_standalone_project_first(built, probe, capsys):
    _, log = probe
    assert main(["run", str(built.path), "--flash", "--port", "/dev/ttyACM7"]) == 0
    out = capsys.readouterr().out
    assert "flashed" in out and "prints its KILN lines on its serial port" in out
    assert records(log)[0]["args"][:4] == [
        "--hex", str((built.path / "build" / "firmware.hex").absolute()), "--port",
        "/dev/ttyACM7"]
    # without --flash a real board's project is not run here: the error says how
    assert main(["run", str(built.path)]) == 2
    assert "kiln flash" in capsys.readouterr().err


@pytest.mark.cross
@pytest.mark.slow
def test_profile_flash_command_flashes_before_connecting(tmp_path, probe, capsys):
    """`kiln profile MODEL --board FILE --port URL --flash-command CMD`: the cached
    host-driven firmware is flashed, then reached at the port (none answers here: the
    connection fails after the flash, with one line)."""
    require_tool("arm-none-eabi-gcc")
    command, log = probe
    board = real_board_file(tmp_path, None)
    rc = main(["profile", str(DIGITS), "--board", str(board), "--port",
               "socket://127.0.0.1:9", "--timeout", "1", "--flash-command",
               command + " {elf} {port}"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    (rec,) = records(log)
    elf = Path(rec["args"][0])
    assert elf.name == "firmware.elf" and rec["args"][1] == "socket://127.0.0.1:9"
    assert rec["files"][str(elf)] == sha(elf) and "myst" in str(elf)


FAKE_PROBE = """\
#!/bin/sh
# Stands in for a probe: "flashes" $1 (the ELF) by booting it in QEMU with its UART on
# the TCP port of $2 (socket://127.0.0.1:PORT), where kiln then finds the board.
P=$(echo "$2" | sed 's/.*://')
kill $(cat "{dir}/$P.pid" 2>/dev/null) 2>/dev/null
echo "$1" >> "{dir}/flashed.txt"
qemu-system-arm -M mps2-an386 -nographic -monitor none \\
    -serial tcp:127.0.0.1:$P,server=on,wait=off -icount shift=6 \\
    -kernel "$1" >/dev/null 2>&1 &
echo $! > "{dir}/$P.pid"
"""


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_run_flash_with_the_board_files_command_then_talks_to_the_board(tmp_path, capsys):
    """A real-board file (mps2-an386's facts, runs_on = "board") whose flash command is a
    script that boots the ELF in QEMU with its UART on a TCP port: `kiln run MODEL --board
    FILE --port socket://... --flash` flashes the cached host-driven firmware, reaches it
    over a real serial stack, and gets the outputs kiln's own mps2-an386 gives."""
    import socket
    import subprocess

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    script = tmp_path / "fake_probe.sh"
    script.write_text(FAKE_PROBE.replace("{dir}", str(tmp_path)))
    script.chmod(0o755)
    text = (Path(get_board("mps2-an386").source)).read_text()
    text = text.replace('name = "mps2-an386"', 'name = "fake-board"').replace(
        'runs_on = "qemu"', 'runs_on = "board"').replace('qemu = { machine = "mps2-an386" }', "")
    board = tmp_path / "fake.toml"
    board.write_text(text + f'flashing = {{ command = "{script} {{elf}} {{port}}" }}\n')
    assert get_board(str(board)).flashing.command.endswith("{elf} {port}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = f"socket://127.0.0.1:{s.getsockname()[1]}"
    try:
        rc = main(["run", str(DIGITS), "--board", str(board), "--port", port, "--flash",
                   "--output", str(tmp_path / "out.npz")])
        out, err = capsys.readouterr()
        assert rc == 0, err
    finally:
        for pid in tmp_path.glob("*.pid"):
            subprocess.run(["kill", pid.read_text().strip()], capture_output=True)
    assert "onto fake-board with" in out and "per inference on fake-board at" in out
    (elf,) = (tmp_path / "flashed.txt").read_text().split()
    assert Path(elf).name == "firmware.elf" and "fake-board" in elf
    assert main(["run", str(DIGITS), "--board", "mps2-an386",
                 "--output", str(tmp_path / "ref.npz")]) == 0
    import numpy as np
    assert np.array_equal(np.load(tmp_path / "out.npz")["output_0"],
                          np.load(tmp_path / "ref.npz")["output_0"])
