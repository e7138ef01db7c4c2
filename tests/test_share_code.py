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
    assert _kernels(tuned)[step] == "kiln_fully_connected_rows8_p8_s8" and op["type"] == op_type
