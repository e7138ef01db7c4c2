"""int16 activations (16x8 models: symmetric int16, zero point 0) against tflite-micro,
exactly: ADD, SUB, MUL, MAXIMUM, MINIMUM, SQUARED_DIFFERENCE (broadcasting), QUANTIZE
(int16 -> int8/int16/int32, int8/float32 -> int16), DEQUANTIZE, LOGISTIC, TANH, SOFTMAX
(int16 and int8 -> int16), AVERAGE/MAX_POOL_2D, RELU, RELU6, LEAKY_RELU, ABS, MEAN, SUM;
a multi-op model on the host, under sanitizers and on QEMU.

Like the int8 op tests, many independent cases share one model (one host build, one
TFLM run); each output is compared exactly and labelled with its case.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

import kiln.compiler as kc
from reference import assert_equal_exact, run_reference
from tflite_builder import OpSpec, TensorSpec, build_model, rand_int

ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


@dataclass
class Case:
    op: str
    inputs: list[TensorSpec]
    out: TensorSpec
    options: dict = field(default_factory=dict)

    def label(self) -> str:
        ins = " x ".join(f"{t.dtype}{list(t.shape)} s={t.scale} zp={t.zero_point}"
                         for t in self.inputs)
        return (f"{self.op} {ins} -> {self.out.dtype}{list(self.out.shape)} "
                f"s={self.out.scale} zp={self.out.zero_point} {self.options}")


def run_cases(cases: list[Case], rng: np.random.Generator,
              inputs: list[list[np.ndarray]] | None = None) -> kc.Artifact:
    """All cases as independent ops of one model; compare every output with TFLM."""
    tensors: list[TensorSpec] = []
    ops: list[OpSpec] = []
    model_inputs: list[int] = []
    outputs: list[int] = []
    for c in cases:
        base = len(tensors)
        tensors += [*c.inputs, c.out]
        n = len(c.inputs)
        ops.append(OpSpec(c.op, list(range(base, base + n)), [base + n], dict(c.options)))
        model_inputs += list(range(base, base + n))
        outputs.append(base + n)
    model = build_model(ops, tensors, model_inputs, outputs)
    if inputs is None:
        inputs = [[_rand(t, rng) for t in c.inputs] for c in cases]
    xs = [x for group in inputs for x in group]
    want = run_reference(model, xs)
    art = kc.compile(kc.load(model))
    got = art.run(*xs)
    for c, g, w in zip(cases, got, want):
        assert_equal_exact(g, w, c.label())
    return art


def _rand(t: TensorSpec, rng: np.random.Generator) -> np.ndarray:
    if t.dtype == "float32":
        return rng.normal(0, 3, size=t.shape).astype(np.float32)
    x = rand_int(t.shape, rng, t.dtype)
    if t.dtype == "int16" and x.size >= 4:     # the extremes, always
        flat = x.reshape(-1)
        flat[:4] = [-32768, 32767, 0, -1]
    return x


def s16(shape, scale: float, zero_point: int = 0) -> TensorSpec:
    return TensorSpec(tuple(shape), "int16", scale=float(np.float32(scale)),
                      zero_point=zero_point)


def _scale(rng: np.random.Generator, lo: float = 1e-5, hi: float = 1e-2) -> float:
    return float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


BROADCAST = [((1, 8, 8, 16), (1, 8, 8, 16)), ((1, 6, 5, 16), (16,)), ((16,), (1, 6, 5, 16)),
             ((1, 4, 4, 3), (1, 1, 1, 1)), ((2, 1, 5, 3), (1, 4, 1, 3)), ((3, 1), (1, 5)),
             ((257,), (257,)), ((1, 2, 3, 4, 5), (1, 2, 1, 4, 1))]


def _out_shape(a, b):
    return tuple(np.broadcast_shapes(a, b))


@pytest.mark.parametrize("op", ["ADD", "SUB"])
def test_add_sub_s16(op):
    rng = np.random.default_rng({"ADD": 1, "SUB": 2}[op])
    cases = []
    for i in range(24):
        sa, sb = BROADCAST[i % len(BROADCAST)]
        if i % 4 == 0:      # power-of-two scales: the converter's pot_scale_int16 case
            s1, s2 = 2.0 ** -int(rng.integers(8, 15)), 2.0 ** -int(rng.integers(8, 15))
            so = 2.0 ** -int(rng.integers(7, 14))
        else:
            s1, s2 = _scale(rng), _scale(rng)
            so = float(np.float32(max(s1, s2) * rng.uniform(0.3, 3.0)))
        options = {"fused_activation_function": ACTIVATIONS[i % 4],
                   "pot_scale_int16": bool(i % 4 == 0)}
        cases.append(Case(op, [s16(sa, s1), s16(sb, s2)], s16(_out_shape(sa, sb), so), options))
    art = run_cases(cases, rng)
    assert {o["kernel"] for o in art.report["ops"]} == {f"kiln_{op.lower()}_s16"}


def test_mul_s16():
    rng = np.random.default_rng(3)
    cases = []
    for i in range(24):
        sa, sb = BROADCAST[i % len(BROADCAST)]
        s1, s2 = _scale(rng, 1e-4, 1e-2), _scale(rng, 1e-4, 1e-2)
        # Multipliers below and above one (output scale under s1 * s2).
        so = float(np.float32(s1 * s2 * 32768 * rng.uniform(0.05, 4.0)))
        options = {"fused_activation_function": ACTIVATIONS[i % 4]}
        cases.append(Case("MUL", [s16(sa, s1), s16(sb, s2)], s16(_out_shape(sa, sb), so),
                          options))
    art = run_cases(cases, rng)
    assert {o["kernel"] for o in art.report["ops"]} == {"kiln_mul_s16"}


def test_int16_nonzero_zero_point_refused():
    model = build_model([OpSpec("ADD", [0, 1], [2], {})],
                        [s16((4,), 0.01, 3), s16((4,), 0.01), s16((4,), 0.02)], [0, 1], [2])
    with pytest.raises(kc.ModelError, match="zero point 0"):
        kc.compile(kc.load(model))


def test_quantize_dequantize_s16():
    """QUANTIZE int16 -> int8 / int16 / int32 (TFLM's Requantize, shifts of both signs,
    the keyword model's zero point -32768), int8 -> int16, float32 -> int16, and
    DEQUANTIZE int16 -> float32."""
    rng = np.random.default_rng(4)
    cases = []
    for i in range(30):
        shape = [(1, 96), (2, 3, 4, 5), (7,)][i % 3]
        kind = i % 6
        si = _scale(rng, 1e-5, 1e-2)
        zi = -32768 if i % 7 == 3 else 0
        if kind == 0:
            out = TensorSpec(shape, "int8", scale=_scale(rng, 1e-3, 0.3),
                             zero_point=int(rng.integers(-128, 128)))
        elif kind == 1:
            out = s16(shape, si * float(rng.choice([0.25, 0.7, 1.0, 1.9, 3.5, 300.0])))
        elif kind == 2:
            out = TensorSpec(shape, "int32", scale=float(np.float32(si * rng.uniform(0.1, 2))),
                             zero_point=0)
        elif kind == 3:
            x8 = TensorSpec(shape, "int8", scale=_scale(rng, 1e-3, 0.1),
                            zero_point=int(rng.integers(-128, 128)))
            cases.append(Case("QUANTIZE", [x8], s16(shape, _scale(rng, 1e-5, 1e-2))))
            continue
        elif kind == 4:
            cases.append(Case("QUANTIZE", [TensorSpec(shape, "float32")],
                              s16(shape, _scale(rng, 1e-4, 1e-3))))
            continue
        else:
            cases.append(Case("DEQUANTIZE", [s16(shape, si, zi)], TensorSpec(shape, "float32")))
            continue
        cases.append(Case("QUANTIZE", [s16(shape, si, zi)], out))
    run_cases(cases, rng)


ALL_INT16 = np.arange(-32768, 32768, dtype=np.int64).astype(np.int16)


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_logistic_tanh_s16_all_inputs(op):
    """Every int16 input, on power-of-two input scales (TFLM's 3 << shift path for 2^-12,
    and 2^-11 for TANH) and general ones (multiplier doubled past 32767 / 2, shifts up
    to 31)."""
    rng = np.random.default_rng({"LOGISTIC": 5, "TANH": 6}[op])
    scales = [2.0 ** -12, 2.0 ** -11, 2.0 ** -13, 2.0 ** -10, 2.0 ** -15, 1e-6, 2.5, 0.02]
    scales += [_scale(rng, 1e-5, 1e-2) for _ in range(4)]
    cases = [Case(op, [s16((256, 256), s)], s16((256, 256), 2.0 ** -15)) for s in scales]
    inputs = [[rng.permutation(ALL_INT16).reshape(256, 256)] for _ in cases]
    art = run_cases(cases, rng, inputs)
    assert {o["kernel"] for o in art.report["ops"]} == {f"kiln_{op.lower()}_s16"}


def test_sigmoid_table_measured_from_tflm():
    """kiln's copy of the sigmoid table is what tflite-micro interpolates: TANH with an
    input scale that maps x to 2x reads entry h at x = 128 h, and the last entry through
    the slope at 254 * 128 + 127."""
    from kiln.compiler.codegen.ops import activation as act
    scale = float(np.float32(16384.5 / 12288 / 8192))
    assert act.sigmoid_s16_params(scale, True) == (16384, 13)
    x = np.concatenate([np.arange(255) * 128, [254 * 128 + 127]]).astype(np.int16)
    model = build_model([OpSpec("TANH", [0], [1])],
                        [s16((256,), scale), s16((256,), 2.0 ** -15)], [0], [1])
    y = run_reference(model, [x])[0].astype(np.int64) + 32768
    assert list(y) == [int(v) for v in act.sigmoid_table_u16()]


def test_softmax_s16():
    """int16 -> int16 (gen_lut tables, interpolation) and int8 -> int16 (the keyword
    model's last layer): rows of several lengths, betas, input scales."""
    rng = np.random.default_rng(7)
    cases = []
    shapes = [(1, 2), (1, 10), (2, 3, 17), (4, 256), (1, 1), (3, 1000)]
    for i in range(12):
        shape = shapes[i % len(shapes)]
        beta = [1.0, 0.5, 2.0, 1.7][i % 4]
        if i % 3 == 2:
            x = TensorSpec(shape, "int8", scale=_scale(rng, 0.01, 0.5),
                           zero_point=int(rng.integers(-128, 128)))
            out = TensorSpec(shape, "int16", scale=1 / 65536, zero_point=-32768)
        else:
            x = s16(shape, _scale(rng, 1e-5, 1e-2))
            out = s16(shape, 1 / 32768)
        cases.append(Case("SOFTMAX", [x], out, {"beta": beta}))
    art = run_cases(cases, rng)
    assert {o["kernel"] for o in art.report["ops"]} == {"kiln_softmax_s16", "kiln_softmax_s8_s16"}


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
def test_pool_s16(op):
    """Padding SAME/VALID, strides, windows up to 181x181 (the int16 sum limit 2^15), fused
    activations, saturating inputs."""
    rng = np.random.default_rng({"AVERAGE_POOL_2D": 8, "MAX_POOL_2D": 9}[op])
    geometries = [((1, 8, 8, 3), 2, 2, "VALID"), ((2, 7, 9, 5), 3, 2, "SAME"),
                  ((1, 5, 5, 40), 5, 1, "SAME"), ((1, 6, 4, 2), 1, 1, "VALID"),
                  ((1, 181, 181, 1), 181, 1, "VALID"), ((1, 9, 9, 33), 4, 3, "SAME")]
    cases = []
    for i, (shape, f, stride, padding) in enumerate(geometries * 2):
        n, h, w, c = shape
        if padding == "SAME":
            oh, ow = -(-h // stride), -(-w // stride)
        else:
            oh, ow = (h - f) // stride + 1, (w - f) // stride + 1
        scale = _scale(rng, 1e-4, 1e-2)
        options = {"filter_height": f, "filter_width": f, "stride_h": stride, "stride_w": stride,
                   "padding": padding, "fused_activation_function": ACTIVATIONS[i % 4]}
        cases.append(Case(op, [s16(shape, scale)], s16((n, oh, ow, c), scale), options))
    inputs = []
    for i, c in enumerate(cases):
        x = _rand(c.inputs[0], rng)
        if i % 3 == 0:                 # every input at one extreme: the sum's limit
            x[...] = -32768 if i % 2 else 32767
        inputs.append([x])
    art = run_cases(cases, rng, inputs)
    kernel = "kiln_avgpool_s16" if op == "AVERAGE_POOL_2D" else "kiln_maxpool_s16"
    assert {o["kernel"] for o in art.report["ops"]} == {kernel}


@pytest.mark.parametrize("op", ["RELU", "RELU6", "LEAKY_RELU"])
def test_relus_s16_all_inputs(op):
    """Every int16 input; output scales above and below the input's (multipliers on both
    sides of one), alphas of both signs and above one."""
    rng = np.random.default_rng({"RELU": 10, "RELU6": 11, "LEAKY_RELU": 12}[op])
    cases = []
    for i in range(8):
        si = _scale(rng, 1e-5, 1e-2)
        so = float(np.float32(si * [1.0, 0.3, 2.5, 0.01, 40.0, 1.0, 0.7, 3.0][i]))
        options = {}
        if op == "LEAKY_RELU":
            options["alpha"] = [0.1, 0.2, -0.5, 1.5, 0.0, 0.01, 0.99, 0.3][i]
        cases.append(Case(op, [s16((256, 256), si)], s16((256, 256), so), options))
    inputs = [[rng.permutation(ALL_INT16).reshape(256, 256)] for _ in cases]
    art = run_cases(cases, rng, inputs)
    assert {o["kernel"] for o in art.report["ops"]} == {"kiln_leaky_relu_s16"}


@pytest.mark.parametrize("op", ["MEAN", "SUM"])
def test_mean_sum_s16(op):
    """Axes of every kind, keep_dims or not, zero points, scale ratios below and above one,
    counts up to the int16 limit 2^15."""
    from tflite_builder import const
    rng = np.random.default_rng({"MEAN": 13, "SUM": 14}[op])
    layouts = [((2, 5, 7, 3), [1, 2]), ((4, 9), [1]), ((4, 9), [0]), ((3, 4, 5), [0, 2]),
               ((2, 3, 4, 5), [-1]), ((1, 128, 256), [1, 2]), ((6,), [0])]
    tensors, ops, inputs, labels = [], [], [], []
    for i, (shape, axes) in enumerate(layouts * 2):
        keep = bool(i % 2)
        out_shape = tuple(1 if d in [a % len(shape) for a in axes] else e
                          for d, e in enumerate(shape)) if keep else \
            tuple(e for d, e in enumerate(shape) if d not in [a % len(shape) for a in axes])
        si = _scale(rng, 1e-4, 1e-2)
        so = float(np.float32(si * [1.0, 0.5, 3.0, 40.0, 0.02][i % 5]))
        zi, zo = (0, 0) if i % 3 else (int(rng.integers(-300, 300)), int(rng.integers(-300, 300)))
        base = len(tensors)
        tensors += [TensorSpec(shape, "int16", scale=si, zero_point=zi), const(axes),
                    TensorSpec(out_shape, "int16", scale=so, zero_point=zo)]
        ops.append(OpSpec(op, [base, base + 1], [base + 2], {"keep_dims": keep}))
        inputs.append(_rand(tensors[base], rng))
        labels.append(f"{op} {list(shape)} axes {axes} keep {keep} s {si:.4g}->{so:.4g}")
    model = build_model(ops, tensors, [3 * i for i in range(len(ops))],
                        [3 * i + 2 for i in range(len(ops))])
    want = run_reference(model, inputs)
    art = kc.compile(kc.load(model))
    for g, w, label in zip(art.run(*inputs), want, labels):
        assert_equal_exact(g, w, label)
    assert {o["kernel"] for o in art.report["ops"]} == {"kiln_reduce_sum_requant_s16"}


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"])
def test_binary_s16_more(op):
    rng = np.random.default_rng({"MAXIMUM": 15, "MINIMUM": 16, "SQUARED_DIFFERENCE": 17}[op])
    cases = []
    for i in range(16):
        sa, sb = BROADCAST[i % len(BROADCAST)]
        s1, s2 = _scale(rng), _scale(rng)
        if op == "SQUARED_DIFFERENCE":     # output multipliers below and above one
            so = float(np.float32(max(s1, s2) ** 2 * 32768 * rng.uniform(0.01, 3.0)))
        else:
            s2 = so = s1                   # TFLM compares raw values
        cases.append(Case(op, [s16(sa, s1), s16(sb, s2)], s16(_out_shape(sa, sb), so)))
    art = run_cases(cases, rng)
    assert {o["kernel"] for o in art.report["ops"]} == {f"kiln_{op.lower()}_s16"}


def test_abs_s16_all_inputs():
    rng = np.random.default_rng(18)
    scales = [(1e-3, 1e-3), (1e-3, 2e-3), (5e-4, 1e-4), (2e-4, 7e-4)]
    cases = [Case("ABS", [s16((256, 256), si)], s16((256, 256), so)) for si, so in scales]
    inputs = [[rng.permutation(ALL_INT16).reshape(256, 256)] for _ in cases]
    art = run_cases(cases, rng, inputs)
    assert {o["kernel"] for o in art.report["ops"]} == {"kiln_leaky_relu_s16"}


# --- a multi-op 16x8 model: sanitizers on the host, QEMU --------------------------------

def multi_op_model() -> bytes:
    """int16 ops chained as a 16x8 model would chain them, ending in int8 through QUANTIZE
    and LOG_SOFTMAX. Inputs: x [1, 8, 8, 4] and a per-channel y [4] (int16, 2^-12)."""
    q12, q15 = 2.0 ** -12, 2.0 ** -15
    t = [s16((1, 8, 8, 4), q12), s16((4,), q12),                    # 0 x, 1 y
         s16((1, 8, 8, 4), 2.0 ** -11),                              # 2 x + y (broadcast)
         s16((1, 8, 8, 4), 0.0003),                                  # 3 (x + y) * x
         s16((1, 4, 4, 4), 0.0003),                                  # 4 average pool 2x2
         s16((1, 4, 4, 4), 0.0003),                                  # 5 max pool 3x3 SAME
         s16((1, 4, 4, 4), q15),                                     # 6 logistic
         s16((1, 4, 4, 4), q15),                                     # 7 tanh
         s16((1, 4, 4, 4), 0.0001),                                  # 8 squared difference
         s16((1, 4, 4, 4), 0.0001),                                  # 9 leaky relu
         s16((1, 4, 4, 4), 1 / 32768),                               # 10 softmax
         s16((1, 4), 0.0002),                                        # 11 mean over h, w
         TensorSpec((1, 4, 4, 4), "int8", scale=0.05, zero_point=-3),   # 12 quantize
         TensorSpec((1, 4, 4, 4), "int8", scale=16 / 256, zero_point=127),  # 13 log softmax
         TensorSpec((2,), "int32", data=np.array([1, 2], dtype=np.int32))]  # 14 axes
    ops = [OpSpec("ADD", [0, 1], [2], {"fused_activation_function": "RELU6"}),
           OpSpec("MUL", [2, 0], [3]),
           OpSpec("AVERAGE_POOL_2D", [3], [4], {"filter_height": 2, "filter_width": 2,
                                                "stride_h": 2, "stride_w": 2}),
           OpSpec("MAX_POOL_2D", [4], [5], {"filter_height": 3, "filter_width": 3,
                                            "padding": "SAME"}),
           OpSpec("LOGISTIC", [5], [6]),
           OpSpec("TANH", [5], [7]),
           OpSpec("SQUARED_DIFFERENCE", [6, 7], [8]),
           OpSpec("LEAKY_RELU", [8], [9], {"alpha": 0.2}),
           OpSpec("SOFTMAX", [9], [10], {"beta": 1.0}),
           OpSpec("MEAN", [10, 14], [11], {"keep_dims": False}),
           OpSpec("QUANTIZE", [5], [12]),
           OpSpec("LOG_SOFTMAX", [12], [13])]
    return build_model(ops, t, [0, 1], [10, 11, 13])


def multi_op_inputs(rng: np.random.Generator, n: int = 1) -> list[np.ndarray]:
    return [rng.integers(-32768, 32768, size=(n, 1, 8, 8, 4)).astype(np.int16),
            rng.integers(-32768, 32768, size=(n, 4)).astype(np.int16)]


def test_multi_op_model_matches_tflm():
    model = multi_op_model()
    rng = np.random.default_rng(30)
    art = kc.compile(kc.load(model))
    for _ in range(3):
        xs = [x[0] for x in multi_op_inputs(rng)]
        for k, (g, w) in enumerate(zip(art.run(*xs), run_reference(model, xs))):
            assert_equal_exact(g, w, f"output {k}")


def _sanitizer_main(art) -> str:
    """main(): input i from argv[1 + i], output j to argv[1 + n_in + j] (int64_t buffers:
    any element type aligned)."""
    n_in, n_out = len(art.report["inputs"]), len(art.report["outputs"])
    lines = ["#include <stdio.h>", '#include "model.h"',
             "static uint8_t arena[KILN_ARENA_BYTES] __attribute__((aligned(16)));"]
    lines += [f"static int64_t in{i}[(KILN_INPUT_{i}_BYTES + 7) / 8];" for i in range(n_in)]
    lines += [f"static int64_t out{j}[(KILN_OUTPUT_{j}_BYTES + 7) / 8];" for j in range(n_out)]
    lines += ["static int io(const char *path, void *buf, size_t n, int write)", "{",
              '    FILE *f = fopen(path, write ? "wb" : "rb");',
              "    if (f == NULL) return 1;",
              "    size_t done = write ? fwrite(buf, 1, n, f) : fread(buf, 1, n, f);",
              "    fclose(f);", "    return done != n;", "}",
              "int main(int argc, char **argv)", "{",
              f"    if (argc != {1 + n_in + n_out}) return 2;"]
    lines += [f"    if (io(argv[{1 + i}], in{i}, KILN_INPUT_{i}_BYTES, 0)) return 3;"
              for i in range(n_in)]
    lines += ["    const void *inputs[] = {" + ", ".join(f"in{i}" for i in range(n_in)) + "};",
              "    void *outputs[] = {" + ", ".join(f"out{j}" for j in range(n_out)) + "};",
              "    if (kiln_run(inputs, outputs, arena) != 0) return 4;"]
    lines += [f"    if (io(argv[{1 + n_in + j}], out{j}, KILN_OUTPUT_{j}_BYTES, 1)) return 5;"
              for j in range(n_out)]
    return "\n".join(lines + ["    return 0;", "}", ""])


@pytest.mark.slow
def test_int16_kernels_clean_under_asan_and_ubsan(tmp_path):
    """The multi-op model (every int16 kernel family here, extreme inputs) and the
    all-inputs LOGISTIC/TANH/RELU cases, built with -fsanitize=address,undefined: no
    report, outputs equal to the optimised build (which matches TFLM)."""
    import subprocess

    from conftest import require_tool
    from kiln.compiler.host_build import build_executable
    require_tool("cc")
    rng = np.random.default_rng(31)
    model = multi_op_model()
    art = kc.compile(kc.load(model), board="host")
    sources = {k: v for k, v in art.files.items() if k != "kiln.json"}
    exe = build_executable(sources, _sanitizer_main(art), tmp_path / "build", sanitize=True)
    for trial in range(3):
        xs = [x[0] for x in multi_op_inputs(rng)]
        if trial == 1:
            xs = [np.full_like(x, -32768) for x in xs]
        if trial == 2:
            xs = [np.full_like(x, 32767) for x in xs]
        args = [str(exe)]
        for i, x in enumerate(xs):
            (tmp_path / f"in{i}.bin").write_bytes(x.tobytes())
            args.append(str(tmp_path / f"in{i}.bin"))
        args += [str(tmp_path / f"out{j}.bin") for j in range(3)]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "runtime error" not in proc.stderr, proc.stderr[-3000:]
        for j, want in enumerate(art.run(*xs)):
            got = np.frombuffer((tmp_path / f"out{j}.bin").read_bytes(), dtype=want.dtype)
            assert_equal_exact(got, want.reshape(-1), f"output {j} under sanitizers")


@pytest.mark.slow
@pytest.mark.cross
@pytest.mark.qemu
def test_multi_op_model_on_qemu_mps2_an386(tmp_path):
    """The multi-op 16x8 model as standalone firmware on QEMU mps2-an386 (Cortex-M4):
    every output of several samples equal to tflite-micro's."""
    from conftest import require_tool
    from kiln.project_gen import create_project
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    model = multi_op_model()
    xs = multi_op_inputs(np.random.default_rng(32), 3)
    art = kc.compile(kc.load(model), board="mps2-an386")
    p = create_project(art, board="mps2-an386", out_dir=tmp_path / "p", inputs=xs)
    r = p.run()
    for k in range(3):
        want = run_reference(model, [x[k] for x in xs])
        for j, w in enumerate(want):
            assert_equal_exact(np.asarray(r.outputs[j])[k].reshape(w.shape), w,
                               f"sample {k} output {j}")


def test_quantized_16x8_float_model_matches_tflm():
    """A float model of these ops through kiln quantize --activations int16: every op
    lowers to its int16 kernel and tflite-micro runs the exported model identically."""
    from kiln.compiler.frontend.tflite_writer import write

    rng = np.random.default_rng(33)
    f = lambda shape: TensorSpec(shape, "float32")          # noqa: E731
    bias = TensorSpec((4,), "float32", data=rng.normal(0, 1, 4).astype(np.float32))
    tensors = [f((1, 8, 8, 4)), f((1, 8, 8, 4)), f((1, 8, 8, 4)), f((1, 4, 4, 4)),
               f((1, 4, 4, 4)), f((1, 4, 4, 4)), f((1, 4, 4, 4)), f((1, 4, 4, 4)), bias]
    ops = [OpSpec("ADD", [0, 8], [1]), OpSpec("MUL", [1, 0], [2]),
           OpSpec("AVERAGE_POOL_2D", [2], [3], {"filter_height": 2, "filter_width": 2,
                                                "stride_h": 2, "stride_w": 2}),
           OpSpec("LOGISTIC", [3], [4]), OpSpec("TANH", [3], [5]), OpSpec("SUB", [4, 5], [6]),
           OpSpec("SOFTMAX", [6], [7], {"beta": 1.0})]
    graph = kc.load(build_model(ops, tensors, [0], [7]))
    q = kc.quantize(graph, rng.normal(0, 1, (8, 1, 8, 8, 4)).astype(np.float32),
                    activations="int16")
    exported = write(q)
    art = kc.compile(kc.load(exported))
    assert [o["kernel"] for o in art.report["ops"]] == [
        "kiln_add_s16", "kiln_mul_s16", "kiln_avgpool_s16", "kiln_logistic_s16",
        "kiln_tanh_s16", "kiln_sub_s16", "kiln_softmax_s16"]
    scale, zero_point = q.tensor(q.inputs[0]).quant.single()
    for i in range(4):
        x = rng.normal(0, 1, (1, 8, 8, 4)) / scale + zero_point
        x = np.clip(np.round(x), -32768, 32767).astype(np.int16)
        assert_equal_exact(art.run(x)[0], run_reference(exported, [x])[0], f"sample {i}")
