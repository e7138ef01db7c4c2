"""Memory regions: where a model's buffers go on a board with several memories.

A board file may list memories besides its `flash` and `ram` (boards/README.md, "Memory
regions"): TCMs, SRAM banks, external RAM, each with a kind ("flash": read-only at run
time; "ram": read-write), a speed rank (0 fastest) and whether the loader fills it with
the image's bytes (`loaded`). On such a board kiln places, per model:

- fixed: the vector table, the code and read-only data (and the .data image) in `flash`
  (the core boots from it); .data, .bss and the stack in `ram` (the start-up code zeroes
  .bss there and the heap check of syscalls.c sits below the stack): give `ram` the
  fastest data memory. Their bytes are reserved first (the code by its upper bound,
  sizes.code_bound, of the larger host-driven firmware);
- placed: every constant array of the weights (one item each: a model's weights split
  across regions array by array, so layer by layer), the arena (activations and every
  layer's scratch: one block, the memory plan's offsets are relative to it) and the
  model state. Constants go only into loaded regions; the arena and the state only into
  "ram" regions (NOLOAD: never in the image, so never loaded or zeroed: the arena is
  written before it is read and the state is reset by kiln_reset on the first run).

Fit first, then speed: items are taken from the most used to the least, and each goes
to the fastest region that has room for it such that every item after it still fits
(first-fit decreasing over the rooms left). "Most used" is the estimated bytes read per
inference per byte of the item: a layer's constants are read about max(MACs, output
elements) / (its largest constant's bytes) times each (a filter byte is read once per
output position; bias and requantization entries once per output channel and position);
the arena max(MACs, output elements) summed over all layers per arena byte (each MAC
reads an activation); the state twice (read, then written) per inference. An estimate
from the compiler's report, not a measurement: QEMU has no memory timing.

The C marks each weights array with a section of its own (`.kiln_weights.<array>`,
kiln.compiler.codegen.emit); the arena (`kiln_arena`, `kiln_rpc_arena_buf`) and the state
(`kiln_state`) are placed by their -fdata-sections input sections, `.bss.<symbol>`. The
linker script (templates/linker.ld.j2) has one MEMORY entry per region and one output
section per region and kind of contents; kiln.json's "placement" says where each went.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kiln.compiler.errors import BoardError
from kiln.compiler.escape import printable

from .boards import Board, Region

ALIGN = 16                       # weights arrays and the arena are aligned(16)
# Input sections (gcc -fdata-sections) of the buffers kiln places by symbol.
ARENA_SECTIONS = (".bss.kiln_arena", ".bss.kiln_rpc_arena_buf")
STATE_SECTIONS = (".bss.kiln_state",)
WEIGHTS_PREFIX = ".kiln_weights."
_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
_LAYER_OF_NAME = re.compile(r"l(\d+)_")
_TENSOR_OF_NAME = re.compile(r"t(\d+)_")
STATE_READS_PER_BYTE = 2


def _padded(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass(frozen=True)
class Item:
    """A buffer kiln places: a weights array, "arena" or "state"."""
    name: str
    what: str                    # "weights" | "arena" | "state"
    size: int                    # bytes, padded to ALIGN
    reads: int                   # estimated bytes read per inference

    @property
    def density(self) -> float:
        return self.reads / max(self.size, 1)

    def fits_in(self, region: Region) -> bool:
        if self.what == "weights":
            return region.loaded
        return region.kind == "ram"


def _layer_reads(report: dict) -> list[int]:
    """max(MACs, output elements) of each layer: its reads per inference, as estimated."""
    shapes = {t["id"]: t["shape"] for t in report.get("tensors", [])}
    reads = []
    for op in report.get("ops", []):
        elems = 0
        for tid in op.get("outputs", []):
            n = 1
            for d in shapes.get(tid, []):
                n *= max(int(d), 1)
            elems += n
        reads.append(max(int(op.get("macs", 0)), elems))
    return reads


def weight_items(report: dict, arrays: list[tuple[str, int]]) -> list[Item]:
    """One Item per weights array (name, bytes), in the order the C defines them. The
    layer of an array is named in it (`l3_filter`), or is the first layer reading its
    tensor (`t5_resource`), else that of the array defined before it."""
    reads = _layer_reads(report)
    first_reader: dict[int, int] = {}
    for op in report.get("ops", []):
        for tid in op.get("inputs", []):
            first_reader.setdefault(tid, op["index"])
    layer_of, layer = {}, 0
    for name, _ in arrays:
        if not _C_NAME.match(name):
            raise ValueError(f"weights array {name!r} is not a C identifier")
        m = _LAYER_OF_NAME.match(name)
        t = _TENSOR_OF_NAME.match(name)
        if m:
            layer = int(m.group(1))
        elif t and int(t.group(1)) in first_reader:
            layer = first_reader[int(t.group(1))]
        layer_of[name] = layer
    largest: dict[int, int] = {}
    for name, n in arrays:
        largest[layer_of[name]] = max(largest.get(layer_of[name], 0), n)
    items = []
    for name, n in arrays:
        layer = layer_of[name]
        per_byte = reads[layer] / max(largest[layer], 1) if layer < len(reads) else 1.0
        items.append(Item(name, "weights", _padded(n), int(per_byte * n)))
    return items


def model_items(report: dict, arrays: list[tuple[str, int]]) -> list[Item]:
    """The weights arrays, the arena and the state of a compiled model."""
    items = weight_items(report, arrays)
    arena = int(report.get("arena_bytes", 0))
    if arena:
        items.append(Item("arena", "arena", _padded(arena), sum(_layer_reads(report))))
    state = int(report.get("state_bytes", 0))
    if state:
        items.append(Item("state", "state", _padded(state), STATE_READS_PER_BYTE * state))
    return items


def reserved(board: Board, code_bytes: int, other_static: int) -> dict[str, int]:
    """Bytes of each region kept for what kiln does not move: the code (an upper bound)
    in `flash`; .data/.bss besides the arena and the stack reserve in `ram`."""
    return {board.flash.name: code_bytes, board.ram.name: other_static + board.stack_bytes}


def _order(board: Board) -> list[Region]:
    """The regions fastest first; among equals, the board's flash and ram, then the
    extra regions in file order."""
    regions = list(board.memories)
    return sorted(regions, key=lambda r: (r.speed, regions.index(r)))


def _all_fit(items: list[Item], rooms: dict[str, int], regions: list[Region]) -> bool:
    """Whether first-fit decreasing puts every item somewhere (fastest region first)."""
    rooms = dict(rooms)
    for item in sorted(items, key=lambda i: -i.size):
        for r in regions:
            if item.fits_in(r) and rooms[r.name] >= item.size:
                rooms[r.name] -= item.size
                break
        else:
            return False
    return True


@dataclass
class Placement:
    """Where each item went: {item name: region name}. `unplaced`: the items no region had
    room for, left where the linker script's catch-alls put them (weights in `flash`, the
    arena and state in `ram`): the estimate and the link then say by how much it overflows."""
    where: dict[str, str]
    items: list[Item]
    reserved: dict[str, int]
    unplaced: list[str]

    def used(self, region: str) -> int:
        """Bytes the placement puts in `region`, the reserve included."""
        return self.reserved.get(region, 0) + sum(i.size for i in self.items
                                                  if self.where.get(i.name) == region)


def place(board: Board, items: list[Item], reserve: dict[str, int]) -> Placement:
    """Fit first, then the most used items in the fastest regions (module docstring)."""
    regions = _order(board)
    rooms = {r.name: r.size - reserve.get(r.name, 0) for r in regions}
    todo = sorted(items, key=lambda i: (-i.density, -i.size, i.name))
    where: dict[str, str] = {}
    unplaced: list[str] = []
    for k, item in enumerate(todo):
        rest = todo[k + 1:]
        choice = None
        for r in regions:
            if not item.fits_in(r) or rooms[r.name] < item.size:
                continue
            after = dict(rooms)
            after[r.name] -= item.size
            if _all_fit(rest, after, regions):
                choice = r
                break
        if choice is None:      # nothing leaves room for the rest: the first that holds it
            choice = next((r for r in regions if item.fits_in(r) and rooms[r.name] >= item.size),
                          None)
        if choice is None:      # no room anywhere: where the linker script's catch-alls
            unplaced.append(item.name)      # put it (the link then says by how much)
            choice = board.flash if item.what == "weights" else board.ram
        rooms[choice.name] -= item.size
        where[item.name] = choice.name
    return Placement(where=where, items=items, reserved=reserve, unplaced=unplaced)


def place_model(report: dict, arrays: list[tuple[str, int]], board: Board) -> dict:
    """kiln.json's "placement" of a compiled model on a multi-region board: where each
    weights array, the arena, the state, the code, .data/.bss and the stack go, and each
    region's reserve and use. Reserves: the host-driven firmware's code bound and statics
    (the larger of the two modes), so one placement serves both."""
    from .sizes import OTHER_STATIC_RAM, code_bound

    reserve = reserved(board, code_bound(report, "host-driven"), OTHER_STATIC_RAM["host-driven"])
    items = model_items(report, arrays)
    p = place(board, items, reserve)
    return {
        "measure": "estimated bytes read per inference per byte: max(MACs, output "
                   "elements) of a layer over its largest constant; the arena: the sum "
                   "over layers per arena byte",
        "code": board.flash.name, "data": board.ram.name, "stack": board.ram.name,
        "arena": p.where.get("arena"),
        "state": p.where.get("state"),
        "weights": {i.name: p.where.get(i.name) for i in items if i.what == "weights"},
        "unplaced": p.unplaced,
        "regions": [{"name": r.name, "kind": r.kind, "origin": r.origin, "size": r.size,
                     "speed": r.speed, "loaded": r.loaded, "reserved": reserve.get(r.name, 0),
                     "placed": p.used(r.name) - reserve.get(r.name, 0)}
                    for r in board.memories],
        "density": {i.name: round(i.density, 3) for i in items},
    }


def weights_capacity(board: Board, code_reserve: int, ram_reserve: int) -> int:
    """Bytes of weights a multi-region board can hold at most: its loaded regions, less
    the code reserve in `flash` and the statics and stack in `ram` (when loaded)."""
    total = sum(r.size for r in board.memories if r.loaded) - code_reserve
    if board.ram.loaded:
        total -= ram_reserve + board.stack_bytes
    return max(total, 0)


def linker_sections(placement: dict, board: Board) -> list[dict]:
    """What templates/linker.ld.j2 places per region, besides what stays where it was:
    [{"region", "const": [input sections], "bss": [input sections]}], regions in the
    board's order. Weights left in `flash` and an arena or state left in `ram` need no
    entry (the .kiln_weights and .bss catch-alls take them)."""
    out = []
    for r in board.memories:
        const = [WEIGHTS_PREFIX + name for name, where in placement["weights"].items()
                 if where == r.name and r.name != board.flash.name]
        bss = []
        if placement.get("arena") == r.name and r.name != board.ram.name:
            bss += ARENA_SECTIONS
        if placement.get("state") == r.name and r.name != board.ram.name:
            bss += STATE_SECTIONS
        if const or bss:
            out.append({"region": r.name, "const": const, "bss": bss})
    return out


def inputs_region(placement: dict, board: Board, inputs_bytes: int) -> str:
    """The region of standalone firmware's baked sample inputs, placed after the model's
    buffers (they are copied in once a run): `flash` when it has room left, else the
    fastest loaded region with room, else (it overflows) the one with the most room."""
    rooms = {r["name"]: r["size"] - r["reserved"] - r["placed"] for r in placement["regions"]
             if r["loaded"]}
    need = _padded(inputs_bytes) + ALIGN
    if rooms.get(board.flash.name, 0) >= need:
        return board.flash.name
    roomy = [r.name for r in _order(board) if r.name in rooms and rooms[r.name] >= need]
    return roomy[0] if roomy else max(rooms, key=lambda name: rooms[name])


_LD_NAME = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def ld_name(text: object) -> str:
    """`text` as a linker-script name (a MEMORY region, an output or input section), if
    it is one: identifiers joined by dots. Nothing else reaches the script: a board's
    region names are checked identifiers, the arrays' are C identifiers."""
    if not isinstance(text, str) or len(text) > 200 or not _LD_NAME.match(text):
        raise BoardError(f"{printable(text)!r} is not a linker script name (a region "
                         f"name is a letter then letters, digits or _)")
    return str(text)        # a plain str: the checked name, not the template's _Raw
