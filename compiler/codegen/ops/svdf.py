"""Lowering: SVDF (int8, with int16 or int8 state) → kiln_svdf_s8_state_s16 / _s8.

An SVDF layer keeps a memory of its last M feature activations per filter in a variable
tensor (model state: it lives in the state region and keeps its value from one run to
the next); each run shifts it, appends this step's features, and reduces it with the
time weights (crt/kernels/svdf.h). The two multipliers are tflite-micro's: the scale
products are taken in float32 (PrepareSvdf multiplies the float scales before widening
to double), then QuantizeMultiplier.

As TFLite's integer kernels, the fused activation is not applied: the converter
quantizes a RELU SVDF's output to a range that starts at 0, and tflite-micro clamps to
int8 only (TFLite itself requires RELU there and does the same). Float SVDF models go
through `kiln quantize` (compiler/quantize/svdf.py: the state carried across the
calibration samples); hybrid ones (float input, int8 weights) tflite-micro does not run.
"""

from __future__ import annotations

import numpy as np

from ...ir import DTYPES, Tensor
from ...numerics import quantize_multiplier
from ..bounds import Extreme, extremes
from ..lowering import LayerCode, LowerCtx, lowering, qparams

_KERNELS = {"int16": "kiln_svdf_s8_state_s16", "int8": "kiln_svdf_s8_state_s8"}


def _tensors(ctx: LowerCtx) -> tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor, Tensor]:
    """(input, weights_feature, weights_time, bias or None, state, output)."""
    return (ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4),
            ctx.output(0))


def _scale_product(a: float, b: float, c: float) -> float:
    """a * b / c in float32, as tflite-micro's PrepareSvdf computes its effective scales."""
    return float(np.float32(np.float32(a) * np.float32(b)) / np.float32(c))


def _multipliers(ctx: LowerCtx) -> tuple[tuple[int, int], tuple[int, int]]:
    """(feature, output) (multiplier, shift): input * weights_feature into the state's
    scale, and state * weights_time into the output's."""
    x, wf, wt, _, st, y = _tensors(ctx)
    sx, swf, swt, sst, sy = (qparams(t)[0] for t in (x, wf, wt, st, y))
    return (quantize_multiplier(_scale_product(sx, swf, sst)),
            quantize_multiplier(_scale_product(sst, swt, sy)))


def _dims(ctx: LowerCtx) -> tuple[int, int, int, int, int]:
    """(batches, input_size, filters, memory_size, rank)."""
    x, wf, wt = ctx.input(0), ctx.input(1), ctx.input(2)
    return (int(x.shape[0]), int(x.shape[1]), int(wf.shape[0]), int(wt.shape[1]),
            int(ctx.op.options.get("rank", 0)))


def _check(ctx: LowerCtx) -> str | None:
    if len(ctx.op.inputs) != 5 or any(ctx.input(i) is None for i in (0, 1, 2, 4)):
        return "SVDF needs input, feature weights, time weights, (bias,) state"
    x, wf, wt, b, st, y = _tensors(ctx)
    if x.dtype == "float32" and wf.dtype == "int8":
        return "hybrid SVDF (float input, int8 weights) is not supported; quantize the model"
    if x.dtype != "int8" or y.dtype != "int8" or wf.dtype != "int8":
        return (f"only int8 SVDF is supported (input {x.dtype}, feature weights {wf.dtype}, "
                f"output {y.dtype})")
    if wt.dtype not in _KERNELS or st.dtype != wt.dtype:
        return (f"time weights and state must both be int16 or both int8 (got {wt.dtype} and "
                f"{st.dtype})")
    if not (wf.is_const and wt.is_const):
        return "the feature and time weights must be constant tensors"
    if not st.is_variable:
        return f"the state tensor {st.name} is not a variable (is_variable) tensor"
    if b is not None and (b.dtype != "int32" or not b.is_const):
        return f"the bias must be a constant int32 tensor (got {b.dtype}" \
               f"{'' if b.is_const else ', not constant'})"
    for t in (x, wf, wt, st, y):
        if len(t.shape) != 2:
            return f"tensor {t.name} {list(t.shape)} is not 2-D"
        if t.size == 0:
            return f"tensor {t.name} {list(t.shape)} is empty"
        if t.quant is None:
            return f"tensor {t.name} is not quantized"
        if t.quant.per_channel:
            return f"tensor {t.name} is quantized per channel (SVDF takes one scale per tensor)"
    batches, input_size, filters, memory, rank = _dims(ctx)
    if rank < 1 or filters % rank != 0:
        return f"rank {rank} does not divide the {filters} filters"
    units = filters // rank
    if tuple(wf.shape) != (filters, input_size):
        return f"feature weights {list(wf.shape)} != [{filters}, {input_size}] (filters, input)"
    if wt.shape[0] != filters:
        return f"time weights {list(wt.shape)} do not have {filters} rows (filters)"
    if tuple(st.shape) != (batches, filters * memory):
        return f"state {list(st.shape)} != [{batches}, {filters * memory}] (batches, " \
               f"filters x memory {memory})"
    if b is not None and b.size != units:
        return f"bias has {b.size} values for {units} units"
    if tuple(y.shape) != (batches, units):
        return f"output {list(y.shape)} != [{batches}, {units}] (batches, units)"
    info = np.iinfo(DTYPES[st.dtype])
    if not info.min <= qparams(st)[1] <= info.max:
        return f"state zero point {qparams(st)[1]} is outside {st.dtype}"
    for what, (_, shift) in zip(("feature", "output"), _multipliers(ctx)):
        if shift > 30:
            return f"the {what} multiplier is too large (shift {shift} > 30)"
    return None


@extremes("SVDF")
def _svdf_extremes(ctx: LowerCtx) -> list[Extreme]:
    """svdf.c's element counts and row offsets."""
    batches, input_size, filters, memory, rank = _dims(ctx)
    return [("batches * filters * memory_size", batches * filters * memory),
            ("filters * input_size", filters * input_size),
            ("batches * input_size", batches * input_size),
            ("batches * units", batches * (filters // max(rank, 1)))]


@lowering("SVDF", check=_check)
def lower_svdf(ctx: LowerCtx) -> LayerCode:
    x, wf, wt, b, st, y = _tensors(ctx)
    batches, input_size, filters, memory, rank = _dims(ctx)
    (m1, s1), (m2, s2) = _multipliers(ctx)
    kernel = _KERNELS[st.dtype]
    body = (
        "static const kiln_svdf_params_t params = {\n"
        f"    .batches = {batches}, .input_size = {input_size}, .filters = {filters}, "
        f".memory_size = {memory}, .rank = {rank},\n"
        f"    .input_zero_point = {qparams(x)[1]}, .state_zero_point = {qparams(st)[1]}, "
        f".output_zero_point = {qparams(y)[1]},\n"
        f"    .feature_requant = {{{m1}, {s1}}},\n"
        f"    .output_requant = {{{m2}, {s2}}},\n"
        "};\n"
        f"return {kernel}(&params, {ctx.ptr(x)}, {ctx.ptr(wf)}, {ctx.ptr(wt)}, "
        f"{ctx.ptr(b) if b is not None else 'NULL'}, {ctx.ptr(st)}, {ctx.ptr(y)});\n"
    )
    act = ctx.op.options.get("fused_activation_function", "NONE")
    summary = (f"rank {rank}, {filters // rank} units, memory {memory}, {st.dtype} state "
               f"{st.c_name}" + (f", {act} left to the output range" if act != "NONE" else ""))
    return LayerCode(kernel=kernel, body=body, summary=summary,
                     macs=batches * filters * (input_size + memory))
