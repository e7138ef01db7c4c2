"""int8 ABS, RSQRT, SQUARED_DIFFERENCE and PRELU against tflite-micro, exactly.

The table ops (ABS, RSQRT, PRELU with one constant alpha) see every int8 input; the
binary ops random and broadcast shapes plus the full 256 x 256 input grid. Many
independent cases share one model (one host build, one TFLM run); each output is
compared exactly and labelled with its case. NEG, SQRT, EXP and LOG have no int8
kernel in TFLM and stay unsupported (test_ops_without_int8_tflm_kernel_are_rejected).
"""

from __future__ import annotations

import numpy as np
import pytest

import kiln.compiler as kc
from kiln.compiler.codegen.ops import math_ops
from conftest import run_sanitized_c
from reference import assert_equal_exact, run_reference
from tflite_builder import OpSpec, TensorSpec, build_model, const, rand_int8, single_op_model

ALL_INT8 = np.arange(-128, 128, dtype=np.int8)


def run_cases(cases: list[tuple[str, list[TensorSpec], TensorSpec]],
              inputs: list[list[np.ndarray]]) -> kc.Artifact:
    """Each case (op, inputs, output) an independent op of one model; constant inputs
    (TensorSpec.data) take no array in `inputs`."""
    tensors, ops, model_inputs, outputs, labels = [], [], [], [], []
    for op, xs, y in cases:
        ids = []
        for x in xs:
            ids.append(len(tensors))
            tensors.append(x)
            if x.data is None:
                model_inputs.append(ids[-1])
        tensors.append(y)
        outputs.append(len(tensors) - 1)
        ops.append(OpSpec(op, ids, [outputs[-1]]))
        labels.append(f"{op} " + " x ".join(
            f"{list(x.shape)} s={x.scale:.6g} zp={x.zero_point}" + (" const" if x.data is not None
                                                                   else "") for x in xs)
            + f" -> {list(y.shape)} s={y.scale:.6g} zp={y.zero_point}")
    model = build_model(ops, tensors, model_inputs, outputs)
    flat = [a for case in inputs for a in case]
    want = run_reference(model, flat)
    art = kc.compile(kc.load(model))
    got = art.run(*flat)
    for label, g, w in zip(labels, got, want):
        assert_equal_exact(g, w, label)
    return art


def _scale(rng: np.random.Generator, lo: float = 1e-3, hi: float = 2.0) -> float:
    return float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


def _zp(rng: np.random.Generator, i: int) -> int:
    return [-128, 127][i % 2] if i % 5 == 4 else int(rng.integers(-128, 128))


def _kernels(art: kc.Artifact) -> list[str]:
    return [o["kernel"] for o in art.report["ops"]]


# --- ABS, RSQRT: every input ------------------------------------------------------------

def test_abs_all_inputs_match_tflm():
    rng = np.random.default_rng(1)
    quants = [(0.05, 0, 0.05, 0), (0.05, -128, 0.05, -128), (0.05, 127, 0.05, 127),  # no rescale
              (0.1, 3, 0.05, -128), (0.02, -7, 0.5, 127), (1e-4, 127, 2.0, -128),
              (2.0, -128, 1e-3, 0), (0.5, 0, 0.25, -128)]
    for i in range(24):
        quants.append((_scale(rng), _zp(rng, i), _scale(rng), _zp(rng, i + 1)))
    cases = [("ABS", [TensorSpec((256,), scale=si, zero_point=zi)],
              TensorSpec((256,), scale=so, zero_point=zo)) for si, zi, so, zo in quants]
    art = run_cases(cases, [[ALL_INT8.copy()] for _ in cases])
    assert set(_kernels(art)) == {"kiln_lut_s8"}


def test_rsqrt_all_valid_inputs_match_tflm():
    """Every input at or above the zero point (TFLM stops on the others)."""
    rng = np.random.default_rng(2)
    quants = [(0.05, 0, 0.05, 0), (1 / 128, -128, 1 / 16, -128), (0.1, 127, 0.2, 0),
              (0.5, 126, 0.01, -128), (1e-3, -128, 0.5, -128), (2.0, 0, 1e-3, -100),
              (0.25, -100, 0.01, -128), (4e-3, 10, 0.06, -20)]
    for i in range(24):
        quants.append((_scale(rng), _zp(rng, i) % 128 - (i % 3) * 64, _scale(rng, 1e-2, 2.0),
                       _zp(rng, i + 1)))
    cases, inputs = [], []
    for si, zi, so, zo in quants:
        valid = np.arange(zi, 128, dtype=np.int8)
        cases.append(("RSQRT", [TensorSpec((256,), scale=si, zero_point=zi)],
                      TensorSpec((256,), scale=so, zero_point=zo)))
        inputs.append([np.resize(rng.permutation(valid), 256)])
    art = run_cases(cases, inputs)
    assert set(_kernels(art)) == {"kiln_lut_s8"}


def test_rsqrt_table_below_zero_point_and_inv_sqrt_helper():
    table = math_ops.rsqrt_table(0.05, 10, 0.05, 0)
    assert np.all(table[:128 + 11] == 127)             # x <= zero point: the maximum
    for value in (2, 3, 4, 17, 100, 255, 1 << 20, (1 << 29) + 5):
        m, s = math_ops.inv_sqrt_multiplier_exp(value)
        assert abs(m * 2.0 ** (s - 31) - value ** -0.5) < 1e-5 * value ** -0.5


# --- SQUARED_DIFFERENCE, PRELU: random, broadcast, the full grid --------------------------

# TFLM broadcasts in at most 4 dims; same-shape rank 5 takes its flat path.
SHAPES = [
    ((1, 8, 8, 16), (1, 8, 8, 16)),
    ((1, 6, 5, 16), (16,)),
    ((16,), (1, 6, 5, 16)),
    ((1, 4, 4, 3), (1, 1, 1, 1)),
    ((1, 1, 1, 1), (2, 3, 5, 7)),
    ((2, 1, 5, 3), (1, 4, 1, 3)),
    ((3, 1), (1, 5)),
    ((7,), (7,)),
    ((1, 5, 1, 8), (1, 1, 6, 1)),
    ((2, 3, 1, 4, 5), (2, 3, 1, 4, 5)),
    ((1,), (3, 4)),
]


def _grid() -> tuple[np.ndarray, np.ndarray]:
    a = np.repeat(ALL_INT8, 256).reshape(1, 256, 256)
    b = np.tile(ALL_INT8, 256).reshape(1, 256, 256)
    return a, b


def test_squared_difference_matches_tflm():
    rng = np.random.default_rng(3)
    cases, inputs = [], []
    for i in range(33):
        sa, sb = SHAPES[i % len(SHAPES)]
        (s1, s2, so) = (_scale(rng) for _ in range(3))
        if i % 3 == 0:
            so = float(np.float32(4 * max(s1, s2) ** 2 * rng.uniform(0.5, 4)))   # ~one
        z1, z2, zo = _zp(rng, i), _zp(rng, i + 1), _zp(rng, i + 2)
        cases.append(("SQUARED_DIFFERENCE", [TensorSpec(sa, scale=s1, zero_point=z1),
                                             TensorSpec(sb, scale=s2, zero_point=z2)],
                      TensorSpec(np.broadcast_shapes(sa, sb), scale=so, zero_point=zo)))
        inputs.append([rand_int8(sa, rng), rand_int8(sb, rng)])
    # Every pair of int8 inputs, for a few quantizations incl. edge zero points.
    for s1, z1, s2, z2, so, zo in ((0.05, 0, 0.05, 0, 0.2, -128), (0.1, -128, 0.03, 127, 2.0, 0),
                                   (0.02, 127, 0.5, -128, 30.0, -128),
                                   (0.01, 5, 0.01, -5, 0.03, -128)):
        cases.append(("SQUARED_DIFFERENCE", [TensorSpec((1, 256, 256), scale=s1, zero_point=z1),
                                             TensorSpec((1, 256, 256), scale=s2, zero_point=z2)],
                      TensorSpec((1, 256, 256), scale=so, zero_point=zo)))
        inputs.append(list(_grid()))
    art = run_cases(cases, inputs)
    assert set(_kernels(art)) == {"kiln_squared_difference_s8"}


def test_prelu_matches_tflm():
    """Alpha as a model input (broadcast or not), constant per channel (C kernel), and
    a single constant (a table)."""
    rng = np.random.default_rng(4)
    cases, inputs, expected = [], [], []
    for i in range(33):
        sx, sa = SHAPES[i % len(SHAPES)]
        if i % 3 == 1:
            sa = sx[-1:]                                           # per channel
        si, sal, so = _scale(rng), _scale(rng, 1e-3, 0.05), _scale(rng)
        zi, za, zo = _zp(rng, i), _zp(rng, i + 1), _zp(rng, i + 2)
        const_alpha = i % 2 == 0
        data = rand_int8(sa, rng) if const_alpha else None
        alpha = TensorSpec(sa, scale=sal, zero_point=za, data=data)
        cases.append(("PRELU", [TensorSpec(sx, scale=si, zero_point=zi), alpha],
                      TensorSpec(np.broadcast_shapes(sx, sa), scale=so, zero_point=zo)))
        inputs.append([rand_int8(sx, rng)] + ([] if const_alpha else [rand_int8(sa, rng)]))
        single = const_alpha and np.prod(sa) == 1 and np.prod(sx) == np.prod(cases[-1][2].shape)
        expected.append("kiln_lut_s8" if single else "kiln_prelu_s8")
    for i, (si, zi, sal, za, so, zo) in enumerate(((0.05, 0, 0.01, 0, 0.05, 0),
                                                   (0.1, 30, 0.02, 127, 0.1, 20),
                                                   (0.02, 100, 0.004, -128, 0.05, 60))):
        cases.append(("PRELU", [TensorSpec((1, 256, 256), scale=si, zero_point=zi),
                                TensorSpec((1, 256, 256), scale=sal, zero_point=za)],
                      TensorSpec((1, 256, 256), scale=so, zero_point=zo)))
        inputs.append(list(_grid()))
        expected.append("kiln_prelu_s8")
        for alpha in (-128, 0, 127):                               # constant scalar: all inputs
            cases.append(("PRELU", [TensorSpec((256,), scale=si, zero_point=zi),
                                    const([alpha], "int8", scale=sal, zero_point=za)],
                          TensorSpec((256,), scale=so, zero_point=zo)))
            inputs.append([ALL_INT8.copy()])
            expected.append("kiln_lut_s8")
    art = run_cases(cases, inputs)
    assert _kernels(art) == expected


def test_binary_ops_run_exactly_in_place():
    from test_memory_overlap import forced_build
    rng = np.random.default_rng(5)
    shape = (1, 6, 5, 8)
    tensors, ops = [], []
    for op in ("SQUARED_DIFFERENCE", "PRELU", "ABS"):
        xs = [TensorSpec(shape, scale=0.05, zero_point=3)] + (
            [TensorSpec(shape, scale=0.02, zero_point=-5)] if op != "ABS" else [])
        ids = list(range(len(tensors), len(tensors) + len(xs)))
        tensors += xs + [TensorSpec(shape, scale=0.07, zero_point=-9)]
        ops.append(OpSpec(op, ids, [len(tensors) - 1]))
    inputs = [i for o in ops for i in o.inputs]
    model = build_model(ops, tensors, inputs, [o.outputs[0] for o in ops])
    xs = [rand_int8(shape, rng) for _ in inputs]
    want = run_reference(model, xs)
    art, variants = forced_build(model, "host", lambda modes: (modes[0], False) if modes else None)
    assert variants == ["kiln_squared_difference_s8 exact", "kiln_prelu_s8 exact",
                        "kiln_lut_s8 exact"]
    for op, g, w in zip(ops, art.run(*xs), want):
        assert_equal_exact(g, w, f"{op.op} in place")


# --- rejections: one per reason ------------------------------------------------------------

def _rejects(op: str, xs: list[TensorSpec], y: TensorSpec, match: str) -> None:
    with pytest.raises(kc.ModelError, match=match):
        kc.compile(kc.load(single_op_model(op, xs, [y])))


X = TensorSpec((1, 8), scale=0.05, zero_point=0)


@pytest.mark.parametrize("op", ["NEG", "SQRT", "EXP", "LOG"])
def test_ops_without_int8_tflm_kernel_are_rejected(op):
    _rejects(op, [X], TensorSpec((1, 8), scale=0.05, zero_point=0), "not supported")


def test_unary_rejects_non_int8():
    i16 = TensorSpec((1, 8), "int16", scale=1 / 4096, zero_point=0)
    _rejects("RSQRT", [i16], i16, "only int8")       # tflite-micro has no int16 RSQRT


def test_rsqrt_rejects_out_of_range_multiplier():
    _rejects("RSQRT", [TensorSpec((1, 8), scale=1e6, zero_point=0)],
             TensorSpec((1, 8), scale=100.0, zero_point=0), "outside \\[-31, 30\\]")


def test_binary_rejects_shapes_that_do_not_broadcast():
    _rejects("SQUARED_DIFFERENCE", [TensorSpec((1, 8), scale=0.05), TensorSpec((1, 3), scale=0.05)],
             TensorSpec((1, 8), scale=0.05), "do not broadcast")


def test_binary_rejects_more_than_4_merged_dims():
    _rejects("SQUARED_DIFFERENCE", [TensorSpec((2, 1, 3, 1, 5), scale=0.05),
                                    TensorSpec((1, 4, 1, 6, 1), scale=0.05)],
             TensorSpec((2, 4, 3, 6, 5), scale=0.05), "more than 4 dimensions")


def test_binary_rejects_per_channel_alpha():
    alpha = TensorSpec((1, 8), scale=[0.01] * 8, zero_point=[0] * 8, quantized_dimension=1,
                       data=np.ones((1, 8), np.int8))
    _rejects("PRELU", [X, alpha], TensorSpec((1, 8), scale=0.05), "per-tensor quantization")


def test_squared_difference_rejects_out_of_range_output_multiplier():
    big = TensorSpec((1, 8), scale=1e4)
    _rejects("SQUARED_DIFFERENCE", [big, big], TensorSpec((1, 8), scale=1e-8),
             "output multiplier .* out of range")


def test_prelu_rejects_out_of_range_multiplier():
    _rejects("PRELU", [TensorSpec((1, 8), scale=1e3), TensorSpec((1, 8), scale=0.5)],
             TensorSpec((1, 8), scale=1e-9), "positive-side multiplier .* out of range")


# --- the C kernels' argument checks ------------------------------------------------------

_ARG_CHECKS = r"""
#include <stdio.h>
#include "kiln_kernels.h"
int main(void)
{
    int8_t a[8] = {0}, b[8] = {0}, y[8];
    const kiln_dims_t d4 = {1, 1, 2, 4}, d3 = {1, 1, 1, 3}, bad = {1, 0, 1, 1};
    kiln_squared_difference_params_t q = {0, 0, 0, 7, {1 << 30, 0}, {1 << 30, 0}, {1 << 30, 0}};
    kiln_prelu_params_t p = {0, 0, 0, {1 << 30, 1}, {1 << 30, -5}};
    int fails = 0;
    fails += kiln_squared_difference_s8(&q, &d4, a, &d3, b, &d4, y) != KILN_ERR_ARG;
    fails += kiln_squared_difference_s8(&q, &bad, a, &d4, b, &d4, y) != KILN_ERR_ARG;
    fails += kiln_squared_difference_s8(NULL, &d4, a, &d4, b, &d4, y) != KILN_ERR_ARG;
    fails += kiln_squared_difference_s8(&q, &d4, a, &d4, b, &d4, y) != KILN_OK;
    q.left_shift = 8;
    fails += kiln_squared_difference_s8(&q, &d4, a, &d4, b, &d4, y) != KILN_ERR_ARG;
    fails += kiln_prelu_s8(&p, &d4, a, &d4, NULL, &d4, y) != KILN_ERR_ARG;
    fails += kiln_prelu_s8(&p, &d4, a, &d3, b, &d4, y) != KILN_ERR_ARG;
    fails += kiln_prelu_s8(&p, &d4, a, &d4, b, &d4, y) != KILN_OK;
    p.negative.shift = 31;
    fails += kiln_prelu_s8(&p, &d4, a, &d4, b, &d4, y) != KILN_ERR_ARG;
    printf("%d\n", fails);
    return fails;
}
"""


def test_kernels_validate_arguments_under_sanitizers(tmp_path):
    assert run_sanitized_c(tmp_path, _ARG_CHECKS, ["math_ops.c", "broadcast.c"]).strip() == "0"
