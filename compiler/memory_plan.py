"""Static memory planning: every activation and scratch buffer gets an arena offset.

Algorithm: each buffer lives over an interval of op steps [first, last]. Buffers are
placed one at a time at the lowest-cost offset that clashes with no already-placed
buffer whose interval overlaps (best fit: the smallest gap that holds it, else the
top). The order buffers are placed in matters, so several orders are tried (by size,
by size × lifetime, by first use, by the peak step they cover) and the smallest arena
wins. Every result passes `check()`: no two buffers alive at the same step share a byte.

Limits: O(n² · orders) for n buffers, fine for the hundreds of tensors of an MCU model.
The lower bound for layer-by-layer execution is the largest sum of sizes live at one step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALIGN = 8


def _align(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


@dataclass
class Buffer:
    name: str
    size: int
    first: int          # first step it is alive (written, or -1 for a model input)
    last: int           # last step it is read (len(ops) for a model output)
    kind: str = "tensor"  # "tensor" or "scratch"
    offset: int = -1

    def overlaps_in_time(self, other: "Buffer") -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass
class Plan:
    buffers: list[Buffer]
    arena_bytes: int
    order: str = ""
    lower_bound: int = 0
    by_name: dict[str, Buffer] = field(default_factory=dict)

    def __post_init__(self):
        self.by_name = {b.name: b for b in self.buffers}


def lower_bound(buffers: list[Buffer]) -> int:
    """Largest total size (aligned) live at any one step."""
    if not buffers:
        return 0
    steps = range(min(b.first for b in buffers), max(b.last for b in buffers) + 1)
    return max(sum(_align(b.size) for b in buffers if b.first <= s <= b.last) for s in steps)


def _place(buffers: list[Buffer]) -> int:
    placed: list[Buffer] = []
    top = 0
    for buf in buffers:
        size = _align(buf.size)
        clashes = sorted((p for p in placed if p.overlaps_in_time(buf)), key=lambda p: p.offset)
        best_offset, best_gap = None, None
        cursor = 0
        for p in clashes:
            gap = p.offset - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best_offset, best_gap = cursor, gap
            cursor = max(cursor, p.offset + _align(p.size))
        buf.offset = best_offset if best_offset is not None else cursor
        top = max(top, buf.offset + size)
        placed.append(buf)
    return top


def _orders(buffers: list[Buffer]) -> dict[str, list[Buffer]]:
    peak_step = max(range(min(b.first for b in buffers), max(b.last for b in buffers) + 1),
                    key=lambda s: sum(b.size for b in buffers if b.first <= s <= b.last))
    return {
        "size": sorted(buffers, key=lambda b: (-b.size, b.first, b.name)),
        "size_x_lifetime": sorted(buffers, key=lambda b: (-b.size * (b.last - b.first + 1), b.name)),
        "first_use": sorted(buffers, key=lambda b: (b.first, -b.size, b.name)),
        "peak_first": sorted(buffers, key=lambda b: (not (b.first <= peak_step <= b.last),
                                                     -b.size, b.first, b.name)),
        "lifetime": sorted(buffers, key=lambda b: (-(b.last - b.first), -b.size, b.name)),
    }


def plan(buffers: list[Buffer]) -> Plan:
    """Place `buffers` in one arena; return the smallest plan over several orders."""
    if not buffers:
        return Plan(buffers=[], arena_bytes=0)
    best: tuple[int, str, dict[str, int]] | None = None
    for order_name, order in _orders(buffers).items():
        top = _place(order)
        if best is None or top < best[0]:
            best = (top, order_name, {b.name: b.offset for b in buffers})
    top, order_name, offsets = best
    for b in buffers:
        b.offset = offsets[b.name]
    result = Plan(buffers=list(buffers), arena_bytes=top, order=order_name,
                  lower_bound=lower_bound(buffers))
    check(result)
    return result


def check(p: Plan) -> None:
    """Raise AssertionError if two buffers alive at the same step share a byte."""
    bs = p.buffers
    for i, a in enumerate(bs):
        assert a.offset >= 0 and a.offset % ALIGN == 0, f"{a.name} misplaced at {a.offset}"
        assert a.offset + a.size <= p.arena_bytes, f"{a.name} exceeds the arena"
        for b in bs[i + 1:]:
            if a.overlaps_in_time(b):
                assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset, (
                    f"{a.name} [{a.offset}, +{a.size}) and {b.name} [{b.offset}, +{b.size}) "
                    f"are both alive in steps {max(a.first, b.first)}..{min(a.last, b.last)}")
