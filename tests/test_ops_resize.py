"""int8 RESIZE_BILINEAR (compiler/codegen/ops/resize.py, crt/kernels/resize.c) against
tflite-micro, bit for bit: every coordinate mode TFLite has (plain, align_corners,
half_pixel_centers), up- and downsampling, odd ratios, batches and channel counts."""

from __future__ import annotations

import numpy as np
import pytest

from kiln.compiler.codegen.ops.resize import bilinear_map
from kiln.compiler.errors import ModelError
from test_ops_pool import ARM_TARGETS, OpCase, check_cases, check_sanitized, compile_single, cross_compile
from tflite_builder import TensorSpec, const

Q = (0.05, -3)


def act(shape, q=Q) -> TensorSpec:
    return TensorSpec(tuple(shape), scale=q[0], zero_point=q[1])


def case(n, h, w, c, oh, ow, ac=False, hp=False) -> OpCase:
    return OpCase(f"RESIZE_BILINEAR {h}x{w}->{oh}x{ow} ac {ac} hp {hp}", "RESIZE_BILINEAR",
                  [act((n, h, w, c)), const([oh, ow])], [act((n, oh, ow, c))],
                  {"align_corners": ac, "half_pixel_centers": hp})


MODES = [(False, False), (True, False), (False, True)]


@pytest.mark.parametrize("ac, hp", MODES, ids=["plain", "align_corners", "half_pixel"])
def test_resize_bilinear_matches_tflm(ac, hp):
    rng = np.random.default_rng(21)
    cases = [case(1, 4, 5, 3, 8, 10, ac, hp),        # 2x up
             case(2, 3, 3, 8, 7, 5, ac, hp),          # odd ratios, batch 2
             case(1, 8, 6, 4, 3, 4, ac, hp),          # down
             case(1, 1, 5, 2, 4, 5, ac, hp),          # a single input row
             case(1, 5, 1, 1, 5, 3, ac, hp)]          # same height
    for _ in range(6):
        h, w = (int(v) for v in rng.integers(1, 8, 2))
        oh, ow = (int(v) for v in rng.integers(1, 17, 2))
        cases.append(case(1, h, w, int(rng.choice([1, 3, 16])), oh, ow, ac, hp))
    check_cases(cases, seed=22, runs=3)


def test_bilinear_map_known_values():
    # 2 → 4 with half-pixel centers: coordinates -0.25, 0.25, 0.75, 1.25 (in 1/1024).
    lo, hi, frac = bilinear_map(2, 4, False, True)
    assert lo.tolist() == [0, 0, 0, 1] and hi.tolist() == [0, 1, 1, 1]
    assert frac.tolist() == [-256, 256, 768, 256]
    lo, hi, frac = bilinear_map(3, 5, True, False)      # corners land on corners
    assert lo.tolist() == [0, 0, 1, 1, 2] and frac.tolist() == [0, 512, 0, 512, 0]


def test_scale_past_the_input_refused():
    """TFLite's rounded scale maps 2 → 91 rows' last one past the input: refused."""
    with pytest.raises(ModelError, match="past the input"):
        compile_single("RESIZE_BILINEAR", [act((1, 2, 2, 1)), const([91, 2])],
                       [act((1, 91, 2, 1))])


def test_requantizing_resize_refused():
    with pytest.raises(ModelError, match="keeps it"):
        compile_single("RESIZE_BILINEAR", [act((1, 2, 2, 1)), const([4, 4])],
                       [act((1, 4, 4, 1), q=(0.1, 0))])


@pytest.mark.slow
def test_resize_bilinear_sanitized(tmp_path):
    check_sanitized([case(2, 3, 4, 3, 7, 9, hp=True), case(1, 5, 5, 2, 2, 3, ac=True)], tmp_path)


@pytest.mark.cross
@pytest.mark.parametrize("target", sorted(ARM_TARGETS))
def test_resize_cross_compiles(target):
    cross_compile(["resize.c"], ARM_TARGETS[target])
