"""int16 activations (16x8 models: symmetric int16, zero point 0) against tflite-micro,
exactly: ADD, SUB, MUL, QUANTIZE, DEQUANTIZE, LOGISTIC, TANH, SOFTMAX, pooling, RELUs.

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
