"""Lowerings: int8 ABS, RSQRT, SQUARED_DIFFERENCE and PRELU; int16 ABS and
SQUARED_DIFFERENCE (the int16 forms tflite-micro has).

ABS and RSQRT are unary, so each becomes a 256-entry table (`kiln_lut_s8`, see
activation.py) filled by running TFLM's integer recipe (micro/kernels/elementwise.cc)
for every int8 input. PRELU with a single constant alpha is unary too and gets a table;
any other PRELU, and SQUARED_DIFFERENCE, run a C kernel (crt/kernels/math_ops.c) with
parameters derived as TFLM's Prepare() does (prelu_common.cc, squared_difference.cc).

Not here, because the tflite-micro interpreter kiln is tested against has no int8
version of them: NEG, SQRT, EXP, LOG (float32 only).
"""

from __future__ import annotations

import math

import numpy as np

from ...numerics import quantize_multiplier, requantize
from ..lowering import LayerCode, LowerCtx, c_dims, lowering, qparams
from . import fixedpoint
from .activation import (IDENTITY_REQUANT, int8_unary_check, int16_unary_check, lut_layer,
                         relu_s16_layer)
from .elementwise import broadcast_shape, check_broadcast, collapse_broadcast

_INT8 = np.arange(-128, 128, dtype=np.int64)        # every int8 input, table order
_RSQRT_SHIFT = 20                                   # TFLM's kShift in RsqrtEvalQuantized
_SQDIFF_LEFT_SHIFT = 7                              # TFLM's headroom for int8 SQUARED_DIFFERENCE


def _clamp8(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -128, 127).astype(np.int8)


# --- tables --------------------------------------------------------------------------

def abs_table(input_scale: float, input_zero_point: int, output_scale: float,
              output_zero_point: int) -> np.ndarray:
    """AbsEvalQuantized: |x - zero point|, rescaled only when the (float32) scales
    differ, by input / output scale in double."""
    value = np.abs(_INT8 - input_zero_point)
    if np.float32(input_scale) != np.float32(output_scale):
        multiplier, shift = quantize_multiplier(float(input_scale) / float(output_scale))
        value = requantize(value, multiplier, shift)
    return _clamp8(value + output_zero_point)


def inv_sqrt_multiplier_exp(value: int) -> tuple[int, int]:
    """TFLite's GetInvSqrtQuantizedMultiplierExp(value, reverse_shift=-1): 1/sqrt(value)
    as (multiplier, left shift), five Newton-Raphson steps in Q3.28."""
    assert value >= 0
    if value <= 1:
        return (1 << 31) - 1, 0
    shift = 11
    while value >= (1 << 29):
        value //= 4
        shift += 1
    max_left_shift_bits = (32 - value.bit_length()) - 1          # CountLeadingZeros - 1
    left_shift_bit_pairs = max_left_shift_bits // 2 - 1
    shift -= left_shift_bit_pairs
    value <<= 2 * left_shift_bit_pairs
    assert (1 << 27) <= value < (1 << 29)
    half_input = int(fixedpoint.mul_by_pot(value >> 1, -1))     # Q3.28
    half_three = (1 << 28) + (1 << 27)                         # 1.5 in Q3.28
    x = 1 << 28                                                # 1.0 in Q3.28
    for _ in range(5):
        x3 = fixedpoint.rescale(fixedpoint.mul(fixedpoint.mul(x, x), x), 9, 3)
        x = int(fixedpoint.rescale(fixedpoint.sub(fixedpoint.mul(half_three, x),
                                                  fixedpoint.mul(half_input, x3)), 6, 3))
    inv_sqrt = int(fixedpoint.mul(x, 1518500250))              # times sqrt(2)/2 in Q0.31
    if shift < 0:
        inv_sqrt = int(np.int64(inv_sqrt) << -shift)
        shift = 0
    return inv_sqrt, -shift


def rsqrt_multiplier(input_scale: float, output_scale: float) -> tuple[int, int]:
    """SetRsqrtOutputMultiplier: 1 / (sqrt(input scale) * output scale), in double."""
    return quantize_multiplier(1.0 / (math.sqrt(float(input_scale)) * float(output_scale)))


def rsqrt_table(input_scale: float, input_zero_point: int, output_scale: float,
                output_zero_point: int) -> np.ndarray:
    """RsqrtEvalQuantized. The input's zero point gives 127 (TFLM: "any value close to
    0 represents the max output value"). Inputs below the zero point, where TFLM stops
    with "Rsqrt is only defined for positive values", also give 127."""
    multiplier, shift = rsqrt_multiplier(input_scale, output_scale)
    table = np.full(256, 127, dtype=np.int64)
    for i, x in enumerate(_INT8):
        value = int(x) - input_zero_point
        if value <= 0:
            continue
        inv_m, inv_s = inv_sqrt_multiplier_exp(value)
        data = requantize(1, inv_m, inv_s + _RSQRT_SHIFT)
        table[i] = requantize(data, multiplier, shift - _RSQRT_SHIFT) + output_zero_point
    return _clamp8(table)


def prelu_multipliers(input_scale: float, alpha_scale: float,
                      output_scale: float) -> tuple[tuple[int, int], tuple[int, int]]:
    """CalculatePreluParams: ((m, s) for x >= 0: input / output scale, (m, s) for x < 0:
    input * alpha / output scale), in double."""
    si, sa, so = float(input_scale), float(alpha_scale), float(output_scale)
    return quantize_multiplier(si / so), quantize_multiplier(si * sa / so)


def prelu_table(input_scale: float, input_zero_point: int, alpha: int, alpha_scale: float,
                alpha_zero_point: int, output_scale: float,
                output_zero_point: int) -> np.ndarray:
    """BroadcastPrelu4DSlow for one int8 alpha value shared by every element."""
    (m1, s1), (m2, s2) = prelu_multipliers(input_scale, alpha_scale, output_scale)
    x = _INT8 - input_zero_point
    negative = requantize(x * (int(alpha) - alpha_zero_point), m2, s2)
    return _clamp8(output_zero_point + np.where(x >= 0, requantize(x, m1, s1), negative))


def squared_difference_multipliers(s1: float, s2: float, so: float,
                                   left_shift: int = _SQDIFF_LEFT_SHIFT
                                   ) -> tuple[float, float, float]:
    """squared_difference.cc's PrepareQuantized with left shift 7 (int8; 0 at int16): the
    inputs on a common scale (twice the larger one), the squared difference back to the
    output. 2^(2 left shift) * output scale is a float32 product in TFLM (exact: a power
    of two)."""
    twice_max = 2.0 * max(float(s1), float(s2))
    denominator = float(np.float32(1 << (2 * left_shift)) * np.float32(so))
    return float(s1) / twice_max, float(s2) / twice_max, twice_max * twice_max / denominator


# --- checks --------------------------------------------------------------------------

def _per_tensor(*tensors) -> str | None:
    for t in tensors:
        if t.quant is None or t.quant.per_channel:
            return f"tensor {t.name} needs per-tensor quantization"
        if not float(t.quant.scale[0]) > 0:
            return f"tensor {t.name} has a non-positive scale"
    return None


def _shift_problem(what: str, real: float) -> str | None:
    _, shift = quantize_multiplier(real)
    if not -31 <= shift <= 30:
        return f"{what} multiplier {real:.6g} is out of range (shift {shift})"
    return None


def _check_binary(ctx: LowerCtx, dtypes: tuple[str, ...] = ("int8",)) -> str | None:
    """Two inputs that broadcast to the output, all per-tensor quantized; int16 (where
    allowed) with zero points 0, as TFLM requires."""
    problem = (check_broadcast(ctx, dtypes)
               or _per_tensor(ctx.input(0), ctx.input(1), ctx.output(0)))
    if problem or ctx.output(0).dtype != "int16":
        return problem
    for t in (ctx.input(0), ctx.input(1), ctx.output(0)):
        if qparams(t)[1] != 0:
            return f"int16 tensor {t.name} needs zero point 0 (got {qparams(t)[1]})"
    return None


def _check_rsqrt(ctx: LowerCtx) -> str | None:
    problem = int8_unary_check(ctx)
    if problem:
        return problem
    _, shift = rsqrt_multiplier(qparams(ctx.input(0))[0], qparams(ctx.output(0))[0])
    if not -31 <= shift - _RSQRT_SHIFT <= 30:
        return (f"output multiplier shift {shift} - {_RSQRT_SHIFT} is outside [-31, 30] "
                "(scales too large or too small)")
    return None


def _sqdiff_left_shift(ctx: LowerCtx) -> int:
    return 0 if ctx.output(0).dtype == "int16" else _SQDIFF_LEFT_SHIFT


def _check_squared_difference(ctx: LowerCtx) -> str | None:
    problem = _check_binary(ctx, ("int8", "int16"))
    if problem:
        return problem
    _, _, real_out = squared_difference_multipliers(
        qparams(ctx.input(0))[0], qparams(ctx.input(1))[0], qparams(ctx.output(0))[0],
        _sqdiff_left_shift(ctx))
    return _shift_problem("output", real_out)


def _check_prelu(ctx: LowerCtx) -> str | None:
    problem = _check_binary(ctx)
    if problem:
        return problem
    si, sa, so = (qparams(t)[0] for t in (ctx.input(0), ctx.input(1), ctx.output(0)))
    return (_shift_problem("positive-side", si / so)
            or _shift_problem("negative-side (alpha)", si * sa / so))


# --- lowerings -----------------------------------------------------------------------

def _check_abs(ctx: LowerCtx) -> str | None:
    if ctx.input(0) is None or ctx.input(0).dtype != "int16":
        return int8_unary_check(ctx)
    problem = int16_unary_check(ctx)
    if problem:
        return problem
    return _shift_problem("output", qparams(ctx.input(0))[0] / qparams(ctx.output(0))[0])


@lowering("ABS", check=_check_abs)
def lower_abs(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    if x.dtype == "int16":
        # AbsEvalQuantized: |v| rescaled only when the float32 scales differ. requant(v, -m)
        # for v < 0 is requant(|v|, m) exactly (the same product), so ABS is the
        # piecewise-linear kernel with slopes m and -m.
        (si, _), (so, _) = qparams(x), qparams(y)
        m = IDENTITY_REQUANT if np.float32(si) == np.float32(so) else \
            quantize_multiplier(float(si) / float(so))
        return relu_s16_layer(ctx, m, (-m[0], m[1]), -32768, 32767, "|x|, requantized")
    return lut_layer(ctx, abs_table(*qparams(x), *qparams(y)), x, y, "|x|, requantized")


@lowering("RSQRT", check=_check_rsqrt)
def lower_rsqrt(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    return lut_layer(ctx, rsqrt_table(*qparams(x), *qparams(y)), x, y,
                     "TFLM fixed-point 1/sqrt(x); 127 for x <= 0")


def _broadcast_dims(ctx: LowerCtx, names: tuple[str, str]) -> tuple[str, list[str]]:
    a, b = ctx.input(0), ctx.input(1)
    shape = broadcast_shape(a.shape, b.shape)
    da, db, do = collapse_broadcast(a.shape, b.shape, shape)
    lines = [f"static const kiln_dims_t {names[0]}_dims = {c_dims(da)};",
             f"static const kiln_dims_t {names[1]}_dims = {c_dims(db)};",
             f"static const kiln_dims_t output_dims = {c_dims(do)};"]
    if da == db == do:
        return f"{ctx.output(0).size} elements", lines
    return f"broadcast {list(da)} x {list(db)} -> {list(do)} (merged dims)", lines


def _requant_literal(real: float) -> str:
    m, s = quantize_multiplier(real)
    return f"{{{m}, {s}}}, /* {real:.9g} */"


@lowering("SQUARED_DIFFERENCE", check=_check_squared_difference)
def lower_squared_difference(ctx: LowerCtx) -> LayerCode:
    a, b, out = ctx.input(0), ctx.input(1), ctx.output(0)
    (s1, z1), (s2, z2), (so, zo) = qparams(a), qparams(b), qparams(out)
    left_shift = _sqdiff_left_shift(ctx)
    r1, r2, ro = squared_difference_multipliers(s1, s2, so, left_shift)
    summary, dims = _broadcast_dims(ctx, ("input1", "input2"))
    kernel = f"kiln_squared_difference_s{16 if out.dtype == 'int16' else 8}"
    body = [
        "static const kiln_squared_difference_params_t params = {",
        f"    .input1_offset = {-z1},",
        f"    .input2_offset = {-z2},",
        f"    .output_offset = {zo},",
        f"    .left_shift = {left_shift},",
        f"    .input1 = {_requant_literal(r1)}",
        f"    .input2 = {_requant_literal(r2)}",
        f"    .output = {_requant_literal(ro)}",
        "};",
        *dims,
        f"return {kernel}(&params, &input1_dims, {ctx.ptr(a)}, "
        f"&input2_dims, {ctx.ptr(b)}, &output_dims, {ctx.ptr(out)});"]
    return LayerCode(kernel=kernel, body="\n".join(body),
                     summary=summary, macs=out.size)


@lowering("PRELU", check=_check_prelu)
def lower_prelu(ctx: LowerCtx) -> LayerCode:
    x, alpha, out = ctx.input(0), ctx.input(1), ctx.output(0)
    (si, zi), (sa, za), (so, zo) = qparams(x), qparams(alpha), qparams(out)
    if alpha.is_const and alpha.size == 1 and x.size == out.size:
        value = int(np.asarray(alpha.data).reshape(-1)[0])
        table = prelu_table(si, zi, value, sa, za, so, zo)
        return lut_layer(ctx, table, x, out,
                         f"constant alpha {value} ({(value - za) * sa:.6g})")
    summary, dims = _broadcast_dims(ctx, ("input", "alpha"))
    body = [
        "static const kiln_prelu_params_t params = {",
        f"    .input_offset = {-zi},",
        f"    .alpha_offset = {-za},",
        f"    .output_offset = {zo},",
        f"    .positive = {_requant_literal(si / so)}",
        f"    .negative = {_requant_literal(si * sa / so)}",
        "};",
        *dims,
        f"return kiln_prelu_s8(&params, &input_dims, {ctx.ptr(x)}, "
        f"&alpha_dims, {ctx.ptr(alpha)}, &output_dims, {ctx.ptr(out)});"]
    return LayerCode(kernel="kiln_prelu_s8", body="\n".join(body), summary=summary,
                     macs=out.size)
