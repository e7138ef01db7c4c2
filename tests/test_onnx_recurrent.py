"""ONNX LSTM and GRU (compiler/frontend/onnx_recurrent.py): float models built with
onnx.helper, imported (LSTM → UNIDIRECTIONAL_SEQUENCE_LSTM, GRU unrolled into FC and
elementwise ops), quantized by kiln, compiled for the host.

For each: kiln's float evaluator matches onnxruntime (the import is exact); the int8
model tracks onnxruntime's float outputs (SQNR bound below, measured figures in the
docstrings); the exported .tflite runs in tflite-micro bit-identically to kiln, over
several sequences (the LSTM's state reset between them, as the ONNX model starts each
from zero). Refusals are one line naming the attribute or input.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx import TensorProto, helper, numpy_helper
from reference import run_reference

from kiln.compiler import ModelError, compile, load, quantize
from kiln.compiler.frontend.tflite_writer import write
from kiln.compiler.quantize import FloatModel, prepare

ort = pytest.importorskip("onnxruntime")

# int8 against onnxruntime's float outputs, per output and sequence; measured 32.7-40.4 dB
# on these shapes (minimum over 4 test sequences; a GRU requantizes at every op of every
# step, with one scale per op over the steps; an LSTM only at its output).
SQNR_DB = 25.0


def rnn_model(kind: str, seq=6, batch=1, depth=5, hidden=7, seed=0, outputs=("Y", "Y_h"),
              head: int = 0, nodes_extra=(), inputs_extra=(), **attrs) -> bytes:
    """An ONNX LSTM or GRU on x [seq, batch, depth]; head > 0: its Y_h through a Gemm to
    `head` classes (the model's only output). inputs_extra: the node's inputs after B
    (sequence_lens, initial_h, initial_c, P)."""
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    rng = np.random.default_rng(seed)
    gates = 4 if kind == "LSTM" else 3
    inits = [numpy_helper.from_array((rng.standard_normal((dirs, gates * hidden, depth)) * 0.5)
                                     .astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((dirs, gates * hidden, hidden)) * 0.4)
                                     .astype(np.float32), "R"),
             numpy_helper.from_array((rng.standard_normal((dirs, 2 * gates * hidden)) * 0.3)
                                     .astype(np.float32), "B")]
    ins = ["x", "W", "R", "B", *inputs_extra]
    nodes = [helper.make_node(kind, ins, ["Y", "Y_h"] + (["Y_c"] if "Y_c" in outputs else []),
                              hidden_size=hidden, **attrs), *nodes_extra]
    shapes = {"Y": [seq, dirs, batch, hidden], "Y_h": [dirs, batch, hidden],
              "Y_c": [dirs, batch, hidden]}
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outputs]
    if head:
        inits += [numpy_helper.from_array(np.array([batch, hidden], np.int64), "flat"),
                  numpy_helper.from_array(rng.standard_normal((hidden, head))
                                          .astype(np.float32), "G")]
        nodes += [helper.make_node("Reshape", ["Y_h", "flat"], ["h2"]),
                  helper.make_node("Gemm", ["h2", "G"], ["logits"])]
        outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, head])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, depth])],
        outs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m.SerializeToString()


def ort_outputs(data: bytes, x: np.ndarray) -> list[np.ndarray]:
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


def sqnr_db(ref, got) -> float:
    ref, got = np.asarray(ref, np.float64).reshape(-1), np.asarray(got, np.float64).reshape(-1)
    return float(10 * np.log10(np.sum(ref ** 2) / max(np.sum((ref - got) ** 2), 1e-30)))


def check(data: bytes, shape, n_test=4, seed=1):
    """Float import exact; int8 = tflite-micro on the export; SQNR per output and test."""
    rng = np.random.default_rng(seed)
    g = load(data)
    xs = rng.uniform(-1, 1, (n_test, *shape)).astype(np.float32)
    floats = FloatModel(prepare(g)).run([xs])
    for i, x in enumerate(xs):
        for want, got in zip(ort_outputs(data, x), floats):
            np.testing.assert_allclose(got[i].reshape(want.shape), want, rtol=1e-5, atol=1e-5)
    calib = np.concatenate([rng.uniform(-1, 1, (64, *shape)).astype(np.float32), xs])
    q = quantize(g, calib)
    art = compile(q, board="host")
    tflite = write(q)
    s_in, z_in = q.tensor(q.inputs[0]).quant.single()
    sqnrs = []
    for x in xs:
        qx = np.clip(np.floor(x / s_in + 0.5) + z_in, -128, 127).astype(np.int8)
        art.reset()                           # each sequence from the zero state
        got = art.run(qx)
        for o, ref in zip(got, run_reference(tflite, [qx])):
            np.testing.assert_array_equal(o.reshape(-1), ref.reshape(-1))
        for tid, o, want in zip(q.outputs, got, ort_outputs(data, x)):
            scale, zp = q.tensor(tid).quant.single()
            sqnrs.append(sqnr_db(want, (o.astype(np.float32) - zp) * scale))
    return g, q, art, min(sqnrs)


CASES = {
    "lstm": dict(kind="LSTM"),
    "lstm_seq1": dict(kind="LSTM", seq=1),
    "lstm_long": dict(kind="LSTM", seq=12, depth=3, hidden=10),
    "lstm_batch2": dict(kind="LSTM", batch=2),
    "gru": dict(kind="GRU"),
    "gru_before_reset": dict(kind="GRU", linear_before_reset=1),
    "gru_seq1": dict(kind="GRU", seq=1),
    "gru_seq1_before_reset": dict(kind="GRU", seq=1, linear_before_reset=1),
    "gru_batch2": dict(kind="GRU", batch=2, seq=4),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_recurrent(case):
    kw = dict(CASES[case])
    data = rnn_model(**kw)
    shape = (kw.get("seq", 6), kw.get("batch", 1), kw.get("depth", 5))
    g, q, _, sqnr = check(data, shape)
    assert sqnr > SQNR_DB, f"SQNR {sqnr:.1f} dB"
    types = {op.type for op in q.ops}
    if kw["kind"] == "LSTM":
        assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in types
        lstm = next(op for op in q.ops if op.type == "UNIDIRECTIONAL_SEQUENCE_LSTM")
        assert q.tensor(lstm.inputs[19]).dtype == "int16"      # the int16 cell state
    else:
        assert "FULLY_CONNECTED" in types and "UNIDIRECTIONAL_SEQUENCE_LSTM" not in types
        # The steps share one quantization per tensor: the TANH inputs (step 0's has no
        # recurrent term, so it may differ) take at most two scales, not one per step.
        scales = {float(q.tensor(op.inputs[0]).quant.scale[0])
                  for op in q.ops if op.type == "TANH"}
        assert len(scales) <= 2, scales


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_classifier_top1(kind):
    """An LSTM/GRU → last state → Gemm classifier: top-1 of kiln's int8 build against
    onnxruntime's float model on 48 sequences (measured: LSTM 46/48, GRU 48/48)."""
    data = rnn_model(kind, seq=8, depth=4, hidden=12, head=5, seed=3)
    rng = np.random.default_rng(7)
    calib = rng.uniform(-1, 1, (128, 8, 1, 4)).astype(np.float32)
    q = quantize(load(data), calib)
    art = compile(q, board="host")
    s_in, z_in = q.tensor(q.inputs[0]).quant.single()
    agree = 0
    tests = rng.uniform(-1, 1, (48, 8, 1, 4)).astype(np.float32)
    for x in tests:
        art.reset()
        qx = np.clip(np.floor(x / s_in + 0.5) + z_in, -128, 127).astype(np.int8)
        agree += int(np.argmax(art.run(qx)[0]) == np.argmax(ort_outputs(data, x)[0]))
    assert agree >= 45, f"top-1 agreement {agree}/48"


def test_lstm_state_persists_until_reset():
    """kiln's LSTM keeps its state from one run to the next, as tflite-micro's does: a
    second run without reset continues the sequence; after reset() it starts again."""
    data = rnn_model("LSTM")
    rng = np.random.default_rng(2)
    q = quantize(load(data), rng.uniform(-1, 1, (32, 6, 1, 5)).astype(np.float32))
    art = compile(q, board="host")
    x = rng.integers(-100, 100, (6, 1, 5)).astype(np.int8)
    first = art.run(x)[0]
    assert not np.array_equal(art.run(x)[0], first)
    art.reset()
    np.testing.assert_array_equal(art.run(x)[0], first)


def test_zero_initial_state_and_full_sequence_lens_accepted():
    """initial_h / initial_c given as zeros and sequence_lens equal to the length are
    what the model computes without them (exporters write them)."""
    extra = [numpy_helper.from_array(np.array([6], np.int32), "lens"),
             numpy_helper.from_array(np.zeros((1, 1, 7), np.float32), "h0")]
    data = rnn_model("GRU", inputs_extra=["lens", "h0"])     # sequence_lens, initial_h
    plain = rnn_model("GRU")
    import onnx

    m = onnx.load_from_string(data)
    m.graph.initializer.extend(extra)
    g = load(m.SerializeToString())
    assert [op.type for op in g.ops] == [op.type for op in load(plain).ops]


def _with(kind, **kw):
    return rnn_model(kind, **kw)


@pytest.mark.parametrize("kind, kw, match", [
    ("LSTM", dict(direction="bidirectional"), "LSTM direction=bidirectional is not supported"),
    ("GRU", dict(direction="reverse"), "GRU direction=reverse is not supported"),
    ("LSTM", dict(activations=["Sigmoid", "Relu", "Tanh"]), "activations=['Sigmoid', 'Relu', 'Tanh']"),
    ("GRU", dict(activations=["HardSigmoid", "Tanh"]), "GRU activations="),
    ("LSTM", dict(clip=3.0), "LSTM attribute clip is not supported"),
    ("GRU", dict(activation_alpha=[0.5]), "GRU attribute activation_alpha"),
    ("LSTM", dict(input_forget=1), "input_forget=1"),
    ("GRU", dict(layout=1, seq=1), "layout=1"),
    ("LSTM", dict(outputs=("Y", "Y_c")), "LSTM output Y_c"),
    ("GRU", dict(seq=5000, depth=1, hidden=1), "GRU of 5000 steps: kiln unrolls"),
    ("LSTM", dict(batch=0), "LSTM with an empty dimension"),
])
def test_refused_in_one_line(kind, kw, match):
    with pytest.raises(ModelError, match=match.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)")) as e:
        load(_with(kind, **kw))
    assert "\n" not in str(e.value)


def test_peepholes_refused():
    import onnx

    m = onnx.load_from_string(rnn_model("LSTM", inputs_extra=["", "", "", "P"]))
    m.graph.initializer.append(numpy_helper.from_array(np.zeros((1, 21), np.float32), "P"))
    with pytest.raises(ModelError, match="LSTM input P \\(peepholes\\) is not supported"):
        load(m.SerializeToString())


@pytest.mark.parametrize("extra, init, match", [
    (["lens"], np.array([4], np.int32), "sequence_lens \\[4\\] are not the full length 6"),
    (["", "h0"], np.ones((1, 1, 7), np.float32), "input initial_h is not supported"),
])
def test_state_inputs_refused(extra, init, match):
    import onnx

    m = onnx.load_from_string(rnn_model("LSTM", inputs_extra=extra))
    m.graph.initializer.append(numpy_helper.from_array(init, extra[-1]))
    with pytest.raises(ModelError, match=match):
        load(m.SerializeToString())


@pytest.mark.slow
@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_classifier_on_qemu(tmp_path, kind):
    """The ONNX LSTM/GRU classifier quantized by kiln, as standalone firmware on QEMU
    mps2-an386 (from reset: one sequence) = tflite-micro on the export (measured: LSTM
    92,562, GRU 112,116 instructions for 8 steps of 12 units)."""
    from conftest import require_tool
    from kiln.project_gen import create_project

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    data = rnn_model(kind, seq=8, depth=4, hidden=12, head=5, seed=3)
    rng = np.random.default_rng(7)
    q = quantize(load(data), rng.uniform(-1, 1, (128, 8, 1, 4)).astype(np.float32))
    path = tmp_path / f"{kind.lower()}.tflite"
    path.write_bytes(write(q))
    s_in, z_in = q.tensor(q.inputs[0]).quant.single()
    x = rng.uniform(-1, 1, (1, 8, 1, 4)).astype(np.float32)
    xq = np.clip(np.floor(x / s_in + 0.5) + z_in, -128, 127).astype(np.int8)
    result = create_project(path, board="mps2-an386", out_dir=tmp_path / "p", inputs=[xq]).run()
    print(f"{kind}: {result.instructions} instructions")
    want = run_reference(path.read_bytes(), xq[0])[0]
    np.testing.assert_array_equal(result.outputs[0].reshape(want.shape), want)
