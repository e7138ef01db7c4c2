"""More ONNX ops (compiler/frontend/onnx_reader.py): grouped Conv, Conv dilations with
auto_pad, ConvTranspose, PRelu, Slice, Split, Gather on activations and Resize, each per
attribute combination, built with onnx.helper.

Float models (tests/test_onnx.py's `check`): kiln's float evaluator on the imported graph
matches onnxruntime, kiln's int8 build tracks onnxruntime's float outputs (SQNR), and the
.tflite kiln exports runs in tflite-micro bit-identically to kiln. QDQ models
(onnxruntime's quantize_static, tests/test_onnx_qdq.py's `compare`): kiln within 1 LSB of
onnxruntime on at least 99% of the output elements, kiln's export = tflite-micro.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import test_onnx
from test_onnx import check, one_line

from kiln.compiler import ModelError, load

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime.quantization")
from test_onnx_qdq import MODES, compare, qdq_model  # noqa: E402

I64_MAX = np.iinfo(np.int64).max


@pytest.fixture(autouse=True)
def _seeded():
    import test_onnx_qdq

    test_onnx.RNG = np.random.default_rng(41)
    test_onnx_qdq.RNG = np.random.default_rng(42)     # its calibration and test inputs


def f32(*shape, scale=1.0):
    return test_onnx.f32(*shape, scale=scale)


def model(nodes, in_shape, inits=(), opset=13) -> bytes:
    """A one-input, one-output ("y") model; y's shape from onnx's shape inference."""
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in inits]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)
    probe = helper.make_model(helper.make_graph(nodes, "p", [x], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, None)], inits), opset_imports=[helper.make_opsetid("", opset)])
    probe.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(probe, strict_mode=True)
    out = [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, out)], inits), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def conv(cin, cout, k, group=1, name="w", **attrs):
    w = f32(cout, cin // group, *k, scale=0.5)
    return (helper.make_node("Conv", ["x", name, name + "_b"], ["y"], group=group, **attrs),
            [(name, w), (name + "_b", f32(cout, scale=0.1))])


def conv_case(cin, cout, k, size, group=1, **attrs):
    node, inits = conv(cin, cout, k, group, **attrs)
    return lambda: model([node], (1, cin, *size), inits)


def conv_t_case(cin, cout, k, size, **attrs):
    def build():
        node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
        return model([node], (1, cin, *size), [("w", f32(cin, cout, *k, scale=0.4)),
                                               ("b", f32(cout, scale=0.1))])
    return build


def single(op, in_shape, inputs=(), opset=13, outputs=("y",), **attrs):
    names = ["x"] + [n for n, _ in inputs]
    return lambda: model([helper.make_node(op, names, list(outputs), **attrs)], in_shape,
                         [(n, v) for n, v in inputs if v is not None], opset)


def split_case(in_shape, axis, split=None, opset=13, num_outputs=None):
    """Split into 2 or 3, the parts concatenated back in reverse order (one output)."""
    def build():
        k = len(split) if split is not None else num_outputs or 2
        parts = [f"p{i}" for i in range(k)]
        ins, inits, attrs = ["x"], [], {"axis": axis}
        if split is not None:
            ins.append("split")
            inits.append(("split", np.array(split, np.int64)))
        if num_outputs is not None:
            attrs["num_outputs"] = num_outputs
        nodes = [helper.make_node("Split", ins, parts, **attrs),
                 helper.make_node("Concat", parts[::-1], ["y"], axis=axis)]
        return model(nodes, in_shape, inits, opset)
    return build


def resize_case(in_shape, mode, ctm, scales=None, sizes=None, nearest=None, opset=13):
    def build():
        inits = [("roi", np.zeros(0, np.float32))]
        ins = ["x", "roi"]
        if scales is not None:
            inits.append(("scales", np.array(scales, np.float32)))
            ins.append("scales")
        else:
            inits += [("scales", np.zeros(0, np.float32)), ("sizes", np.array(sizes, np.int64))]
            ins += ["scales", "sizes"]
        attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
        if nearest:
            attrs["nearest_mode"] = nearest
        return model([helper.make_node("Resize", ins, ["y"], **attrs)], in_shape, inits, opset)
    return build


CASES = {
    # Conv: groups between 1 and the channels (SPLIT, a CONV_2D per group, CONCATENATION)
    "conv_group2": conv_case(4, 6, (3, 3), (7, 6), group=2, pads=[1, 1, 1, 1]),
    "conv_group2_stride_dilation": conv_case(4, 4, (3, 3), (9, 9), group=2, strides=[2, 2],
                                             dilations=[2, 2], pads=[2, 2, 2, 2]),
    "conv_group3_same_upper": conv_case(6, 3, (3, 3), (7, 8), group=3, auto_pad="SAME_UPPER",
                                        strides=[2, 2]),
    "conv_group2_1d": lambda: model([helper.make_node("Conv", ["x", "w"], ["y"], group=2, pads=[1, 1])],
                                    (1, 4, 12), [("w", f32(6, 2, 3, scale=0.5))]),
    # Conv: dilations with auto_pad and asymmetric pads
    # (onnxruntime refuses dilations with auto_pad SAME_UPPER/SAME_LOWER: the pads here)
    "conv_dilated_same_pads": conv_case(3, 4, (3, 3), (9, 8), dilations=[2, 2], pads=[2, 2, 2, 2]),
    "conv_dilated_stride2_lower_pads": conv_case(3, 4, (3, 3), (9, 8), dilations=[2, 1],
                                                 strides=[2, 2], pads=[2, 1, 2, 1]),
    "conv_dilated_asym_pads": conv_case(3, 4, (3, 2), (8, 8), dilations=[2, 3], pads=[3, 0, 1, 2]),
    "conv_dilated_valid": conv_case(3, 4, (3, 3), (9, 9), auto_pad="VALID", dilations=[3, 3]),
    # ConvTranspose → TRANSPOSE_CONV (pads TFLite cannot say: a larger output cropped)
    "convt_stride2_k2": conv_t_case(4, 3, (2, 2), (4, 5), strides=[2, 2]),
    "convt_stride2_pads1_outpad1": conv_t_case(4, 3, (3, 3), (4, 4), strides=[2, 2],
                                               pads=[1, 1, 1, 1], output_padding=[1, 1]),
    "convt_stride1_same": conv_t_case(3, 4, (3, 3), (5, 6), pads=[1, 1, 1, 1]),
    "convt_stride2_pads1": conv_t_case(4, 2, (3, 3), (4, 5), strides=[2, 2], pads=[1, 1, 1, 1]),
    "convt_asym_pads": conv_t_case(3, 3, (4, 3), (4, 4), strides=[2, 1], pads=[2, 0, 1, 1]),
    "convt_valid_k3": conv_t_case(2, 3, (3, 3), (3, 4), strides=[2, 2], auto_pad="VALID"),
    # PRelu → PRELU
    "prelu_per_channel": single("PRelu", (1, 4, 5, 6), [("s", np.abs(f32(4, 1, 1)) * 0.3)]),
    "prelu_scalar": single("PRelu", (1, 4, 5, 6), [("s", np.array([0.2], np.float32))]),
    "prelu_rank2": single("PRelu", (1, 12), [("s", np.abs(f32(12)) * 0.3)]),
    # Slice → STRIDED_SLICE
    "slice_spatial_steps": single("Slice", (1, 3, 9, 8), [
        ("st", np.array([1, 0], np.int64)), ("en", np.array([I64_MAX, 7], np.int64)),
        ("ax", np.array([2, 3], np.int64)), ("sp", np.array([2, 3], np.int64))]),
    "slice_channels_reversed": single("Slice", (1, 6, 4, 5), [
        ("st", np.array([-1], np.int64)), ("en", np.array([-I64_MAX], np.int64)),
        ("ax", np.array([1], np.int64)), ("sp", np.array([-2], np.int64))]),
    "slice_negative_axes_no_steps": single("Slice", (1, 4, 6, 6), [
        ("st", np.array([1, -4], np.int64)), ("en", np.array([-1, 5], np.int64)),
        ("ax", np.array([-1, -2], np.int64))]),
    "slice_rank2": single("Slice", (1, 20), [("st", np.array([3], np.int64)),
                                             ("en", np.array([17], np.int64)),
                                             ("ax", np.array([1], np.int64))]),
    # Split → SPLIT / SPLIT_V (the parts concatenated back in reverse order)
    "split_channels_equal": split_case((1, 6, 4, 5), axis=1),
    "split_channels_sizes": split_case((1, 7, 4, 5), axis=1, split=[2, 5]),
    "split_height_three": split_case((1, 3, 9, 4), axis=2, split=[2, 3, 4]),
    "split_opset18_num_outputs": split_case((1, 6, 3, 4), axis=1, opset=18, num_outputs=3),
    "split_rank2": split_case((1, 12), axis=1, split=[5, 7]),
    # Gather of an activation with constant indices → GATHER
    "gather_channels": single("Gather", (1, 5, 4, 3), [("i", np.array([4, 0, 2], np.int64))], axis=1),
    "gather_width_negative": single("Gather", (1, 3, 4, 6), [("i", np.array([-1, 0, 1], np.int64))],
                                    axis=3),
    "gather_rank2_scalar_index": single("Gather", (1, 4, 10), [("i", np.array(2, np.int64))], axis=1),
    # Resize (nearest, linear) → RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR
    "resize_nearest_asymmetric_floor": resize_case((1, 3, 4, 5), "nearest", "asymmetric",
                                                   scales=[1, 1, 2, 2], nearest="floor"),
    "resize_nearest_default_x2": resize_case((1, 3, 4, 5), "nearest", "half_pixel",
                                             scales=[1, 1, 2, 2]),
    "resize_nearest_half_pixel_ceil_sizes": resize_case((1, 3, 4, 5), "nearest", "half_pixel",
                                                        sizes=[1, 3, 7, 9],
                                                        nearest="round_prefer_ceil"),
    "resize_nearest_tf_half_pixel": resize_case((1, 2, 6, 6), "nearest", "tf_half_pixel_for_nn",
                                                sizes=[1, 2, 4, 9], nearest="floor"),
    "resize_linear_half_pixel_x2": resize_case((1, 3, 4, 5), "linear", "half_pixel",
                                               scales=[1, 1, 2, 2]),
    "resize_linear_pytorch_half_pixel": resize_case((1, 3, 5, 4), "linear", "pytorch_half_pixel",
                                                    sizes=[1, 3, 7, 10]),
    "resize_linear_align_corners": resize_case((1, 3, 4, 5), "linear", "align_corners",
                                               sizes=[1, 3, 7, 9]),
    "resize_linear_asymmetric_down": resize_case((1, 3, 8, 6), "linear", "asymmetric",
                                                 sizes=[1, 3, 4, 3]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float(name):
    data = CASES[name]()
    g = load(data)
    check(data, g.tensor(g.inputs[0]).shape[1:], tflm=True)


def after_weight_layer(data: bytes) -> bytes:
    """The model with a weight layer between its input and its op (a 1x1 Conv for rank 4,
    a MatMul on the last axis otherwise): quantize_static quantizes PRelu, Slice, Gather
    and Resize only after a quantized op, as in a real network."""
    m = onnx.load_from_string(data)
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    for node in m.graph.node:
        node.input[:] = ["x_mixed" if v == "x" else v for v in node.input]
    if len(shape) == 4:
        w = f32(shape[1], shape[1], 1, 1, scale=0.6)
        first = helper.make_node("Conv", ["x", "x_w"], ["x_mixed"])
    else:
        w = f32(shape[-1], shape[-1], scale=0.4)
        first = helper.make_node("MatMul", ["x", "x_w"], ["x_mixed"])
    m.graph.node.insert(0, first)
    m.graph.initializer.append(numpy_helper.from_array(w, "x_w"))
    return m.SerializeToString()


# onnxruntime's quantize_static quantizes the convolutions and Split on their own.
ALONE = ("conv", "split")


def qdq_with_prelu(data: bytes, per_channel: bool, activations: str, tmp_path) -> bytes:
    """test_onnx_qdq.qdq_model with PRelu among the op types: onnxruntime's QDQ registry
    has no PRelu, so quantize_static leaves it float unless asked (then it quantizes its
    input, slope and output as for any op)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.registry import QDQRegistry
    from test_onnx_qdq import RNG, _Samples

    g = load(data)
    src, dst = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    src.write_bytes(data)
    calib = RNG.uniform(-2, 2, size=(32, *g.tensor(g.inputs[0]).shape[1:])).astype(np.float32)
    quantize_static(str(src), str(dst), _Samples("x", calib), quant_format=QuantFormat.QDQ,
                    per_channel=per_channel, activation_type=getattr(QuantType, activations),
                    weight_type=QuantType.QInt8, op_types_to_quantize=[*QDQRegistry, "PRelu"])
    return dst.read_bytes()


@pytest.mark.parametrize("mode", MODES[:2] + MODES[3:], ids=lambda m: f"{'pc' if m[0] else 'pt'}-{m[1]}")
@pytest.mark.parametrize("name", sorted(CASES))
def test_qdq(name, mode, tmp_path):
    data = CASES[name]()
    make = qdq_with_prelu if name.startswith("prelu") else qdq_model
    qdq = make(data if name.startswith(ALONE) else after_weight_layer(data), *mode, tmp_path)
    within, worst, _ = compare(qdq)
    assert within >= 0.99, (within, worst)


def test_grouped_conv_lowered_to_split_convs_concat():
    g = load(CASES["conv_group2"]())
    kinds = [op.type for op in g.ops if op.type not in ("TRANSPOSE", "RESHAPE")]
    assert kinds == ["SPLIT", "CONV_2D", "CONV_2D", "CONCATENATION"], kinds


@pytest.mark.parametrize("name, padding, crop", [("convt_stride2_k2", "VALID", False),
                                                 ("convt_stride1_same", "SAME", False),
                                                 # PyTorch's (k 3, stride 2, padding 1,
                                                 # output_padding 1): TFLite's SAME pads 0
                                                 ("convt_stride2_pads1_outpad1", "VALID", True),
                                                 ("convt_asym_pads", "VALID", True)])
def test_conv_transpose_padding(name, padding, crop):
    g = load(CASES[name]())
    tconv = next(op for op in g.ops if op.type == "TRANSPOSE_CONV")
    assert tconv.options["padding"] == padding
    assert any(op.type == "STRIDED_SLICE" for op in g.ops) == crop


@pytest.mark.parametrize("name, op_type, ac, hp", [
    ("resize_nearest_asymmetric_floor", "RESIZE_NEAREST_NEIGHBOR", False, False),
    ("resize_nearest_half_pixel_ceil_sizes", "RESIZE_NEAREST_NEIGHBOR", False, True),
    ("resize_linear_half_pixel_x2", "RESIZE_BILINEAR", False, True),
    ("resize_linear_align_corners", "RESIZE_BILINEAR", True, False),
    ("resize_linear_asymmetric_down", "RESIZE_BILINEAR", False, False)])
def test_resize_mode_mapping(name, op_type, ac, hp):
    g = load(CASES[name]())
    op = next(op for op in g.ops if op.type.startswith("RESIZE"))
    assert (op.type, op.options["align_corners"], op.options["half_pixel_centers"]) == (op_type, ac, hp)


@pytest.mark.parametrize("build, match", [
    (resize_case((1, 3, 4, 5), "linear", "tf_crop_and_resize", sizes=[1, 3, 8, 10]),
     "coordinate_transformation_mode 'tf_crop_and_resize'"),
    (resize_case((1, 3, 4, 5), "nearest", "asymmetric", sizes=[1, 3, 7, 9], nearest="ceil"),
     "nearest_mode 'ceil'"),
    (resize_case((1, 3, 4, 5), "cubic", "half_pixel", scales=[1, 1, 2, 2]), "mode 'cubic'"),
    (resize_case((1, 3, 4, 5), "nearest", "asymmetric", scales=[1, 2, 1, 1]), "spatial axes"),
    (conv_t_case(2, 2, (3, 3), (4, 4), strides=[2, 2], auto_pad="SAME_UPPER"), "auto_pad 'SAME_UPPER'"),
    (conv_t_case(2, 2, (3, 3), (4, 4), dilations=[2, 2]), "dilations [2, 2]"),
    (lambda: model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], group=2)], (1, 4, 3, 3),
                   [("w", f32(4, 1, 3, 3))]), "group=2"),
    (single("Gather", (1, 5, 4, 3), [("i", np.array([5], np.int64))], axis=1), "Gather indices"),
    (lambda: model([helper.make_node("Conv", ["x", "w"], ["y"], group=2)], (1, 6, 5, 5),
                   [("w", f32(3, 3, 3, 3))]), "grouped Conv with group=2"),
])
def test_refused_in_one_line(build, match):
    try:
        data = build()
    except Exception:               # onnx's own checks refuse it first: nothing to test here
        pytest.skip("onnx refuses the model itself")
    with pytest.raises(ModelError) as e:
        load(data)
    assert match in one_line(e)
