"""Lowering: int8 RESIZE_BILINEAR → `kiln_resize_bilinear_s8` (crt/kernels/resize.c).

TFLite's integer bilinear resize (reference_ops::ResizeBilinearInteger, what tflite-micro
runs for int8) maps each output row y to a 10-bit fixed-point input coordinate with a
rounded scale, ((1024 · in + out / 2) / out, or with align_corners (in − 1) and
(out − 1)), minus half a pixel with half_pixel_centers; it blends the rows floor and
ceil of that coordinate (floor at least 0, ceil at most in − 1) with weights of 1/1024.
All of it depends on the shapes only, so it is computed here, once, as tables; the
kernel blends with them and rounds the 2^20-scaled sum half away from zero.

TFLite's rounded scale can put the last output row's floor one past the input's end
(e.g. 2 → 91 rows): tflite-micro then reads outside its input. kiln refuses such a
shape rather than guess what that memory held.
"""

from __future__ import annotations

import numpy as np

from ...ir import same_quant
from ..bounds import Extreme, extremes
from ..lowering import LayerCode, LowerCtx, fmt_quant, lowering
from .data_movement import const_ints

ONE = 1 << 10       # TFLite's fixed-point one for the coordinates and weights


def bilinear_map(in_size: int, out_size: int, align_corners: bool,
                 half_pixel_centers: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower input index, upper input index, weight of the upper in 1/1024) for every
    output index, as TFLite's ComputeInterpolationValuesInteger gives them (C's integer
    division truncates towards zero; Python's // floors, hence _cdiv)."""
    def _cdiv(a: int, b: int) -> int:
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q

    scale = (ONE * in_size + out_size // 2) // out_size
    if align_corners and out_size > 1:
        scale = (ONE * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    lo, hi, frac = [], [], []
    for i in range(out_size):
        v = i * scale + (scale // 2 - ONE // 2 if half_pixel_centers else 0)
        low = max(_cdiv(v, ONE), 0)
        lo.append(low)
        hi.append(min(_cdiv(v + ONE - 1, ONE), in_size - 1))
        frac.append(v - ONE * low)
    return (np.array(lo, np.int32), np.array(hi, np.int32), np.array(frac, np.int32))


def _options(ctx: LowerCtx) -> tuple[bool, bool]:
    o = ctx.op.options
    return bool(o.get("align_corners", False)), bool(o.get("half_pixel_centers", False))


def _maps(ctx: LowerCtx):
    x, y = ctx.input(0), ctx.output(0)
    ac, hp = _options(ctx)
    return (bilinear_map(x.shape[1], y.shape[1], ac, hp),
            bilinear_map(x.shape[2], y.shape[2], ac, hp))


def _check(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    if x is None or x.dtype != "int8" or y.dtype != "int8":
        return "kiln's RESIZE_BILINEAR takes int8 tensors"
    if not same_quant(x.quant, y.quant):
        return (f"output quantization ({fmt_quant(y)}) differs from the input's "
                f"({fmt_quant(x)}); TFLite's integer RESIZE_BILINEAR keeps it")
    if len(x.shape) != 4 or len(y.shape) != 4 or x.size == 0 or y.size == 0:
        return "RESIZE_BILINEAR needs non-empty 4-D NHWC tensors"
    size = const_ints(ctx.input(1), "size")
    if isinstance(size, str):
        return size
    if size.reshape(-1).tolist() != list(y.shape[1:3]) or (x.shape[0], x.shape[3]) != (
            y.shape[0], y.shape[3]):
        return f"output shape {list(y.shape)} does not match size {size.reshape(-1).tolist()}"
    ac, hp = _options(ctx)
    if ac and hp:
        return "align_corners and half_pixel_centers together (TFLite refuses them)"
    for (lo, hi, _), axis, n in zip(_maps(ctx), "hw", x.shape[1:3]):
        if lo.max() >= n:
            return (f"TFLite's rounded scale maps output {axis} {int(np.argmax(lo >= n))} past "
                    f"the input's {n} (tflite-micro would read outside its input)")
    return None


@extremes("RESIZE_BILINEAR")
def _extremes(ctx: LowerCtx) -> list[Extreme]:
    """resize.c: the four weights' products and the rounded int8 blend."""
    (_, _, fy), (_, _, fx) = _maps(ctx)
    wy = int((np.abs(ONE - fy.astype(np.int64)) + np.abs(fy)).max())
    wx = int((np.abs(ONE - fx.astype(np.int64)) + np.abs(fx)).max())
    return [("a tap weight (1024 - fy) * (1024 - fx)", wy * wx),
            ("the blend s + round, s = sum of in * weight", 128 * wy * wx + (1 << 19))]


@lowering("RESIZE_BILINEAR", check=_check)
def lower_resize_bilinear(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    ac, hp = _options(ctx)
    n, h, w, c = x.shape
    _, oh, ow, _ = y.shape
    (y0, y1, fy), (x0, x1, fx) = _maps(ctx)
    tables = {}
    for name, values, what in (("y0", y0, f"first input row blended into each output row ({h} -> {oh})"),
                               ("y1", y1, "second input row"),
                               ("fy", fy, "weight of the second row, in 1/1024"),
                               ("x0", x0, f"first input column blended into each output column ({w} -> {ow})"),
                               ("x1", x1, "second input column"),
                               ("fx", fx, "weight of the second column, in 1/1024")):
        tables[name] = ctx.const(name, values, "int32_t", what)
    body = ("static const kiln_resize_bilinear_params_t params = {\n"
            f"    .input = {{{n}, {h}, {w}, {c}}},\n"
            f"    .output = {{{n}, {oh}, {ow}, {c}}},\n"
            + "".join(f"    .{k} = {v},\n" for k, v in tables.items()) +
            "};\n"
            f"return kiln_resize_bilinear_s8(&params, {ctx.ptr(x)}, {ctx.ptr(y)});\n")
    summary = f"align_corners {str(ac).lower()}, half_pixel_centers {str(hp).lower()}"
    return LayerCode(kernel="kiln_resize_bilinear_s8", body=body, summary=summary,
                     macs=4 * y.size)
