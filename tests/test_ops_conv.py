"""CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and TRANSPOSE_CONV: kiln vs tflite-micro.

Random cases (fixed seeds) are packed many to a model — independent ops side by side,
each with its own input and output — so one host build covers dozens of shapes; every
output is compared exactly with TFLM and a mismatch names the case and the differing
indices. Named edge cases follow the random ones.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from kiln.compiler.codegen.lowering import LOWERINGS, LowerCtx, Target
from kiln.compiler.codegen.ops.conv import LayerShape, conv2d_variant, out_size
from kiln.compiler.errors import ModelError
from kiln.compiler.paths import crt_dir
from reference import assert_equal_exact, run_reference
from tflite_builder import (OpSpec, TensorSpec, build_model, const, per_channel_scales,
                            rand_int8)

ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


@dataclass
class Case:
    """One op: its tensors (inputs first, then the output), options and a label."""

    op: str
    inputs: list[TensorSpec | None]
    output: TensorSpec
    options: dict
    label: str
    x_low: int = -128          # input value range
    x_high: int = 127
    extra: dict = field(default_factory=dict)


def _build(cases: list[Case]) -> bytes:
    tensors: list[TensorSpec] = []
    ops, model_in, model_out = [], [], []
    for c in cases:
        idx = []
        for t in c.inputs:
            if t is None:
                idx.append(-1)
                continue
            idx.append(len(tensors))
            if t.data is None:
                model_in.append(len(tensors))
            tensors.append(t)
        model_out.append(len(tensors))
        tensors.append(c.output)
        ops.append(OpSpec(c.op, idx, [model_out[-1]], dict(c.options)))
    return build_model(ops, tensors, model_in, model_out)


def run_cases(cases: list[Case], seed: int, ref_cases: list[Case] | None = None,
              board: str = "host") -> kc.Artifact:
    """Compile all cases as one model, run kiln and TFLM on the same random inputs, and
    compare every output exactly. `ref_cases` (same inputs) builds TFLM's model instead,
    for cases TFLM cannot run as they are. `board` picks the variants (a board with the
    DSP extension gets the SIMD ones, whose plain C path runs here on the host)."""
    model = _build(cases)
    ref_model = model if ref_cases is None else _build(ref_cases)
    rng = np.random.default_rng(seed)
    xs = [rand_int8(t.shape, rng, c.x_low, c.x_high)
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

def _zero_point(rng: np.random.Generator) -> int:
    r = rng.random()
    if r < 0.15:
        return -128
    if r < 0.3:
        return 127
    return int(rng.integers(-128, 128))


def _in_scale(rng: np.random.Generator) -> float:
    return float(np.float32(np.exp(rng.uniform(np.log(0.003), np.log(0.1)))))


def _out_scale(rng: np.random.Generator, in_scale: float, w_scale: float, taps: int) -> float:
    """An output scale that keeps most results in range; sometimes a tiny or a huge
    effective multiplier (x 1e-4 .. x 50 of the typical one)."""
    typical = in_scale * w_scale * 60.0 * np.sqrt(max(taps, 1))
    r = rng.random()
    if r < 0.08:
        factor = 1e-3          # effective multiplier well above 1
    elif r < 0.16:
        factor = 200.0         # tiny multiplier: outputs collapse to the zero point
    else:
        factor = float(np.exp(rng.uniform(np.log(0.3), np.log(3.0))))
    return float(np.float32(typical * factor))


def _weights(rng: np.random.Generator, shape: tuple[int, ...], axis: int | None,
             channels: int, zero_point: int = 0) -> TensorSpec:
    if axis is None:
        scale: float | list[float] = float(per_channel_scales(1, rng)[0])
        zps: int | list[int] = zero_point
    else:
        scale = [float(s) for s in per_channel_scales(channels, rng)]
        zps = [0] * channels
    return TensorSpec(shape, "int8", scale=scale, zero_point=zps, quantized_dimension=axis or 0,
                      data=rand_int8(shape, rng, -127, 127))


def _bias(rng: np.random.Generator, n: int, in_scale: float, w: TensorSpec,
          magnitude: int) -> TensorSpec:
    ws = np.asarray(w.scales, dtype=np.float32)
    scales = [float(np.float32(in_scale) * s) for s in ws]
    data = rng.integers(-magnitude, magnitude + 1, size=n).astype(np.int32)
    return TensorSpec((n,), "int32", scale=scales if len(scales) > 1 else scales[0],
                      zero_point=[0] * len(scales), data=data)


def _mean_scale(w: TensorSpec) -> float:
    return float(np.mean(w.scales))


# --- CONV_2D ----------------------------------------------------------------------------

def conv_case(rng: np.random.Generator, i: int, **fixed) -> Case:
    p = dict(n=int(rng.choice([1, 1, 1, 2])), kh=int(rng.integers(1, 6)),
             kw=int(rng.integers(1, 6)), sh=int(rng.choice([1, 1, 2, 3])),
             sw=int(rng.choice([1, 1, 2, 3])), dh=int(rng.choice([1, 1, 1, 2, 3])),
             dw=int(rng.choice([1, 1, 1, 2])), padding=str(rng.choice(["SAME", "VALID"])),
             cin=int(rng.integers(1, 9)), cout=int(rng.integers(1, 11)),
             groups=int(rng.choice([1, 1, 1, 1, 2])), per_channel=bool(rng.random() < 0.7),
             bias=bool(rng.random() < 0.85), act=str(rng.choice(ACTS)),
             x_zp=_zero_point(rng), y_zp=_zero_point(rng))
    p.update(fixed)
    cin = p["cin"] * p["groups"]
    cout = p["cout"] * p["groups"]
    eff_h = (p["kh"] - 1) * p["dh"] + 1
    eff_w = (p["kw"] - 1) * p["dw"] + 1
    h = p.get("h", int(rng.integers(eff_h if p["padding"] == "VALID" else 1, eff_h + 10)))
    w_ = p.get("w", int(rng.integers(eff_w if p["padding"] == "VALID" else 1, eff_w + 10)))
    oh = out_size(p["padding"], h, p["kh"], p["sh"], p["dh"])
    ow = out_size(p["padding"], w_, p["kw"], p["sw"], p["dw"])
    x_scale = _in_scale(rng)
    wt = _weights(rng, (cout, p["kh"], p["kw"], p["cin"]), 0 if p["per_channel"] else None, cout)
    b = _bias(rng, cout, x_scale, wt, int(rng.choice([0, 100, 5000, 200000]))) if p["bias"] else None
    y_scale = _out_scale(rng, x_scale, _mean_scale(wt), p["kh"] * p["kw"] * p["cin"])
    x = TensorSpec((p["n"], h, w_, cin), scale=x_scale, zero_point=p["x_zp"])
    y = TensorSpec((p["n"], oh, ow, cout), scale=y_scale, zero_point=p["y_zp"])
    opts = {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"],
            "dilation_h_factor": p["dh"], "dilation_w_factor": p["dw"],
            "fused_activation_function": p["act"]}
    label = (f"conv#{i} x{list(x.shape)} w{list(wt.shape)} y{list(y.shape)} "
             f"s{p['sh']}x{p['sw']} d{p['dh']}x{p['dw']} {p['padding']} {p['act']} "
             f"{'pc' if p['per_channel'] else 'pt'} bias={p['bias']} zp {p['x_zp']}/{p['y_zp']}")
    return Case("CONV_2D", [x, wt, b], y, opts, label)


def test_conv2d_random():
    rng = np.random.default_rng(1234)
    run_cases([conv_case(rng, i) for i in range(60)], seed=1)


def test_conv2d_edge_cases():
    rng = np.random.default_rng(77)
    cases = [
        conv_case(rng, 0, h=1, w=1, kh=1, kw=1, padding="VALID"),            # 1x1 spatial
        conv_case(rng, 1, h=1, w=1, kh=3, kw=3, padding="SAME"),             # all padding
        conv_case(rng, 2, h=9, w=9, kh=2, kw=2, sh=4, sw=3, dh=1, dw=1),     # stride > kernel
        conv_case(rng, 3, h=8, w=7, kh=4, kw=2, sh=1, sw=1, dh=1, dw=1,
                  padding="SAME"),                                           # asymmetric SAME
        conv_case(rng, 4, h=10, w=10, kh=3, kw=3, sh=2, sw=2, dh=1, dw=1,
                  padding="SAME"),                                           # SAME, stride 2
        conv_case(rng, 5, x_zp=-128, y_zp=127, act="RELU"),
        conv_case(rng, 6, x_zp=127, y_zp=-128, act="RELU6"),
        conv_case(rng, 7, kh=1, kw=1, sh=2, sw=2, padding="SAME", groups=1),  # 1x1 strided
        conv_case(rng, 8, kh=1, kw=1, sh=1, sw=1, padding="VALID", groups=1, cin=16, cout=13),
        conv_case(rng, 9, kh=1, kw=1, groups=3),                             # grouped 1x1
        conv_case(rng, 10, kh=3, kw=3, groups=2, dh=2, dw=2, padding="SAME"),
        conv_case(rng, 11, n=3, kh=3, kw=1, padding="SAME", sh=1, sw=1),
        conv_case(rng, 12, bias=False, x_zp=5),
        conv_case(rng, 13, h=12, w=12, kh=5, kw=5, dh=2, dw=2, padding="VALID"),
        conv_case(rng, 14, kh=10, kw=4, h=49, w=10, sh=2, sw=2, padding="SAME",
                  cin=1, cout=16, dh=1, dw=1, groups=1),                     # KWS first layer
    ]
    art = run_cases(cases, seed=2)
    kernels = {layer["kernel"] for layer in art.report["ops"]}
    assert kernels == {"kiln_conv2d_s8", "kiln_conv2d_1x1_s8"}


# --- DEPTHWISE_CONV_2D -----------------------------------------------------------------

def dwconv_case(rng: np.random.Generator, i: int, **fixed) -> Case:
    p = dict(n=int(rng.choice([1, 1, 1, 2])), kh=int(rng.integers(1, 6)),
             kw=int(rng.integers(1, 6)), sh=int(rng.choice([1, 1, 2, 3])),
             sw=int(rng.choice([1, 1, 2, 3])), dh=int(rng.choice([1, 1, 1, 2, 3])),
             dw=int(rng.choice([1, 1, 1, 2])), padding=str(rng.choice(["SAME", "VALID"])),
             cin=int(rng.integers(1, 13)), mult=int(rng.choice([1, 1, 1, 2, 3])),
             per_channel=bool(rng.random() < 0.7), bias=bool(rng.random() < 0.85),
             act=str(rng.choice(ACTS)), x_zp=_zero_point(rng), y_zp=_zero_point(rng))
    p.update(fixed)
    cout = p["cin"] * p["mult"]
    eff_h = (p["kh"] - 1) * p["dh"] + 1
    eff_w = (p["kw"] - 1) * p["dw"] + 1
    h = p.get("h", int(rng.integers(eff_h if p["padding"] == "VALID" else 1, eff_h + 10)))
    w_ = p.get("w", int(rng.integers(eff_w if p["padding"] == "VALID" else 1, eff_w + 10)))
    oh = out_size(p["padding"], h, p["kh"], p["sh"], p["dh"])
    ow = out_size(p["padding"], w_, p["kw"], p["sw"], p["dw"])
    x_scale = _in_scale(rng)
    wt = _weights(rng, (1, p["kh"], p["kw"], cout), 3 if p["per_channel"] else None, cout)
    b = _bias(rng, cout, x_scale, wt, int(rng.choice([0, 100, 5000, 200000]))) if p["bias"] else None
    y_scale = _out_scale(rng, x_scale, _mean_scale(wt), p["kh"] * p["kw"])
    x = TensorSpec((p["n"], h, w_, p["cin"]), scale=x_scale, zero_point=p["x_zp"])
    y = TensorSpec((p["n"], oh, ow, cout), scale=y_scale, zero_point=p["y_zp"])
    opts = {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"],
            "dilation_h_factor": p["dh"], "dilation_w_factor": p["dw"],
            "depth_multiplier": p["mult"], "fused_activation_function": p["act"]}
    label = (f"dwconv#{i} x{list(x.shape)} w{list(wt.shape)} y{list(y.shape)} m{p['mult']} "
             f"s{p['sh']}x{p['sw']} d{p['dh']}x{p['dw']} {p['padding']} {p['act']} "
             f"{'pc' if p['per_channel'] else 'pt'} bias={p['bias']} zp {p['x_zp']}/{p['y_zp']}")
    return Case("DEPTHWISE_CONV_2D", [x, wt, b], y, opts, label)


def run_dwconv_cases(cases: list[Case], seed: int, board: str = "host") -> kc.Artifact:
    """Neither TFLM nor TFLite runs a DEPTHWISE_CONV_2D without a bias (TFLM's Prepare()
    crashes on DeallocateTempTfLiteTensor(nullptr) in depthwise_conv_common.cc; TFLite
    refuses), so TFLM runs those cases with an explicit zero bias, which means the same."""
    ref_cases = []
    for c in cases:
        if c.inputs[2] is None:
            w = c.inputs[1]
            zeros = TensorSpec((w.shape[3],), "int32", scale=w.scales[0], zero_point=0,
                               data=np.zeros(w.shape[3], np.int32))
            c = Case(c.op, [c.inputs[0], w, zeros], c.output, c.options, c.label)
        ref_cases.append(c)
    return run_cases(cases, seed, ref_cases=ref_cases, board=board)


def test_dwconv2d_random():
    rng = np.random.default_rng(4321)
    run_dwconv_cases([dwconv_case(rng, i) for i in range(60)], seed=3)


def test_dwconv2d_edge_cases():
    rng = np.random.default_rng(78)
    cases = [
        dwconv_case(rng, 0, h=1, w=1, kh=1, kw=1, padding="VALID"),
        dwconv_case(rng, 1, h=1, w=1, kh=3, kw=3, padding="SAME", mult=2),
        dwconv_case(rng, 2, h=9, w=9, kh=2, kw=2, sh=4, sw=3, dh=1, dw=1),
        dwconv_case(rng, 3, h=8, w=7, kh=4, kw=2, sh=1, sw=1, dh=1, dw=1, padding="SAME"),
        dwconv_case(rng, 4, h=12, w=12, kh=3, kw=3, sh=2, sw=2, dh=1, dw=1, padding="SAME",
                    cin=16, mult=1),                                          # MobileNet
        dwconv_case(rng, 5, x_zp=-128, y_zp=127, act="RELU", mult=2),
        dwconv_case(rng, 6, x_zp=127, y_zp=-128, act="RELU6", mult=1, cin=9),
        dwconv_case(rng, 7, mult=4, cin=3, dh=2, dw=2, padding="SAME"),
        dwconv_case(rng, 8, bias=False, cin=8, mult=1),
        dwconv_case(rng, 9, n=3, cin=5, mult=1, kh=3, kw=3, padding="SAME"),
    ]
    run_dwconv_cases(cases, seed=4)


# --- FULLY_CONNECTED -------------------------------------------------------------------

def fc_case(rng: np.random.Generator, i: int, **fixed) -> Case:
    p = dict(batches=int(rng.choice([1, 1, 2, 3])), depth=int(rng.integers(1, 80)),
             units=int(rng.integers(1, 21)), per_channel=bool(rng.random() < 0.4),
             w_zp=0, bias=bool(rng.random() < 0.85), act=str(rng.choice(ACTS)),
             x_zp=_zero_point(rng), y_zp=_zero_point(rng), keep_dims=None)
    p.update(fixed)
    if not p["per_channel"] and "w_zp" not in fixed and rng.random() < 0.3:
        p["w_zp"] = int(rng.integers(-20, 21))
    x_scale = _in_scale(rng)
    wt = _weights(rng, (p["units"], p["depth"]), 0 if p["per_channel"] else None, p["units"],
                  zero_point=p["w_zp"])
    b = _bias(rng, p["units"], x_scale, wt, int(rng.choice([0, 100, 5000, 200000]))) \
        if p["bias"] else None
    y_scale = _out_scale(rng, x_scale, _mean_scale(wt), p["depth"])
    if p["keep_dims"]:                 # e.g. (2, 3, depth) -> (2, 3, units)
        lead = tuple(p["keep_dims"])
        x = TensorSpec(lead + (p["depth"],), scale=x_scale, zero_point=p["x_zp"])
        y = TensorSpec(lead + (p["units"],), scale=y_scale, zero_point=p["y_zp"])
    else:
        x = TensorSpec((p["batches"], p["depth"]), scale=x_scale, zero_point=p["x_zp"])
        y = TensorSpec((p["batches"], p["units"]), scale=y_scale, zero_point=p["y_zp"])
    opts = {"fused_activation_function": p["act"], "keep_num_dims": bool(p["keep_dims"])}
    label = (f"fc#{i} x{list(x.shape)} w{list(wt.shape)} y{list(y.shape)} {p['act']} "
             f"{'pc' if p['per_channel'] else 'pt'} w_zp={p['w_zp']} bias={p['bias']} "
             f"zp {p['x_zp']}/{p['y_zp']}")
    return Case("FULLY_CONNECTED", [x, wt, b], y, opts, label)


def test_fully_connected_random():
    rng = np.random.default_rng(999)
    run_cases([fc_case(rng, i) for i in range(60)], seed=5)


def test_fully_connected_edge_cases():
    rng = np.random.default_rng(79)
    cases = [
        fc_case(rng, 0, depth=1, units=1, batches=1),
        fc_case(rng, 1, depth=640, units=128, batches=1, per_channel=False),  # AD layer
        fc_case(rng, 2, keep_dims=(2, 3), per_channel=False, depth=12, units=5),
        fc_case(rng, 3, keep_dims=(1, 1, 4), per_channel=False, depth=7, units=3, w_zp=3),
        fc_case(rng, 4, per_channel=False, w_zp=-17, x_zp=-128, y_zp=127),
        fc_case(rng, 5, per_channel=True, x_zp=127, y_zp=-128, act="RELU"),
        fc_case(rng, 6, per_channel=True, bias=False, batches=4, depth=33, units=9),
        fc_case(rng, 7, per_channel=False, bias=False, batches=3, w_zp=5),
        fc_case(rng, 8, keep_dims=(2, 3), per_channel=True, depth=10, units=6),
        fc_case(rng, 9, keep_dims=(1, 2, 2), per_channel=True, depth=5, units=4, bias=False),
    ]
    run_cases(cases, seed=6)


# --- TRANSPOSE_CONV --------------------------------------------------------------------

def tconv_case(rng: np.random.Generator, i: int, **fixed) -> Case:
    p = dict(n=int(rng.choice([1, 1, 2])), kh=int(rng.integers(1, 6)), kw=int(rng.integers(1, 6)),
             sh=int(rng.choice([1, 2, 2, 3])), sw=int(rng.choice([1, 2, 2, 3])),
             padding=str(rng.choice(["SAME", "VALID"])), cin=int(rng.integers(1, 7)),
             cout=int(rng.integers(1, 8)), h=int(rng.integers(1, 7)), w=int(rng.integers(1, 7)),
             per_channel=bool(rng.random() < 0.7), bias=bool(rng.random() < 0.7),
             x_zp=_zero_point(rng), y_zp=_zero_point(rng),
             act=str(rng.choice(ACTS, p=[0.7, 0.1, 0.1, 0.1])))
    p.update(fixed)
    if p["padding"] == "SAME":
        oh, ow = p["h"] * p["sh"], p["w"] * p["sw"]
    else:
        oh, ow = (p["h"] - 1) * p["sh"] + p["kh"], (p["w"] - 1) * p["sw"] + p["kw"]
    x_scale = _in_scale(rng)
    wt = _weights(rng, (p["cout"], p["kh"], p["kw"], p["cin"]), 0 if p["per_channel"] else None,
                  p["cout"])
    b = _bias(rng, p["cout"], x_scale, wt, int(rng.choice([0, 100, 5000]))) if p["bias"] else None
    taps = max(1, (p["kh"] // p["sh"]) * (p["kw"] // p["sw"])) * p["cin"]
    y_scale = _out_scale(rng, x_scale, _mean_scale(wt), taps)
    x = TensorSpec((p["n"], p["h"], p["w"], p["cin"]), scale=x_scale, zero_point=p["x_zp"])
    y = TensorSpec((p["n"], oh, ow, p["cout"]), scale=y_scale, zero_point=p["y_zp"])
    shape = const(list(y.shape), "int32")
    opts = {"padding": p["padding"], "stride_h": p["sh"], "stride_w": p["sw"]}
    if p["act"] != "NONE":
        opts["fused_activation_function"] = p["act"]
    label = (f"tconv#{i} x{list(x.shape)} w{list(wt.shape)} y{list(y.shape)} "
             f"s{p['sh']}x{p['sw']} {p['padding']} {'pc' if p['per_channel'] else 'pt'} "
             f"bias={p['bias']} zp {p['x_zp']}/{p['y_zp']} {p['act']}")
    inputs: list[TensorSpec | None] = [shape, wt, x]
    if b is not None:
        inputs.append(b)
    return Case("TRANSPOSE_CONV", inputs, y, opts, label)


def test_transpose_conv_random():
    rng = np.random.default_rng(2468)
    run_cases([tconv_case(rng, i) for i in range(40)], seed=7)


def test_transpose_conv_edge_cases():
    rng = np.random.default_rng(80)
    cases = [
        tconv_case(rng, 0, h=1, w=1, kh=1, kw=1, sh=1, sw=1),
        tconv_case(rng, 1, h=3, w=4, kh=2, kw=2, sh=3, sw=3),              # stride > kernel
        tconv_case(rng, 2, h=4, w=3, kh=4, kw=3, sh=2, sw=2, padding="SAME"),
        tconv_case(rng, 3, x_zp=-128, y_zp=127),
        tconv_case(rng, 4, x_zp=127, y_zp=-128, bias=False),
        tconv_case(rng, 5, h=5, w=5, kh=3, kw=3, sh=2, sw=2, padding="SAME", cin=8, cout=8),
        tconv_case(rng, 6, act="RELU", y_zp=-5),       # fused activation (op version 4)
        tconv_case(rng, 7, act="RELU6", y_zp=-128),
    ]
    run_cases(cases, seed=8)


# --- sanitizers --------------------------------------------------------------------------

def _sanitizer_main(n_in: int, n_out: int) -> str:
    """main(): read input i from argv[1 + i], run, write output j to argv[1 + n_in + j]."""
    lines = ["#include <stdio.h>", '#include "model.h"', "",
             "static uint8_t arena[KILN_ARENA_BYTES] __attribute__((aligned(16)));", ""]
    lines += [f"static int8_t in{i}[KILN_INPUT_{i}_BYTES];" for i in range(n_in)]
    lines += [f"static int8_t out{j}[KILN_OUTPUT_{j}_BYTES];" for j in range(n_out)]
    lines += ["", "static int io(const char *path, void *buf, size_t n, int write)", "{",
              '    FILE *f = fopen(path, write ? "wb" : "rb");',
              "    if (f == NULL) return 1;",
              "    size_t done = write ? fwrite(buf, 1, n, f) : fread(buf, 1, n, f);",
              "    fclose(f);", "    return done != n;", "}", "",
              "int main(int argc, char **argv)", "{",
              f"    if (argc != {1 + n_in + n_out}) return 2;"]
    lines += [f"    if (io(argv[{1 + i}], in{i}, sizeof in{i}, 0)) return 3;" for i in range(n_in)]
    lines += ["    const void *inputs[] = {" + ", ".join(f"in{i}" for i in range(n_in)) + "};",
              "    void *outputs[] = {" + ", ".join(f"out{j}" for j in range(n_out)) + "};",
              "    if (kiln_run(inputs, outputs, arena) != 0) return 4;"]
    lines += [f"    if (io(argv[{1 + n_in + j}], out{j}, sizeof out{j}, 1)) return 5;"
              for j in range(n_out)]
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def run_sanitized(art, xs: list[np.ndarray], work: Path, n_out: int,
                  timeout: int = 120) -> list[np.ndarray]:
    """The compiled model built with -fsanitize=address,undefined and run once on `xs`
    (in `work`): its outputs as flat int8 arrays, after asserting a clean exit and no
    sanitizer report."""
    from kiln.compiler.host_build import build_executable
    sources = {k: v for k, v in art.files.items() if k != "kiln.json"}
    exe = build_executable(sources, _sanitizer_main(len(art.report["inputs"]), n_out),
                           work / "build", sanitize=True)
    args = [str(exe)]
    for i, x in enumerate(xs):
        (work / f"in{i}.bin").write_bytes(x.tobytes())
        args.append(str(work / f"in{i}.bin"))
    args += [str(work / f"out{j}.bin") for j in range(n_out)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0 and "runtime error" not in proc.stderr, proc.stderr[-3000:]
    return [np.frombuffer((work / f"out{j}.bin").read_bytes(), dtype=np.int8)
            for j in range(n_out)]


def test_kernels_clean_under_asan_and_ubsan(tmp_path: Path):
    """Edge cases of all four ops in one model, built with -fsanitize=address,undefined:
    no report, and the same outputs as the optimised build (which matches TFLM)."""
    if shutil.which("cc") is None:
        pytest.skip("no host C compiler")
    rng = np.random.default_rng(91)
    cases = ([conv_case(rng, i) for i in range(8)] +
             [conv_case(rng, 8, h=1, w=1, kh=3, kw=3, padding="SAME"),
              conv_case(rng, 9, kh=1, kw=1, sh=2, sw=2, groups=1),
              conv_case(rng, 10, groups=3)] +
             [dwconv_case(rng, i, bias=True) for i in range(11, 19)] +
             [dwconv_case(rng, 19, cin=20, mult=1, bias=True, padding="SAME")] +
             [fc_case(rng, i) for i in range(20, 26)] +
             [tconv_case(rng, i) for i in range(26, 32)])
    model = _build(cases)
    art = kc.compile(kc.load(model), board="host")
    xs = [rand_int8(spec["shape"], rng) for spec in art.report["inputs"]]
    got = run_sanitized(art, xs, tmp_path, len(cases))
    for c, g, want in zip(cases, got, art.run(*xs)):
        assert_equal_exact(g, want.reshape(-1), c.label + " under sanitizers")


# --- rejections ------------------------------------------------------------------------

def _check_reason(model: bytes) -> str | None:
    g = kc.load(model)
    op = g.ops[0]
    return LOWERINGS[op.type].check(LowerCtx(graph=g, op=op, layer=0))


def test_rejects_unsupported():
    rng = np.random.default_rng(5)
    # A fused TANH has no quantized clamp range in TFLM's int8 conv.
    c = conv_case(rng, 0, act="RELU")
    c.options["fused_activation_function"] = "TANH"
    assert "TANH" in _check_reason(_build([c]))
    with pytest.raises(ModelError, match="TANH"):
        kc.compile(kc.load(_build([c])), board="host")
    # Depth multiplier that does not match the shapes.
    d = dwconv_case(rng, 0, mult=2)
    d.options["depth_multiplier"] = 3
    assert "depth_multiplier" in _check_reason(_build([d]))
    # An output shape that is not what the padding gives.
    c = conv_case(rng, 1, h=8, w=8, kh=3, kw=3, padding="VALID", sh=1, sw=1, dh=1, dw=1)
    c.output = TensorSpec((c.output.shape[0], 8, 8, c.output.shape[3]),
                          scale=c.output.scale, zero_point=c.output.zero_point)
    assert "does not match" in _check_reason(_build([c]))
    # A bias so large that the int32 accumulator could overflow.
    f = fc_case(rng, 2, bias=True, depth=64, units=4)
    b = f.inputs[2]
    f.inputs[2] = TensorSpec(b.shape, "int32", scale=b.scale, zero_point=b.zero_point,
                             data=np.full(b.shape, 2**31 - 1000, np.int32))
    assert "overflow" in _check_reason(_build([f]))
    # Shuffled FULLY_CONNECTED weights.
    f = fc_case(rng, 3)
    f.options["weights_format"] = "SHUFFLED4x16INT8"
    assert "shuffled" in _check_reason(_build([f]))


# --- C build-size function vs the Python variant choice ---------------------------------

_SIZE_MAIN = r"""
#include <stdio.h>
#include "kiln_kernels.h"

/* Every kernel refuses NULL and inconsistent arguments with KILN_ERR_ARG. */
static int refuses_bad_arguments(void)
{
    static int8_t buf[64];
    static const int32_t mult[4] = {1 << 30, 1 << 30, 1 << 30, 1 << 30};
    static const int32_t shift[4] = {0, 0, 0, 0};
    const kiln_per_channel_requant_t q = {mult, shift};
    const kiln_conv_params_t p = {{1, 1}, {0, 0}, {1, 1}, 0, 0, {-128, 127}};
    const kiln_conv_params_t bad_stride = {{0, 1}, {0, 0}, {1, 1}, 0, 0, {-128, 127}};
    const kiln_dwconv_params_t dp = {p, 1};
    const kiln_fc_params_t fp = {0, 0, 0, {-128, 127}};
    const kiln_dims_t in = {1, 2, 2, 4};
    const kiln_dims_t f1 = {4, 1, 1, 4};
    const kiln_dims_t f3 = {4, 3, 3, 4};
    const kiln_dims_t out = {1, 2, 2, 4};
    const kiln_dims_t wrong = {1, 2, 2, 5};
    const kiln_dims_t dwf = {1, 1, 1, 4};
    const kiln_dims_t fc_in = {1, 1, 1, 4};
    const kiln_dims_t fc_f = {4, 1, 1, 4};
    const kiln_dims_t fc_out = {1, 1, 1, 4};
    const kiln_context_t small = {buf, 8};
    int bad = 0;
    bad |= kiln_conv2d_s8(NULL, &p, &q, &in, buf, &f3, buf, NULL, &out, buf) != KILN_ERR_ARG;
    bad |= kiln_conv2d_s8(&small, &p, &q, &in, buf, &f3, buf, NULL, &out, buf) != KILN_ERR_ARG;
    bad |= kiln_conv2d_1x1_s8(&p, &q, &in, buf, &f1, buf, NULL, &wrong, buf) != KILN_ERR_ARG;
    bad |= kiln_conv2d_1x1_s8(&bad_stride, &q, &in, buf, &f1, buf, NULL, &out, buf) != KILN_ERR_ARG;
    bad |= kiln_conv2d_1x1_s8(&p, &q, &in, NULL, &f1, buf, NULL, &out, buf) != KILN_ERR_ARG;
    bad |= kiln_dwconv2d_s8(&dp, &q, &in, buf, &dwf, buf, NULL, &wrong, buf) != KILN_ERR_ARG;
    bad |= kiln_dwconv2d_s8(&dp, NULL, &in, buf, &dwf, buf, NULL, &out, buf) != KILN_ERR_ARG;
    bad |= kiln_fully_connected_s8(&fp, &q, &fc_in, buf, &fc_f, buf, NULL, &wrong, buf) !=
           KILN_ERR_ARG;
    bad |= kiln_fully_connected_s8(NULL, &q, &fc_in, buf, &fc_f, buf, NULL, &fc_out, buf) !=
           KILN_ERR_ARG;
    bad |= kiln_transpose_conv_s8(&p, &q, &in, buf, &f1, buf, NULL, &wrong, buf) != KILN_ERR_ARG;
    /* ...and accepts the consistent versions. */
    bad |= kiln_conv2d_1x1_s8(&p, &q, &in, buf, &f1, buf, NULL, &out, buf + 16) != KILN_OK;
    bad |= kiln_fully_connected_s8(&fp, &q, &fc_in, buf, &fc_f, buf, NULL, &fc_out, buf + 32) !=
           KILN_OK;
    return bad;
}

int main(void)
{
    if (refuses_bad_arguments()) {
        return 1;
    }
    static const int32_t shapes[][4] = {%s};
    for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        const kiln_dims_t in = {1, 9, 9, shapes[i][0]};
        const kiln_dims_t f = {shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][0]};
        printf("%%d\n", (int)kiln_conv2d_s8_get_buffer_size(&in, &f));
    }
    return 0;
}
"""


def test_conv2d_buffer_size_matches_python_and_bad_arguments_refused(tmp_path: Path):
    shapes = [(3, 8, 3, 3), (1, 16, 10, 4), (16, 8, 1, 3), (64, 32, 5, 5)]   # cin, cout, kh, kw
    src = tmp_path / "main.c"
    src.write_text(_SIZE_MAIN % ", ".join("{%d, %d, %d, %d}" % s for s in shapes))
    kernels = crt_dir() / "kernels"
    exe = tmp_path / "size"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-I", str(kernels),
                    "-o", str(exe), str(src),
                    *(str(kernels / name) for name in _CONV_SOURCES)], check=True)
    got = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True,
                                          check=True).stdout.split()]
    for (cin, cout, kh, kw), size in zip(shapes, got):
        shape = LayerShape(input=(1, 9, 9, cin), filter=(cout, kh, kw, cin),
                           output=(1, 9, 9, cout), padding=(1, 1))
        v = conv2d_variant(shape, Target())
        assert v.kernel == "kiln_conv2d_s8" and v.scratch == size


# --- cross compile ------------------------------------------------------------------------

_CONV_SOURCES = ("conv2d.c", "dwconv.c", "fully_connected.c", "transpose_conv.c",
                 "conv2d_gemm.c", "dwconv_3x3.c", "dwconv_channels.c", "fully_connected_rows.c")
_ARM_FLAGS = {
    "cortex-m4": ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
    "cortex-m7": ["-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-d16"],
    "cortex-m33": ["-mcpu=cortex-m33", "-mthumb", "-mfloat-abi=soft"],
    "cortex-m3": ["-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"],
    "cortex-m0plus": ["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"],
}


@pytest.mark.cross
@pytest.mark.parametrize("cpu", sorted(_ARM_FLAGS))
def test_conv_kernels_cross_compile(cpu: str, tmp_path: Path):
    cc = shutil.which("arm-none-eabi-gcc")
    if cc is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    kernels = crt_dir() / "kernels"
    for name in _CONV_SOURCES:
        subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", *_ARM_FLAGS[cpu],
                        "-I", str(kernels), "-c", str(kernels / name),
                        "-o", str(tmp_path / (name + ".o"))], check=True)
