"""Just enough of an ELF reader for size reports: section headers and the symbol table.

Reads 32- and 64-bit little-endian ELF files (the ARM firmware and the host
build), so the size report needs no binutils and sees exactly what the linker
placed where.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from kiln.compiler.errors import BuildError, InputError
from kiln.compiler.fsutil import read_regular_file

SHF_ALLOC = 0x2
SHT_SYMTAB = 2
SHT_NOBITS = 8
MAX_ELF_BYTES = 256 << 20    # firmware for a microcontroller; a host build is a few MB
MAX_SYMBOLS = 1 << 20        # symbol table entries read at most (firmware has thousands)


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    flags: int
    addr: int
    size: int

    @property
    def alloc(self) -> bool:
        return bool(self.flags & SHF_ALLOC)

    @property
    def nobits(self) -> bool:
        """Occupies memory at run time but no bytes in the image (.bss, .stack)."""
        return self.type == SHT_NOBITS


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int


@dataclass(frozen=True)
class Elf:
    sections: list[Section]
    symbols: dict[str, Symbol]

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)


def read_elf(path: str | Path) -> Elf:
    """Sections and symbols of the ELF at `path`: a regular file of bounded size whose
    every offset is checked (BuildError naming the file for a truncated or damaged one)."""
    try:
        data = read_regular_file(path, "firmware", MAX_ELF_BYTES)
    except InputError as e:
        raise BuildError(str(e)) from None
    if len(data) < 0x40 or data[:4] != b"\x7fELF" or data[5] != 1:
        raise BuildError(f"{path}: not a little-endian ELF file")
    try:
        return _parse(data)
    except (struct.error, IndexError, ValueError) as e:   # offsets past the end, no NUL
        raise BuildError(f"{path}: damaged ELF file ({e})") from None


def _parse(data: bytes) -> Elf:
    is64 = data[4] == 2
    if is64:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        sh_fmt = "<IIQQQQIIQQ"
    else:
        shoff, = struct.unpack_from("<I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x2E)
        sh_fmt = "<IIIIIIIIII"

    raw = [struct.unpack_from(sh_fmt, data, shoff + i * shentsize) for i in range(shnum)]
    # name, type, flags, addr, offset, size, link, info, addralign, entsize
    strtab_off = raw[shstrndx][4]

    def cstr(offset: int) -> str:
        return data[offset:data.index(b"\0", offset)].decode("ascii", "replace")

    sections = [Section(cstr(strtab_off + h[0]), h[1], h[2], h[3], h[5]) for h in raw]

    symbols: dict[str, Symbol] = {}
    for h in raw:
        if h[1] != SHT_SYMTAB:
            continue
        names_off = raw[h[6]][4]
        entsize = h[9]
        if entsize < (24 if is64 else 16) or h[5] // entsize > MAX_SYMBOLS:
            raise ValueError(f"symbol table of {h[5]:,} bytes in entries of {entsize}")
        for off in range(h[4], h[4] + h[5], entsize):
            if is64:
                st_name, _info, _other, _shndx, value, size = struct.unpack_from("<IBBHQQ", data, off)
            else:
                st_name, value, size, _info, _other, _shndx = struct.unpack_from("<IIIBBH", data, off)
            if st_name:
                name = cstr(names_off + st_name)
                symbols.setdefault(name, Symbol(name, value, size))
    return Elf(sections, symbols)
