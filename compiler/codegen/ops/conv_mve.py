"""The Helium (MVE) variants of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED
(crt/kernels/kernels_mve.h): their packed constants and their C calls.

`conv.py` lists them (knobs `{"variant": "mve", ...}`) first on MVE targets
(Target.mve: Cortex-M55) and hands a layer here once its variant is "mve", with
the multipliers, shifts and folded bias it derived the same way for every variant.
The kernels requantize exactly for any shift (no requant_fast rewrite), so they
apply wherever their geometry does: CONV_2D with one group, DEPTHWISE_CONV_2D with
depth multiplier 1, every int8 FULLY_CONNECTED.
"""

from __future__ import annotations

import numpy as np

from ..lowering import LowerCtx, c_dims, qparams

MVE_DWCONV = "kiln_dwconv2d_mve_s8"
MVE_FC = "kiln_fully_connected_mve_s8"
# CONV_2D by its "window" knob: the receptive field as its kernel-row runs (read in place
# inside the input), or gathered into one compact run.
_MVE_CONV = {"rows": "kiln_conv2d_mve_s8", "im2col": "kiln_conv2d_mve_im2col_s8"}


def _row16(kw: int, c: int) -> int:
    """A kernel row of KW * C values rounded up to whole 16-byte groups."""
    return -(-kw * c // 16) * 16


def _windows_inside(shape) -> bool:
    """Every window of a CONV_2D LayerShape lies inside its input, with dilation 1 along
    the width (the C's windows_inside)."""
    reach = [(shape.output[1 + i] - 1) * shape.stride[i] +
             (shape.filter[1 + i] - 1) * (shape.dilation[0] if i == 0 else 1) for i in range(2)]
    return shape.padding == (0, 0) and shape.dilation[1] == 1 and \
        reach[0] < shape.input[1] and reach[1] < shape.input[2]


def mve_candidates(op: str, shape) -> list[dict]:
    """The Helium variants a layer of this LayerShape can use (crt/kernels/kernels_mve.h),
    the likely faster first. Exact for any shift, so requant_fast does not matter.

    CONV_2D reads a window as KH kernel-row runs, each padded to whole 16-byte groups,
    or gathers it into one compact run (a copy per output pixel). The first is the one
    with the lower estimate, from instruction counts on QEMU mps3-an547 (VWW's and
    ResNet-8's 3x3 layers): about 10 instructions per group of 16 k and block of four
    channels, 25 per kernel row and block for the run loop, 60 per kernel row to copy."""
    if op == "CONV_2D" and shape.input[3] == shape.filter[3]:
        out_c, kh, kw, c = shape.filter
        blocks = -(-out_c // 4)
        rows_cost = blocks * kh * (10 * (_row16(kw, c) // 16) + (25 if kh > 1 else 0))
        compact_cost = 10 * blocks * (-(-kh * kw * c // 16)) + \
            (0 if kh == 1 and _windows_inside(shape) else 60 * kh)
        order = ("rows", "im2col") if rows_cost <= compact_cost else ("im2col", "rows")
        return [{"variant": "mve", "oc_block": 4, "window": w} for w in order]
    if op == "DEPTHWISE_CONV_2D" and shape.depth_multiplier == 1:
        return [{"variant": "mve", "ch_block": 8}]
    if op == "FULLY_CONNECTED":
        return [{"variant": "mve", "row_block": 4}]
    return []


def conv2d_mve_kernel(knobs: dict) -> str:
    return _MVE_CONV[knobs["window"]]


def conv2d_mve_scratch(shape, knobs: dict) -> int:
    """kiln_conv2d_mve[_im2col]_s8_get_buffer_size of a CONV_2D LayerShape: one receptive
    field (kernel rows at a 16-byte stride, or compact), none when every window is read
    in place."""
    _, kh, kw, c = shape.filter
    if knobs["window"] == "im2col":
        return 0 if kh == 1 and _windows_inside(shape) else kh * kw * c
    return 0 if _windows_inside(shape) else kh * _row16(kw, c)


def dwconv2d_mve_scratch(channels: int, kh: int, kw: int) -> int:
    """kiln_dwconv2d_mve_s8_get_buffer_size: per tap a (32-bit) pointer and an offset, and
    one pixel of zero points."""
    return 8 * kh * kw + channels


def pack_mve_rows(rows: np.ndarray) -> np.ndarray:
    """(R, runs, len) int8 → the int8 filter of kiln_conv2d_mve_s8 and
    kiln_fully_connected_mve_s8: per block of four rows (R rounded up to 4 with zero
    rows), per run, per group of 16 k (zeros past len), 16 bytes of each row."""
    r, runs, n = rows.shape
    r4, n16 = -(-r // 4) * 4, -(-n // 16) * 16
    padded = np.zeros((r4, runs, n16), dtype=np.int8)
    padded[:r, :, :n] = rows
    return padded.reshape(r4 // 4, 4, runs * n16 // 16, 16).transpose(0, 2, 1, 3).reshape(-1)


def quant4_blocks(bias: np.ndarray, mult: np.ndarray, shift: np.ndarray,
                  lanes: list[int] | None = None) -> np.ndarray:
    """Per-channel (folded bias, multiplier, shift) → kiln_mve_quant4_t blocks as int32
    [n, 16]: bias, multiplier, max(shift, 0), min(shift, 0), four lanes each. `lanes`
    orders the channels into lanes (padding channels, beyond the last, all zeros):
    channel order by default."""
    n = len(mult)
    order = list(range(-(-n // 4) * 4)) if lanes is None else lanes
    cols = np.zeros((4, len(order)), dtype=np.int64)
    for lane, c in enumerate(order):
        if c < n:
            s = int(shift[c])
            cols[:, lane] = (int(bias[c]), int(mult[c]), max(s, 0), min(s, 0))
    blocks = cols.reshape(4, -1, 4).transpose(1, 0, 2).reshape(-1, 16)
    return blocks.astype(np.int32)


# kiln_dwconv2d_mve_s8's lanes per 8 channels: VMOVLB / VMOVLT.S16 split the int16 products
# of eight channels into the even and the odd ones' int32 sums.
_DW_LANES = (0, 2, 4, 6, 1, 3, 5, 7)


def dw_lanes(channels: int) -> list[int]:
    """kiln_dwconv2d_mve_s8's lane order: per block of 8 channels (c0, c2, c4, c6),
    (c1, c3, c5, c7)."""
    return [b + i for b in range(0, channels, 8) for i in _DW_LANES]


def _quant_c(ctx: LowerCtx, blocks: np.ndarray, what: str) -> str:
    name = ctx.const("mve_quant", blocks.reshape(-1), "int32_t",
                     f"kiln_mve_quant4_t blocks ({what}): folded bias, multiplier, left "
                     "shift, negated right shift")
    return f"static const kiln_mve_quant4_t *const quant = (const kiln_mve_quant4_t *){name};"


def _ctx_arg(lines: list[str], scratch: int) -> str:
    """The context line of a kernel that takes one (an empty one without scratch, which
    the banded rewrite replaces like the others: ops/inplace.py)."""
    lines.append(f"const kiln_context_t ctx = {{scratch, {scratch}}};" if scratch else
                 "const kiln_context_t ctx = {NULL, 0};")
    return "&ctx"


def conv2d_mve_body(ctx: LowerCtx, params_c: str, mult: np.ndarray, shift: np.ndarray,
                    folded: np.ndarray, v, call) -> str:
    """The C body of a CONV_2D on the kiln_conv2d_mve* kernel of Variant `v` (`params_c`
    its kiln_conv_params_t, `call` conv.py's _call)."""
    x, w, y = ctx.input(0), ctx.input(1), ctx.output(0)
    out_c = y.shape[3]
    rows = v.knobs["window"] == "rows"
    runs = w.data.reshape(out_c, w.shape[1] if rows else 1, -1)
    filt = ctx.const("filter", pack_mve_rows(runs), "int8_t",
                     f"{w.name} packed in blocks of 4 channels x 16 k "
                     f"{'per kernel row' if rows else 'per window'} for {v.kernel} "
                     "(kernels_mve.h)")
    scratch = v.scratch
    lines = [params_c, _quant_c(ctx, quant4_blocks(folded, mult, shift), "4 channels each"),
             f"static const kiln_dims_t input_dims = {c_dims(x.shape)};",
             f"static const kiln_dims_t filter_dims = {c_dims(w.shape)};",
             f"static const kiln_dims_t output_dims = {c_dims(y.shape)};"]
    arg = _ctx_arg(lines, scratch)
    lines.append(call(v.kernel, f"{arg}, &params, quant", f"&input_dims, {ctx.ptr(x)}",
                      f"&filter_dims, {filt}", f"&output_dims, {ctx.ptr(y)}"))
    return "\n".join(lines)


def dwconv2d_mve_body(ctx: LowerCtx, params_c: str, mult: np.ndarray, shift: np.ndarray,
                      scratch: int, call) -> str:
    """The C body of a DEPTHWISE_CONV_2D on kiln_dwconv2d_mve_s8: the model's filter as it
    is, the bias folded with input_offset * sum of each channel's taps."""
    x, w, b, y = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    out_c = y.shape[3]
    taps = w.data.astype(np.int64).reshape(-1, out_c)
    bias = np.zeros(out_c, np.int64) if b is None else b.data.reshape(-1).astype(np.int64)
    folded = bias - qparams(x)[1] * taps.sum(axis=0)
    blocks = quant4_blocks(folded, mult, shift, dw_lanes(out_c))
    lines = [params_c, _quant_c(ctx, blocks, "per 8 channels c0 c2 c4 c6, c1 c3 c5 c7"),
             f"static const kiln_dims_t input_dims = {c_dims(x.shape)};",
             f"static const kiln_dims_t filter_dims = {c_dims(w.shape)};",
             f"static const kiln_dims_t output_dims = {c_dims(y.shape)};"]
    arg = _ctx_arg(lines, scratch)
    lines.append(call(MVE_DWCONV, f"{arg}, &params, quant", f"&input_dims, {ctx.ptr(x)}",
                      f"&filter_dims, {ctx.ptr(w)}", f"&output_dims, {ctx.ptr(y)}"))
    return "\n".join(lines)


def fully_connected_mve_body(ctx: LowerCtx, params_c: str, mult: np.ndarray,
                             shift: np.ndarray, folded: np.ndarray,
                             dims: tuple[int, int, int], call) -> str:
    """The C body of a FULLY_CONNECTED on kiln_fully_connected_mve_s8 (`dims`: batches,
    depth, units; `params_c` its kiln_fc_params_t with the model's filter_offset)."""
    x, w, y = ctx.input(0), ctx.input(1), ctx.output(0)
    batches, depth, units = dims
    filt = ctx.const("filter", pack_mve_rows(w.data.reshape(units, 1, depth)), "int8_t",
                     f"{w.name} packed in blocks of 4 rows x 16 k for {MVE_FC} "
                     "(kernels_mve.h)")
    return "\n".join([
        params_c, _quant_c(ctx, quant4_blocks(folded, mult, shift), "4 units each"),
        f"static const kiln_dims_t input_dims = {{{batches}, 1, 1, {depth}}};",
        f"static const kiln_dims_t filter_dims = {{{units}, 1, 1, {depth}}};",
        f"static const kiln_dims_t output_dims = {{{batches}, 1, 1, {units}}};",
        call(MVE_FC, "&params, quant", f"&input_dims, {ctx.ptr(x)}", f"&filter_dims, {filt}",
             f"&output_dims, {ctx.ptr(y)}")])
