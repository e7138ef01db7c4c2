"""Run a firmware ELF on QEMU: the board's machine, semihosting exit, -icount timing.

With `-icount shift=N` QEMU advances its virtual clock by 2**N ns per executed
instruction, so SysTick (counting the board's core clock) ticks
clock_hz * 2**N / 1e9 times per instruction, deterministically. The figure kiln
reports is therefore instructions = ticks * 1e9 / clock_hz / 2**N; it does not
model pipeline stalls or memory wait states (QEMU models no cycles).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from kiln.compiler.errors import BoardError, TransportError

from .boards import Board
from .toolchain import QEMU_ARM, find_tool

ICOUNT_SHIFT = 6
DEFAULT_TIMEOUT_S = 120.0


def qemu_args(board: Board, icount_shift: int = ICOUNT_SHIFT) -> list[str]:
    """The options (without the binary and -kernel) that run `board` here."""
    if board.qemu is None:
        raise BoardError(f"{board.name} is not emulated by QEMU (runs on: {board.runs_on})")
    return [
        "-M", board.qemu.machine,
        "-nographic", "-monitor", "none", "-serial", "stdio",
        "-semihosting-config", "enable=on,target=native",
        "-icount", f"shift={icount_shift}",
        *board.qemu.args,
    ]


def ticks_to_instructions(ticks: int, clock_hz: int, icount_shift: int = ICOUNT_SHIFT) -> int:
    return round(ticks * 1e9 / clock_hz / 2 ** icount_shift)


@dataclass
class QemuRun:
    stdout: str
    stderr: str
    exit_code: int


def run_elf(board: Board, elf: str | Path, timeout: float = DEFAULT_TIMEOUT_S,
            icount_shift: int = ICOUNT_SHIFT) -> QemuRun:
    """Boot `elf` on the board's machine and wait for its semihosting exit."""
    argv = [find_tool(QEMU_ARM), *qemu_args(board, icount_shift), "-kernel", str(elf)]
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace").strip().splitlines()[-2:]
        raise TransportError(f"QEMU ({board.qemu.machine}) did not exit within {timeout:g} s; "
                             f"last output: {' | '.join(out)!r}") from None
    return QemuRun(proc.stdout.decode("utf-8", "replace"),
                   proc.stderr.decode("utf-8", "replace"), proc.returncode)
