"""The SIMD variants of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED vs tflite-micro.

Compiled for mps2-an386 (Cortex-M4, DSP extension), a model gets kiln_conv2d_gemm_s8,
kiln_dwconv2d_3x3_s8 and kiln_fully_connected_rows_s8 with filters packed at compile time.
The same C runs here on the host (plain C twins of the dual-MAC intrinsics) and under
QEMU (the SMLAD path): both are compared exactly with TFLM on the same random cases as
tests/test_ops_conv.py. QEMU tests build one firmware for many layers.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import MLPERF_INT8, model_path, require_tool
from kiln.compiler.codegen.lowering import Target
from kiln.compiler.codegen.ops.conv import (LayerShape, candidates, conv2d_variant,
                                            dwconv2d_variant, fully_connected_variant,
                                            requant_fast)
from kiln.compiler.errors import ModelError
from kiln.compiler.numerics import requantize
from kiln.compiler.paths import crt_dir
from reference import assert_equal_exact, run_reference
from test_ops_conv import (Case, _build, conv_case, dwconv_case, fc_case, run_cases,
                           run_dwconv_cases)
from tflite_builder import TensorSpec, rand_int8

BOARD = "mps2-an386"
DSP = Target(board=BOARD, cpu="cortex-m4", dsp=True)
SIMD_KERNELS = {"kiln_conv2d_gemm_s8", "kiln_dwconv2d_3x3_s8", "kiln_fully_connected_rows_s8"}


def _kernels(art: kc.Artifact) -> list[str]:
    return [layer["kernel"] for layer in art.report["ops"]]


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

def test_gemm_on_host():
    art = run_cases(gemm_cases(101, 50), seed=11, board=BOARD)
    kernels = _kernels(art)
    assert kernels.count("kiln_conv2d_gemm_s8") >= 0.8 * len(kernels), kernels


def test_dwconv_3x3_on_host():
    art = run_dwconv_cases(dw3x3_cases(202, 40), seed=12, board=BOARD)
    kernels = _kernels(art)      # a few random output scales give shifts >= -1: plain kernel
    assert kernels.count("kiln_dwconv2d_3x3_s8") >= 0.8 * len(kernels), kernels


def test_fully_connected_rows_on_host():
    art = run_cases(fc_rows_cases(303, 50), seed=13, board=BOARD)
    kernels = _kernels(art)
    assert kernels.count("kiln_fully_connected_rows_s8") >= 0.8 * len(kernels), kernels


def test_dead_channels_and_big_scales():
    rng = np.random.default_rng(404)
    art = run_cases([dead_channel_case(rng), live_big_scale_case(rng)], seed=14, board=BOARD)
    assert _kernels(art) == ["kiln_conv2d_gemm_s8", "kiln_conv2d_1x1_s8"]


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
    assert (v.kernel, v.knobs, v.scratch) == (
        "kiln_conv2d_gemm_s8", {"variant": "gemm", "oc_block": 2, "px_block": 2}, 4 * 144 + 48)
    assert conv2d_variant(conv, DSP, {"variant": "generic"}).kernel == "kiln_conv2d_s8"
    with pytest.raises(ModelError, match="not a candidate"):
        conv2d_variant(conv, DSP, {"variant": "1x1"})
    pw = LayerShape(input=(1, 8, 8, 6), filter=(32, 1, 1, 6), output=(1, 8, 8, 32))
    assert [k["variant"] for k in candidates("CONV_2D", pw, DSP)] == ["gemm", "1x1", "generic"]
    assert conv2d_variant(pw, DSP).scratch == 4 * 8 + 8          # rows of 6 padded to 8
    grouped = LayerShape(input=(1, 8, 8, 16), filter=(16, 3, 3, 8), output=(1, 8, 8, 16))
    assert [k["variant"] for k in candidates("CONV_2D", grouped, DSP)] == ["generic"]
    slow = LayerShape(input=(1, 8, 8, 16), filter=(32, 3, 3, 16), output=(1, 8, 8, 32),
                      requant_fast=False)
    assert conv2d_variant(slow, DSP).kernel == "kiln_conv2d_s8"
    dw = LayerShape(input=(1, 8, 8, 12), filter=(1, 3, 3, 12), output=(1, 8, 8, 12))
    assert dwconv2d_variant(dw, DSP).kernel == "kiln_dwconv2d_3x3_s8"
    assert dwconv2d_variant(dw, DSP).scratch == 12
    for other in (LayerShape(input=(1, 8, 8, 6), filter=(1, 3, 3, 6), output=(1, 8, 8, 6)),
                  LayerShape(input=(1, 8, 8, 4), filter=(1, 5, 5, 4), output=(1, 8, 8, 4)),
                  LayerShape(input=(1, 8, 8, 4), filter=(1, 3, 3, 8), output=(1, 8, 8, 8),
                             depth_multiplier=2),
                  LayerShape(input=(1, 8, 8, 4), filter=(1, 3, 3, 4), output=(1, 4, 4, 4),
                             dilation=(2, 2))):
        assert dwconv2d_variant(other, DSP).kernel == "kiln_dwconv2d_s8"
    fc = LayerShape(input=(1, 1, 1, 30), filter=(10, 1, 1, 30), output=(1, 1, 1, 10))
    assert fully_connected_variant(fc, DSP).scratch == 64
    assert fully_connected_variant(fc, Target()).kernel == "kiln_fully_connected_s8"


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
    printf("sizes %d %d %d %d\n", (int)kiln_conv2d_gemm_s8_get_buffer_size(&in_a, &f_a),
           (int)kiln_conv2d_gemm_s8_get_buffer_size(&in_b, &f_b),
           (int)kiln_dwconv2d_3x3_s8_get_buffer_size(&in_a),
           (int)kiln_fully_connected_rows_s8_get_buffer_size(&fc_f));

    /* Bad arguments are refused. */
    static int32_t words[64];
    static int8_t buf[256];
    static const int32_t bias[8] = {0};
    static const kiln_requant_fast_t q[8] = {{1 << 30, 1, 1}};
    const kiln_conv_params_t p = {{1, 1}, {0, 0}, {1, 1}, 0, 0, {-128, 127}};
    const kiln_dwconv_params_t dp = {p, 1};
    const kiln_fc_params_t fp = {0, 0, 0, {-128, 127}};
    const kiln_fc_params_t fp_off = {0, 3, 0, {-128, 127}};
    const kiln_dims_t in = {1, 3, 3, 4}, f1 = {4, 1, 1, 4}, out = {1, 3, 3, 4};
    const kiln_dims_t wrong = {1, 3, 3, 5}, dwf = {1, 3, 3, 4}, dwf5 = {1, 5, 5, 4};
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
    ACCEPTED(kiln_conv2d_gemm_s8(&ctx, &p, q, &in, x, &f1, words, bias, &out, y));
    ACCEPTED(kiln_dwconv2d_3x3_s8(&ctx, &dp, q, &in, x, &dwf, words, bias, &out, y));
    ACCEPTED(kiln_fully_connected_rows_s8(&ctx, &fp, q, &fc_in, x, &f1, words, bias, &fc_out, y));
    printf("mismatches %ld refused %d accepted %d\n", bad, refused, accepted);
    return 0;
}
"""


def test_requant_fast_sizes_and_argument_checks_in_c(tmp_path: Path):
    require_tool("cc")
    kernels = crt_dir() / "kernels"
    (tmp_path / "main.c").write_text(_C_MAIN)
    exe = tmp_path / "check"
    subprocess.run(["cc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-I", str(kernels), "-o", str(exe), str(tmp_path / "main.c"),
                    *(str(kernels / f) for f in ("conv2d_gemm.c", "dwconv_3x3.c",
                                                 "fully_connected_rows.c"))], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    assert "mismatches 0 refused 10 accepted 3" in out, out
    sizes = [int(v) for v in out.split("sizes ")[1].split("\n")[0].split()]
    shapes = [LayerShape(input=(1, 9, 9, 16), filter=(32, 3, 3, 16), output=(1, 9, 9, 32)),
              LayerShape(input=(1, 9, 9, 3), filter=(8, 3, 3, 3), output=(1, 9, 9, 8))]
    assert sizes[:2] == [conv2d_variant(s, DSP).scratch for s in shapes]
    dw = LayerShape(input=(1, 9, 9, 16), filter=(1, 3, 3, 16), output=(1, 9, 9, 16))
    fc = LayerShape(input=(1, 1, 1, 30), filter=(10, 1, 1, 30), output=(1, 1, 1, 10))
    assert sizes[2:] == [dwconv2d_variant(dw, DSP).scratch,
                         fully_connected_variant(fc, DSP).scratch]


def test_simd_kernels_clean_under_sanitizers(tmp_path: Path):
    """A model of SIMD layers built with -fsanitize=address,undefined matches TFLM."""
    require_tool("cc")
    from kiln.compiler.host_build import build_executable
    from test_ops_conv import _sanitizer_main
    cases = gemm_cases(505, 6) + dw3x3_cases(506, 4) + fc_rows_cases(507, 4)
    rng = np.random.default_rng(508)
    art = kc.compile(kc.load(_build(cases)), board=BOARD)
    assert set(_kernels(art)) <= SIMD_KERNELS | {"kiln_conv2d_s8"}
    sources = {k: v for k, v in art.files.items() if k != "kiln.json"}
    exe = build_executable(sources, _sanitizer_main(len(art.report["inputs"]), len(cases)),
                           tmp_path / "build", sanitize=True)
    xs = [rand_int8(spec["shape"], rng) for spec in art.report["inputs"]]
    args = [str(exe)]
    for i, x in enumerate(xs):
        (tmp_path / f"in{i}.bin").write_bytes(x.tobytes())
        args.append(str(tmp_path / f"in{i}.bin"))
    args += [str(tmp_path / f"out{j}.bin") for j in range(len(cases))]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "runtime error" not in proc.stderr, proc.stderr[-3000:]
    want = run_reference(_reference_model(cases), xs)
    for j, (c, w) in enumerate(zip(cases, want)):
        got = np.frombuffer((tmp_path / f"out{j}.bin").read_bytes(), dtype=np.int8)
        assert_equal_exact(got, w.reshape(-1), c.label + " under sanitizers")


# --- QEMU mps2-an386: the SMLAD path -------------------------------------------------------

# TFLM + CMSIS-NN instructions per inference on QEMU mps2-an386 (../shared/ANCHORS.md).
CMSIS_NN = {"kws_ref_model": 7_698_888, "vww_96_int8": 24_101_962,
            "pretrainedResnet_quant": 29_863_456, "ad01_int8": 582_950}


@pytest.mark.cross
@pytest.mark.qemu
def test_simd_layers_on_qemu(tmp_path):
    """One firmware of many single-op layers (every SIMD variant and its edge cases)."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    cases = (gemm_cases(601, 20) + dw3x3_cases(602, 12) + fc_rows_cases(603, 16) +
             [dead_channel_case(np.random.default_rng(604))])
    model = _build(cases)
    art = kc.compile(kc.load(model), board=BOARD)
    assert set(_kernels(art)) >= SIMD_KERNELS
    rng = np.random.default_rng(605)
    xs = [rand_int8(spec["shape"], rng, c.x_low, c.x_high)
          for spec, c in zip(art.report["inputs"], cases)]
    p = create_project(art, board=BOARD, out_dir=tmp_path / "p", inputs=xs)
    got = p.run(timeout=120).outputs
    want = run_reference(_reference_model(cases), xs)
    failures = []
    for c, g, w in zip(cases, got, want):
        try:
            assert_equal_exact(g, w, c.label + " on QEMU")
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)


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
