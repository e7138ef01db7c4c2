"""Lowerings: MEAN, SUM and REDUCE_MAX (int8, any axes, keep_dims or not); MEAN and SUM
at int16 too (tflite-micro has no int16 REDUCE_MAX).

The reduction's shape is canonicalised at compile time (`reduce_shape`): the kernel
sees at most three kept and three reduced dimensions with their strides, plus a
contiguous inner extent, and never resolves axes at run time.

Numerics follow tflite-micro's reduce kernels:
- MEAN and SUM: sum − zp_in·count, requantized by in_scale/out_scale, for MEAN with
  1/count folded into the multiplier exactly as TFLM's QuantizedMeanOrSum does
  (`kiln_reduce_sum_requant_s8`). The tflite-micro we test against takes this path
  even when input and output share their quantization (older TFLM and TFLite divide
  the raw sum instead; tests pin the behaviour).
- REDUCE_MAX: the raw maximum; TFLM requires equal input/output scales.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ModelError
from ...numerics import quantize_multiplier
from ..lowering import LayerCode, LowerCtx, fmt_quant, lowering, qparams

MAX_RANK = 6
MAX_COUNT = 1 << 23   # KILN_REDUCE_MAX_COUNT: keeps the int32 sums exact
MAX_COUNT_S16 = 1 << 15   # KILN_REDUCE_MAX_COUNT_S16


@dataclass
class ReduceShape:
    """The C kiln_reduce_shape_t: slots padded at the front with extent 1, stride 0."""

    outer: list[int]
    outer_stride: list[int]
    reduce: list[int]
    reduce_stride: list[int]
    inner: int

    @property
    def count(self) -> int:
        return int(np.prod(self.reduce))

    def c_init(self) -> str:
        def arr(v: list[int]) -> str:
            return "{" + ", ".join(str(x) for x in v) + "}"
        return (f"    .outer = {arr(self.outer)},\n"
                f"    .outer_stride = {arr(self.outer_stride)},\n"
                f"    .reduce = {arr(self.reduce)},\n"
                f"    .reduce_stride = {arr(self.reduce_stride)},\n"
                f"    .inner = {self.inner},\n")


def resolve_axes(axes, rank: int) -> list[int]:
    """TFLite's ResolveAxis: negative axes wrap, duplicates drop, order kept."""
    out: list[int] = []
    for a in np.asarray(axes).reshape(-1).tolist():
        a = int(a) + rank if int(a) < 0 else int(a)
        if not 0 <= a < rank:
            raise ModelError(f"reduction axis {a} out of range for rank {rank}")
        if a not in out:
            out.append(a)
    return out


def reduce_shape(shape: tuple[int, ...], axes: list[int]) -> ReduceShape:
    """Canonical reduction shape of `shape` reduced over `axes` (see reduce.h)."""
    # (extent, reduced) segments: drop size-1 dims, merge neighbours alike.
    segments: list[list] = []
    for d, extent in enumerate(shape):
        if extent == 1:
            continue
        red = d in axes
        if segments and segments[-1][1] == red:
            segments[-1][0] *= extent
        else:
            segments.append([extent, red])
    inner = 1
    if segments and not segments[-1][1]:
        inner = segments.pop()[0]
    kept: list[tuple[int, int]] = []
    reduced: list[tuple[int, int]] = []
    stride = inner
    for extent, red in reversed(segments):
        (reduced if red else kept).insert(0, (extent, stride))
        stride *= extent
    if len(kept) > 3 or len(reduced) > 3:
        raise ModelError(f"reduction of {list(shape)} over {axes} is too fragmented")
    kept = [(1, 0)] * (3 - len(kept)) + kept
    reduced = [(1, 0)] * (3 - len(reduced)) + reduced
    return ReduceShape(outer=[e for e, _ in kept], outer_stride=[s for _, s in kept],
                       reduce=[e for e, _ in reduced], reduce_stride=[s for _, s in reduced],
                       inner=inner)


def mean_multiplier(in_scale: float, out_scale: float, count: int,
                    is_mean: bool) -> tuple[int, int]:
    """TFLM's QuantizedMeanOrSum multiplier: in/out scale ratio in double, and for MEAN
    1/count folded in by shifting left by floor(log2(count)) (at most 32, and never
    past a total shift of −31) then dividing with int64 truncation."""
    mult, shift = quantize_multiplier(float(np.float32(in_scale)) / float(np.float32(out_scale)))
    if is_mean and count > 0:
        extra = min(count.bit_length() - 1, 32, 31 + shift)
        mult = (mult << extra) // count
        shift -= extra
    return int(mult), int(shift)


def _axes(ctx: LowerCtx) -> list[int] | str:
    x, axis = ctx.input(0), ctx.input(1)
    if axis is None or not axis.is_const:
        return "the axis tensor must be a constant"
    if axis.dtype != "int32":
        return f"axis tensor of type {axis.dtype} (int32 expected)"
    try:
        return resolve_axes(axis.data, len(x.shape))
    except ModelError as e:
        return str(e)


def _expected_out_shape(shape, axes, keep_dims: bool) -> tuple[int, ...]:
    if keep_dims:
        return tuple(1 if d in axes else e for d, e in enumerate(shape))
    return tuple(e for d, e in enumerate(shape) if d not in axes)


def _check(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    if x is None:
        return "missing input"
    dtypes = ("int8", "int16") if ctx.op.type in ("MEAN", "SUM") else ("int8",)
    if x.dtype not in dtypes or y.dtype != x.dtype:
        return (f"{x.dtype} -> {y.dtype} {ctx.op.type} is not supported "
                f"({' and '.join(dtypes)} only)")
    if x.quant is None or y.quant is None or x.quant.per_channel or y.quant.per_channel:
        return f"{x.dtype} reductions need per-tensor quantized input and output"
    if len(x.shape) > MAX_RANK:
        return f"rank {len(x.shape)} input (at most {MAX_RANK})"
    axes = _axes(ctx)
    if isinstance(axes, str):
        return axes
    want = _expected_out_shape(x.shape, axes, bool(ctx.op.options.get("keep_dims", False)))
    if int(np.prod(want, dtype=np.int64)) != y.size:
        return f"output shape {list(y.shape)} does not match {list(want)}"
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    limit = MAX_COUNT_S16 if x.dtype == "int16" else MAX_COUNT
    if count > limit:
        return f"reduces {count} elements per output (at most {limit} at {x.dtype})"
    if ctx.op.type in ("MEAN", "SUM"):
        # kiln_reduce_sum_requant_s8 shifts left by at most 30 (kiln_requantize's range).
        _, shift = mean_multiplier(qparams(x)[0], qparams(y)[0], count, ctx.op.type == "MEAN")
        if shift > 30:
            return (f"input scale / output scale = {qparams(x)[0] / qparams(y)[0]:.3g} is "
                    "2^30 or more: no int32 requantization multiplier holds it")
    if ctx.op.type == "REDUCE_MAX":
        (s_in, z_in), (s_out, z_out) = qparams(x), qparams(y)
        if np.float32(s_in) != np.float32(s_out) or z_in != z_out:
            return (f"input quantization ({fmt_quant(x)}) differs from the output's "
                    f"({fmt_quant(y)}); TFLite's int8 REDUCE_MAX does not requantize")
    return None


def _layer(ctx: LowerCtx) -> tuple[ReduceShape, list[int]]:
    x = ctx.input(0)
    axes = _axes(ctx)
    assert not isinstance(axes, str)
    return reduce_shape(tuple(x.shape), axes), axes


def _summary(ctx: LowerCtx, axes: list[int], extra: str = "") -> str:
    keep = bool(ctx.op.options.get("keep_dims", False))
    return f"axes {axes}, keep_dims {'true' if keep else 'false'}" + (f", {extra}" if extra else "")


@lowering("MEAN", "SUM", check=_check)
def lower_mean_sum(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    shape, axes = _layer(ctx)
    (s_in, z_in), (s_out, z_out) = qparams(x), qparams(y)
    is_mean = ctx.op.type == "MEAN"
    kernel = "kiln_reduce_sum_requant_s16" if x.dtype == "int16" else "kiln_reduce_sum_requant_s8"
    shape_c = "static const kiln_reduce_shape_t shape = {\n" + shape.c_init() + "};\n"
    mult, shift = mean_multiplier(s_in, s_out, shape.count, is_mean)
    bias = -z_in * shape.count
    body = (shape_c +
            "static const kiln_reduce_quant_t quant = {\n"
            f"    .requant = {{{mult}, {shift}}},\n"
            f"    .bias = {bias},\n"
            f"    .output_offset = {z_out},\n"
            "};\n"
            f"return {kernel}(&shape, &quant, {ctx.ptr(x)}, {ctx.ptr(y)});\n")
    what = f"{'mean' if is_mean else 'sum'} of {shape.count}, requantized"
    return LayerCode(kernel=kernel, body=body,
                     summary=_summary(ctx, axes, what))


@lowering("REDUCE_MAX", check=_check)
def lower_reduce_max(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    shape, axes = _layer(ctx)
    body = ("static const kiln_reduce_shape_t shape = {\n" + shape.c_init() + "};\n"
            f"return kiln_reduce_max_s8(&shape, {ctx.ptr(x)}, {ctx.ptr(y)});\n")
    return LayerCode(kernel="kiln_reduce_max_s8", body=body,
                     summary=_summary(ctx, axes, f"max of {shape.count}"))
