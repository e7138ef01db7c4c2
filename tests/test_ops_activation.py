"""int8 activations against tflite-micro, exactly: the lookup-table ops over all 256
inputs (LOGISTIC, TANH, RELU, RELU6, LEAKY_RELU, HARD_SWISH), and SOFTMAX.

Many independent cases share one model (one host build, one TFLM run); each output is
compared exactly and labelled with its case.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import kiln.compiler as kc
from kiln.compiler.codegen.ops import activation as act
from kiln.compiler.codegen.ops import fixedpoint as fp
from kiln.compiler.numerics import quantize_multiplier, requantize, rounding_divide_by_pot
from reference import assert_equal_exact, run_reference
from tflite_builder import OpSpec, TensorSpec, build_model, rand_int8, single_op_model

ALL_INT8 = np.arange(-128, 128, dtype=np.int8)


def run_unary_cases(cases: list[tuple[str, TensorSpec, TensorSpec, dict]],
                    inputs: list[np.ndarray]) -> kc.Artifact:
    tensors, ops = [], []
    for op, x, y, options in cases:
        tensors += [x, y]
        ops.append(OpSpec(op, [len(tensors) - 2], [len(tensors) - 1], dict(options)))
    n = len(cases)
    model = build_model(ops, tensors, [2 * i for i in range(n)], [2 * i + 1 for i in range(n)])
    want = run_reference(model, inputs)
    art = kc.compile(kc.load(model))
    got = art.run(*inputs)
    for (op, x, y, options), g, w in zip(cases, got, want):
        label = (f"{op} in s={x.scale:.6g} zp={x.zero_point} out s={y.scale:.6g} "
                 f"zp={y.zero_point} {options}")
        assert_equal_exact(g, w, label)
    return art


def _scale(rng: np.random.Generator, lo: float = 1e-3, hi: float = 1.0) -> float:
    return float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


def _zp(rng: np.random.Generator, i: int) -> int:
    return [-128, 127][i % 2] if i % 5 == 4 else int(rng.integers(-128, 128))


def _shuffled_all_int8(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    reps = int(np.prod(shape)) // 256
    return rng.permutation(np.tile(ALL_INT8, reps)).reshape(shape)


SHAPES = [(1, 16, 16), (2, 128), (1, 4, 8, 8), (256,), (1, 2, 2, 8, 8)]


def _unary_cases(op: str, rng: np.random.Generator, n: int):
    cases = []
    for i in range(n):
        shape = SHAPES[i % len(SHAPES)]
        si, zi = _scale(rng, 1e-3, 2.0), _zp(rng, i)
        so, zo = _scale(rng, 1e-3, 2.0), _zp(rng, i + 1)
        options = {}
        if op == "LOGISTIC":
            so, zo = (1 / 256, -128) if i % 3 else (so, -128)   # TFLM reads only the zp
        elif op == "TANH":
            so, zo = (1 / 128, 0) if i % 3 else (so, zo)         # TFLM reads neither
        elif op == "LEAKY_RELU":
            options["alpha"] = float(np.float32([0.1, 0.2, 0.01, 0.3, 0.0, -0.5, 1.5, 0.99][i % 8]))
        elif op == "HARD_SWISH":
            so = max(so, float(np.float32(si / 100)))            # output exponent <= 0
        elif op == "RELU" and i % 4 == 0:
            so = float(np.float32(si * rng.uniform(0.05, 0.9)))  # multiplier above one
        cases.append((op, TensorSpec(shape, scale=si, zero_point=zi),
                      TensorSpec(shape, scale=so, zero_point=zo), options))
    return cases


@pytest.mark.parametrize("op,seed", [("LOGISTIC", 1), ("TANH", 2), ("RELU", 3), ("RELU6", 4),
                                     ("LEAKY_RELU", 5), ("HARD_SWISH", 6)])
def test_table_ops_all_inputs_match_tflm(op, seed):
    rng = np.random.default_rng(seed)
    cases = _unary_cases(op, rng, 40)
    inputs = [_shuffled_all_int8(rng, c[1].shape) for c in cases]
    art = run_unary_cases(cases, inputs)
    assert {o["kernel"] for o in art.report["ops"]} == {"kiln_lut_s8"}


def _leaky_float32(si, zi, so, zo, alpha):
    """LEAKY_RELU with the multipliers divided in float32 (newer TFLM sources)."""
    fin, fout, fa = np.float32(si), np.float32(so), np.float32(alpha)
    am, ash = quantize_multiplier(float(fin * fa / fout))
    im, ish = quantize_multiplier(float(fin / fout))
    x = ALL_INT8.astype(np.int64) - zi
    neg = requantize(x, abs(am), ash)
    neg = -neg if am < 0 else neg
    return np.clip(zo + np.where(x >= 0, requantize(x, im, ish), neg), -128, 127).astype(np.int8)


def _hard_swish_float32(si, zi, so, zo, monkeypatch):
    def params(input_scale, output_scale):
        hires = np.float32(1.0 / 128.0) * np.float32(input_scale)
        om, oe = quantize_multiplier(float(hires / np.float32(output_scale)))
        rm, re_ = quantize_multiplier(float(hires / np.float32(3.0 / 32768.0)))
        return act._downscale_to_int16(om), oe, act._downscale_to_int16(rm), re_
    with monkeypatch.context() as m:
        m.setattr(act, "hard_swish_params", params)
        return act.hard_swish_table(si, zi, so, zo)


def test_multiplier_derivation_double_not_float32(monkeypatch):
    """LEAKY_RELU and HARD_SWISH on scales where float32 and double multipliers give
    different tables: TFLM (and kiln) use double."""
    # Found by searching random scales (about 1 in 10^4 combinations differs).
    cases = []
    for si, zi, so, zo, alpha in (
            (0.03629181906580925, -37, 0.006605250295251608, 51, 0.42799341678619385),
            (0.02300015091896057, 39, 0.0031079440377652645, 16, 0.2047695517539978),
            (0.0934232696890831, 37, 0.009092086926102638, 121, 0.6677331924438477),
            (0.034837882965803146, -78, 0.7789692282676697, 95, 0.6354125738143921)):
        assert not np.array_equal(act.leaky_relu_table(si, zi, so, zo, alpha),
                                  _leaky_float32(si, zi, so, zo, alpha))
        cases.append(("LEAKY_RELU", TensorSpec((256,), scale=si, zero_point=zi),
                      TensorSpec((256,), scale=so, zero_point=zo), {"alpha": alpha}))
    for si, zi, so, zo in ((0.2099941521883011, -65, 0.24669146537780762, 31),
                           (0.05981787294149399, -3, 0.368450790643692, 95),
                           (0.015699729323387146, -21, 0.03305535390973091, -3)):
        assert not np.array_equal(act.hard_swish_table(si, zi, so, zo),
                                  _hard_swish_float32(si, zi, so, zo, monkeypatch))
        cases.append(("HARD_SWISH", TensorSpec((256,), scale=si, zero_point=zi),
                      TensorSpec((256,), scale=so, zero_point=zo), {}))
    assert len(cases) == 7
    run_unary_cases(cases, [ALL_INT8.copy() for _ in cases])


def test_table_edge_parameters():
    """Tiny and huge input scales (LOGISTIC/TANH saturate or stay linear), RELU6 whose
    six lands outside int8, LEAKY_RELU alpha 0 and 1."""
    cases = []
    for si in (1e-5, 3e-3, 0.0625, 0.5, 4.0, 40.0):
        for zi in (-128, 0, 127):
            x = TensorSpec((256,), scale=si, zero_point=zi)
            cases.append(("LOGISTIC", x, TensorSpec((256,), scale=1 / 256, zero_point=-128), {}))
            cases.append(("TANH", x, TensorSpec((256,), scale=1 / 128, zero_point=0), {}))
            cases.append(("RELU6", x, TensorSpec((256,), scale=si, zero_point=zi), {}))
            cases.append(("LEAKY_RELU", x, TensorSpec((256,), scale=si, zero_point=zi),
                          {"alpha": 1.0 if zi else 0.0}))
    run_unary_cases(cases, [ALL_INT8.copy() for _ in cases])


# --- SOFTMAX --------------------------------------------------------------------------

def softmax_numpy(x: np.ndarray, input_scale: float, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """TFLM's int8 softmax in numpy, from the same exp table. Returns (output, row sums
    in Q12.19); TFLM stops (TFLITE_CHECK) on rows whose sum reaches 2^28."""
    table = act.softmax_exp_table(beta, input_scale).astype(np.int64)
    rows = x.reshape(-1, x.shape[-1]).astype(np.int64)
    e = table[rows.max(axis=1, keepdims=True) - rows]
    sums = rounding_divide_by_pot(e, 12).sum(axis=1)
    headroom = np.array([32 - int(s).bit_length() for s in sums])
    fraction = ((sums << headroom) & 0xFFFFFFFF) - (1 << 31)
    scale = fp.one_over_one_plus_x_for_x_in_0_1(fraction)
    exponent = (12 - headroom + 31 - 8)[:, None]
    out = np.zeros_like(e)
    ok = (exponent <= 31)[:, 0]
    prob = rounding_divide_by_pot(fp.mul(scale[ok, None], e[ok]), exponent[ok])
    out[ok] = prob
    return np.clip(out - 128, -128, 127).astype(np.int8).reshape(x.shape), sums


SOFTMAX_SHAPES = [(1, 10), (1, 12), (1, 2), (2, 5, 7), (1, 3, 3, 40), (4, 255), (1, 1000), (3, 1)]


def _softmax_input(rng, shape, kind):
    if kind == 0:
        return rand_int8(shape, rng)
    if kind == 1:                                          # near ties
        return rng.integers(-128, -120, size=shape).astype(np.int8)
    if kind == 2:                                          # saturated: one low, rest at max
        x = np.full(shape, 127, np.int8)
        x[..., 0] = -128
        return x
    x = np.full(shape, -128, np.int8)                      # one dominant value
    x[..., -1] = 127
    return x


def test_softmax_matches_tflm():
    rng = np.random.default_rng(31)
    cases, inputs = [], []
    attempt = 0
    while len(cases) < 60:
        i, attempt = attempt, attempt + 1
        shape = SOFTMAX_SHAPES[i % len(SOFTMAX_SHAPES)]
        si, zi = _scale(rng, 2e-3, 4.0), _zp(rng, i)
        beta = float(np.float32([1.0, 0.5, 2.0, 0.1, 10.0, 1.7][i % 6]))
        x = _softmax_input(rng, shape, i % 4)
        out, sums = softmax_numpy(x, si, beta)
        if sums.max() >= (1 << 28):
            continue        # TFLM would abort the process; covered by the next test
        cases.append(("SOFTMAX", TensorSpec(shape, scale=si, zero_point=zi),
                      TensorSpec(shape, scale=1 / 256, zero_point=-128), {"beta": beta}))
        inputs.append(x)
    art = run_unary_cases(cases, inputs)
    # The numpy twin agrees with kiln's C (and so with TFLM) on every case.
    got = art.run(*inputs)
    for (_, xs, _, options), x, g in zip(cases, inputs, got):
        assert np.array_equal(softmax_numpy(x, xs.scale, options["beta"])[0], g)


def test_softmax_rows_too_flat_for_tflm_give_zero_probability():
    """>= 512 equal values: TFLM stops on a TFLITE_CHECK; kiln outputs -128 (every
    probability is below 1/512) and the numpy twin agrees."""
    shape = (2, 600)
    x = np.zeros(shape, np.int8)
    x[1, :100] = 50
    model = single_op_model("SOFTMAX", [TensorSpec(shape, scale=0.05, zero_point=0)],
                            [TensorSpec(shape, scale=1 / 256, zero_point=-128)], {"beta": 1.0})
    got = kc.compile(kc.load(model)).run(x)[0]
    want, sums = softmax_numpy(x, 0.05, 1.0)
    assert sums[0] >= (1 << 28) and np.all(got[0] == -128)
    assert_equal_exact(got, want, "flat rows")


def test_short_softmax_computes_exp_for_every_difference():
    """A softmax of at most SOFTMAX_COMPUTED_VALUES values computes exp() in C with
    gemmlowp's fixed point instead of reading a table: every difference max - x in
    0..255 at scales from below 1/256 to saturating, bit-exact with tflite-micro (int8 and
    int16 outputs)."""
    assert act.SOFTMAX_COMPUTED_VALUES >= 64
    diffs = np.arange(256)
    cases, inputs = [], []
    for scale in (0.0039, 0.02, 0.17185351252555847, 0.9, 6.0):
        for start in range(0, 256, 60):
            x = np.full((4, 16), 127, np.int64)
            part = diffs[start:start + 60]
            x.reshape(-1)[[i for i in range(64) if i % 16][:len(part)]] = 127 - part
            for out in (TensorSpec((4, 16), scale=1 / 256, zero_point=-128),
                        TensorSpec((4, 16), "int16", scale=1 / 65536, zero_point=-32768)):
                cases.append(("SOFTMAX", TensorSpec((4, 16), scale=scale, zero_point=0), out,
                              {"beta": 1.0}))
                inputs.append(x.astype(np.int8))
    art = run_unary_cases(cases, inputs)      # int16 outputs: 256x finer than int8's
    assert "exp_table" not in art.files["weights.c"]
    assert art.files["model.c"].count("    NULL, 0, ") == len(cases)


def test_softmax_exp_table():
    for beta, scale in ((1.0, 0.17185351252555847), (1.0, 0.0039), (2.0, 0.5), (0.1, 1e-3)):
        table = act.softmax_exp_table(beta, scale)
        assert table.dtype == np.int32 and table[0] == (1 << 31) - 1
        assert np.all(np.diff(table.astype(np.int64)) <= 0)
        _, _, diff_min = act.softmax_params(beta, scale)
        d = np.arange(256)
        inside = -d >= diff_min
        assert np.all(table[~inside] == 0)
        approx = np.exp(-d[inside] * beta * scale)
        assert np.allclose(table[inside] / 2.0**31, approx, atol=2e-6)


def test_fixedpoint_functions_approximate_the_real_ones():
    x = np.linspace(-7.9, 7.9, 997)
    q4 = np.round(x * (1 << 27)).astype(np.int64)
    assert np.allclose(fp.logistic(q4, 4) / 2.0**31, 1 / (1 + np.exp(-x)), atol=1e-6)
    assert np.allclose(fp.tanh(q4, 4) / 2.0**31, np.tanh(x), atol=1e-6)
    neg = -np.abs(q4)
    assert np.allclose(fp.exp_on_negative_values(neg, 4) / 2.0**31, np.exp(-np.abs(x)),
                       atol=1e-6)
    a = np.linspace(0, 1 - 2**-20, 101)
    q0 = np.round(a * 2.0**31).astype(np.int64)
    assert np.allclose(fp.one_over_one_plus_x_for_x_in_0_1(q0) / 2.0**31, 1 / (1 + a), atol=1e-8)
    assert math.isclose(act.input_radius(4, 24), 120)


# --- rejections -----------------------------------------------------------------------

def _unary(op, x, y, **options):
    return kc.load(single_op_model(op, [x], [y], options))


def test_rejections_name_the_reason():
    x = TensorSpec((1, 10), scale=0.1, zero_point=0)
    with pytest.raises(kc.ModelError, match="scale 1/256 and zero point -128"):
        kc.compile(_unary("SOFTMAX", x, TensorSpec((1, 10), scale=1 / 255, zero_point=-128),
                          beta=1.0))
    with pytest.raises(kc.ModelError, match="zero point -128"):
        kc.compile(_unary("LOGISTIC", x, TensorSpec((1, 10), scale=1 / 256, zero_point=0)))
    with pytest.raises(kc.ModelError, match="TFLM rejects it too"):
        kc.compile(_unary("HARD_SWISH", x, TensorSpec((1, 10), scale=1e-4, zero_point=0)))
    with pytest.raises(kc.ModelError, match="output scale 2\\^-15"):   # int16: TFLM's rule
        kc.compile(_unary("TANH", TensorSpec((1, 10), "int16", scale=1 / 4096, zero_point=0),
                          TensorSpec((1, 10), "int16", scale=1 / 16384, zero_point=0)))
    for alpha in (float("nan"), float("inf")):         # a traceback from the multiplier once
        with pytest.raises(kc.ModelError, match=f"alpha {alpha} is not a finite number"):
            kc.compile(_unary("LEAKY_RELU", x, TensorSpec((1, 10), scale=0.1, zero_point=0),
                              alpha=alpha))
