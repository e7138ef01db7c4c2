"""Lowerings: int8 SOFTMAX, and the unary activations as 256-entry lookup tables.

LOGISTIC, TANH, RELU, RELU6, LEAKY_RELU and HARD_SWISH map each of the 256 int8
inputs to one output, so kiln evaluates TFLM's integer recipe for every input here
(numpy, int64) and the C kernel is a table lookup (`kiln_lut_s8`). Each `*_table`
function below transcribes one TFLM reference kernel together with its Prepare()
parameter derivation; the tests feed all 256 inputs through TFLM and compare.

SOFTMAX keeps a C kernel (`kiln_softmax_s8`, TFLM's gemmlowp fixed-point path) and gets
its exp() values from a 256-entry table built here the same way, or, for a short
softmax (a classifier's head), computes them in C with the same fixed point.
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


# --- int16 (16x8) ---------------------------------------------------------------------

_F32 = np.float32


def _round_f32(x) -> np.float32:
    """TfLiteRound on a float: half away from zero."""
    return _F32(round_half_away(float(x)))


def _expf(x: np.float32) -> np.float32:
    """std::exp on a float (glibc's expf is correctly rounded on these arguments)."""
    return _F32(math.exp(float(x)))


def _one_over_one_plus_x(x: np.float32) -> np.float32:
    return _F32(1.0) / (_F32(1.0) + x)


def gen_lut_s16(func, input_min: float, input_max: float) -> np.ndarray:
    """TFLM's gen_lut<float, int16_t, int16_t> over [input_min, input_max] onto [-1, 1]:
    512 samples in Q0.15, each corrected by half the error of the linear interpolation at
    its midpoint, plus the end value (513 entries). Every operation in float32, in
    TFLM's order."""
    lo, hi = _F32(input_min), _F32(input_max)
    step = (hi - lo) / _F32(512)
    half_step = step / _F32(2)
    scale = _F32(65536) / (_F32(1.0) - _F32(-1.0))         # output_scaling_inv, 32768
    table = np.empty(513, dtype=np.int64)
    for i in range(512):
        x = lo + _F32(i) * step
        val = func(x)
        val_midpoint = func(x + half_step)
        val_next = func(lo + _F32(i + 1) * step)
        sample_val = _round_f32(val * scale)
        midpoint_interp_val = _round_f32((val_next * scale + _round_f32(val * scale)) / _F32(2))
        midpoint_val = _round_f32(val_midpoint * scale)
        bias = _round_f32((midpoint_interp_val - midpoint_val) / _F32(2))
        table[i] = int(min(max(sample_val - bias, -32768.0), 32767.0))
    table[512] = int(min(max(_round_f32(func(hi) * scale), -32768.0), 32767.0))
    return table.astype(np.int16)


def softmax_s16_tables() -> tuple[np.ndarray, np.ndarray]:
    """SOFTMAX int16's exp table on [-10, 0] and 1/(1+x) table on [0, 1]
    (softmax_common.cc's Prepare)."""
    return gen_lut_s16(_expf, -10.0, 0.0), gen_lut_s16(_one_over_one_plus_x, 0.0, 1.0)


def softmax_s16_multiplier(beta: float, input_scale: float) -> tuple[int, int]:
    """The int16 input difference rescaled so that -65535 is -10.0: QuantizeMultiplier of
    input scale * beta / (10 / 65535), in double."""
    return quantize_multiplier(float(input_scale) * float(beta) / (10.0 / 65535.0))


# sigmoid(i / 24) in Q0.16, i = 0..255: the table TFLM's int16 LOGISTIC and TANH interpolate
# (tanh(x) = 2 sigmoid(2x) - 1). Within 1 of 65536 * sigmoid(i / 24) but not its rounding
# (entry 4 is 35493 where rounding gives 35492), so kiln keeps the values, measured from
# tflite-micro's int16 TANH; tests/test_ops_int16.py measures them again.
SIGMOID_TABLE_U16 = (
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149,
    40794, 41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369,
    47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169,
    53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370,
    60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302,
    62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
    63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786,
    64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079,
    65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234, 65246, 65258,
    65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
    65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498,
    65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522,
    65523, 65523, 65524, 65524, 65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528,
    65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530, 65530, 65530, 65531, 65531,
    65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65534, 65535
)


def sigmoid_table_u16() -> np.ndarray:
    return np.asarray(SIGMOID_TABLE_U16, dtype=np.uint16)


def checked_log2(x: float) -> tuple[int, bool]:
    """TFLite's CheckedLog2 in float32: (round(log2 x), whether x is within 1e-3 of a
    power of two in the log domain)."""
    x_log2 = _F32(math.log(float(_F32(x)))) * (_F32(1.0) / _F32(math.log(2.0)))
    rounded = _round_f32(x_log2)
    return int(rounded), bool(abs(float(_F32(x_log2 - rounded))) < float(_F32(1e-3)))


def sigmoid_s16_params(input_scale: float, tanh: bool) -> tuple[int, int]:
    """(multiplier, right shift) that bring an int16 input to the sigmoid table's scale,
    as logistic_common.cc / tanh.cc derive them: a power-of-two input scale of 2^-12
    (also 2^-11 for TANH) multiplies by 3 << shift; any other scale by
    scale * 3 * 4096 doubled until above 32767 / 2, truncated."""
    log2_rounded, pot = checked_log2(input_scale)
    left_shift = 12 + log2_rounded
    pot = pot and left_shift in ((0, 1) if tanh else (0,))
    if pot:
        return 3 << left_shift, 0
    multiplier = float(input_scale) * 4096.0 * 3.0
    left_shift = 0
    while multiplier <= 32767.0 / 2.0 and left_shift <= 30:
        left_shift += 1
        multiplier *= 2.0
    return int(multiplier), left_shift


def int16_unary_check(ctx: LowerCtx) -> str | None:
    """int16 -> int16, symmetric (zero point 0) per-tensor quantization, equal sizes."""
    x, y = ctx.input(0), ctx.output(0)
    if x is None:
        return "needs an input"
    if x.dtype != "int16" or y.dtype != "int16":
        return f"only int16 -> int16 is supported here (got {x.dtype} -> {y.dtype})"
    for t in (x, y):
        if t.quant is None or t.quant.per_channel:
            return f"tensor {t.name} needs per-tensor quantization"
        if not float(t.quant.scale[0]) > 0:
            return f"tensor {t.name} has a non-positive scale"
        if qparams(t)[1] != 0:
            return f"int16 tensor {t.name} needs zero point 0 (got {qparams(t)[1]})"
    if x.size != y.size:
        return f"input has {x.size} elements, output {y.size}"
    return None


def _check_sigmoid_s16(ctx: LowerCtx) -> str | None:
    problem = int16_unary_check(ctx)
    if problem:
        return problem
    log2_out, pot = checked_log2(qparams(ctx.output(0))[0])
    if not pot or log2_out != -15:
        return (f"int16 {ctx.op.type} needs output scale 2^-15 (got "
                f"{qparams(ctx.output(0))[0]:.6g}); TFLM requires it")
    multiplier, _ = sigmoid_s16_params(qparams(ctx.input(0))[0], ctx.op.type == "TANH")
    if multiplier > 32767:
        return f"input scale {qparams(ctx.input(0))[0]:.6g} is too large (TFLM's limit is 2.66)"
    return None


def _lower_sigmoid_s16(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    tanh = ctx.op.type == "TANH"
    multiplier, shift = sigmoid_s16_params(qparams(x)[0], tanh)
    table = ctx.const("sigmoid_table", sigmoid_table_u16(), "uint16_t",
                      "sigmoid(i / 24) in Q0.16, i = 0..255")
    kernel = "kiln_tanh_s16" if tanh else "kiln_logistic_s16"
    body = [f"static const kiln_sigmoid_s16_params_t params = {{{table}, {multiplier}, {shift}}};",
            f"static const kiln_dims_t input_dims = {flat_dims(x.shape)};",
            f"static const kiln_dims_t output_dims = {flat_dims(y.shape)};",
            f"return {kernel}(&params, &input_dims, {ctx.ptr(x)}, &output_dims, {ctx.ptr(y)});"]
    return LayerCode(kernel=kernel, body="\n".join(body),
                     summary=f"input * {multiplier} >> {shift} onto the sigmoid table")


# --- LOG_SOFTMAX (int8) -----------------------------------------------------------------

LOG_SOFTMAX_OUTPUT = (16.0 / 256, 127)      # TFLM's fixed output quantization (scale, zp)


def log_softmax_params(input_scale: float) -> dict:
    """TFLM's int8 LOG_SOFTMAX Prepare (PreprocessLogSoftmaxScalingExp, beta 1, 5 integer
    bits): the exp table and the rescaled differences for d = max - x in [0, 255], diff_min,
    and the reverse multiplier ((1 << (31 - left shift)) / multiplier, in double)."""
    multiplier, left_shift, diff_min = softmax_params(1.0, input_scale)
    diff = -np.arange(256, dtype=np.int64)
    inside = diff >= diff_min
    rescaled = sat_rounding_doubling_high_mul(np.where(inside, diff, 0) << left_shift, multiplier)
    reverse = quantize_multiplier((1 << (31 - left_shift)) / float(multiplier))
    return {"exp_table": softmax_exp_table(1.0, input_scale),
            "diff_table": np.where(inside, rescaled, 0).astype(np.int32),
            "diff_min": diff_min, "reverse": reverse}


def _check_log_softmax(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    if x is None or x.dtype != "int8" or y.dtype != "int8":
        return (f"only int8 -> int8 is supported (got {x.dtype if x else None} -> {y.dtype}); "
                "a float model needs `kiln quantize` first")
    if x.quant is None or x.quant.per_channel or y.quant is None or y.quant.per_channel:
        return "needs per-tensor quantization"
    so, zo = qparams(y)
    if np.float32(so) != np.float32(LOG_SOFTMAX_OUTPUT[0]) or zo != LOG_SOFTMAX_OUTPUT[1]:
        return f"int8 output must have scale 16/256 and zero point 127 (got {fmt_quant(y)})"
    if not x.shape:
        return "a scalar (rank 0) input has no axis to normalise over"
    if tuple(x.shape) != tuple(y.shape):
        return f"input shape {list(x.shape)} and output shape {list(y.shape)} differ"
    if x.shape[-1] > 4095:
        return f"log softmax over {x.shape[-1]} values; kiln supports up to 4095"
    if not qparams(x)[0] * (1 << 26) > 1.0:
        return f"input scale {qparams(x)[0]:.3g} is too small (TFLM rejects it)"
    return None


@lowering("LOG_SOFTMAX", check=_check_log_softmax)
def lower_log_softmax(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    p = log_softmax_params(qparams(x)[0])
    if p["exp_table"][0] != (1 << 31) - 1:
        raise ModelError(f"{ctx.op.describe()}: exp(0) is not 1.0 in the softmax table")
    exp_name = ctx.const("exp_table", p["exp_table"], "int32_t",
                         "LOG_SOFTMAX exp(-d * scale) in Q0.31 for d = max - x")
    diff_name = ctx.const("diff_table", p["diff_table"], "int32_t",
                          "LOG_SOFTMAX -d * scale in Q5.26 for d = max - x")
    depth = x.shape[-1]
    rows = x.size // depth
    dims = f"{{1, 1, {rows}, {depth}}}"
    body = ["static const kiln_log_softmax_params_t params = {",
            f"    .exp_table = {exp_name},",
            f"    .diff_table = {diff_name},",
            f"    .diff_min = {p['diff_min']},",
            f"    .reverse = {{{p['reverse'][0]}, {p['reverse'][1]}}},",
            "};",
            f"static const kiln_dims_t input_dims = {dims};",
            f"static const kiln_dims_t output_dims = {dims};",
            f"return kiln_log_softmax_s8(&params, &input_dims, {ctx.ptr(x)}, &output_dims, "
            f"{ctx.ptr(y)});"]
    return LayerCode(kernel="kiln_log_softmax_s8", body="\n".join(body),
                     summary=f"{rows} row(s) of {depth}")


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
    if ctx.input(0) is not None and ctx.input(0).dtype == "int16":
        return _check_sigmoid_s16(ctx)
    problem = int8_unary_check(ctx)
    if problem:
        return problem
    if qparams(ctx.output(0))[1] != -128:
        return "int8 LOGISTIC needs output zero point -128 (TFLM requires it)"
    return None


@lowering("LOGISTIC", check=_check_logistic)
def lower_logistic(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    if x.dtype == "int16":
        return _lower_sigmoid_s16(ctx)
    s, z = qparams(x)
    return lut_layer(ctx, logistic_table(s, z), x, y, "TFLM fixed-point logistic")


def _check_tanh(ctx: LowerCtx) -> str | None:
    if ctx.input(0) is not None and ctx.input(0).dtype == "int16":
        return _check_sigmoid_s16(ctx)
    return int8_unary_check(ctx)


@lowering("TANH", check=_check_tanh)
def lower_tanh(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    if x.dtype == "int16":
        return _lower_sigmoid_s16(ctx)
    s, z = qparams(x)
    return lut_layer(ctx, tanh_table(s, z), x, y, "TFLM fixed-point tanh, output 1/128")


def _unary_check(ctx: LowerCtx) -> str | None:
    """int8 -> int8, or symmetric int16 -> int16 (the int16 kernels' rule)."""
    if ctx.input(0) is not None and ctx.input(0).dtype == "int16":
        return int16_unary_check(ctx)
    return int8_unary_check(ctx)


IDENTITY_REQUANT = (1 << 30, 1)   # requantization by exactly 1.0


def _requant_s16(real: float) -> tuple[int, int]:
    m, shift = quantize_multiplier(real)
    return (m, shift) if -31 <= shift <= 30 else (0, 0)


def relu_s16_layer(ctx: LowerCtx, positive: tuple[int, int], negative: tuple[int, int],
                    lo: int, hi: int, what: str) -> LayerCode:
    """A kiln_leaky_relu_s16 call (RELU, RELU6 and LEAKY_RELU at int16)."""
    x, y = ctx.input(0), ctx.output(0)
    body = ["static const kiln_leaky_relu_s16_params_t params = {",
            f"    .input_offset = {-qparams(x)[1]},",
            f"    .output_offset = {qparams(y)[1]},",
            f"    .positive = {{{positive[0]}, {positive[1]}}},",
            f"    .negative = {{{negative[0]}, {negative[1]}}},",
            f"    .clamp = {{{lo}, {hi}}},",
            "};",
            f"static const kiln_dims_t input_dims = {flat_dims(x.shape)};",
            f"static const kiln_dims_t output_dims = {flat_dims(y.shape)};",
            f"return kiln_leaky_relu_s16(&params, &input_dims, {ctx.ptr(x)}, &output_dims, "
            f"{ctx.ptr(y)});"]
    return LayerCode(kernel="kiln_leaky_relu_s16", body="\n".join(body), summary=what)


def _check_relu(ctx: LowerCtx) -> str | None:
    problem = _unary_check(ctx)
    if problem or ctx.input(0).dtype != "int16":
        return problem
    _, shift = quantize_multiplier(qparams(ctx.input(0))[0] / qparams(ctx.output(0))[0])
    if not -31 <= shift <= 30:
        return "input scale / output scale has no int32 multiplier"
    return None


@lowering("RELU", check=_check_relu)
def lower_relu(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    if x.dtype == "int16":
        # ReluPrepare: act_min 0 -> output zero point + roundf(0 / scale), i.e. the zero point.
        m = _requant_s16(float(qparams(x)[0]) / float(qparams(y)[0]))
        return relu_s16_layer(ctx, m, m, max(-32768, qparams(y)[1]), 32767,
                               "requantize, clamp at output zero point")
    table = relu_table(*qparams(x), *qparams(y))
    return lut_layer(ctx, table, x, y, "requantize, clamp at output zero point")


@lowering("RELU6", check=_unary_check)
def lower_relu6(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    if x.dtype == "int16":
        scale, zero = qparams(x)
        six = round_half_away(float(np.float32(6.0) / np.float32(scale))) + zero
        six = int(min(max(six, -32768), 32767))
        return relu_s16_layer(ctx, IDENTITY_REQUANT, IDENTITY_REQUANT, min(zero, six), six,
                               "clamp to [0, 6] in the input domain")
    return lut_layer(ctx, relu6_table(*qparams(x)), x, y, "clamp to [0, 6] in the input domain")


def _check_leaky_relu(ctx: LowerCtx) -> str | None:
    problem = _unary_check(ctx)
    if problem:
        return problem
    alpha = float(ctx.op.options.get("alpha", 0.0))
    if not np.isfinite(alpha):
        return f"alpha {alpha} is not a finite number"
    if ctx.input(0).dtype == "int16":
        si, so = qparams(ctx.input(0))[0], qparams(ctx.output(0))[0]
        for real in (si / so, si * float(np.float32(alpha)) / so):
            if real != 0 and not -31 <= quantize_multiplier(real)[1] <= 30:
                return "a multiplier (alpha or input / output scale) is out of int32 range"
    return None


@lowering("LEAKY_RELU", check=_check_leaky_relu)
def lower_leaky_relu(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    alpha = float(ctx.op.options.get("alpha", 0.0))
    if x.dtype == "int16":
        # leaky_relu_common.cc's two multipliers in double, as leaky_relu_table.
        si, so = float(qparams(x)[0]), float(qparams(y)[0])
        return relu_s16_layer(ctx, _requant_s16(si / so),
                               _requant_s16(si * float(np.float32(alpha)) / so),
                               -32768, 32767, f"alpha {alpha:.6g}")
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
    pair = (x.dtype if x else None, y.dtype)
    if pair not in (("int8", "int8"), ("int8", "int16"), ("int16", "int16")):
        return (f"{pair[0]} -> {pair[1]} is not supported (kiln has int8 -> int8/int16 and "
                "int16 -> int16)")
    if x.quant is None or x.quant.per_channel or y.quant is None or y.quant.per_channel:
        return "needs per-tensor quantization"
    si, zi = qparams(x)
    so, zo = qparams(y)
    if pair == ("int8", "int8") and (np.float32(so) != np.float32(1.0 / 256) or zo != -128):
        return f"int8 output must have scale 1/256 and zero point -128 (got {fmt_quant(y)})"
    # TF_LITE_ENSURE_NEAR: within 0.1% of the expected scale.
    if pair == ("int8", "int16") and (abs(so - 1 / 65536) > 0.001 / 65536 or zo != -32768):
        return f"int16 output must have scale 1/65536 and zero point -32768 (got {fmt_quant(y)})"
    if pair == ("int16", "int16") and (abs(so - 1 / 32768) > 0.001 / 32768 or zo != 0 or zi != 0):
        return ("int16 softmax needs input zero point 0 and output scale 1/32768, zero point 0 "
                f"(got {fmt_quant(x)} -> {fmt_quant(y)})")
    if not x.shape:
        return "a scalar (rank 0) input has no axis to normalise over"
    if tuple(x.shape) != tuple(y.shape):
        return f"input shape {list(x.shape)} and output shape {list(y.shape)} differ"
    limit = 65535 if x.dtype == "int16" else 8191
    if x.shape[-1] > limit:
        return f"softmax over {x.shape[-1]} values; kiln supports up to {limit}"
    beta = float(ctx.op.options.get("beta", 1.0))
    if x.dtype == "int16":
        _, shift = softmax_s16_multiplier(beta, si)
        if not -31 <= shift <= 30:
            return f"beta * input scale = {beta * si:.3g} has no int32 multiplier"
        return None
    real = beta * si * (1 << 26)
    if not real > 1.0:
        return f"beta * input scale = {beta * si:.3g} is too small (TFLM rejects it)"
    return None


def _lower_softmax_s16(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    beta = float(ctx.op.options.get("beta", 1.0))
    multiplier, shift = softmax_s16_multiplier(beta, qparams(x)[0])
    exp_lut, recip_lut = softmax_s16_tables()
    exp_name = ctx.const("exp_lut", exp_lut, "int16_t",
                         "SOFTMAX exp(x) on [-10, 0], 512 steps + end, Q0.15 (TFLM's gen_lut)")
    recip_name = ctx.const("one_over_one_plus_x_lut", recip_lut, "int16_t",
                           "SOFTMAX 1/(1+x) on [0, 1], 512 steps + end, Q0.15 (TFLM's gen_lut)")
    depth = x.shape[-1]
    rows = x.size // depth
    dims = f"{{1, 1, {rows}, {depth}}}"
    body = ["static const kiln_softmax_s16_params_t params = {",
            f"    .exp_lut = {exp_name},",
            f"    .one_over_one_plus_x_lut = {recip_name},",
            f"    .input = {{{multiplier}, {shift}}}, /* input scale * beta / (10 / 65535) */",
            "};",
            f"static const kiln_dims_t input_dims = {dims};",
            f"static const kiln_dims_t output_dims = {dims};",
            f"return kiln_softmax_s16(&params, &input_dims, {ctx.ptr(x)}, &output_dims, "
            f"{ctx.ptr(y)});"]
    return LayerCode(kernel="kiln_softmax_s16", body="\n".join(body),
                     summary=f"{rows} row(s) of {depth}, beta {beta:.6g}")


# int8 SOFTMAX computes exp() in C (no table) for at most this many values per inference.
SOFTMAX_COMPUTED_VALUES = 64


@lowering("SOFTMAX", check=_check_softmax)
def lower_softmax(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    if x.dtype == "int16":
        return _lower_softmax_s16(ctx)
    kernel = "kiln_softmax_s8_s16" if y.dtype == "int16" else "kiln_softmax_s8"
    beta = float(ctx.op.options.get("beta", 1.0))
    scale, _ = qparams(x)
    multiplier, left_shift, diff_min = softmax_params(beta, scale)
    depth = x.shape[-1]
    rows = x.size // depth
    dims = f"{{1, 1, {rows}, {depth}}}"
    fields = (f"beta {beta:.6g}, input multiplier {multiplier} << {left_shift}, "
              f"diff_min {diff_min}")
    if rows * depth <= SOFTMAX_COMPUTED_VALUES:
        # A short row computes exp in C (about 150 instructions a value, once: the
        # kernel keeps a row's first 16) instead of keeping a table of up to 1 KB.
        params = [f"static const kiln_softmax_params_t params = {{ /* {fields} */",
                  f"    NULL, 0, {multiplier}, {left_shift}, {diff_min}}};"]
    else:
        table = softmax_exp_table(beta, scale)
        if table[0] != (1 << 31) - 1:
            raise ModelError(f"{ctx.op.describe()}: exp(0) is not 1.0 in the softmax table")
        entries = int(np.flatnonzero(table)[-1]) + 1      # the zero tail reads as 0 in C
        name = ctx.const("exp_table", table[:entries], "int32_t",
                         f"SOFTMAX exp(-d * beta * scale) in Q0.31 for d = max - x (0 from d = "
                         f"{entries}); {fields}")
        params = [f"static const kiln_softmax_params_t params = {{{name}, {entries}, "
                  f"{multiplier}, {left_shift}, {diff_min}}};"]
    body = params + [f"static const kiln_dims_t input_dims = {dims};",
                     f"static const kiln_dims_t output_dims = {dims};",
                     f"return {kernel}(&params, &input_dims, {ctx.ptr(x)}, &output_dims, "
                     f"{ctx.ptr(y)});"]
    return LayerCode(kernel=kernel, body="\n".join(body),
                     summary=f"{rows} row(s) of {depth}, beta {beta:.6g}")
