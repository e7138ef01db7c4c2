"""The blocked depthwise variants vs tflite-micro: kiln_dwconv2d_3x3_w8_s8 (3x3, the
model's int8 filter, dwconv_3x3_w8.c) and a depthwise layer of one input channel run as
the CONV_2D it equals (the gemm kernels, TFLM's micro_speech).

Every candidate of every layer runs (rounds of tests/test_ops_conv_simd.py): on the host
(plain C twins), under ASan/UBSan, and on QEMU mps2-an386 (the SMLAD path, slow). Cases:
images from 1x1 (every pixel an edge one) to 20x20, strides 1-3, both paddings, clamps,
extreme zero points, batches, dead channels; micro_speech's 10x8 stride-2 filter and
other multipliers and filter sizes on one input channel.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import models_root, require_tool, run_sanitized_c
from kiln.compiler.codegen import lower
from kiln.compiler.codegen.lowering import Target
from kiln.compiler.codegen.ops.conv import (LayerShape, _interior_share, candidates,
                                            dwconv2d_variant)
from kiln.compiler.codegen.ops.inplace import banded_code, overlap_modes
from reference import assert_equal_exact, run_reference
from test_ops_conv import _build, dwconv_case
from test_ops_conv_simd import (BOARD, DSP, _inputs, _kernels, _reference_model, compile_round,
                                layer_candidates, rounds, run_every_candidate)
from tflite_builder import TensorSpec, rand_int8

W8 = "kiln_dwconv2d_3x3_w8_s8"
GEMMS = {"kiln_conv2d_gemm_oc4_s8", "kiln_conv2d_gemm_s8", "kiln_conv2d_gemm_w8_s8"}


def w8_cases(seed: int) -> list:
    """3x3, C % 4 == 0: interiors of every size (none at 1x1 and 2x2), strides 1-3."""
    rng = np.random.default_rng(seed)
    cases = []
    for i, (cin, h, w, stride, padding, act, n) in enumerate([
            (4, 1, 1, 1, "SAME", "NONE", 1), (8, 2, 2, 1, "SAME", "RELU6", 1),
            (4, 3, 3, 1, "VALID", "NONE", 2), (12, 3, 3, 2, "SAME", "RELU", 1),
            (16, 5, 25, 1, "SAME", "NONE", 1), (8, 25, 5, 1, "SAME", "RELU6", 1),
            (4, 20, 20, 1, "SAME", "NONE", 1), (8, 20, 19, 2, "SAME", "RELU", 1),
            (20, 7, 9, 2, "VALID", "NONE", 1), (4, 11, 10, 3, "SAME", "RELU6", 2),
            (64, 6, 6, 1, "SAME", "NONE", 1), (32, 6, 6, 2, "SAME", "NONE", 1),
            (8, 4, 9, 3, "VALID", "NONE", 1), (4, 9, 4, 1, "VALID", "RELU", 1)]):
        cases.append(dwconv_case(rng, 700 + i, kh=3, kw=3, dh=1, dw=1, mult=1, cin=cin, h=h,
                                 w=w, sh=stride, sw=stride, padding=padding, act=act, n=n))
    cases += [
        dwconv_case(rng, 720, kh=3, kw=3, dh=1, dw=1, mult=1, cin=8, h=8, w=8, sh=1, sw=1,
                    padding="SAME", x_zp=-128, y_zp=127),
        dwconv_case(rng, 721, kh=3, kw=3, dh=1, dw=1, mult=1, cin=8, h=8, w=8, sh=1, sw=1,
                    padding="SAME", x_zp=127, y_zp=-128, bias=False),
        dwconv_case(rng, 722, kh=3, kw=3, dh=1, dw=1, mult=1, cin=12, h=7, w=7, sh=2, sw=1,
                    padding="SAME", act="RELU_N1_TO_1"),
    ]
    return cases


def one_channel_cases(seed: int) -> list:
    """One input channel, multiplier > 1: micro_speech's 10x8 stride 2, then others."""
    rng = np.random.default_rng(seed)
    cases = []
    for i, (mult, kh, kw, h, w, stride, dil, padding, act) in enumerate([
            (8, 10, 8, 49, 40, 2, 1, "SAME", "RELU"), (8, 10, 8, 12, 11, 2, 1, "VALID", "NONE"),
            (2, 3, 3, 9, 9, 1, 1, "SAME", "NONE"), (3, 5, 5, 7, 6, 2, 1, "SAME", "RELU6"),
            (5, 2, 7, 6, 9, 1, 1, "VALID", "NONE"), (4, 3, 3, 8, 8, 1, 2, "SAME", "NONE"),
            (7, 1, 1, 3, 5, 1, 1, "VALID", "RELU"), (16, 4, 4, 1, 1, 1, 1, "SAME", "NONE"),
            (2, 3, 1, 10, 1, 3, 1, "SAME", "NONE")]):
        cases.append(dwconv_case(rng, 800 + i, kh=kh, kw=kw, dh=dil, dw=dil, mult=mult, cin=1,
                                 h=h, w=w, sh=stride, sw=stride, padding=padding, act=act,
                                 n=1 + i % 4 // 3))
    cases.append(dwconv_case(rng, 820, kh=3, kw=3, dh=1, dw=1, mult=4, cin=1, h=6, w=6,
                             padding="SAME", x_zp=-128, y_zp=127, bias=False))
    return cases


def dead_channel_dw_case(rng: np.random.Generator):
    """Depthwise channels with an all-zero filter and an effective scale >= 0.5 (the
    compiler rewrites them for kiln_requant_fast_t), next to live ones."""
    c = dwconv_case(rng, 900, kh=3, kw=3, dh=1, dw=1, mult=1, cin=8, h=6, w=6, sh=1, sw=1,
                    padding="SAME", per_channel=True, bias=True, act="NONE")
    w, b = c.inputs[1], c.inputs[2]
    data, scales, bias = w.data.copy(), list(w.scale), b.data.copy()
    x_scale, y_scale = c.inputs[0].scale, c.output.scale
    for ch, value in ((1, 2**29), (6, -12345)):
        data[..., ch] = 0
        scales[ch] = float(np.float32(3.0 * y_scale / x_scale))
        bias[ch] = value
    c.inputs[1] = TensorSpec(w.shape, "int8", scale=scales, zero_point=w.zero_point,
                             quantized_dimension=3, data=data)
    b_scales = [float(np.float32(x_scale * s)) for s in scales]
    c.inputs[2] = TensorSpec(b.shape, "int32", scale=b_scales, zero_point=[0] * len(scales),
                             data=bias)
    c.label += " dead channels"
    return c


def _all_cases() -> list:
    return (w8_cases(701) + one_channel_cases(801) +
            [dead_channel_dw_case(np.random.default_rng(901))])


# --- variants -----------------------------------------------------------------------------

def test_candidates_of_the_blocked_depthwise_variants():
    big = LayerShape(input=(1, 48, 48, 8), filter=(1, 3, 3, 8), output=(1, 48, 48, 8),
                     padding=(1, 1))
    kws = LayerShape(input=(1, 25, 5, 64), filter=(1, 3, 3, 64), output=(1, 25, 5, 64),
                     padding=(1, 1))
    assert _interior_share(big) == pytest.approx((46 / 48) ** 2)
    assert _interior_share(kws) == pytest.approx(23 / 25 * 3 / 5)
    # Mostly interior pixels: the int8-filter kernel first; otherwise the packed one; rows
    # of 12 pixels or more lead with the pixel pairs, tall narrow maps with vertical
    # pairs (tests/test_dwconv_px2.py).
    assert [k["variant"] for k in candidates("DEPTHWISE_CONV_2D", big, DSP)] == [
        "3x3_px2"] * 4 + ["3x3_w8", "3x3"] + ["3x3_px2v"] * 4 + ["channels", "generic"]
    # (KWS's rows of five also fit the channel planes, behind the others: rows under six
    # pixels; tests/test_dwconv_planes.py.)
    assert [k["variant"] for k in candidates("DEPTHWISE_CONV_2D", kws, DSP)] == [
        "3x3_px2v"] * 4 + ["3x3", "3x3_w8", "3x3_px2", "3x3_planes", "channels", "generic"]
    v = dwconv2d_variant(big, DSP, {"variant": "3x3_w8"})
    assert (v.kernel, v.scratch) == (W8, 8)
    tiny = LayerShape(input=(1, 2, 2, 4), filter=(1, 3, 3, 4), output=(1, 2, 2, 4),
                      padding=(1, 1))
    assert _interior_share(tiny) == 0
    # micro_speech: one input channel, multiplier 8 -> the CONV_2D gemm kernels, int16
    # pairs first (the fastest), the int8-weight one last; the plain kernel after them.
    ms = LayerShape(input=(1, 49, 40, 1), filter=(1, 10, 8, 8), output=(1, 25, 20, 8),
                    padding=(4, 3), stride=(2, 2), depth_multiplier=8)
    ks = candidates("DEPTHWISE_CONV_2D", ms, DSP)
    assert [(k["variant"], k.get("oc_block"), k.get("weights")) for k in ks] == [
        ("gemm", 2, "s16"), ("gemm", 4, "s16"), ("gemm", 2, "s8"), ("generic", None, None)]
    gemm = dwconv2d_variant(ms, DSP)
    # kiln_conv2d_gemm_s8_get_buffer_size of filter (8, 10, 8, 1): 4 * KH * R + R, R = 8.
    assert (gemm.kernel, gemm.scratch) == ("kiln_conv2d_gemm_s8", 4 * 10 * 8 + 8)
    # Two input channels with a multiplier stay on the plain kernel.
    two = LayerShape(input=(1, 9, 9, 2), filter=(1, 3, 3, 4), output=(1, 9, 9, 4),
                     depth_multiplier=2)
    assert candidates("DEPTHWISE_CONV_2D", two, DSP) == [{"variant": "generic"}]


# --- host: the plain C twins ----------------------------------------------------------------

def test_blocked_dwconv_candidates_on_host():
    """A few shapes, every candidate: all-edge 1x1, KWS-like 25x5, stride 2, micro_speech."""
    w8, one = w8_cases(741), one_channel_cases(841)
    kernels = run_every_candidate([w8[0], w8[5], w8[7], w8[15], one[1], one[4]], seed=30)
    assert kernels >= {W8, "kiln_dwconv2d_3x3_s8", "kiln_dwconv2d_s8"} | GEMMS


@pytest.mark.slow
def test_every_blocked_dwconv_candidate_on_host():
    kernels = run_every_candidate(_all_cases(), seed=31)
    assert kernels >= {W8, "kiln_dwconv2d_3x3_s8", "kiln_dwconv2d_s8"} | GEMMS


def test_blocked_dwconv_banded_in_place_on_host():
    """optimize="memory": the blocked variants run as banded twins over their input."""
    cases = w8_cases(711)[4:8] + one_channel_cases(811)[:3]
    model = _build(cases)
    layers = layer_candidates(model, simd_only=True)
    xs = _inputs(cases, np.random.default_rng(32))
    want = run_reference(_reference_model(cases), xs)
    banded: set[str] = set()
    for i in range(rounds(layers)):
        art = compile_round(model, layers, i, optimize="memory")
        banded |= {o["kernel"] for o in art.report["overlaps"] if o["banded"]}
        for c, g, w in zip(cases, art.run(*xs), want):
            assert_equal_exact(g, w, f"{c.label} round {i} optimize=memory")
    assert W8 in banded, banded


def _micro_speech() -> Path:
    path = models_root() / "external" / "tfm_micro_speech_quantized.tflite"
    if not path.exists():
        pytest.skip(f"missing {path}")
    return path


def test_micro_speech_every_depthwise_candidate_on_host():
    path = _micro_speech()
    model = path.read_bytes()
    layers = layer_candidates(model)
    [(key, options)] = [v for v in layers.values() if v[0].startswith("DEPTHWISE_CONV_2D")]
    assert [k["variant"] for k in options] == ["gemm", "gemm", "gemm", "generic"], options
    x = rand_int8((1, 1960), np.random.default_rng(33))
    want = run_reference(model, [x])
    for i in range(len(options)):
        art = compile_round(model, {s: v for s, v in layers.items() if v[0] == key}, i)
        for j, (g, w) in enumerate(zip(art.run(x), want)):
            assert_equal_exact(g, w, f"micro_speech output {j}, depthwise {options[i]}")
    # The default build takes the gemm, which declares the gemm's banded overlap rules
    # (the band geometry is the depthwise layer's: same input, filter height, output).
    art = kc.compile(kc.load(model), board=BOARD)
    assert _kernels(art)[0] == "kiln_conv2d_gemm_s8"
    target = Target(board=BOARD, cpu="cortex-m4", dsp=True)
    [(step, e)] = [(i, e) for i, e in enumerate(lower(art.graph, target)[0])
                   if e.op.type == "DEPTHWISE_CONV_2D"]
    modes = overlap_modes(art.graph, e.op, step, e.code)
    assert {m.name for m in modes} >= {"banded"} and banded_code(
        e.code, modes[0], False).called == "kiln_conv2d_gemm_banded_s8"


_C_MAIN = r"""
#include <stdio.h>
#include "conv_dsp.h"

int main(void)
{
    static int8_t buf[256];
    static int8_t x[64];
    static int8_t w[64];
    static const int32_t bias[8] = {0};
    static const int32_t qm[8] = {1 << 30};
    static const int8_t qs[8] = {-2, -2, -2, -2, -2, -2, -2, -2};
    const kiln_requant_packed_t qp = {qm, qs, NULL};
    const kiln_requant_packed_t *q = &qp;
    const kiln_conv_params_t p = {{1, 1}, {1, 1}, {1, 1}, 0, 0, {-128, 127}};
    const kiln_conv_params_t dil = {{1, 1}, {1, 1}, {2, 2}, 0, 0, {-128, 127}};
    const kiln_dwconv_params_t dp = {p, 1}, dp2 = {p, 2}, dpd = {dil, 1};
    const kiln_dims_t in = {1, 3, 3, 4}, f = {1, 3, 3, 4}, out = {1, 3, 3, 4};
    const kiln_dims_t f5 = {1, 5, 5, 4}, in6 = {1, 3, 3, 6}, f6 = {1, 3, 3, 6};
    const kiln_dims_t out6 = {1, 3, 3, 6}, wrong = {1, 3, 3, 8};
    const kiln_context_t ctx = {buf, 256}, small = {buf, 3}, none = {NULL, 256};
    int8_t *y = buf + 128;
    int refused = 0;
    int accepted = 0;
#define REFUSED(call) refused += (call) == KILN_ERR_ARG
#define ACCEPTED(call) accepted += (call) == KILN_OK
    REFUSED(kiln_dwconv2d_3x3_w8_s8(NULL, &dp, q, &in, x, &f, w, bias, &out, y));
    REFUSED(kiln_dwconv2d_3x3_w8_s8(&small, &dp, q, &in, x, &f, w, bias, &out, y));
    REFUSED(kiln_dwconv2d_3x3_w8_s8(&none, &dp, q, &in, x, &f, w, bias, &out, y));
    REFUSED(kiln_dwconv2d_3x3_w8_s8(&ctx, &dp2, q, &in, x, &f, w, bias, &out, y));
    REFUSED(kiln_dwconv2d_3x3_w8_s8(&ctx, &dpd, q, &in, x, &f, w, bias, &out, y));
    REFUSED(kiln_dwconv2d_3x3_w8_s8(&ctx, &dp, NULL, &in, x, &f, w, bias, &out, y));
    REFUSED(kiln_dwconv2d_3x3_w8_s8(&ctx, &dp, q, &in, x, &f, NULL, bias, &out, y));
    REFUSED(kiln_dwconv2d_3x3_w8_s8(&ctx, &dp, q, &in, x, &f, w, NULL, &out, y));
    REFUSED(kiln_dwconv2d_3x3_w8_s8(&ctx, &dp, q, &in, x, &f5, w, bias, &out, y));
    REFUSED(kiln_dwconv2d_3x3_w8_s8(&ctx, &dp, q, &in6, x, &f6, w, bias, &out6, y));
    REFUSED(kiln_dwconv2d_3x3_w8_s8(&ctx, &dp, q, &in, x, &f, w, bias, &wrong, y));
    ACCEPTED(kiln_dwconv2d_3x3_w8_s8(&ctx, &dp, q, &in, x, &f, w + 1, bias, &out, y));
    printf("size %d refused %d accepted %d\n",
           (int)kiln_dwconv2d_3x3_w8_s8_get_buffer_size(&wrong), refused, accepted);
    return 0;
}
"""


def test_argument_checks_and_scratch_in_c(tmp_path: Path):
    out = run_sanitized_c(tmp_path, _C_MAIN, ["dwconv_3x3_w8.c"])
    assert "size 8 refused 11 accepted 1" in out, out
    shape = LayerShape(input=(1, 3, 3, 8), filter=(1, 3, 3, 8), output=(1, 3, 3, 8))
    assert dwconv2d_variant(shape, DSP, {"variant": "3x3_w8"}).scratch == 8


@pytest.mark.slow
def test_blocked_dwconv_clean_under_sanitizers(tmp_path: Path):
    """Every round built with -fsanitize=address,undefined matches TFLM: no tap, edge or
    interior, reads outside the input, the filter or the scratch."""
    require_tool("cc")
    from test_ops_conv import run_sanitized
    cases = w8_cases(731)[::2] + one_channel_cases(831)[::2]
    model = _build(cases)
    layers = layer_candidates(model, simd_only=True)
    xs = _inputs(cases, np.random.default_rng(34))
    want = run_reference(_reference_model(cases), xs)
    kernels: set[str] = set()
    for i in range(rounds(layers)):
        art = compile_round(model, layers, i)
        kernels |= set(_kernels(art))
        out = tmp_path / f"round{i}"
        out.mkdir()
        got = run_sanitized(art, xs, out, len(cases))
        for c, g, w in zip(cases, got, want):
            assert_equal_exact(g, w.reshape(-1), f"{c.label} round {i} under sanitizers")
    assert kernels >= {W8} | GEMMS


# --- QEMU mps2-an386: the SMLAD / SMMLAR path ------------------------------------------------

@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_blocked_dwconv_on_qemu(tmp_path):
    """One firmware of single depthwise layers per round of SIMD candidates."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    cases = _all_cases()
    model = _build(cases)
    layers = layer_candidates(model, simd_only=True)
    xs = _inputs(cases, np.random.default_rng(35))
    want = run_reference(_reference_model(cases), xs)
    failures = []
    kernels: set[str] = set()
    for i in range(rounds(layers)):
        art = compile_round(model, layers, i)
        kernels |= set(_kernels(art))
        p = create_project(art, board=BOARD, out_dir=tmp_path / f"p{i}", inputs=xs)
        for c, g, w in zip(cases, p.run(timeout=120).outputs, want):
            try:
                assert_equal_exact(g, w, f"{c.label} on QEMU, round {i}")
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, "\n".join(failures)
    assert kernels >= {W8} | GEMMS
