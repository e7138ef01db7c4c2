"""gemmlowp's fixed-point math (exp, logistic, tanh, 1/(1+x)) in numpy int64, bit for bit.

TFLM's int8 SOFTMAX, LOGISTIC and TANH evaluate these functions on int32 "FixedPoint"
values (a raw int32 with a fixed number of integer bits). kiln runs the same integer
recipes at compile time to fill lookup tables, so the C kernels never evaluate them.

Conventions: arrays hold int32 raw values in int64; `ibits` is the number of integer bits
of a value (Q<ibits>.<31-ibits>). Plain additions wrap like int32 (gemmlowp's Add is
non-saturating); multiplications are SaturatingRoundingDoublingHighMul.
"""

from __future__ import annotations

import numpy as np

from ...numerics import (INT32_MAX, INT32_MIN, rounding_divide_by_pot,
                         sat_rounding_doubling_high_mul, wrap_int32)

# Raw constants of gemmlowp (Q0.31 unless stated).
_EXP_MINUS_ONE_EIGHTH = 1895147668      # exp(-1/8)
_ONE_THIRD = 715827883                  # 1/3
_48_OVER_17_Q2 = 1515870810             # 48/17 in Q2.29
_NEG_32_OVER_17_Q2 = -1010580540        # -32/17 in Q2.29
# exp(-2^k) for k = -2 .. 4, the barrel shifter of exp_on_negative_values.
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def add(a, b) -> np.ndarray:
    return wrap_int32(_i64(a) + _i64(b))


def sub(a, b) -> np.ndarray:
    return wrap_int32(_i64(a) - _i64(b))


def mul(a, b) -> np.ndarray:
    """FixedPoint product: integer bits add up."""
    return sat_rounding_doubling_high_mul(a, b)


def mul_by_pot(x, exponent: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT: saturating left shift, or rounding right shift."""
    x = _i64(x)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    shifted = x << exponent
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, shifted))


def rescale(x, src_ibits: int, dst_ibits: int) -> np.ndarray:
    return mul_by_pot(x, src_ibits - dst_ibits)


def one(ibits: int) -> int:
    return INT32_MAX if ibits == 0 else 1 << (31 - ibits)


def rounding_half_sum(a, b) -> np.ndarray:
    """(a + b) / 2 rounded away from zero, as gemmlowp's int32 RoundingHalfSum."""
    s = _i64(a) + _i64(b)
    t = s + np.where(s >= 0, 1, -1)
    return np.where(t >= 0, t // 2, -((-t) // 2))      # C division truncates


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: Taylor series around -1/8."""
    x = add(a, 1 << 28)
    x2 = mul(x, x)
    x3 = mul(x2, x)
    x4 = mul(x2, x2)
    x4_over_4 = mul_by_pot(x4, -2)
    poly = mul_by_pot(add(mul(add(x4_over_4, x3), _ONE_THIRD), x2), -1)
    return add(_EXP_MINUS_ONE_EIGHTH, mul(_EXP_MINUS_ONE_EIGHTH, add(x, poly)))


def exp_on_negative_values(a, ibits: int) -> np.ndarray:
    """exp(a) for a <= 0 given in Q<ibits>, result in Q0.31."""
    a = _i64(a)
    frac_bits = 31 - ibits
    one_quarter = 1 << (frac_bits - 2)
    a_mod_quarter_minus_one_quarter = sub(a & (one_quarter - 1), one_quarter)
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        rescale(a_mod_quarter_minus_one_quarter, ibits, 0))
    remainder = sub(a_mod_quarter_minus_one_quarter, a)
    for exponent, multiplier in _EXP_BARREL:
        if ibits > exponent:
            bit = 1 << (frac_bits + exponent)
            result = np.where((remainder & bit) != 0, mul(result, multiplier), result)
    if ibits > 5:
        clamp = -(1 << (36 - ibits))                    # -32.0
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, one(0), result)


def _newton_raphson_reciprocal(half_denominator) -> np.ndarray:
    """x ≈ 1 / half_denominator in Q2.29 after three Newton-Raphson steps."""
    x = add(_48_OVER_17_Q2, mul(half_denominator, _NEG_32_OVER_17_Q2))
    for _ in range(3):
        one_minus_half_denominator_times_x = sub(one(2), mul(half_denominator, x))
        x = add(x, rescale(mul(x, one_minus_half_denominator_times_x), 4, 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """1 / (1 + a) for a in [0, 1), Q0.31 in and out."""
    x = _newton_raphson_reciprocal(rounding_half_sum(a, one(0)))
    return rescale(x, 1, 0)        # x/2 read as Q1.30 (ExactMulByPot<-1>), then to Q0.31


def one_minus_x_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """(1 - a) / (1 + a) for a in [0, 1), Q0.31 in and out."""
    x = _newton_raphson_reciprocal(rounding_half_sum(a, one(0)))
    return rescale(sub(x, one(2)), 2, 0)


def logistic(a, ibits: int) -> np.ndarray:
    """1 / (1 + exp(-a)) for a in Q<ibits>, result in Q0.31."""
    a = _i64(a)
    positive = a > 0
    abs_a = np.where(positive, a, wrap_int32(-a))
    exp_minus_abs = exp_on_negative_values(wrap_int32(-abs_a), ibits)
    if_positive = one_over_one_plus_x_for_x_in_0_1(exp_minus_abs)
    if_negative = sub(one(0), if_positive)
    return np.where(a == 0, 1 << 30, np.where(positive, if_positive, if_negative))


def tanh(a, ibits: int) -> np.ndarray:
    """tanh(a) for a in Q<ibits>, result in Q0.31."""
    a = _i64(a)
    negative = a < 0
    n = np.where(negative, a, wrap_int32(-a))
    # -tanh(n) for n <= 0: (1 - exp(2n)) / (1 + exp(2n)); 2n is n read with one more integer bit.
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, ibits + 1))
    return np.where(a == 0, 0, np.where(negative, wrap_int32(-t), t))
