"""kiln_add_lut_s8's one table: the larger-scale input of an int8 ADD/SUB rescales by a
shift ((x - zp) << 19, its multiplier is exactly 1/2), the other one through a 1 KB table.

Exact against TFLM's arithmetic (numpy, every pair of int8 values) and against
tflite-micro (ADD and SUB, either input shifted, whole and broadcast rows).
"""

from __future__ import annotations

import numpy as np
import pytest

import kiln.compiler as kc
from kiln.compiler.codegen.ops.elementwise import (ADD_LUT_MIN_ELEMENTS, add_input_table,
                                                   add_lut_table, shifted_input)
from kiln.compiler.numerics import quantize_multiplier
from conftest import run_sanitized_c
from reference import assert_equal_exact, run_reference
from test_ops_elementwise import KERNELS, Case, run_cases
from tflite_builder import OpSpec, TensorSpec, build_model, rand_int8


def _reals(s1: float, s2: float) -> tuple[float, float]:
    twice = 2.0 * max(s1, s2)                # TFLM's add_common.cc, in double
    return s1 / twice, s2 / twice


@pytest.mark.parametrize("op", ["ADD", "SUB"])
def test_table_plus_shift_is_tflm_sum_for_every_pair(op):
    rng = np.random.default_rng(5)
    x = np.arange(-128, 128, dtype=np.int64)
    u_grid, v_grid = np.meshgrid(x, x, indexing="ij")
    seen = set()
    for _ in range(40):
        s1, s2 = (float(np.float32(np.exp(rng.uniform(-7, 1)))) for _ in range(2))
        if rng.random() < 0.1:
            s2 = s1                             # equal scales: both shifts, input2 chosen
        z1, z2 = (int(z) for z in rng.integers(-128, 128, 2))
        r1, r2 = _reals(s1, s2)
        shifted = shifted_input(z1, r1, z2, r2)
        assert shifted == (2 if s2 >= s1 else 1)
        seen.add(shifted)
        table, sign = add_lut_table(op, shifted, z1, r1, z2, r2)
        assert table.dtype == np.int32 and table.shape == (256,)
        t1, t2 = add_input_table(z1, r1).astype(np.int64), add_input_table(z2, r2).astype(np.int64)
        # u: the table input's value, v: the shifted input's, over every pair.
        a, b = (v_grid, u_grid) if shifted == 1 else (u_grid, v_grid)
        want = t1[a + 128] + (t2[b + 128] if op == "ADD" else -t2[b + 128])
        got = table.astype(np.int64)[u_grid + 128] + sign * (v_grid << 19)
        assert np.array_equal(got, want)
        assert int(np.abs(got).max()) < (1 << 31)
    assert seen == {1, 2}


def test_no_shifted_input_is_refused_by_the_table_variant():
    """Multipliers not from TFLM's derivation (neither is 1/2): no table variant."""
    from kiln.compiler.codegen.ops.elementwise import add_variant
    assert shifted_input(3, 0.3, -7, 0.45) is None
    assert add_variant("ADD", ADD_LUT_MIN_ELEMENTS, shifted=False) == "kiln_add_s8"
    assert add_variant("SUB", ADD_LUT_MIN_ELEMENTS, shifted=True) == "kiln_add_lut_s8"
    assert add_variant("SUB", ADD_LUT_MIN_ELEMENTS, same_shape=True) == "kiln_add_lut_same_s8"


def test_either_input_shifted_matches_tflm():
    """ADD and SUB with the larger scale on input1, then on input2, on whole rows and on
    broadcast ones (a channel vector, a scalar), all large enough for the table variant."""
    rng = np.random.default_rng(17)
    shapes = [((1, 32, 32, 2), (1, 32, 32, 2)), ((1, 40, 30, 2), (1, 1, 1, 2)),
              ((1, 1, 1, 1), (1, 33, 32, 1))]
    cases = []
    for op in ("ADD", "SUB"):
        for big in (1, 2):
            for sa, sb in shapes:
                scales = [0.05, 0.011]
                s1, s2 = scales if big == 1 else scales[::-1]
                z1, z2, zo = (int(z) for z in rng.integers(-128, 128, 3))
                out = np.broadcast_shapes(sa, sb)
                cases.append(Case(op, TensorSpec(sa, scale=s1, zero_point=z1),
                                  TensorSpec(sb, scale=s2, zero_point=z2),
                                  TensorSpec(out, scale=0.07, zero_point=zo),
                                  {"fused_activation_function": "RELU" if big == 1 else "NONE"}))
    art = run_cases(cases, rng)
    assert {o["kernel"] for o in art.report["ops"]} == {"kiln_add_lut_s8", "kiln_add_lut_same_s8"}


def test_table_variant_output_shift_range():
    """The table variant requantizes as kiln_requantize_fast (output shift <= -2): an
    output multiplier at its ends (shift -2, and -31) stays on it, exact with TFLM; one
    of shift -1 (an output scale below 2^-18 of the common scale) takes kiln_add_s8."""
    rng = np.random.default_rng(23)
    s1, s2 = 0.05, 0.011
    twice = 2.0 * max(s1, s2)
    cases = []
    for real in (0.2, 0.3, 2.0 ** -31.5, 2.0 ** -25):
        so = float(np.float32(twice / ((1 << 20) * real)))
        z1, z2, zo = (int(z) for z in rng.integers(-128, 128, 3))
        cases.append(Case("ADD", TensorSpec((1, 32, 32, 2), scale=s1, zero_point=z1),
                          TensorSpec((1, 32, 32, 2), scale=s2, zero_point=z2),
                          TensorSpec((1, 32, 32, 2), scale=so, zero_point=zo),
                          {"fused_activation_function": "NONE"}))
    art = run_cases(cases, rng)
    assert [o["kernel"] for o in art.report["ops"]] == [
        "kiln_add_lut_same_s8", "kiln_add_s8", "kiln_add_lut_same_s8", "kiln_add_lut_same_s8"]


@pytest.mark.cross
@pytest.mark.qemu
def test_table_variant_on_qemu(tmp_path):
    """The table variant's Cortex-M4 loops (a full-range ADD halves and clamps in one SSAT)
    against tflite-micro: ADD full range (no activation, and RELU at zero point -128),
    ADD with a clamp, SUB, a broadcast row, output shifts near both ends."""
    from conftest import require_tool
    from kiln.project_gen import create_project
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    rng = np.random.default_rng(29)
    twice = 2.0 * 0.05
    specs = [("ADD", (1, 32, 32, 4), 0.07, -128, "RELU"), ("ADD", (1, 32, 32, 4), 0.03, 5, "NONE"),
             ("ADD", (1, 32, 32, 4), 0.05, 3, "RELU6"), ("SUB", (1, 32, 32, 4), 0.06, -7, "NONE"),
             ("ADD", (1, 1, 1, 4), 0.08, 11, "NONE"),
             ("ADD", (1, 32, 32, 4), float(np.float32(twice / ((1 << 20) * 0.2))), 0, "NONE"),
             ("ADD", (1, 32, 32, 4), float(np.float32(twice / ((1 << 20) * 2.0 ** -22))), 1,
              "NONE")]
    tensors, ops, inputs = [], [], []
    for i, (op, b_shape, so, zo, act) in enumerate(specs):
        z1, z2 = (int(z) for z in rng.integers(-128, 128, 2))
        base = len(tensors)
        tensors += [TensorSpec((1, 32, 32, 4), scale=0.05, zero_point=z1),
                    TensorSpec(b_shape, scale=0.011, zero_point=z2),
                    TensorSpec((1, 32, 32, 4), scale=so, zero_point=zo)]
        ops.append(OpSpec(op, [base, base + 1], [base + 2], {"fused_activation_function": act}))
        inputs += [base, base + 1]
    model = build_model(ops, tensors, inputs, [3 * i + 2 for i in range(len(specs))])
    xs = [rand_int8(tensors[i].shape, rng) for i in inputs]
    want = run_reference(model, xs)
    art = kc.compile(kc.load(model), board="mps2-an386")
    kernels = [o["kernel"] for o in art.report["ops"]]
    assert kernels.count("kiln_add_lut_same_s8") == 6 and "kiln_add_lut_s8" in kernels
    got = create_project(art, board="mps2-an386", out_dir=tmp_path / "p", inputs=xs).run(
        timeout=120).outputs
    for (op, *_), g, w in zip(specs, got, want):
        assert_equal_exact(g, w, f"{op} on QEMU")


# --- tables built at run time (kiln_add_lut_table_s8) ------------------------------------

def _pooled_add_model(size: int = 32) -> bytes:
    """Inputs a, b (1, size, size, 4); CONCATENATION of both, its AVERAGE_POOL_2D to one
    pixel, then ADD(a, b): the concatenation's step holds twice the ADD's bytes, so the
    ADD's table fits beside its buffers without growing the arena."""
    q = dict(scale=0.11, zero_point=7)             # what CONCATENATION keeps
    tensors = [TensorSpec((1, size, size, 4), **q), TensorSpec((1, size, size, 4), **q),
               TensorSpec((1, size, size, 8), **q), TensorSpec((1, 1, 1, 8), **q),
               TensorSpec((1, size, size, 4), scale=0.13, zero_point=-100)]
    ops = [OpSpec("CONCATENATION", [0, 1], [2], {"axis": 3}),
           OpSpec("AVERAGE_POOL_2D", [2], [3], {"filter_width": size, "filter_height": size}),
           OpSpec("ADD", [0, 1], [4], {"fused_activation_function": "RELU"})]
    return build_model(ops, tensors, [0, 1], [3, 4])


def _table_in(art: kc.Artifact) -> str:
    add = [o for o in art.report["ops"] if o["kernel"].startswith("kiln_add_lut")]
    assert len(add) == 1, art.report["ops"]
    scratch = add[0].get("knobs", {}).get("table") == "scratch"
    assert [m["layer"] for m in art.report["scratch_tables"]] == ([add[0]["index"]] if scratch
                                                                 else [])
    return "scratch" if scratch else "flash"


@pytest.mark.parametrize("optimize", ["balanced", "memory", "speed"])
def test_add_table_in_scratch_where_the_arena_keeps_its_size(optimize):
    """balanced and memory builds build a large ADD's table at run time in its layer's
    scratch (no 1 KB input_table in flash) where the arena keeps its size; speed builds
    keep it in flash. Bit-exact with TFLM either way."""
    rng = np.random.default_rng(31)
    model = _pooled_add_model()
    xs = [rand_int8((1, 32, 32, 4), rng) for _ in range(2)]
    want = run_reference(model, xs)
    art = kc.compile(kc.load(model), optimize=optimize)
    flash = kc.compile(kc.load(model), optimize="speed")
    where = "flash" if optimize == "speed" else "scratch"
    assert _table_in(art) == where
    assert ("input_table" in art.files["weights.c"]) == (where == "flash")
    assert (art.report["weights_bytes"] + 1024 == flash.report["weights_bytes"]) == (
        where == "scratch")
    for g, w in zip(art.run(*xs), want):
        assert_equal_exact(g, w, f"pooled ADD, {optimize}")


def test_add_table_stays_in_flash_where_the_arena_would_grow():
    """A lone ADD of two inputs is the arena's peak: its table stays in flash."""
    rng = np.random.default_rng(32)
    case = Case("ADD", TensorSpec((1, 32, 32, 4), scale=0.07, zero_point=3),
                TensorSpec((1, 32, 32, 4), scale=0.02, zero_point=-9),
                TensorSpec((1, 32, 32, 4), scale=0.09, zero_point=1))
    art = run_cases([case], rng)
    assert art.report["optimize"] == "balanced"
    assert _table_in(art) == "flash" and "input_table" in art.files["weights.c"]


_TABLE_MAIN = r"""
#include <stdio.h>
#include "elementwise.h"

typedef struct {
    kiln_add_lut_table_params_t params;
    int32_t want[256];
} table_case_t;

static const table_case_t cases[] = {
%(cases)s
};

int main(void)
{
    static int32_t table[256];
    long wrong = 0;
    int ok = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        ok += kiln_add_lut_table_s8(&cases[c].params, table) == KILN_OK;
        for (int i = 0; i < 256; ++i) {
            wrong += table[i] != cases[c].want[i];
        }
    }
    kiln_add_lut_table_params_t bad = cases[0].params;
    int refused = kiln_add_lut_table_s8(NULL, table) == KILN_ERR_ARG;
    refused += kiln_add_lut_table_s8(&bad, NULL) == KILN_ERR_ARG;
    refused += kiln_add_lut_table_s8(&bad, (int32_t *)(void *)((char *)table + 2)) == KILN_ERR_ARG;
    bad.sign = 0;
    refused += kiln_add_lut_table_s8(&bad, table) == KILN_ERR_ARG;
    bad = cases[0].params;
    bad.input.shift = 1;
    refused += kiln_add_lut_table_s8(&bad, table) == KILN_ERR_ARG;
    bad = cases[0].params;
    bad.input_offset = 129;
    refused += kiln_add_lut_table_s8(&bad, table) == KILN_ERR_ARG;
    bad = cases[0].params;
    bad.shifted_term = (128 << 19) + 1;
    refused += kiln_add_lut_table_s8(&bad, table) == KILN_ERR_ARG;
    printf("ok %d wrong %ld refused %d\n", ok, wrong, refused);
    return 0;
}
"""


def test_run_time_table_equals_the_compilers(tmp_path):
    """kiln_add_lut_table_s8 builds, entry for entry, the table the compiler would store
    (add_lut_table), for ADD and SUB with either input shifted, zero points at both ends
    and scales far apart; bad arguments are refused."""
    rng = np.random.default_rng(33)
    cases = []
    while len(cases) < 40:
        op = ("ADD", "SUB")[len(cases) % 2]
        s1, s2 = (float(np.float32(10 ** rng.uniform(-4, 0))) for _ in range(2))
        z1, z2 = (int(v) for v in rng.choice([-128, 127, *rng.integers(-128, 128, 4)], 2))
        r1, r2 = s1 / (2.0 * max(s1, s2)), s2 / (2.0 * max(s1, s2))    # add_common.cc
        shifted = shifted_input(z1, r1, z2, r2)
        if shifted is None:
            continue
        table, sign = add_lut_table(op, shifted, z1, r1, z2, r2)
        (zu, ru), zv = ((z2, r2), z1) if shifted == 1 else ((z1, r1), z2)
        m, e = quantize_multiplier(ru)
        negate = -1 if op == "SUB" and shifted == 1 else 1
        cases.append(f"    {{{{{{{m}, {e}}}, {-zu}, {negate}, {sign * (zv << 19)}}}, "
                     f"{{{', '.join(str(int(v)) for v in table)}}}}},")
    main = _TABLE_MAIN.replace("%(cases)s", "\n".join(cases))
    out = run_sanitized_c(tmp_path, main, KERNELS)
    assert out.strip() == "ok 40 wrong 0 refused 7", out


@pytest.mark.cross
@pytest.mark.qemu
def test_add_table_in_scratch_on_qemu(tmp_path):
    """The run-time table on mps2-an386 (balanced build), bit-exact with tflite-micro."""
    from conftest import require_tool
    from kiln.project_gen import create_project
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    rng = np.random.default_rng(34)
    model = _pooled_add_model()
    xs = [rand_int8((1, 32, 32, 4), rng) for _ in range(2)]
    art = kc.compile(kc.load(model), board="mps2-an386")
    assert _table_in(art) == "scratch"
    result = create_project(art, board="mps2-an386", out_dir=tmp_path / "fw").run(xs, timeout=60)
    for g, w in zip(result.outputs, run_reference(model, xs)):
        assert_equal_exact(g, w, "pooled ADD, table built on the target")


def test_add_table_in_scratch_clean_under_sanitizers(tmp_path):
    """The generated C building its table in the arena's scratch, with
    -fsanitize=address,undefined: no report, TFLM's outputs."""
    from conftest import require_tool
    from test_ops_conv import run_sanitized
    require_tool("cc")
    rng = np.random.default_rng(35)
    model = _pooled_add_model(16)
    xs = [rand_int8((1, 16, 16, 4), rng) for _ in range(2)]
    art = kc.compile(kc.load(model))
    assert _table_in(art) == "scratch"
    got = run_sanitized(art, xs, tmp_path, 2)
    for g, w in zip(got, run_reference(model, xs)):
        assert_equal_exact(g, w.reshape(-1), "pooled ADD under sanitizers")
