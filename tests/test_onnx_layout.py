"""ONNX layout: --layout nhwc (load(..., layout="nhwc")) and the pass that cancels
transposes (compiler/passes/cancel_transposes.py).

ONNX is NCHW, kiln's kernels NHWC. By default a model keeps its NCHW inputs and outputs
(one TRANSPOSE at each image boundary) and no TRANSPOSE stays between layers, even where
the model permutes its own tensors around layout-agnostic ops; with layout "nhwc" there
is none at all. The int8 outputs are bit-identical across the three (after the layout
change), and the exported .tflite runs bit-identically in tflite-micro.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx import TensorProto, helper, numpy_helper
from reference import run_reference

from conftest import run_kiln
from kiln.compiler import compile, load, quantize
from kiln.compiler.frontend import onnx_reader
from kiln.compiler.frontend.tflite_writer import write
from kiln.compiler.ir import Graph, Op, Tensor
from kiln.compiler.passes.cancel_transposes import cancel_transposes

ort = pytest.importorskip("onnxruntime")

NCHW_TO_NHWC = (0, 2, 3, 1)


def weights(seed=5):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.5,
            rng.standard_normal((5, 4, 3, 3)).astype(np.float32) * 0.5)


def conv_relu_conv(permutes: bool = False, extra: bool = False) -> bytes:
    """Conv → Relu → Conv on [1, 3, 8, 8]. permutes: the Relu between the model's own
    Transpose(0,2,3,1) and Transpose(0,3,1,2) (a channels-last block); extra: a scalar
    Mul and a Sigmoid in that block as well."""
    w1, w2 = weights()
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1])]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")]
    if permutes:
        nodes.append(helper.make_node("Transpose", ["c1"], ["t"], perm=[0, 2, 3, 1]))
        last = "r"
        nodes.append(helper.make_node("Relu", ["t"], ["r"]))
        if extra:
            inits.append(numpy_helper.from_array(np.array(0.75, np.float32), "k"))
            nodes += [helper.make_node("Mul", ["r", "k"], ["m"]),
                      helper.make_node("Sigmoid", ["m"], ["s"])]
            last = "s"
        nodes.append(helper.make_node("Transpose", [last], ["u"], perm=[0, 3, 1, 2]))
    else:
        nodes.append(helper.make_node("Relu", ["c1"], ["u"]))
    nodes.append(helper.make_node("Conv", ["u", "w2"], ["y"], pads=[1, 1, 1, 1]))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 8, 8])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def samples(n, shape=(1, 3, 8, 8), seed=9):
    return np.random.default_rng(seed).uniform(-2, 2, (n, *shape)).astype(np.float32)


def op_types(g: Graph) -> list[str]:
    return [op.type for op in g.ops]


def c_source(art) -> str:
    return "\n".join(text for name, text in art.files.items() if name.endswith(".c"))


def int8_build(data: bytes, layout: str = "nchw", shape=(1, 3, 8, 8)):
    """(quantized graph, host artifact) on one calibration set (NHWC for "nhwc")."""
    g = load(data, layout=layout)
    calib = samples(32, shape)
    if layout == "nhwc":
        calib = calib.transpose(0, 1, 3, 4, 2)
    q = quantize(g, calib)
    return q, compile(q, board="host")


def run_int8(q, art, x):
    t = q.tensor(q.inputs[0])
    scale, zp = t.quant.single()
    qx = np.clip(np.floor(x / np.float32(scale) + 0.5) + zp, -128, 127).astype(np.int8)
    return qx, art.run(qx)[0]


def test_conv_relu_conv_has_no_transpose_between_layers():
    """NCHW I/O: a TRANSPOSE at the input and at the output, none inside; nhwc: none."""
    nchw = load(conv_relu_conv())
    assert op_types(nchw) == ["TRANSPOSE", "CONV_2D", "CONV_2D", "TRANSPOSE"]
    nhwc = load(conv_relu_conv(), layout="nhwc")
    assert op_types(nhwc) == ["CONV_2D", "CONV_2D"]
    assert nhwc.tensor(nhwc.inputs[0]).shape == (1, 8, 8, 3)
    assert nhwc.tensor(nhwc.outputs[0]).shape == (1, 8, 8, 5)
    assert nhwc.sha256 != nchw.sha256
    # The generated C: the transpose kernel is called only at the boundary / never.
    _, art = int8_build(conv_relu_conv())
    calls = [op["type"] for op in art.report["ops"]]
    assert calls[0] == calls[-1] == "TRANSPOSE" and "TRANSPOSE" not in calls[1:-1]
    _, art = int8_build(conv_relu_conv(), "nhwc")
    assert "TRANSPOSE" not in [op["type"] for op in art.report["ops"]]
    assert "transpose" not in c_source(art).lower()


@pytest.mark.parametrize("extra", [False, True], ids=["relu", "relu_mul_sigmoid"])
def test_model_permutes_cancel(extra):
    """The model's own Transpose pair around elementwise ops: the reader alone leaves
    three shuffles between the convs; the pass leaves none, and the float graph still
    computes what onnxruntime computes."""
    data = conv_relu_conv(permutes=True, extra=extra)
    raw = onnx_reader.parse(data)
    assert op_types(raw)[1:-1].count("TRANSPOSE") >= 2
    g = load(data)
    assert "TRANSPOSE" not in op_types(g)[1:-1]
    assert "TRANSPOSE" not in op_types(load(data, layout="nhwc"))
    from kiln.compiler.quantize import FloatModel, prepare

    xs = samples(3)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for x in xs:
        want = sess.run(None, {"x": x})[0]
        got = FloatModel(prepare(g)).run([x[None]])[0].reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_permuted_model_int8_tracks_onnxruntime():
    """Transpose → Relu → Transpose in the model: int8 CONV, RELU, CONV between the
    boundary transposes (the Relu is not fused: the reader fuses one only right after
    its Conv), tracking onnxruntime's float outputs."""
    data = conv_relu_conv(permutes=True)
    q, art = int8_build(data)
    assert op_types(q) == ["TRANSPOSE", "CONV_2D", "RELU", "CONV_2D", "TRANSPOSE"]
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    out = q.tensor(q.outputs[0])
    scale, zp = out.quant.single()
    for x in samples(4, seed=3):
        want = sess.run(None, {"x": x})[0]
        got = (run_int8(q, art, x)[1].astype(np.float32) - zp) * scale
        sqnr = 10 * np.log10(np.sum(want ** 2) / np.sum((want - got) ** 2))
        assert sqnr > 20, sqnr            # test_onnx.py asks 20 dB of its CNNs


@pytest.mark.parametrize("permutes", [False, True])
def test_nhwc_outputs_identical_to_nchw(permutes):
    """--layout nhwc changes only the layout of the inputs and outputs: every int8 value
    is the NCHW build's, transposed; its .tflite runs in tflite-micro bit-identically."""
    data = conv_relu_conv(permutes=permutes)
    q_nchw, art_nchw = int8_build(data)
    q_nhwc, art_nhwc = int8_build(data, "nhwc")
    for x in samples(4, seed=4):
        _, y_nchw = run_int8(q_nchw, art_nchw, x)
        qx, y_nhwc = run_int8(q_nhwc, art_nhwc, x.transpose(0, 2, 3, 1))
        np.testing.assert_array_equal(y_nhwc, y_nchw.transpose(0, 2, 3, 1))
        ref = run_reference(write(q_nhwc), [qx])[0]
        np.testing.assert_array_equal(y_nhwc, ref.reshape(y_nhwc.shape))


def audio_cnn() -> bytes:
    """Conv1d → Relu → MaxPool1d → Conv1d on [1, 4, 16] (PyTorch's [N, C, L])."""
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2], strides=[2]),
             helper.make_node("Conv", ["p", "w2"], ["y"], pads=[1, 1])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 8])],
        [numpy_helper.from_array(rng.standard_normal((8, 4, 3)).astype(np.float32), "w1"),
         numpy_helper.from_array(rng.standard_normal((6, 8, 3)).astype(np.float32), "w2")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def test_1d_cnn_nhwc_is_nlc_without_transposes():
    """A 1-D CNN's [N, C, L] input and output become [N, L, C]: no TRANSPOSE at all
    (the views to and from [N, 1, L, C] are RESHAPEs, aliased: no copy)."""
    data = audio_cnn()
    assert "TRANSPOSE" in op_types(load(data))
    g = load(data, layout="nhwc")
    assert "TRANSPOSE" not in op_types(g)
    assert g.tensor(g.inputs[0]).shape == (1, 16, 4)
    assert g.tensor(g.outputs[0]).shape == (1, 8, 6)
    q_nchw, art_nchw = int8_build(data, shape=(1, 4, 16))
    calib = samples(32, (1, 4, 16)).transpose(0, 1, 3, 2)
    q = quantize(g, calib)
    art = compile(q, board="host")
    for x in samples(3, (1, 4, 16), seed=8):
        _, want = run_int8(q_nchw, art_nchw, x)
        _, got = run_int8(q, art, x.transpose(0, 2, 1))
        np.testing.assert_array_equal(got, want.transpose(0, 2, 1))


def test_sequence_input_keeps_its_shape_under_nhwc():
    """A rank-3 input no 1-D window op reads ([N, T, F] into a MatMul) is no image:
    layout nhwc leaves it as it is."""
    w = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 3])],
        [numpy_helper.from_array(w, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    g = load(m.SerializeToString(), layout="nhwc")
    assert g.tensor(g.inputs[0]).shape == (1, 5, 6)


def test_layout_on_the_cli(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    path.write_bytes(conv_relu_conv())
    code, out, _ = run_kiln(capsys, "info", path, "--layout", "nhwc")
    assert code == 0
    assert "input  x [1, 8, 8, 3]" in out and "output y [1, 8, 8, 5]" in out


# -- the pass on hand-made graphs --------------------------------------------------------

def _graph(perms: list[tuple[int, ...]], middle: list[str] = ()) -> Graph:
    """x [2, 3, 4, 5] → TRANSPOSE(perms[0]) → middle ops → TRANSPOSE(perms[1]) ..."""
    tensors = [Tensor(0, "x", (2, 3, 4, 5), "float32")]
    ops, value = [], 0

    def new(name, shape, data=None, dtype="float32"):
        tensors.append(Tensor(len(tensors), name, tuple(shape), dtype, data=data))
        return len(tensors) - 1

    for i, perm in enumerate(perms):
        shape = tuple(tensors[value].shape[p] for p in perm)
        p = new(f"perm{i}", (len(perm),), np.array(perm, np.int32), "int32")
        out = new(f"t{i}", shape)
        ops.append(Op("TRANSPOSE", [value, p], [out]))
        value = out
        if i == 0:
            for j, kind in enumerate(middle):
                out = new(f"m{j}", tensors[value].shape)
                ops.append(Op(kind, [value], [out]))
                value = out
    return Graph("g", tensors, ops, [0], [value])


def _evaluate(g: Graph, x: np.ndarray) -> np.ndarray:
    values = {0: x}
    for op in g.ops:
        a = values[op.inputs[0]]
        if op.type == "TRANSPOSE":
            values[op.outputs[0]] = a.transpose(g.tensor(op.inputs[1]).data)
        else:
            values[op.outputs[0]] = {"RELU": lambda v: np.maximum(v, 0),
                                     "TANH": np.tanh}[op.type](a)
    return values[g.outputs[0]]


@pytest.mark.parametrize("perms, middle, left", [
    ([(0, 2, 3, 1), (0, 3, 1, 2), (0, 2, 3, 1)], [], ["TRANSPOSE"]),     # pair gone
    ([(0, 2, 3, 1), (1, 0, 2, 3)], [], ["TRANSPOSE"]),                   # merged into one
    ([(0, 2, 3, 1), (0, 3, 1, 2), (0, 1, 3, 2)], ["RELU", "TANH"], ["RELU", "TANH", "TRANSPOSE"]),
    ([(0, 2, 3, 1), (0, 1, 3, 2)], ["RELU"], ["RELU", "TRANSPOSE"]),        # moved, merged
])
def test_pass_on_chains(perms, middle, left):
    g = _graph(perms, middle)
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    out = cancel_transposes(g)
    out.verify()
    assert op_types(out) == left
    np.testing.assert_array_equal(_evaluate(out, x), _evaluate(g, x))
    assert out.outputs == g.outputs      # the model's output tensor is kept


def test_pass_keeps_a_pair_that_writes_the_model_output():
    g = _graph([(0, 2, 3, 1), (0, 3, 1, 2)])
    assert op_types(cancel_transposes(g)) == ["TRANSPOSE", "TRANSPOSE"]


def channels_last_block() -> bytes:
    """Two convs, each permuted to channels-last, added, scaled per channel (a [C]
    constant on the last axis, as ConvNeXt's layer scale), permuted back into a Conv."""
    rng = np.random.default_rng(6)
    w = lambda *s: numpy_helper.from_array((rng.standard_normal(s) * 0.5).astype(np.float32))
    inits = [w(4, 3, 3, 3), w(4, 3, 1, 1), w(5, 4, 3, 3), w(4)]
    for t, name in zip(inits, ("wa", "wb", "wc", "gamma")):
        t.name = name
    nodes = [helper.make_node("Conv", ["x", "wa"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "wb"], ["b"]),
             helper.make_node("Transpose", ["a"], ["ta"], perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["b"], ["tb"], perm=[0, 2, 3, 1]),
             helper.make_node("Add", ["ta", "tb"], ["s"]),
             helper.make_node("Mul", ["s", "gamma"], ["m"]),
             helper.make_node("Tanh", ["m"], ["h"]),
             helper.make_node("Transpose", ["h"], ["u"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["u", "wc"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 8, 8])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def test_channels_last_block_residual_and_per_channel_constant():
    """A residual Add of two permuted branches and a per-channel constant move with the
    permute: no TRANSPOSE inside; float = onnxruntime; int8 = tflite-micro on the export."""
    from kiln.compiler.quantize import FloatModel, prepare

    data = channels_last_block()
    assert op_types(onnx_reader.parse(data))[1:-1].count("TRANSPOSE") >= 3
    g = load(data)
    assert "TRANSPOSE" not in op_types(g)[1:-1]
    assert "TRANSPOSE" not in op_types(load(data, layout="nhwc"))
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    xs = samples(3, seed=12)
    for x in xs:
        want = sess.run(None, {"x": x})[0]
        got = FloatModel(prepare(g)).run([x[None]])[0].reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    q, art = int8_build(data, "nhwc")
    for x in xs:
        qx, y = run_int8(q, art, x.transpose(0, 2, 3, 1))
        np.testing.assert_array_equal(y, run_reference(write(q), [qx])[0].reshape(y.shape))
