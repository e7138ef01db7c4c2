"""The ONNX frontend (compiler/frontend/onnx_reader.py): float ONNX models built with
onnx.helper, imported, quantized by kiln and compiled for the host.

For every model: kiln's float evaluator on the imported graph matches onnxruntime within
float tolerance (the import is exact), and the int8 model compiled by kiln tracks
onnxruntime's float outputs (SQNR above a stated bound). The exported int8 .tflite runs
in tflite-micro bit-identically to kiln. Bad input is one ModelError line.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import onnx   # a runtime dependency of kiln: missing, these tests fail
from onnx import TensorProto, helper, numpy_helper
from reference import run_reference, run_tflite_ref

from kiln.compiler import ModelError, compile, load, quantize
from kiln.compiler.frontend.tflite_writer import write
from kiln.compiler.quantize import FloatModel, prepare

ort = pytest.importorskip("onnxruntime")   # a test dependency (pyproject's [test] extra)

RNG = np.random.default_rng(14)
KILN = [sys.executable, "-c", "import sys; from kiln.launcher import main; sys.exit(main())"]
OPSET = 13
# int8 outputs against onnxruntime's float outputs. Single ops lose ~6 dB per doubling of
# the range they quantize; 25 dB is what test_quantize.py asks of kiln's float .tflite ops.
SQNR_SINGLE_DB = 25.0
SQNR_CNN_DB = 20.0


@pytest.fixture(autouse=True)
def _seeded():
    """Each test draws the same numbers whatever ran before it (or alone, with -k)."""
    global RNG
    RNG = np.random.default_rng(14)


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def model_bytes(nodes, inputs, outputs, inits=(), opset=OPSET) -> bytes:
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def ort_run(data: bytes, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def sqnr_db(ref, got) -> float:
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    return float(10 * np.log10(np.sum(ref ** 2) / max(np.sum((ref - got) ** 2), 1e-30)))


def to_int8(x, t):
    scale, zp = t.quant.single()
    return np.clip(np.floor(x / np.float32(scale) + 0.5) + zp, -128, 127).astype(np.int8)


def from_int8(q, t):
    scale, zp = t.quant.single()
    return (q.astype(np.float32) - zp) * np.float32(scale)


def check(data: bytes, in_shape, sqnr_bound=SQNR_SINGLE_DB, n_test=4, tflm=False):
    """Import, float-evaluate, quantize, compile, run: the figures this file asserts."""
    g = load(data)
    # The calibration set holds the test samples: these tests measure the import and the
    # int8 arithmetic, not how ranges generalise to unseen data (a clipped outlier in a
    # 4-sample test would dominate its SQNR). compiler/quantize/README.md has the latter.
    xs = RNG.uniform(-2, 2, size=(n_test, *in_shape)).astype(np.float32)
    calib = np.concatenate([RNG.uniform(-2, 2, size=(64, *in_shape)).astype(np.float32), xs])
    want = np.stack([ort_run(data, x[None])[0] for x in xs])
    floats = FloatModel(prepare(g)).run([xs[:, None]])[0].reshape(want.shape)
    np.testing.assert_allclose(floats, want, rtol=1e-4, atol=1e-4)
    q = quantize(g, calib[:, None])
    art = compile(q, board="host")
    tin, tout = q.tensor(q.inputs[0]), q.tensor(q.outputs[0])
    got = []
    for x in xs:
        qx = to_int8(x[None], tin)
        y = art.run(qx)[0]
        if tflm:
            ref = run_reference(write(q), [qx])[0]
            np.testing.assert_array_equal(y, ref.reshape(y.shape))
        got.append(from_int8(y, tout))
    got = np.stack(got).reshape(want.shape)
    s = sqnr_db(want, got)
    assert s > sqnr_bound, f"SQNR {s:.1f} dB"
    return g, s


def conv_model(group=1, cin=3, cout=4, k=3, attrs=None, size=(9, 7), bias=True):
    attrs = attrs or {}
    w = f32(cout, cin // group, k, k, scale=0.5)
    ins = ["x", "w"] + (["b"] if bias else [])
    node = helper.make_node("Conv", ins, ["y"], group=group, **attrs)
    inits = [("w", w)] + ([("b", f32(cout, scale=0.1))] if bias else [])
    probe = helper.make_graph([node], "p",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, cin) + size)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, n) for n, v in inits])
    inferred = onnx.shape_inference.infer_shapes(helper.make_model(
        probe, opset_imports=[helper.make_opsetid("", OPSET)]))
    out = [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim]
    return model_bytes([node], [("x", (1, cin) + size)], [("y", out)], inits)


CONV_CASES = {
    "plain": dict(),
    "pads_same": dict(attrs=dict(pads=[1, 1, 1, 1])),
    "pads_asym": dict(attrs=dict(pads=[0, 1, 2, 1])),
    "stride2": dict(attrs=dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    "dilation2": dict(attrs=dict(dilations=[2, 2])),
    "auto_same_upper": dict(attrs=dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    "auto_same_lower": dict(attrs=dict(auto_pad="SAME_LOWER", strides=[2, 2])),
    "auto_valid": dict(attrs=dict(auto_pad="VALID")),
    "pointwise_nobias": dict(k=1, bias=False),
    "depthwise": dict(group=3, cin=3, cout=3, attrs=dict(pads=[1, 1, 1, 1])),
    "depthwise_mult2": dict(group=3, cin=3, cout=6, attrs=dict(strides=[2, 2], pads=[1, 1, 1, 1])),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv(case):
    kw = CONV_CASES[case]
    size = kw.get("size", (9, 7))
    check(conv_model(**kw), (kw.get("cin", 3),) + size)


def _single(op, in_shape, out_shape, inits=(), extra_inputs=(), opset_version=OPSET, **attrs):
    node = helper.make_node(op, ["x", *extra_inputs], ["y"], **attrs)
    return model_bytes([node], [("x", in_shape)], [("y", out_shape)], inits, opset=opset_version)


SINGLE = {
    "gemm": lambda: _single("Gemm", (1, 12), (1, 5), [("B", f32(5, 12, scale=0.3)), ("C", f32(5))],
                            ["B", "C"], transB=1, alpha=0.7, beta=0.5),
    "gemm_notrans": lambda: _single("Gemm", (1, 12), (1, 5), [("B", f32(12, 5, scale=0.3))], ["B"]),
    "matmul": lambda: _single("MatMul", (1, 12), (1, 6), [("B", f32(12, 6, scale=0.3))], ["B"]),
    "add_const_nchw": lambda: _single("Add", (1, 3, 4, 5), (1, 3, 4, 5),
                                      [("c", f32(3, 1, 1))], ["c"]),
    "mul_const_nchw": lambda: _single("Mul", (1, 3, 4, 5), (1, 3, 4, 5),
                                      [("c", np.abs(f32(1, 3, 1, 1)) + 0.5)], ["c"]),
    "sub_const": lambda: _single("Sub", (1, 3, 4, 5), (1, 3, 4, 5), [("c", f32(1, 3, 1, 1))], ["c"]),
    "div_const": lambda: _single("Div", (1, 3, 4, 5), (1, 3, 4, 5),
                                 [("c", np.array([0.5, 2.0, 4.0], np.float32).reshape(3, 1, 1))], ["c"]),
    "sub_from_const_relu": lambda: model_bytes(
        [helper.make_node("Sub", ["c", "x"], ["d"]), helper.make_node("Relu", ["d"], ["y"])],
        [("x", (1, 12))], [("y", (1, 12))], [("c", f32(12))]),
    "leaky_relu": lambda: _single("LeakyRelu", (1, 3, 4, 5), (1, 3, 4, 5), alpha=0.1),
    "hard_swish": lambda: _single("HardSwish", (1, 3, 4, 5), (1, 3, 4, 5), opset_version=14),
    "concat_with_relu": lambda: model_bytes(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Concat", ["x", "r"], ["y"], axis=1)],
        [("x", (1, 3, 4, 5))], [("y", (1, 6, 4, 5))]),
    "concat_const_width": lambda: _single("Concat", (1, 3, 4, 5), (1, 3, 4, 7), [("c", f32(1, 3, 4, 2))],
                                          ["c"], axis=3),
    "concat_rank2": lambda: _single("Concat", (1, 12), (1, 15), [("c", f32(1, 3))], ["c"], axis=-1),
    "transpose_to_nhwc": lambda: _single("Transpose", (1, 3, 4, 5), (1, 4, 5, 3), perm=[0, 2, 3, 1]),
    "transpose_rank3": lambda: _single("Transpose", (1, 12, 5), (1, 5, 12), perm=[0, 2, 1]),
    "squeeze_after_pool": lambda: model_bytes(
        [helper.make_node("GlobalAveragePool", ["x"], ["g"]),
         helper.make_node("Squeeze", ["g", "axes"], ["y"])],
        [("x", (1, 4, 5, 6))], [("y", (1, 4))], [("axes", np.array([2, 3], np.int64))]),
    "unsqueeze": lambda: _single("Unsqueeze", (1, 12), (1, 12, 1), [("axes", np.array([2], np.int64))],
                                 ["axes"]),
    "pad_spatial": lambda: _single("Pad", (1, 3, 4, 5), (1, 3, 7, 8),
                                   [("pads", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64))], ["pads"]),
    "pad_value": lambda: _single("Pad", (1, 3, 4, 5), (1, 3, 6, 5),
                                 [("pads", np.array([0, 0, 1, 0, 0, 0, 1, 0], np.int64)),
                                  ("v", np.array(0.5, np.float32))], ["pads", "v"]),
    "global_maxpool": lambda: _single("GlobalMaxPool", (1, 4, 5, 6), (1, 4, 1, 1)),
    "reduce_mean_hw": lambda: _single("ReduceMean", (1, 4, 5, 6), (1, 4), axes=[2, 3], keepdims=0),
    "reduce_max_channels": lambda: _single("ReduceMax", (1, 4, 5, 6), (1, 1, 5, 6), axes=[1]),
    "reduce_mean_height": lambda: _single("ReduceMean", (1, 4, 5, 6), (1, 4, 6), axes=[2], keepdims=0),
    "log_softmax": lambda: _single("LogSoftmax", (1, 10), (1, 10)),
    "hard_sigmoid": lambda: _single("HardSigmoid", (1, 3, 4, 5), (1, 3, 4, 5), alpha=0.25, beta=0.4),
    # What onnxruntime's optimizer writes for HardSwish: read as one HARD_SWISH.
    "hard_swish_decomposed": lambda: model_bytes(
        [helper.make_node("HardSigmoid", ["x"], ["h"], alpha=1 / 6, beta=0.5),
         helper.make_node("Mul", ["x", "h"], ["y"])], [("x", (1, 3, 4, 5))], [("y", (1, 3, 4, 5))]),
    "relu": lambda: _single("Relu", (1, 3, 4, 5), (1, 3, 4, 5)),
    "clip6": lambda: _single("Clip", (1, 3, 4, 5), (1, 3, 4, 5),
                             [("lo", np.float32(0)), ("hi", np.float32(6))], ["lo", "hi"]),
    "clip_any": lambda: _single("Clip", (1, 12), (1, 12),
                                [("lo", np.float32(-0.5)), ("hi", np.float32(0.7))], ["lo", "hi"]),
    "clip_minmax_nchw": lambda: _single("Clip", (1, 3, 4, 5), (1, 3, 4, 5),
                                        [("lo", np.float32(-0.8)), ("hi", np.float32(1.2))], ["lo", "hi"]),
    "sigmoid": lambda: _single("Sigmoid", (1, 3, 4, 5), (1, 3, 4, 5)),
    "tanh": lambda: _single("Tanh", (1, 12), (1, 12)),
    "maxpool_same": lambda: _single("MaxPool", (1, 4, 6, 6), (1, 4, 3, 3), kernel_shape=[3, 3],
                                    strides=[2, 2], pads=[0, 0, 1, 1]),
    "maxpool_pads_after_relu": lambda: model_bytes(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
        [("x", (1, 4, 6, 6))], [("y", (1, 4, 3, 3))]),
    "maxpool_valid": lambda: _single("MaxPool", (1, 4, 6, 6), (1, 4, 3, 3), kernel_shape=[2, 2],
                                     strides=[2, 2]),
    "avgpool_same": lambda: _single("AveragePool", (1, 4, 6, 6), (1, 4, 3, 3),
                                    kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]),
    "avgpool_auto_same": lambda: _single("AveragePool", (1, 4, 7, 7), (1, 4, 4, 4),
                                         kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    "avgpool_incl_pad": lambda: _single("AveragePool", (1, 4, 6, 6), (1, 4, 3, 3),
                                        kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                        count_include_pad=1),
    "global_avgpool": lambda: _single("GlobalAveragePool", (1, 4, 5, 6), (1, 4, 1, 1)),
    "flatten_4d": lambda: _single("Flatten", (1, 3, 4, 5), (1, 60)),
    "flatten_4d_gemm": lambda: model_bytes(
        [helper.make_node("Flatten", ["x"], ["f"]),
         helper.make_node("Gemm", ["f", "B", "C"], ["y"], transB=1)],
        [("x", (1, 3, 4, 5))], [("y", (1, 6))], [("B", f32(6, 60, scale=0.2)), ("C", f32(6))]),
    "reshape_4d": lambda: _single("Reshape", (1, 3, 4, 5), (1, 12, 5),
                                  [("s", np.array([1, 12, 5], np.int64))], ["s"]),
    "softmax": lambda: _single("Softmax", (1, 10), (1, 10)),
    "softmax_channels": lambda: _single("Softmax", (1, 5, 3, 4), (1, 5, 3, 4), axis=1),
    "batchnorm_alone": lambda: _single(
        "BatchNormalization", (1, 3, 4, 5), (1, 3, 4, 5),
        [("s", np.abs(f32(3)) + 0.5), ("b", f32(3)), ("m", f32(3)), ("v", np.abs(f32(3)) + 0.5)],
        ["s", "b", "m", "v"]),
}


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_single_op(name):
    data = SINGLE[name]()
    g = load(data)
    in_shape = g.tensor(g.inputs[0]).shape[1:]
    check(data, in_shape, tflm=True)


def cnn_model() -> bytes:
    """conv-bn-relu-maxpool, depthwise conv-bn-relu6 (Clip), global pool, flatten, gemm, softmax."""
    c1 = f32(8, 3, 3, 3, scale=0.4)
    bn = lambda n: [(f"{n}_s", np.abs(f32(8)) + 0.5), (f"{n}_b", f32(8, scale=0.2)),  # noqa: E731
                    (f"{n}_m", f32(8, scale=0.2)), (f"{n}_v", np.abs(f32(8)) + 0.5)]
    nodes = [
        helper.make_node("Conv", ["x", "c1"], ["a1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["a1", "bn1_s", "bn1_b", "bn1_m", "bn1_v"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["a3"]),
        helper.make_node("MaxPool", ["a3"], ["a4"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["a4", "c2", "c2b"], ["a5"], group=8, pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["a5", "bn2_s", "bn2_b", "bn2_m", "bn2_v"], ["a6"]),
        helper.make_node("Clip", ["a6", "zero", "six"], ["a7"]),
        helper.make_node("Conv", ["a7", "c3", "c3b"], ["a8"]),
        helper.make_node("Relu", ["a8"], ["a9"]),
        helper.make_node("GlobalAveragePool", ["a9"], ["a10"]),
        helper.make_node("Shape", ["a10"], ["sh"]),
        helper.make_node("Gather", ["sh", "zero_i"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["newshape"], axis=0),
        helper.make_node("Reshape", ["a10", "newshape"], ["a11"]),
        helper.make_node("Gemm", ["a11", "fc", "fcb"], ["a12"], transB=1),
        helper.make_node("Softmax", ["a12"], ["y"]),
    ]
    inits = [("c1", c1), *bn("bn1"), ("c2", f32(8, 1, 3, 3, scale=0.4)), ("c2b", f32(8, scale=0.1)),
             *bn("bn2"), ("zero", np.float32(0)), ("six", np.float32(6)),
             ("c3", f32(16, 8, 1, 1, scale=0.4)), ("c3b", f32(16, scale=0.1)),
             ("zero_i", np.array(0, np.int64)), ("axes0", np.array([0], np.int64)),
             ("minus1", np.array([-1], np.int64)), ("fc", f32(10, 16, scale=0.5)), ("fcb", f32(10))]
    return model_bytes(nodes, [("x", (1, 3, 16, 16))], [("y", (1, 10))], inits)


def residual_model() -> bytes:
    """conv-relu → conv, + the block's input (Add of two activations, Relu fused), MatMul on rank 3."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Conv", ["r", "w2", "b2"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "x"], ["s"]),
        helper.make_node("Relu", ["s"], ["t"]),
        helper.make_node("Reshape", ["t", "shape"], ["u"]),
        helper.make_node("MatMul", ["u", "m"], ["y"]),
    ]
    inits = [("w1", f32(4, 4, 3, 3, scale=0.3)), ("b1", f32(4, scale=0.1)),
             ("w2", f32(4, 4, 3, 3, scale=0.3)), ("b2", f32(4, scale=0.1)),
             ("shape", np.array([1, 4, 30], np.int64)), ("m", f32(30, 7, scale=0.3))]
    return model_bytes(nodes, [("x", (1, 4, 6, 5))], [("y", (1, 4, 7))], inits)


def test_residual_block():
    g, _ = check(residual_model(), (4, 6, 5), sqnr_bound=SQNR_CNN_DB, tflm=True)
    adds = [op for op in g.ops if op.type == "ADD"]
    assert len(adds) == 1 and adds[0].options["fused_activation_function"] == "RELU"
    assert not any(op.type == "RELU" for op in g.ops)


def test_small_cnn_folds_bn_and_shapes():
    data = cnn_model()
    g, s = check(data, (3, 16, 16), sqnr_bound=SQNR_CNN_DB, n_test=8, tflm=True)
    types = [op.type for op in g.ops]
    assert "MUL" not in types and "GATHER" not in types and "SHAPE" not in types, types
    assert types.count("CONV_2D") == 2 and types.count("DEPTHWISE_CONV_2D") == 1
    assert [op.options["fused_activation_function"] for op in g.ops
            if op.type in ("CONV_2D", "DEPTHWISE_CONV_2D")] == ["RELU", "RELU6", "RELU"]
    assert types.count("TRANSPOSE") == 1      # the NCHW input; the flatten after the pool is free
    print(f"small CNN: SQNR vs onnxruntime {s:.1f} dB")


def test_flatten_before_gemm_permutes_weights_not_activations():
    g = load(SINGLE["flatten_4d_gemm"]())
    assert [op.type for op in g.ops] == ["TRANSPOSE", "RESHAPE", "FULLY_CONNECTED"]  # NCHW input


def test_reader_picked_by_extension_or_content(tmp_path):
    data = conv_model()
    for name in ("net.onnx", "net.bin", "net.tflite"):
        (tmp_path / name).write_bytes(data)
        g = load(tmp_path / name)
        assert g.name == "net" and g.ops[1].type == "CONV_2D"
    assert load(data).ops[1].type == "CONV_2D"
    fifo = tmp_path / "fifo.onnx"
    import os
    os.mkfifo(fifo)
    with pytest.raises(ModelError) as e:     # refused unread, never a hang
        load(fifo)
    one_line(e)


@pytest.mark.parametrize("net", ["cnn", "residual"])
def test_same_as_the_network_as_a_float_tflite(net):
    """The imported graph, written as a float .tflite, runs in TFLite's float reference
    kernels as onnxruntime runs the ONNX model; kiln quantizes both to the same int8 model
    (scales, zero points and weights), so ONNX costs no accuracy against float .tflite."""
    data, shape = {"cnn": (cnn_model(), (1, 3, 16, 16)), "residual": (residual_model(), (1, 4, 6, 5))}[net]
    g = load(data)
    as_tflite = load(write(g))
    x = RNG.uniform(-2, 2, size=shape).astype(np.float32)
    np.testing.assert_allclose(run_tflite_ref(write(g), [x])[0], ort_run(data, x), rtol=1e-5, atol=1e-5)
    calib = RNG.uniform(-2, 2, size=(32, *shape)).astype(np.float32)

    def int8_model(q):
        return [(op.type, [(None if q.tensor(i).quant is None else q.tensor(i).quant.scale.tobytes(),
                            None if q.tensor(i).quant is None else q.tensor(i).quant.zero_point.tobytes(),
                            None if q.tensor(i).data is None else q.tensor(i).data.tobytes())
                           for i in op.inputs + op.outputs if i >= 0]) for op in q.ops]

    assert int8_model(quantize(g, calib)) == int8_model(quantize(as_tflite, calib))


def test_nchw_output_keeps_layout():
    data = conv_model(attrs=dict(pads=[1, 1, 1, 1]))
    g = load(data)
    assert g.tensor(g.inputs[0]).shape == (1, 3, 9, 7)
    assert g.tensor(g.outputs[0]).shape == (1, 4, 9, 7) and g.tensor(g.outputs[0]).name == "y"
    assert g.tensor(g.inputs[0]).name == "x"


def test_quantize_cli_writes_tflite_tflm_runs_identically(tmp_path):
    src = tmp_path / "cnn.onnx"
    src.write_bytes(cnn_model())
    np.save(tmp_path / "c.npy", f32(32, 1, 3, 16, 16))
    out = tmp_path / "m.tflite"
    r = subprocess.run([*KILN, "quantize", str(src), "--calibration",
                        str(tmp_path / "c.npy"), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    q = load(out)
    assert q.tensor(q.inputs[0]).dtype == "int8"
    art = compile(q, board="host")
    for _ in range(3):
        x = RNG.integers(-128, 128, size=(1, 3, 16, 16), dtype=np.int8)
        np.testing.assert_array_equal(art.run(x)[0], run_reference(out.read_bytes(), [x])[0])


# --------------------------------------------------------------------------- bad input

def one_line(e) -> str:
    msg = str(e.value)
    assert msg and "\n" not in msg, repr(msg)
    return msg


def test_unsupported_ops_named_all_at_once():
    nodes = [helper.make_node("RNN", ["x"], ["a"], hidden_size=4),
             helper.make_node("Erf", ["a"], ["b"]), helper.make_node("Erf", ["b"], ["c"]),
             helper.make_node("Relu", ["c"], ["y"])]
    # Structurally broken too (RNN lacks its weights): the ops are named first.
    data = model_bytes(nodes, [("x", (1, 2, 3))], [("y", (1, 2, 3))])
    with pytest.raises(ModelError) as e:
        load(data)
    msg = one_line(e)
    assert "opset 13" in msg and "RNN (node 0 [hidden_size])" in msg and "Erf (nodes 1; 2)" in msg


def test_truncated_and_garbage_files(tmp_path):
    data = cnn_model()
    for i, blob in enumerate([data[: len(data) // 2], b"\x08\x07garbage" * 3, b""]):
        p = tmp_path / f"m{i}.onnx"
        p.write_bytes(blob)
        with pytest.raises(ModelError) as e:
            load(p)
        one_line(e)
    p = tmp_path / "cut.onnx"
    p.write_bytes(data[:300])
    r = subprocess.run([*KILN, "info", str(p)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr


def test_dynamic_batch_refused():
    data = model_bytes([helper.make_node("Relu", ["x"], ["y"])], [("x", ("N", 3, 4, 4))],
                       [("y", ("N", 3, 4, 4))])
    with pytest.raises(ModelError) as e:
        load(data)
    msg = one_line(e)
    assert "dynamic shape [N,3,4,4]" in msg and "input_shapes" in msg


def test_dynamic_batch_pinned_by_input_shapes():
    """An export with a dynamic batch (PyTorch's dynamic_axes) compiles once its dims are
    pinned, and computes what onnxruntime computes for that shape."""
    data = model_bytes([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                        helper.make_node("Relu", ["c"], ["y"])],
                       [("x", ("N", 3, 6, 5))], [("y", ("N", 4, 6, 5))],
                       [("w", f32(4, 3, 3, 3, scale=0.5))])
    g = load(data, input_shapes={"x": (1, 3, 6, 5)})
    assert g.tensor(g.inputs[0]).shape == (1, 3, 6, 5)
    assert g.sha256 != load(data, input_shapes={"x": (2, 3, 6, 5)}).sha256
    x = RNG.uniform(-2, 2, size=(1, 3, 6, 5)).astype(np.float32)
    floats = FloatModel(prepare(g)).run([x[None]])[0].reshape(1, 4, 6, 5)
    np.testing.assert_allclose(floats, ort_run(data, x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shapes, match", [
    ({"z": (1, 3, 6, 5)}, "the model's inputs are 'x'"),
    ({"x": (1, 3, 6)}, "has rank 4"),
    ({"x": (1, 3, 6, 7)}, "only dynamic dims can be pinned"),
    ({"x": (0, 3, 6, 5)}, "dims are 1 to"),
    ({"x": ("a", 3, 6, 5)}, "not a sequence of whole numbers"),
])
def test_input_shapes_mismatch_is_one_line(shapes, match):
    data = model_bytes([helper.make_node("Relu", ["x"], ["y"])], [("x", ("N", 3, 6, 5))],
                       [("y", ("N", 3, 6, 5))])
    with pytest.raises(ModelError, match=match) as e:
        load(data, input_shapes=shapes)
    one_line(e)


def test_input_shapes_refused_for_tflite():
    from tflite_builder import TensorSpec, single_op_model

    model = single_op_model("RELU", [TensorSpec((1, 4), scale=0.1, zero_point=0)],
                            [TensorSpec((1, 4), scale=0.1, zero_point=0)])
    with pytest.raises(ModelError, match="a .tflite model's shapes are static"):
        load(model, input_shapes={"x": (1, 4)})


def test_maxpool_pads_on_signed_input_refused():
    data = _single("MaxPool", (1, 4, 6, 6), (1, 4, 3, 3), kernel_shape=[3, 3], strides=[2, 2],
                   pads=[1, 1, 1, 1])
    with pytest.raises(ModelError) as e:
        load(data)
    assert "MaxPool pads [1, 1, 1, 1]" in one_line(e)


def test_constant_node_forms_fold():
    nodes = [helper.make_node("Constant", [], ["s"], value_ints=[1, 12]),
             helper.make_node("Constant", [], ["k"], value_float=0.5),
             helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Mul", ["r", "k"], ["y"])]
    data = model_bytes(nodes, [("x", (1, 3, 2, 2))], [("y", (1, 12))])
    g, _ = check(data, (3, 2, 2))
    assert [op.type for op in g.ops] == ["RESHAPE", "MUL"]   # the boundary transposes cancel


def test_external_data_missing_refused(tmp_path):
    """External data loads from the model's folder (tests/test_onnx_cli.py); a missing
    data file is named."""
    m = onnx.load_from_string(conv_model())
    onnx.save_model(m, tmp_path / "ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.data", size_threshold=0)
    (tmp_path / "ext.data").unlink()
    with pytest.raises(ModelError) as e:
        load(tmp_path / "ext.onnx")
    assert "'ext.data', which is missing" in one_line(e)


def test_shape_computed_from_activations_refused():
    """A Reshape target computed from an activation (not from constants and static shapes)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Cast", ["r"], ["s"], to=TensorProto.INT64),
             helper.make_node("Reshape", ["x", "s"], ["y"])]
    data = model_bytes(nodes, [("x", (2,))], [("y", ("M",))])
    with pytest.raises(ModelError) as e:
        load(data)
    assert "node 1 (Cast): input 0 must be a constant" in one_line(e)


def test_old_opset_refused():
    data = model_bytes([helper.make_node("Relu", ["x"], ["y"])], [("x", (1, 4))], [("y", (1, 4))],
                       opset=11)
    with pytest.raises(ModelError) as e:
        load(data)
    assert "opset 11" in one_line(e)


def test_hostile_names_reach_c_escaped():
    """Value and node names are model text: the C built from them compiles and runs."""
    evil = "x*/\n#error evil\n/*\u202e"
    nodes = [helper.make_node("Relu", [evil], ["mid */ #"], name="n\x00\x1b[2J"),
             helper.make_node("Sigmoid", ["mid */ #"], ["y"])]
    data = model_bytes(nodes, [(evil, (1, 6))], [("y", (1, 6))])
    g = load(data)
    art = compile(quantize(g, f32(16, 1, 6)), board="host")
    assert art.run(np.zeros((1, 6), np.int8))[0].shape == (1, 6)


def test_mutated_files_are_one_line_errors_or_compile():
    """Byte-level mutations of a whole CNN: parsed, quantized and compiled, or one ModelError line."""
    from kiln.compiler import KilnError
    from kiln.compiler.frontend import onnx_reader

    data, rng, compiled = cnn_model(), np.random.default_rng(3), 0
    calib = f32(8, 1, 3, 16, 16)
    for i in range(200):
        b = bytearray(data)
        for _ in range(rng.integers(1, 5)):
            b[rng.integers(0, len(b))] = rng.integers(0, 256)
        try:
            g = onnx_reader.parse(bytes(b))
            if i % 8 == 0:
                compile(quantize(g, calib), board="host")
                compiled += 1
        except KilnError as e:
            assert str(e) and "\n" not in str(e), repr(str(e))
    assert compiled > 0


def test_hard_sigmoid_times_input_is_one_hard_swish():
    g = load(SINGLE["hard_swish_decomposed"]())
    assert [op.type for op in g.ops if op.type not in ("TRANSPOSE", "RESHAPE")] == ["HARD_SWISH"]
    g = load(SINGLE["hard_sigmoid"]())     # alone: alpha·x + beta clamped to [0, 1]
    assert [op.type for op in g.ops if op.type not in ("TRANSPOSE", "RESHAPE")] == \
        ["MUL", "ADD", "MAXIMUM", "MINIMUM"]


def audio_cnn_model() -> bytes:
    """A 1-D audio CNN as PyTorch exports it: Conv1d-BatchNorm1d-ReLU, MaxPool1d, a strided
    dilated Conv1d, a depthwise Conv1d with a residual Add, AvgPool1d, GlobalAveragePool,
    Flatten, Gemm, Softmax."""
    bn = lambda n, c: [(f"{n}_s", np.abs(f32(c)) + 0.5), (f"{n}_b", f32(c, scale=0.2)),  # noqa: E731
                       (f"{n}_m", f32(c, scale=0.2)), (f"{n}_v", np.abs(f32(c)) + 0.5)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a1"], pads=[2, 2]),
        helper.make_node("BatchNormalization", ["a1", "bn1_s", "bn1_b", "bn1_m", "bn1_v"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["a3"]),
        helper.make_node("MaxPool", ["a3"], ["a4"], kernel_shape=[2], strides=[2]),
        helper.make_node("Conv", ["a4", "w2", "b2"], ["a5"], strides=[2], dilations=[2], pads=[2, 2]),
        helper.make_node("Relu", ["a5"], ["a6"]),
        helper.make_node("Conv", ["a6", "w3", "b3"], ["a7"], group=8, pads=[1, 1]),
        helper.make_node("Add", ["a7", "a6"], ["a8"]),
        helper.make_node("AveragePool", ["a8"], ["a9"], kernel_shape=[2], strides=[2]),
        helper.make_node("GlobalAveragePool", ["a9"], ["a10"]),
        helper.make_node("Flatten", ["a10"], ["a11"]),
        helper.make_node("Gemm", ["a11", "fc", "fcb"], ["a12"], transB=1),
        helper.make_node("Softmax", ["a12"], ["y"]),
    ]
    inits = [("w1", f32(8, 2, 5, scale=0.4)), ("b1", f32(8, scale=0.1)), *bn("bn1", 8),
             ("w2", f32(8, 8, 3, scale=0.3)), ("b2", f32(8, scale=0.1)),
             ("w3", f32(8, 1, 3, scale=0.4)), ("b3", f32(8, scale=0.1)),
             ("fc", f32(5, 8, scale=0.5)), ("fcb", f32(5, scale=0.1))]
    return model_bytes(nodes, [("x", (1, 2, 40))], [("y", (1, 5))], inits)


def test_audio_cnn_1d():
    g, _ = check(audio_cnn_model(), (2, 40), sqnr_bound=SQNR_CNN_DB, tflm=True)
    kinds = [op.type for op in g.ops]
    # One layout transpose, at the input: the 1-D ops share the [N, 1, L, C] layout.
    assert kinds.count("TRANSPOSE") == 1, kinds
    assert kinds.count("CONV_2D") == 2 and kinds.count("DEPTHWISE_CONV_2D") == 1, kinds


def test_conv1d_output_keeps_ncl_layout():
    data = model_bytes([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1])],
                       [("x", (1, 3, 10))], [("y", (1, 4, 10))], [("w", f32(4, 3, 3, scale=0.5))])
    g, _ = check(data, (3, 10))
    assert g.tensor(g.outputs[0]).shape == (1, 4, 10)
