"""Per-tensor FULLY_CONNECTED takes tflite-micro's multiplier: the input and filter scales'
product in double (a float32 product rounds to another multiplier for some scales, and an
output then differs by one)."""

from __future__ import annotations

import numpy as np

from reference import run_reference
from tflite_builder import TensorSpec, single_op_model

from kiln.compiler import compile, load
from kiln.compiler.numerics import quantize_multiplier, requantize


def test_per_tensor_fc_multiplier_matches_tflm():
    sx, sw, sy = 0.08884836733341217, 0.0020503662526607513, 0.26504915952682495
    m32, s32 = quantize_multiplier(float(np.float32(sx) * np.float32(sw)) / sy)
    m64, s64 = quantize_multiplier(sx * sw / sy)
    assert (m32, s32) != (m64, s64)
    b = np.arange(-100_000, 100_000, dtype=np.int64)
    r32, r64 = requantize(b, m32, s32), requantize(b, m64, s64)
    hits = np.nonzero((r32 != r64) & (np.abs(r64) < 120))[0]
    assert hits.size, "no bias separates the two multipliers"
    model = single_op_model("FULLY_CONNECTED", [
        TensorSpec((1, 1), "int8", scale=sx, zero_point=0),
        TensorSpec((1, 1), "int8", scale=sw, zero_point=0, data=np.ones((1, 1), np.int8)),
        TensorSpec((1,), "int32", scale=float(np.float32(sx) * np.float32(sw)), zero_point=0,
                   data=np.array([int(b[hits[0]])]))],
        [TensorSpec((1, 1), "int8", scale=sy, zero_point=0)])
    x = np.zeros((1, 1), np.int8)
    want = run_reference(model, x)[0]
    assert int(want[0, 0]) == int(r64[hits[0]])
    got = compile(load(model), board="host").run(x)[0]
    np.testing.assert_array_equal(got, want)
