"""Lowerings: QUANTIZE and DEQUANTIZE (quantize_common.cc, dequantize_common.cc).

float32 -> int8/int16 and int8/int16 -> float32 call the float kernels of
crt/kernels/quantize.h, which mirror TFLM's float arithmetic. int8 -> int8 and
int8 -> int16 requantization is TFLM's reference_ops::Requantize evaluated here for all
256 inputs and looked up at run time. int16 -> int8/int16/int32 requantization (16x8
models' boundaries, e.g. TFLM's keyword model) runs the same Requantize in C
(`kiln_requantize_s16_*`), the multiplier derived here as quantize_common.cc does.
"""

from __future__ import annotations

import numpy as np

from ...numerics import quantize_multiplier, requantize
from ..lowering import LayerCode, LowerCtx, c_float, fmt_quant, lowering, qparams
from .activation import flat_dims, lut_layer

_RANGES = {"int8": (-128, 127), "int16": (-32768, 32767)}


def requantize_table(input_scale: float, input_zero_point: int, output_scale: float,
                     output_zero_point: int, output_dtype: str = "int8") -> np.ndarray:
    """reference_ops::Requantize for every int8 input: the effective scale in double,
    MultiplyByQuantizedMultiplier, clamp to the output type."""
    multiplier, shift = quantize_multiplier(float(input_scale) / float(output_scale))
    x = np.arange(-128, 128, dtype=np.int64) - input_zero_point
    lo, hi = _RANGES[output_dtype]
    out = np.clip(requantize(x, multiplier, shift) + output_zero_point, lo, hi)
    return out.astype(output_dtype)


def _per_tensor(t) -> str | None:
    if t.quant is None or t.quant.per_channel:
        return f"tensor {t.name} needs per-tensor quantization (got {fmt_quant(t)})"
    if float(t.quant.scale[0]) <= 0:
        return f"tensor {t.name} has a non-positive scale"
    return None


def _check_quantize(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    supported = {("float32", "int8"), ("float32", "int16"), ("int8", "int8"), ("int8", "int16"),
                 ("int16", "int8"), ("int16", "int16"), ("int16", "int32")}
    if (x.dtype, y.dtype) not in supported:
        return (f"{x.dtype} -> {y.dtype} is not supported (kiln has float32 -> int8/int16, "
                "int8 -> int8/int16 and int16 -> int8/int16/int32)")
    for t in ([x] if x.dtype != "float32" else []) + [y]:
        problem = _per_tensor(t)
        if problem:
            return problem
    if x.size != y.size:
        return f"input has {x.size} elements, output {y.size}"
    if x.dtype == "int16":
        _, shift = quantize_multiplier(qparams(x)[0] / qparams(y)[0])
        if not -31 <= shift <= 30:
            return (f"input scale / output scale = {qparams(x)[0] / qparams(y)[0]:.3g} has no "
                    "int32 requantization multiplier")
    return None


@lowering("QUANTIZE", check=_check_quantize)
def lower_quantize(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    so, zo = qparams(y)
    if x.dtype == "float32":
        kernel = "kiln_quantize_f32_s8" if y.dtype == "int8" else "kiln_quantize_f32_s16"
        body = [f"static const kiln_quantize_params_t params = {{{c_float(so)}, {zo}}};",
                f"static const kiln_dims_t input_dims = {flat_dims(x.shape)};",
                f"static const kiln_dims_t output_dims = {flat_dims(y.shape)};",
                f"return {kernel}(&params, &input_dims, {ctx.ptr(x)}, &output_dims, "
                f"{ctx.ptr(y)});"]
        return LayerCode(kernel=kernel, body="\n".join(body),
                         summary="round(x / scale) + zero point, in float32")
    si, zi = qparams(x)
    what = f"requantize s={si:.6g} zp={zi} -> s={so:.6g} zp={zo}"
    if x.dtype == "int16":
        real = float(si) / float(so)              # double, as quantize_common.cc
        m, shift = quantize_multiplier(real)
        kernel = "kiln_requantize_s16_s" + y.dtype[3:]
        body = ["static const kiln_requantize_params_t params = {",
                f"    .requant = {{{m}, {shift}}}, /* {real:.9g} */",
                f"    .input_offset = {-zi},",
                f"    .output_offset = {zo},",
                "};",
                f"static const kiln_dims_t input_dims = {flat_dims(x.shape)};",
                f"static const kiln_dims_t output_dims = {flat_dims(y.shape)};",
                f"return {kernel}(&params, &input_dims, {ctx.ptr(x)}, &output_dims, "
                f"{ctx.ptr(y)});"]
        return LayerCode(kernel=kernel, body="\n".join(body), summary=what)
    if y.dtype == "int8":
        return lut_layer(ctx, requantize_table(si, zi, so, zo), x, y, what)
    table = requantize_table(si, zi, so, zo, "int16")
    name = ctx.const("table", table, "int16_t",
                     f"QUANTIZE table: {what}; entry i for input i - 128")
    body = [f"static const kiln_lut_s16_params_t params = {{{name}}};",
            f"static const kiln_dims_t input_dims = {flat_dims(x.shape)};",
            f"static const kiln_dims_t output_dims = {flat_dims(y.shape)};",
            f"return kiln_lut_s8_s16(&params, &input_dims, {ctx.ptr(x)}, &output_dims, "
            f"{ctx.ptr(y)});"]
    return LayerCode(kernel="kiln_lut_s8_s16", body="\n".join(body),
                     summary=f"256-entry table, {what}")


def _check_dequantize(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    if x.dtype not in ("int8", "int16") or y.dtype != "float32":
        return f"{x.dtype} -> {y.dtype} is not supported (kiln has int8/int16 -> float32)"
    if x.is_const:
        return "a constant input (dequantized weights) is not supported"
    problem = _per_tensor(x)
    if problem:
        return problem
    if x.size != y.size:
        return f"input has {x.size} elements, output {y.size}"
    return None


@lowering("DEQUANTIZE", check=_check_dequantize)
def lower_dequantize(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    si, zi = qparams(x)
    kernel = "kiln_dequantize_s8_f32" if x.dtype == "int8" else "kiln_dequantize_s16_f32"
    body = [f"static const kiln_quantize_params_t params = {{{c_float(si)}, {zi}}};",
            f"static const kiln_dims_t input_dims = {flat_dims(x.shape)};",
            f"static const kiln_dims_t output_dims = {flat_dims(y.shape)};",
            f"return {kernel}(&params, &input_dims, {ctx.ptr(x)}, &output_dims, {ctx.ptr(y)});"]
    return LayerCode(kernel=kernel, body="\n".join(body), summary="scale * (q - zero point)")
