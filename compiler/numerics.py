"""TFLite's integer arithmetic in numpy (int64), the twin of crt/kernels/kiln_math.h.

Used by the code generator to derive multipliers, by the quantizer, and by tests that
pin the C and numpy versions against each other.
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def quantize_multiplier(real: float) -> tuple[int, int]:
    """real → (multiplier, shift) with real ≈ multiplier · 2^(shift − 31).

    TFLite's QuantizeMultiplier: frexp, round half away from zero, renormalise the
    2^31 overflow, flush shifts below −31 to zero.
    """
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = int(math.floor(abs(q) * (1 << 31) + 0.5)) * (1 if q >= 0 else -1)
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def sat_rounding_doubling_high_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    s = ab + nudge
    # Truncating division toward zero, as C does.
    high = np.where(s >= 0, s >> 31, -((-s) >> 31))
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    return np.where(overflow, INT32_MAX, high).astype(np.int64)


def rounding_divide_by_pot(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def wrap_int32(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def requantize(x: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier, elementwise, on int32 values held in int64."""
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    shifted = wrap_int32(np.asarray(x, dtype=np.int64) << left)
    return rounding_divide_by_pot(sat_rounding_doubling_high_mul(shifted, multiplier), right)


def activation_range(activation: str, scale: float, zero_point: int,
                     qmin: int = -128, qmax: int = 127) -> tuple[int, int]:
    """Clamp range of a fused activation in the quantized output domain (TFLite's
    CalculateActivationRangeQuantized)."""

    def q(v: float) -> int:
        # TFLite divides in float32 before rounding.
        return zero_point + int(round_half_away(float(np.float32(v) / np.float32(scale))))

    if activation in ("NONE", None):
        return qmin, qmax
    if activation == "RELU":
        return max(qmin, q(0.0)), qmax
    if activation == "RELU6":
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if activation == "RELU_N1_TO_1":
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    raise ValueError(f"fused activation {activation} has no quantized range")


def round_half_away(v: float) -> float:
    """std::round / TfLiteRound: ties away from zero (Python's round() is banker's)."""
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def requantize64(x: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """TFLite's int64 MultiplyByQuantizedMultiplier (16x8 layers with an int64 bias), the
    twin of kiln_requantize64 in kiln_math.h: the multiplier rounded to 15 bits, one
    rounding shift by 15 - shift, the result wrapped to int32. Needs |x| < 2^47 and shift
    in [-31, 7] (the callers' bound), so the int64 arithmetic here is exact."""
    x = np.asarray(x, dtype=np.int64)
    m = np.asarray(multiplier, dtype=np.int64)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - np.asarray(shift, dtype=np.int64)
    return wrap_int32((x * reduced + (np.int64(1) << (total - 1))) >> total)
