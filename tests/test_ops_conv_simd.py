"""Every kernel variant of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED vs tflite-micro.

Compiled for mps2-an386 (Cortex-M4, DSP extension), a layer can run any of the variants
`candidates()` lists for it (kiln_conv2d_gemm_s8 and its oc4 / int8-weight twins,
kiln_dwconv2d_3x3_s8, kiln_dwconv2d_ch4_s8, kiln_fully_connected_rows[2|8]_s8, the plain
kernels), each with
its filter packed at compile time. A model of many layers is compiled once per "round":
round i forces every layer to its i-th candidate (through tuning records, as a tuner's
choice would), so every candidate of every layer is built and compared exactly with TFLM.
The same C runs here on the host (plain C twins of the dual-MAC intrinsics) and under
QEMU (the SMLAD path), on the random cases of tests/test_ops_conv.py and named tail
cases (channels or rows not a multiple of the block, odd pixel counts, padding, strides,
dilation, filter sizes).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import MLPERF_INT8, model_path, require_tool, run_sanitized_c
from kiln.compiler.codegen.lowering import Target
from kiln.compiler.codegen.ops.conv import (LayerShape, candidates, conv2d_variant,
                                            dwconv2d_variant, fully_connected_variant,
                                            pack_conv2d_filter, pack_dwconv_filter,
                                            pack_fc_filter, requant_fast)
from kiln.compiler.errors import ModelError
from kiln.compiler.numerics import requantize
from kiln.compiler.tune import Records, workload_key
from kiln.compiler.tune.workloads import layer_shapes
from reference import assert_equal_exact, run_reference
from test_ops_conv import (Case, _build, conv_case, dwconv_case, fc_case, run_cases,
                           run_dwconv_cases)
from tflite_builder import TensorSpec, rand_int8

BOARD = "mps2-an386"
DSP = Target(board=BOARD, cpu="cortex-m4", dsp=True)
SIMD_KERNELS = {"kiln_conv2d_gemm_p8_s8", "kiln_dwconv2d_3x3_s8",
                "kiln_fully_connected_rows8_p8_s8"}               # the defaults
ALL_SIMD_KERNELS = SIMD_KERNELS | {"kiln_conv2d_gemm_s8", "kiln_conv2d_gemm_w8_s8",
                                   "kiln_conv2d_gemm_oc4_s8", "kiln_fully_connected_rows8_s8",
                                   "kiln_fully_connected_rows_s8",
                                   "kiln_fully_connected_rows2_s8", "kiln_dwconv2d_ch4_s8",
                                   "kiln_dwconv2d_3x3_w8_s8",
                                   "kiln_fully_connected_rows8_p8_pt_s8",      # per-tensor
                                   "kiln_fully_connected_rows8_pt_s8",
                                   "kiln_fully_connected_rows6_pt_s8"}
SIMD_VARIANTS = {"gemm", "3x3", "3x3_w8", "3x3_px2", "3x3_px2v", "3x3_planes", "3x3_s2ring",
                 "3x3_tiny", "channels", "rows"}


def _kernels(art: kc.Artifact) -> list[str]:
    return [layer["kernel"] for layer in art.report["ops"]]


# --- rounds: every layer forced to its i-th candidate ---------------------------------------

def layer_candidates(model: bytes, simd_only: bool = False) -> dict[int, tuple[str, list[dict]]]:
    """step → (workload key, candidates) of every tunable layer of `model` on BOARD
    (`simd_only`: the SIMD variants alone, for QEMU, where only they differ from the host)."""
    graph = kc.compile(kc.load(model), board=BOARD, optimize="speed").graph
    out = {}
    for step, (op, shape) in layer_shapes(graph, DSP).items():
        options = [k for k in candidates(op, shape, DSP)
                   if not simd_only or k["variant"] in SIMD_VARIANTS]
        if options:
            out[step] = (workload_key(op, shape), options)
    return out


def compile_round(model: bytes, layers: dict[int, tuple[str, list[dict]]], i: int,
                  optimize: str = "speed") -> kc.Artifact:
    """`model` for BOARD with every layer forced to its i-th candidate (its last when it
    has fewer), through tuning records; checks that each layer got it."""
    want = {step: options[min(i, len(options) - 1)] for step, (_, options) in layers.items()}
    records = Records(entries=[
        {"workload": layers[step][0], "board": BOARD, "knobs": k, "status": "ok",
         "cycles": {"median": 1, "min": 1, "max": 1}} for step, k in want.items()])
    art = kc.compile(kc.load(model), board=BOARD, tuning_records=records, optimize=optimize)
    got = {op["index"]: op.get("knobs") for op in art.report["ops"]}
    assert all(got[step] == k for step, k in want.items()), (want, got)
    return art


def rounds(layers: dict[int, tuple[str, list[dict]]]) -> int:
    return max(len(options) for _, options in layers.values())


def run_every_candidate(cases: list[Case], seed: int) -> set[str]:
    """Every round of `cases` on the host against TFLM (same inputs); returns the kernels
    that ran."""
    model = _build(cases)
    ref = run_reference(_reference_model(cases), _inputs(cases, np.random.default_rng(seed)))
    layers = layer_candidates(model)
    kernels: set[str] = set()
    failures = []
    for i in range(rounds(layers)):
        art = compile_round(model, layers, i)
        kernels |= set(_kernels(art))
        got = art.run(*_inputs(cases, np.random.default_rng(seed)))
        for step, (c, g, w) in enumerate(zip(cases, got, ref)):
            try:
                assert_equal_exact(g, w, f"{c.label} {art.report['ops'][step].get('knobs')}")
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, "\n".join(failures)
    return kernels


def _inputs(cases: list[Case], rng: np.random.Generator) -> list[np.ndarray]:
    return [rand_int8(t.shape, rng, c.x_low, c.x_high)
            for c in cases for t in c.inputs if t is not None and t.data is None]


# --- cases -------------------------------------------------------------------------------

def gemm_cases(seed: int, n: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    cases = [conv_case(rng, i, groups=1) for i in range(n)]
    cases += [
        conv_case(rng, n, cin=16, cout=16, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, padding="SAME",
                  h=9, w=9),                                            # ResNet-like, C % 4 == 0
        conv_case(rng, n + 1, cin=8, cout=7, kh=1, kw=1, sh=1, sw=1, padding="VALID", h=5,
                  w=5, groups=1),                                       # 1x1, odd C_out/pixels
        conv_case(rng, n + 2, cin=12, cout=5, kh=1, kw=1, sh=2, sw=2, padding="SAME", h=7,
                  w=6, groups=1),                                       # 1x1 strided
        conv_case(rng, n + 3, cin=3, cout=8, kh=3, kw=3, sh=2, sw=2, dh=1, dw=1,
                  padding="SAME", h=11, w=10, groups=1),                # VWW first layer
        conv_case(rng, n + 4, cin=1, cout=16, kh=10, kw=4, sh=2, sw=2, dh=1, dw=1,
                  padding="SAME", h=49, w=10, groups=1),                # KWS first layer
        conv_case(rng, n + 5, cin=4, cout=3, kh=3, kw=3, dh=2, dw=2, padding="SAME", h=6,
                  w=7, groups=1, n=3),                                  # dilated, batches
        conv_case(rng, n + 6, cin=8, cout=2, kh=3, kw=3, h=1, w=1, padding="SAME",
                  groups=1),                                            # all padding
        conv_case(rng, n + 7, x_zp=-128, y_zp=127, act="RELU6", groups=1, cin=4),
        conv_case(rng, n + 8, x_zp=127, y_zp=-128, act="RELU", groups=1, cin=8),
        conv_case(rng, n + 9, bias=False, groups=1),
    ]
    return cases


def gemm_tail_cases(seed: int) -> list[Case]:
    """Output channels around every block size (oc4: 4 + 2 + 1 blocks), odd and single
    pixel counts, depth not a multiple of 4, padding, stride 2, 1x1."""
    rng = np.random.default_rng(seed)
    cases = []
    for i, (cout, cin, k, h, w, stride, padding) in enumerate([
            (1, 3, 3, 5, 5, 1, "SAME"), (2, 5, 3, 4, 3, 2, "SAME"), (3, 6, 2, 3, 3, 1, "VALID"),
            (4, 7, 3, 7, 1, 1, "SAME"), (5, 4, 3, 5, 3, 2, "VALID"), (6, 1, 5, 9, 7, 2, "SAME"),
            (7, 8, 1, 3, 5, 1, "VALID"), (9, 2, 3, 6, 6, 2, "SAME"), (12, 16, 3, 5, 5, 1, "SAME"),
            (13, 12, 1, 4, 4, 2, "VALID"), (15, 3, 3, 1, 1, 1, "SAME"),
            (10, 10, 4, 10, 9, 1, "SAME"),
            # depth 5 and 7 groups of four (oc4's loop entered part-way, 8 groups a trip)
            (9, 20, 1, 3, 3, 1, "VALID"), (6, 28, 1, 2, 3, 1, "VALID"),
            # 16 and 32 groups (the 2x2 asm loop's whole trips of 16, none entered part-way)
            (6, 64, 1, 2, 3, 1, "VALID"), (5, 128, 1, 1, 3, 1, "VALID")]):
        cases.append(conv_case(rng, 100 + i, cin=cin, cout=cout, kh=k, kw=k, sh=stride,
                               sw=stride, dh=1, dw=1, padding=padding, h=h, w=w, groups=1,
                               n=1 + i % 2))
    cases.append(conv_case(rng, 120, cin=5, cout=11, kh=3, kw=2, dh=2, dw=1, sh=1, sw=1,
                           padding="SAME", h=7, w=6, groups=1, act="RELU6"))    # dilated
    # one-word kernel rows (gather_word_rows): KWS's first layer in small (its last
    # input row's right windows byte by byte), three channels and a tail byte with
    # vertical dilation, two channels at a horizontal stride of 3
    for i, (cin, kh, kw, sh, sw, dh, h, w) in enumerate([
            (1, 10, 4, 2, 2, 1, 13, 10), (3, 2, 1, 1, 1, 2, 5, 4), (2, 3, 2, 2, 3, 1, 6, 8)]):
        cases.append(conv_case(rng, 122 + i, cin=cin, cout=5 + i, kh=kh, kw=kw, sh=sh, sw=sw,
                               dh=dh, dw=1, padding="SAME", h=h, w=w, groups=1, n=1 + i % 2))
    # a clamping layer of 18 groups (the 2x2 asm loop's clamp, a second trip of two)
    cases.append(conv_case(rng, 121, cin=72, cout=7, kh=1, kw=1, sh=1, sw=1, dh=1, dw=1,
                           padding="VALID", h=3, w=3, groups=1, act="RELU6"))
    return cases


def dw3x3_cases(seed: int, n: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    cases = [dwconv_case(rng, i, kh=3, kw=3, dh=1, dw=1, mult=1,
                         cin=int(rng.choice([4, 8, 12, 16, 20, 64])))
             for i in range(n)]
    cases += [
        dwconv_case(rng, n, kh=3, kw=3, dh=1, dw=1, mult=1, cin=8, h=1, w=1, padding="SAME"),
        dwconv_case(rng, n + 1, kh=3, kw=3, dh=1, dw=1, mult=1, cin=4, h=3, w=3,
                    padding="VALID", sh=3, sw=3),
        dwconv_case(rng, n + 2, kh=3, kw=3, dh=1, dw=1, mult=1, cin=16, h=12, w=12, sh=2,
                    sw=2, padding="SAME", x_zp=-128, y_zp=-128, act="RELU"),   # MobileNet
        dwconv_case(rng, n + 3, kh=3, kw=3, dh=1, dw=1, mult=1, cin=12, bias=False, n=2),
        dwconv_case(rng, n + 4, kh=3, kw=3, dh=1, dw=1, mult=1, cin=8, x_zp=127, y_zp=127,
                    act="RELU6"),
    ]
    return cases


def dw_channels_cases(seed: int) -> list[Case]:
    """kiln_dwconv2d_ch4_s8's ground: filters 1x1 to 5x5 and non-square, strides 1 and 2,
    dilation 2, both paddings, odd sizes, channels a multiple of 4 or not, clamps."""
    rng = np.random.default_rng(seed)
    cases = []
    for i, (k, cin, h, w, stride, dil, padding, act) in enumerate([
            ((1, 1), 4, 5, 7, 1, 1, "VALID", "NONE"), ((1, 1), 12, 6, 5, 2, 1, "SAME", "RELU6"),
            ((3, 3), 8, 7, 5, 1, 2, "SAME", "NONE"), ((3, 3), 36, 9, 9, 2, 1, "SAME", "RELU"),
            ((3, 3), 7, 6, 7, 1, 1, "SAME", "RELU6"), ((3, 3), 13, 5, 5, 2, 1, "VALID", "NONE"),
            ((5, 5), 4, 9, 7, 1, 1, "SAME", "RELU6"), ((5, 5), 8, 11, 11, 2, 1, "SAME", "NONE"),
            ((5, 5), 12, 7, 9, 1, 2, "SAME", "RELU"), ((5, 5), 36, 7, 7, 1, 1, "VALID", "NONE"),
            ((3, 5), 8, 8, 9, 1, 1, "SAME", "NONE"), ((3, 5), 12, 9, 11, 2, 2, "VALID", "RELU6"),
            ((5, 3), 4, 3, 3, 1, 1, "SAME", "NONE"), ((3, 5), 5, 5, 6, 2, 1, "SAME", "NONE"),
            ((5, 5), 2, 6, 6, 1, 1, "SAME", "RELU6"), ((7, 1), 10, 9, 4, 1, 1, "SAME", "NONE"),
            ((2, 2), 1, 4, 5, 1, 1, "VALID", "NONE"), ((5, 5), 6, 1, 1, 1, 1, "SAME", "NONE")]):
        cases.append(dwconv_case(rng, 300 + i, kh=k[0], kw=k[1], cin=cin, mult=1, h=h, w=w,
                                 sh=stride, sw=stride, dh=dil, dw=dil, padding=padding,
                                 act=act, n=1 + i % 3 // 2))
    cases.append(dwconv_case(rng, 320, kh=5, kw=5, cin=8, mult=1, h=6, w=6, dh=1, dw=1,
                             padding="SAME", bias=False, x_zp=-128, y_zp=127))
    return cases


def fc_rows_cases(seed: int, n: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    cases = [fc_case(rng, i) for i in range(n)]
    cases += [
        fc_case(rng, n, depth=640, units=128, batches=1, per_channel=False),   # AD layer
        fc_case(rng, n + 1, depth=1, units=1, batches=1),
        fc_case(rng, n + 2, per_channel=False, w_zp=-17, depth=13, units=7, batches=3),
        fc_case(rng, n + 3, per_channel=True, bias=False, depth=6, units=9),
        fc_case(rng, n + 4, keep_dims=(2, 3), per_channel=False, depth=12, units=5, w_zp=4),
    ]
    return cases


def fc_tail_cases(seed: int) -> list[Case]:
    """Units around every row block (rows8: 8 + 4 + 2 + 1 blocks), depth not a multiple
    of 4, several batches."""
    rng = np.random.default_rng(seed)
    return [fc_case(rng, 200 + i, units=units, depth=depth, batches=1 + i % 3)
            for i, (units, depth) in enumerate([
                (1, 5), (2, 8), (3, 1), (5, 13), (6, 16), (7, 3), (8, 30), (9, 7), (10, 64),
                (11, 9), (12, 20), (13, 11), (14, 4), (15, 33), (16, 2), (17, 17), (23, 40)])]


def dead_channel_case(rng: np.random.Generator) -> Case:
    """Channels with an all-zero filter and an effective scale >= 0.5 (shift >= -1), as in
    VWW: the compiler rewrites them for kiln_requant_fast_t."""
    c = conv_case(rng, 0, cin=8, cout=6, kh=1, kw=1, sh=1, sw=1, padding="VALID", h=4, w=4,
                  groups=1, per_channel=True, bias=True, act="NONE")
    w, b = c.inputs[1], c.inputs[2]
    data = w.data.copy()
    scales = list(w.scale)
    bias = b.data.copy()
    x_scale, y_scale = c.inputs[0].scale, c.output.scale
    for ch, value in ((1, 2**29), (4, -12345)):
        data[ch] = 0
        scales[ch] = float(np.float32(3.0 * y_scale / x_scale))    # effective scale 3
        bias[ch] = value
    c.inputs[1] = TensorSpec(w.shape, "int8", scale=scales, zero_point=w.zero_point,
                             quantized_dimension=0, data=data)
    b_scales = [float(np.float32(x_scale) * np.float32(s)) for s in scales]
    c.inputs[2] = TensorSpec(b.shape, "int32", scale=b_scales, zero_point=[0] * len(scales),
                             data=bias)
    c.label += " dead channels"
    return c


def live_big_scale_case(rng: np.random.Generator) -> Case:
    """A live channel with shift >= -1: kiln_requant_fast_t cannot express it."""
    c = conv_case(rng, 1, cin=4, cout=3, kh=1, kw=1, sh=1, sw=1, padding="VALID", h=3, w=3,
                  groups=1, per_channel=False, act="NONE")
    x, w = c.inputs[0], c.inputs[1]
    y_scale = float(np.float32(x.scale * w.scale * 0.7))               # effective scale 1/0.7
    c.output = TensorSpec(c.output.shape, scale=y_scale, zero_point=c.output.zero_point)
    c.label += " big scale"
    return c


def extreme_shift_case(rng: np.random.Generator) -> Case:
    """Per-channel effective scales at both ends kiln_requant_fast_t takes (shift -2, just
    under 0.25, and -31, just over 2^-32) and between, on a 3x3 layer of whole-word
    channels (the oc4 kernel's pair gather by rows): the int16-pair kernels derive their
    shift from right_shift (s1 = 0 .. 29)."""
    c = conv_case(rng, 2, cin=8, cout=8, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, padding="SAME",
                  h=4, w=6, groups=1, per_channel=True, bias=True, act="NONE")
    x, w, b = c.inputs
    y_scale = c.output.scale
    effective = [0.24, 0.126, 2.0 ** -31.8, 2.0 ** -30.5, 2.0 ** -16.3, 0.2, 2.0 ** -9, 0.13]
    scales = [float(np.float32(e * y_scale / x.scale)) for e in effective]
    c.inputs[1] = TensorSpec(w.shape, "int8", scale=scales, zero_point=w.zero_point,
                             quantized_dimension=0, data=w.data)
    b_scales = [float(np.float32(x.scale) * np.float32(s)) for s in scales]
    c.inputs[2] = TensorSpec(b.shape, "int32", scale=b_scales, zero_point=[0] * len(scales),
                             data=b.data)
    c.label += " extreme shifts"
    return c


def eligible_for(cases: list[Case], knobs: dict, slack: int) -> list[Case]:
    """The cases whose layer has `knobs` among its candidates (the random scales of a few
    need the slow requantization, which no blocked kernel takes): at most `slack` left
    out."""
    layers = layer_candidates(_build(cases))
    keep = [c for step, c in enumerate(cases) if knobs in layers[step][1]]
    assert len(keep) >= len(cases) - slack, len(keep)
    return keep


def compile_forced(cases: list[Case], knobs: dict, kernel: str, board: str, seed: int,
                   **kw) -> tuple[kc.Artifact, list, list]:
    """The cases' model with every layer forced onto `knobs` through tuning records (all
    of them must run `kernel`), inputs from `seed` and tflite-micro's outputs."""
    model = _build(cases)
    records = Records(entries=[
        {"workload": key, "board": board, "status": "ok", "knobs": knobs,
         "cycles": {"median": 1, "min": 1, "max": 1}}
        for key, _ in layer_candidates(model).values()])
    art = kc.compile(kc.load(model), board=board, tuning_records=records, **kw)
    assert set(_kernels(art)) == {kernel}, _kernels(art)
    xs = _inputs(cases, np.random.default_rng(seed))
    return art, xs, run_reference(_reference_model(cases), xs)


def _reference_model(cases: list[Case]) -> bytes:
    """TFLM's model of the cases: a DEPTHWISE_CONV_2D without bias gets an explicit zero
    bias, which means the same (TFLM crashes without one, see run_dwconv_cases)."""
    ref = []
    for c in cases:
        if c.op == "DEPTHWISE_CONV_2D" and c.inputs[2] is None:
            w = c.inputs[1]
            zeros = TensorSpec((w.shape[3],), "int32", scale=w.scales[0], zero_point=0,
                               data=np.zeros(w.shape[3], np.int32))
            c = Case(c.op, [c.inputs[0], w, zeros], c.output, c.options, c.label)
        ref.append(c)
    return _build(ref)


# --- host: the plain C path ---------------------------------------------------------------

def test_gemm_is_the_default_on_host():
    art = run_cases(gemm_cases(101, 50), seed=11, board=BOARD)
    kernels = _kernels(art)
    assert kernels.count("kiln_conv2d_gemm_p8_s8") >= 0.8 * len(kernels), kernels


def test_every_conv2d_candidate_on_host():
    kernels = run_every_candidate(gemm_cases(111, 24) + gemm_tail_cases(112) +
                                  [extreme_shift_case(np.random.default_rng(113))], seed=15)
    assert kernels >= {"kiln_conv2d_gemm_s8", "kiln_conv2d_gemm_oc4_s8",
                       "kiln_conv2d_gemm_w8_s8", "kiln_conv2d_gemm_p8_s8",
                       "kiln_conv2d_1x1_s8", "kiln_conv2d_s8"}


def test_dwconv_3x3_on_host():
    art = run_dwconv_cases(dw3x3_cases(202, 40), seed=12, board=BOARD)
    kernels = _kernels(art)      # a few random output scales give shifts >= -1: plain kernel
    # (any 3x3 kernel: the channel planes lead on stride 2 and small maps)
    threes = sum(k.startswith("kiln_dwconv2d_3x3_") for k in kernels)
    assert threes >= 0.8 * len(kernels), kernels


def test_dwconv_channels_is_the_default_off_3x3_on_host():
    """Every layer of dw_channels_cases but the 3x3 ones with C % 4 == 0 (those take a 3x3
    kernel) and C < 4 (the plain kernel) runs kiln_dwconv2d_ch4_s8 unless a random scale
    gives a shift >= -1; a 3x3 one with C % 4 != 0 may take the pixel pairs or the
    channel planes (any C)."""
    cases = dw_channels_cases(222)
    art = run_dwconv_cases(cases, seed=19, board=BOARD)
    want = []
    for c in cases:
        _, kh, kw, ch = c.inputs[1].shape
        dilated = c.options["dilation_h_factor"] > 1
        other = "kiln_dwconv2d_ch4_s8" if ch >= 4 else "kiln_dwconv2d_s8"
        want.append({"3x3"} if kh == kw == 3 and ch % 4 == 0 and not dilated
                    else {"3x3", other} if kh == kw == 3 and not dilated else {other})
    # Any 3x3 kernel (the int8-filter one leads on layers of mostly interior pixels).
    got = ["3x3" if k.startswith("kiln_dwconv2d_3x3_") else k for k in _kernels(art)]
    assert sum(g in w for g, w in zip(got, want)) >= 0.8 * len(cases), list(zip(got, want))
    assert {g for g, w in zip(got, want) if g not in w} <= {"kiln_dwconv2d_s8"}, got


def test_every_dwconv_candidate_on_host():
    kernels = run_every_candidate(dw3x3_cases(212, 12) + dw_channels_cases(213), seed=16)
    assert kernels >= {"kiln_dwconv2d_3x3_s8", "kiln_dwconv2d_ch4_s8", "kiln_dwconv2d_s8"}


def test_fully_connected_rows_on_host():
    art = run_cases(fc_rows_cases(303, 50), seed=13, board=BOARD)
    kernels = _kernels(art)
    # int16 (rows8, per-tensor rows6) where the random filter holds a -128 that int8
    # pairs cannot take (pairs8_ok) or a zero point, which TFLite's own int8 weights
    # never have.
    # Per-tensor layers within fc_per_tensor_ok's ranges take the _pt_ twins.
    p8 = (kernels.count("kiln_fully_connected_rows8_p8_s8") +
          kernels.count("kiln_fully_connected_rows8_p8_pt_s8"))
    assert p8 >= 0.6 * len(kernels), kernels
    int16 = (kernels.count("kiln_fully_connected_rows8_s8") +
             kernels.count("kiln_fully_connected_rows6_pt_s8"))
    assert p8 + int16 >= 0.8 * len(kernels), kernels
    assert kernels.count("kiln_fully_connected_rows8_p8_pt_s8") >= 0.2 * len(kernels), kernels


def test_every_fully_connected_candidate_on_host():
    kernels = run_every_candidate(fc_rows_cases(313, 20) + fc_tail_cases(314), seed=17)
    assert kernels >= {"kiln_fully_connected_rows_s8", "kiln_fully_connected_rows2_s8",
                       "kiln_fully_connected_rows8_s8", "kiln_fully_connected_rows8_p8_s8",
                       "kiln_fully_connected_s8", "kiln_conv2d_gemm_p8_s8",
                       "kiln_fully_connected_rows8_p8_pt_s8", "kiln_fully_connected_rows8_pt_s8",
                       "kiln_fully_connected_rows6_pt_s8"}


def test_every_simd_candidate_banded_in_place_on_host():
    """KWS with optimize="memory": each gemm and depthwise variant runs as its banded twin
    (output over its input, crt/kernels/inplace.h) and the model still matches TFLM."""
    model = model_path("kws_ref_model").read_bytes()
    layers = layer_candidates(model, simd_only=True)
    arts = [compile_round(model, layers, i, optimize="memory") for i in range(rounds(layers))]
    x = rand_int8(arts[0].report["inputs"][0]["shape"], np.random.default_rng(18))
    want = run_reference(model, [x])
    for i, art in enumerate(arts):
        for j, (g, w) in enumerate(zip(art.run(x), want)):
            assert_equal_exact(g, w, f"kws output {j}, round {i}, optimize=memory")
    banded = {o["kernel"] for art in arts for o in art.report["overlaps"] if o["banded"]}
    assert banded >= {"kiln_conv2d_gemm_s8", "kiln_conv2d_gemm_oc4_s8", "kiln_conv2d_gemm_w8_s8",
                      "kiln_conv2d_gemm_p8_s8",
                      "kiln_dwconv2d_3x3_s8", "kiln_dwconv2d_ch4_s8"}


def test_dead_channels_and_big_scales():
    rng = np.random.default_rng(404)
    art = run_cases([dead_channel_case(rng), live_big_scale_case(rng)], seed=14, board=BOARD)
    assert _kernels(art) == ["kiln_conv2d_gemm_p8_s8", "kiln_conv2d_1x1_s8"]


def test_requant_fast_rewrites_dead_channels_exactly():
    mult = np.array([1 << 30, 1518500250, 2**31 - 1, 1 << 30], dtype=np.int32)
    shift = np.array([0, 3, -1, -7], dtype=np.int32)
    bias = np.array([2**30 - 5, -777, 123456, 99], dtype=np.int64)
    table, new_bias = requant_fast(mult, shift, bias, np.array([0, 0, 0, 5]))
    for c in range(3):
        want = int(np.clip(requantize(bias[c:c + 1], mult[c:c + 1], shift[c:c + 1])[0],
                           -512, 512))
        got = requantize(new_bias[c:c + 1], table[c:c + 1, 0], np.array([-2]))[0]
        assert got == want and table[c, 1] == 1 and table[c, 2] == 1
    assert list(table[3]) == [1 << 30, 1 << 5, 6] and new_bias[3] == 99
    with pytest.raises(ValueError, match="live channel"):
        requant_fast(mult, shift, bias, np.array([1, 0, 0, 0]))


# --- variant choice ----------------------------------------------------------------------

def test_variant_choice_follows_the_target():
    conv = LayerShape(input=(1, 8, 8, 16), filter=(32, 3, 3, 16), output=(1, 8, 8, 32),
                      padding=(1, 1))
    assert conv2d_variant(conv, Target()).kernel == "kiln_conv2d_s8"
    v = conv2d_variant(conv, DSP)
    gemm = {"variant": "gemm", "oc_block": 4, "px_block": 2, "weights": "s16"}
    assert (v.kernel, v.knobs, v.scratch) == ("kiln_conv2d_gemm_p8_s8", dict(gemm, weights="p8"),
                                              4 * 144 + 48)
    assert conv2d_variant(conv, DSP, {"variant": "generic"}).kernel == "kiln_conv2d_s8"
    with pytest.raises(ModelError, match="not a candidate"):
        conv2d_variant(conv, DSP, {"variant": "1x1"})
    with pytest.raises(ModelError, match="not a candidate"):
        conv2d_variant(conv, DSP, dict(gemm, weights="s8"))
    # The int8 channel-pair gemm first (the default: int8 flash), then the int16 ones
    # (a tuner may take them where flash allows; the 2x2 one, whose channel pairs run in
    # one asm loop, ahead of oc4), then the int8-weight 2x2 one.
    assert [(k["variant"], k.get("oc_block"), k.get("weights"))
            for k in candidates("CONV_2D", conv, DSP)] == [
        ("gemm", 4, "p8"), ("gemm", 2, "s16"), ("gemm", 4, "s16"), ("gemm", 2, "s8"),
        ("generic", None, None)]
    # A filter that cannot pack as int8 pairs keeps the int16 default.
    assert conv2d_variant(replace(conv, pairs8=False), DSP).kernel == "kiln_conv2d_gemm_s8"
    for knobs, kernel in ((gemm, "kiln_conv2d_gemm_oc4_s8"),
                          (dict(gemm, oc_block=2, weights="s8"), "kiln_conv2d_gemm_w8_s8")):
        assert (conv2d_variant(conv, DSP, knobs).kernel,
                conv2d_variant(conv, DSP, knobs).scratch) == (kernel, 4 * 144 + 48)
    pw = LayerShape(input=(1, 8, 8, 6), filter=(32, 1, 1, 6), output=(1, 8, 8, 32))
    assert [k["variant"] for k in candidates("CONV_2D", pw, DSP)] == [
        "gemm", "gemm", "gemm", "gemm", "1x1", "generic"]
    assert conv2d_variant(pw, DSP).scratch == 4 * 8 + 8          # rows of 6 padded to 8
    grouped = LayerShape(input=(1, 8, 8, 16), filter=(16, 3, 3, 8), output=(1, 8, 8, 16))
    assert [k["variant"] for k in candidates("CONV_2D", grouped, DSP)] == ["generic"]
    slow = LayerShape(input=(1, 8, 8, 16), filter=(32, 3, 3, 16), output=(1, 8, 8, 32),
                      requant_fast=False)
    assert conv2d_variant(slow, DSP).kernel == "kiln_conv2d_s8"
    dw = LayerShape(input=(1, 8, 8, 12), filter=(1, 3, 3, 12), output=(1, 8, 8, 12))
    assert dwconv2d_variant(dw, DSP).kernel == "kiln_dwconv2d_3x3_planes_s8"
    assert dwconv2d_variant(dw, DSP).scratch == 4 * 4 * 16 * 10
    # The 3x3 kernels first (the fastest on a 3x3; the channel planes lead on maps under
    # 12x12, tests/test_dwconv_planes.py; the int8-filter one leads when nearly every
    # output pixel is an interior one; the pixel-pair ones lead on rows of 12 or more, or
    # tall maps: tests/test_dwconv_px2.py), then the channels kernel, the plain one.
    assert [(dwconv2d_variant(dw, DSP, k).kernel, dwconv2d_variant(dw, DSP, k).scratch)
            for k in candidates("DEPTHWISE_CONV_2D", dw, DSP)] == [
        ("kiln_dwconv2d_3x3_planes_s8", 2560),
        ("kiln_dwconv2d_3x3_s8", 12), ("kiln_dwconv2d_3x3_w8_s8", 12),
        ("kiln_dwconv2d_3x3_px2_s8", 120), ("kiln_dwconv2d_3x3_px2v_s8", 120),
        ("kiln_dwconv2d_ch4_s8", 12), ("kiln_dwconv2d_s8", 0)]
    big = LayerShape(input=(1, 48, 48, 8), filter=(1, 3, 3, 8), output=(1, 48, 48, 8),
                     padding=(1, 1))
    assert dwconv2d_variant(big, DSP).kernel == "kiln_dwconv2d_3x3_px2_s8"
    assert dwconv2d_variant(dw, Target()).kernel == "kiln_dwconv2d_s8"
    # A 3x3 with C % 4 != 0: only the pixel-pair kernels besides the channels one.
    odd = LayerShape(input=(1, 8, 8, 6), filter=(1, 3, 3, 6), output=(1, 8, 8, 6))
    assert dwconv2d_variant(odd, DSP).kernel == "kiln_dwconv2d_3x3_px2_s8"
    for other in (LayerShape(input=(1, 8, 8, 4), filter=(1, 5, 5, 4), output=(1, 8, 8, 4)),
                  LayerShape(input=(1, 8, 8, 4), filter=(1, 3, 3, 4), output=(1, 4, 4, 4),
                             dilation=(2, 2))):
        v = dwconv2d_variant(other, DSP)
        assert (v.kernel, v.knobs, v.scratch) == (
            "kiln_dwconv2d_ch4_s8", {"variant": "channels", "ch_block": 4}, other.input[3])
    for plain in (LayerShape(input=(1, 8, 8, 4), filter=(1, 3, 3, 8), output=(1, 8, 8, 8),
                             depth_multiplier=2),
                  LayerShape(input=(1, 8, 8, 3), filter=(1, 5, 5, 3), output=(1, 8, 8, 3)),
                  LayerShape(input=(1, 8, 8, 8), filter=(1, 5, 5, 8), output=(1, 8, 8, 8),
                             requant_fast=False)):
        assert candidates("DEPTHWISE_CONV_2D", plain, DSP) == [{"variant": "generic"}]
    fc = LayerShape(input=(1, 1, 1, 30), filter=(10, 1, 1, 30), output=(1, 1, 1, 10))
    assert fully_connected_variant(fc, DSP).scratch == 0        # input widened in registers
    assert fully_connected_variant(replace(fc, pairs8=False), DSP).scratch == 64
    assert fully_connected_variant(fc, Target()).kernel == "kiln_fully_connected_s8"
    assert [(fully_connected_variant(fc, DSP, k).kernel, k.get("row_block"))
            for k in candidates("FULLY_CONNECTED", fc, DSP)] == [
        ("kiln_fully_connected_rows8_p8_s8", 8),
        ("kiln_fully_connected_rows8_s8", 8), ("kiln_fully_connected_rows_s8", 4),
        ("kiln_fully_connected_rows2_s8", 2), ("kiln_conv2d_gemm_p8_s8", None),
        ("kiln_fully_connected_s8", None)]
    assert {fully_connected_variant(fc, DSP, k).scratch
            for k in candidates("FULLY_CONNECTED", fc, DSP)} == {64, 0, 5 * 32}
    # A per-tensor layer (fc_per_tensor_ok): the int8-pair and rows8 knobs run the _pt_
    # twins, which widen their input in registers (no scratch), and the six-row int16 one
    # (per-tensor only) comes first of the int16 ones; the other knobs as before.
    pt = replace(fc, per_tensor=True)
    pt_variants = [fully_connected_variant(pt, DSP, k)
                   for k in candidates("FULLY_CONNECTED", pt, DSP)]
    assert [(v.kernel, v.scratch) for v in pt_variants][:4] == [
        ("kiln_fully_connected_rows8_p8_pt_s8", 0), ("kiln_fully_connected_rows6_pt_s8", 0),
        ("kiln_fully_connected_rows8_pt_s8", 0), ("kiln_fully_connected_rows_s8", 64)]
    assert {"variant": "rows", "row_block": 6} not in candidates("FULLY_CONNECTED", fc, DSP)


def test_dwconv_packing_pads_channels_to_blocks_of_four():
    """Per block of four channels, per tap, [(c0, c2), (c1, c3)]; a last block of fewer
    channels has zero filters in the missing ones."""
    w = (np.arange(6, dtype=np.int8)[None, None, None, :] + 10 * np.arange(2, dtype=np.int8)
         [None, None, :, None]).reshape(1, 1, 2, 6)           # tap t, channel c: 10 t + c
    pair = lambda lo, hi: (lo & 0xFFFF) | (hi << 16)          # noqa: E731
    assert pack_dwconv_filter(w).view(np.uint32).tolist() == [
        pair(0, 2), pair(1, 3), pair(10, 12), pair(11, 13),    # channels 0-3, taps 0 and 1
        pair(4, 0), pair(5, 0), pair(14, 0), pair(15, 0)]      # channels 4, 5 (+ 2 zero)


def test_packing_follows_the_kernels_block_order():
    """Blocks of the knob's size, then halving blocks for the rest, per group of four k:
    pair-major for CONV_2D ([A of each channel][B of each channel]), row-major for
    FULLY_CONNECTED; the int8 layout keeps four k per word, k0 lowest."""
    ch = np.arange(1, 8, dtype=np.int8)[:, None, None, None] * np.ones((1, 1, 1, 4), np.int8)
    ch[:, 0, 0, 1] += 10                      # channel c: k = (c, c + 10, c, c)
    a = lambda c: c | (c << 16)               # noqa: E731  (k0, k2) of channel c
    b = lambda c: (c + 10) | (c << 16)        # noqa: E731  (k1, k3)
    words = pack_conv2d_filter(ch, 4, "s16").view(np.uint32).tolist()
    assert words == [a(1), a(2), a(3), a(4), b(1), b(2), b(3), b(4),
                     a(5), a(6), b(5), b(6), a(7), b(7)]
    assert pack_conv2d_filter(ch, 2, "s16").view(np.uint32).tolist() == [
        a(1), a(2), b(1), b(2), a(3), a(4), b(3), b(4), a(5), a(6), b(5), b(6), a(7), b(7)]
    w8 = lambda c: c | ((c + 10) << 8) | (c << 16) | (c << 24)   # noqa: E731
    assert pack_conv2d_filter(ch, 2, "s8").view(np.uint32).tolist() == [
        w8(1), w8(2), w8(3), w8(4), w8(5), w8(6), w8(7)]
    rows = ch.reshape(7, 4)
    fc = pack_fc_filter(rows, 0, 8).view(np.uint32).tolist()
    assert fc == [v for c in range(1, 8) for v in (a(c), b(c))]   # 4 + 2 + 1, row-major
    assert pack_fc_filter(rows[:3], 0, 2).view(np.uint32).tolist() == [
        a(1), b(1), a(2), b(2), a(3), b(3)]


_C_MAIN = r"""
#include <stdio.h>
#include "conv_dsp.h"

static uint32_t state = 12345u;
static uint32_t next(void) { state = state * 1664525u + 1013904223u; return state; }

int main(void)
{
    /* kiln_requantize_fast == kiln_requantize for every shift in [-31, -2]. */
    static const int32_t edges[] = {0, 1, -1, 2, -2, INT32_MAX, INT32_MIN, INT32_MIN + 1,
                                    1 << 30, -(1 << 30), (1 << 30) - 1, 12345, -12345};
    long bad = 0;
    for (long i = 0; i < 2000000; ++i) {
        const int32_t shift = -2 - (int32_t)(next() % 30);
        const int32_t mult = (int32_t)((1u << 30) + next() % (1u << 30));
        int32_t acc = (int32_t)next();
        if (i % 4 == 1) acc >>= next() % 31;
        if (i % 16 == 3) acc = edges[next() % (sizeof edges / sizeof edges[0])];
        if (i % 64 == 5) acc = (int32_t)((next() % 64u - 32u) << (-shift - 1));   /* ties */
        const kiln_requant_fast_t q = {mult, 1 << (-shift - 2), -shift - 1};
        if (kiln_requantize_fast(acc, &q) != kiln_requantize(acc, mult, shift) && bad++ < 10) {
            printf("acc %ld mult %ld shift %ld\n", (long)acc, (long)mult, (long)shift);
        }
    }
    /* Scratch sizes (Python twins in the test). */
    const kiln_dims_t in_a = {1, 9, 9, 16}, f_a = {32, 3, 3, 16};
    const kiln_dims_t in_b = {1, 9, 9, 3}, f_b = {8, 3, 3, 3};
    const kiln_dims_t fc_f = {10, 1, 1, 30};
    const kiln_dims_t in_c6 = {1, 7, 7, 6};
    printf("sizes %d %d %d %d %d %d %d %d %d\n",
           (int)kiln_conv2d_gemm_s8_get_buffer_size(&in_a, &f_a),
           (int)kiln_conv2d_gemm_s8_get_buffer_size(&in_b, &f_b),
           (int)kiln_conv2d_gemm_oc4_s8_get_buffer_size(&in_b, &f_b),
           (int)kiln_conv2d_gemm_w8_s8_get_buffer_size(&in_b, &f_b),
           (int)kiln_dwconv2d_3x3_s8_get_buffer_size(&in_a),
           (int)kiln_fully_connected_rows_s8_get_buffer_size(&fc_f),
           (int)kiln_fully_connected_rows2_s8_get_buffer_size(&fc_f),
           (int)kiln_fully_connected_rows8_s8_get_buffer_size(&fc_f),
           (int)kiln_dwconv2d_ch4_s8_get_buffer_size(&in_c6));

    /* Bad arguments are refused. */
    static int32_t words[64];
    static int8_t buf[256];
    static const int32_t bias[8] = {0};
    /* Every channel valid (right_shift in [1, 30], conv.h): oc4 derives its shift from it. */
    static const kiln_requant_fast_t q[8] = {{1 << 30, 1, 1}, {1 << 30, 1, 1}, {1 << 30, 1, 1},
                                             {1 << 30, 1, 1}, {1 << 30, 1, 1}, {1 << 30, 1, 1},
                                             {1 << 30, 1, 1}, {1 << 30, 1, 1}};
    const kiln_conv_params_t p = {{1, 1}, {0, 0}, {1, 1}, 0, 0, {-128, 127}};
    const kiln_dwconv_params_t dp = {p, 1};
    const kiln_fc_params_t fp = {0, 0, 0, {-128, 127}};
    const kiln_fc_params_t fp_off = {0, 3, 0, {-128, 127}};
    const kiln_dims_t in = {1, 3, 3, 4}, f1 = {4, 1, 1, 4}, out = {1, 3, 3, 4};
    const kiln_dims_t wrong = {1, 3, 3, 5}, dwf = {1, 3, 3, 4}, dwf5 = {1, 5, 5, 4};
    const kiln_dims_t in3 = {1, 3, 3, 3}, dwf3 = {1, 3, 3, 3}, out3 = {1, 3, 3, 3};
    const kiln_dims_t fc_in = {1, 1, 1, 4}, fc_out = {1, 1, 1, 4};
    const kiln_context_t ctx = {buf, 256}, small = {buf, 2}, odd = {buf + 1, 200};
    const int8_t *x = (const int8_t *)words;
    int refused = 0;
    int accepted = 0;
#define REFUSED(call) refused += (call) == KILN_ERR_ARG
#define ACCEPTED(call) accepted += (call) == KILN_OK
    const int32_t *odd_w = (const int32_t *)(buf + 1);
    int8_t *y = buf + 128;
    REFUSED(kiln_conv2d_gemm_s8(&ctx, &p, q, &in, x, &f1, words, NULL, &out, y));
    REFUSED(kiln_conv2d_gemm_s8(&small, &p, q, &in, x, &f1, words, bias, &out, y));
    REFUSED(kiln_conv2d_gemm_s8(&odd, &p, q, &in, x, &f1, words, bias, &out, y));
    REFUSED(kiln_conv2d_gemm_s8(&ctx, &p, q, &in, x, &f1, odd_w, bias, &out, y));
    REFUSED(kiln_conv2d_gemm_s8(&ctx, &p, q, &in, x, &f1, words, bias, &wrong, y));
    REFUSED(kiln_dwconv2d_3x3_s8(&ctx, &dp, q, &in, x, &dwf5, words, bias, &out, y));
    REFUSED(kiln_dwconv2d_3x3_s8(&small, &dp, q, &in, x, &dwf, words, bias, &out, y));
    REFUSED(kiln_dwconv2d_3x3_s8(&ctx, &dp, NULL, &in, x, &dwf, words, bias, &out, y));
    REFUSED(kiln_fully_connected_rows_s8(&ctx, &fp_off, q, &fc_in, x, &f1, words, bias,
                                         &fc_out, y));
    REFUSED(kiln_fully_connected_rows_s8(&small, &fp, q, &fc_in, x, &f1, words, bias,
                                         &fc_out, y));
    REFUSED(kiln_conv2d_gemm_oc4_s8(&small, &p, q, &in, x, &f1, words, bias, &out, y));
    REFUSED(kiln_conv2d_gemm_oc4_s8(&ctx, &p, q, &in, x, &f1, odd_w, bias, &out, y));
    REFUSED(kiln_conv2d_gemm_w8_s8(&odd, &p, q, &in, x, &f1, words, bias, &out, y));
    REFUSED(kiln_conv2d_gemm_w8_s8(&ctx, &p, q, &in, x, &f1, words, bias, &wrong, y));
    REFUSED(kiln_fully_connected_rows2_s8(&ctx, &fp_off, q, &fc_in, x, &f1, words, bias,
                                          &fc_out, y));
    REFUSED(kiln_fully_connected_rows8_s8(&small, &fp, q, &fc_in, x, &f1, words, bias,
                                          &fc_out, y));
    REFUSED(kiln_dwconv2d_ch4_s8(&small, &dp, q, &in, x, &dwf5, words, bias, &out, y));
    REFUSED(kiln_dwconv2d_ch4_s8(&ctx, &dp, q, &in, x, &dwf5, odd_w, bias, &out, y));
    REFUSED(kiln_dwconv2d_ch4_s8(&ctx, &dp, q, &in, x, &dwf5, words, NULL, &out, y));
    REFUSED(kiln_dwconv2d_ch4_s8(&ctx, &dp, q, &in3, x, &dwf3, words, bias, &out3, y));
    REFUSED(kiln_dwconv2d_ch4_s8(&ctx, &dp, q, &in, x, &wrong, words, bias, &out, y));
    ACCEPTED(kiln_conv2d_gemm_s8(&ctx, &p, q, &in, x, &f1, words, bias, &out, y));
    ACCEPTED(kiln_dwconv2d_3x3_s8(&ctx, &dp, q, &in, x, &dwf, words, bias, &out, y));
    ACCEPTED(kiln_fully_connected_rows_s8(&ctx, &fp, q, &fc_in, x, &f1, words, bias, &fc_out, y));
    ACCEPTED(kiln_conv2d_gemm_oc4_s8(&ctx, &p, q, &in, x, &f1, words, bias, &out, y));
    ACCEPTED(kiln_conv2d_gemm_w8_s8(&ctx, &p, q, &in, x, &f1, words, bias, &out, y));
    ACCEPTED(kiln_fully_connected_rows2_s8(&ctx, &fp, q, &fc_in, x, &f1, words, bias,
                                           &fc_out, y));
    ACCEPTED(kiln_fully_connected_rows8_s8(&ctx, &fp, q, &fc_in, x, &f1, words, bias,
                                           &fc_out, y));
    ACCEPTED(kiln_dwconv2d_ch4_s8(&ctx, &dp, q, &in, x, &dwf5, words, bias, &out, y));
    printf("mismatches %ld refused %d accepted %d\n", bad, refused, accepted);
    return 0;
}
"""


def test_requant_fast_sizes_and_argument_checks_in_c(tmp_path: Path):
    out = run_sanitized_c(tmp_path, _C_MAIN, ["conv2d_gemm.c", "dwconv_3x3.c",
                                              "dwconv_channels.c", "fully_connected_rows.c"])
    assert "mismatches 0 refused 21 accepted 8" in out, out
    sizes = [int(v) for v in out.split("sizes ")[1].split("\n")[0].split()]
    shapes = [LayerShape(input=(1, 9, 9, 16), filter=(32, 3, 3, 16), output=(1, 9, 9, 32)),
              LayerShape(input=(1, 9, 9, 3), filter=(8, 3, 3, 3), output=(1, 9, 9, 8))]
    gemm = [k for k in candidates("CONV_2D", shapes[1], DSP)
            if k["variant"] == "gemm" and k["weights"] != "p8"]      # p8: the same as oc4
    assert conv2d_variant(shapes[0], DSP).kernel == "kiln_conv2d_gemm_p8_s8"
    assert sizes[:4] == [conv2d_variant(shapes[0], DSP, gemm[0]).scratch] + [
        conv2d_variant(shapes[1], DSP, k).scratch for k in gemm]
    dw = LayerShape(input=(1, 9, 9, 16), filter=(1, 3, 3, 16), output=(1, 9, 9, 16))
    fc = LayerShape(input=(1, 1, 1, 30), filter=(10, 1, 1, 30), output=(1, 1, 1, 10))
    assert sizes[4] == dwconv2d_variant(dw, DSP, {"variant": "3x3", "ch_block": 4}).scratch
    assert sizes[5:8] == [fully_connected_variant(fc, DSP, {"variant": "rows", "row_block": b})
                          .scratch for b in (4, 2, 8)]
    dw5 = LayerShape(input=(1, 7, 7, 6), filter=(1, 5, 5, 6), output=(1, 7, 7, 6))
    assert sizes[8] == dwconv2d_variant(dw5, DSP, {"variant": "channels", "ch_block": 4}) \
        .scratch


def test_simd_kernels_clean_under_sanitizers(tmp_path: Path):
    """A model of SIMD layers, every round, built with -fsanitize=address,undefined,
    matches TFLM: no packed layout makes a kernel read past its filter or scratch."""
    require_tool("cc")
    from test_ops_conv import run_sanitized
    cases = (gemm_cases(505, 6) + gemm_tail_cases(509)[::2] + dw3x3_cases(506, 4) +
             dw_channels_cases(511) + fc_rows_cases(507, 4) + fc_tail_cases(510)[::2])
    model = _build(cases)
    rng = np.random.default_rng(508)
    layers = layer_candidates(model, simd_only=True)
    xs = _inputs(cases, rng)
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
    assert kernels >= ALL_SIMD_KERNELS


# --- QEMU mps2-an386: the SMLAD path -------------------------------------------------------

# TFLM + CMSIS-NN instructions per inference on QEMU mps2-an386 (../shared/ANCHORS.md).
CMSIS_NN = {"kws_ref_model": 7_698_888, "vww_96_int8": 24_101_962,
            "pretrainedResnet_quant": 29_863_456, "ad01_int8": 582_950}


@pytest.mark.cross
@pytest.mark.qemu
def test_simd_layers_on_qemu(tmp_path):
    """One firmware of many single-op layers per round of SIMD candidates (every SIMD
    variant and its edge cases, on the SMLAD path)."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    cases = (gemm_cases(601, 16) + gemm_tail_cases(606) +
             [extreme_shift_case(np.random.default_rng(609))] + dw3x3_cases(602, 10) +
             dw_channels_cases(608) + fc_rows_cases(603, 12) + fc_tail_cases(607) +
             [dead_channel_case(np.random.default_rng(604))])
    model = _build(cases)
    layers = layer_candidates(model, simd_only=True)
    rng = np.random.default_rng(605)
    xs = _inputs(cases, rng)
    want = run_reference(_reference_model(cases), xs)
    failures = []
    kernels: set[str] = set()
    for i in range(rounds(layers)):
        art = compile_round(model, layers, i)
        kernels |= set(_kernels(art))
        p = create_project(art, board=BOARD, out_dir=tmp_path / f"p{i}", inputs=xs)
        got = p.run(timeout=120).outputs
        for c, g, w in zip(cases, got, want):
            try:
                assert_equal_exact(g, w, f"{c.label} on QEMU, round {i}")
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, "\n".join(failures)
    assert kernels >= ALL_SIMD_KERNELS


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("model", MLPERF_INT8)
def test_mlperf_within_0_6x_cmsis_nn_on_qemu(tmp_path, model):
    """Bit-exact with tflite-micro and at most 0.6x TFLM + CMSIS-NN's instructions."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    path = model_path(model)
    p = create_project(path, board=BOARD, out_dir=tmp_path / "p")
    r = p.run()
    [x] = p.sample_inputs()
    for i, (g, w) in enumerate(zip(r.outputs, run_reference(path.read_bytes(), x))):
        assert_equal_exact(g, w, f"{model} output {i}")
    ratio = r.instructions / CMSIS_NN[model]
    print(f"{model}: {r.instructions:,} instructions, {ratio:.3f}x TFLM + CMSIS-NN")
    assert ratio <= 0.6
