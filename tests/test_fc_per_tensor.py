"""The per-tensor FULLY_CONNECTED rows kernels (kiln_fully_connected_rows8_p8_pt_s8, int8
row pairs, and kiln_fully_connected_rows{6,8}_pt_s8, doubled int16 pairs) vs tflite-micro.

One multiplier for every row lets their asm loop requantize an output in four instructions
(SMMLAR of twice the sum onto (2 * output_offset + 1) << (-shift - 1), ASR, SSAT): exact
for shifts -2 .. -22 and sums below 2^30 (codegen's fc_per_tensor_ok), with the rounding
of negative values left out where the clamp hides it (ReLU) and a narrower clamp applied
to the bytes after. These cases sit at those edges: rows around the block of eight, depths
that leave a partial group of four, several batches, both shift ends and one past them,
zero points at both ends, every activation; each runs in the default build (int8 pairs)
and in the speed build (int16, six rows a block, then blocks of two: rows around both),
on the host (plain C) and on QEMU mps2-an386 (the asm). tests/test_ops_conv_simd.py runs
rows8_pt, a tuner's choice, on QEMU too.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import require_tool
from kiln.compiler.codegen.ops.conv import fc_per_tensor_ok, pt_bias_p8
from reference import assert_equal_exact, run_reference
from test_ops_conv import Case, _build, fc_case
from tflite_builder import TensorSpec, rand_int8

BOARD = "mps2-an386"
PT = {"kiln_fully_connected_rows8_p8_pt_s8", "kiln_fully_connected_rows8_pt_s8",
      "kiln_fully_connected_rows6_pt_s8"}


def _with_shift(c: Case, shift: float, bias_scale: float | None = None,
                rng: np.random.Generator | None = None) -> Case:
    """The case with an output scale giving TFLite's shift `shift` (effective scale
    2^(shift - 0.5)), and optionally a bias of about +-bias_scale (|sum| stays < 2^30;
    every second row's within 2^22)."""
    x, w, b = c.inputs
    y = replace(c.output, scale=float(x.scale) * float(w.scale) / 2.0 ** (shift - 0.5))
    if bias_scale is not None and rng is not None:
        data = rng.integers(-int(bias_scale), int(bias_scale), size=w.shape[0])
        # the int8 pairs' second rows come back from raw - even: their sums below 2^23
        data[1::2] = np.clip(data[1::2], -(1 << 22), 1 << 22)
        data = data.astype(np.int32)
        b = TensorSpec((w.shape[0],), "int32", scale=float(np.float32(x.scale) *
                                                           np.float32(w.scale)),
                       zero_point=0, data=data)
    return replace(c, inputs=[x, w, b], output=y, label=f"{c.label} shift {shift}")


def pt_cases() -> list[Case]:
    rng = np.random.default_rng(1701)
    acts = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
    cases = []
    shapes = [(1, 1), (7, 3), (8, 4), (9, 5), (15, 33), (16, 8), (17, 13), (23, 64), (24, 30),
              (8, 67), (40, 2)]
    for i, (units, depth) in enumerate(shapes):
        y_zp = [0, 127, -128][i % 3]           # exact rounding (NONE, zp > -128) too
        c = fc_case(rng, i, units=units, depth=depth, batches=1 + i % 3, per_channel=False,
                    w_zp=0, act=acts[i % 4], y_zp=y_zp, x_zp=[-128, 127, 5][i % 3])
        cases.append(_with_shift(c, -4 - i % 7))       # outputs across the int8 range
    n = len(cases)
    for j, (shift, bias) in enumerate(((-2, None), (-2, 3000), (-22, 2 ** 28),
                                       (-22, 2 ** 29))):
        c = fc_case(rng, n + j, units=16 + j, depth=9 + 4 * j, batches=2, per_channel=False,
                    w_zp=0, act=["NONE", "RELU"][j % 2], y_zp=[20, -128][j % 2])
        cases.append(_with_shift(c, shift, bias, rng))
    for j, shift in enumerate((-2, -3)):
        # small sums, unsaturated outputs: half-way values (a quarter of the negative ones
        # at shift -2) show the rounding away from zero
        c = fc_case(rng, n + 5 + j, units=24, depth=4, batches=2, per_channel=False, w_zp=0,
                    bias=False, act="NONE", y_zp=10 * (j + 1))
        x, w, b = c.inputs
        w = replace(w, data=rng.integers(-3, 4, size=w.shape).astype(np.int8))
        cases.append(replace(_with_shift(replace(c, inputs=[x, w, b]), shift),
                             x_low=-8, x_high=8))
    cases.append(fc_case(rng, n + 7, units=20, depth=25, batches=2, per_channel=False, w_zp=0,
                         act="NONE"))
    cases[-1] = _with_shift(cases[-1], -23, 2 ** 29, rng)
    cases.append(fc_case(rng, n + 8, units=12, depth=20, per_channel=True, act="RELU"))
    return cases


def _compile(cases: list[Case], optimize: str) -> tuple[bytes, kc.Artifact]:
    model = _build(cases)
    return model, kc.compile(kc.load(model), board=BOARD, optimize=optimize)


def _check_kernels(art: kc.Artifact, optimize: str) -> None:
    kernels = [op["kernel"] for op in art.report["ops"]]
    wanted = ("kiln_fully_connected_rows8_p8_pt_s8" if optimize == "balanced"
              else "kiln_fully_connected_rows6_pt_s8")
    # every per-tensor case on its pt kernel but shift -23 and the per-channel one
    assert kernels[:-2] == [wanted] * (len(kernels) - 2), kernels
    assert kernels[-2] not in PT and kernels[-1] not in PT, kernels


@pytest.mark.parametrize("optimize", ["balanced", "speed"])
def test_per_tensor_rows_on_host(optimize):
    cases = pt_cases()
    model, art = _compile(cases, optimize)
    _check_kernels(art, optimize)
    rng = np.random.default_rng(3)
    xs = [rand_int8(c.inputs[0].shape, rng, c.x_low, c.x_high) for c in cases]
    for c, g, w in zip(cases, art.run(*xs), run_reference(model, xs)):
        assert_equal_exact(g, w, c.label)


@pytest.mark.cross
@pytest.mark.qemu
def test_per_tensor_rows_on_qemu(tmp_path):
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    cases = pt_cases()
    rng = np.random.default_rng(4)
    xs = [rand_int8(c.inputs[0].shape, rng, c.x_low, c.x_high) for c in cases]
    failures = []
    for optimize in ("balanced", "speed"):
        model, art = _compile(cases, optimize)
        _check_kernels(art, optimize)
        want = run_reference(model, xs)
        p = create_project(art, board=BOARD, out_dir=tmp_path / optimize, inputs=xs)
        for c, g, w in zip(cases, p.run(timeout=120).outputs, want):
            try:
                assert_equal_exact(g, w, f"{c.label} on QEMU, {optimize}")
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, "\n".join(failures)


def test_per_tensor_eligibility_edges():
    one = np.array([1 << 30] * 4)
    shift = np.array([-5] * 4)
    sums = np.array([10, 10, 10, 10])
    bias = np.zeros(4, np.int64)
    assert fc_per_tensor_ok(one, shift, bias, sums, sums[1::2])
    assert not fc_per_tensor_ok(np.array([1 << 30, 1 << 30, 1 << 30, (1 << 30) + 1]), shift,
                                bias, sums, None)                   # per-channel values
    assert fc_per_tensor_ok(one, np.array([-22] * 4), bias, sums, None)
    assert not fc_per_tensor_ok(one, np.array([-23] * 4), bias, sums, None)
    assert not fc_per_tensor_ok(one, np.array([-1] * 4), bias, sums, None)
    edge = (1 << 30) - 1 - 128 * 10                                 # |b| + 128 * sum < 2^30
    assert fc_per_tensor_ok(one, shift, np.array([edge, 0, 0, 0]), sums, None)
    assert not fc_per_tensor_ok(one, shift, np.array([edge + 1, 0, 0, 0]), sums, None)
    odd = (1 << 23) - 1 - 128 * 10                                  # second rows: 2^23
    assert fc_per_tensor_ok(one, shift, np.array([0, odd, 0, 0]), sums, sums[1::2])
    assert not fc_per_tensor_ok(one, shift, np.array([0, odd + 1, 0, 0]), sums, sums[1::2])
    assert fc_per_tensor_ok(one, shift, np.array([odd + 1, 0, 0, 0]), sums, sums[1::2])


def test_pt_bias_p8_starts_raw_then_even():
    b = np.array([5, -3, -(1 << 29), 7, 11])
    words = pt_bias_p8(b).astype(np.int64)
    assert len(words) == 6
    assert words[1] == 5 and words[0] == 5 - 3 * 256
    assert words[3] == -(1 << 29) and words[2] == -(1 << 29) + 7 * 256
    assert words[4] == 11 and words[5] == 11                       # a lone row, d = 0
