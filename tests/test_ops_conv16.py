"""16x8 CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and TRANSPOSE_CONV: kiln vs tflite-micro.

int16 activations (zero point 0), int8 weights, and the bias types TFLM's 16x8 kernels
take: int64 or none (the "wide" int64 arithmetic), int32 for CONV_2D and FULLY_CONNECTED
(TFLM's int32 accumulator, "narrow"), int16 for TRANSPOSE_CONV. Random cases (fixed
seeds) are packed many to a model as in test_ops_conv.py; every output is compared
exactly with TFLM.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from kiln.compiler.codegen.lowering import LOWERINGS, LowerCtx
from kiln.compiler.codegen.ops.conv import out_size
from kiln.compiler.numerics import requantize64
from kiln.compiler.paths import crt_dir
from reference import assert_equal_exact, run_reference
from test_ops_conv import _ARM_FLAGS, ACTS, Case, _build, _in_scale, _mean_scale, _weights
from tflite_builder import TensorSpec, const, rand_int

from conftest import models_root, require_tool


def run16(cases: list[Case], seed: int, ref_cases: list[Case] | None = None,
          board: str = "host") -> kc.Artifact:
    """Compile the cases as one model, run kiln and TFLM on the same random int16 inputs
    and compare every output exactly. `board` picks the variants (mps2-an386 has the DSP
    extension: the SIMD ones, whose plain C twins run here on the host)."""
    model = _build(cases)
    ref_model = model if ref_cases is None else _build(ref_cases)
    rng = np.random.default_rng(seed)
    xs = [rng.integers(-32768, 32768, size=t.shape).astype(np.int16)
          for c in cases for t in c.inputs if t is not None and t.data is None]
    art = kc.compile(kc.load(model), board=board)
    got = art.run(*xs)
    want = run_reference(ref_model, xs)
    failures = []
    for c, g, w in zip(cases, got, want):
        try:
            assert_equal_exact(g, w, c.label)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)
    return art


# --- random parameters ------------------------------------------------------------------

def _x16(shape: tuple[int, ...], scale: float) -> TensorSpec:
    return TensorSpec(shape, "int16", scale=scale, zero_point=0)


def _x_scale(rng: np.random.Generator) -> float:
    return float(np.float32(_in_scale(rng) / 256))


def _y_scale(rng: np.random.Generator, x_scale: float, w_scale: float, taps: int) -> float:
    """Outputs of a few thousand typically; sometimes an effective multiplier far above
    (x 1e-3) or below (x 200) the typical one."""
    typical = x_scale * w_scale * 100.0 * np.sqrt(max(taps, 1))
    r = rng.random()
    factor = 1e-3 if r < 0.08 else 200.0 if r < 0.16 else \
        float(np.exp(rng.uniform(np.log(0.3), np.log(3.0))))
    return float(np.float32(typical * factor))


def _bias16(rng: np.random.Generator, n: int, x_scale: float, w: TensorSpec, dtype: str,
            magnitude: int | None = None) -> TensorSpec:
    """A constant bias of `dtype`: int64 up to +-2^35, int32 up to +-2^30, int16."""
    if magnitude is None:
        choices = {"int64": [0, 1000, 10**6, 2**35], "int32": [0, 1000, 10**6, 2**30],
                   "int16": [0, 100, 30000]}[dtype]
        magnitude = int(rng.choice(choices))
    scales = [float(np.float32(x_scale) * s) for s in np.asarray(w.scales, np.float32)]
    data = rng.integers(-magnitude, magnitude + 1, size=n)
    return TensorSpec((n,), dtype, scale=scales if len(scales) > 1 else scales[0],
                      zero_point=[0] * len(scales), data=data)


def conv16_case(rng: np.random.Generator, i: int, **fixed) -> Case:
    p = dict(n=int(rng.choice([1, 1, 1, 2])), kh=int(rng.integers(1, 6)),
             kw=int(rng.integers(1, 6)), sh=int(rng.choice([1, 1, 2, 3])),
             sw=int(rng.choice([1, 1, 2, 3])), dh=int(rng.choice([1, 1, 1, 2, 3])),
             dw=int(rng.choice([1, 1, 1, 2])), padding=str(rng.choice(["SAME", "VALID"])),
             cin=int(rng.integers(1, 9)), cout=int(rng.integers(1, 11)),
             groups=int(rng.choice([1, 1, 1, 1, 2])), per_channel=bool(rng.random() < 0.7),
             bias=str(rng.choice(["int64", "int64", "int32", "none"])), act=str(rng.choice(ACTS)))
    p.update(fixed)
    cin, cout = p["cin"] * p["groups"], p["cout"] * p["groups"]
    eff_h, eff_w = (p["kh"] - 1) * p["dh"] + 1, (p["kw"] - 1) * p["dw"] + 1
    h = p.get("h", int(rng.integers(eff_h if p["padding"] == "VALID" else 1, eff_h + 10)))
    w_ = p.get("w", int(rng.integers(eff_w if p["padding"] == "VALID" else 1, eff_w + 10)))
    oh = out_size(p["padding"], h, p["kh"], p["sh"], p["dh"])
    ow = out_size(p["padding"], w_, p["kw"], p["sw"], p["dw"])
    xs = _x_scale(rng)
    wt = _weights(rng, (cout, p["kh"], p["kw"], p["cin"]), 0 if p["per_channel"] else None, cout)
    b = None if p["bias"] == "none" else _bias16(rng, cout, xs, wt, p["bias"])
    ys = _y_scale(rng, xs, _mean_scale(wt), p["kh"] * p["kw"] * p["cin"])
    x, y = _x16((p["n"], h, w_, cin), xs), _x16((p["n"], oh, ow, cout), ys)
    opts = {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"],
            "dilation_h_factor": p["dh"], "dilation_w_factor": p["dw"],
            "fused_activation_function": p["act"]}
    label = (f"conv16#{i} x{list(x.shape)} w{list(wt.shape)} y{list(y.shape)} "
             f"s{p['sh']}x{p['sw']} d{p['dh']}x{p['dw']} {p['padding']} {p['act']} "
             f"{'pc' if p['per_channel'] else 'pt'} bias={p['bias']}")
    return Case("CONV_2D", [x, wt, b], y, opts, label)


def dwconv16_case(rng: np.random.Generator, i: int, **fixed) -> Case:
    p = dict(n=int(rng.choice([1, 1, 1, 2])), kh=int(rng.integers(1, 6)),
             kw=int(rng.integers(1, 6)), sh=int(rng.choice([1, 1, 2, 3])),
             sw=int(rng.choice([1, 1, 2, 3])), dh=int(rng.choice([1, 1, 1, 2, 3])),
             dw=int(rng.choice([1, 1, 1, 2])), padding=str(rng.choice(["SAME", "VALID"])),
             cin=int(rng.integers(1, 13)), mult=int(rng.choice([1, 1, 1, 2, 3])),
             per_channel=bool(rng.random() < 0.7), bias=bool(rng.random() < 0.85),
             act=str(rng.choice(ACTS)))
    p.update(fixed)
    cout = p["cin"] * p["mult"]
    eff_h, eff_w = (p["kh"] - 1) * p["dh"] + 1, (p["kw"] - 1) * p["dw"] + 1
    h = p.get("h", int(rng.integers(eff_h if p["padding"] == "VALID" else 1, eff_h + 10)))
    w_ = p.get("w", int(rng.integers(eff_w if p["padding"] == "VALID" else 1, eff_w + 10)))
    oh = out_size(p["padding"], h, p["kh"], p["sh"], p["dh"])
    ow = out_size(p["padding"], w_, p["kw"], p["sw"], p["dw"])
    xs = _x_scale(rng)
    wt = _weights(rng, (1, p["kh"], p["kw"], cout), 3 if p["per_channel"] else None, cout)
    b = _bias16(rng, cout, xs, wt, "int64") if p["bias"] else None
    ys = _y_scale(rng, xs, _mean_scale(wt), p["kh"] * p["kw"])
    x, y = _x16((p["n"], h, w_, p["cin"]), xs), _x16((p["n"], oh, ow, cout), ys)
    opts = {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"],
            "dilation_h_factor": p["dh"], "dilation_w_factor": p["dw"],
            "depth_multiplier": p["mult"], "fused_activation_function": p["act"]}
    label = (f"dwconv16#{i} x{list(x.shape)} w{list(wt.shape)} y{list(y.shape)} m{p['mult']} "
             f"s{p['sh']}x{p['sw']} d{p['dh']}x{p['dw']} {p['padding']} {p['act']} "
             f"{'pc' if p['per_channel'] else 'pt'} bias={p['bias']}")
    return Case("DEPTHWISE_CONV_2D", [x, wt, b], y, opts, label)


def run_dwconv16(cases: list[Case], seed: int, board: str = "host") -> kc.Artifact:
    """TFLM cannot run a DEPTHWISE_CONV_2D without a bias (its Prepare() crashes, see
    test_ops_conv.run_dwconv_cases): it runs those with an explicit zero int64 bias, which
    is the same arithmetic (TFLM's int16 depthwise is int64 with or without a bias)."""
    ref = []
    for c in cases:
        if c.inputs[2] is None:
            w = c.inputs[1]
            zeros = TensorSpec((w.shape[3],), "int64", scale=w.scales[0], zero_point=0,
                               data=np.zeros(w.shape[3], np.int64))
            c = Case(c.op, [c.inputs[0], w, zeros], c.output, c.options, c.label)
        ref.append(c)
    return run16(cases, seed, ref_cases=ref, board=board)


def fc16_case(rng: np.random.Generator, i: int, **fixed) -> Case:
    p = dict(batches=int(rng.choice([1, 1, 2, 3])), depth=int(rng.integers(1, 80)),
             units=int(rng.integers(1, 21)), per_channel=bool(rng.random() < 0.5),
             w_zp=0, bias=str(rng.choice(["int64", "int64", "int32", "none"])),
             act=str(rng.choice(ACTS)))
    p.update(fixed)
    xs = _x_scale(rng)
    wt = _weights(rng, (p["units"], p["depth"]), 0 if p["per_channel"] else None, p["units"],
                  zero_point=p["w_zp"])
    b = None if p["bias"] == "none" else _bias16(rng, p["units"], xs, wt, p["bias"])
    ys = _y_scale(rng, xs, _mean_scale(wt), p["depth"])
    x, y = _x16((p["batches"], p["depth"]), xs), _x16((p["batches"], p["units"]), ys)
    label = (f"fc16#{i} x{list(x.shape)} w{list(wt.shape)} {p['act']} "
             f"{'pc' if p['per_channel'] else 'pt'} w_zp={p['w_zp']} bias={p['bias']}")
    return Case("FULLY_CONNECTED", [x, wt, b], y, {"fused_activation_function": p["act"]},
                label)


def tconv16_case(rng: np.random.Generator, i: int, **fixed) -> Case:
    p = dict(n=int(rng.choice([1, 1, 2])), kh=int(rng.integers(1, 6)), kw=int(rng.integers(1, 6)),
             sh=int(rng.choice([1, 2, 2, 3])), sw=int(rng.choice([1, 2, 2, 3])),
             padding=str(rng.choice(["SAME", "VALID"])), cin=int(rng.integers(1, 7)),
             cout=int(rng.integers(1, 8)), h=int(rng.integers(1, 7)), w=int(rng.integers(1, 7)),
             per_channel=bool(rng.random() < 0.7),
             bias=str(rng.choice(["int64", "int64", "int16", "none"])),
             act=str(rng.choice(ACTS, p=[0.7, 0.1, 0.1, 0.1])))
    p.update(fixed)
    if p["padding"] == "SAME":
        oh, ow = p["h"] * p["sh"], p["w"] * p["sw"]
    else:
        oh, ow = (p["h"] - 1) * p["sh"] + p["kh"], (p["w"] - 1) * p["sw"] + p["kw"]
    xs = _x_scale(rng)
    wt = _weights(rng, (p["cout"], p["kh"], p["kw"], p["cin"]), 0 if p["per_channel"] else None,
                  p["cout"])
    taps = max(1, (p["kh"] // p["sh"]) * (p["kw"] // p["sw"])) * p["cin"]
    ys = _y_scale(rng, xs, _mean_scale(wt), taps)
    x, y = _x16((p["n"], p["h"], p["w"], p["cin"]), xs), _x16((p["n"], oh, ow, p["cout"]), ys)
    opts = {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"]}
    if p["act"] != "NONE":
        opts["fused_activation_function"] = p["act"]
    label = (f"tconv16#{i} x{list(x.shape)} w{list(wt.shape)} y{list(y.shape)} "
             f"s{p['sh']}x{p['sw']} {p['padding']} {'pc' if p['per_channel'] else 'pt'} "
             f"bias={p['bias']} {p['act']}")
    inputs: list[TensorSpec | None] = [const(list(y.shape), "int32"), wt, x]
    if p["bias"] != "none":
        inputs.append(_bias16(rng, p["cout"], xs, wt, p["bias"]))
    return Case("TRANSPOSE_CONV", inputs, y, opts, label)


# --- bit-exact with TFLM ------------------------------------------------------------------

def test_conv2d_16x8_random():
    rng = np.random.default_rng(1616)
    art = run16([conv16_case(rng, i) for i in range(50)], seed=11)
    kernels = {op["kernel"] for op in art.report["ops"]}
    assert kernels == {"kiln_conv2d_s16", "kiln_conv2d_b32_s16"}


def test_conv2d_16x8_edge_cases():
    rng = np.random.default_rng(1617)
    cases = [
        conv16_case(rng, 0, h=1, w=1, kh=1, kw=1, padding="VALID"),
        conv16_case(rng, 1, h=1, w=1, kh=3, kw=3, padding="SAME", bias="int64"),
        conv16_case(rng, 2, h=9, w=9, kh=2, kw=2, sh=4, sw=3, dh=1, dw=1),
        conv16_case(rng, 3, h=10, w=10, kh=3, kw=3, sh=2, sw=2, dh=1, dw=1, padding="SAME"),
        conv16_case(rng, 4, kh=3, kw=3, groups=2, dh=2, dw=2, padding="SAME", bias="int64"),
        conv16_case(rng, 5, kh=1, kw=1, groups=3, bias="none"),
        conv16_case(rng, 6, h=3, w=12, kh=3, kw=4, sh=1, sw=2, dh=1, dw=1, padding="VALID",
                    cin=64, cout=8, groups=1, bias="int64"),           # the SEANet layer's shape
        conv16_case(rng, 7, act="RELU", bias="int32"),
        conv16_case(rng, 8, act="RELU6", bias="int64"),
        conv16_case(rng, 9, act="RELU_N1_TO_1", bias="int64"),
        # 300 taps of at most 2^22: a block boundary, and an int32 sum that can wrap.
        conv16_case(rng, 10, h=5, w=5, kh=5, kw=5, cin=12, cout=3, groups=1, dh=1, dw=1,
                    padding="SAME", bias="none"),
    ]
    run16(cases, seed=12)


def test_simd_variants_16x8_random():
    """The SIMD (SMLAD on int16 pairs) CONV_2D and FULLY_CONNECTED, the defaults on a
    board with the DSP extension, in their plain C form: bit-exact with TFLM too (odd
    depths, groups, every bias type, per-tensor weights with a zero point)."""
    rng = np.random.default_rng(1625)
    cases = [conv16_case(rng, i) for i in range(30)] + [fc16_case(rng, i) for i in range(30)]
    cases += [conv16_case(rng, 30, h=6, w=6, kh=5, kw=5, cin=12, groups=1, bias="int32"),
              fc16_case(rng, 31, depth=601, units=5, per_channel=False, w_zp=-9, bias="int64"),
              fc16_case(rng, 32, depth=1024, units=3, batches=3, bias="int32")]
    art = run16(cases, seed=19, board="mps2-an386")
    kernels = {op["kernel"] for op in art.report["ops"]}
    assert kernels == {"kiln_conv2d_dsp_s16", "kiln_conv2d_dsp_b32_s16",
                       "kiln_fully_connected_dsp_s16", "kiln_fully_connected_dsp_b32_s16"}
    # The int8-weight SIMD kernels, through tuning records.
    from kiln.compiler.codegen.lowering import Target
    from kiln.compiler.tune.records import Records
    from kiln.compiler.tune.workloads import extract_workloads

    w8 = {"variant": "dsp", "weights": "s8"}
    model = _build(cases)
    graph = kc.compile(kc.load(model), board="mps2-an386").graph
    records = Records(entries=[
        {"workload": w.key, "board": "mps2-an386", "knobs": w8, "status": "ok",
         "cycles": {"median": 1, "min": 1, "max": 1}}
        for w in extract_workloads(graph, Target("mps2-an386", "cortex-m4", True))])
    art = kc.compile(kc.load(model), board="mps2-an386", tuning_records=records)
    assert {op["kernel"] for op in art.report["ops"]} == {
        "kiln_conv2d_dsp_w8_s16", "kiln_conv2d_dsp_w8_b32_s16",
        "kiln_fully_connected_dsp_w8_s16", "kiln_fully_connected_dsp_w8_b32_s16"}
    rng = np.random.default_rng(19)
    xs = [rng.integers(-32768, 32768, size=t.shape).astype(np.int16)
          for c in cases for t in c.inputs if t is not None and t.data is None]
    for c, g, w in zip(cases, art.run(*xs), run_reference(model, xs)):
        assert_equal_exact(g, w, c.label + " (w8)")


def test_dwconv2d_16x8_random():
    rng = np.random.default_rng(1618)
    run_dwconv16([dwconv16_case(rng, i) for i in range(50)], seed=13)


def test_dwconv2d_16x8_edge_cases():
    rng = np.random.default_rng(1619)
    cases = [
        dwconv16_case(rng, 0, h=1, w=1, kh=3, kw=3, padding="SAME"),
        dwconv16_case(rng, 1, kh=3, kw=3, mult=4, dh=2, dw=2, padding="SAME"),
        dwconv16_case(rng, 2, kh=3, kw=3, sh=2, sw=2, act="RELU6", bias=False),
        dwconv16_case(rng, 3, kh=5, kw=1, h=20, w=1, cin=16, mult=1, padding="VALID"),
        # Over 256 taps inside the image: the kernel's int64 path.
        dwconv16_case(rng, 4, kh=17, kw=17, h=20, w=19, sh=1, sw=1, dh=1, dw=1, cin=3, mult=2,
                      padding="SAME"),
    ]
    run_dwconv16(cases, seed=14)


def test_dwconv2d_16x8_simd():
    """The four-channel SIMD depthwise kernel (the default with the DSP extension, depth
    multiplier 1, up to 256 taps), in its plain C form: bit-exact with TFLM for any C
    (a last partial block), stride, dilation and padding; other layers keep the plain one."""
    rng = np.random.default_rng(1627)
    cases = [dwconv16_case(rng, i, mult=1) for i in range(30)]
    cases += [dwconv16_case(rng, 30, mult=1, cin=7, kh=3, kw=3, padding="SAME"),
              dwconv16_case(rng, 31, mult=1, cin=64, kh=3, kw=3, sh=2, sw=2, padding="SAME"),
              dwconv16_case(rng, 32, mult=1, cin=4, h=1, w=1, kh=3, kw=3, padding="SAME"),
              dwconv16_case(rng, 33, mult=2, cin=5),
              dwconv16_case(rng, 34, mult=1, cin=3, kh=17, kw=16, h=18, w=18, dh=1, dw=1,
                            sh=1, sw=1, padding="SAME")]
    art = run_dwconv16(cases, seed=20, board="mps2-an386")
    kernels = [op["kernel"] for op in art.report["ops"]]
    assert kernels[:33] == ["kiln_dwconv2d_ch4_s16"] * 33
    assert kernels[33:] == ["kiln_dwconv2d_s16"] * 2     # multiplier 2; 272 taps


def test_fully_connected_16x8_random():
    rng = np.random.default_rng(1620)
    art = run16([fc16_case(rng, i) for i in range(50)], seed=15)
    kernels = {op["kernel"] for op in art.report["ops"]}
    assert kernels == {"kiln_fully_connected_s16", "kiln_fully_connected_b32_s16"}


def test_fully_connected_16x8_edge_cases():
    rng = np.random.default_rng(1621)
    cases = [
        fc16_case(rng, 0, depth=1, units=1, batches=1),
        fc16_case(rng, 1, depth=640, units=16, batches=1, per_channel=False, bias="int64"),
        fc16_case(rng, 2, per_channel=False, w_zp=-17, bias="int64"),
        fc16_case(rng, 3, per_channel=False, w_zp=9, bias="int32"),
        fc16_case(rng, 4, per_channel=True, act="RELU", bias="none", batches=4),
        fc16_case(rng, 5, per_channel=False, bias="none", w_zp=3),
        fc16_case(rng, 6, depth=600, units=4, bias="int64", magnitude=None),
    ]
    run16(cases, seed=16)


def test_narrow_accumulator_wraps_as_tflm():
    """A FULLY_CONNECTED (or CONV_2D) with an int32 bias accumulates in int32 in TFLM and
    wraps; kiln takes the exact sum modulo 2^32: the same outputs. All-extreme inputs
    times all-127 weights over 1024 taps reach 2^32 and more. Without a bias or with an
    int64 one the sum is exact."""
    rng = np.random.default_rng(1622)
    cases = []
    for i, bias in enumerate(["none", "int32", "int64"]):
        c = fc16_case(rng, i, depth=1024, units=3, batches=2, per_channel=True, bias=bias)
        w = c.inputs[1]
        w.data = np.full(w.shape, 127, np.int8)
        c.label += " (all-127 weights)"
        cases.append(c)
    model_inputs = [np.full((2, 1024), 32767, np.int16) for _ in cases]
    model = _build(cases)
    got = kc.compile(kc.load(model), board="host").run(*model_inputs)
    want = run_reference(model, model_inputs)
    for c, g, w in zip(cases, got, want):
        assert_equal_exact(g, w, c.label)


def test_transpose_conv_16x8_random():
    rng = np.random.default_rng(1623)
    run16([tconv16_case(rng, i) for i in range(40)], seed=17)


def test_transpose_conv_16x8_edge_cases():
    rng = np.random.default_rng(1624)
    cases = [
        tconv16_case(rng, 0, h=1, w=1, kh=1, kw=1, sh=1, sw=1),
        tconv16_case(rng, 1, h=3, w=4, kh=2, kw=2, sh=3, sw=3, bias="int16"),
        tconv16_case(rng, 2, h=4, w=3, kh=4, kw=3, sh=2, sw=2, padding="SAME", bias="int64"),
        tconv16_case(rng, 3, act="RELU", bias="none"),
        tconv16_case(rng, 4, act="RELU6", bias="int64"),
    ]
    run16(cases, seed=18)


def _sanitizer_main(n_in: int, n_out: int) -> str:
    """main(): read input i from argv[1 + i], run, write output j to argv[1 + n_in + j];
    the buffers are int64_t arrays, so int16 data in them is aligned."""
    lines = ["#include <stdio.h>", '#include "model.h"', "",
             "static uint8_t arena[KILN_ARENA_BYTES] __attribute__((aligned(16)));", ""]
    lines += [f"static int64_t in{i}[(KILN_INPUT_{i}_BYTES + 7) / 8];" for i in range(n_in)]
    lines += [f"static int64_t out{j}[(KILN_OUTPUT_{j}_BYTES + 7) / 8];" for j in range(n_out)]
    lines += ["", "static int io(const char *path, void *buf, size_t n, int write)", "{",
              '    FILE *f = fopen(path, write ? "wb" : "rb");',
              "    if (f == NULL) return 1;",
              "    size_t done = write ? fwrite(buf, 1, n, f) : fread(buf, 1, n, f);",
              "    fclose(f);", "    return done != n;", "}", "",
              "int main(int argc, char **argv)", "{",
              f"    if (argc != {1 + n_in + n_out}) return 2;"]
    lines += [f"    if (io(argv[{1 + i}], in{i}, KILN_INPUT_{i}_BYTES, 0)) return 3;"
              for i in range(n_in)]
    lines += ["    const void *inputs[] = {" + ", ".join(f"in{i}" for i in range(n_in)) + "};",
              "    void *outputs[] = {" + ", ".join(f"out{j}" for j in range(n_out)) + "};",
              "    if (kiln_run(inputs, outputs, arena) != 0) return 4;"]
    lines += [f"    if (io(argv[{1 + n_in + j}], out{j}, KILN_OUTPUT_{j}_BYTES, 1)) return 5;"
              for j in range(n_out)]
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


@pytest.mark.slow
def test_kernels_16x8_clean_under_asan_and_ubsan(tmp_path: Path):
    """Edge cases of the four 16x8 ops in one model (every bias type, an int32 sum that
    wraps), built with -fsanitize=address,undefined: no report, and the outputs of the
    optimised build (which matches TFLM)."""
    require_tool("cc")
    from kiln.compiler.host_build import build_executable

    rng = np.random.default_rng(92)
    cases = ([conv16_case(rng, i) for i in range(6)] +
             [conv16_case(rng, 6, h=1, w=1, kh=3, kw=3, padding="SAME", bias="int32"),
              conv16_case(rng, 7, groups=3, bias="none"),
              conv16_case(rng, 8, h=6, w=6, kh=5, kw=5, cin=12, groups=1, bias="int32")] +
             [dwconv16_case(rng, i) for i in range(9, 15)] +
             [fc16_case(rng, i) for i in range(15, 21)] +
             [fc16_case(rng, 21, depth=1024, units=2, bias="int32", per_channel=False, w_zp=7)] +
             [tconv16_case(rng, i) for i in range(22, 28)])
    model = _build(cases)
    art = kc.compile(kc.load(model), board="host")
    sources = {k: v for k, v in art.files.items() if k != "kiln.json"}
    exe = build_executable(sources, _sanitizer_main(len(art.report["inputs"]), len(cases)),
                           tmp_path / "build", sanitize=True)
    xs = [rng.integers(-32768, 32768, size=spec["shape"]).astype(np.int16)
          for spec in art.report["inputs"]]
    args = [str(exe)]
    for i, x in enumerate(xs):
        (tmp_path / f"in{i}.bin").write_bytes(x.tobytes())
        args.append(str(tmp_path / f"in{i}.bin"))
    args += [str(tmp_path / f"out{j}.bin") for j in range(len(cases))]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "runtime error" not in proc.stderr, proc.stderr[-3000:]
    for j, (c, want) in enumerate(zip(cases, art.run(*xs))):
        got = np.frombuffer((tmp_path / f"out{j}.bin").read_bytes(), dtype=np.int16)
        assert_equal_exact(got, want.reshape(-1), c.label + " under sanitizers")


# --- rejections ---------------------------------------------------------------------------

def _check_reason(case: Case) -> str | None:
    g = kc.load(_build([case]))
    return LOWERINGS[g.ops[0].type].check(LowerCtx(graph=g, op=g.ops[0], layer=0))


def test_rejects_what_tflm_16x8_cannot_run():
    rng = np.random.default_rng(1630)
    ok = conv16_case(rng, 0, bias="int64")
    assert _check_reason(ok) is None
    # TFLM ignores int16 zero points: a model that sets one is refused, not miscomputed.
    c = conv16_case(rng, 1)
    c.output.zero_point = 3
    assert "symmetric" in _check_reason(c)
    # int16 in, int8 out is no 16x8 layer.
    c = fc16_case(rng, 2)
    c.output = TensorSpec(c.output.shape, "int8", scale=c.output.scale, zero_point=0)
    assert "int16 input and output" in _check_reason(c)
    # TFLM's 16x8 depthwise reads its bias as int64 only.
    d = dwconv16_case(rng, 3, bias=True)
    d.inputs[2] = _bias16(rng, d.inputs[2].shape[0], 1e-4, d.inputs[1], "int32")
    assert "int64" in _check_reason(d)
    # An int64 bias beyond TFLM's 2^47 input range of the int64 requantization.
    f = fc16_case(rng, 4, bias="int64", depth=8, units=2)
    f.inputs[2].data = np.full(f.inputs[2].shape, 1 << 50, np.int64)
    assert "int64 accumulator could overflow" in _check_reason(f)
    # An effective scale of 128 or more: TFLM's int64 requantization needs shift <= 7.
    f = fc16_case(rng, 5, bias="none", depth=8, units=2)
    f.output.scale = float(np.float32(f.inputs[0].scale * np.mean(f.inputs[1].scales) / 200))
    assert "16x8" in _check_reason(f)
    with pytest.raises(kc.ModelError, match="16x8"):
        kc.compile(kc.load(_build([f])), board="host")


# --- the int64 requantization: C vs numpy ------------------------------------------------

_REQUANT64_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include "kiln_math.h"

int main(void)
{
    long long x;
    long m, s;
    while (scanf("%lld %ld %ld", &x, &m, &s) == 3) {
        printf("%ld\n", (long)kiln_requantize64((int64_t)x, (int32_t)m, (int32_t)s));
    }
    return 0;
}
"""


def test_requantize64_c_matches_numpy(tmp_path: Path):
    """kiln_requantize64 (kiln_math.h) and numerics.requantize64 agree on random and edge
    values of the whole domain (|x| < 2^47, multiplier in [0, 2^31), shift in [-31, 7]),
    results that wrap included."""
    cc = shutil.which("cc") or pytest.skip("no host C compiler")
    rng = np.random.default_rng(64)
    n = 20000
    x = np.concatenate([rng.integers(-(1 << 47) + 1, 1 << 47, n),
                        rng.integers(-100000, 100000, n),
                        [0, 1, -1, (1 << 47) - 1, -(1 << 47) + 1, 1 << 20, -(1 << 20)]])
    m = np.concatenate([rng.integers(1 << 30, 1 << 31, 2 * n),
                        [0, 0x7FFF0000 - 1, 0x7FFF0000, (1 << 31) - 1, 1 << 30, 32767, 1 << 30]])
    s = np.concatenate([rng.integers(-31, 8, 2 * n), [7, -31, 0, 7, -31, 3, -15]])
    src = tmp_path / "main.c"
    src.write_text(_REQUANT64_MAIN)
    exe = tmp_path / "requant64"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2",
                    "-I", str(crt_dir() / "kernels"), "-o", str(exe), str(src)], check=True)
    feed = "\n".join(f"{a} {b} {c}" for a, b, c in zip(x.tolist(), m.tolist(), s.tolist()))
    out = subprocess.run([str(exe)], input=feed, capture_output=True, text=True, check=True)
    got = np.array([int(v) for v in out.stdout.split()], dtype=np.int64)
    want = requantize64(x, m, s)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(int(x[i]), int(m[i]), int(s[i]), int(got[i]), int(want[i]))
                           for i in bad[:10]]
    assert np.any(np.abs(want) > 1 << 20) and np.any(want < 0)    # the test covers wide values


# --- a real 16x8 model ----------------------------------------------------------------------

def seanet_model() -> bytes:
    path = models_root() / "external" / "tfm_seanet_conv10.tflite"
    if not path.exists():
        pytest.skip(f"{path} not found (set KILN_MODELS)")
    return path.read_bytes()


def _seanet_inputs(model: bytes, n: int, seed: int) -> list[np.ndarray]:
    """n random int16 inputs of the model's input shape: full range and small values."""
    g = kc.load(model)
    shape = g.tensor(g.inputs[0]).shape
    rng = np.random.default_rng(seed)
    return [rng.integers(-32768, 32768, size=shape).astype(np.int16) if i % 2 == 0 else
            rng.integers(-300, 300, size=shape).astype(np.int16) for i in range(n)]


def test_seanet_conv_bit_exact_on_host():
    """SEANet's 16x8 CONV_2D (3x4 filter, stride 1x2, 64 -> 64 channels, int64 bias): kiln
    on the host equals TFLM on every output of several inputs."""
    model = seanet_model()
    art = kc.compile(kc.load(model), board="host")
    assert [op["kernel"] for op in art.report["ops"]] == ["kiln_conv2d_s16"]
    for i, x in enumerate(_seanet_inputs(model, 4, seed=21)):
        assert_equal_exact(art.run(x)[0], run_reference(model, [x])[0], f"seanet input {i}")


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_seanet_conv_bit_exact_on_qemu(tmp_path: Path):
    """The SEANet 16x8 conv as standalone firmware on QEMU's Cortex-M4 (mps2-an386, both
    SIMD kernels) and Cortex-M3 (mps2-an385, the plain one): outputs identical to TFLM."""
    from kiln.project_gen import create_project

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    model = seanet_model()
    path = tmp_path / "seanet.tflite"
    path.write_bytes(model)
    from kiln.compiler.codegen.lowering import Target
    from kiln.compiler.tune.records import Records
    from kiln.compiler.tune.workloads import extract_workloads

    [w] = extract_workloads(kc.compile(kc.load(model), board="mps2-an386").graph,
                            Target("mps2-an386", "cortex-m4", True))
    w8 = Records(entries=[{"workload": w.key, "board": "mps2-an386", "status": "ok",
                           "knobs": {"variant": "dsp", "weights": "s8"},
                           "cycles": {"median": 1, "min": 1, "max": 1}}])
    runs = [("mps2-an386", None, "kiln_conv2d_dsp_s16"),
            ("mps2-an386", w8, "kiln_conv2d_dsp_w8_s16"), ("mps2-an385", None, "kiln_conv2d_s16")]
    for i, (board, records, kernel) in enumerate(runs):
        p = create_project(path, board=board, out_dir=tmp_path / str(i), tuning_records=records)
        assert [op["kernel"] for op in p.manifest["ops"]] == [kernel]
        p.build()
        r = p.run()
        [x] = p.sample_inputs()
        assert x[0].dtype == np.int16
        assert_equal_exact(r.outputs[0], run_reference(model, x)[0], f"seanet {kernel} on {board}")
        assert r.instructions > 0
        print(f"seanet conv, {kernel} on {board}: {r.instructions:,} instructions")


@pytest.mark.cross
@pytest.mark.parametrize("cpu", sorted(_ARM_FLAGS))
def test_conv16_kernels_cross_compile(cpu: str, tmp_path: Path):
    cc = require_tool("arm-none-eabi-gcc")
    kernels = crt_dir() / "kernels"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", *_ARM_FLAGS[cpu],
                    "-I", str(kernels), "-c", str(kernels / "conv16.c"),
                    "-o", str(tmp_path / "conv16.o")], check=True)


def test_16x8_layers_are_tunable_workloads():
    """On a DSP core the 16x8 CONV_2D and FULLY_CONNECTED are tuner workloads of their
    own (keys end in int16: never an int8 layer's record), with the SIMD and the plain
    kernel as candidates, and a record picking the plain one replays."""
    from kiln.compiler.codegen.lowering import Target
    from kiln.compiler.tune.records import Records
    from kiln.compiler.tune.workloads import extract_workloads

    dsp = Target(board="mps2-an386", cpu="cortex-m4", dsp=True)
    rng = np.random.default_rng(1626)
    model = _build([conv16_case(rng, 0, bias="int64"), fc16_case(rng, 1, bias="int32")])
    graph = kc.compile(kc.load(model), board="mps2-an386").graph
    workloads = extract_workloads(graph, dsp)
    assert [w.op_type for w in workloads] == ["CONV_2D", "FULLY_CONNECTED"]
    for w in workloads:
        assert w.key.endswith(" int16")
        assert w.candidates == [{"variant": "dsp", "weights": "s16"},
                                {"variant": "dsp", "weights": "s8"}, {"variant": "generic"}]
    records = Records(entries=[
        {"workload": w.key, "board": "mps2-an386", "knobs": {"variant": "generic"},
         "status": "ok", "cycles": {"median": 1, "min": 1, "max": 1}} for w in workloads])
    art = kc.compile(kc.load(model), board="mps2-an386", tuning_records=records)
    assert [op["kernel"] for op in art.report["ops"]] == ["kiln_conv2d_s16",
                                                          "kiln_fully_connected_b32_s16"]


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_16x8_simd_kernels_on_qemu(tmp_path: Path):
    """The SIMD 16x8 kernels with the real DSP instructions (QEMU mps2-an386, Cortex-M4):
    depthwise (blocks of four channels and a partial one), conv and fully connected
    (every bias type), one model, outputs identical to TFLM."""
    from kiln.project_gen import create_project

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    rng = np.random.default_rng(1628)
    cases = ([dwconv16_case(rng, i, mult=1, bias=True, n=1) for i in range(4)] +
             [dwconv16_case(rng, 4, mult=1, cin=7, kh=3, kw=3, padding="SAME", n=1,
                            bias=True)] +
             [conv16_case(rng, i, n=1, bias=b) for i, b in
              zip(range(5, 8), ("int64", "int32", "none"))] +
             [fc16_case(rng, i, bias=b, batches=1) for i, b in
              zip(range(8, 11), ("int64", "int32", "none"))] +
             [fc16_case(rng, 11, depth=77, per_channel=False, w_zp=5, batches=1)])
    path = tmp_path / "m.tflite"
    path.write_bytes(_build(cases))
    p = create_project(path, board="mps2-an386", out_dir=tmp_path / "fw")
    kernels = {op["kernel"] for op in p.manifest["ops"]}
    assert {"kiln_dwconv2d_ch4_s16", "kiln_conv2d_dsp_s16", "kiln_conv2d_dsp_b32_s16",
            "kiln_fully_connected_dsp_s16", "kiln_fully_connected_dsp_b32_s16"} <= kernels
    r = p.run()
    [x] = p.sample_inputs()
    for c, got, want in zip(cases, r.outputs, run_reference(path.read_bytes(), x)):
        assert_equal_exact(got, want, c.label + " on mps2-an386")
