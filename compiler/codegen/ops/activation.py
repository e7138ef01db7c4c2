"""Lowerings: int8 SOFTMAX, and the unary activations as 256-entry lookup tables.

LOGISTIC, TANH, RELU, RELU6, LEAKY_RELU and HARD_SWISH map each of the 256 int8
inputs to one output, so kiln evaluates TFLM's integer recipe for every input here
(numpy, int64) and the C kernel is a table lookup (`kiln_lut_s8`). Each `*_table`
function below transcribes one TFLM reference kernel together with its Prepare()
parameter derivation; the tests feed all 256 inputs through TFLM and compare.

SOFTMAX keeps a C kernel (`kiln_softmax_s8`, TFLM's gemmlowp fixed-point path) and gets
its exp() values from a 256-entry table built here the same way.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import ModelError
from ...ir import Tensor
from ...numerics import (quantize_multiplier, requantize, round_half_away,
                         rounding_divide_by_pot, sat_rounding_doubling_high_mul)
from ..lowering import LayerCode, LowerCtx, c_dims, fmt_quant, lowering, qparams
from . import fixedpoint

_INT8 = np.arange(-128, 128, dtype=np.int64)        # every int8 input, table order


def _clamp8(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -128, 127).astype(np.int8)


def input_radius(integer_bits: int, left_shift: int, total_signed_bits: int = 31) -> int:
    """TFLite's CalculateInputRadius: floor((2^ib - 1) * 2^(tsb - ib) / 2^left_shift), the
    largest |input| whose rescaled value still fits."""
    top = ((1 << integer_bits) - 1) * (1 << (total_signed_bits - integer_bits))
    return int(math.floor(math.ldexp(top, -left_shift)))


def _frexp_multiplier(real: float) -> tuple[int, int]:
    """LOGISTIC/TANH Prepare(): frexp and round, without QuantizeMultiplier's checks."""
    q, shift = math.frexp(real)
    return int(round_half_away(q * (1 << 31))), shift


# --- tables: one per TFLM reference kernel -------------------------------------------

def logistic_table(input_scale: float, input_zero_point: int) -> np.ndarray:
    """reference_integer_ops::Logistic (int8) with logistic_common.cc's parameters.

    The output is always read as scale 1/256, zero point -128 (TFLM checks only the
    zero point)."""
    multiplier, left_shift = _frexp_multiplier(input_scale * (1 << 27))   # Q4.27 input
    radius = input_radius(4, left_shift)
    x = _INT8 - input_zero_point
    in_q4 = requantize(np.clip(x, -radius, radius), multiplier, left_shift)
    out = rounding_divide_by_pot(fixedpoint.logistic(in_q4, 4), 23) - 128
    out = np.where(x <= -radius, -128, np.where(x >= radius, 127, out))
    return _clamp8(out)


def tanh_table(input_scale: float, input_zero_point: int) -> np.ndarray:
    """reference_integer_ops::Tanh (int8) with tanh.cc's parameters. The output is read
    as scale 1/128, zero point 0 whatever the output tensor says (TFLM checks neither)."""
    multiplier, left_shift = _frexp_multiplier(input_scale * (1 << 27))
    radius = input_radius(4, left_shift)
    x = _INT8 - input_zero_point
    in_q4 = requantize(np.clip(x, -radius, radius), multiplier, left_shift)
    out = rounding_divide_by_pot(fixedpoint.tanh(in_q4, 4), 24)
    out = np.where(x <= -radius, -128, np.where(x >= radius, 127, out))
    return _clamp8(out)


def relu_table(input_scale: float, input_zero_point: int, output_scale: float,
               output_zero_point: int) -> np.ndarray:
    """ReluQuantized: rescale to the output, clamp below at the output zero point."""
    multiplier, shift = quantize_multiplier(input_scale / output_scale)
    out = output_zero_point + requantize(_INT8 - input_zero_point, multiplier, shift)
    return _clamp8(np.clip(out, max(-128, output_zero_point), 127))


def relu6_table(input_scale: float, input_zero_point: int) -> np.ndarray:
    """Relu6Quantized: a clamp to [zero, six] in the *input* domain. Like TFLM, no
    rescaling: the output tensor's quantization is not read (the converter gives it the
    input's)."""
    six = round_half_away(float(np.float32(6.0) / np.float32(input_scale))) + input_zero_point
    upper, lower = int(min(max(six, -128), 127)), input_zero_point
    return _clamp8(np.where(_INT8 > upper, upper, np.where(_INT8 < lower, lower, _INT8)))


def leaky_relu_table(input_scale: float, input_zero_point: int, output_scale: float,
                     output_zero_point: int, alpha: float) -> np.ndarray:
    """QuantizeLeakyRelu with leaky_relu_common.cc's two multipliers, input scale *
    alpha / output scale and input scale / output scale, in double (newer TFLM sources
    divide in float32; the interpreter kiln is tested against does not, and the tests pin
    scales where the two differ). A negative alpha scales by |alpha| and negates."""
    alpha_m, alpha_s = quantize_multiplier(input_scale * float(np.float32(alpha)) / output_scale)
    ident_m, ident_s = quantize_multiplier(input_scale / output_scale)
    x = _INT8 - input_zero_point
    identity = requantize(x, ident_m, ident_s)
    scaled = requantize(x, abs(alpha_m), alpha_s)
    scaled = -scaled if alpha_m < 0 else scaled
    return _clamp8(output_zero_point + np.where(x >= 0, identity, scaled))


def _wrap16(x: np.ndarray) -> np.ndarray:
    return ((np.asarray(x, dtype=np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def _srdhm16(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int16."""
    ab = np.asarray(a, dtype=np.int64) * b
    s = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = np.where(s >= 0, s >> 15, -((-s) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, high)


def _sdhm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SaturatingDoublingHighMul on int16: like the above, truncating toward zero."""
    ab = np.asarray(a, dtype=np.int64) * np.asarray(b, dtype=np.int64)
    high = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, high)


def _rdbpot16(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT on int16 (mask and threshold in int16)."""
    x = np.asarray(x, dtype=np.int64)
    mask = int(_wrap16((1 << exponent) - 1))
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def _sat_shift_left16(x: np.ndarray, amount: int) -> np.ndarray:
    return np.clip(np.asarray(x, dtype=np.int64) * (1 << amount), -32768, 32767)


def _downscale_to_int16(m: int) -> int:
    """DownScaleInt32ToInt16Multiplier."""
    if m >= (1 << 31) - 1 - (1 << 15):
        return 32767
    return (m + (1 << 15)) >> 16


def hard_swish_params(input_scale: float, output_scale: float) -> tuple[int, int, int, int]:
    """(output multiplier int16, output exponent, reluish multiplier int16, reluish
    exponent) as hard_swish_common.cc derives them: hires input scale = input scale / 128,
    ratios in double (as for LEAKY_RELU, not the float32 of newer sources)."""
    hires_input_scale = float(input_scale) / 128.0
    reluish_scale = 3.0 / 32768.0
    out_m, out_e = quantize_multiplier(hires_input_scale / float(output_scale))
    rel_m, rel_e = quantize_multiplier(hires_input_scale / reluish_scale)
    return _downscale_to_int16(out_m), out_e, _downscale_to_int16(rel_m), rel_e


def hard_swish_table(input_scale: float, input_zero_point: int, output_scale: float,
                     output_zero_point: int) -> np.ndarray:
    """reference_ops::HardSwish (int8): 16-bit fixed point x * relu6(x + 3) / 6."""
    out_m, out_e, rel_m, rel_e = hard_swish_params(input_scale, output_scale)
    hires = _wrap16((_INT8 - input_zero_point) * 128)
    preshift_output = _srdhm16(hires, out_m)
    reluish = hires
    if rel_e > 0:
        reluish = _sat_shift_left16(reluish, rel_e - 1)
    reluish = _srdhm16(reluish, rel_m)
    if rel_e > 0:
        reluish = _sat_shift_left16(reluish, 1)
    if rel_e < 0:
        reluish = _rdbpot16(reluish, -rel_e)
    reluish = (reluish + (1 << 15)) >> 1                       # [-1, 1] -> [0, 1]
    out = _rdbpot16(_sdhm16(reluish, preshift_output), -out_e)
    out = _wrap16(out + output_zero_point)
    return _clamp8(out)


def softmax_params(beta: float, input_scale: float) -> tuple[int, int, int]:
    """(input multiplier, input left shift, diff_min) of TFLM's int8 softmax
    (PreprocessSoftmaxScaling with 5 integer bits, CalculateInputRadius)."""
    real = min(float(beta) * float(input_scale) * (1 << 26), float((1 << 31) - 1))
    multiplier, left_shift = quantize_multiplier(real)
    diff_min = -input_radius(5, left_shift)
    return multiplier, left_shift, diff_min


def softmax_exp_table(beta: float, input_scale: float) -> np.ndarray:
    """exp_table[d] for d = max - x in [0, 255]: TFLM's exp_on_negative_values of the
    rescaled difference (Q5.26 in, Q0.31 out), 0 where -d < diff_min."""
    multiplier, left_shift, diff_min = softmax_params(beta, input_scale)
    diff = -np.arange(256, dtype=np.int64)
    inside = diff >= diff_min
    rescaled = sat_rounding_doubling_high_mul(np.where(inside, diff, 0) << left_shift, multiplier)
    table = fixedpoint.exp_on_negative_values(rescaled, 5)
    return np.where(inside, table, 0).astype(np.int32)


# --- lowering helpers ----------------------------------------------------------------

def flat_dims(shape: tuple[int, ...]) -> str:
    """NHWC dims; higher ranks fold their leading dims into n (kernels here only need
    the element count and the innermost dim)."""
    shape = tuple(shape) or (1,)
    if len(shape) > 4:
        shape = (int(np.prod(shape[:-3])),) + shape[-3:]
    return c_dims(shape)


def int8_unary_check(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    if x is None:
        return "needs an input"
    if x.dtype != "int8" or y.dtype != "int8":
        return f"only int8 -> int8 is supported (got {x.dtype} -> {y.dtype})"
    for t in (x, y):
        if t.quant is None or t.quant.per_channel:
            return f"tensor {t.name} needs per-tensor quantization"
        if float(t.quant.scale[0]) <= 0:
            return f"tensor {t.name} has a non-positive scale"
    if x.size != y.size:
        return f"input has {x.size} elements, output {y.size}"
    return None


def lut_layer(ctx: LowerCtx, table: np.ndarray, x: Tensor, y: Tensor, what: str) -> LayerCode:
    """A `kiln_lut_s8` call over `table` (256 int8, table[0] for input -128)."""
    assert table.shape == (256,) and table.dtype == np.int8
    name = ctx.const("table", table, "int8_t",
                     f"{ctx.op.type} table: {what}; entry i for input i - 128")
    body = [f"static const kiln_lut_params_t params = {{{name}}};",
            f"static const kiln_dims_t input_dims = {flat_dims(x.shape)};",
            f"static const kiln_dims_t output_dims = {flat_dims(y.shape)};",
            f"return kiln_lut_s8(&params, &input_dims, {ctx.ptr(x)}, &output_dims, {ctx.ptr(y)});"]
    return LayerCode(kernel="kiln_lut_s8", body="\n".join(body),
                     summary=f"256-entry table, {what}")


# --- lowerings -----------------------------------------------------------------------

def _check_logistic(ctx: LowerCtx) -> str | None:
    problem = int8_unary_check(ctx)
    if problem:
        return problem
    if qparams(ctx.output(0))[1] != -128:
        return "int8 LOGISTIC needs output zero point -128 (TFLM requires it)"
    return None


@lowering("LOGISTIC", check=_check_logistic)
def lower_logistic(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    s, z = qparams(x)
    return lut_layer(ctx, logistic_table(s, z), x, y, "TFLM fixed-point logistic")


@lowering("TANH", check=int8_unary_check)
def lower_tanh(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    s, z = qparams(x)
    return lut_layer(ctx, tanh_table(s, z), x, y, "TFLM fixed-point tanh, output 1/128")


@lowering("RELU", check=int8_unary_check)
def lower_relu(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    table = relu_table(*qparams(x), *qparams(y))
    return lut_layer(ctx, table, x, y, "requantize, clamp at output zero point")


@lowering("RELU6", check=int8_unary_check)
def lower_relu6(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    return lut_layer(ctx, relu6_table(*qparams(x)), x, y, "clamp to [0, 6] in the input domain")


def _check_leaky_relu(ctx: LowerCtx) -> str | None:
    problem = int8_unary_check(ctx)
    if problem:
        return problem
    alpha = float(ctx.op.options.get("alpha", 0.0))
    if not np.isfinite(alpha):
        return f"alpha {alpha} is not a finite number"
    return None


@lowering("LEAKY_RELU", check=_check_leaky_relu)
def lower_leaky_relu(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    alpha = float(ctx.op.options.get("alpha", 0.0))
    table = leaky_relu_table(*qparams(x), *qparams(y), alpha)
    return lut_layer(ctx, table, x, y, f"alpha {alpha:.6g}")


def _check_hard_swish(ctx: LowerCtx) -> str | None:
    problem = int8_unary_check(ctx)
    if problem:
        return problem
    _, out_e, _, _ = hard_swish_params(qparams(ctx.input(0))[0], qparams(ctx.output(0))[0])
    if out_e > 0:
        return ("output scale below input scale / 128 (output multiplier exponent "
                f"{out_e} > 0); TFLM rejects it too")
    return None


@lowering("HARD_SWISH", check=_check_hard_swish)
def lower_hard_swish(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    table = hard_swish_table(*qparams(x), *qparams(y))
    return lut_layer(ctx, table, x, y, "TFLM 16-bit fixed-point hard swish")


def _check_softmax(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    if x is None or x.dtype != "int8" or y.dtype != "int8":
        return (f"only int8 -> int8 is supported (got {x.dtype if x else None} -> {y.dtype})")
    if x.quant is None or x.quant.per_channel or y.quant is None or y.quant.per_channel:
        return "needs per-tensor quantization"
    so, zo = qparams(y)
    if np.float32(so) != np.float32(1.0 / 256) or zo != -128:
        return f"int8 output must have scale 1/256 and zero point -128 (got {fmt_quant(y)})"
    if not x.shape:
        return "a scalar (rank 0) input has no axis to normalise over"
    if tuple(x.shape) != tuple(y.shape):
        return f"input shape {list(x.shape)} and output shape {list(y.shape)} differ"
    if x.shape[-1] > 8191:
        return f"softmax over {x.shape[-1]} values; kiln supports up to 8191"
    beta = float(ctx.op.options.get("beta", 1.0))
    real = beta * qparams(x)[0] * (1 << 26)
    if not real > 1.0:
        return f"beta * input scale = {beta * qparams(x)[0]:.3g} is too small (TFLM rejects it)"
    return None


@lowering("SOFTMAX", check=_check_softmax)
def lower_softmax(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    beta = float(ctx.op.options.get("beta", 1.0))
    scale, _ = qparams(x)
    multiplier, left_shift, diff_min = softmax_params(beta, scale)
    table = softmax_exp_table(beta, scale)
    if table[0] != (1 << 31) - 1:
        raise ModelError(f"{ctx.op.describe()}: exp(0) is not 1.0 in the softmax table")
    depth = x.shape[-1]
    rows = x.size // depth
    name = ctx.const("exp_table", table, "int32_t",
                     f"SOFTMAX exp(-d * beta * scale) in Q0.31 for d = max - x; beta {beta:.6g}, "
                     f"input multiplier {multiplier} << {left_shift}, diff_min {diff_min}")
    dims = f"{{1, 1, {rows}, {depth}}}"
    body = [f"static const kiln_softmax_params_t params = {{{name}}};",
            f"static const kiln_dims_t input_dims = {dims};",
            f"static const kiln_dims_t output_dims = {dims};",
            f"return kiln_softmax_s8(&params, &input_dims, {ctx.ptr(x)}, &output_dims, "
            f"{ctx.ptr(y)});"]
    return LayerCode(kernel="kiln_softmax_s8", body="\n".join(body),
                     summary=f"{rows} row(s) of {depth}, beta {beta:.6g}")
