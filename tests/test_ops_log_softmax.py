"""int8 LOG_SOFTMAX against tflite-micro, exactly (TFLM's LogSoftmaxQuantized: output
scale 16/256, zero point 127), and the MIT LeNet model that ends in a float LOG_SOFTMAX.
"""

from __future__ import annotations

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import models_root
from reference import assert_equal_exact, run_reference
from tflite_builder import OpSpec, TensorSpec, build_model, rand_int8

OUT = dict(scale=16.0 / 256, zero_point=127)


def _scale(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


def test_log_softmax_s8_matches_tflm():
    """Rows of 1 to 4095 values, input scales from 1e-3 to 2 (the diff_min cut and the
    adjusted cut both bind), equal rows, saturating rows, random rows."""
    rng = np.random.default_rng(20)
    shapes = [(1, 10), (2, 3, 7), (1, 1), (4, 256), (1, 4095), (3, 100), (2, 2, 2, 5)]
    tensors, ops, inputs = [], [], []
    labels = []
    for i in range(21):
        shape = shapes[i % len(shapes)]
        scale = [0.001, 0.02, 0.1, 0.5, 2.0][i % 5] if i < 10 else _scale(rng, 1e-3, 2.0)
        zp = int(rng.integers(-128, 128))
        tensors += [TensorSpec(shape, scale=scale, zero_point=zp), TensorSpec(shape, **OUT)]
        ops.append(OpSpec("LOG_SOFTMAX", [len(tensors) - 2], [len(tensors) - 1]))
        x = rand_int8(shape, rng)
        if i % 7 == 3:
            x[...] = int(rng.integers(-128, 128))     # equal values: log(depth)
        elif i % 7 == 5:
            x.reshape(-1)[::2] = -128                  # far below the max: the cuts
            x.reshape(-1)[1::2] = 127
        inputs.append(x)
        labels.append(f"LOG_SOFTMAX {list(shape)} s={scale:.6g} zp={zp}")
    n = len(ops)
    model = build_model(ops, tensors, [2 * i for i in range(n)], [2 * i + 1 for i in range(n)])
    want = run_reference(model, inputs)
    art = kc.compile(kc.load(model))
    got = art.run(*inputs)
    for g, w, label in zip(got, want, labels):
        assert_equal_exact(g, w, label)
    assert {o["kernel"] for o in art.report["ops"]} == {"kiln_log_softmax_s8"}


def test_log_softmax_rejections():
    x = TensorSpec((1, 10), scale=0.1, zero_point=0)
    model = build_model([OpSpec("LOG_SOFTMAX", [0], [1])],
                        [x, TensorSpec((1, 10), scale=1 / 256, zero_point=-128)], [0], [1])
    with pytest.raises(kc.ModelError, match="scale 16/256 and zero point 127"):
        kc.compile(kc.load(model))
    model = build_model([OpSpec("LOG_SOFTMAX", [0], [1])],
                        [TensorSpec((1, 10), "float32"), TensorSpec((1, 10), "float32")],
                        [0], [1])
    with pytest.raises(kc.ModelError, match="kiln quantize"):
        kc.compile(kc.load(model))


def test_quantizer_gives_log_softmax_tflites_fixed_output():
    """A float FULLY_CONNECTED -> LOG_SOFTMAX model through kiln quantize: the exported
    LOG_SOFTMAX has TFLite's fixed output quantization, tflite-micro runs it exactly as
    kiln does, and it tracks the float model."""
    from kiln.compiler.frontend.tflite_writer import write
    from kiln.compiler.quantize.float_eval import FloatModel
    from kiln.compiler.quantize.rewrite import prepare

    rng = np.random.default_rng(21)
    w = TensorSpec((10, 16), "float32", data=rng.normal(0, 0.5, (10, 16)).astype(np.float32))
    b = TensorSpec((10,), "float32", data=rng.normal(0, 0.2, 10).astype(np.float32))
    tensors = [TensorSpec((1, 16), "float32"), w, b, TensorSpec((1, 10), "float32"),
               TensorSpec((1, 10), "float32")]
    model = build_model([OpSpec("FULLY_CONNECTED", [0, 1, 2], [3]),
                         OpSpec("LOG_SOFTMAX", [3], [4])], tensors, [0], [4])
    graph = kc.load(model)
    calibration = rng.normal(0, 1, (64, 1, 16)).astype(np.float32)
    q = kc.quantize(graph, calibration)
    out = q.tensor(q.outputs[0])
    assert (out.dtype, *out.quant.single()) == ("int8", np.float32(16 / 256), 127)
    exported = write(q)
    art = kc.compile(kc.load(exported))
    xs = rng.normal(0, 1, (32, 1, 16)).astype(np.float32)
    s_in, z_in = q.tensor(q.inputs[0]).quant.single()
    float_out = FloatModel(prepare(graph)).run([xs])[0]
    agree = 0
    for i in range(len(xs)):
        x8 = np.clip(np.round(xs[i] / s_in) + z_in, -128, 127).astype(np.int8)
        got = art.run(x8)[0]
        assert_equal_exact(got, run_reference(exported, [x8])[0], f"sample {i}")
        agree += int(np.argmax(got) == np.argmax(float_out[i]))
        np.testing.assert_allclose((got.astype(np.float32) - 127) / 16, float_out[i], atol=0.2)
    assert agree >= 30


def test_mit_lenet_float_log_softmax_tail_moved_into_int8(tmp_path):
    """MIT's PTQ LeNet ends DEQUANTIZE -> LOG_SOFTMAX in float. kiln quantize moves the
    LOG_SOFTMAX into int8 (fixed 16/256, 127; no calibration); kiln compiles the result
    and tflite-micro runs it identically, and its top class is the original model's."""
    from kiln.compiler.frontend.tflite_writer import write
    from kiln.compiler.quantize.float_tail import quantize_float_tail

    path = models_root() / "external" / "mit_ptq_mnist_lenet.tflite"
    if not path.exists():
        pytest.skip(f"{path} not found")
    original = path.read_bytes()
    moved = quantize_float_tail(kc.load(path))
    assert [op.type for op in moved.ops][-2:] == ["LOG_SOFTMAX", "DEQUANTIZE"]
    exported = write(moved)
    art = kc.compile(kc.load(exported))
    rng = np.random.default_rng(22)
    for i in range(8):
        x = rng.uniform(0, 1, (1, 28, 28, 1)).astype(np.float32)
        got = art.run(x)[0]
        assert_equal_exact(got, run_reference(exported, [x])[0], f"sample {i}")
        assert np.argmax(got) == np.argmax(run_reference(original, [x])[0])


def test_float_tail_only_for_log_softmax_after_dequantize():
    """A float SOFTMAX tail (not moved: not asked for), and a float model, are left to
    the quantizer's other paths."""
    from kiln.compiler.quantize.float_tail import quantize_float_tail

    q = dict(scale=0.05, zero_point=0)
    tensors = [TensorSpec((1, 4), **q), TensorSpec((1, 4), "float32"),
               TensorSpec((1, 4), "float32")]
    for op in ("SOFTMAX", "LOG_SOFTMAX"):
        model = build_model([OpSpec("DEQUANTIZE", [0], [1]), OpSpec(op, [1], [2])],
                            tensors, [0], [2])
        moved = quantize_float_tail(kc.load(model))
        assert (moved is not None) == (op == "LOG_SOFTMAX")
    float_model = build_model([OpSpec("LOG_SOFTMAX", [0], [1])],
                              [TensorSpec((1, 4), "float32"), TensorSpec((1, 4), "float32")],
                              [0], [1])
    assert quantize_float_tail(kc.load(float_model)) is None
