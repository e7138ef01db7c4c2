"""A model kiln cannot compile names every unsupported op (with its types) first, before
any structural message; uint8 models and float ops left in an int8 model are refused
with what to do instead; `kiln info` still lists such models (issue 13, item 5)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import models_root, one_error, run_kiln
from tflite_builder import OpSpec, TensorSpec, build_model

from kiln.compiler import compile, load
from kiln.compiler.codegen.lowering import LOWERINGS
from kiln.compiler.errors import ModelError
from kiln.compiler.ir import GraphError

EXTERNAL = models_root() / "external"
# An op type no kiln lowering takes (checked below, so a new lowering shows up here).
MISSING, MISSING2 = "CUMSUM", "SEGMENT_SUM"
# Ops that become views or fold away (never a kernel): no lowering needed.
GRAPH_LEVEL_OPS = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "SHAPE")


def _act(shape=(1, 4), dtype="int8", name="", **kw) -> TensorSpec:
    return TensorSpec(shape, dtype, scale=0.1, zero_point=0, name=name, **kw)


def _unsupported_and_malformed() -> bytes:
    """op 0 (CUMSUM) reads tensor 2 before op 1 writes it: malformed, and CUMSUM is not
    an op kiln has."""
    tensors = [_act(name="x"), _act(name="y"),  _act(name="late"),
               TensorSpec((1,), "int32", data=np.array([1], dtype=np.int32), name="axis")]
    ops = [OpSpec(MISSING, [2, 3], [1]), OpSpec("RELU", [0], [2])]
    return build_model(ops, tensors, inputs=[0], outputs=[1])


def test_missing_ops_are_really_missing():
    assert MISSING not in LOWERINGS and MISSING2 not in LOWERINGS


def test_unsupported_op_is_named_before_the_structural_error(tmp_path):
    data = _unsupported_and_malformed()
    with pytest.raises(GraphError):            # load() itself: the structure is broken
        load(data)
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelError) as e:       # compile(path): the op first
        compile(str(path))
    text = str(e.value)
    assert text.startswith(f"1 op(s) in m cannot be compiled: {MISSING} (op 0; int8,int32 -> "
                           f"int8: op not supported)"), text
    assert text.index(MISSING) < text.index("before it is written"), text


def test_cli_compile_and_info_on_an_unsupported_malformed_model(tmp_path, capsys):
    path = tmp_path / "m.tflite"
    path.write_bytes(_unsupported_and_malformed())
    code, _, err = run_kiln(capsys, "compile", path, "-o", tmp_path / "out")
    assert code == 2
    assert one_error(err).startswith(f"kiln: error: 1 op(s) in m cannot be compiled: {MISSING}")
    code, out, err = run_kiln(capsys, "info", path)
    assert code == 0, err
    assert f"{MISSING}×1" in out and "RELU×1" in out
    assert f"not compilable as is: 1 op(s) in m cannot be compiled: {MISSING}" in out


def test_every_unsupported_op_is_listed_with_its_types():
    """Three problems in one message: two op types without a lowering, one op a lowering
    refuses, each with its input and output types."""
    tensors = [_act(name="x"), _act(name="a"), _act(name="b"), _act(name="c", dtype="int16"),
               TensorSpec((1,), "int32", data=np.array([1], dtype=np.int32), name="axis")]
    ops = [OpSpec(MISSING, [0, 4], [1]), OpSpec(MISSING2, [1, 4], [2]),
           OpSpec("MAXIMUM", [2, 2], [3])]
    art = None
    with pytest.raises(ModelError) as e:
        art = compile(load(build_model(ops, tensors, inputs=[0], outputs=[3])))
    assert art is None
    text = str(e.value)
    assert text.startswith("3 op(s) in model cannot be compiled: "), text
    assert f"{MISSING} (op 0; int8,int32 -> int8: op not supported)" in text
    assert f"{MISSING2} (op 1; int8,int32 -> int8: op not supported)" in text
    assert "MAXIMUM (op 2; int8,int8 -> int16: " in text


def test_uint8_model_is_refused_with_how_to_reconvert():
    tensors = [TensorSpec((1, 4), "uint8", scale=0.1, zero_point=128, name="x"),
               TensorSpec((1, 4), "uint8", scale=0.1, zero_point=128, name="y")]
    with pytest.raises(ModelError) as e:
        compile(load(build_model([OpSpec("RELU", [0], [1])], tensors, inputs=[0], outputs=[1])))
    text = str(e.value)
    assert "uint8 (legacy asymmetric) quantized model (op 0 RELU on uint8 tensors)" in text
    assert "inference_input_type=inference_output_type=tf.int8" in text
    assert "full-integer quantization" in text


def _int8_with_a_float_tail() -> bytes:
    """int8 RELU, DEQUANTIZE, then a float SOFTMAX: quantized but for the last op."""
    tensors = [_act(name="x"), _act(name="r"), TensorSpec((1, 4), "float32", name="f"),
               TensorSpec((1, 4), "float32", name="p")]
    ops = [OpSpec("RELU", [0], [1]), OpSpec("DEQUANTIZE", [1], [2]),
           OpSpec("SOFTMAX", [2], [3])]
    return build_model(ops, tensors, inputs=[0], outputs=[3])


def test_float_op_in_an_int8_model_is_named_and_not_sent_to_quantize(tmp_path, capsys):
    """The loop of issue 13: `kiln run` said "quantize it", `kiln quantize` refused. Now
    both name the float op and say to re-convert."""
    with pytest.raises(ModelError) as e:
        compile(load(_int8_with_a_float_tail()))
    text = str(e.value)
    assert "is quantized but for 1 op(s) that compute in float (op 2 SOFTMAX" in text, text
    assert "kiln quantize takes float models" in text and "full-integer" in text
    path, cal = tmp_path / "m.tflite", tmp_path / "cal.npy"
    path.write_bytes(_int8_with_a_float_tail())
    np.save(cal, np.zeros((4, 1, 4), dtype=np.float32))
    code, _, err = run_kiln(capsys, "quantize", path, "--calibration", cal,
                            "-o", tmp_path / "q.tflite")
    assert code == 2
    line = one_error(err)
    assert "quantized already, but for op 2 (SOFTMAX) on float32 tensors" in line, line


def test_lenet_with_log_softmax_names_it_in_run_and_quantize(tmp_path, capsys):
    path = EXTERNAL / "mit_ptq_mnist_lenet.tflite"
    if not path.exists():
        pytest.skip(f"{path} not found (set KILN_MODELS)")
    g = load(path)
    log_softmax = [op.index for op in g.ops if op.type == "LOG_SOFTMAX"]
    code, _, err = run_kiln(capsys, "run", path)
    if code == 0:
        pytest.skip("kiln compiles this model now")
    assert "LOG_SOFTMAX" in one_error(err) and f"op {log_softmax[0]}" in err
    assert "kiln quantize MODEL -o OUT.tflite" in err      # what gets it compiled
    # kiln quantize moves the float LOG_SOFTMAX into int8 (tests/test_ops_log_softmax.py
    # checks the result against tflite-micro).
    code, _, err = run_kiln(capsys, "quantize", path, "-o", tmp_path / "q.tflite")
    assert code == 0, err


def _external_models() -> list:
    if not EXTERNAL.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{EXTERNAL} not found"))]
    return sorted(EXTERNAL.glob("*.tflite"), key=lambda p: p.name)


@pytest.mark.parametrize("path", _external_models(), ids=lambda p: getattr(p, "stem", "none"))
def test_every_refused_external_model_names_its_unsupported_ops(path):
    """Each public model kiln still refuses gets one line naming its unsupported ops (or
    its float ops, to quantize), never a structural message alone."""
    try:
        graph = load(path)
    except GraphError as e:
        graph = e.graph
    try:
        compile(str(path))
        return
    except ModelError as e:
        text = str(e)
    assert "\n" not in text
    assert "cannot be compiled" in text or "in float" in text, text
    for op in graph.ops:
        if op.type not in LOWERINGS and op.type not in GRAPH_LEVEL_OPS:
            assert op.type in text, f"{op.type} not named: {text}"
    for structural in ("before it is written", "already defined", "out of range"):
        if structural in text:
            assert text.index("cannot be compiled") < text.index(structural), text
