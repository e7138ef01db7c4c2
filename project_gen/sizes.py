"""Flash and RAM use of a firmware: from its ELF after a build, or a lower bound before one.

Flash holds every allocated section placed in the FLASH region plus the load
image of .data; RAM holds .data, .bss (which contains the arena) and the stack
reserve. Weights are the `.kiln_weights` section; the arena is the `kiln_arena`
array of the standalone main.c, or the RPC server's `kiln_rpc_arena_buf`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from kiln.compiler.errors import FitError

from .boards import Board, Region
from .elf import read_elf

ARENA_SYMBOLS = ("kiln_arena", "kiln_rpc_arena_buf")
WEIGHTS_SECTION = ".kiln_weights"
INPUTS_SECTION = ".kiln_inputs"
STACK_SECTION = ".stack"


@dataclass
class RegionUse:
    region: str
    used: int
    size: int | None          # None on the host board: no limit to check

    @property
    def free(self) -> int | None:
        return None if self.size is None else self.size - self.used

    def percent(self) -> str:
        return "" if not self.size else f"{100.0 * self.used / self.size:.1f}%"


@dataclass
class SizeReport:
    board: str
    flash: RegionUse
    ram: RegionUse
    code: int                 # the rest of flash: code, rodata, vectors, the .data image
    weights: int
    inputs: int               # standalone mode's baked sample inputs
    arena: int
    static_ram: int           # .data + .bss, the arena included
    stack_reserved: int

    def to_json(self) -> dict:
        d = asdict(self)
        for key in ("flash", "ram"):
            d[key]["free"] = getattr(self, key).free
        return d

    def lines(self) -> list[str]:
        """The terminal form: one line per region."""
        def use(r: RegionUse) -> str:
            limit = f" / {r.size:>10,} B ({r.percent()})" if r.size else " B"
            return f"{r.region:<6}{r.used:>10,}{limit}"
        return [
            f"{use(self.flash)}   code {self.code:,}, weights {self.weights:,}"
            + (f", sample inputs {self.inputs:,}" if self.inputs else ""),
            f"{use(self.ram)}   arena {self.arena:,}, other static "
            f"{self.static_ram - self.arena:,}, stack reserve {self.stack_reserved:,}",
        ]


def size_report(elf_path: str | Path, board: Board) -> SizeReport:
    elf = read_elf(elf_path)
    alloc = [s for s in elf.sections if s.alloc and s.size]

    def in_region(region: Region | None, addr: int) -> bool:
        return region is not None and region.contains(addr)

    if board.is_host:
        # No memory map: everything with bytes in the image counts as "flash".
        flash_used = sum(s.size for s in alloc if not s.nobits)
        ram_used = sum(s.size for s in alloc if s.flags & 0x1)  # SHF_WRITE
        stack = 0
    else:
        flash_used = sum(s.size for s in alloc
                         if in_region(board.flash, s.addr) or not s.nobits)
        ram_used = sum(s.size for s in alloc if in_region(board.ram, s.addr))
        stack_sec = elf.section(STACK_SECTION)
        stack = stack_sec.size if stack_sec else 0

    def section_size(name: str) -> int:
        sec = elf.section(name)
        return sec.size if sec else 0

    weights, inputs = section_size(WEIGHTS_SECTION), section_size(INPUTS_SECTION)
    arena_sym = next((elf.symbols[n] for n in ARENA_SYMBOLS if n in elf.symbols), None)
    return SizeReport(
        board=board.name,
        flash=RegionUse(board.flash.name if board.flash else "image", flash_used,
                        board.flash.size if board.flash else None),
        ram=RegionUse(board.ram.name if board.ram else "data", ram_used,
                      board.ram.size if board.ram else None),
        code=flash_used - weights - inputs,
        weights=weights,
        inputs=inputs,
        arena=arena_sym.size if arena_sym else 0,
        static_ram=ram_used - stack,
        stack_reserved=stack,
    )


_OVERFLOW = re.compile(r"region `(\w+)' overflowed by (\d+) bytes")


def linker_overflows(output: str) -> dict[str, int]:
    """{region: bytes over} from ld's "region `RAM' overflowed by N bytes" lines."""
    found: dict[str, int] = {}
    for region, over in _OVERFLOW.findall(output):
        found[region] = max(found.get(region, 0), int(over))
    return found


def overflow_error(model: str, board: Board, overflows: dict[str, int],
                   at_least: bool = False) -> FitError:
    """One line: which region overflows by how many bytes, for each region that does."""
    regions = {"FLASH": board.flash, "RAM": board.ram}
    by = "by at least" if at_least else "by"
    parts = []
    for name, over in overflows.items():
        region = regions.get(name)
        of = f" (the board has {region.size:,})" if region else ""
        parts.append(f"{name} overflows {by} {over:,} bytes{of}")
    return FitError(f"{model} does not fit {board.name}: {'; '.join(parts)}")


def check_fits(model: str, board: Board, weights_bytes: int, arena_bytes: int,
               inputs_bytes: int = 0, samples: int = 0) -> None:
    """Refuse, before any build, a model whose weights (plus the `inputs_bytes` of
    standalone firmware's `samples` baked sample inputs, in flash too) or arena alone
    exceed the board.

    A lower bound: code, the stack and other statics come on top, and the
    linker's check after the build catches the rest. When only the sample inputs
    push the flash over, the error says how to do without them.
    """
    if board.is_host:
        return
    overs = {}
    if weights_bytes + inputs_bytes > board.flash.size:
        overs["FLASH"] = weights_bytes + inputs_bytes - board.flash.size
    if arena_bytes + board.stack_bytes > board.ram.size:
        overs["RAM"] = arena_bytes + board.stack_bytes - board.ram.size
    if not overs:
        return
    error = overflow_error(model, board, overs, at_least=True)
    if list(overs) == ["FLASH"] and weights_bytes <= board.flash.size:
        fewer = " or with fewer samples" if samples > 1 else ""
        error = FitError(f"{error}, counting {inputs_bytes:,} bytes of baked sample inputs "
                         f"({samples} sample{'s' if samples != 1 else ''}); the weights fit "
                         f"without them: create the project in host-driven mode "
                         f"(--mode host-driven){fewer}")
    raise error
