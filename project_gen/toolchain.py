"""Finding the external tools a project needs, with one clear line when one is missing."""

from __future__ import annotations

import shutil

from kiln.compiler.errors import BuildError

from .boards import Board

ARM_GCC = "arm-none-eabi-gcc"
QEMU_ARM = "qemu-system-arm"
MAKE = "make"

_INSTALL_HINT = {
    ARM_GCC: "install gcc-arm-none-eabi and libnewlib-arm-none-eabi (Debian/Ubuntu)",
    QEMU_ARM: "install qemu-system-arm (Debian/Ubuntu)",
    MAKE: "install make",
    "cc": "install a C compiler (gcc or clang)",
}


def find_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BuildError(f"{name} not found on PATH: {_INSTALL_HINT.get(name, 'install it')}")
    return path


def have_tool(name: str) -> bool:
    return shutil.which(name) is not None


def compiler_for(board: Board) -> str:
    return "cc" if board.is_host else ARM_GCC
