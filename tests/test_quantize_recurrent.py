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


@pytest.mark.slow
@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an385"])
def test_quantized_gru_on_qemu(tmp_path, board):
    """kiln's int8 GRU (20 unrolled steps) as standalone firmware = tflite-micro
    running the same exported model (measured on mps2-an386: 365,625 instructions)."""
    from conftest import require_tool
    from kiln.project_gen import create_project

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    _, steps, _ = MODELS["gru"]
    calib, _ = sequences(200, steps, seed=3)
    q = quantize(load(FIXTURES / "gru_float.tflite"), calibration=calib[:, None])
    path = tmp_path / "gru_int8.tflite"
    path.write_bytes(tflite_writer.write(q))
    x, _ = sequences(2, steps, seed=9)
    xq = _quantize_input(q, x[:, None])
    result = create_project(path, board=board, out_dir=tmp_path / "p", inputs=[xq]).run()
    want = np.concatenate([run_reference(path.read_bytes(), xi)[0] for xi in xq])
    assert_equal_exact(result.outputs[0].reshape(want.shape), want, board)
