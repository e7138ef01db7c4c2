"""QUANTIZE and DEQUANTIZE against tflite-micro, exactly (floats compared bit for bit),
and a float-in / float-out model around an int8 body, also under the sanitizers."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import kiln.compiler as kc
from kiln.compiler.codegen.ops.quantize_ops import requantize_table
from kiln.compiler.host_build import build_executable
from reference import assert_equal_exact, run_reference
from tflite_builder import OpSpec, TensorSpec, build_model, const, single_op_model

ALL_INT8 = np.arange(-128, 128, dtype=np.int8)


def run_unary_cases(cases, inputs) -> kc.Artifact:
    """(op, input spec, output spec) cases as independent ops of one model."""
    tensors, ops = [], []
    for op, x, y in cases:
        tensors += [x, y]
        ops.append(OpSpec(op, [len(tensors) - 2], [len(tensors) - 1]))
    n = len(cases)
    model = build_model(ops, tensors, [2 * i for i in range(n)], [2 * i + 1 for i in range(n)])
    want = run_reference(model, inputs)
    art = kc.compile(kc.load(model))
    got = art.run(*inputs)
    for (op, x, y), g, w in zip(cases, got, want):
        assert_equal_exact(g, w, f"{op} {x.dtype} s={x.scale} zp={x.zero_point} -> "
                                 f"{y.dtype} s={y.scale} zp={y.zero_point}")
    return art


def _scale(rng, lo=1e-4, hi=2.0) -> float:
    return float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


def _float_input(rng, shape, scale) -> np.ndarray:
    """Normal values over the int8 range, exact half-way ties, signed zeros, values far
    out of range (quotients still inside int32: beyond it TFLM's cast is undefined)."""
    x = (rng.normal(0, 80, shape) * scale).astype(np.float32).reshape(-1)
    k = np.arange(-140, 140, 7, dtype=np.float32)
    ties = ((k + np.float32(0.5)) * np.float32(scale)).astype(np.float32)
    x[:ties.size] = ties
    x[ties.size:ties.size + 6] = [0.0, -0.0, 1e-30, -1e-30,
                                   np.float32(1e6 * scale), np.float32(-1e6 * scale)]
    return x.reshape(shape)


def test_quantize_float_to_int8_and_int16():
    rng = np.random.default_rng(41)
    cases, inputs = [], []
    for i in range(30):
        shape = [(1, 8, 8, 3), (200,), (2, 5, 30)][i % 3]
        so = _scale(rng)
        if i % 3 == 2:
            dtype, zo = "int16", int(rng.integers(-2000, 2000))
            so = so / 256
        else:
            dtype, zo = "int8", [-128, 127, int(rng.integers(-128, 128))][i % 3]
        cases.append(("QUANTIZE", TensorSpec(shape, "float32"),
                      TensorSpec(shape, dtype, scale=so, zero_point=zo)))
        inputs.append(_float_input(rng, shape, so))
    art = run_unary_cases(cases, inputs)
    assert {o["kernel"] for o in art.report["ops"]} == {"kiln_quantize_f32_s8",
                                                       "kiln_quantize_f32_s16"}


def test_whole_number_scales_are_valid_c(tmp_path):
    """A scale of exactly 1 (an input calibrated on [0, 255]) was written "1f", which C
    rejects: in QUANTIZE's params and in model.h's KILN_OUTPUT_0_SCALE."""
    from kiln.compiler.codegen.lowering import c_float

    assert [c_float(v) for v in (1.0, 2.0, 0.5, 1e-5, 3e38)] == \
        ["1.0f", "2.0f", "0.5f", "9.99999975e-06f", "3.00000001e+38f"]
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 255, (1, 4)).astype(np.float32)
    art = run_unary_cases([("QUANTIZE", TensorSpec((1, 4), "float32"),
                            TensorSpec((1, 4), "int8", scale=1.0, zero_point=-128))], [x])
    assert "{1.0f, -128}" in art.files["model.c"]
    uses = tmp_path / "uses_scale.c"
    uses.write_text('#include "model.h"\nfloat scale(void) { return KILN_OUTPUT_0_SCALE; }\n')
    art.save(tmp_path / "m")
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", str(uses),
                    "-I", str(tmp_path / "m"), "-o", str(tmp_path / "u.o")], check=True)


def test_requantize_int8_all_inputs():
    rng = np.random.default_rng(42)
    cases = []
    for i in range(30):
        si = _scale(rng, 1e-3, 1.0)
        so = float(np.float32(si * [0.01, 0.3, 0.999, 1.0, 1.7, 40.0][i % 6]))
        zi, zo = [(-128, 127), (127, -128)][i % 2] if i % 5 == 0 else (
            int(rng.integers(-128, 128)), int(rng.integers(-128, 128)))
        if i % 3 == 2:
            cases.append(("QUANTIZE", TensorSpec((256,), scale=si, zero_point=zi),
                          TensorSpec((256,), "int16", scale=so / 300,
                                     zero_point=int(rng.integers(-30000, 30000)))))
        else:
            cases.append(("QUANTIZE", TensorSpec((256,), scale=si, zero_point=zi),
                          TensorSpec((256,), scale=so, zero_point=zo)))
    art = run_unary_cases(cases, [ALL_INT8.copy() for _ in cases])
    assert {o["kernel"] for o in art.report["ops"]} == {"kiln_lut_s8", "kiln_lut_s8_s16"}
    t = requantize_table(0.5, 3, 0.5, 3)
    assert np.array_equal(t, ALL_INT8)          # same quantization: identity


def test_dequantize_int8_and_int16_bit_exact():
    rng = np.random.default_rng(43)
    cases, inputs = [], []
    for i in range(20):
        si = _scale(rng, 1e-6, 50.0)
        if i % 4 == 3:
            zi = int(rng.integers(-5000, 5000))
            cases.append(("DEQUANTIZE", TensorSpec((1000,), "int16", scale=si, zero_point=zi),
                          TensorSpec((1000,), "float32")))
            inputs.append(rng.integers(-32768, 32768, 1000).astype(np.int16))
        else:
            zi = [-128, 127, int(rng.integers(-128, 128))][i % 3]
            cases.append(("DEQUANTIZE", TensorSpec((1, 16, 16), scale=si, zero_point=zi),
                          TensorSpec((1, 16, 16), "float32")))
            inputs.append(ALL_INT8.reshape(1, 16, 16).copy())
    got = run_unary_cases(cases, inputs).run(*inputs)
    for (_, x, _), g, q in zip(cases, got, inputs):   # bit for bit, not just ==
        want = (np.float64(np.float32(x.scale)) * (q.astype(np.int64) - x.zero_point))
        assert np.array_equal(g.view(np.int32), want.astype(np.float32).view(np.int32))


def test_quantize_out_of_range_and_nan():
    """Beyond TFLM's defined range kiln saturates; NaN maps to the zero point."""
    model = single_op_model("QUANTIZE", [TensorSpec((6,), "float32")],
                            [TensorSpec((6,), scale=0.1, zero_point=-5)])
    x = np.array([1e30, -1e30, np.inf, -np.inf, np.nan, 12.7], np.float32)
    assert kc.compile(kc.load(model)).run(x)[0].tolist() == [127, -128, 127, -128, -5, 122]


# --- a float model around an int8 body --------------------------------------------------------

def boundary_model(rng) -> tuple[bytes, list[np.ndarray]]:
    """float a, b -> QUANTIZE each -> ADD (RELU) -> LEAKY_RELU -> DEQUANTIZE -> float, and
    ADD -> MUL by a constant -> SOFTMAX -> DEQUANTIZE -> float."""
    shape = (1, 4, 4, 10)
    q = lambda s, z: dict(scale=s, zero_point=z)  # noqa: E731
    t = [TensorSpec(shape, "float32", name="a"),                  # 0
         TensorSpec(shape, "float32", name="b"),                  # 1
         TensorSpec(shape, **q(0.05, 3), name="qa"),              # 2
         TensorSpec(shape, **q(0.08, -20), name="qb"),            # 3
         TensorSpec(shape, **q(0.1, -128), name="sum"),           # 4
         TensorSpec(shape, **q(0.07, -30), name="leaky"),         # 5
         TensorSpec(shape, "float32", name="out0"),               # 6
         TensorSpec(shape, **q(0.12, 10), name="scaled"),         # 7
         TensorSpec(shape, **q(1 / 256, -128), name="probs"),     # 8
         TensorSpec(shape, "float32", name="out1"),               # 9
         const(np.full((10,), 77, np.int8), "int8", **q(0.02, 0), name="gain")]  # 10
    ops = [OpSpec("QUANTIZE", [0], [2]), OpSpec("QUANTIZE", [1], [3]),
           OpSpec("ADD", [2, 3], [4], {"fused_activation_function": "RELU"}),
           OpSpec("LEAKY_RELU", [4], [5], {"alpha": 0.25}),
           OpSpec("DEQUANTIZE", [5], [6]),
           OpSpec("MUL", [4, 10], [7]),
           OpSpec("SOFTMAX", [7], [8], {"beta": 1.0}),
           OpSpec("DEQUANTIZE", [8], [9])]
    model = build_model(ops, t, [0, 1], [6, 9])
    xs = [rng.normal(0, 3, shape).astype(np.float32) for _ in range(2)]
    return model, xs


def test_float_model_around_int8_body_matches_tflm():
    rng = np.random.default_rng(44)
    model, xs = boundary_model(rng)
    art = kc.compile(kc.load(model))
    want = run_reference(model, xs)
    for i, (g, w) in enumerate(zip(art.run(*xs), want)):
        assert_equal_exact(g, w, f"output {i}")
    assert [o["type"] for o in art.report["ops"]][0] == "QUANTIZE"


def _main_c(n_in: int, n_out: int) -> str:
    lines = ["#include <stdio.h>", "#include <stdint.h>", '#include "model.h"',
             "static uint8_t arena[KILN_ARENA_BYTES] __attribute__((aligned(16)));"]
    lines += [f"static uint8_t in{i}[KILN_INPUT_{i}_BYTES];" for i in range(n_in)]
    lines += [f"static uint8_t out{i}[KILN_OUTPUT_{i}_BYTES];" for i in range(n_out)]
    lines += ["int main(void)", "{"]
    lines += [f"    if (fread(in{i}, 1, sizeof in{i}, stdin) != sizeof in{i}) return 3;"
              for i in range(n_in)]
    lines += [f"    const void *inputs[] = {{{', '.join(f'in{i}' for i in range(n_in))}}};",
              f"    void *outputs[] = {{{', '.join(f'out{i}' for i in range(n_out))}}};",
              "    const int status = kiln_run(inputs, outputs, arena);"]
    lines += [f"    fwrite(out{i}, 1, sizeof out{i}, stdout);" for i in range(n_out)]
    lines += ["    return status;", "}", ""]
    return "\n".join(lines)


def int8_body_model() -> bytes:
    """Every other kernel: broadcast ADD (table variant), TANH table, SUB (direct), MUL,
    MAXIMUM, MINIMUM, SOFTMAX."""
    q = lambda s, z: dict(scale=s, zero_point=z)  # noqa: E731
    t = [TensorSpec((1, 32, 32, 4), **q(0.05, 3)),      # 0 a
         TensorSpec((1, 1, 1, 4), **q(0.08, -20)),      # 1 b
         TensorSpec((2, 3, 5), **q(0.03, 7)),           # 2 c
         TensorSpec((3, 1), **q(0.04, -9)),             # 3 d
         TensorSpec((1, 32, 32, 4), **q(0.1, -128)),    # 4 a + b
         TensorSpec((1, 32, 32, 4), **q(1 / 128, 0)),   # 5 tanh
         TensorSpec((2, 3, 5), **q(0.06, 1)),           # 6 c - d
         TensorSpec((2, 3, 5), **q(0.01, -3)),          # 7 * c
         TensorSpec((2, 3, 5), **q(0.01, -3)),          # 8 max
         TensorSpec((2, 3, 5), **q(0.01, -3)),          # 9 min
         TensorSpec((2, 3, 5), **q(1 / 256, -128))]     # 10 softmax
    ops = [OpSpec("ADD", [0, 1], [4], {"fused_activation_function": "RELU6"}),
           OpSpec("TANH", [4], [5]),
           OpSpec("SUB", [2, 3], [6]),
           OpSpec("MUL", [6, 2], [7]),
           OpSpec("MAXIMUM", [7, 7], [8]),
           OpSpec("MINIMUM", [8, 7], [9]),
           OpSpec("SOFTMAX", [9], [10], {"beta": 1.0})]
    return build_model(ops, t, [0, 1, 2, 3], [5, 10])


@pytest.mark.parametrize("which", ["float_boundary", "int8_body"])
def test_generated_code_runs_clean_under_sanitizers(which, tmp_path):
    """Built with -fsanitize=address,undefined: no report, and the outputs equal the
    shared-library run and TFLM."""
    rng = np.random.default_rng(45)
    if which == "float_boundary":
        model, xs = boundary_model(rng)
    else:
        model = int8_body_model()
        xs = [rng.integers(-128, 128, s).astype(np.int8)
              for s in ((1, 32, 32, 4), (1, 1, 1, 4), (2, 3, 5), (3, 1))]
    art = kc.compile(kc.load(model))
    files = {k: v for k, v in art.files.items() if k.endswith((".c", ".h"))}
    exe = build_executable(files, _main_c(len(xs), 2), tmp_path, sanitize=True)
    proc = subprocess.run([str(exe)], input=b"".join(x.tobytes() for x in xs),
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    got = art.run(*xs)
    assert proc.stdout == b"".join(o.tobytes() for o in got)
    for i, (g, w) in enumerate(zip(got, run_reference(model, xs))):
        assert_equal_exact(g, w, f"{which} output {i}")


# --- rejections -----------------------------------------------------------------------------

def test_rejections_name_the_reason():
    with pytest.raises(kc.ModelError, match="uint8 -> int8 is not supported"):
        kc.compile(kc.load(single_op_model(
            "QUANTIZE", [TensorSpec((4,), "uint8", scale=0.1, zero_point=128)],
            [TensorSpec((4,), scale=0.1, zero_point=0)])))
    with pytest.raises(kc.ModelError, match="per-tensor"):
        kc.compile(kc.load(single_op_model(
            "QUANTIZE", [TensorSpec((2, 4), "float32")],
            [TensorSpec((2, 4), scale=[0.1, 0.2], zero_point=[0, 0])])))
