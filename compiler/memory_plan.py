"""Static memory planning: every activation and scratch buffer gets an arena offset.

Algorithm: each buffer lives over an interval of op steps [first, last]. Buffers are
placed one at a time at the lowest-cost offset that clashes with no already-placed
buffer whose interval overlaps (best fit: the smallest gap that holds it, else the
top). The order buffers are placed in matters, so several orders are tried (by size,
by size × lifetime, by first use, by the peak step they cover) and the smallest arena
wins. Every result passes `check()`.

Overlaps. Without them, two buffers alive at the same step never share a byte, and the
arena cannot go below the layer-by-layer bound: the largest sum of sizes live at one
step. An `Overlap` lets a layer's output share bytes with the input it reads for the last
time, for the offset differences its kernel's rule allows (how the rules are derived:
kiln.compiler.codegen.ops.inplace). Placement then forbids, for each clashing buffer, the
offsets that would intersect it minus the allowed ones; `check()` verifies that every
pair of buffers alive at the same step is either disjoint or overlaps as a rule allows.

Cost: placing a buffer looks only at the placed buffers alive during its lifetime (found
through per-step buckets, not by scanning every placed buffer), so a plan costs
O(orders · (n log n + P + L)) for n buffers, P pairs alive at the same step and L the sum
of the lifetimes: linear in the length of a chain of layers (10,000 ops plan in well
under a second per order), and no worse than the pairs the placement must keep apart.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

ALIGN = 8
_INF = float("inf")


def _align(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


@dataclass
class Buffer:
    name: str
    size: int
    first: int          # first step it is alive (the step writing it; 0 for a model input)
    last: int           # last step it is read (the last step for a model output)
    kind: str = "tensor"  # "tensor" or "scratch"
    offset: int = -1


@dataclass(frozen=True)
class Overlap:
    """Buffer `output` may share bytes with buffer `input` when
    output.offset - input.offset lies in one of `allowed` (inclusive ranges, None =
    unbounded). `rule` says which kernel rule this is, for messages and reports."""

    input: str
    output: str
    allowed: tuple[tuple[int | None, int | None], ...]
    rule: str = ""
    layer: int = -1         # the step whose kernel declares the rule

    def allows(self, delta: int) -> bool:
        return any((lo is None or delta >= lo) and (hi is None or delta <= hi)
                   for lo, hi in self.allowed)


@dataclass
class Plan:
    buffers: list[Buffer]
    arena_bytes: int
    order: str = ""
    lower_bound: int = 0
    overlaps: list[Overlap] = field(default_factory=list)
    bound_without_overlaps: int = 0     # layer-by-layer bound of the plain kernels' buffers
    by_name: dict[str, Buffer] = field(default_factory=dict)
    # The model state (variable tensors): a region of its own, apart from the arena and
    # kept across runs (place_state); not in `buffers` nor `by_name`.
    state: list[Buffer] = field(default_factory=list)

    def __post_init__(self):
        self.by_name = {b.name: b for b in self.buffers}

    @property
    def state_bytes(self) -> int:
        """Bytes of the state region (0 for a stateless model)."""
        return max((_align(b.offset + b.size) for b in self.state), default=0)

    def shared(self) -> list[tuple[Overlap, int]]:
        """The overlaps the placement actually uses (bytes shared), with their offset
        difference output - input."""
        out = []
        for o in self.overlaps:
            a, b = self.by_name[o.input], self.by_name[o.output]
            if a.offset < b.offset + b.size and b.offset < a.offset + a.size:
                out.append((o, b.offset - a.offset))
        return out


def live_bytes(buffers: list[Buffer], aligned: bool = True) -> dict[int, int]:
    """Per step from the first to the last of `buffers`: the total size alive then
    (each size rounded up to ALIGN if `aligned`). One pass over the buffers and steps:
    sizes are added where a lifetime starts and taken off after it ends."""
    if not buffers:
        return {}
    delta: dict[int, int] = defaultdict(int)
    for b in buffers:
        size = _align(b.size) if aligned else b.size
        delta[b.first] += size
        delta[b.last + 1] -= size
    out, total = {}, 0
    for s in range(min(b.first for b in buffers), max(b.last for b in buffers) + 1):
        total += delta.get(s, 0)
        out[s] = total
    return out


def lower_bound(buffers: list[Buffer]) -> int:
    """Largest total size (aligned) live at any one step."""
    return max(live_bytes(buffers).values(), default=0)


def _alive_by_step(buffers: list[Buffer]) -> dict[int, list[Buffer]]:
    """Step -> the buffers alive then, in the order of `buffers`."""
    alive: dict[int, list[Buffer]] = defaultdict(list)
    for b in buffers:
        for s in range(b.first, b.last + 1):
            alive[s].append(b)
    return alive


def step_usage(p: Plan) -> dict[int, tuple[int, int]]:
    """Per step: (highest byte in use + 1, bytes in use) over the buffers alive then."""
    if not p.buffers:
        return {}
    alive = _alive_by_step(p.buffers)
    out = {}
    for s in range(min(b.first for b in p.buffers), max(b.last for b in p.buffers) + 1):
        live = sorted((b.offset, b.offset + b.size) for b in alive.get(s, ()))
        used, cursor = 0, 0
        for lo, hi in live:
            lo = max(lo, cursor)
            if hi > lo:
                used += hi - lo
                cursor = hi
        out[s] = (max((hi for _, hi in live), default=0), used)
    return out


def peak_step(p: Plan) -> int:
    """The first step whose live buffers reach highest in the arena (the top itself, but
    for the alignment padding the arena size may add); -1 for an empty plan."""
    usage = step_usage(p)
    if not usage:
        return -1
    highest = max(top for top, _ in usage.values())
    return next(s for s, (top, _) in usage.items() if top == highest)


def _subtract(lo: float, hi: float, allowed) -> list[tuple[float, float]]:
    """Integer interval [lo, hi] minus the union of closed integer intervals `allowed`."""
    parts = [(lo, hi)]
    for a_lo, a_hi in allowed:
        a_lo = -_INF if a_lo is None else a_lo
        a_hi = _INF if a_hi is None else a_hi
        nxt = []
        for p_lo, p_hi in parts:
            if a_hi < p_lo or a_lo > p_hi:
                nxt.append((p_lo, p_hi))
                continue
            if p_lo < a_lo:
                nxt.append((p_lo, a_lo - 1))
            if a_hi < p_hi:
                nxt.append((a_hi + 1, p_hi))
        parts = nxt
    return parts


def _shift(base: int, delta: int | None, sign: int = 1) -> int | None:
    return None if delta is None else base + sign * delta


def _best_fit(forbidden: list[tuple[float, float]]) -> int:
    """The ALIGNed start offset in [0, inf) minus the `forbidden` closed ranges whose free
    region is the tightest (the first such region; the top when none is bounded)."""
    best_slack, best_start = _INF, -1
    cursor = 0
    for lo, hi in sorted(forbidden):
        if lo > cursor:         # the free region [cursor, lo - 1]
            start = _align(int(cursor))
            end = int(lo - 1) // ALIGN * ALIGN
            if start <= end and end - start < best_slack:
                best_slack, best_start = end - start, start
        cursor = max(cursor, int(hi) + 1)
    if best_start < 0:          # no bounded region holds it: above everything
        best_start = _align(int(cursor))
    return best_start


def _place(buffers: list[Buffer], rules: dict[tuple[str, str], Overlap] | None = None) -> int:
    rules = rules or {}
    # The placed buffers alive at each step, and those whose lifetime starts at each step,
    # as (offset, aligned end, name): the placed buffers alive during [first, last] are
    # those alive at `first` plus those starting in (first, last], each found once,
    # without scanning every placed buffer. (The order they are visited in does not
    # matter: the forbidden ranges are sorted.)
    alive_at: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    starting_at: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    top = 0
    for buf in buffers:
        size = _align(buf.size)
        forbidden: list[tuple[float, float]] = []   # closed integer ranges of start offsets
        clashing = alive_at.get(buf.first, [])
        if buf.last > buf.first:
            clashing = list(clashing)
            for s in range(buf.first + 1, buf.last + 1):
                clashing += starting_at.get(s, ())
        for p_offset, p_end, p_name in clashing:
            clash = (p_offset - size + 1, p_end - 1)
            if rules:
                rule = rules.get((p_name, buf.name))
                if rule is not None:      # buf is the output: its offset = p.offset + delta
                    allowed = [(_shift(p_offset, lo), _shift(p_offset, hi)) for lo, hi in rule.allowed]
                    forbidden += _subtract(*clash, allowed)
                    continue
                rule = rules.get((buf.name, p_name))
                if rule is not None:      # buf is the input: its offset = p.offset - delta
                    allowed = [(_shift(p_offset, hi, -1), _shift(p_offset, lo, -1))
                               for lo, hi in rule.allowed]
                    forbidden += _subtract(*clash, allowed)
                    continue
            forbidden.append(clash)
        buf.offset = _best_fit(forbidden)
        top = max(top, buf.offset + size)
        entry = (buf.offset, buf.offset + size, buf.name)
        for s in range(buf.first, buf.last + 1):
            alive_at[s].append(entry)
        starting_at[buf.first].append(entry)
    return top


def place_state(sizes: list[tuple[str, int]], steps: int) -> list[Buffer]:
    """The state region: the variable tensors (name, bytes) one after another, ALIGNed,
    each alive over every step of every run. Nothing shares their bytes, since a
    variable's value must survive from one run to the next."""
    out, offset = [], 0
    for name, size in sizes:
        out.append(Buffer(name=name, size=size, first=0, last=max(steps - 1, 0),
                          kind="state", offset=offset))
        offset += _align(size)
    return out


def _orders(buffers: list[Buffer]) -> dict[str, list[Buffer]]:
    live = live_bytes(buffers, aligned=False)
    peak_step = max(live, key=live.__getitem__)     # the first step with the most bytes
    return {
        "size": sorted(buffers, key=lambda b: (-b.size, b.first, b.name)),
        "size_x_lifetime": sorted(buffers, key=lambda b: (-b.size * (b.last - b.first + 1), b.name)),
        "first_use": sorted(buffers, key=lambda b: (b.first, -b.size, b.name)),
        "peak_first": sorted(buffers, key=lambda b: (not (b.first <= peak_step <= b.last),
                                                     -b.size, b.first, b.name)),
        "lifetime": sorted(buffers, key=lambda b: (-(b.last - b.first), -b.size, b.name)),
    }


def _point_orders(orders: dict[str, list[Buffer]], overlaps) -> dict[str, list[Buffer]]:
    """Each order with the output of every rule that allows single deltas (exact, in order)
    moved right after its input: placed before other buffers take that spot. (VWW's layer
    3 may write exactly over its input, delta 0, but size x lifetime places layer 4's
    output there first; with these orders VWW's balanced arena on the M4 goes from
    37,264 to 37,176 B.) Linear in the buffers: a chain of such layers keeps its moved
    outputs in a run after the first input (each after the buffer it follows)."""
    after: dict[str, str] = {}              # output -> the input it follows
    for o in overlaps:
        if o.output != o.input and any(lo is not None and lo == hi for lo, hi in o.allowed):
            after[o.output] = o.input
    if not after:
        return {}
    out = {}
    for name, order in orders.items():
        present = {b.name for b in order}
        followers: dict[str, list[Buffer]] = {}
        moved = set()
        for b in order:
            x = after.get(b.name)
            if x is not None and x in present:
                followers.setdefault(x, []).append(b)
                moved.add(b.name)
        o: list[Buffer] = []
        done: set[str] = set()

        def emit(b: Buffer) -> None:
            stack = [b]
            while stack:                    # b, then what follows it, depth first
                c = stack.pop()
                if c.name in done:
                    continue
                done.add(c.name)
                o.append(c)
                stack.extend(reversed(followers.get(c.name, [])))

        for b in order:
            if b.name not in moved:
                emit(b)
        for b in order:                     # followers on a cycle of rules: in place
            if b.name not in done:
                emit(b)
        out[name + "+points"] = o
    return out


# The most buffers plan(polish=True) polishes (see there).
_POLISH_MAX_BUFFERS = 128


def _polish(order: list[Buffer], rules: dict[tuple[str, str], Overlap], top: int,
            passes: int = 2) -> tuple[int, list[Buffer]]:
    """`order` with single buffers moved earlier while that shrinks the arena (at most
    `passes` sweeps): the greedy orders can leave a rule's one allowed delta taken by a
    buffer placed earlier. About 3,000 placements on VWW (a second); its --optimize
    memory arena on the M4 37,208 -> 36,984 B."""
    for _ in range(passes):
        improved = False
        for i in range(1, len(order)):
            for j in range(i):
                trial = order[:j] + [order[i]] + order[j:i] + order[i + 1:]
                t = _place(trial, rules)
                if t < top:
                    top, order, improved = t, trial, True
                    break
        if not improved:
            break
    _place(order, rules)            # the offsets of the order kept
    return top, order


def plan(buffers: list[Buffer], overlaps: list[Overlap] | tuple[Overlap, ...] = (),
         also_without: bool = True, polish: bool = False) -> Plan:
    """Place `buffers` in one arena, letting the pairs in `overlaps` share bytes as their
    rules allow; return the smallest plan over several orders (and, if `also_without`,
    over the same orders placed without overlaps, so overlaps never make it worse); with
    `polish`, the best order with overlaps is then improved by moving buffers (_polish:
    slower, for a final plan)."""
    if not buffers:
        return Plan(buffers=[], arena_bytes=0)
    for b in buffers:   # the step buckets and check() rely on ordered lifetimes
        assert b.first <= b.last, f"{b.name} dies (step {b.last}) before it is born ({b.first})"
    rules = {(o.input, o.output): o for o in overlaps}
    bound = lower_bound(buffers)
    orders = _orders(buffers)
    if rules:
        orders.update(_point_orders(orders, overlaps))
    best: tuple[int, str, dict[str, int]] | None = None
    best_order: list[Buffer] = []
    # Greedy placement with overlaps is not always better than without: try both.
    for allowed in ([rules, {}] if rules and also_without else [rules]):
        seen: set[tuple[int, ...]] = set()
        for order_name, order in orders.items():
            # Skipping an order equal to an earlier one, or stopping once a plan without
            # overlaps reaches the bound (no plan without overlaps goes below it), changes
            # nothing: only a strictly smaller arena replaces the best plan.
            key = tuple(map(id, order))
            if key in seen:
                continue
            seen.add(key)
            top = _place(order, allowed)
            if best is None or top < best[0]:
                best = (top, order_name + ("" if allowed else " (no overlaps)"),
                        {b.name: b.offset for b in buffers})
                best_order = order if allowed else []
            if not allowed and top <= bound:
                break
    # _polish tries O(n^2) placements of O(n) each: worth it on models of up to a few
    # hundred buffers (VWW 59: about a second), not on long chains (300 layers: 33 s).
    if polish and best_order and len(buffers) <= _POLISH_MAX_BUFFERS:
        top, order = _polish(list(best_order), rules, best[0])
        if top < best[0]:
            best = (top, best[1] + " (polished)", {b.name: b.offset for b in buffers})
    top, order_name, offsets = best
    for b in buffers:
        b.offset = offsets[b.name]
    result = Plan(buffers=list(buffers), arena_bytes=top, order=order_name,
                  lower_bound=bound, overlaps=list(overlaps))
    check(result)
    return result


def check(p: Plan) -> None:
    """Raise AssertionError unless every buffer is aligned and inside the arena, and every
    two buffers alive at the same step are disjoint or overlap as an Overlap allows."""
    rules = {(o.input, o.output): o for o in p.overlaps}
    # By first step: the buffers alive with `a` and starting no earlier are the ones after
    # it whose first step is at most a.last, so each pair alive together is seen once.
    bs = sorted(p.buffers, key=lambda b: b.first)
    for i, a in enumerate(bs):
        assert a.offset >= 0 and a.offset % ALIGN == 0, f"{a.name} misplaced at {a.offset}"
        assert a.offset + a.size <= p.arena_bytes, f"{a.name} exceeds the arena"
        for j in range(i + 1, len(bs)):
            b = bs[j]
            if b.first > a.last:
                break
            if a.offset + a.size <= b.offset or b.offset + b.size <= a.offset:
                continue
            rule, delta = rules.get((a.name, b.name)), b.offset - a.offset
            if rule is None:
                rule, delta = rules.get((b.name, a.name)), a.offset - b.offset
            assert rule is not None, (
                f"{a.name} [{a.offset}, +{a.size}) and {b.name} [{b.offset}, +{b.size}) "
                f"are both alive in steps {max(a.first, b.first)}..{min(a.last, b.last)}")
            assert rule.allows(delta), (
                f"{rule.output} overlaps {rule.input} at offset difference {delta}, which its "
                f"rule ({rule.rule or rule.allowed}) does not allow")
