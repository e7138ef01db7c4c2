"""Reading .tflite files: real models, and every kind of bad file giving one ModelError."""

from __future__ import annotations

import numpy as np
import pytest

from kiln.compiler import ModelError, load
from kiln.compiler.passes import optimize

from conftest import MLPERF_INT8, model_path


@pytest.mark.parametrize("name", MLPERF_INT8 + ["digits_cnn_int8"])
def test_real_int8_models_load_and_verify(name):
    g = load(model_path(name))
    g.verify()
    assert g.sha256 and len(g.ops) > 0
    for tid in g.inputs + g.outputs:
        t = g.tensor(tid)
        assert t.dtype == "int8" and t.quant is not None and not t.quant.per_channel


def test_kws_structure():
    g = load(model_path("kws_ref_model"))
    assert [op.type for op in g.ops][:2] == ["CONV_2D", "DEPTHWISE_CONV_2D"]
    conv = g.ops[0]
    assert conv.options["stride_h"] == 2 and conv.options["padding"] == "SAME"
    assert conv.options["fused_activation_function"] == "RELU"
    w = g.tensor(conv.inputs[1])
    assert w.is_const and w.dtype == "int8" and w.quant.per_channel
    assert w.quant.scale.size == w.shape[0]          # per output channel
    assert g.tensor(conv.inputs[2]).dtype == "int32"


def test_reshape_becomes_an_alias():
    g = optimize(load(model_path("kws_ref_model")))
    assert "RESHAPE" not in [op.type for op in g.ops]
    aliased = [t for t in g.tensors if t.alias_of is not None]
    assert len(aliased) == 1
    src = g.tensor(aliased[0].alias_of)
    assert src.size == aliased[0].size


@pytest.mark.parametrize("data, message", [
    (b"", "empty"),
    (b"garbage!" * 10, "not a TFLite model"),
    (b"\x00" * 3, "not a TFLite model"),
])
def test_bad_bytes(data, message):
    with pytest.raises(ModelError, match=message):
        load(data)


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match="cannot read"):
        load(tmp_path / "nope.tflite")


def test_truncated_model():
    data = model_path("kws_ref_model").read_bytes()
    for cut in (8, 64, 1000, len(data) // 2):
        with pytest.raises(ModelError, match="truncated or corrupt|malformed|exceeds the file"):
            load(data[:cut])
    with pytest.raises(ModelError, match="truncated or corrupt: it points past its end"):
        load(data[:3000])


def test_float_model_says_quantize_first():
    from kiln.compiler import compile

    g = load(model_path("ad01_fp32"))
    with pytest.raises(ModelError, match="quantize"):
        compile(g)


def test_fold_shape_subgraph():
    """SHAPE → STRIDED_SLICE → PACK → RESHAPE (a Keras None batch) folds to a constant shape."""
    from tflite_builder import OpSpec, TensorSpec, build_model, const

    x = TensorSpec((1, 4, 4, 2), scale=0.1, zero_point=0)
    tensors = [
        x,                                                     # 0 input
        TensorSpec((4,), dtype="int32"),                       # 1 shape of x
        const([0], dtype="int32"), const([1], dtype="int32"),  # 2, 3 begin, end
        const([1], dtype="int32"),                             # 4 strides
        TensorSpec((), dtype="int32"),                         # 5 batch (scalar)
        const(32, dtype="int32", shape=()),                    # 6 flattened size
        TensorSpec((2,), dtype="int32"),                       # 7 packed new shape
        TensorSpec((1, 32), scale=0.1, zero_point=0),          # 8 output
    ]
    ops = [
        OpSpec("SHAPE", [0], [1], {"out_type": "int32"}),
        OpSpec("STRIDED_SLICE", [1, 2, 3, 4], [5], {"shrink_axis_mask": 1}),
        OpSpec("PACK", [5, 6], [7], {"values_count": 2, "axis": 0}),
        OpSpec("RESHAPE", [0, 7], [8], {}),
    ]
    g = load(build_model(ops, tensors, inputs=[0], outputs=[8]))
    folded = optimize(g)
    assert folded.ops == []                                   # all shape math and the view are gone
    assert list(folded.tensor(7).data) == [1, 32]
    assert folded.tensor(8).alias_of == 0


def _conv(x_scale: float, x_zp: int, y_scale: float, y_zp: int) -> bytes:
    from tflite_builder import OpSpec, TensorSpec, build_model

    w = TensorSpec((3, 1, 1, 2), "int8", scale=0.01, zero_point=0,
                   data=np.ones((3, 1, 1, 2), np.int8))
    return build_model([OpSpec("CONV_2D", [0, 1], [2], {"padding": "VALID"})],
                       [TensorSpec((1, 4, 4, 2), scale=x_scale, zero_point=x_zp), w,
                        TensorSpec((1, 4, 4, 3), scale=y_scale, zero_point=y_zp)], [0], [2])


@pytest.mark.parametrize("quant, message", [
    ((0.1, 0, 0.0, 0), r"tensor 2 \(.*\) has a non-positive quantization scale 0.0"),
    ((-0.1, 0, 0.1, 0), r"tensor 0 \(.*\) has a non-positive quantization scale"),
    ((0.1, 0, 0.1, 300), r"tensor 2 \(.*\) has zero point 300, outside int8's \[-128, 127\]"),
    ((0.1, -200, 0.1, 0), r"tensor 0 \(.*\) has zero point -200"),
])
def test_activation_quantization_that_describes_no_values_is_refused(quant, message):
    """A zero scale used to reach a division in the conv lowering (a traceback); a zero
    point outside int8 compiled and then failed in the kernel at run time."""
    with pytest.raises(ModelError, match=message):
        load(_conv(*quant))
    load(_conv(0.1, -128, 0.1, 127))                 # the edges of int8 are fine
