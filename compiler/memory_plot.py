"""The arena over time as an SVG drawing: layers left to right, arena offsets bottom to top,
every buffer a box over the layers it is alive in. Boxes that share bytes (a layer writing
over its input, see memory_plan.Overlap) are drawn translucent so the overlap shows.

Drawn from a compile report (kiln.json), so `kiln info --memory-plot` and a saved
kiln.json give the same picture. Plain SVG text: no plotting dependency.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape as _html_escape
from pathlib import Path

from .errors import InputError
from .escape import printable
from .fsutil import atomic_write_text, refuse_overwriting_inputs

_W, _H = 960, 540                      # drawing area
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 20, 64, 64
_COLORS = {"tensor": "#4c78a8", "scratch": "#f58518"}
_OVERLAP = "#54a24b"
_SHORT = {"CONV_2D": "conv", "DEPTHWISE_CONV_2D": "dwconv", "FULLY_CONNECTED": "fc",
          "AVERAGE_POOL_2D": "avgpool", "MAX_POOL_2D": "maxpool", "TRANSPOSE_CONV": "tconv"}


def escape(text: object) -> str:
    """Text for SVG: one line of printable ASCII (a model name may hold control characters,
    which XML forbids even escaped), then XML-escaped."""
    return _html_escape(printable(text))


def memory_svg(report: dict) -> str:
    """An SVG of the report's memory plan."""
    bufs = report["memory_plan"]
    ops = report["ops"]
    steps = max(len(ops), 1)
    arena = max(report["arena_bytes"], 1)
    bound = (report.get("arena_bound_without_overlaps_bytes")
             or report.get("arena_lower_bound_bytes", 0))
    top_bytes = max(arena, bound) * 1.08        # headroom for the line labels
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    sx = plot_w / steps
    sy = plot_h / top_bytes

    def x(step: float) -> float:
        return _LEFT + step * sx

    def y(offset: float) -> float:
        return _TOP + plot_h - offset * sy

    shared = {(o["input"], o["output"]) for o in report.get("overlaps", [])}
    in_overlap = {n for pair in shared for n in pair}
    peak = report.get("peak_layer", -1)
    name = report.get("model", {}).get("name", "model")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
           f'viewBox="0 0 {_W} {_H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{_W}" height="{_H}" fill="white"/>',
           f'<text x="{_LEFT}" y="18" font-size="15" font-weight="bold">'
           f'{escape(name)}: arena {arena:,} B ({escape(report.get("optimize", "speed"))})</text>',
           f'<text x="{_LEFT}" y="34" fill="#444">layer-by-layer bound without overlaps '
           f'{bound:,} B; peak at layer {peak}; {len(shared)} layers write over their input</text>']
    if 0 <= peak < steps:
        out.append(f'<rect x="{x(peak):.1f}" y="{_TOP}" width="{sx:.1f}" height="{plot_h}" '
                   f'fill="#fde0dd"/>')
    for b in sorted(bufs, key=lambda b: (b["kind"] != "tensor", b["offset"])):
        first, last = max(b["first_step"], 0), min(b["last_step"], steps - 1)
        color = _OVERLAP if b["buffer"] in in_overlap else _COLORS.get(b["kind"], "#999")
        x0, x1 = x(first), x(last + 1)
        y0, y1 = y(b["offset"] + b["size"]), y(b["offset"])
        out.append(f'<rect x="{x0 + 1:.1f}" y="{y0:.1f}" width="{max(x1 - x0 - 2, 1):.1f}" '
                   f'height="{max(y1 - y0, 0.5):.1f}" fill="{color}" fill-opacity="0.55" '
                   f'stroke="{color}" stroke-width="1"><title>{escape(b["buffer"])}: '
                   f'{b["size"]:,} B at {b["offset"]:,}, layers {first}..{last}</title></rect>')
        label = f'{b["size"] / 1024:.1f}K'
        if y1 - y0 >= 13 and x1 - x0 >= 7 * len(label):
            out.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{(y0 + y1) / 2 + 4:.1f}" '
                       f'text-anchor="middle" fill="white">{label}</text>')
    # Axes, arena top and the no-overlap bound.
    out.append(f'<line x1="{_LEFT}" y1="{y(0)}" x2="{_LEFT + plot_w}" y2="{y(0)}" stroke="black"/>')
    out.append(f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{y(0)}" stroke="black"/>')
    for value, text, dash in ((arena, f"arena {arena:,} B", ""),
                              (bound, f"bound {bound:,} B", ' stroke-dasharray="6,4"')):
        out.append(f'<line x1="{_LEFT}" y1="{y(value):.1f}" x2="{_LEFT + plot_w}" '
                   f'y2="{y(value):.1f}" stroke="#d62728"{dash}/>')
        out.append(f'<text x="{_LEFT + plot_w - 4}" y="{y(value) - 4:.1f}" text-anchor="end" '
                   f'fill="#d62728">{text}</text>')
    for i in range(5):
        value = top_bytes * i / 4
        out.append(f'<text x="{_LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">'
                   f'{value / 1024:.1f}K</text>')
    every = max(1, steps // 40)
    for op in ops[::every]:
        cx = x(op["index"] + 0.5) + 3
        text = f'{op["index"]} {_SHORT.get(op["type"], op["type"].lower())}'
        out.append(f'<text x="{cx:.1f}" y="{y(0) + 6}" text-anchor="end" font-size="9" '
                   f'transform="rotate(-90 {cx:.1f} {y(0) + 6})">{escape(text)}</text>')
    legend = [("tensor", _COLORS["tensor"]), ("scratch", _COLORS["scratch"]),
              ("shares bytes with its producer / consumer", _OVERLAP)]
    lx = _W - _RIGHT - sum(24 + 6 * len(t) for t, _ in legend)
    for text, color in legend:
        out.append(f'<rect x="{lx}" y="{_TOP - 16}" width="10" height="10" fill="{color}" '
                   f'fill-opacity="0.55"/><text x="{lx + 14}" y="{_TOP - 7}">{text}</text>')
        lx += 24 + 6 * len(text)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def save_memory_plot(report: dict, path: str | Path, reads: Sequence[str | Path] = ()) -> Path:
    """Write the plot to an .svg file (kiln draws SVG itself: no plotting dependency),
    through a temporary file renamed over it (a link at `path` is replaced, not written
    through). Refuses a path that is one of the files `reads` the command read."""
    path = Path(path)
    if path.suffix.lower() != ".svg":
        raise InputError(f"--memory-plot writes an .svg file (got {path.name})")
    refuse_overwriting_inputs(path, reads, "--memory-plot")
    return atomic_write_text(path, memory_svg(report))
