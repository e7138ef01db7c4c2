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

from ..lowering import LayerCode, LowerCtx, c_dims, qparams

MVE_CONV = "kiln_conv2d_mve_s8"
MVE_DWCONV = "kiln_dwconv2d_mve_s8"
MVE_FC = "kiln_fully_connected_mve_s8"


def conv2d_mve_scratch(filter_shape: tuple[int, int, int, int],
                       padding: tuple[int, int]) -> int:
    """kiln_conv2d_mve_s8_get_buffer_size: one receptive field, none for an unpadded 1x1."""
    _, kh, kw, c = filter_shape
    return 0 if kh == kw == 1 and padding == (0, 0) else kh * kw * c


def dwconv2d_mve_scratch(channels: int, kh: int, kw: int) -> int:
    """kiln_dwconv2d_mve_s8_get_buffer_size: a (32-bit) pointer per tap and one pixel of
    zero points."""
    return 4 * kh * kw + channels


def pack_mve_rows(rows: np.ndarray) -> np.ndarray:
    """(R, K) int8 → kiln_conv2d_mve_s8's int8 filter: per block of four rows (R rounded
    up to 4 with zero rows), per group of 16 k (zeros past K), 16 bytes of each row."""
    r, k = rows.shape
    r4, k16 = -(-r // 4) * 4, -(-k // 16) * 16
    padded = np.zeros((r4, k16), dtype=np.int8)
    padded[:r, :k] = rows
    return padded.reshape(r4 // 4, 4, k16 // 16, 16).transpose(0, 2, 1, 3).reshape(-1)


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


def dw_lanes(channels: int) -> list[int]:
    """kiln_dwconv2d_mve_s8's lane order: per block of eight channels the even ones, then
    the odd ones (VMULLB / VMULLT)."""
    return [b + i for b in range(0, channels, 8) for i in (0, 2, 4, 6, 1, 3, 5, 7)]


def _quant_c(ctx: LowerCtx, blocks: np.ndarray, what: str) -> str:
    name = ctx.const("mve_quant", blocks.reshape(-1), "int32_t",
                     f"kiln_mve_quant4_t blocks ({what}): folded bias, multiplier, left "
                     "shift, negated right shift")
    return f"static const kiln_mve_quant4_t *const quant = (const kiln_mve_quant4_t *){name};"


def _ctx_arg(lines: list[str], scratch: int) -> str:
    if not scratch:
        return "NULL"
    lines.append(f"const kiln_context_t ctx = {{scratch, {scratch}}};")
    return "&ctx"


def conv2d_mve_body(ctx: LowerCtx, params_c: str, mult: np.ndarray, shift: np.ndarray,
                    folded: np.ndarray, scratch: int, call) -> str:
    """The C body of a CONV_2D on kiln_conv2d_mve_s8 (`params_c` its kiln_conv_params_t,
    `call` conv.py's _call)."""
    x, w, y = ctx.input(0), ctx.input(1), ctx.output(0)
    out_c = y.shape[3]
    filt = ctx.const("filter", pack_mve_rows(w.data.reshape(out_c, -1)), "int8_t",
                     f"{w.name} packed in blocks of 4 channels x 16 k for {MVE_CONV} "
                     "(kernels_mve.h)")
    lines = [params_c, _quant_c(ctx, quant4_blocks(folded, mult, shift), "4 channels each"),
             f"static const kiln_dims_t input_dims = {c_dims(x.shape)};",
             f"static const kiln_dims_t filter_dims = {c_dims(w.shape)};",
             f"static const kiln_dims_t output_dims = {c_dims(y.shape)};"]
    arg = _ctx_arg(lines, scratch)
    lines.append(call(MVE_CONV, f"{arg}, &params, quant", f"&input_dims, {ctx.ptr(x)}",
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
    lines = [params_c, _quant_c(ctx, blocks, "per 8 channels the even, then the odd ones"),
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
    filt = ctx.const("filter", pack_mve_rows(w.data.reshape(units, depth)), "int8_t",
                     f"{w.name} packed in blocks of 4 rows x 16 k for {MVE_FC} "
                     "(kernels_mve.h)")
    return "\n".join([
        params_c, _quant_c(ctx, quant4_blocks(folded, mult, shift), "4 units each"),
        f"static const kiln_dims_t input_dims = {{{batches}, 1, 1, {depth}}};",
        f"static const kiln_dims_t filter_dims = {{{units}, 1, 1, {depth}}};",
        f"static const kiln_dims_t output_dims = {{{batches}, 1, 1, {units}}};",
        call(MVE_FC, "&params, quant", f"&input_dims, {ctx.ptr(x)}", f"&filter_dims, {filt}",
             f"&output_dims, {ctx.ptr(y)}")])
