"""Post-training quantization (kiln.compiler.quantize) and the .tflite writer.

- the float evaluator against TFLite's float kernels, op by op and on whole models;
- the int8 scheme (per-channel weights, bias scales, fixed and shared scales, hybrid);
- calibration methods and the refusal of bad calibration data;
- the exported .tflite in tflite-micro, against kiln's own compiled model, bit for bit;
- the done-when figures: digits accuracy/agreement, SQNR of every MLPerf float model.
"""

from __future__ import annotations

import numpy as np
import pytest
from reference import _arena_size, assert_equal_exact, run_reference, run_tflite_ref
from tflite_builder import OpSpec, TensorSpec, build_model, const, single_op_model

import quantize_inputs
from conftest import model_path
from kiln.compiler import InputError, ModelError, compile, load, quantize
from kiln.compiler.frontend.tflite_writer import write
from kiln.compiler.quantize import FloatModel, calibration_arrays, load_calibration, prepare
from kiln.compiler.quantize.calibrate import TensorStats, asymmetric_params, choose_range
from kiln.compiler.quantize.rewrite import quantize_weights

# --------------------------------------------------------------------------- helpers


class Tflm:
    """One tflite-micro interpreter reused across samples (run_reference builds one per call)."""

    def __init__(self, model: bytes):
        from tflite_micro.python.tflite_micro import runtime

        self.model = bytes(model)
        self.interp = runtime.Interpreter.from_bytes(self.model, arena_size=_arena_size(self.model))

    def __call__(self, *xs: np.ndarray) -> list[np.ndarray]:
        for i, x in enumerate(xs):
            self.interp.set_input(np.ascontiguousarray(x), i)
        self.interp.invoke()
        n = len(load(self.model).outputs)
        return [np.array(self.interp.get_output(i), copy=True) for i in range(n)]


def to_int8(x: np.ndarray, t) -> np.ndarray:
    scale, zp = t.quant.single()
    return np.clip(np.floor(x / np.float32(scale) + 0.5) + zp, -128, 127).astype(np.int8)


def from_int8(q: np.ndarray, t) -> np.ndarray:
    scale, zp = t.quant.single()
    return (q.astype(np.float32) - zp) * np.float32(scale)


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    return float(10 * np.log10(np.sum(ref ** 2) / max(np.sum((ref - got) ** 2), 1e-30)))


def float_outputs(graph, x: np.ndarray) -> np.ndarray:
    return FloatModel(prepare(graph)).run([x])[0].reshape(len(x), -1)


def one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg and msg, f"not one line: {msg!r}"
    return msg


RNG = np.random.default_rng(11)


def f32(shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(np.float32)


# --------------------------------------------------------------------------- single-op models

def _conv(padding, stride, dilation, act):
    x, y_shape = TensorSpec((1, 9, 7, 3), "float32"), None
    w = TensorSpec((5, 3, 3, 3), "float32", data=f32((5, 3, 3, 3)))
    b = TensorSpec((5,), "float32", data=f32((5,), -0.5, 0.5))
    oh = {"SAME": -(-9 // stride), "VALID": (9 - 2 * dilation - 1) // stride + 1}[padding]
    ow = {"SAME": -(-7 // stride), "VALID": (7 - 2 * dilation - 1) // stride + 1}[padding]
    y_shape = (1, oh, ow, 5)
    return single_op_model("CONV_2D", [x, w, b], [TensorSpec(y_shape, "float32")],
                           {"padding": padding, "stride_h": stride, "stride_w": stride,
                            "dilation_h_factor": dilation, "dilation_w_factor": dilation,
                            "fused_activation_function": act})


def _depthwise():
    x = TensorSpec((1, 8, 8, 3), "float32")
    w = TensorSpec((1, 3, 3, 6), "float32", data=f32((1, 3, 3, 6)))
    b = TensorSpec((6,), "float32", data=f32((6,)))
    return single_op_model("DEPTHWISE_CONV_2D", [x, w, b], [TensorSpec((1, 4, 4, 6), "float32")],
                           {"padding": "SAME", "stride_h": 2, "stride_w": 2, "depth_multiplier": 2,
                            "fused_activation_function": "RELU"})


def _fc():
    x = TensorSpec((1, 2, 2, 6), "float32")
    w = TensorSpec((7, 24), "float32", data=f32((7, 24)))
    b = TensorSpec((7,), "float32", data=f32((7,)))
    return single_op_model("FULLY_CONNECTED", [x, w, b], [TensorSpec((1, 7), "float32")])


def _pool(op, padding):
    out = (1, 3, 3, 4) if padding == "SAME" else (1, 2, 2, 4)
    return single_op_model(op, [TensorSpec((1, 6, 6, 4), "float32")], [TensorSpec(out, "float32")],
                           {"padding": padding, "stride_h": 2, "stride_w": 2,
                            "filter_height": 3, "filter_width": 3})


def _mean():
    return single_op_model("MEAN", [TensorSpec((1, 4, 5, 3), "float32"), const([1, 2])],
                           [TensorSpec((1, 1, 1, 3), "float32")], {"keep_dims": True})


def _add_const():
    c = TensorSpec((3,), "float32", data=np.array([0.5, -1.0, 2.0], np.float32))
    return single_op_model("ADD", [TensorSpec((1, 4, 4, 3), "float32"), c],
                           [TensorSpec((1, 4, 4, 3), "float32")])


def _binary(op):
    a, b = TensorSpec((1, 4, 4, 3), "float32"), TensorSpec((1, 4, 4, 3), "float32")
    return single_op_model(op, [a, b], [TensorSpec((1, 4, 4, 3), "float32")])


def _concat():
    a, b = TensorSpec((1, 4, 4, 3), "float32"), TensorSpec((1, 4, 4, 2), "float32")
    return single_op_model("CONCATENATION", [a, b], [TensorSpec((1, 4, 4, 5), "float32")], {"axis": 3})


def _unary(op, shape=(1, 4, 6)):
    options = {"beta": 0.7} if op == "SOFTMAX" else {}
    return single_op_model(op, [TensorSpec(shape, "float32")], [TensorSpec(shape, "float32")], options)


def _pad():
    return single_op_model("PAD", [TensorSpec((1, 3, 3, 2), "float32"),
                                   const([[0, 0], [1, 2], [2, 0], [0, 0]])],
                           [TensorSpec((1, 6, 5, 2), "float32")])


def _reshape():
    return single_op_model("RESHAPE", [TensorSpec((1, 2, 3, 4), "float32"), const([1, 24])],
                           [TensorSpec((1, 24), "float32")])


SINGLE_OPS = {
    "conv_same_s2_relu6": lambda: _conv("SAME", 2, 1, "RELU6"),
    "conv_valid_dilated": lambda: _conv("VALID", 1, 2, "NONE"),
    "depthwise_mult2_s2": _depthwise,
    "fully_connected_4d_input": _fc,
    "avg_pool_same": lambda: _pool("AVERAGE_POOL_2D", "SAME"),
    "max_pool_same": lambda: _pool("MAX_POOL_2D", "SAME"),
    "avg_pool_valid": lambda: _pool("AVERAGE_POOL_2D", "VALID"),
    "mean_keep_dims": _mean,
    "add_const_broadcast": _add_const,
    "mul": lambda: _binary("MUL"),
    "sub": lambda: _binary("SUB"),
    "maximum": lambda: _binary("MAXIMUM"),
    "concat": _concat,
    "softmax_beta": lambda: _unary("SOFTMAX"),
    "logistic": lambda: _unary("LOGISTIC"),
    "tanh": lambda: _unary("TANH"),
    "relu6": lambda: _unary("RELU6"),
    "pad": _pad,
    "reshape": _reshape,
}


def _random_batch(graph, n, scale=3.0):
    return [f32((n,) + graph.tensor(t).shape, -scale, scale) for t in graph.inputs]


@pytest.mark.parametrize("name", sorted(SINGLE_OPS))
def test_float_evaluator_matches_tflite(name):
    model = SINGLE_OPS[name]()
    g = load(model)
    xs = _random_batch(g, 4)
    got = FloatModel(prepare(g)).run(xs)[0]
    for i in range(4):
        want = run_tflite_ref(model, [x[i] for x in xs])[0]
        np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("name", sorted(SINGLE_OPS))
def test_quantized_single_op_runs_in_tflm_close_to_float(name):
    """Each op, quantized by kiln and exported, runs in TFLM and tracks the float op."""
    g = load(SINGLE_OPS[name]())
    q = quantize(g, _random_batch(g, 64))
    tflm = Tflm(write(q))
    xs = _random_batch(g, 8)
    want = FloatModel(prepare(g)).run(xs)[0]
    got = np.stack([from_int8(tflm(*[to_int8(x[i], q.tensor(t)) for x, t in zip(xs, q.inputs)])[0],
                              q.tensor(q.outputs[0])) for i in range(8)])
    assert sqnr_db(want, got.reshape(want.shape)) > 25.0, name


# --------------------------------------------------------------------------- the scheme


def test_asymmetric_params_hold_zero_and_the_range():
    assert asymmetric_params(0.0, 1.0) == (pytest.approx(1 / 255), -128)
    assert asymmetric_params(0.5, 2.0)[1] == -128            # widened to include 0
    scale, zp = asymmetric_params(-3.0, 1.0)
    assert -128 <= zp <= 127 and zp == round(zp)
    assert (-128 - zp) * scale <= -3.0 + scale and (127 - zp) * scale >= 1.0 - scale
    assert asymmetric_params(0.0, 0.0)[0] > 0                 # an all-zero tensor


def test_weights_symmetric_per_channel():
    w = np.stack([np.linspace(-2, 1, 12), np.zeros(12), np.linspace(0, 0.01, 12)]).reshape(3, 2, 2, 3)
    q, scales = quantize_weights(w.astype(np.float32), 0)
    assert scales.shape == (3,) and scales[1] == 1.0 and np.all(q[1] == 0)
    assert q[0].min() == -127 and q.max() <= 127 and q[2].max() == 127
    np.testing.assert_allclose(q[0] * scales[0], w[0], atol=scales[0] / 2 + 1e-7)


def _per_channel_scheme_checks(q):
    for op in q.ops:
        if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            x, w, b = (q.tensor(t) for t in op.inputs[:3])
            axis = 3 if op.type == "DEPTHWISE_CONV_2D" else 0
            assert w.dtype == "int8" and w.quant.axis == axis and w.quant.scale.size == w.shape[axis]
            assert np.all(w.quant.zero_point == 0) and w.data.min() >= -127
            assert b.dtype == "int32" and np.all(b.quant.zero_point == 0)
            want = (np.float32(x.quant.scale[0]) * w.quant.scale).astype(np.float32)
            np.testing.assert_array_equal(b.quant.scale, want)
        if op.type in ("MAX_POOL_2D", "AVERAGE_POOL_2D", "RESHAPE"):
            a, y = q.tensor(op.inputs[0]), q.tensor(op.outputs[0])
            assert a.quant.single() == y.quant.single(), f"{op.type} changes scale"
        if op.type == "SOFTMAX":
            assert q.tensor(op.outputs[0]).quant.single() == (1 / 256, -128)


def test_digits_scheme(models_dir):
    g = load(model_path("digits_cnn_float"))
    q = quantize(g, np.load(models_dir / "digits" / "digits_calib_x.npy"))
    q.verify()
    assert all(t.dtype != "float32" for t in q.tensors)
    _per_channel_scheme_checks(q)
    fc = next(op for op in q.ops if op.type == "FULLY_CONNECTED")
    assert q.tensor(fc.inputs[1]).quant.scale.size == 10
    q1 = quantize(g, np.load(models_dir / "digits" / "digits_calib_x.npy"), fc_per_channel=False)
    fc = next(op for op in q1.ops if op.type == "FULLY_CONNECTED")
    assert q1.tensor(fc.inputs[1]).quant.scale.size == 1


def test_hybrid_kws_weights_requantized_per_channel():
    g = load(model_path("kws_ref_model_float32"))
    conv_w = g.tensor(g.ops[0].inputs[1])
    assert conv_w.dtype == "int8" and conv_w.quant.scale.size == 1     # hybrid: per-tensor int8
    q = quantize(g, quantize_inputs.inputs("kws_ref_model_float32", 16))
    _per_channel_scheme_checks(q)
    w = q.tensor(q.ops[0].inputs[1])
    assert w.quant.scale.size == 64 and q.tensor(q.inputs[0]).dtype == "int8"


def test_float_io_wraps_int8_model(models_dir):
    g = load(model_path("digits_cnn_float"))
    cal = np.load(models_dir / "digits" / "digits_calib_x.npy")
    q8, qf = quantize(g, cal), quantize(g, cal, io="float")
    assert qf.ops[0].type == "QUANTIZE" and qf.ops[-1].type == "DEQUANTIZE"
    assert qf.tensor(qf.inputs[0]).dtype == "float32" and qf.tensor(qf.outputs[0]).dtype == "float32"
    x = np.load(models_dir / "digits" / "digits_test_x.npy")[:5]
    run8, runf = Tflm(write(q8)), Tflm(write(qf))
    art = compile(qf, board="host")
    assert art.report["inputs"][0]["dtype"] == "float32"
    for i in range(5):
        want = from_int8(run8(to_int8(x[i:i + 1], q8.tensor(q8.inputs[0])))[0], q8.tensor(q8.outputs[0]))
        assert_equal_exact(runf(x[i:i + 1])[0], want, f"sample {i}")
        assert_equal_exact(art.run(x[i:i + 1])[0], want, f"kiln, sample {i}")


def test_int8_model_is_returned_unchanged():
    g = load(model_path("kws_ref_model"))
    assert quantize(g, np.zeros((1, 49, 10, 1), np.float32)) is g


def test_unquantizable_op_is_one_line_model_error():
    model = single_op_model("DIV", [TensorSpec((1, 4), "float32"), TensorSpec((1, 4), "float32")],
                            [TensorSpec((1, 4), "float32")])
    with pytest.raises(ModelError) as e:
        quantize(load(model), [f32((4, 1, 4)), f32((4, 1, 4))])
    assert "DIV" in one_line(e)


def test_concat_of_fixed_scales_requantizes():
    """A softmax (fixed 1/256) and a tanh output (fixed 1/128) meet in a concat: both are
    requantized to the concat's calibrated range; the other softmax stays a model output."""
    tensors = [TensorSpec((1, 4), "float32"), TensorSpec((1, 4), "float32"),
               TensorSpec((1, 4), "float32"), TensorSpec((1, 4), "float32"),
               TensorSpec((1, 8), "float32")]
    ops = [OpSpec("SOFTMAX", [0], [1], {"beta": 1.0}), OpSpec("TANH", [0], [2]),
           OpSpec("SOFTMAX", [0], [3], {"beta": 2.0}), OpSpec("CONCATENATION", [1, 2], [4], {"axis": 1})]
    g = load(build_model(ops, tensors, [0], [4, 3]))
    q = quantize(g, f32((32, 1, 4), -3, 3))
    assert [op.type for op in q.ops].count("QUANTIZE") == 2
    cat = next(op for op in q.ops if op.type == "CONCATENATION")
    scales = {q.tensor(t).quant.single() for t in cat.inputs + cat.outputs}
    assert len(scales) == 1
    x = f32((1, 4), -3, 3)
    got = Tflm(write(q))(to_int8(x, q.tensor(q.inputs[0])))
    want = FloatModel(prepare(g)).run([x[None]])
    for o, tid, w in zip(got, q.outputs, want):
        np.testing.assert_allclose(from_int8(o, q.tensor(tid)), w[0], atol=2 / 128)


# --------------------------------------------------------------------------- calibration


def test_percentile_and_mse_clip_heavy_tails():
    from kiln.compiler.quantize.calibrate import _bin_centers, _quant_error

    x = np.random.default_rng(0).standard_t(3, 100_000)       # heavy tails: min/max -75 / 50
    s = TensorStats(min=float(x.min()), max=float(x.max()), count=x.size)
    s.hist = np.bincount(np.clip(((x - s.min) * (2048 / (s.max - s.min))).astype(int), 0, 2047),
                         minlength=2048)
    lo, hi = choose_range(s, "minmax")
    assert (lo, hi) == (s.min, s.max)
    plo, phi = choose_range(s, "percentile", 99.9)
    assert -15 < plo < -5 and 5 < phi < 15
    mlo, mhi = choose_range(s, "mse")
    assert lo < mlo < 0 < mhi < hi
    error = lambda r: _quant_error(_bin_centers(s), s.hist.astype(float), *r)  # noqa: E731
    assert error((mlo, mhi)) < error((lo, hi)) and error((mlo, mhi)) < error((plo, phi))
    with pytest.raises(InputError, match="unknown calibration method"):
        choose_range(s, "entropy")


def test_methods_and_bias_correction_run(models_dir):
    g = load(model_path("digits_cnn_float"))
    cal = np.load(models_dir / "digits" / "digits_calib_x.npy")
    base = quantize(g, cal)
    for opts in ({"method": "mse"}, {"method": "percentile", "percentile": 99.9},
                 {"bias_correction": True}, {"per_tensor": {g.tensor(g.ops[2].outputs[0]).name: "mse"}}):
        q = quantize(g, cal, **opts)
        _per_channel_scheme_checks(q)
        assert len(q.ops) == len(base.ops), opts
    with pytest.raises(InputError):
        quantize(g, cal, method="nope")
    with pytest.raises(InputError, match="unknown quantize option"):
        quantize(g, cal, methd="mse")
    with pytest.raises(InputError, match="unknown activation tensor"):
        quantize(g, cal, per_tensor={"no such tensor": "mse"})


# --------------------------------------------------------------------------- calibration data


@pytest.fixture(scope="module")
def digits_graph():
    return load(model_path("digits_cnn_float"))


def test_calibration_forms(digits_graph, tmp_path):
    g = digits_graph
    x = f32((6, 8, 8, 1), 0, 1)
    want = x.reshape(6, 1, 8, 8, 1)
    for form in (x, x.reshape(6, 1, 8, 8, 1), [x], list(x), [s[None] for s in x], iter(list(x))):
        np.testing.assert_array_equal(calibration_arrays(g, form)[0], want)
    np.save(tmp_path / "batch.npy", x)
    (tmp_path / "dir").mkdir()
    for i, s in enumerate(x):
        np.save(tmp_path / "dir" / f"{i:03d}.npy", s)
    np.testing.assert_array_equal(load_calibration(g, [tmp_path / "batch.npy"])[0], want)
    np.testing.assert_array_equal(load_calibration(g, [tmp_path / "dir"])[0], want)
    np.testing.assert_array_equal(calibration_arrays(g, str(tmp_path / "dir"))[0], want)


@pytest.mark.parametrize("bad, message", [
    (np.zeros((4, 8, 8), np.float32), "shape"),
    (np.zeros((4, 9, 8, 1), np.float32), "shape"),
    (np.zeros((4, 8, 8, 1), np.int32), "not float"),
    (np.zeros((0, 8, 8, 1), np.float32), "no samples"),
    (np.full((4, 8, 8, 1), np.nan, np.float32), "NaN"),
    (np.where(np.arange(256).reshape(4, 8, 8, 1) == 70, np.inf, 0).astype(np.float32), "sample 1"),
    (np.array(["a", "b"]), "not float"),
])
def test_bad_calibration_arrays(digits_graph, bad, message, tmp_path):
    with pytest.raises(InputError) as e:
        quantize(digits_graph, bad)
    assert message in one_line(e)
    np.save(tmp_path / "bad.npy", bad)
    with pytest.raises(InputError) as e:
        load_calibration(digits_graph, [tmp_path / "bad.npy"])
    assert message in one_line(e) and "bad.npy" in str(e.value)


def test_calibration_data_that_overflows_inside_the_model_is_named(digits_graph):
    """3e38 is a finite float32, but the first convolution's sums are not: a NaN range
    used to reach the zero-point rounding (a traceback)."""
    with pytest.raises(InputError) as e:
        quantize(digits_graph, np.full((4, 8, 8, 1), 3e38, np.float32))
    assert "computes non-finite values in tensor" in one_line(e)


def test_bad_calibration_files(digits_graph, tmp_path):
    cases = {"missing": (tmp_path / "nope.npy", "does not exist"),
             "empty dir": (tmp_path / "empty", "no .npy files"),
             "garbage": (tmp_path / "garbage.npy", "cannot read")}
    (tmp_path / "empty").mkdir()
    (tmp_path / "garbage.npy").write_bytes(b"not a numpy file")
    for name, (path, message) in cases.items():
        with pytest.raises(InputError) as e:
            load_calibration(digits_graph, [path])
        assert message in one_line(e), name
    with pytest.raises(InputError, match="one calibration file"):
        load_calibration(digits_graph, [tmp_path / "a.npy", tmp_path / "b.npy"])


# --------------------------------------------------------------------------- writer


@pytest.mark.parametrize("name", ["kws_ref_model", "pretrainedResnet_quant", "digits_cnn_int8"])
def test_writer_round_trip_runs_identically(name):
    data = model_path(name).read_bytes()
    g = load(data)
    again = write(g)
    g2 = load(again)
    assert [op.type for op in g2.ops] == [op.type for op in g.ops]
    assert [op.options for op in g2.ops] == [op.options for op in g.ops]
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=g.tensor(g.inputs[0]).shape).astype(np.int8)
    assert_equal_exact(run_reference(again, [x])[0], run_reference(data, [x])[0], name)


# --------------------------------------------------------------------------- done-when figures


@pytest.fixture(scope="module")
def digits(models_dir):
    d = models_dir / "digits"
    g = load(model_path("digits_cnn_float"))
    q = quantize(g, np.load(d / "digits_calib_x.npy"))
    return g, q, np.load(d / "digits_test_x.npy"), np.load(d / "digits_test_y.npy")


def test_digits_accuracy_and_agreement_and_tflm_identity(digits):
    g, q, x, y = digits
    art = compile(q, board="host")
    tflm = Tflm(write(q))
    xq = to_int8(x, q.tensor(q.inputs[0]))
    got = np.stack([art.run(xq[i:i + 1])[0] for i in range(len(x))])
    for i in range(len(x)):
        assert_equal_exact(got[i], tflm(xq[i:i + 1])[0].reshape(got[i].shape), f"test sample {i}")
    pred = got.reshape(len(x), -1).argmax(1)
    float_pred = float_outputs(g, x).argmax(1)
    accuracy, agreement = (pred == y).mean(), (pred == float_pred).mean()
    print(f"digits int8: accuracy {accuracy:.2%}, agreement with float {agreement:.2%}")
    assert accuracy >= 0.94 and agreement >= 0.98


# Floors: the measured SQNR (128 calibration samples, seed 0; 32 test samples, seed 1;
# from tests/quantize_inputs.py) less ~3 dB. Measured: KWS 20.7, VWW 28.6, IC 19.4,
# AD 34.4 dB (compiler/quantize/README.md has the figures with more samples).
MLPERF_FLOAT_SQNR_FLOOR = {
    "kws_ref_model_float32": 18.0,
    "vww_96_float": 25.5,
    "pretrainedResnet": 16.5,
    "ad01_fp32": 31.0,
}


@pytest.mark.parametrize("name", sorted(MLPERF_FLOAT_SQNR_FLOOR))
def test_mlperf_float_models_quantize_compile_and_run(name):
    g = load(model_path(name))
    q = quantize(g, quantize_inputs.inputs(name, 128, seed=0))
    art = compile(q, board="host")
    x = quantize_inputs.inputs(name, 32, seed=1)
    xq = to_int8(x, q.tensor(q.inputs[0]))
    got = np.stack([art.run(xq[i:i + 1])[0] for i in range(len(x))])
    tflm = Tflm(write(q))
    for i in range(4):
        assert_equal_exact(got[i], tflm(xq[i:i + 1])[0].reshape(got[i].shape), f"{name} sample {i}")
    out = from_int8(got, q.tensor(q.outputs[0])).reshape(len(x), -1)
    sqnr = sqnr_db(float_outputs(g, x), out)
    print(f"{name}: SQNR of kiln int8 vs float {sqnr:.1f} dB")
    assert sqnr >= MLPERF_FLOAT_SQNR_FLOOR[name]


# --------------------------------------------------------------------------- CLI


def test_cli_quantize_and_compile(models_dir, tmp_path, capsys):
    from kiln.compiler.cli import main

    d = models_dir / "digits"
    out = tmp_path / "digits_int8.tflite"
    rc = main(["quantize", str(model_path("digits_cnn_float")), "--calibration",
               str(d / "digits_calib_x.npy"), "-o", str(out), "--calibration-method", "mse"])
    assert rc == 0 and "wrote" in capsys.readouterr().out
    q = load(out)
    assert q.tensor(q.inputs[0]).dtype == "int8"
    Tflm(out.read_bytes())(np.zeros((1, 8, 8, 1), np.int8))

    rc = main(["compile", str(model_path("digits_cnn_float")), "--calibration",
               str(d / "digits_calib_x.npy"), "-o", str(tmp_path / "c")])
    assert rc == 0 and (tmp_path / "c" / "kiln.json").exists()

    rc = main(["quantize", str(model_path("digits_cnn_float")), "--calibration",
               str(d / "digits_test_y.npy"), "-o", str(tmp_path / "x.tflite")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "not float" in err


def test_cli_two_inputs_one_calibration_per_input(tmp_path, capsys):
    from kiln.compiler.cli import main

    model = tmp_path / "add.tflite"
    model.write_bytes(_binary("ADD"))
    np.save(tmp_path / "a.npy", f32((16, 1, 4, 4, 3)))
    (tmp_path / "b").mkdir()
    for i in range(16):
        np.save(tmp_path / "b" / f"{i}.npy", f32((4, 4, 3), 0, 5))
    out = tmp_path / "add_int8.tflite"
    rc = main(["quantize", str(model), "--calibration", str(tmp_path / "a.npy"), "--calibration",
               str(tmp_path / "b"), "-o", str(out), "--io", "float", "--tensor-method", "t0=mse"])
    assert rc == 0, capsys.readouterr().err
    q = load(out)
    assert [op.type for op in q.ops] == ["QUANTIZE", "QUANTIZE", "ADD", "DEQUANTIZE"]
    a, b = f32((1, 4, 4, 3)), f32((1, 4, 4, 3), 0, 5)
    np.testing.assert_allclose(Tflm(out.read_bytes())(a, b)[0], a + b, atol=0.1)
    rc = main(["quantize", str(model), "--calibration", str(tmp_path / "a.npy"), "-o", str(out)])
    assert rc == 2 and "one calibration file or directory per input" in capsys.readouterr().err
