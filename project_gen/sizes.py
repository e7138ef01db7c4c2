"""Flash and RAM use of a firmware: from its ELF after a build; before one, a lower bound
(check_fits) and the verdict the build will reach (check_link_fits: upper bounds, and a
link of the rendered firmware when they may not fit).

Flash holds every allocated section placed in the FLASH region plus the load
image of .data; RAM holds .data, .bss (which contains the arena) and the stack
reserve. Weights are the `.kiln_weights` section; the arena is the `kiln_arena`
array of the standalone main.c, or the RPC server's `kiln_rpc_arena_buf`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kiln.compiler.errors import FitError

from .boards import Board, Region
from .elf import read_elf

ARENA_SYMBOLS = ("kiln_arena", "kiln_rpc_arena_buf")
WEIGHTS_SECTION = ".kiln_weights"
INPUTS_SECTION = ".kiln_inputs"
STACK_SECTION = ".stack"
STATE_SYMBOL = "kiln_state"


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
    # A multi-region board (kiln.project_gen.regions): every region's use, and what each
    # holds ({"code", "weights", "inputs", "arena", "state", "stack", "other"}: bytes).
    regions: list[RegionUse] = field(default_factory=list)
    contents: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict:
        d = asdict(self)
        for key in ("flash", "ram"):
            d[key]["free"] = getattr(self, key).free
        if not self.regions:
            del d["regions"], d["contents"]
        for r, j in zip(self.regions, d.get("regions", [])):
            j["free"] = r.free
        return d

    def lines(self) -> list[str]:
        """The terminal form: one line per region."""
        def use(r: RegionUse) -> str:
            limit = f" / {r.size:>10,} B ({r.percent()})" if r.size else " B"
            return f"{r.region:<6}{r.used:>10,}{limit}"
        if self.regions:            # a column per figure, as wide as the largest
            name_w = max(6, *(len(r.region) + 1 for r in self.regions))
            used_w = max(len(f"{r.used:,}") for r in self.regions)
            size_w = max(len(f"{r.size:,}") for r in self.regions)
            out = []
            for r in self.regions:
                held = ", ".join(f"{k} {n:,}" for k, n in
                                 self.contents.get(r.region, {}).items() if n)
                out.append(f"{r.region:<{name_w}}{r.used:>{used_w},} / {r.size:>{size_w},} B "
                           f"({r.percent():>5})   {held or 'empty'}")
            return out
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
    if not board.is_host and board.multi_region:
        return _regions_report(elf, board, arena_sym)
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


def _regions_report(elf, board: Board, arena_sym) -> SizeReport:
    """size_report of a multi-region board: each region's use and contents. The .data
    image counts in `flash` (its load address); everything else where it runs."""
    alloc = [s for s in elf.sections if s.alloc and s.size]
    state_sym = elf.symbols.get(STATE_SYMBOL)
    contents: dict[str, dict[str, int]] = {}
    uses = []
    for region in board.memories:
        mine = [s for s in alloc if region.contains(s.addr)]
        c = {"code": 0, "weights": sum(s.size for s in mine if s.name.startswith(WEIGHTS_SECTION)),
             "inputs": sum(s.size for s in mine if s.name == INPUTS_SECTION),
             "arena": arena_sym.size if arena_sym and region.contains(arena_sym.value) else 0,
             "state": state_sym.size if state_sym and region.contains(state_sym.value) else 0,
             "stack": sum(s.size for s in mine if s.name == STACK_SECTION), "other": 0}
        used = sum(s.size for s in mine)
        if region is board.flash:
            data = elf.section(".data")
            used += data.size if data else 0
            c["code"] = used - c["weights"] - c["inputs"]
        else:
            c["other"] = used - c["weights"] - c["inputs"] - c["arena"] - c["state"] - c["stack"]
        contents[region.name] = c
        uses.append(RegionUse(region.name, used, region.size))
    flash, ram = uses[0], uses[1]
    arena = arena_sym.size if arena_sym else 0
    stack = sum(c["stack"] for c in contents.values())
    return SizeReport(
        board=board.name, flash=flash, ram=ram,
        code=contents[board.flash.name]["code"],
        weights=sum(c["weights"] for c in contents.values()),
        inputs=sum(c["inputs"] for c in contents.values()),
        arena=arena, static_ram=ram.used - stack, stack_reserved=stack,
        regions=uses, contents=contents)


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
    regions = {r.name: r for r in board.memories}
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
    if board.multi_region:
        _check_fits_regions(model, board, weights_bytes, arena_bytes, inputs_bytes)
        return
    overs = {}
    flash, ram = board.flash.name, board.ram.name
    if weights_bytes + inputs_bytes > board.flash.size:
        overs[flash] = weights_bytes + inputs_bytes - board.flash.size
    if arena_bytes + board.stack_bytes > board.ram.size:
        overs[ram] = arena_bytes + board.stack_bytes - board.ram.size
    if not overs:
        return
    error = overflow_error(model, board, overs, at_least=True)
    if list(overs) == [flash] and weights_bytes <= board.flash.size:
        fewer = " or with fewer samples" if samples > 1 else ""
        error = FitError(f"{error}, counting {inputs_bytes:,} bytes of baked sample inputs "
                         f"({samples} sample{'s' if samples != 1 else ''}); the weights fit "
                         f"without them: create the project in host-driven mode "
                         f"(--mode host-driven){fewer}")
    raise error


def _check_fits_regions(model: str, board: Board, weights_bytes: int, arena_bytes: int,
                        inputs_bytes: int) -> None:
    """check_fits on a multi-region board: the constants against every loaded region, the
    arena, state and stack against every RAM region (lower bounds; which region takes
    what is kiln.project_gen.regions's placement, checked by the estimate and the link)."""
    loaded = [r for r in board.memories if r.loaded]
    ram = [r for r in board.memories if r.kind == "ram"]
    parts = []
    over = weights_bytes + inputs_bytes - sum(r.size for r in loaded)
    if over > 0:
        parts.append(f"the constants overflow {'+'.join(r.name for r in loaded)} by at "
                     f"least {over:,} bytes")
    # RAM regions that hold constants hold them in place of activations
    over = arena_bytes + board.stack_bytes - sum(r.size for r in ram) + \
        max(0, weights_bytes + inputs_bytes - sum(r.size for r in loaded if r.kind != "ram"))
    if over > 0:
        parts.append(f"{'+'.join(r.name for r in ram)} overflow by at least {over:,} bytes")
    if parts:
        raise FitError(f"{model} does not fit {board.name}: {'; '.join(parts)}")


# --- the fit verdict before a build -------------------------------------------------------
#
# Flash = code + weights + sample inputs (+ the .data image, 0 in kiln's firmware); RAM =
# arena + model state + other statics + the stack reserve. Everything but the code is
# known exactly from the compiler's report. The code (kiln's runtime, the kernels a model
# calls, one function per layer, the RPC server in host-driven mode, newlib's memcpy & co.)
# is bounded by CODE_BOUND below; when that bound says the firmware may not fit, the
# verdict comes from linking it (link_fit), so `project create`, `info --board` and the
# build agree exactly.
#
# CODE_BOUND: base + per_layer × layers + per_kernel × distinct kernels, in bytes, the
# smallest such line above the code (flash minus .kiln_weights and .kiln_inputs) of all 80
# builds of the four MLPerf Tiny int8 models × the 10 non-host boards × both modes
# (benchmarks/fit_check.py, arm-none-eabi-gcc 12.2 -O2, Nov 2026; per kernel re-fit
# 1,650 -> 4,100 B after the depthwise kernels' unrolled assembly: VWW's code on the M7 is
# 41,180 B standalone, 44,600 B host-driven, for 30 layers and 7 kernels), then +25% for
# kernels those models do not call. It only decides when a link is worth making: a bound too low for an unusual model
# leaves the linker's own check at build time, never a wrong "does not fit".
CODE_BOUND = {"standalone": (7242, 180, 4100), "host-driven": (10946, 180, 4100)}
CODE_BOUND_MARGIN = 1.25
# RAM besides the arena and the stack reserve: measured 8-20 B standalone (UART driver
# state), 2,104-2,128 B host-driven (RPC frame buffers) on the same builds; rounded up.
OTHER_STATIC_RAM = {"standalone": 64, "host-driven": 2176}
SECTION_ALIGN = 16          # KILN_WEIGHTS / KILN_INPUTS arrays are aligned(16)


def code_bound(report: dict, mode: str) -> int:
    """An upper bound of the flash the firmware's code takes (see CODE_BOUND)."""
    base, per_layer, per_kernel = CODE_BOUND[mode]
    ops = report.get("ops", [])
    kernels = {op.get("kernel") for op in ops}
    return int(CODE_BOUND_MARGIN * (base + per_layer * len(ops) + per_kernel * len(kernels)))


@dataclass
class FitVerdict:
    """Whether a firmware fits its board, and how close: from the linker (`linked`) or
    before any build (flash an upper bound: code_bound; `overflows` then empty)."""
    board: str
    mode: str
    flash: RegionUse
    ram: RegionUse
    overflows: dict[str, int]       # {region: bytes over}, from the linker
    linked: bool                    # the figures are the linker's, not an estimate
    regions: list[RegionUse] = field(default_factory=list)    # a multi-region board's

    @property
    def fits(self) -> bool:
        return not self.overflows

    @property
    def uses(self) -> list[RegionUse]:
        return self.regions or [self.flash, self.ram]

    def line(self) -> str:
        """"fits: flash X of Y, RAM X of Y" or "does not fit: FLASH overflows by N bytes"."""
        if self.overflows:
            return "does not fit: " + "; ".join(f"{r} overflows by {n:,} bytes"
                                                for r, n in self.overflows.items())
        at_most = "" if self.linked else "at most "
        how = "linked" if self.linked else "estimated, code bounded"
        if self.regions:        # the regions that hold something
            return ("fits: " + ", ".join(f"{r.region} {at_most}{r.used:,} of {r.size:,}"
                                         for r in self.regions if r.used) + f" ({how})")
        return (f"fits: flash {at_most}{self.flash.used:,} of {self.flash.size:,}, "
                f"RAM {at_most}{self.ram.used:,} of {self.ram.size:,} ({how})")


def estimate_fit(report: dict, board: Board, mode: str, inputs_bytes: int = 0) -> FitVerdict:
    """The verdict before a build: flash and RAM upper bounds from the report (no link).
    `overflows` stays empty: only the linker says by how much a firmware overflows."""
    layers = max(1, len(report.get("ops", [])))
    padding = SECTION_ALIGN * (3 * layers + 1)      # per const array: filter, bias, requant
    flash = (int(report.get("weights_bytes", 0)) + padding + code_bound(report, mode)
             + (inputs_bytes + SECTION_ALIGN if inputs_bytes else 0))
    # the model state (stateful models) is a static array of model.c, .bss like the rest
    ram = (int(report.get("arena_bytes", 0)) + int(report.get("state_bytes", 0))
           + OTHER_STATIC_RAM[mode] + board.stack_bytes)
    placement = report.get("placement")
    if board.multi_region and placement:
        return _estimate_regions(report, placement, board, mode, inputs_bytes)
    return FitVerdict(board=board.name, mode=mode,
                      flash=RegionUse(board.flash.name, flash, board.flash.size),
                      ram=RegionUse(board.ram.name, ram, board.ram.size),
                      overflows={}, linked=False)


def _estimate_regions(report: dict, placement: dict, board: Board, mode: str,
                      inputs_bytes: int) -> FitVerdict:
    """estimate_fit on a multi-region board: each region's placed buffers (padded), plus
    the code bound in `flash`, the statics and stack in `ram`, the sample inputs in their
    region (regions.inputs_region), and one alignment gap per output section."""
    from .regions import inputs_region

    where_inputs = inputs_region(placement, board, inputs_bytes) if inputs_bytes else None
    uses = []
    for r in placement["regions"]:
        used = r["placed"] + (2 * SECTION_ALIGN if r["placed"] else 0)
        if r["name"] == board.flash.name:
            used += code_bound(report, mode) + SECTION_ALIGN
        if r["name"] == board.ram.name:
            used += OTHER_STATIC_RAM[mode] + board.stack_bytes
        if r["name"] == where_inputs:
            used += inputs_bytes + SECTION_ALIGN
        uses.append(RegionUse(r["name"], used, r["size"]))
    return FitVerdict(board=board.name, mode=mode, flash=uses[0], ram=uses[1],
                      overflows={}, linked=False, regions=uses)


def may_overflow(verdict: FitVerdict) -> bool:
    """Whether the upper bounds of an estimate exceed a region (a link then decides)."""
    return any(u.used > u.size for u in verdict.uses)


def link_fit(write, board: Board, estimate: FitVerdict, timeout_s: float = 600.0
             ) -> FitVerdict | None:
    """Link the firmware `write(folder)` renders (the project's own Makefile, in a
    temporary folder) and return the linker's verdict; None when the build fails for
    another reason than a region overflowing (the project's own build reports that).
    A region that does not overflow when another does keeps the `estimate`'s figure."""
    import os
    import subprocess
    import tempfile

    from .toolchain import MAKE, find_tool

    with tempfile.TemporaryDirectory(prefix="kiln-fit-") as tmp:
        folder = Path(tmp)
        write(folder)
        argv = [find_tool(MAKE), "-C", str(folder), f"-j{os.cpu_count() or 1}",
                "build/firmware.elf"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None                   # no verdict: the build will say what it says
        if proc.returncode != 0:
            overflows = linker_overflows(proc.stdout + proc.stderr)
            if not overflows:
                return None

            def region(use: RegionUse) -> RegionUse:
                over = overflows.get(use.region)
                return use if over is None else RegionUse(use.region, use.size + over, use.size)
            return FitVerdict(board=board.name, mode=estimate.mode,
                              flash=region(estimate.flash), ram=region(estimate.ram),
                              overflows=overflows, linked=True,
                              regions=[region(u) for u in estimate.regions])
        r = size_report(folder / "build" / "firmware.elf", board)
        return FitVerdict(board=board.name, mode=estimate.mode, flash=r.flash, ram=r.ram,
                          overflows={}, linked=True, regions=r.regions)


def check_link_fits(model: str, report: dict, board: Board, mode: str, inputs_bytes: int,
                    samples: int, write, too_large: FitError | None = None
                    ) -> FitVerdict | None:
    """The verdict `kiln project build` will reach, before it: the estimate when its
    upper bounds fit, else the linker's on the rendered firmware (`write(folder)`).
    Raises FitError with the linker's exact overflow, as the build would. `too_large`:
    check_fits's error (weights or arena alone too large), raised as is when no link can
    be made or the constants exceed twice the flash. `inputs_bytes`: the baked sample
    inputs (`samples` of them). None on the host board; the estimate when the cross
    toolchain is missing (the build needs it)."""
    from .toolchain import MAKE, compiler_for, have_tool

    if board.is_host:
        return None
    verdict = estimate_fit(report, board, mode, inputs_bytes)
    can_link = have_tool(compiler_for(board)) and have_tool(MAKE)
    # Constants more than twice the flash: no link (compiling megabytes of weights.c
    # for a count past the whole flash); "by at least N" says enough.
    room = sum(r.size for r in board.memories if r.loaded) if board.multi_region \
        else board.flash.size
    huge = int(report.get("weights_bytes", 0)) + inputs_bytes > 2 * room
    if too_large is not None and (huge or not can_link):
        raise too_large
    if not may_overflow(verdict) or not can_link:
        return verdict
    linked = link_fit(write, board, verdict)
    if linked is None:
        if too_large is not None:
            raise too_large
        return verdict
    if linked.overflows:
        error = overflow_error(model, board, linked.overflows)
        flash_over = linked.overflows.get(board.flash.name, 0)
        if list(linked.overflows) == [board.flash.name] and 0 < flash_over <= inputs_bytes:
            # Host-driven firmware bakes no samples but has the RPC server's code: named
            # only when its upper bounds fit (VWW on lm3s6965evb overflows either way).
            hints = (["with fewer samples it may fit"] if samples > 1 else []) + \
                (["it fits in host-driven mode (--mode host-driven: no baked samples)"]
                 if not may_overflow(estimate_fit(report, board, "host-driven")) else [])
            error = FitError(f"{error}, counting {inputs_bytes:,} bytes of baked sample "
                             f"inputs ({samples} sample{'s' if samples != 1 else ''})"
                             + (f": {'; '.join(hints)}" if hints else ""))
        raise error
    return linked
