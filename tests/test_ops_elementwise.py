"""int8 ADD, SUB, MUL, MAXIMUM, MINIMUM: kiln against tflite-micro, exactly.

Each test packs many independent single-op cases (random shapes, broadcasting,
quantization and fused activations, fixed seeds) into one model, so one host build and
one TFLM run cover them all; every output is compared exactly and labelled with its
case.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

import numpy as np
import pytest

import kiln.compiler as kc
from kiln.compiler.codegen.ops import elementwise
from kiln.compiler.codegen.ops.elementwise import (ADD_LUT_MIN_ELEMENTS, add_input_table,
                                                   add_variant, collapse_broadcast)
from kiln.compiler.numerics import activation_range, quantize_multiplier, requantize
from kiln.compiler.paths import crt_dir
from conftest import run_sanitized_c
from reference import assert_equal_exact, run_reference
from tflite_builder import OpSpec, TensorSpec, build_model, rand_int8, single_op_model

ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


@dataclass
class Case:
    op: str
    a: TensorSpec
    b: TensorSpec
    out: TensorSpec
    options: dict = field(default_factory=dict)

    def label(self) -> str:
        return (f"{self.op} {list(self.a.shape)} s={self.a.scale:.4g} zp={self.a.zero_point} "
                f"x {list(self.b.shape)} s={self.b.scale:.4g} zp={self.b.zero_point} -> "
                f"{list(self.out.shape)} s={self.out.scale:.4g} zp={self.out.zero_point} "
                f"{self.options}")


def run_cases(cases: list[Case], rng: np.random.Generator,
              inputs: list[tuple[np.ndarray, np.ndarray]] | None = None) -> kc.Artifact:
    """All cases as independent ops of one model; compare every output with TFLM."""
    tensors: list[TensorSpec] = []
    ops: list[OpSpec] = []
    model_inputs: list[int] = []
    for c in cases:
        base = len(tensors)
        tensors += [c.a, c.b, c.out]
        ops.append(OpSpec(c.op, [base, base + 1], [base + 2], dict(c.options)))
        model_inputs += [base, base + 1]
    model = build_model(ops, tensors, model_inputs, [3 * i + 2 for i in range(len(cases))])
    if inputs is None:
        inputs = [(rand_int8(c.a.shape, rng), rand_int8(c.b.shape, rng)) for c in cases]
    xs = [x for pair in inputs for x in pair]
    want = run_reference(model, xs)
    art = kc.compile(kc.load(model))
    got = art.run(*xs)
    for c, g, w in zip(cases, got, want):
        assert_equal_exact(g, w, c.label())
    return art


# Broadcast shape pairs: equal, per-channel, scalar, 2-D, rank mismatch, both sides
# broadcasting, 1x1 spatial, 5-D that merges down to 4 dims.
SHAPES = [
    ((1, 8, 8, 16), (1, 8, 8, 16)),
    ((1, 32, 32, 4), (1, 32, 32, 4)),          # large: the table variant
    ((1, 6, 5, 16), (16,)),
    ((16,), (1, 6, 5, 16)),
    ((1, 4, 4, 3), (1, 1, 1, 1)),
    ((1, 1, 1, 1), (2, 3, 5, 7)),
    ((2, 1, 5, 3), (1, 4, 1, 3)),
    ((3, 1), (1, 5)),
    ((7,), (7,)),
    ((1, 1, 1, 24), (1, 1, 1, 24)),
    ((1, 5, 1, 8), (1, 1, 6, 1)),
    ((2, 3, 1, 4, 5), (2, 3, 6, 4, 5)),
    ((1, 40, 40, 1), (1, 40, 40, 1)),           # large with c = 1
    ((1, 40, 30, 2), (1, 1, 1, 2)),             # large, broadcast channel vector
    ((1,), (3, 4)),                             # (0-d scalars: the TFLM harness makes them 1-d)
]


def _quant(rng: np.random.Generator, edge: bool) -> tuple[float, int]:
    scale = float(np.float32(np.exp(rng.uniform(np.log(1e-3), np.log(2.0)))))
    zp = int(rng.choice([-128, 127])) if edge else int(rng.integers(-128, 128))
    return scale, zp


def _random_cases(op: str, rng: np.random.Generator, n: int) -> list[Case]:
    cases = []
    for i in range(n):
        sa, sb = SHAPES[i % len(SHAPES)]
        so = np.broadcast_shapes(sa, sb)
        edge = i % 4 == 3
        (s1, z1), (s2, z2), (s3, z3) = (_quant(rng, edge) for _ in range(3))
        if op in ("ADD", "SUB"):
            # Keep TFLM's output multiplier below one: output scale > 2 max(s1, s2) / 2^20.
            s3 = max(s3, float(np.float32(4 * max(s1, s2) / (1 << 20))))
        if op == "MUL" and i % 5 == 4:
            s3 = float(np.float32(s1 * s2 * rng.uniform(0.01, 0.5)))  # multiplier above one
        if op in ("MAXIMUM", "MINIMUM"):
            s2, z2, s3, z3 = s1, z1, s1, z1
        options = {}
        if op in ("ADD", "SUB", "MUL"):
            options["fused_activation_function"] = ACTIVATIONS[i % len(ACTIVATIONS)]
        cases.append(Case(op, TensorSpec(sa, scale=s1, zero_point=z1),
                          TensorSpec(sb, scale=s2, zero_point=z2),
                          TensorSpec(so, scale=s3, zero_point=z3), options))
    return cases


@pytest.mark.parametrize("op,seed", [("ADD", 1), ("SUB", 2), ("MUL", 3), ("MAXIMUM", 4),
                                     ("MINIMUM", 5)])
def test_random_cases_match_tflm(op, seed):
    rng = np.random.default_rng(seed)
    art = run_cases(_random_cases(op, rng, 45), rng)
    kernels = {o["kernel"] for o in art.report["ops"]}
    if op in ("ADD", "SUB"):
        # all variants ran: direct, table with broadcasting, table on same shapes
        assert kernels == {add_variant(op, 1), "kiln_add_lut_s8", "kiln_add_lut_same_s8"}


def _grid(shape=(1, 256, 256)) -> tuple[np.ndarray, np.ndarray]:
    a = np.repeat(np.arange(-128, 128), 256).astype(np.int8).reshape(shape)
    b = np.tile(np.arange(-128, 128), 256).astype(np.int8).reshape(shape)
    return a, b


def add_numpy(op: str, a: np.ndarray, b: np.ndarray, q1, q2, qo, act: str = "NONE",
              float32_multipliers: bool = False) -> np.ndarray:
    """TFLM's int8 ADD/SUB in numpy. `float32_multipliers` divides the scales in float32
    (what newer sub_common.cc sources do) instead of double."""
    (s1, z1), (s2, z2), (so, zo) = q1, q2, qo
    if float32_multipliers:
        f1, f2, fo = np.float32(s1), np.float32(s2), np.float32(so)
        tw = np.float32(2) * max(f1, f2)
        reals = [float(f1 / tw), float(f2 / tw), float(tw / (np.float32(1 << 20) * fo))]
    else:
        tw = 2.0 * max(s1, s2)
        reals = [s1 / tw, s2 / tw, tw / ((1 << 20) * so)]
    (m1, e1), (m2, e2), (mo, eo) = (quantize_multiplier(r) for r in reals)
    x1 = requantize((a.astype(np.int64) - z1) << 20, m1, e1)
    x2 = requantize((b.astype(np.int64) - z2) << 20, m2, e2)
    raw = x1 + x2 if op == "ADD" else x1 - x2
    lo, hi = activation_range(act, so, zo)
    return np.clip(requantize(raw, mo, eo) + zo, lo, hi).astype(np.int8)


@pytest.mark.parametrize("variant", ["table", "direct"])
def test_add_sub_all_input_pairs_and_multiplier_derivation(variant, monkeypatch):
    """All 65536 input pairs, on scales where computing the multipliers in float32 instead
    of double changes the result: kiln follows the double derivation TFLM uses. Run with
    both ADD/SUB kernels (the size threshold moved out of the way for "direct")."""
    if variant == "direct":
        monkeypatch.setattr(elementwise, "ADD_LUT_MIN_ELEMENTS", 1 << 30)
    rng = np.random.default_rng(11)
    a, b = _grid()
    cases = []
    for op in ("ADD", "SUB"):
        found = 0
        while found < 3:
            q1, q2, qo = [(float(np.float32(rng.uniform(1e-3, 0.3))), int(rng.integers(-128, 128)))
                          for _ in range(3)]
            want = add_numpy(op, a, b, q1, q2, qo)
            if np.array_equal(want, add_numpy(op, a, b, q1, q2, qo, float32_multipliers=True)):
                continue
            found += 1
            cases.append(Case(op, *(TensorSpec(a.shape, scale=s, zero_point=z)
                                    for s, z in (q1, q2, qo))))
    art = run_cases(cases, rng, inputs=[(a, b)] * len(cases))
    kernels = {o["kernel"] for o in art.report["ops"]}
    direct = {"kiln_add_s8", "kiln_sub_s8"}
    assert kernels == ({"kiln_add_lut_same_s8"} if variant == "table" else direct)


def test_add_variant_choice_and_tables():
    assert add_variant("ADD", ADD_LUT_MIN_ELEMENTS) == "kiln_add_lut_s8"
    assert add_variant("ADD", ADD_LUT_MIN_ELEMENTS, same_shape=True) == "kiln_add_lut_same_s8"
    assert add_variant("SUB", ADD_LUT_MIN_ELEMENTS - 1) == "kiln_sub_s8"
    t = add_input_table(-128, 0.5)
    assert t.dtype == np.int32 and t.shape == (256,) and int(np.abs(t).max()) < (1 << 30)
    # Entry i is input i - 128 on the common scale: (x + 128) << 20 halved.
    assert int(t[0]) == 0 and int(t[255]) == 255 << 19


def test_mul_all_input_pairs_and_edge_multipliers():
    rng = np.random.default_rng(13)
    a, b = _grid()
    cases = []
    for ratio in (1e-6, 3e-4, 0.02, 0.7, 1.0, 3.0, 200.0):
        s1, s2 = (float(np.float32(rng.uniform(0.01, 0.2))) for _ in range(2))
        so = float(np.float32(s1 * s2 / ratio))
        z1, z2, zo = (int(v) for v in rng.integers(-128, 128, 3))
        cases.append(Case("MUL", TensorSpec(a.shape, scale=s1, zero_point=z1),
                          TensorSpec(b.shape, scale=s2, zero_point=z2),
                          TensorSpec(a.shape, scale=so, zero_point=zo),
                          {"fused_activation_function": "RELU6" if ratio > 1 else "NONE"}))
    run_cases(cases, rng, inputs=[(a, b)] * len(cases))


def test_resnet_add_shapes():
    """The three residual ADDs of MLPerf Tiny ResNet-8, with its quantization."""
    rng = np.random.default_rng(14)
    specs = [((1, 32, 32, 16), (0.039393551647663116, -128), (0.10419496148824692, 4),
              (0.050945673137903214, -128)),
             ((1, 16, 16, 32), (0.044761426746845245, -17), (0.11311884224414825, 4),
              (0.0532362163066864, -128)),
             ((1, 8, 8, 64), (0.08385830372571945, 38), (0.21724364161491394, -2),
              (0.1270691454410553, -128))]
    cases = [Case("ADD", TensorSpec(s, scale=q1[0], zero_point=q1[1]),
                  TensorSpec(s, scale=q2[0], zero_point=q2[1]),
                  TensorSpec(s, scale=qo[0], zero_point=qo[1]),
                  {"fused_activation_function": "RELU"}) for s, q1, q2, qo in specs]
    run_cases(cases, rng)


# --- shapes and rejections ----------------------------------------------------------------

@pytest.mark.parametrize("a,b,expect", [
    ((1, 8, 8, 16), (1, 8, 8, 16), [(1024,), (1024,), (1024,)]),
    ((1, 8, 8, 16), (16,), [(64, 16), (1, 16), (64, 16)]),
    ((2, 1, 5, 3), (1, 4, 1, 3), [(2, 1, 5, 3), (1, 4, 1, 3), (2, 4, 5, 3)]),
    ((1, 5, 1, 8), (1, 5, 6, 8), [(5, 1, 8), (5, 6, 8), (5, 6, 8)]),
    ((1, 1), (1, 1), [(1,), (1,), (1,)]),
    ((2, 3, 1, 4, 5), (2, 3, 6, 4, 5), [(6, 1, 20), (6, 6, 20), (6, 6, 20)]),
])
def test_collapse_broadcast(a, b, expect):
    out = np.broadcast_shapes(a, b)
    got = collapse_broadcast(a, b, out)
    assert [tuple(int(v) for v in g) for g in got] == [tuple(e) for e in expect]
    # Merged dims describe the same elementwise broadcast.
    x, y = np.arange(np.prod(a)).reshape(a), np.arange(np.prod(b)).reshape(b)
    assert np.array_equal((x.reshape(got[0]) * 1000 + y.reshape(got[1])).reshape(-1),
                          (x * 1000 + y).reshape(-1))


def _model(op, a_shape, b_shape, out_shape, dtype="int8", **opts):
    q = dict(scale=0.05, zero_point=0)
    return single_op_model(op, [TensorSpec(a_shape, dtype, **q), TensorSpec(b_shape, dtype, **q)],
                           [TensorSpec(out_shape, dtype, **q)], opts)


def test_rejections_name_the_reason():
    with pytest.raises(kc.ModelError, match="only int8"):
        kc.compile(kc.load(_model("MAXIMUM", (4,), (4,), (4,), dtype="int32")))
    with pytest.raises(kc.ModelError, match="more than 4 dimensions"):
        kc.compile(kc.load(_model("ADD", (2, 1, 3, 1, 5), (1, 4, 1, 6, 1), (2, 4, 3, 6, 5))))
    with pytest.raises(kc.ModelError, match="TANH"):
        kc.compile(kc.load(_model("MUL", (4,), (4,), (4,), fused_activation_function="TANH")))


# --- C builds -----------------------------------------------------------------------------

KERNELS = ["elementwise.c", "broadcast.c", "activation.c", "quantize.c"]
CROSS = [["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
         ["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"],
         ["-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"]]


@pytest.mark.cross
@pytest.mark.parametrize("flags", CROSS, ids=["m4f", "m0plus", "m3"])
def test_kernels_cross_compile_warning_free(flags, tmp_path):
    cc = shutil.which("arm-none-eabi-gcc")
    if cc is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    for name in KERNELS:
        proc = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", *flags,
                               "-c", str(crt_dir() / "kernels" / name),
                               "-o", str(tmp_path / (name + ".o"))],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


_ARG_CHECKS = r"""
#include <stdio.h>
#include "kiln_kernels.h"
int main(void)
{
    int8_t a[8] = {0}, b[8] = {0}, y[8];
    const kiln_dims_t d4 = {1, 1, 2, 4}, d3 = {1, 1, 1, 3}, bad = {1, 0, 1, 1};
    kiln_add_params_t p = {0, 0, 0, 20, {1 << 30, 0}, {1 << 30, 0}, {1 << 30, -20}, {-128, 127}};
    int fails = 0;
    fails += kiln_add_s8(&p, &d4, a, &d3, b, &d4, y) != KILN_ERR_ARG;   /* 3 vs 4 channels */
    fails += kiln_add_s8(&p, &bad, a, &d4, b, &d4, y) != KILN_ERR_ARG;
    fails += kiln_add_s8(NULL, &d4, a, &d4, b, &d4, y) != KILN_ERR_ARG;
    fails += kiln_maximum_s8(&d4, a, &d4, NULL, &d4, y) != KILN_ERR_ARG;
    fails += kiln_add_s8(&p, &d4, a, &d4, b, &d4, y) != KILN_OK;
    p.left_shift = 23;
    fails += kiln_sub_s8(&p, &d4, a, &d4, b, &d4, y) != KILN_ERR_ARG;
    printf("%d\n", fails);
    return fails;
}
"""


def test_kernels_validate_arguments_under_sanitizers(tmp_path):
    assert run_sanitized_c(tmp_path, _ARG_CHECKS, KERNELS).strip() == "0"

