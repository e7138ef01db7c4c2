"""Data-movement and indexing ops on int16 tensors (16x8 models: symmetric int16
activations) against tflite-micro, bit for bit; against TFLite's reference kernels for the
ops tflite-micro runs at int8 only (GATHER, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND,
MIRROR_PAD, TILE); against numpy for DEPTH_TO_SPACE and SPACE_TO_DEPTH, which neither
runs at int16 (a permutation of the elements: the type does not change it)."""

from __future__ import annotations

import numpy as np
import pytest

from kiln.compiler import compile as kiln_compile
from kiln.compiler import load
from kiln.compiler.errors import ModelError
from reference import assert_equal_exact
from test_ops_pool import OpCase, check_cases, check_sanitized, compile_single
from tflite_builder import TensorSpec, const, rand_int, single_op_model

S16 = 1 / 4096


def a16(shape, zp: int = 0) -> TensorSpec:
    return TensorSpec(tuple(shape), "int16", scale=S16, zero_point=zp)


TFLM_CASES = [
    OpCase("CONCATENATION axis 1", "CONCATENATION", [a16((2, 3, 4)), a16((2, 5, 4))],
           [a16((2, 8, 4))], {"axis": 1}),
    OpCase("CONCATENATION axis -1, 3 inputs", "CONCATENATION",
           [a16((1, 4, 2)), a16((1, 4, 1)), a16((1, 4, 3))], [a16((1, 4, 6))], {"axis": -1}),
    OpCase("PAD", "PAD", [a16((1, 5, 4, 3)), const([[0, 0], [1, 2], [2, 0], [0, 1]])],
           [a16((1, 8, 6, 4))]),
    # tflite-micro pads int16 with 0 whatever the zero point (TFLite would pad with it)
    OpCase("PAD zp 7", "PAD", [a16((3, 4), 7), const([[1, 1], [0, 2]])], [a16((5, 6), 7)]),
    OpCase("PADV2", "PADV2", [a16((2, 3)), const([[1, 0], [2, 1]]),
                              TensorSpec((1,), "int16", scale=S16, zero_point=0,
                                         data=np.array([-1234]))], [a16((3, 6))]),
    OpCase("RESHAPE", "RESHAPE", [a16((2, 6)), const([3, 2, 2])], [a16((3, 2, 2))]),
    OpCase("SQUEEZE", "SQUEEZE", [a16((1, 3, 1, 4))], [a16((3, 4))], {"squeeze_dims": [0, 2]}),
    OpCase("EXPAND_DIMS", "EXPAND_DIMS", [a16((3, 4)), const([1])], [a16((3, 1, 4))]),
    OpCase("TRANSPOSE", "TRANSPOSE", [a16((2, 3, 4, 5)), const([0, 3, 1, 2])],
           [a16((2, 5, 3, 4))]),
    OpCase("STRIDED_SLICE", "STRIDED_SLICE",
           [a16((4, 6, 5)), const([1, 5, 0]), const([4, 0, 5]), const([2, -2, 1])],
           [a16((2, 3, 5))]),
    OpCase("STRIDED_SLICE shrink", "STRIDED_SLICE",
           [a16((3, 4)), const([1, 0]), const([2, 4]), const([1, 1])], [a16((4,))],
           {"shrink_axis_mask": 1}),
    OpCase("SLICE", "SLICE", [a16((3, 5, 4)), const([1, 2, 0]), const([2, -1, 3])],
           [a16((2, 3, 3))]),
    OpCase("SPLIT", "SPLIT", [const([1]), a16((2, 6, 3))], [a16((2, 2, 3))] * 3,
           {"num_splits": 3}),
    OpCase("SPLIT_V", "SPLIT_V", [a16((2, 7)), const([2, 5]), const([-1])],
           [a16((2, 2)), a16((2, 5))], {"num_splits": 2}),
    OpCase("PACK", "PACK", [a16((2, 3)), a16((2, 3)), a16((2, 3))], [a16((2, 3, 3))],
           {"values_count": 3, "axis": 2}),
    OpCase("UNPACK", "UNPACK", [a16((3, 2, 4))], [a16((3, 4)), a16((3, 4))],
           {"num": 2, "axis": 1}),
    OpCase("RESIZE_NEAREST_NEIGHBOR", "RESIZE_NEAREST_NEIGHBOR",
           [a16((1, 3, 4, 2)), const([5, 7])], [a16((1, 5, 7, 2))], {"half_pixel_centers": True}),
]


def test_int16_against_tflite_micro():
    check_cases(TFLM_CASES, seed=16)


REF_CASES = [
    OpCase("GATHER", "GATHER", [a16((5, 3, 2)), const([4, 0, 4])], [a16((3, 3, 2))],
           {"axis": 0}),
    OpCase("GATHER axis 1", "GATHER", [a16((2, 5, 3)), const([[1, 2], [4, 0]])],
           [a16((2, 2, 2, 3))], {"axis": 1}),
    OpCase("SPACE_TO_BATCH_ND", "SPACE_TO_BATCH_ND",
           [a16((1, 5, 4, 3)), const([2, 2]), const([[1, 0], [0, 0]])], [a16((4, 3, 2, 3))]),
    OpCase("SPACE_TO_BATCH_ND 3-D", "SPACE_TO_BATCH_ND",
           [a16((2, 7, 3)), const([4]), const([[1, 0]])], [a16((8, 2, 3))]),
    OpCase("BATCH_TO_SPACE_ND", "BATCH_TO_SPACE_ND",
           [a16((4, 3, 2, 3)), const([2, 2]), const([[1, 0], [0, 1]])], [a16((1, 5, 3, 3))]),
    OpCase("MIRROR_PAD", "MIRROR_PAD", [a16((3, 4)), const([[1, 2], [2, 0]])], [a16((6, 6))],
           {"mode": "SYMMETRIC"}),
    OpCase("TILE", "TILE", [a16((2, 3)), const([2, 3])], [a16((4, 9))]),
]


def test_int16_against_tflite_reference():
    check_cases(REF_CASES, seed=17, engine="tflite_ref")


def test_int16_space_to_batch_needs_zero_point_0():
    """TFLite pads int16 with 0 and requires the zero point 0 (tflite-micro has no int16
    SPACE_TO_BATCH_ND): kiln refuses other zero points rather than pick a value."""
    with pytest.raises(ModelError, match="zero point 5"):
        compile_single("SPACE_TO_BATCH_ND", [a16((1, 4, 4, 1), 5), const([2, 2]),
                                             const([[0, 0], [0, 0]])], [a16((4, 2, 2, 1), 5)])


def test_int16_depth_to_space_and_back_against_numpy():
    x = rand_int((2, 2, 3, 12), np.random.default_rng(18), "int16")
    d2s = x.reshape(2, 2, 3, 2, 2, 3).transpose(0, 1, 3, 2, 4, 5).reshape(2, 4, 6, 3)
    for op, src, want in (("DEPTH_TO_SPACE", x, d2s), ("SPACE_TO_DEPTH", d2s, x)):
        model = single_op_model(op, [a16(src.shape)], [a16(want.shape)], {"block_size": 2})
        got = kiln_compile(load(model), board="host").run(src)[0]
        assert_equal_exact(got, want, op)


def _a8(shape) -> TensorSpec:
    return TensorSpec(tuple(shape), scale=0.05, zero_point=-3)


BROADCAST_REVERSE = [
    OpCase(f"{op} {dt}", op, [mk(src), const(arg)], [mk(dst)])
    for dt, mk in (("int8", _a8), ("int16", a16))
    for op, src, arg, dst in (
        ("BROADCAST_TO", (3, 1), [2, 3, 4], (2, 3, 4)),
        ("BROADCAST_TO", (1, 4, 1, 2), [3, 4, 5, 2], (3, 4, 5, 2)),
        ("BROADCAST_TO", (5,), [5], (5,)),
        ("REVERSE_V2", (3, 4, 5), [1], (3, 4, 5)),
        ("REVERSE_V2", (2, 3, 4), [-1], (2, 3, 4)),
        ("REVERSE_V2", (6,), [0], (6,)),
    )
]


def test_broadcast_to_and_reverse_against_tflite_micro():
    check_cases(BROADCAST_REVERSE, seed=19)


def test_reverse_several_axes_against_tflite_reference():
    """tflite-micro's REVERSE_V2 takes one axis; TFLite's contiguous axes (kiln any)."""
    check_cases([OpCase("REVERSE_V2 axes 1, 2", "REVERSE_V2", [a16((2, 3, 4)), const([1, 2])],
                        [a16((2, 3, 4))])], seed=20, engine="tflite_ref")


@pytest.mark.parametrize("op,inputs,outputs,reason", [
    ("BROADCAST_TO", [a16((3, 2)), const([3, 4])], [a16((3, 4))], "does not broadcast"),
    ("BROADCAST_TO", [a16((3, 1)), const([3, 4])], [a16((3, 5))], r"!= the shape input"),
    ("REVERSE_V2", [a16((3, 2)), const([2])], [a16((3, 2))], "axis 2 out of range"),
])
def test_broadcast_and_reverse_rejections(op, inputs, outputs, reason):
    with pytest.raises(ModelError, match=reason):
        compile_single(op, inputs, outputs)


@pytest.mark.slow
def test_int16_and_new_views_clean_under_sanitizers(tmp_path):
    check_sanitized(TFLM_CASES + REF_CASES + BROADCAST_REVERSE, tmp_path)
