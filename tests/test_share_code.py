"""Small fully connected layers on the convolutions' gemm (codegen/fit.py share_code): the
firmware links one kernel instead of two, the outputs stay tflite-micro's."""

from __future__ import annotations

import numpy as np

import kiln.compiler as kc
from conftest import model_path
from kiln.compiler.codegen.fit import SHARE_MAX_MACS
from kiln.compiler.tune import Records, workload_key
from reference import assert_equal_exact, run_reference
from tflite_builder import rand_int8

GEMM = {"variant": "gemm", "oc_block": 4, "px_block": 2, "weights": "p8"}


def _kernels(art: kc.Artifact) -> list[str]:
    return [o["kernel"] for o in art.report["ops"]]


def test_kws_fc_runs_on_the_gemm_and_matches_tflm():
    data = model_path("kws_ref_model").read_bytes()
    art = kc.compile(kc.load(data), "mps2-an386")
    kernels = _kernels(art)
    assert "kiln_fully_connected_rows8_p8_s8" not in kernels
    [move] = art.report["shared_code"]
    assert kernels[move["layer"]] == "kiln_conv2d_gemm_p8_s8" and move["to"] == GEMM
    fc = art.report["ops"][move["layer"]]
    assert fc["type"] == "FULLY_CONNECTED" and fc["macs"] <= SHARE_MAX_MACS
    x = rand_int8(art.report["inputs"][0]["shape"], np.random.default_rng(3))
    assert_equal_exact(art.run(x)[0], run_reference(data, [x])[0], "kws, FC on the gemm")


def test_no_sharing_without_a_gemm_or_with_a_tuned_layer():
    """AD has no convolution: its FCs keep their kernel. A layer the records tune keeps the
    records' variant."""
    ad = kc.compile(kc.load(model_path("ad01_int8")), "mps2-an386")
    assert ad.report["shared_code"] == []
    g = kc.load(model_path("kws_ref_model"))
    art = kc.compile(g, "mps2-an386")
    step = art.report["shared_code"][0]["layer"]
    op = art.report["ops"][step]
    rows = {"variant": "rows", "row_block": 8, "weights": "p8"}
    from kiln.compiler.compile import target_for
    from kiln.compiler.tune.workloads import layer_shapes
    op_type, shape = layer_shapes(art.graph, target_for("mps2-an386"))[step]
    records = Records(entries=[{"workload": workload_key(op_type, shape), "board": "mps2-an386",
                                "knobs": rows, "status": "ok",
                                "cycles": {"median": 1, "min": 1, "max": 1}}])
    tuned = kc.compile(g, "mps2-an386", tuning_records=records)
    assert tuned.report["shared_code"] == []
    # KWS's FC is per-tensor: the records' knobs run the _pt_ twin
    assert _kernels(tuned)[step] == "kiln_fully_connected_rows8_p8_pt_s8" and op["type"] == op_type


def _conv_then_fc(hw: int, cin: int, k: int, stride: int, cout: int) -> bytes:
    """conv k x k (hw x hw x cin -> VALID, stride) -> reshape -> FC (-> 4 units)."""
    from tflite_builder import OpSpec, TensorSpec, bias_spec, build_model, weight_spec
    rng = np.random.default_rng(7)
    out_hw = (hw - k) // stride + 1
    depth = out_hw * out_hw * cout
    w = weight_spec((cout, k, k, cin), rng, per_channel_axis=0)
    b = bias_spec(cout, rng, input_scale=0.02, weight_scales=w.scale)
    fw = weight_spec((4, depth), rng, per_channel_axis=None)
    fb = bias_spec(4, rng, input_scale=0.03, weight_scales=fw.scale)
    tensors = [TensorSpec((1, hw, hw, cin), scale=0.02, zero_point=-5, name="x"), w, b,
               TensorSpec((1, out_hw, out_hw, cout), scale=0.03, zero_point=-128, name="conv"),
               TensorSpec((2,), dtype="int32", data=np.array([1, depth], dtype=np.int32)),
               TensorSpec((1, depth), scale=0.03, zero_point=-128, name="flat"),
               fw, fb, TensorSpec((1, 4), scale=0.1, zero_point=3, name="y")]
    ops = [OpSpec("CONV_2D", [0, 1, 2], [3], {"padding": "VALID", "stride_w": stride,
                                               "stride_h": stride}),
           OpSpec("RESHAPE", [3, 4], [5], {"new_shape": [1, depth]}),
           OpSpec("FULLY_CONNECTED", [5, 6, 7], [8], {})]
    return build_model(ops, tensors, inputs=[0], outputs=[8])


def test_sharing_never_grows_the_arena():
    """The gemm takes 5 * depth bytes of scratch: where that would raise the arena's peak
    (a wide FC input after a small conv) the FC keeps its own kernel; where the peak is
    the conv's, it moves."""
    cases = {"moves": ((16, 8, 3, 2, 1), True),           # 7x7x1 -> 4: 196 MACs
             "stays": ((8, 4, 1, 1, 16), False)}           # 8x8x16 -> 4: 4,096 MACs
    for name, (geometry, moved) in cases.items():
        data = _conv_then_fc(*geometry)
        art = kc.compile(kc.load(data), "mps2-an386")
        fc = [o["index"] for o in art.report["ops"] if o["type"] == "FULLY_CONNECTED"]
        assert [m["layer"] for m in art.report["shared_code"]] == (fc if moved else []), name
        assert _kernels(art)[-1] == ("kiln_conv2d_gemm_p8_s8" if moved
                                     else "kiln_fully_connected_rows8_p8_s8"), name
        x = rand_int8((1, geometry[0], geometry[0], geometry[1]), np.random.default_rng(1))
        assert_equal_exact(art.run(x)[0], run_reference(data, [x])[0], f"conv + FC, {name}")
