"""`kiln quantize` of recurrent float models: Keras GRU and SimpleRNN (a WHILE loop,
unrolled by the frontend) and SVDF (its state carried across the calibration samples).

The int8 models kiln writes run in tflite-micro exactly as in kiln, and keep the float
model's top class on inputs drawn like the calibration data. TF's converter cannot make
int8 versions of the GRU/SimpleRNN fixtures (its calibrator crashes on WHILE models: TF
2.15 and 2.21, see tests/fixtures/recurrent/make_models.py), so kiln's quantization of
them is what is checked against tflite-micro here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kiln.compiler import compile as kiln_compile
from kiln.compiler import load, quantize
from kiln.compiler.frontend import tflite_writer
from kiln.compiler.quantize import FloatModel, prepare
from reference import assert_equal_exact, run_reference
from test_quantize_lstm import Tflm, _quantize_input

FIXTURES = Path(__file__).parent / "fixtures" / "recurrent"
sys.path.insert(0, str(FIXTURES))
from make_models import MODELS, sequences  # noqa: E402  (no TensorFlow needed)


@pytest.fixture(scope="module", params=list(MODELS))
def keras_rnn(request):
    """(name, float graph, int8 graph, exported .tflite, test inputs (300))."""
    name = request.param
    _, steps, _ = MODELS[name]
    g = load(FIXTURES / f"{name}_float.tflite")
    calib, _ = sequences(200, steps, seed=3)          # as make_models.py's representative set
    q = quantize(g, calibration=calib[:, None])
    x, _ = sequences(300, steps, seed=7)
    return name, g, q, tflite_writer.write(q), x[:, None]


def test_keras_rnn_quantized_bit_exact_with_tflm(keras_rnn):
    _, _, q, data, x = keras_rnn
    art = kiln_compile(load(data), board="host")
    tflm = Tflm(data)
    for i, xi in enumerate(_quantize_input(q, x[:20])):
        assert_equal_exact(art.run(xi)[0], tflm(xi), f"sample {i}")


def test_keras_rnn_steps_share_one_quantization(keras_rnn):
    """Like TF's converter quantizing the loop body once: every step's copy of a body
    tensor has one scale, so the steps share weights, biases, tables and multipliers
    (the GRU's C holds one copy of each FC's weights)."""
    name, _, q, _, _ = keras_rnn
    fcs = [op for op in q.ops if op.type == "FULLY_CONNECTED"]
    weights = {op.inputs[1] for op in fcs}
    assert len(weights) == 3          # input, recurrent, dense: one copy each
    tanh = [q.tensor(op.inputs[0]).quant.single() for op in q.ops if op.type == "TANH"]
    assert len(tanh) == MODELS[name][1] and len(set(tanh)) == 1


def test_keras_rnn_quantized_agrees_with_float(keras_rnn):
    """Top-1 of the int8 model (kiln) = the float model's on >= 95% of 300 inputs drawn
    like the calibration data (measured: GRU 100%, SimpleRNN 97.7%)."""
    _, g, q, data, x = keras_rnn
    want = FloatModel(prepare(g)).run([x])[0].reshape(len(x), -1).argmax(axis=1)
    art = kiln_compile(load(data), board="host")
    got = np.array([int(np.argmax(art.run(xi)[0])) for xi in _quantize_input(q, x)])
    agreement = float(np.mean(got == want))
    assert agreement >= 0.95, f"top-1 agreement {agreement:.3f}"


@pytest.mark.parametrize("name", list(MODELS))
def test_int8_while_fixture_bit_exact_with_tflm_while_kernel(name):
    """The int8 GRU / SimpleRNN with their WHILE kept (make_int8_while.py: the Keras
    model's three subgraphs in kiln's int8 form): tflite-micro runs the loop with its
    while kernel, kiln unrolls it; equal outputs on inputs drawn like the data, and the
    top class agrees with the float model's (measured: 30/30 for both; on 300: GRU
    100%, SimpleRNN 98.3%)."""
    _, steps, _ = MODELS[name]
    data = (FIXTURES / f"{name}_int8_while.tflite").read_bytes()
    g = load(data)
    assert not any(op.type == "WHILE" for op in g.ops)
    art = kiln_compile(g, board="host")
    x, _ = sequences(30, steps, seed=11)
    want_float = FloatModel(prepare(load(FIXTURES / f"{name}_float.tflite"))).run([x[:, None]])[0]
    agree = 0
    for i, xi in enumerate(_quantize_input(g, x[:, None])):
        got = art.run(xi)[0]
        assert_equal_exact(got, run_reference(data, xi)[0], f"sample {i}")
        agree += int(np.argmax(got) == np.argmax(want_float[i]))
    assert agree >= 28, f"{agree}/30"


@pytest.mark.slow
@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an385"])
def test_int8_gru_while_on_qemu(tmp_path, board):
    """The int8 GRU with its WHILE (20 steps unrolled by kiln) as standalone firmware =
    tflite-micro's while kernel (measured: 364,965 instructions on mps2-an386, 494,164
    on mps2-an385)."""
    from conftest import require_tool
    from kiln.project_gen import create_project

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    _, steps, _ = MODELS["gru"]
    path = FIXTURES / "gru_int8_while.tflite"
    x, _ = sequences(2, steps, seed=9)
    xq = _quantize_input(load(path), x[:, None])
    result = create_project(path, board=board, out_dir=tmp_path / "p", inputs=[xq]).run()
    print(f"{board}: {result.instructions} instructions")
    want = np.concatenate([run_reference(path.read_bytes(), xi)[0] for xi in xq])
    assert_equal_exact(result.outputs[0].reshape(want.shape), want, board)


# --- float SVDF: its state carried across the calibration samples --------------------------

def float_svdf_model(rng: np.random.Generator, batches: int = 1) -> bytes:
    """x (B, 20) → SVDF (16 filters, rank 1, memory 6, RELU) → SVDF (12 filters, rank 2,
    memory 4) → FC (6 → 3) → SOFTMAX, float weights (a keyword model's shape, smaller)."""
    from tflite_builder import OpSpec, TensorSpec, build_model

    def w(*shape, s=0.4):
        return TensorSpec(shape, "float32", data=rng.normal(0, s, shape).astype(np.float32))

    f = lambda *shape, name="", var=False: TensorSpec(shape, "float32", name=name,  # noqa
                                                      variable=var)
    tensors = [f(batches, 20, name="x"),
               w(16, 20), w(16, 6), w(16, s=0.2), f(batches, 16 * 6, name="state1", var=True),
               f(batches, 16, name="svdf1"),
               w(12, 16), w(12, 4), w(6, s=0.2), f(batches, 12 * 4, name="state2", var=True),
               f(batches, 6, name="svdf2"),
               w(3, 6), w(3, s=0.1), f(batches, 3, name="logits"), f(batches, 3, name="probs")]
    ops = [OpSpec("SVDF", [0, 1, 2, 3, 4], [5], {"rank": 1, "fused_activation_function": "RELU"}),
           OpSpec("SVDF", [5, 6, 7, 8, 9], [10], {"rank": 2, "fused_activation_function": "NONE"}),
           OpSpec("FULLY_CONNECTED", [10, 11, 12], [13]),
           OpSpec("SOFTMAX", [13], [14], {"beta": 1.0})]
    return build_model(ops, tensors, [0], [14])


def _stream(n: int, batches: int, seed: int) -> np.ndarray:
    """n successive frames (n, batches, 20) of a slowly drifting noisy signal: what an
    SVDF keyword model sees, each frame following the last."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)[:, None, None]
    freq = rng.uniform(0.02, 0.2, (1, batches, 20))
    x = np.sin(2 * np.pi * freq * t) + rng.normal(0, 0.3, (n, batches, 20))
    return x.astype(np.float32)


@pytest.mark.parametrize("batches", [1, 2])
def test_float_svdf_evaluation_carries_state_like_tflm(batches):
    """N samples in one float run, or in two runs, = tflite-micro's float SVDF invoked N
    times without a reset; reset() starts again from the zero state."""
    model = float_svdf_model(np.random.default_rng(1), batches)
    fm = FloatModel(prepare(load(model)))
    x = _stream(10, batches, seed=2)
    whole = fm.run([x])[0]
    fm.reset()
    parts = np.concatenate([fm.run([x[:4]])[0], fm.run([x[4:]])[0]])
    tflm = Tflm(model)
    want = np.stack([tflm(xi) for xi in x])
    np.testing.assert_allclose(whole, want, atol=1e-5)
    np.testing.assert_allclose(parts, want, atol=1e-5)


@pytest.fixture(scope="module")
def svdf_quantized():
    model = float_svdf_model(np.random.default_rng(1))
    q = quantize(load(model), calibration=_stream(300, 1, seed=3))
    return model, q, tflite_writer.write(q)


def test_svdf_quantized_like_tf(svdf_quantized):
    """int16 state (symmetric, from the carried calibration states), 10-bit int16 time
    weights, int8 feature weights, int32 bias at state × time weight scale."""
    _, q, _ = svdf_quantized
    for op in (o for o in q.ops if o.type == "SVDF"):
        wf, wt, b, st = (q.tensor(op.inputs[i]) for i in (1, 2, 3, 4))
        assert (wf.dtype, wt.dtype, b.dtype, st.dtype) == ("int8", "int16", "int32", "int16")
        assert st.is_variable and st.quant.single()[1] == 0
        assert np.abs(wt.data).max() == 511 and np.abs(wf.data).max() == 127
        assert b.quant.single()[0] == np.float32(np.float32(st.quant.single()[0])
                                                 * np.float32(wt.quant.single()[0]))
    relu_out = q.tensor(q.ops[0].outputs[0]) if q.ops[0].type == "SVDF" else None
    assert relu_out is not None and relu_out.quant.single()[1] == -128   # RELU: from 0


def test_svdf_state_range_comes_from_carried_calibration(svdf_quantized):
    """The state scale covers the states reached over the calibration stream: the
    float states of the stream run in order stay within it, and use most of it."""
    model, q, _ = svdf_quantized
    g = prepare(load(model))
    seen: dict[int, float] = {}
    fm = FloatModel(g)
    fm.run([_stream(300, 1, seed=3)],
           observe=lambda tid, v: seen.__setitem__(tid, max(seen.get(tid, 0.0),
                                                            float(np.abs(v).max()))))
    state_ids = [op.inputs[4] for op in g.ops if op.type == "SVDF"]
    q_states = [q.tensor(op.inputs[4]) for op in q.ops if op.type == "SVDF"]
    for sid, qt in zip(state_ids, q_states):
        assert seen[sid] / 32767 == pytest.approx(qt.quant.single()[0], rel=1e-6)


def test_svdf_quantized_bit_exact_with_tflm(svdf_quantized):
    """The exported int8 SVDF model in kiln and tflite-micro: 12 calls in a row (state
    carried), a reset, 4 more."""
    _, q, data = svdf_quantized
    art = kiln_compile(load(data), board="host")
    tflm = Tflm(data)
    xq = _quantize_input(q, _stream(16, 1, seed=4))
    for i, xi in enumerate(xq):
        reset = i == 12
        if reset:
            art.reset()
        assert_equal_exact(art.run(xi)[0], tflm(xi, reset=reset), f"call {i}")


def test_keyword_scrambled_float_twin_is_refused_in_one_line(models_dir):
    """TFLM's keyword_scrambled (7 SVDF layers, scrambled weights) made float: its float
    activations blow up layer after layer (state ranges 0.003, 208, 85,000, ... 1.2e15 on
    a bounded input stream), past what tflite-micro's int8 SVDF accepts (its bias scale
    check): kiln quantize says so, naming the op, rather than write a model TFLM refuses."""
    from kiln.compiler.errors import ModelError
    from kiln.compiler.quantize.float_twin import float_twin

    g = float_twin(load(models_dir / "external" / "tfm_keyword_scrambled.tflite"))
    first, last = g.ops[0], g.ops[-1]
    assert first.type == last.type == "DEQUANTIZE"   # twins of its int16 → int8 input and
    g.ops = g.ops[1:-1]                              # softmax int16 → int32 output QUANTIZE
    g.ops[0].inputs[0] = first.inputs[0]
    g.outputs = [g.ops[-1].outputs[0]]
    for t in g.tensors:                              # the state variables become float too
        if t.is_variable:
            t.dtype, t.quant = "float32", None
    rng = np.random.default_rng(6)
    stream = np.clip(np.cumsum(rng.normal(0, 0.5, (200, 1, 96)), axis=0), -20, 20)
    with pytest.raises(ModelError, match=r"op \d+ \(SVDF\): its state reaches .* too wide "
                                         r"for tflite-micro's int8 SVDF") as e:
        quantize(g, calibration=stream.astype(np.float32))
    assert "\n" not in str(e.value)
