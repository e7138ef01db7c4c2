"""Lowerings: AVERAGE_POOL_2D and MAX_POOL_2D → kiln_avgpool_s8 / kiln_maxpool_s8, and
their int16 twins (_s16) for 16x8 models; an int8 global average (one window over the
whole input) → kiln_avgpool_global_s8.

Pooling keeps the quantization (TFLite checks that input and output share scale
and zero point), so the kernels work on raw int8 values; the lowering only
derives the padding, as TFLite's ComputePaddingHeightWidth does, and the fused
activation's clamp range.
"""

from __future__ import annotations

from ...errors import ModelError
from ...numerics import activation_range
from ..bounds import Extreme, extremes, window_extremes
from ..lowering import LayerCode, LowerCtx, lowering, qparams

_ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
_RANGES = {"int8": (-128, 127), "int16": (-32768, 32767)}
_MAX_WINDOW = {"int8": 1 << 16, "int16": 1 << 15}     # pool.c: the average's int32 sum


def pool_out_size(padding: str, in_size: int, filter_size: int, stride: int) -> int:
    """TFLite's ComputeOutSize (no dilation for pooling)."""
    if padding == "SAME":
        return (in_size + stride - 1) // stride
    return (in_size + stride - filter_size) // stride


def pool_padding(in_size: int, filter_size: int, stride: int, out_size: int) -> int:
    """Rows (or columns) of padding before the input: TFLite's ComputePadding.

    TFLite divides a possibly negative total by 2 in C (truncation) and then
    clamps at 0; both agree with max(0, total) // 2 here.
    """
    total = (out_size - 1) * stride + filter_size - in_size
    return max(0, total) // 2


def _check(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    if x is None:
        return "missing input"
    if x.dtype not in _RANGES or y.dtype != x.dtype:
        return f"{x.dtype} -> {y.dtype} pooling is not supported (int8 or int16 only)"
    if len(x.shape) != 4 or len(y.shape) != 4:
        return f"pooling needs 4-D NHWC tensors, got {list(x.shape)} -> {list(y.shape)}"
    if x.quant is None or y.quant is None:
        return f"{x.dtype} pooling needs quantized tensors"
    (s_in, z_in), (s_out, z_out) = qparams(x), qparams(y)
    if abs(float(s_in) - float(s_out)) > 1e-6 or z_in != z_out:
        return (f"input quantization (scale {s_in:.6g}, zero point {z_in}) differs from the "
                f"output's ({s_out:.6g}, {z_out}); TFLite pools without requantizing")
    o = ctx.op.options
    act = o.get("fused_activation_function", "NONE")
    if act not in _ACTIVATIONS:
        return f"fused activation {act} is not supported"
    if o.get("padding") not in ("SAME", "VALID"):
        return f"padding {o.get('padding')!r} is not supported"
    fh, fw = int(o.get("filter_height", 0)), int(o.get("filter_width", 0))
    sh, sw = int(o.get("stride_h", 0)), int(o.get("stride_w", 0))
    if min(fh, fw, sh, sw) < 1:
        return f"filter {fh}x{fw} and stride {sh}x{sw} must be >= 1"
    if fh * fw > _MAX_WINDOW[x.dtype]:
        return f"a {fh}x{fw} window is too large (at most {_MAX_WINDOW[x.dtype]} elements)"
    want = (x.shape[0], pool_out_size(o["padding"], x.shape[1], fh, sh),
            pool_out_size(o["padding"], x.shape[2], fw, sw), x.shape[3])
    if tuple(y.shape) != want:
        return f"output shape {list(y.shape)} != {list(want)} implied by the options"
    return None


def _window(ctx: LowerCtx) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(filter, stride, padding before) as (h, w) pairs."""
    x, y, o = ctx.input(0), ctx.output(0), ctx.op.options
    fh, fw = int(o["filter_height"]), int(o["filter_width"])
    sh, sw = int(o["stride_h"]), int(o["stride_w"])
    if o["padding"] == "SAME":
        pad = (pool_padding(x.shape[1], fh, sh, y.shape[1]),
               pool_padding(x.shape[2], fw, sw, y.shape[2]))
    else:
        pad = (0, 0)
    return (fh, fw), (sh, sw), pad


@extremes("AVERAGE_POOL_2D", "MAX_POOL_2D")
def _pool_extremes(ctx: LowerCtx) -> list[Extreme]:
    """pool.c's window arithmetic along both axes (no dilation)."""
    x, y = ctx.input(0), ctx.output(0)
    f, s, pad = _window(ctx)
    return [e for i, axis in enumerate("hw")
            for e in window_extremes(axis, x.shape[1 + i], y.shape[1 + i], f[i], s[i], 1, pad[i])]


def _lower(ctx: LowerCtx, kernel: str) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    o = ctx.op.options
    (fh, fw), (sh, sw), (ph, pw) = _window(ctx)
    n, h, w, c = x.shape
    _, oh, ow, _ = y.shape
    lo, hi = activation_range(o.get("fused_activation_function", "NONE"), *qparams(y),
                              *_RANGES[y.dtype])
    if lo > hi:
        raise ModelError(f"{ctx.op.describe()}: empty activation range [{lo}, {hi}]")
    body = (
        "static const kiln_pool_params_t params = {\n"
        f"    .stride = {{{sh}, {sw}}},\n"
        f"    .padding = {{{ph}, {pw}}},\n"
        f"    .filter = {{{fh}, {fw}}},\n"
        f"    .activation = {{{lo}, {hi}}},\n"
        "};\n"
        f"static const kiln_dims_t input_dims = {{{n}, {h}, {w}, {c}}};\n"
        f"static const kiln_dims_t output_dims = {{{n}, {oh}, {ow}, {c}}};\n"
        f"return {kernel}(&params, &input_dims, {ctx.ptr(x)}, &output_dims, {ctx.ptr(y)});\n"
    )
    act = o.get("fused_activation_function", "NONE")
    summary = (f"filter {fh}x{fw}, stride {sh}x{sw}, padding {o['padding']} ({ph}, {pw})"
               + (f", {act}" if act != "NONE" else ""))
    return LayerCode(kernel=kernel, body=body, summary=summary)


def _kernel(ctx: LowerCtx, op: str) -> str:
    """kiln_<op>_s8 / _s16, or on MVE targets the int8 Helium kernel (pool_mve.c)."""
    if ctx.input(0).dtype != "int8":
        return f"kiln_{op}_s16"
    return f"kiln_{op}_mve_s8" if ctx.target.mve else f"kiln_{op}_s8"


def _global(ctx: LowerCtx) -> bool:
    """One window over the whole input (output 1x1, no padding): kiln_avgpool_global_s8."""
    x, y = ctx.input(0), ctx.output(0)
    (fh, fw), _, pad = _window(ctx)
    return (y.shape[1:3] == (1, 1) and pad == (0, 0) and fh >= x.shape[1] and fw >= x.shape[2]
            and x.shape[1] * x.shape[2] <= _MAX_WINDOW["int8"])


@lowering("AVERAGE_POOL_2D", check=_check)
def lower_average_pool(ctx: LowerCtx) -> LayerCode:
    kernel = _kernel(ctx, "avgpool")
    if kernel == "kiln_avgpool_s8" and _global(ctx):
        kernel = "kiln_avgpool_global_s8"       # the same results in less code
    return _lower(ctx, kernel)


@lowering("MAX_POOL_2D", check=_check)
def lower_max_pool(ctx: LowerCtx) -> LayerCode:
    return _lower(ctx, _kernel(ctx, "maxpool"))
