"""Flashing a built firmware onto a real board: the one runner of flash commands.

A flash command is the user's shell line (`--flash-command`, or `flashing.command` in
their board file) with placeholders kiln fills in: {elf}, {hex}, {bin} (the firmware's
files) and {port} (the board's serial port). What kiln puts in is shell-quoted
(kiln.compiler.escape.shell_word), so a space or `;` in a path or port stays one
argument; the command's own text is the user's and runs as written, only when they ask
to flash (`kiln flash`, `--flash`, `kiln tune --flash-command`). A board file may
instead name pyOCD's target (`flashing.pyocd_target`): pyOCD is an optional extra
(`pip install 'kiln[flash]'`), imported only then.

QEMU and host boards are not flashed: kiln launches them (`kiln run`).
"""

from __future__ import annotations

import argparse
import string
import subprocess
import sys
from pathlib import Path

from kiln.compiler.errors import BoardError, BuildError, InputError
from kiln.compiler.escape import shell_word, terminal

from .boards import Board, check_flash_command

FLASH_TIMEOUT_S = 600.0
FIRMWARE_FILES = ("elf", "hex", "bin")


def firmware_files(build_dir: Path) -> dict[str, Path]:
    """{placeholder: file} of a built firmware in `build_dir` (the project's build/)."""
    build_dir = Path(build_dir).absolute()      # the command may change folders
    return {kind: build_dir / f"firmware.{kind}" for kind in FIRMWARE_FILES}


def placeholders(command: str) -> set[str]:
    """The placeholders `command` uses (BoardError unless only {elf} {hex} {bin} {port})."""
    check_flash_command(command, "the flash command")
    return {f for _, f, _, _ in string.Formatter().parse(command) if f is not None}


def flash_command_line(command: str, files: dict[str, Path], port: str | None) -> str:
    """`command` with its placeholders replaced by the shell-quoted files and port.
    BoardError for a command with another {field} (str.format would evaluate
    `{elf.__class__}`), InputError when it uses {port} and no port is given."""
    if "port" in placeholders(command) and port is None:
        raise InputError("the flash command uses {port}: pass the board's port (--port)")
    return command.format(**{k: shell_word(v) for k, v in files.items()},
                          port=shell_word(port if port is not None else ""))


def run_flash_command(command: str, files: dict[str, Path], port: str | None = None,
                      timeout: float = FLASH_TIMEOUT_S) -> str:
    """Run the flash command (flash_command_line) with sh; returns the line run.
    BuildError with the command's last output when it fails or outlives `timeout`."""
    used = placeholders(command)
    missing = [str(f) for kind, f in files.items() if kind in used and not f.is_file()]
    if missing:
        raise BuildError(f"{missing[0]} does not exist: build the project first")
    line = flash_command_line(command, files, port)
    try:
        done = subprocess.run(line, shell=True, capture_output=True, text=True,
                              errors="replace", stdin=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BuildError(f"flash command did not finish within {timeout:g} s: "
                         f"{terminal(line)}") from None
    if done.returncode != 0:
        out = (done.stderr or done.stdout).strip()
        raise BuildError(f"flash command failed ({done.returncode}): {terminal(line)}"
                         + (f": {terminal(out[-300:])}" if out else ""))
    return line


def flash_with_pyocd(target: str, hex_file: Path, probe: str | None = None) -> str:
    """Program `hex_file` with pyOCD onto the chip `target` (the only probe attached, or
    the probe whose unique id is `probe`)."""
    try:
        from pyocd.core.helpers import ConnectHelper
        from pyocd.flash.file_programmer import FileProgrammer
    except ImportError:
        raise BoardError(f"this board is flashed with pyOCD (target {target}), which is not "
                         f"installed: pip install 'kiln[flash]' (or pyocd), or pass "
                         f"--flash-command") from None
    if not hex_file.is_file():
        raise BuildError(f"{hex_file} does not exist: build the project first")
    with ConnectHelper.session_with_chosen_probe(target_override=target, unique_id=probe,
                                                 blocking=False) as session:
        if session is None:
            raise BoardError("pyOCD found no debug probe: connect the board (or pass "
                             "--flash-command)")
        FileProgrammer(session).program(str(hex_file))
    return f"pyOCD {target}: {hex_file}"


def launched_by(board: Board) -> str | None:
    """What runs a board kiln launches itself instead of flashing it ("QEMU (mps2-an386)",
    "a host process"); None for a real board, which is flashed."""
    if board.runs_on == "qemu":
        return f"QEMU ({board.qemu.machine})"
    return "a host process" if board.runs_on == "host" else None


def flash_firmware(board: Board, build_dir: Path, port: str | None = None,
                   command: str | None = None) -> str:
    """Flash the firmware built in `build_dir` onto `board`: with `command` when given
    (--flash-command), else the board file's `flashing` (a command, or pyOCD). BoardError
    for a board kiln launches (QEMU, host) or one whose file says nothing of flashing.
    Returns how it was flashed (the command line run, or pyOCD's target and file)."""
    how = launched_by(board)
    if how is not None:
        raise BoardError(f"{board.name} runs on {how}: there is nothing to flash; `kiln run` "
                         f"launches it")
    if command is None and board.flashing is not None:
        command = board.flashing.command
        if command is None:
            return flash_with_pyocd(board.flashing.pyocd_target,
                                    firmware_files(build_dir)["hex"])
    if command is None:
        raise BoardError(f"{board.name}'s board file does not say how it is flashed: pass "
                         f"--flash-command 'CMD {{hex}}' or add flashing = {{ command = ... }} "
                         f"(or pyocd_target) to it")
    return run_flash_command(command, firmware_files(build_dir), port)


# -- the command line --------------------------------------------------------------------

def add_flash_arguments(p: argparse.ArgumentParser, flash_switch: bool = True) -> None:
    """--flash-command (and --flash, and --port for `kiln flash`), shared by `kiln flash`,
    `run` and `profile`."""
    if flash_switch:
        p.add_argument("--flash", action="store_true",
                       help="flash the firmware onto the board at --port first, as its board "
                            "file says (flashing = ...) or with --flash-command")
    else:
        p.add_argument("--port", metavar="URL", help="the board's port, for {port}")
    p.add_argument("--flash-command", metavar="CMD",
                   help="shell command that flashes the firmware: {elf}, {hex}, {bin} become "
                        "its files and {port} the board's port (quoted), e.g. "
                        "'st-flash write {bin} 0x08000000'" +
                        ("; implies --flash" if flash_switch else ""))


def flash_if_asked(project, args: argparse.Namespace) -> bool:
    """For `run` / `profile` --flash / --flash-command: build and flash `project` onto its
    board at args.port first. A QEMU or host board is launched, not flashed (a note on
    stderr). Returns whether it flashed."""
    command = getattr(args, "flash_command", None)
    if not (getattr(args, "flash", False) or command):
        return False
    board = project.board
    launcher = launched_by(board)
    if launcher is not None:
        print(f"kiln: note: {board.name} runs on {launcher}: nothing to flash, kiln "
              f"launches it", file=sys.stderr)
        return False
    how = flash_project(project, getattr(args, "port", None), command)
    print(f"flashed {project.path} onto {board.name} with {terminal(how)}")
    return True


def flash_project(project, port: str | None, command: str | None) -> str:
    """Build `project` if needed and flash it onto its board; how it was done."""
    project.build()
    return flash_firmware(project.board, project.path / "build", port, command)
