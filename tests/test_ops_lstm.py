"""UNIDIRECTIONAL_SEQUENCE_LSTM (int8, int16 cell state) against tflite-micro, bit for bit.

Models are built with the TF converter's quantization scheme (`lstm_model`): int8
activations, per-tensor symmetric int8 weights, int32 biases at input_scale ×
weight_scale, the hidden state sharing the output's quantization, an int16 cell state
with a power-of-two scale. Every case runs several calls in a row (the state carries
over) and again after a reset, in kiln and in TFLM.
"""

from __future__ import annotations

import numpy as np
import pytest

from kiln.compiler import compile as kiln_compile
from kiln.compiler import load
from kiln.compiler.codegen.ops.lstm import (cell_scale_power, quantized_cell_clip,
                                            tanh_scaling)
from kiln.compiler.errors import ModelError
from reference import _arena_size, assert_equal_exact
from tflite_builder import OpSpec, TensorSpec, build_model, rand_int8

GATES = ("input", "forget", "cell", "output")


def lstm_model(rng: np.random.Generator, batches: int = 1, steps: int = 4, depth: int = 5,
               units: int = 6, time_major: bool = False, cell_clip: float = 0.0,
               input_q: tuple[float, int] = (0.03, -5), hidden_q: tuple[float, int] = (1 / 128, 3),
               cell_power: int = -11, weight_scale: float = 0.02,
               variants: tuple[str, ...] = ()) -> bytes:
    """One LSTM op; `variants` adds the tensors of "peephole", "projection", "layer_norm"
    or drops the input gate ("cifg"), for the refusal tests."""
    shape_in = (steps, batches, depth) if time_major else (batches, steps, depth)
    shape_out = shape_in[:2] + (units,)
    tensors = [TensorSpec(shape_in, "int8", scale=input_q[0], zero_point=input_q[1], name="x")]
    idx = [0] + [-1] * 23

    def add(spec: TensorSpec, at: int) -> None:
        idx[at] = len(tensors)
        tensors.append(spec)

    for g_i, g in enumerate(GATES):
        if g == "input" and "cifg" in variants:
            continue
        s_in = float(np.float32(weight_scale * rng.uniform(0.5, 1.5)))
        s_rec = float(np.float32(weight_scale * rng.uniform(0.5, 1.5)))
        add(TensorSpec((units, depth), "int8", scale=s_in, zero_point=0,
                       data=rand_int8((units, depth), rng, -127, 127), name=f"w_in_{g}"), 1 + g_i)
        add(TensorSpec((units, units), "int8", scale=s_rec, zero_point=0,
                       data=rand_int8((units, units), rng, -127, 127), name=f"w_rec_{g}"), 5 + g_i)
        b_scale = float(np.float32(input_q[0]) * np.float32(s_in))
        add(TensorSpec((units,), "int32", scale=b_scale, zero_point=0,
                       data=rng.integers(-3000, 3000, units).astype(np.int32), name=f"b_{g}"),
            12 + g_i)
    if "peephole" in variants:
        for k in range(3):
            add(TensorSpec((units,), "int16", scale=0.001, zero_point=0,
                           data=np.ones(units, np.int16), name=f"peep{k}"), 9 + k)
    if "projection" in variants:
        add(TensorSpec((units, units), "int8", scale=0.01, zero_point=0,
                       data=np.ones((units, units), np.int8), name="proj"), 16)
    if "layer_norm" in variants:
        for k in range(4):
            add(TensorSpec((units,), "int16", scale=0.001, zero_point=0,
                           data=np.ones(units, np.int16), name=f"ln{k}"), 20 + k)
    add(TensorSpec((batches, units), "int8", scale=hidden_q[0], zero_point=hidden_q[1],
                   variable=True, name="hidden_state"), 18)
    add(TensorSpec((batches, units), "int16", scale=2.0 ** cell_power, zero_point=0,
                   variable=True, name="cell_state"), 19)
    out = len(tensors)
    tensors.append(TensorSpec(shape_out, "int8", scale=hidden_q[0], zero_point=hidden_q[1],
                              name="y"))
    op = OpSpec("UNIDIRECTIONAL_SEQUENCE_LSTM", idx, [out],
                {"fused_activation_function": "TANH", "cell_clip": cell_clip,
                 "proj_clip": 0.0, "time_major": time_major,
                 "asymmetric_quantize_inputs": False})
    return build_model([op], tensors, [0], [out])


def tflm_runs(model: bytes, inputs: list[np.ndarray], reset_before: set[int]) -> list[np.ndarray]:
    """TFLM invoked once per input without resetting, except before the calls listed."""
    from tflite_micro.python.tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(bytes(model), arena_size=_arena_size(model))
    outs = []
    for i, x in enumerate(inputs):
        if i in reset_before:
            interp.reset()
        interp.set_input(np.ascontiguousarray(x), 0)
        interp.invoke()
        outs.append(np.array(interp.get_output(0), copy=True))
    return outs


def check_lstm(model: bytes, calls: int = 3, seed: int = 0) -> None:
    """kiln vs TFLM over `calls` successive calls, a reset, and `calls` more."""
    art = kiln_compile(load(model), board="host")
    shape = tuple(int(d) for d in load(model).tensor(0).shape)
    rng = np.random.default_rng(seed)
    xs = [rand_int8(shape, rng) for _ in range(2 * calls)]
    want = tflm_runs(model, xs, reset_before={calls})
    for i, x in enumerate(xs):
        if i == calls:
            art.reset()
        got = art.run(x)[0]
        assert_equal_exact(got, want[i], f"call {i}")


CASES = [
    dict(batches=1, steps=4, depth=5, units=6),
    dict(batches=1, steps=28, depth=28, units=20, cell_power=-12, cell_clip=10.0),
    dict(batches=3, steps=5, depth=7, units=4, time_major=False),
    dict(batches=3, steps=5, depth=7, units=4, time_major=True),
    dict(batches=2, steps=3, depth=1, units=33, time_major=True, cell_clip=0.05),
    dict(batches=1, steps=6, depth=16, units=3, cell_power=-15, weight_scale=0.05),
    dict(batches=1, steps=6, depth=9, units=8, cell_power=-9, input_q=(0.1, 127),
         hidden_q=(0.004, -128)),
    dict(batches=1, steps=3, depth=4, units=5, cell_power=-13, cell_clip=0.5),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_lstm_matches_tflm(case):
    check_lstm(lstm_model(np.random.default_rng(1), **case))


def test_mnist_lstm_model_matches_tflm(models_dir):
    """TFLM's mnist LSTM example (int8, 28 steps of 28 inputs, 20 units), calls in a row."""
    path = models_dir / "external" / "tfm_mnist_lstm_int8.tflite"
    data = path.read_bytes()
    art = kiln_compile(load(path), board="host")
    rng = np.random.default_rng(3)
    xs = [rand_int8((1, 28, 28), rng) for _ in range(4)]
    want = tflm_runs(data, xs, reset_before={2})
    for i, x in enumerate(xs):
        if i == 2:
            art.reset()
        assert_equal_exact(art.run(x)[0], want[i], f"call {i}")


@pytest.mark.parametrize("variant", ["cifg", "peephole", "projection", "layer_norm"])
def test_lstm_variants_refused_by_name(variant):
    model = lstm_model(np.random.default_rng(0), variants=(variant,))
    with pytest.raises(ModelError, match={"cifg": "CIFG", "peephole": "peephole",
                                          "projection": "projection",
                                          "layer_norm": "layer normalization"}[variant]):
        kiln_compile(load(model), board="host")


def test_cell_scale_helpers():
    assert cell_scale_power(2.0 ** -12) == -12
    assert cell_scale_power(2.0 ** -11 * 1.3) == -11        # rounded like CheckedLog2
    assert tanh_scaling(-12) == (3, 0)
    assert tanh_scaling(-10) == (12, 0)
    assert tanh_scaling(-15) == (3, 3)
    assert quantized_cell_clip(0.0, 2.0 ** -12) == -1
    assert quantized_cell_clip(10.0, 2.0 ** -12) == 32767
    assert quantized_cell_clip(1e-5, 2.0 ** -12) == 0         # clipping on, to zero


@pytest.mark.slow
@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an385"])
def test_mnist_lstm_standalone_firmware_on_qemu(tmp_path, models_dir, board):
    """The standalone firmware runs its samples as successive calls (state carried, the
    warm-up call undone by a reset), like TFLM invoked once per sample without a reset."""
    from conftest import require_tool
    from kiln.project_gen import create_project

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    path = models_dir / "external" / "tfm_mnist_lstm_int8.tflite"
    rng = np.random.default_rng(5)
    x = np.stack([rand_int8((1, 28, 28), rng) for _ in range(3)])
    result = create_project(path, board=board, out_dir=tmp_path / "p", inputs=[x]).run()
    want = np.concatenate(tflm_runs(path.read_bytes(), list(x), reset_before=set()))
    assert_equal_exact(result.outputs[0], want, board)
