"""Tests of the test harness: the model builder, the reference interpreters, and the
numpy requantization (compiler/numerics.py) against TFLM on real convolutions."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pytest
import tflite

from kiln.compiler.numerics import activation_range, quantize_multiplier, requantize
from reference import (TFLITE_REF, TFLM, assert_equal_exact, reference_for, run_reference,
                       run_tflite_ref)
from tflite_builder import (OpSpec, TensorSpec, bias_spec, build_model, const,
                            default_version, rand_int, rand_int8, single_op_model, weight_spec)

# --------------------------------------------------------------------------- numpy conv


def same_padding(in_size: int, k: int, stride: int, dilation: int) -> tuple[int, int]:
    """TFLite's ComputePaddingHeightWidth for SAME: (before, out_size)."""
    out = (in_size + stride - 1) // stride
    eff_k = (k - 1) * dilation + 1
    total = max(0, (out - 1) * stride + eff_k - in_size)
    return total // 2, out


def conv2d_s8_numpy(x: np.ndarray, x_zp: int, w: np.ndarray, bias: np.ndarray,
                    mult: np.ndarray, shift: np.ndarray, out_zp: int,
                    act: tuple[int, int], stride: tuple[int, int],
                    dilation: tuple[int, int], padding: str) -> np.ndarray:
    """int8 CONV_2D, NHWC x OHWI, accumulated in int64, TFLite requantization."""
    n, h, wd, c = x.shape
    oc, kh, kw, _ = w.shape
    if padding == "SAME":
        pad_h, oh = same_padding(h, kh, stride[0], dilation[0])
        pad_w, ow = same_padding(wd, kw, stride[1], dilation[1])
    else:
        pad_h = pad_w = 0
        oh = (h - (kh - 1) * dilation[0] - 1) // stride[0] + 1
        ow = (wd - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    xs = x.astype(np.int64) - x_zp
    # Zero padding in the offset domain is the input zero point in the int8 domain.
    xp = np.zeros((n, h + 2 * (kh * dilation[0]), wd + 2 * (kw * dilation[1]), c), np.int64)
    oy, ox = kh * dilation[0], kw * dilation[1]
    xp[:, oy:oy + h, ox:ox + wd, :] = xs
    acc = np.zeros((n, oh, ow, oc), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            ys = oy - pad_h + ky * dilation[0] + stride[0] * np.arange(oh)
            xs_ = ox - pad_w + kx * dilation[1] + stride[1] * np.arange(ow)
            patch = xp[:, ys][:, :, xs_]                    # n, oh, ow, c
            acc += patch @ w[:, ky, kx, :].astype(np.int64).T
    acc += bias.astype(np.int64)
    out = requantize(acc, mult, shift) + out_zp
    return np.clip(out, act[0], act[1]).astype(np.int8)


def conv_multipliers(in_scale: float, w_scales: list[float], out_scale: float):
    """TFLM's PopulateConvolutionQuantizationParams: float32 scales widened to double."""
    pairs = [quantize_multiplier(float(np.float32(in_scale)) * float(np.float32(ws))
                                 / float(np.float32(out_scale))) for ws in w_scales]
    return (np.array([m for m, _ in pairs], np.int64), np.array([s for _, s in pairs], np.int64))


@dataclass
class ConvCase:
    name: str
    in_shape: tuple[int, int, int, int]
    out_c: int
    k: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    padding: str = "SAME"
    act: str = "NONE"
    in_scale: float = 0.02
    in_zp: int = -3
    out_scale: float = 0.05
    out_zp: int = 2
    per_channel: bool = True
    bias_mag: int = 2000
    x_range: tuple[int, int] = (-128, 127)
    w_range: tuple[int, int] = (-127, 127)
    w_scale: float | None = None  # None: random per-channel/per-tensor scales
    min_unique: int = 8           # guard against a case that degenerates to constants


CONV_CASES = [
    ConvCase("3x3_same_relu6", (1, 8, 8, 3), 4, (3, 3), act="RELU6"),
    ConvCase("3x3_s2_valid", (1, 9, 9, 5), 6, (3, 3), stride=(2, 2), padding="VALID"),
    ConvCase("dilated", (1, 10, 10, 4), 3, (3, 3), dilation=(2, 2), act="RELU"),
    ConvCase("1x1_per_tensor", (2, 5, 5, 16), 8, (1, 1), per_channel=False),
    ConvCase("s2_same_odd", (1, 7, 6, 3), 5, (3, 2), stride=(2, 2), in_zp=-128),
    # Effective scale 1..10: positive shift, the left-shift path of requantize.
    ConvCase("big_multiplier", (1, 8, 8, 2), 6, (1, 1), out_scale=4e-5, in_zp=0,
             bias_mag=5, x_range=(-3, 3), w_range=(-2, 2)),
    # Effective scale ~ 2^-20: large right shifts on accumulators ~1e8.
    ConvCase("tiny_multiplier", (1, 6, 6, 8), 32, (3, 3), in_scale=1e-3, out_scale=10.0,
             bias_mag=100_000_000),
    # Effective scale exactly 1/4 (x·1 / 4): every x ≡ 2 (mod 4) is a rounding tie, both
    # signs; TFLite rounds ties away from zero.
    ConvCase("power_of_two_ties", (1, 16, 16, 1), 1, (1, 1), in_scale=0.5, in_zp=0,
             out_scale=1.0, out_zp=0, per_channel=False, bias_mag=0, w_range=(1, 1),
             w_scale=0.5),
    # Wide accumulators, heavy saturation at both ends.
    ConvCase("saturating", (1, 6, 6, 32), 4, (3, 3), in_scale=0.5, out_scale=0.01, in_zp=0,
             min_unique=2),
]


def build_conv(case: ConvCase, rng: np.random.Generator):
    x = TensorSpec(case.in_shape, scale=case.in_scale, zero_point=case.in_zp, name="x")
    w = weight_spec((case.out_c, *case.k, case.in_shape[3]), rng,
                    per_channel_axis=0 if case.per_channel else None, scale=case.w_scale,
                    name="w")
    w.data = rng.integers(case.w_range[0], case.w_range[1] + 1, w.shape).astype(np.int8)
    b = bias_spec(case.out_c, rng, case.in_scale, w.scale, magnitude=case.bias_mag, name="b")
    n, h, wd, _ = case.in_shape
    if case.padding == "SAME":
        _, oh = same_padding(h, case.k[0], case.stride[0], case.dilation[0])
        _, ow = same_padding(wd, case.k[1], case.stride[1], case.dilation[1])
    else:
        oh = (h - (case.k[0] - 1) * case.dilation[0] - 1) // case.stride[0] + 1
        ow = (wd - (case.k[1] - 1) * case.dilation[1] - 1) // case.stride[1] + 1
    y = TensorSpec((n, oh, ow, case.out_c), scale=case.out_scale, zero_point=case.out_zp,
                   name="y")
    options = {"padding": case.padding, "stride_h": case.stride[0], "stride_w": case.stride[1],
               "dilation_h_factor": case.dilation[0], "dilation_w_factor": case.dilation[1],
               "fused_activation_function": case.act}
    return single_op_model("CONV_2D", [x, w, b], [y], options), x, w, b, y, options


# --------------------------------------------------------------------------- builder


def test_conv_round_trips_through_tflite_reader():
    rng = np.random.default_rng(1)
    case = CONV_CASES[0]
    model, x, w, b, y, options = build_conv(case, rng)
    m = tflite.Model.GetRootAs(model, 0)
    assert m.Version() == 3
    assert m.BuffersLength() == 3 and m.Buffers(0).DataLength() == 0
    sg = m.Subgraphs(0)
    assert list(sg.InputsAsNumpy()) == [0] and list(sg.OutputsAsNumpy()) == [3]
    for i, spec in enumerate([x, w, b, y]):
        t = sg.Tensors(i)
        assert tuple(t.ShapeAsNumpy()) == spec.shape
        assert t.Name().decode() == spec.name
        q = t.Quantization()
        np.testing.assert_array_equal(q.ScaleAsNumpy(), np.float32(spec.scales))
        np.testing.assert_array_equal(q.ZeroPointAsNumpy(), spec.zero_points)
        if spec.data is not None:
            buf = m.Buffers(t.Buffer()).DataAsNumpy().tobytes()
            assert buf == spec.data.tobytes()
        else:
            assert t.Buffer() == 0
    assert sg.Tensors(1).Type() == tflite.TensorType.INT8
    assert sg.Tensors(2).Type() == tflite.TensorType.INT32
    op = sg.Operators(0)
    code = m.OperatorCodes(op.OpcodeIndex())
    assert code.BuiltinCode() == tflite.BuiltinOperator.CONV_2D
    assert code.DeprecatedBuiltinCode() == tflite.BuiltinOperator.CONV_2D
    assert code.Version() == 3
    assert op.BuiltinOptionsType() == tflite.BuiltinOptions.Conv2DOptions
    opts = tflite.Conv2DOptions()
    opts.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    assert opts.Padding() == tflite.Padding.SAME
    assert (opts.StrideW(), opts.StrideH()) == (1, 1)
    assert (opts.DilationWFactor(), opts.DilationHFactor()) == (1, 1)
    assert opts.FusedActivationFunction() == tflite.ActivationFunctionType.RELU6


def test_builtin_codes_above_127_use_placeholder():
    x = TensorSpec((1, 4), scale=0.1, zero_point=0)
    model = single_op_model("BROADCAST_TO", [x, const([3, 4])], [TensorSpec((3, 4), scale=0.1)])
    code = tflite.Model.GetRootAs(model, 0).OperatorCodes(0)
    assert code.DeprecatedBuiltinCode() == 127
    assert code.BuiltinCode() == tflite.BuiltinOperator.BROADCAST_TO == 130
    assert code.Version() == 3


def test_unknown_option_and_enum_raise():
    x = TensorSpec((1, 4, 4, 1), scale=0.1)
    with pytest.raises(ValueError, match="no field 'strides'"):
        single_op_model("MAX_POOL_2D", [x], [x], {"filter_width": 2, "filter_height": 2,
                                                  "strides": 2})
    with pytest.raises(ValueError, match="not a Padding"):
        single_op_model("MAX_POOL_2D", [x], [x], {"filter_width": 2, "filter_height": 2,
                                                  "padding": "FULL"})
    with pytest.raises(ValueError, match="needs options"):
        single_op_model("MAX_POOL_2D", [x], [x])


def test_converter_op_versions_match_mlperf_models():
    """Versions the builder writes for int8 equal those in the converter-made models."""
    rng = np.random.default_rng(0)
    x4 = TensorSpec((1, 4, 4, 8), scale=0.1)
    wanted = {  # from /work/shared/models/mlperf_tiny/*_int8.tflite
        "CONV_2D": ([x4, weight_spec((8, 3, 3, 8), rng), bias_spec(8, rng, 0.1, 0.01)], 3),
        "DEPTHWISE_CONV_2D": ([x4, weight_spec((1, 3, 3, 8), rng, 3),
                               bias_spec(8, rng, 0.1, 0.01)], 3),
        "FULLY_CONNECTED": ([TensorSpec((1, 8), scale=0.1), weight_spec((4, 8), rng),
                             bias_spec(4, rng, 0.1, 0.01)], 4),
        "AVERAGE_POOL_2D": ([x4], 2),
        "ADD": ([x4, x4], 2),
        "SOFTMAX": ([TensorSpec((1, 8), scale=0.1)], 2),
        "RESHAPE": ([x4, const([1, 128])], 1),
    }
    for op, (ins, version) in wanted.items():
        assert default_version(op, ins, [x4], {}) == version, op


# --------------------------------------------------------------------------- numerics


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: c.name)
def test_conv_tflm_equals_numpy_requantize(case: ConvCase):
    """compiler/numerics.py (quantize_multiplier, requantize, activation_range) against
    TFLM's int8 CONV_2D, bit for bit."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    model, x, w, b, y, options = build_conv(case, rng)
    xi = rand_int8(case.in_shape, rng, *case.x_range)
    got = run_reference(model, [xi])[0]
    assert len(np.unique(got)) >= case.min_unique, f"degenerate case: {np.unique(got)}"
    mult, shift = conv_multipliers(case.in_scale, w.scales, case.out_scale)
    act = activation_range(case.act, case.out_scale, case.out_zp)
    want = conv2d_s8_numpy(xi, case.in_zp, w.data, b.data, mult, shift, case.out_zp, act,
                           case.stride, case.dilation, case.padding)
    assert_equal_exact(got, want, f"TFLM vs numpy conv {case.name}")
    # And the TFLite reference kernels agree with TFLM.
    assert_equal_exact(run_tflite_ref(model, [xi])[0], got, f"TFLite-ref vs TFLM {case.name}")


def test_conv_ties_round_away_from_zero():
    """The power-of-two case really holds ties, and TFLM rounds them away from zero."""
    case = next(c for c in CONV_CASES if c.name == "power_of_two_ties")
    model, *_ = build_conv(case, np.random.default_rng(0))
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16, 1)
    got = run_reference(model, [x])[0].astype(int).ravel()
    xs = x.astype(int).ravel()
    ties = xs % 4 == 2
    assert ties.sum() == 64
    assert_equal_exact(got[ties], (np.sign(xs[ties]) * ((np.abs(xs[ties]) + 2) // 4)), "ties")


# --------------------------------------------------------------------------- references


def test_add_softmax_pad_run_in_tflm():
    rng = np.random.default_rng(3)
    a = TensorSpec((1, 4, 4, 8), scale=0.05, zero_point=-10)
    bb = TensorSpec((1, 4, 4, 8), scale=0.03, zero_point=5)
    out = TensorSpec((1, 4, 4, 8), scale=0.07, zero_point=-2)
    add = single_op_model("ADD", [a, bb], [out], {"fused_activation_function": "RELU"})
    ref = reference_for(add)
    assert ref.engine == TFLM, ref.tflm_error
    xa, xb = rand_int8(a.shape, rng), rand_int8(bb.shape, rng)
    got = ref.run([xa, xb])[0]
    assert got.shape == out.shape and got.dtype == np.int8
    # Dequantized sum, requantized, within one step of TFLM's fixed-point result.
    real = (xa.astype(float) + 10) * 0.05 + (xb.astype(float) - 5) * 0.03
    approx = np.clip(np.round(real / 0.07) - 2, -2, 127)
    assert np.max(np.abs(got.astype(int) - approx)) <= 1
    assert_equal_exact(run_tflite_ref(add, [xa, xb])[0], got, "ADD TFLite-ref vs TFLM")

    x = TensorSpec((1, 10), scale=0.1, zero_point=0)
    sm = single_op_model("SOFTMAX", [x], [TensorSpec((1, 10), scale=1 / 256, zero_point=-128)],
                         {"beta": 1.0})
    xi = rand_int8(x.shape, rng)
    got = run_reference(sm, [xi])[0]
    p = np.exp(xi * 0.1 - np.max(xi * 0.1))
    p /= p.sum()
    assert np.max(np.abs((got.astype(int) + 128) / 256 - p)) <= 2 / 256

    xp = TensorSpec((1, 3, 3, 2), scale=0.1, zero_point=7)
    pad = single_op_model("PAD", [xp, const([[0, 0], [1, 1], [2, 0], [0, 0]])],
                          [TensorSpec((1, 5, 5, 2), scale=0.1, zero_point=7)])
    xi = rand_int8(xp.shape, rng)
    got = run_reference(pad, [xi])[0]
    want = np.pad(xi, [(0, 0), (1, 1), (2, 0), (0, 0)], constant_values=7)
    assert_equal_exact(got, want, "PAD")


def test_op_missing_in_tflm_falls_back_to_tflite_ref():
    x = TensorSpec((1, 2, 3), scale=0.1, zero_point=4)
    model = single_op_model("TILE", [x, const([2, 1, 2])],
                            [TensorSpec((2, 2, 6), scale=0.1, zero_point=4)])
    ref = reference_for(model)
    assert ref.engine == TFLITE_REF
    assert "Didn't find op for builtin opcode 'TILE'" in ref.tflm_error
    xi = rand_int8(x.shape, np.random.default_rng(0))
    assert_equal_exact(ref.run([xi])[0], np.tile(xi, (2, 1, 2)), "TILE")


def test_tflm_and_tflite_ref_quirks():
    """Pinned differences between the two references; if one of these starts failing, a
    reference changed and kernels relying on the old behaviour must be revisited."""
    rng = np.random.default_rng(2)
    x = TensorSpec((1, 16), scale=0.05, zero_point=-3)
    xi = rand_int8(x.shape, rng)

    # TFLM RELU6 (int8) ignores the output quantization: it clamps in the input's domain
    # to [in_zp, q_in(6.0)] and copies; TFLite requantizes to the output scale.
    relu6 = single_op_model("RELU6", [x], [TensorSpec((1, 16), scale=0.03, zero_point=-128)])
    six = -3 + round(6.0 / 0.05)
    assert_equal_exact(run_reference(relu6, [xi])[0], np.clip(xi, -3, six).astype(np.int8),
                       "TFLM RELU6")
    assert not np.array_equal(run_tflite_ref(relu6, [xi])[0], run_reference(relu6, [xi])[0])

    # TFLM CONCATENATION (int8) requires every input's scale to equal the output's.
    concat = single_op_model("CONCATENATION", [x, TensorSpec((1, 16), scale=0.07)],
                             [TensorSpec((1, 32), scale=0.07)], {"axis": 1})
    ref = reference_for(concat)
    assert ref.engine == TFLITE_REF and "concatenation.cc" in ref.tflm_error

    # TFLite BUILTIN_REF SUM (int8) is wrong in ai-edge-litert 2.x; TFLM's is right.
    xs = TensorSpec((1, 6, 4), scale=0.05, zero_point=-3)
    ys = TensorSpec((1, 4), scale=0.3, zero_point=0)
    sum_model = single_op_model("SUM", [xs, const([1])], [ys])
    xi = rand_int8(xs.shape, rng)
    real = np.clip(np.round(((xi + 3.0) * 0.05).sum(axis=1) / 0.3), -128, 127)
    assert np.max(np.abs(run_reference(sum_model, [xi])[0] - real)) <= 1
    assert np.max(np.abs(run_tflite_ref(sum_model, [xi])[0] - real)) > 1


def test_assert_equal_exact_lists_differences():
    want = np.arange(30, dtype=np.int8).reshape(5, 6)
    got = want.copy()
    got[1, 2] += 1
    got[4, 5] -= 3
    with pytest.raises(AssertionError) as e:
        assert_equal_exact(got, want, "demo")
    msg = str(e.value)
    assert "demo: 2 of 30 elements differ" in msg
    assert "(1, 2): 9 / 8" in msg and "(4, 5): 26 / 29" in msg
    many = want + 1
    with pytest.raises(AssertionError) as e:
        assert_equal_exact(many.astype(np.int8), want)
    assert "30 of 30" in str(e.value) and str(e.value).count("\n") == 20
    with pytest.raises(AssertionError, match="dtype"):
        assert_equal_exact(want.astype(np.int16), want)
    with pytest.raises(AssertionError, match="shape"):
        assert_equal_exact(want.reshape(6, 5), want)
    assert_equal_exact(want.copy(), want)


def test_multi_op_model_runs_in_tflm():
    """CONV_2D → RESHAPE → FULLY_CONNECTED → SOFTMAX, built with build_model."""
    rng = np.random.default_rng(5)
    w1 = weight_spec((4, 3, 3, 2), rng)
    w2 = weight_spec((3, 64), rng)
    tensors = [
        TensorSpec((1, 4, 4, 2), scale=0.02, zero_point=0, name="x"),
        w1, bias_spec(4, rng, 0.02, w1.scale),
        TensorSpec((1, 4, 4, 4), scale=0.04, zero_point=-128, name="conv"),
        const([1, 64]),
        TensorSpec((1, 64), scale=0.04, zero_point=-128, name="flat"),
        w2, bias_spec(3, rng, 0.04, w2.scale),
        TensorSpec((1, 3), scale=0.1, zero_point=0, name="logits"),
        TensorSpec((1, 3), scale=1 / 256, zero_point=-128, name="prob"),
    ]
    ops = [
        OpSpec("CONV_2D", [0, 1, 2], [3], {"padding": "SAME",
                                           "fused_activation_function": "RELU"}),
        OpSpec("RESHAPE", [3, 4], [5], {"new_shape": [1, 64]}),
        OpSpec("FULLY_CONNECTED", [5, 6, 7], [8]),
        OpSpec("SOFTMAX", [8], [9]),
    ]
    model = build_model(ops, tensors, inputs=[0], outputs=[9])
    m = tflite.Model.GetRootAs(model, 0)
    assert m.OperatorCodesLength() == 4
    x = rand_int8((1, 4, 4, 2), rng)
    got = run_reference(model, [x])[0]
    assert got.shape == (1, 3)
    assert_equal_exact(run_tflite_ref(model, [x])[0], got, "multi-op")


# --------------------------------------------------------------------------- every op


def _q(shape, scale=0.05, zp=-3, dtype="int8"):
    return TensorSpec(tuple(shape), dtype, scale=scale, zero_point=zp)


def _op_cases():
    """(id, op, inputs, outputs, options) with a small representative int8 shape."""
    rng = np.random.default_rng(11)
    x = _q((1, 6, 6, 4))
    same = _q((1, 6, 6, 4))
    w_conv = weight_spec((5, 3, 3, 4), rng)
    w_dw = weight_spec((1, 3, 3, 8), rng, per_channel_axis=3)
    w_fc = weight_spec((5, 16), rng)
    w_fc_pc = weight_spec((5, 16), rng)
    w_tc = weight_spec((3, 3, 3, 4), rng)
    b = lambda n, w: bias_spec(n, rng, 0.05, w.scale)  # noqa: E731
    sig = _q((1, 6, 6, 4), 1 / 256, -128)
    return [
        ("conv", "CONV_2D", [x, w_conv, b(5, w_conv)], [_q((1, 6, 6, 5), 0.1, 1)],
         {"padding": "SAME"}),
        ("dwconv_mult2", "DEPTHWISE_CONV_2D", [x, w_dw, b(8, w_dw)],
         [_q((1, 4, 4, 8), 0.1, 1)], {"depth_multiplier": 2}),
        ("fc", "FULLY_CONNECTED", [_q((2, 16)), w_fc, b(5, w_fc)], [_q((2, 5), 0.2, 0)], {}),
        ("fc_no_bias", "FULLY_CONNECTED", [_q((2, 16)), w_fc, None], [_q((2, 5), 0.2, 0)], {}),
        ("fc_keep_dims", "FULLY_CONNECTED", [_q((1, 3, 16)), w_fc_pc, b(5, w_fc_pc)],
         [_q((1, 3, 5), 0.2, 0)], {"keep_num_dims": True}),
        ("avgpool", "AVERAGE_POOL_2D", [x], [_q((1, 3, 3, 4))],
         {"filter_width": 2, "filter_height": 2, "stride_w": 2, "stride_h": 2}),
        ("maxpool", "MAX_POOL_2D", [x], [_q((1, 6, 6, 4))],
         {"filter_width": 3, "filter_height": 3, "padding": "SAME"}),
        ("add", "ADD", [x, _q((1, 6, 6, 4), 0.03, 4)], [_q((1, 6, 6, 4), 0.08, 0)], {}),
        ("add_bcast", "ADD", [x, _q((1, 1, 1, 4), 0.03, 4)], [_q((1, 6, 6, 4), 0.08, 0)], {}),
        ("sub", "SUB", [x, _q((1, 6, 6, 4), 0.03, 4)], [_q((1, 6, 6, 4), 0.08, 0)],
         {"fused_activation_function": "RELU6"}),
        ("mul", "MUL", [x, _q((1, 6, 6, 4), 0.03, 4)], [_q((1, 6, 6, 4), 0.01, 0)], {}),
        ("softmax", "SOFTMAX", [_q((2, 10), 0.1, 0)], [_q((2, 10), 1 / 256, -128)],
         {"beta": 0.5}),
        ("logistic", "LOGISTIC", [x], [sig], {}),
        ("tanh", "TANH", [x], [_q((1, 6, 6, 4), 1 / 128, 0)], {}),
        ("relu", "RELU", [x], [_q((1, 6, 6, 4), 0.03, -128)], {}),
        ("relu6", "RELU6", [x], [_q((1, 6, 6, 4))], {}),  # TFLM: same quant in/out
        ("leaky_relu", "LEAKY_RELU", [x], [_q((1, 6, 6, 4), 0.04, 10)], {"alpha": 0.2}),
        ("hard_swish", "HARD_SWISH", [x], [_q((1, 6, 6, 4), 0.04, -20)], {}),
        ("pad", "PAD", [x, const([[0, 0], [1, 1], [1, 1], [0, 0]])], [_q((1, 8, 8, 4))], {}),
        ("padv2", "PADV2", [x, const([[0, 0], [1, 1], [0, 2], [0, 0]]),
                            TensorSpec((1,), scale=0.05, zero_point=-3, data=[20])],
         [_q((1, 8, 8, 4))], {}),
        ("concat", "CONCATENATION", [x, _q((1, 6, 6, 2))], [_q((1, 6, 6, 6))],
         {"axis": 3}),
        ("mean", "MEAN", [x, const([1, 2])], [_q((1, 1, 1, 4), 0.04, 0)], {"keep_dims": True}),
        ("reduce_max", "REDUCE_MAX", [x, const([1, 2])], [_q((1, 4))], {"keep_dims": False}),
        ("sum", "SUM", [x, const([2])], [_q((1, 6, 1, 4), 0.3, 0)], {"keep_dims": True}),
        ("transpose", "TRANSPOSE", [x, const([0, 3, 1, 2])], [_q((1, 4, 6, 6))], {}),
        ("strided_slice", "STRIDED_SLICE",
         [x, const([0, 1, 0, 0]), const([1, 5, 6, 4]), const([1, 2, 1, 1])],
         [_q((1, 2, 6, 4))], {"begin_mask": 0b1100, "end_mask": 0b1100}),
        ("resize_nn", "RESIZE_NEAREST_NEIGHBOR", [x, const([12, 9])], [_q((1, 12, 9, 4))],
         {"align_corners": False, "half_pixel_centers": True}),
        ("transpose_conv", "TRANSPOSE_CONV",
         [const([1, 12, 12, 3]), w_tc, x, b(3, w_tc)], [_q((1, 12, 12, 3), 0.1, 0)],
         {"padding": "SAME", "stride_w": 2, "stride_h": 2}),
        ("transpose_conv_no_bias", "TRANSPOSE_CONV",
         [const([1, 13, 13, 3]), w_tc, x], [_q((1, 13, 13, 3), 0.1, 0)],
         {"padding": "VALID", "stride_w": 2, "stride_h": 2}),
        ("maximum", "MAXIMUM", [x, same], [_q((1, 6, 6, 4))], {}),
        ("minimum", "MINIMUM", [x, same], [_q((1, 6, 6, 4))], {}),
        ("tile", "TILE", [_q((1, 2, 3, 4)), const([1, 2, 1, 2])], [_q((1, 4, 3, 8))], {}),
        ("split", "SPLIT", [const(3, shape=()), x], [_q((1, 6, 6, 2)), _q((1, 6, 6, 2))],
         {"num_splits": 2}),
        ("pack", "PACK", [_q((2, 3)), _q((2, 3))], [_q((2, 2, 3))],
         {"values_count": 2, "axis": 1}),
        ("unpack", "UNPACK", [_q((2, 3))], [_q((3,)), _q((3,))], {"num": 2, "axis": 0}),
        ("space_to_batch", "SPACE_TO_BATCH_ND",
         [x, const([2, 2]), const([[0, 0], [0, 0]])], [_q((4, 3, 3, 4))], {}),
        ("batch_to_space", "BATCH_TO_SPACE_ND",
         [_q((4, 3, 3, 4)), const([2, 2]), const([[0, 0], [0, 0]])], [_q((1, 6, 6, 4))], {}),
        ("quantize_f32", "QUANTIZE", [TensorSpec((2, 8), "float32")], [_q((2, 8), 0.02, 3)], {}),
        ("requantize_s8", "QUANTIZE", [_q((2, 8))], [_q((2, 8), 0.07, 9)], {}),
        ("dequantize", "DEQUANTIZE", [_q((2, 8))], [TensorSpec((2, 8), "float32")], {}),
        ("reshape", "RESHAPE", [x, const([1, 36, 4])], [_q((1, 36, 4))],
         {"new_shape": [1, 36, 4]}),
        ("squeeze", "SQUEEZE", [_q((1, 1, 1, 4))], [_q((1, 4))], {"squeeze_dims": [1, 2]}),
        ("expand_dims", "EXPAND_DIMS", [_q((6, 4)), const(0, shape=())], [_q((1, 6, 4))], {}),
        ("shape", "SHAPE", [x], [TensorSpec((4,), "int32")], {"out_type": "int32"}),
        ("gather", "GATHER", [_q((5, 4)), const([4, 0, 2])], [_q((3, 4))], {"axis": 0}),
        ("slice", "SLICE", [x, const([0, 1, 2, 0]), const([1, 3, 2, 4])], [_q((1, 3, 2, 4))],
         {}),
        ("arg_max", "ARG_MAX", [x, const([3])], [TensorSpec((1, 6, 6), "int32")],
         {"output_type": "int32"}),
        ("space_to_depth", "SPACE_TO_DEPTH", [x], [_q((1, 3, 3, 16))], {"block_size": 2}),
        ("depth_to_space", "DEPTH_TO_SPACE", [x], [_q((1, 12, 12, 1))], {"block_size": 2}),
        ("resize_bilinear", "RESIZE_BILINEAR", [x, const([9, 9])], [_q((1, 9, 9, 4))], {}),
        ("broadcast_to", "BROADCAST_TO", [_q((1, 4)), const([3, 4])], [_q((3, 4))], {}),
        ("gelu", "GELU", [x], [_q((1, 6, 6, 4), 0.04, -20)], {}),
    ]


OP_CASES = _op_cases()
# Cases TFLM refuses (op not registered in its Python interpreter); pinned so that a TFLM
# upgrade that changes this is noticed.
TFLITE_REF_ONLY = {"tile", "gelu"}
# TFLite BUILTIN_REF gets these wrong (see test_tflm_and_tflite_ref_quirks): no cross-check.
TFLITE_REF_WRONG = {"sum"}


@pytest.mark.parametrize("case", OP_CASES, ids=[c[0] for c in OP_CASES])
def test_every_op_builds_and_runs(case):
    name, op, inputs, outputs, options = case
    model = single_op_model(op, inputs, outputs, options)
    rng = np.random.default_rng(0)
    feeds = [rand_int(t.shape, rng, t.dtype) if t.dtype != "float32"
             else rng.uniform(-2, 2, t.shape).astype(np.float32)
             for t in inputs if t is not None and t.data is None]
    ref = reference_for(model)
    expected_engine = TFLITE_REF if name in TFLITE_REF_ONLY else TFLM
    assert ref.engine == expected_engine, ref.tflm_error
    got = ref.run(feeds)
    assert len(got) == len(outputs)
    for g, t in zip(got, outputs):
        assert g.shape == t.shape and g.dtype == t.np_dtype, (name, g.shape, g.dtype)
    if ref.engine == TFLM and name not in TFLITE_REF_WRONG:
        # Both engines must agree exactly where both run.
        other = run_tflite_ref(model, feeds)
        for i, (g, o) in enumerate(zip(got, other)):
            assert_equal_exact(g, o, f"{name} output {i}: TFLM vs TFLite-ref")
