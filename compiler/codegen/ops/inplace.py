"""Overlap rules: how far a layer's output may overlap the input it reads for the last time.

The memory planner (kiln.compiler.memory_plan) lets an output share bytes with its
input when the offset difference `delta = output.offset - input.offset` is one the
layer's kernel allows. Each rule here is declared per kernel (the C kernel's name, as
`LayerCode.kernel`), and says which deltas are safe, in which order the kernel must run
and what extra scratch it needs:

- banded (CONV_2D, DEPTHWISE_CONV_2D, all variants; crt/kernels/inplace.h): the layer runs
  as bands of output rows, each one call of the ordinary kernel on the band's input rows.
  Top to bottom the output may start before the input (delta <= `forward_max`); bottom to
  top it may end after it (delta >= `backward_min`). With `copy` each band's input is first
  copied to scratch, so a band may overwrite its own input: a 1x1 convolution with equal
  channels then runs exactly in place. Bands cost a kernel call each (and the copy), so
  these overlaps cost cycles.
- exact (ADD, SUB, MUL, MAXIMUM, MINIMUM, the LUT activations): element i of the output
  depends only on element i of each same-shape input, read before it is written (see the
  loops in crt/kernels/elementwise.c and activation.c), so the output may sit exactly on
  such an input (delta = 0). Free.
- in order (DEPTHWISE_CONV_2D with one output channel per input channel, the kernels of
  ORDERED_KERNELS): the output may start k pixels before the input (delta = -k * C; k = 0:
  exactly on it) when the order the kernel writes each channel's outputs in, run against
  the layer's geometry (in_order_delta), never overwrites an input pixel a later output
  of that channel reads; the least such k. The kernel runs as it is (free, the mode
  "ordered"); its banded twin adds that delta to its band rules (`points`) where the
  bands' order allows one above their forward bound.

`band_rows` is the Python twin of kiln_band_rows (crt/kernels/conv_inplace.c): the bounds
come from the same band geometry the C runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from ...ir import Graph, Op
from ...memory_plan import ALIGN
from ..lowering import LayerCode, LowerCtx
from .conv import _geometry

BANDED_KERNELS = {
    "kiln_conv2d_s8": "kiln_conv2d_banded_s8",
    "kiln_conv2d_1x1_s8": "kiln_conv2d_1x1_banded_s8",
    "kiln_conv2d_gemm_s8": "kiln_conv2d_gemm_banded_s8",
    "kiln_conv2d_gemm_oc4_s8": "kiln_conv2d_gemm_oc4_banded_s8",
    "kiln_conv2d_gemm_w8_s8": "kiln_conv2d_gemm_w8_banded_s8",
    "kiln_conv2d_gemm_p8_s8": "kiln_conv2d_gemm_p8_banded_s8",
    "kiln_dwconv2d_s8": "kiln_dwconv2d_banded_s8",
    "kiln_dwconv2d_3x3_s8": "kiln_dwconv2d_3x3_banded_s8",
    "kiln_dwconv2d_ch4_s8": "kiln_dwconv2d_ch4_banded_s8",
    "kiln_conv2d_mve_s8": "kiln_conv2d_mve_banded_s8",
    "kiln_conv2d_mve_im2col_s8": "kiln_conv2d_mve_im2col_banded_s8",
    "kiln_dwconv2d_mve_s8": "kiln_dwconv2d_mve_banded_s8",
    "kiln_dwconv2d_3x3_w8_s8": "kiln_dwconv2d_3x3_w8_banded_s8",
    "kiln_dwconv2d_3x3_px2v_s8": "kiln_dwconv2d_3x3_px2v_banded_s8",
}

# The banded twins of crt/kernels/conv_inplace.c: one row geometry (bands_valid, band_call)
# serves them all. (The px2v twin runs its own bands, the MVE ones conv_mve_inplace.c's.)
_ROW_GEOMETRY = {v for k, v in BANDED_KERNELS.items()
                 if "mve" not in k and k != "kiln_dwconv2d_3x3_px2v_s8"}
# Twins for flat bands only (a 1x1, stride-1, unpadded layer as H * W rows of one pixel):
# the same kernel calls as the general twin's, without the row geometry.
FLAT_BANDED_KERNELS = {"kiln_conv2d_gemm_p8_banded_s8": "kiln_conv2d_gemm_p8_flat_banded_s8"}

# Kernels whose output may sit exactly on a same-shape input (element i from element i).
EXACT_KERNELS = {"kiln_add_s8", "kiln_sub_s8", "kiln_add_lut_s8", "kiln_add_lut_same_s8",
                 "kiln_mul_s8",
                 "kiln_add_mve_s8", "kiln_sub_mve_s8",
                 "kiln_maximum_s8", "kiln_minimum_s8", "kiln_lut_s8",
                 "kiln_squared_difference_s8", "kiln_prelu_s8",
                 "kiln_add_s16", "kiln_sub_s16", "kiln_mul_s16", "kiln_maximum_s16",
                 "kiln_minimum_s16", "kiln_squared_difference_s16", "kiln_leaky_relu_s16",
                 "kiln_logistic_s16", "kiln_tanh_s16"}


# Depthwise kernels (multiplier 1) and the order each writes a channel's output pixels in,
# as a function of the call's geometry (order_w8, order_px2, order_s2ring below). Kernels not listed
# (their order unchecked: dwconv.c, dwconv_3x3.c, channels, planes, px2v) keep the band
# rules only.
ORDERED_KERNELS = {"kiln_dwconv2d_3x3_w8_s8": "w8", "kiln_dwconv2d_3x3_px2_s8": "px2",
                   "kiln_dwconv2d_3x3_s2ring_s8": "s2ring"}


@dataclass(frozen=True)
class Band:
    out_row: int
    out_rows: int
    in_row: int
    in_rows: int
    pad_top: int


def band_rows(rows: int, in_h: int, k_h: int, out_h: int, stride: int, pad_top: int,
              dilation: int) -> list[Band]:
    """Every band top to bottom (twin of kiln_band_rows)."""
    bands = []
    for r0 in range(0, out_h, rows):
        r1 = min(out_h, r0 + rows)
        origin = r0 * stride - pad_top
        last = (r1 - 1) * stride - pad_top + (k_h - 1) * dilation + 1
        lo, hi = max(origin, 0), min(last, in_h)
        if hi <= lo:
            lo = min(lo, in_h - 1)
            hi = lo + 1
        bands.append(Band(r0, r1 - r0, lo, hi - lo, lo - origin))
    return bands


# --- in order: a depthwise output exactly over its input ------------------------------
#
# With one output channel per input channel, output pixel q (raster index oy * W_out + ox)
# of channel c sits at byte q * C + c of the output and input pixel p (iy * W_in + ix) at
# p * C + c of the input: at delta 0 writing output (q, c) overwrites input (q, c) and
# nothing else, a byte of the same channel. So if the kernel reads each output's inputs
# before writing it (reading earlier, e.g. into a ring of widened lines, only helps) and
# writes channel c's outputs in a known order, the layer is exact at delta 0 iff no output
# written at step t overwrites an input pixel that an output of step t' > t reads: per
# channel, last_read(q_t) <= t for every step t (in_order_delta). The other channels do not
# matter, whatever order they go in: their bytes are not written. Input pixels past the
# output (q >= H_out * W_out) are never overwritten. Likewise at delta = -k * C output
# (q, c) overwrites input (q - k, c): safe iff last_read(q_t - k) <= t for every t; the
# rule takes the least such k (C * k a multiple of the arena's alignment).
#
# E.g. a raster order at stride 2 (pad 0 or 1 before): output q reads input pixels of
# index >= q (row 2 oy - pad >= oy, column 2 ox - pad >= ox but at oy = 0, ox = 0), so
# input q is read only by outputs up to q: delta 0. At stride 1 with padding 1, output q
# reads input q - W_in - 1 after output q - W_in - 1 overwrote it at delta 0: refused,
# delta -(W_in + 1) * C the closest. A kernel that goes tile by tile, or edge pixels after
# the interior, is checked on that order.

def order_w8(out_h: int, out_w: int, in_h: int, in_w: int, stride: tuple[int, int],
             pad: tuple[int, int]) -> list[tuple[int, int]]:
    """kiln_dwconv2d_3x3_w8_s8's order (dw_run, every block of four channels alike): the
    interior pixels (every tap in the image) row by row, then dw_edges' pixels row by row."""
    def interior(size: int, out: int, s: int, p: int) -> tuple[int, int]:
        a = min((p + s - 1) // s, out)          # twin of interior_range
        b = min((size - 3 + p) // s + 1, out) if size - 3 + p >= 0 else 0
        return a, max(a, b)
    (oy0, oy1), (ox0, ox1) = (interior(in_h, out_h, stride[0], pad[0]),
                              interior(in_w, out_w, stride[1], pad[1]))
    if oy0 == oy1 or ox0 == ox1:
        oy0 = oy1 = ox0 = ox1 = 0
    inside = [(oy, ox) for oy in range(oy0, oy1) for ox in range(ox0, ox1)]
    edges = [(oy, ox) for oy in range(out_h) for ox in range(out_w)
             if not (oy0 <= oy < oy1 and ox0 <= ox < ox1)]
    return inside + edges


def order_px2(out_h: int, out_w: int, in_w: int, pad_w: int, scratch: int,
              ) -> list[tuple[int, int]]:
    """kiln_dwconv2d_3x3_px2_s8's order (px2_run, every pass alike): tile by tile (output
    columns [x0, x0 + tw), the widest even tile the scratch's ring holds), the tile's
    lines top to bottom, its pixels left to right (pairs, then an odd last one)."""
    most = (scratch // 12 - 2) & ~1
    tile = min(most, (out_w + 1) // 2 * 2)
    tiles = -(-out_w // tile)
    short_last = out_w % 2 == 1 and out_w + 1 - pad_w >= in_w
    if short_last and tiles > 1 and out_w - (tiles - 1) * tile == 1:
        tiles -= 1
    order = []
    for t in range(tiles):
        x0 = t * tile
        tw = tile if t < tiles - 1 else out_w - x0
        order += [(oy, ox) for oy in range(out_h) for ox in range(x0, x0 + tw)]
    return order


def order_s2ring(out_h: int, out_w: int) -> list[tuple[int, int]]:
    """kiln_dwconv2d_3x3_s2ring_s8's order (every pass alike): whole output rows, top
    to bottom, each left to right (it reads a kept row into its ring before the rows
    that read it, the middle row as it goes: never after the output that reads it)."""
    return [(oy, ox) for oy in range(out_h) for ox in range(out_w)]


def in_order_delta(calls: list[tuple[Band, list[tuple[int, int]]]], in_hw: tuple[int, int],
                   out_hw: tuple[int, int], k_hw: tuple[int, int], stride: tuple[int, int],
                   pad: tuple[int, int], dilation: tuple[int, int], c: int) -> int | None:
    """The delta closest to 0 (0 or -k * C, a multiple of ALIGN) at which kernel calls
    writing in these orders may overlap their input (see above), or None where only
    deltas with no overlap are. Each call is a band (out_row, out_rows, in_row, in_rows,
    pad_top: the rows the call gets) and the order of its output pixels, (oy, ox) within
    the band; the taps are found in the band's rows, as the kernel finds them."""
    (in_h, in_w), (out_h, out_w) = in_hw, out_hw
    q, reads = [], []               # per step: the output pixel, and the input pixels read
    for b, order in calls:
        for oy, ox in order:
            q.append((b.out_row + oy) * out_w + ox)
            for ky in range(k_hw[0]):
                iy = oy * stride[0] - b.pad_top + ky * dilation[0]
                for kx in range(k_hw[1]):
                    ix = ox * stride[1] - pad[1] + kx * dilation[1]
                    if 0 <= iy < b.in_rows and 0 <= ix < in_w:
                        reads.append(((b.in_row + iy) * in_w + ix, len(q) - 1))
    n_out = out_h * out_w
    assert sorted(q) == list(range(n_out)), "not every output pixel once"
    last = np.full(in_h * in_w, -1, dtype=np.int64)
    for p, t in reads:                          # in step order: the last read wins
        last[p] = t
    qs, ts = np.array(q, dtype=np.int64), np.arange(n_out, dtype=np.int64)
    for k in range(n_out):                      # k = n_out: no overlap left
        if k * c % ALIGN:
            continue
        hit = qs - k                            # the input pixel step t overwrites
        inside = (hit >= 0) & (hit < in_h * in_w)
        if np.all(last[hit[inside]] <= ts[inside]):
            return -k * c
    return None


def _order(code: LayerCode, g, out_h: int, out_w: int, in_h: int, in_w: int,
           pad_top: int) -> list[tuple[int, int]]:
    if ORDERED_KERNELS[code.kernel] == "w8":
        return order_w8(out_h, out_w, in_h, in_w, g.stride, (pad_top, g.padding[1]))
    if ORDERED_KERNELS[code.kernel] == "s2ring":
        return order_s2ring(out_h, out_w)
    return order_px2(out_h, out_w, in_w, g.padding[1], code.scratch_bytes)


def _ordered_geometry(graph: Graph, op: Op, layer: int, code: LayerCode):
    """(x, y, k_hw, geometry) of a layer ORDERED_KERNELS' rule covers, else None."""
    if code.kernel not in ORDERED_KERNELS or op.type != "DEPTHWISE_CONV_2D":
        return None
    ctx = LowerCtx(graph=graph, op=op, layer=layer)
    x, w, y = ctx.input(0), ctx.input(1), ctx.output(0)
    if (x is None or w is None or len(x.shape) != 4 or len(w.shape) != 4 or len(y.shape) != 4
            or x.shape[0] != 1 or y.shape[0] != 1 or x.shape[3] != y.shape[3]
            or w.shape[3] != y.shape[3] or x.nbytes != x.shape[1] * x.shape[2] * x.shape[3]
            or y.nbytes != y.shape[1] * y.shape[2] * y.shape[3]):
        return None       # bytes per pixel differ (a multiplier above 1) or not int8 NHWC
    g = _geometry(ctx, (x.shape[1], x.shape[2]), (w.shape[1], w.shape[2]))
    return x, y, (w.shape[1], w.shape[2]), g


def _ordered_modes(graph: Graph, op: Op, layer: int, code: LayerCode) -> list[OverlapMode]:
    """The kernel run as it is, exactly over its input, where its order allows."""
    found = _ordered_geometry(graph, op, layer, code)
    if found is None:
        return []
    x, y, k_hw, g = found
    (in_h, in_w), (out_h, out_w) = tuple(x.shape[1:3]), tuple(y.shape[1:3])
    whole = Band(0, out_h, 0, in_h, g.padding[0])
    order = _order(code, g, out_h, out_w, in_h, in_w, g.padding[0])
    delta = in_order_delta([(whole, order)], (in_h, in_w), (out_h, out_w), k_hw, g.stride,
                           g.padding, g.dilation, x.shape[3])
    if delta is None:
        return []
    return [OverlapMode("ordered", x.id, delta, None, costs_cycles=False, points=(delta,))]


def _banded_points(graph: Graph, op: Op, layer: int, code: LayerCode, rows: int,
                   fwd: int) -> tuple:
    """(delta,) where the banded twin of an ORDERED_KERNELS kernel, bands of `rows` top
    to bottom, each one call in the kernel's order, may run at a delta above `fwd` (the
    band rule's); else ()."""
    found = _ordered_geometry(graph, op, layer, code)
    if found is None:
        return ()
    x, y, k_hw, g = found
    (in_h, in_w), (out_h, out_w) = tuple(x.shape[1:3]), tuple(y.shape[1:3])
    bands = band_rows(rows, in_h, k_hw[0], out_h, g.stride[0], g.padding[0], g.dilation[0])
    calls = [(b, _order(code, g, b.out_rows, out_w, b.in_rows, in_w, b.pad_top))
             for b in bands]
    delta = in_order_delta(calls, (in_h, in_w), (out_h, out_w), k_hw, g.stride, g.padding,
                           g.dilation, x.shape[3])
    return (delta,) if delta is not None and delta > fwd else ()


@dataclass(frozen=True)
class OverlapMode:
    """One way a layer may overlap its output with input `input_id`."""

    name: str                       # "exact", "banded", "banded_copy"
    input_id: int                   # the tensor the output may overlap
    forward_max: int | None         # delta <= this is safe (top to bottom / exact)
    backward_min: int | None        # delta >= this is safe (bottom to top)
    extra_scratch: int = 0          # scratch bytes on top of the kernel's own
    costs_cycles: bool = True
    rows: int = 0                   # banded: output rows (flat: pixels) per band
    copy: bool = False
    flat: bool = False              # banded: bands of pixels (1x1 stride-1 convolutions)
    cost: float = 0.0               # rough extra cycles: kernel calls, copied bytes / 64
    points: tuple[int, ...] = ()    # banded: single deltas safe too, top to bottom

    @property
    def allowed(self) -> tuple[tuple[int | None, int | None], ...]:
        if self.name == "exact":
            return ((0, 0),)
        if self.name == "ordered":
            return tuple((p, p) for p in self.points)
        return ((None, self.forward_max), (self.backward_min, None),
                *((p, p) for p in self.points))

    def forward(self, delta: int) -> bool:
        """Whether delta (one `allowed` holds) needs the bands top to bottom."""
        return (self.forward_max is not None and delta <= self.forward_max
                or delta in self.points)

    def describe(self) -> str:
        if self.name == "exact":
            return "exactly in place"
        if self.name == "ordered":
            return f"in its order: delta == {self.points[0]}"
        unit = "pixel" if self.flat else "row"
        points = "".join(f", forward if delta == {p}" for p in self.points)
        return (f"{self.rows}-{unit} bands{' with input copy' if self.copy else ''}: "
                f"forward if delta <= {self.forward_max}, backward if delta >= "
                f"{self.backward_min}{points}")


# Band sizes tried per layer: smaller bands overlap more, larger ones cost fewer calls.
_BAND_ROWS = (1, 2, 4)
_BAND_PIXELS = (2, 4, 8, 16, 32)
# Kernels that compute output pixels in pairs: an odd band wastes half a pair.
_PAIRED_KERNELS = {"kiln_conv2d_gemm_s8", "kiln_conv2d_gemm_oc4_s8",
                   "kiln_conv2d_gemm_w8_s8", "kiln_conv2d_gemm_p8_s8"}


def _banded_modes(graph: Graph, op: Op, layer: int, code: LayerCode) -> list[OverlapMode]:
    ctx = LowerCtx(graph=graph, op=op, layer=layer)
    x, w, y = ctx.input(0), ctx.input(1), ctx.output(0)
    if (x is None or w is None or len(x.shape) != 4 or len(w.shape) != 4 or x.shape[0] != 1
            or y.shape[0] != 1):
        return []    # a FULLY_CONNECTED lowered to the GEMM kernel has a 2-D filter: no band
    g = _geometry(ctx, (x.shape[1], x.shape[2]), (w.shape[1], w.shape[2]))
    flat = (w.shape[1] == w.shape[2] == 1 and g.stride == (1, 1) and g.padding == (0, 0)
            and tuple(x.shape[1:3]) == tuple(y.shape[1:3]))
    if flat:        # H * W rows of one pixel
        in_h, out_h = x.shape[1] * x.shape[2], y.shape[1] * y.shape[2]
        k_h, stride, pad, dil = 1, 1, 0, 1
        ri, ro, sizes = x.shape[3], y.shape[3], _BAND_PIXELS
    else:
        in_h, out_h, k_h = x.shape[1], y.shape[1], w.shape[1]
        stride, pad, dil = g.stride[0], g.padding[0], g.dilation[0]
        ri, ro = x.shape[2] * x.shape[3], y.shape[2] * y.shape[3]
        sizes = _BAND_ROWS
        if code.kernel in _PAIRED_KERNELS:
            sizes = tuple(r for r in sizes if r * y.shape[2] % 2 == 0) or sizes
    modes = []
    for rows in sizes:
        if rows >= out_h:
            continue
        bands = band_rows(rows, in_h, k_h, out_h, stride, pad, dil)
        ends = [b.in_row + b.in_rows for b in bands]
        fwd = min(b.in_row * ri - (b.out_row + b.out_rows) * ro for b in bands)
        bwd = max(e * ri - b.out_row * ro for b, e in zip(bands, ends))
        points = () if flat or fwd >= 0 else _banded_points(graph, op, layer, code, rows, fwd)
        modes.append(OverlapMode("banded", x.id, fwd, bwd, rows=rows, flat=flat,
                                 cost=len(bands), points=points))
        # With a copy, band b only has to spare the rows of the bands after (before) it.
        nxt = [b.in_row for b in bands[1:]] + [in_h]
        prev = [0] + ends[:-1]
        fwd_c = min(n * ri - (b.out_row + b.out_rows) * ro for b, n in zip(bands, nxt))
        bwd_c = max(p * ri - b.out_row * ro for b, p in zip(bands, prev))
        if fwd_c > fwd or bwd_c < bwd:
            copied = sum(b.in_rows for b in bands) * ri
            modes.append(OverlapMode("banded_copy", x.id, fwd_c, bwd_c,
                                     extra_scratch=_align8(max(b.in_rows for b in bands) * ri),
                                     rows=rows, copy=True, flat=flat,
                                     cost=len(bands) + copied / 64))
    return modes


def _align8(n: int) -> int:
    return (n + 7) // 8 * 8


def _exact_modes(graph: Graph, op: Op) -> list[OverlapMode]:
    y = graph.tensor(op.outputs[0])
    modes = []
    for tid in dict.fromkeys(t for t in op.inputs if t >= 0):
        x = graph.tensor(tid)
        if not x.is_const and tuple(x.shape) == tuple(y.shape) and x.nbytes == y.nbytes:
            modes.append(OverlapMode("exact", tid, 0, 0, costs_cycles=False))
    return modes


def overlap_modes(graph: Graph, op: Op, layer: int, code: LayerCode) -> list[OverlapMode]:
    """Every declared way this lowered layer may overlap its output with an input."""
    if len(op.outputs) != 1:
        return []
    ordered = _ordered_modes(graph, op, layer, code)
    if code.kernel in BANDED_KERNELS and _banded_call(code) is not None:
        return ordered + _banded_modes(graph, op, layer, code)
    if ordered:
        return ordered
    if code.kernel in EXACT_KERNELS:
        return _exact_modes(graph, op)
    return []


# The kernel's context line: `{scratch, N}`, or `{NULL, 0}` for a kernel that takes a
# context but needs no scratch here (the MVE convolutions, conv_mve.py).
_CTX_LINE = re.compile(r"^const kiln_context_t ctx = \{(?:scratch, \d+|NULL, 0)\};\n", re.M)


def _banded_call(code: LayerCode) -> re.Match | None:
    return re.search(rf"return {code.kernel}\((&ctx, )?", code.body)


def banded_code(code: LayerCode, mode: OverlapMode, reverse: bool) -> LayerCode:
    """The layer's code rewritten to call the banded twin of its kernel."""
    assert mode.name.startswith("banded"), (code.kernel, mode)
    kernel = BANDED_KERNELS[code.kernel]
    scratch = code.scratch_bytes + mode.extra_scratch
    body = _CTX_LINE.sub("", code.body)
    call = re.search(rf"return {code.kernel}\((&ctx, )?", body)
    assert call is not None, code.body
    pad = " " * len(f"return {kernel}(")
    head = (f"static const kiln_band_params_t bands = {{.rows = {mode.rows}, "
            f".reverse = {int(reverse)}, .copy = {int(mode.copy)}, .flat = {int(mode.flat)}}};\n"
            f"const kiln_context_t band_ctx = {{{'scratch' if scratch else 'NULL'}, {scratch}}};\n"
            f"return {kernel}(&bands, &band_ctx,\n{pad}")
    body = body[:call.start()] + head + body[call.end():].replace("\n" + " " * len(
        f"return {code.kernel}("), "\n" + pad)
    order = "bottom to top" if reverse else "top to bottom"
    unit = "pixel" if mode.flat else "row"
    summary = (f"{code.summary}; writes over its input: {kernel}, {mode.rows}-{unit} bands "
               f"{order}{', each copied to scratch first' if mode.copy else ''}")
    # `kernel` stays the variant (kiln.json, tuning); the body calls its banded twin.
    return replace(code, body=body, scratch_bytes=scratch, summary=summary, called=kernel)


def flat_banded_gemm(layers: list) -> list:
    """The emitted layers with every banded int8-pair gemm layer calling its flat twin
    (kiln_conv2d_gemm_p8_flat_banded_s8) when each layer on conv_inplace.c's row geometry
    is such a layer with flat bands: the firmware then links no row geometry (about 700 B
    of code on a Cortex-M4; KWS). One row-banded layer keeps them all on the general twin,
    which serves both, rather than linking two loops."""
    banded = [i for i, e in enumerate(layers) if e.code.called in _ROW_GEOMETRY]
    flat = [i for i in banded if layers[i].code.called in FLAT_BANDED_KERNELS
            and ".flat = 1}" in layers[i].code.body]
    if not flat or len(flat) != len(banded):
        return layers
    out = list(layers)
    for i in flat:
        code = layers[i].code
        to = FLAT_BANDED_KERNELS[code.called]
        old, new = f"return {code.called}(", f"return {to}("
        assert code.body.count(old) == 1, code.body
        body = code.body.replace(old, new).replace("\n" + " " * len(old), "\n" + " " * len(new))
        out[i] = replace(layers[i], code=replace(code, body=body, called=to))
    return out
