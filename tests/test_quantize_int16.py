"""`kiln quantize --activations int16`: float models → 16x8 (int16 activations, int8
weights, int64 biases) as TF's converter's int16x8 mode writes them; tflite-micro runs the
exported .tflite identically to kiln, and the quantized outputs are closer to float than
the int8 quantization's."""

from __future__ import annotations

import numpy as np
import pytest

import quantize_inputs
from conftest import model_path
from reference import assert_equal_exact, run_reference
from test_quantize import float_outputs, sqnr_db
from tflite_builder import OpSpec, TensorSpec, build_model, const

from kiln.compiler import compile, load, quantize
from kiln.compiler.errors import ModelError
from kiln.compiler.frontend.tflite_writer import write

RNG = np.random.default_rng(16)


def _f32(shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def to_q(x: np.ndarray, t) -> np.ndarray:
    """Float input → the quantized input tensor's dtype (int8 or int16)."""
    scale, zp = t.quant.single()
    info = np.iinfo(np.int16 if t.dtype == "int16" else np.int8)
    q = np.floor(x / np.float32(scale) + 0.5) + zp
    return np.clip(q, info.min, info.max).astype(info.dtype)


def from_q(q: np.ndarray, t) -> np.ndarray:
    scale, zp = t.quant.single()
    return (q.astype(np.float32) - zp) * np.float32(scale)


def small_float_model() -> bytes:
    """CONV_2D without a bias → DEPTHWISE_CONV_2D (RELU6, no bias) → RESHAPE →
    FULLY_CONNECTED: each weight layer of the 16x8 scheme, and its biases made up."""
    t = [TensorSpec((1, 8, 8, 2), "float32"),
         TensorSpec((4, 3, 3, 2), "float32", data=_f32((4, 3, 3, 2))),
         TensorSpec((1, 8, 8, 4), "float32"),
         TensorSpec((1, 3, 3, 4), "float32", data=_f32((1, 3, 3, 4))),
         TensorSpec((1, 4, 4, 4), "float32"),
         const([1, 64]),
         TensorSpec((1, 64), "float32"),
         TensorSpec((5, 64), "float32", data=_f32((5, 64), -0.3, 0.3)),
         TensorSpec((5,), "float32", data=_f32((5,), -0.5, 0.5)),
         TensorSpec((1, 5), "float32")]
    ops = [OpSpec("CONV_2D", [0, 1, -1], [2], {"padding": "SAME"}),
           OpSpec("DEPTHWISE_CONV_2D", [2, 3, -1], [4],
                  {"padding": "SAME", "stride_h": 2, "stride_w": 2,
                   "fused_activation_function": "RELU6"}),
           OpSpec("RESHAPE", [4, 5], [6]),
           OpSpec("FULLY_CONNECTED", [6, 7, 8], [9])]
    return build_model(ops, t, [0], [9])


def _compare(g, q, x: np.ndarray, n_tflm: int) -> tuple[np.ndarray, np.ndarray]:
    """Run q with kiln on every sample and with TFLM on the first n_tflm (identical
    outputs asserted); return (kiln's outputs as float, the float model's outputs)."""
    art = compile(q, board="host")
    xq = to_q(x, q.tensor(q.inputs[0]))
    got = np.stack([art.run(xq[i:i + 1])[0] for i in range(len(x))])
    model = write(q)
    for i in range(n_tflm):
        want = run_reference(model, [xq[i:i + 1]])[0]
        assert_equal_exact(got[i], want.reshape(got[i].shape), f"sample {i}")
    return from_q(got, q.tensor(q.outputs[0])).reshape(len(x), -1), \
        float_outputs(g, x).reshape(len(x), -1)


def test_small_model_scheme_and_tflm_identity():
    g = load(small_float_model())
    cal = _f32((64, 1, 8, 8, 2), -2, 2)
    q = quantize(g, cal, activations="int16")
    acts = [t for t in q.tensors if not t.is_const and t.dtype != "int32"]
    assert {t.dtype for t in acts} == {"int16"}
    assert all(int(t.quant.zero_point[0]) == 0 for t in acts)
    weight_ops = [op for op in q.ops if op.type != "RESHAPE"]
    for op in weight_ops:
        w, b = q.tensor(op.inputs[1]), q.tensor(op.inputs[2])
        assert w.dtype == "int8" and b.dtype == "int64", op.describe()
    assert [op.version for op in weight_ops] == [4, 5, 1]

    x = _f32((16, 1, 8, 8, 2), -2, 2).reshape(16, 8, 8, 2)
    got16, ref = _compare(g, q, x, n_tflm=4)
    got8, _ = _compare(g, quantize(g, cal), x, n_tflm=0)
    s16, s8 = sqnr_db(ref, got16), sqnr_db(ref, got8)
    assert s16 >= s8 and s16 > 25.0, (s16, s8)    # int8 weights dominate the error here


# SQNR vs float on 32 samples like the calibration data (int16x8 / int8): AD 34.8 / 34.4 dB,
# KWS 29.9 / 20.7, ResNet-8 23.7 / 19.4, VWW 37.3 / 28.6 (benchmarks/int16.py has more).
# AD's error is its int8 weights' (on 64 samples 31.7 / 31.8): there 16x8 only matches int8.
@pytest.mark.parametrize("name,floor,gain", [
    pytest.param("ad01_fp32", 33.0, -0.5, marks=pytest.mark.slow),
    ("kws_ref_model_float32", 27.0, 6.0), ("pretrainedResnet", 21.5, 3.0),
    pytest.param("vww_96_float", 34.0, 6.0, marks=pytest.mark.slow)])
def test_mlperf_float_model_16x8(name, floor, gain):
    """An MLPerf float model whose ops all run at int16: TFLM = kiln on the export, and
    its SQNR vs float `gain` dB or more above the int8 quantization's (printed)."""
    g = load(model_path(name))
    cal = quantize_inputs.inputs(name, 128, seed=0)
    x = quantize_inputs.inputs(name, 32, seed=1)
    got16, ref = _compare(g, quantize(g, cal, activations="int16"), x, n_tflm=3)
    got8, _ = _compare(g, quantize(g, cal), x, n_tflm=0)
    s16, s8 = sqnr_db(ref, got16), sqnr_db(ref, got8)
    top16 = float(np.mean(got16.argmax(1) == ref.argmax(1)))
    top8 = float(np.mean(got8.argmax(1) == ref.argmax(1)))
    print(f"{name}: SQNR vs float int16x8 {s16:.1f} dB, int8 {s8:.1f} dB; "
          f"top-1 agreement {top16:.3f} / {top8:.3f}")
    assert s16 >= floor and s16 >= s8 + gain


def test_ops_without_an_int16_form_are_named():
    x = TensorSpec((1, 4, 6), "float32")
    model = build_model([OpSpec("HARD_SWISH", [0], [1])], [x, TensorSpec((1, 4, 6), "float32")],
                        [0], [1])
    g = load(model)
    with pytest.raises(ModelError, match="HARD_SWISH has no int16 form") as e:
        quantize(g, _f32((8, 1, 4, 6)), activations="int16")
    assert "\n" not in str(e.value)


def test_cli_quantize_int16(tmp_path, capsys):
    from kiln.compiler.cli import main

    model = tmp_path / "small.tflite"
    model.write_bytes(small_float_model())
    np.save(tmp_path / "cal.npy", _f32((32, 1, 8, 8, 2), -2, 2))
    out = tmp_path / "small_16x8.tflite"
    rc = main(["quantize", str(model), "--calibration", str(tmp_path / "cal.npy"),
               "-o", str(out), "--activations", "int16"])
    printed = capsys.readouterr().out
    assert rc == 0 and "int16 activations" in printed and "int16 scale=" in printed
    q = load(out)
    assert q.tensor(q.inputs[0]).dtype == "int16"
    x = np.zeros((1, 8, 8, 2), np.int16)
    assert_equal_exact(compile(q, board="host").run(x)[0], run_reference(out.read_bytes(), [x])[0],
                       "CLI export")
    with pytest.raises(SystemExit) as e:
        main(["quantize", str(model), "--calibration", str(tmp_path / "cal.npy"),
              "-o", str(tmp_path / "x.tflite"), "--activations", "int4"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "int4" in err


def test_float_io_wraps_the_16x8_model():
    """io="float": QUANTIZE float→int16 after the input, DEQUANTIZE int16→float before
    the output; kiln and TFLM give the same floats."""
    g = load(small_float_model())
    q = quantize(g, _f32((32, 1, 8, 8, 2), -2, 2), activations="int16", io="float")
    assert [op.type for op in q.ops][0] == "QUANTIZE" and q.ops[-1].type == "DEQUANTIZE"
    assert q.tensor(q.ops[0].outputs[0]).dtype == "int16"
    x = _f32((1, 8, 8, 2), -2, 2)
    got = compile(q, board="host").run(x)[0]
    assert_equal_exact(got, run_reference(write(q), [x])[0], "float I/O")
    np.testing.assert_allclose(got.reshape(-1), float_outputs(g, x).reshape(-1), atol=0.05)


def test_digits_cnn_16x8(models_dir):
    """The digits CNN (CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D, MEAN, FULLY_CONNECTED,
    SOFTMAX) at 16x8: TFLM = kiln on the export; on the test set (397 samples) SQNR vs
    float 38.5 dB (int8 36.4), top class as float on 99.2% (int8 99.0%), accuracy 94.7%
    as int8 (float 95.0%)."""
    d = models_dir / "digits"
    g = load(model_path("digits_cnn_float"))
    cal = np.load(d / "digits_calib_x.npy")
    x, y = np.load(d / "digits_test_x.npy"), np.load(d / "digits_test_y.npy")
    got16, ref = _compare(g, quantize(g, cal, activations="int16"), x, n_tflm=32)
    got8, _ = _compare(g, quantize(g, cal), x, n_tflm=0)
    agree16 = np.mean(got16.argmax(1) == ref.argmax(1))
    agree8 = np.mean(got8.argmax(1) == ref.argmax(1))
    assert sqnr_db(ref, got16) >= max(37.5, sqnr_db(ref, got8) + 1.0)
    assert agree16 >= max(0.98, agree8) and np.mean(got16.argmax(1) == y) >= 0.94
