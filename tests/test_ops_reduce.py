"""MEAN, SUM and REDUCE_MAX against tflite-micro, bit for bit, plus the canonical
reduction shape and the MEAN multiplier."""

from __future__ import annotations

import numpy as np
import pytest

from kiln.compiler.codegen.ops.reduce import mean_multiplier, reduce_shape
from kiln.compiler.errors import ModelError
from test_ops_pool import (ARM_TARGETS, OpCase, check_cases, check_sanitized, compile_single,
                           cross_compile)
from tflite_builder import TensorSpec, const

OPS = ("MEAN", "SUM", "REDUCE_MAX")


def reduce_case(op: str, shape, axes, keep_dims: bool, in_q=(0.05, -3), out_q=None,
                label: str = "") -> OpCase:
    rank = len(shape)
    resolved = sorted({a % rank for a in axes})
    out_shape = tuple(1 if d in resolved else e for d, e in enumerate(shape)) if keep_dims \
        else tuple(e for d, e in enumerate(shape) if d not in resolved)
    out_q = in_q if out_q is None else out_q
    x = TensorSpec(shape, scale=in_q[0], zero_point=in_q[1])
    y = TensorSpec(out_shape, scale=out_q[0], zero_point=out_q[1])
    a = const(list(axes), "int32")
    label = label or f"{op} {shape} axes {list(axes)} keep {keep_dims} q {in_q}->{out_q}"
    return OpCase(label, op, [x, a], [y], {"keep_dims": keep_dims})


def _rand_q(rng):
    scale = float(np.float32(np.exp(rng.uniform(np.log(0.002), np.log(0.5)))))
    zp = int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))
    return scale, zp


def random_reduce_cases(op: str, rng: np.random.Generator, n: int, max_axes: int,
                        max_rank: int) -> list[OpCase]:
    cases = []
    while len(cases) < n:
        rank = int(rng.integers(1, max_rank + 1))
        shape = tuple(int(rng.choice([1, 2, 3, 4, 5, 7, 16, 33])) for _ in range(rank))
        if np.prod(shape) > 4000:
            continue
        n_axes = int(rng.integers(1, min(rank, max_axes) + 1))
        axes = [int(a) for a in rng.choice(rank, n_axes, replace=False)]
        axes = [a - rank if rng.random() < 0.3 else a for a in axes]   # negative axes too
        keep = bool(rng.integers(0, 2))
        in_q = _rand_q(rng)
        if op == "REDUCE_MAX" or rng.random() < 0.25:
            out_q = in_q                         # shared quantization
        else:
            out_q = _rand_q(rng)
        cases.append(reduce_case(op, shape, axes, keep, in_q, out_q))
    return cases


def test_reduce_shape_canonical_forms():
    s = reduce_shape((2, 5, 7, 3), [1, 2])
    assert (s.outer, s.outer_stride, s.reduce, s.reduce_stride, s.inner) == (
        [1, 1, 2], [0, 0, 105], [1, 1, 35], [0, 0, 3], 3)
    s = reduce_shape((2, 5, 7, 3), [3])          # last axis reduced: inner 1
    assert (s.outer, s.reduce, s.reduce_stride, s.inner) == ([1, 1, 70], [1, 1, 3], [0, 0, 1], 1)
    s = reduce_shape((4, 1, 5, 6, 7), [0, 3])     # size-1 dims vanish, K R K R... form
    assert (s.outer, s.outer_stride, s.reduce, s.reduce_stride, s.inner) == (
        [1, 1, 5], [0, 0, 42], [1, 4, 6], [0, 210, 7], 7)
    s = reduce_shape((2, 3, 4), [])               # nothing reduced: a copy
    assert (s.outer, s.reduce, s.inner, s.count) == ([1, 1, 1], [1, 1, 1], 24, 1)


def test_mean_multiplier_folds_count():
    m, s = mean_multiplier(0.11918240785598755, 0.058651603758335114, 16, True)
    m0, s0 = mean_multiplier(0.11918240785598755, 0.058651603758335114, 16, False)
    assert (m, s) == (m0, s0 - 4)                 # a power of two: exact shift
    m, s = mean_multiplier(0.5, 0.5, 3, True)
    assert (m, s) == (((1 << 30) << 1) // 3, 1 - 1)


@pytest.mark.parametrize("op", OPS)
def test_reduce_edge_cases(op):
    q = [None] if op == "REDUCE_MAX" else [None, (0.02, 127)]   # None: same as the input
    cases = []
    for out_q in q:
        for keep in (False, True):
            cases += [
                reduce_case(op, (1, 4, 4, 32), [1, 2], keep, (0.119, -128), out_q),  # digits GAP
                reduce_case(op, (2, 5, 3, 17), [2, 1], keep, (0.03, 127), out_q),
                reduce_case(op, (1, 1, 1, 8), [1, 2], keep, (0.03, 5), out_q),       # 1x1
                reduce_case(op, (3, 4, 5), [-1], keep, (0.1, 0), out_q),             # last axis
                reduce_case(op, (3, 4, 5), [0], keep, (0.1, 0), out_q),              # first axis
                reduce_case(op, (6, 7), [0, 1], keep, (0.01, -128), out_q),          # all axes
                reduce_case(op, (2, 3, 4, 5), [1, 3], keep, (0.02, 9), out_q),       # K R K R
                reduce_case(op, (2, 3, 4, 5), [0, 2], keep, (0.02, 9), out_q),       # R K R K
                reduce_case(op, (5, 4), [1, 1, -1], keep, (0.02, 9), out_q),         # duplicates
            ]
    check_cases(cases, seed=3)


@pytest.mark.parametrize("op", OPS)
def test_reduce_random(op):
    rng = np.random.default_rng({"MEAN": 11, "SUM": 12, "REDUCE_MAX": 13}[op])
    check_cases(random_reduce_cases(op, rng, 50, max_axes=2, max_rank=5), seed=4)


@pytest.mark.parametrize("op", OPS)
def test_reduce_many_axes(op):
    """Three or more axes and rank 6. (TFLite's reference SUM differs from TFLM's for int8:
    it is not the reference here.)"""
    rng = np.random.default_rng({"MEAN": 21, "SUM": 22, "REDUCE_MAX": 23}[op])
    cases = [c for c in random_reduce_cases(op, rng, 120, max_axes=6, max_rank=6)
             if len(c.inputs[1].data) >= 3][:25]
    cases.append(reduce_case(op, (2, 3, 2, 3, 2, 3), [0, 2, 4], True))
    cases.append(reduce_case(op, (2, 3, 2, 3, 2, 3), [1, 3, 5], False))
    check_cases(cases, seed=5)


def test_mean_large_count_and_extreme_scales():
    cases = [
        reduce_case("MEAN", (1, 64, 64, 3), [1, 2], False, (0.5, -128), (0.001, 127)),
        reduce_case("MEAN", (1, 64, 64, 3), [1, 2], True, (0.001, 100), (0.9, -100)),
        reduce_case("MEAN", (1, 3, 3, 3), [1, 2], True, (1e-4, 0), (1.0, 0)),      # tiny multiplier
        reduce_case("SUM", (1, 50, 2), [1], False, (0.1, -128), (0.01, 0)),        # saturates
        reduce_case("MEAN", (1, 129, 2), [1], False, (0.1, 3), (0.1, 4)),
    ]
    check_cases(cases, seed=6)


def test_reduce_max_rejects_requantization():
    x = TensorSpec((1, 4, 4, 2), scale=0.1, zero_point=0)
    y = TensorSpec((1, 2), scale=0.2, zero_point=0)
    with pytest.raises(ModelError, match="does not requantize"):
        compile_single("REDUCE_MAX", [x, const([1, 2])], [y], {"keep_dims": False})


def test_reduce_rejects_non_constant_axis():
    x = TensorSpec((1, 4, 4, 2), scale=0.1, zero_point=0)
    a = TensorSpec((2,), "int32")
    y = TensorSpec((1, 2), scale=0.1, zero_point=0)
    with pytest.raises(ModelError, match="axis tensor must be a constant"):
        compile_single("MEAN", [x, a], [y], {"keep_dims": False})


def test_reduce_clean_under_sanitizers(tmp_path):
    cases = []
    for op in OPS:
        rng = np.random.default_rng(31)
        cases += random_reduce_cases(op, rng, 12, max_axes=6, max_rank=6)
        cases.append(reduce_case(op, (1, 4, 4, 32), [1, 2], False, (0.119, -128),
                                 None if op == "REDUCE_MAX" else (0.0587, -128)))
    check_sanitized(cases, tmp_path)


@pytest.mark.cross
@pytest.mark.parametrize("target", sorted(ARM_TARGETS))
def test_reduce_cross_compiles(target):
    cross_compile(["reduce.c"], ARM_TARGETS[target])
