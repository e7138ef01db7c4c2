"""The Helium (MVE) kernel variants (crt/kernels/kernels_mve.h) on the Cortex-M55 of QEMU
mps3-an547, against tflite-micro.

Host tier: the variant choice (MVE first on MVE boards only), the packed layouts and
the scratch sizes against their C twins. QEMU tier: the four-lane requantization
against kiln_requantize over random and edge values, ties included, for every shift
TFLite allows; every MVE candidate of many single-op layers (channel, row and k tails,
padding, strides, dilation, batches, dead channels, big scales, filter zero points)
bit-exact with tflite-micro; and (slow) the four MLPerf Tiny models bit-exact with at
most half the instructions of kiln's DSP kernels on the same board.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import MLPERF_INT8, REPO, model_path, require_tool, run_sanitized_c
from kiln.compiler.codegen.lowering import Target
from kiln.compiler.codegen.ops.conv import (LayerShape, candidates, conv2d_variant,
                                            dwconv2d_variant, fully_connected_variant)
from kiln.compiler.codegen.ops.conv_mve import dw_lanes, pack_mve_rows, quant4_blocks
from kiln.compiler.compile import target_for
from kiln.compiler.tune import Records, workload_key
from kiln.compiler.tune.workloads import layer_shapes
from reference import assert_equal_exact, run_reference
from test_ops_conv import _build, conv_case, dwconv_case, fc_case
from test_ops_conv_simd import (_reference_model, dead_channel_case, dw3x3_cases,
                                dw_channels_cases, fc_rows_cases, fc_tail_cases, gemm_cases,
                                gemm_tail_cases, live_big_scale_case)
from tflite_builder import rand_int8

sys.path.append(str(REPO / "benchmarks"))
from mve import dsp_records  # noqa: E402  (benchmarks/mve.py: the DSP baseline's records)

BOARD = "mps3-an547"
MVE = Target(board=BOARD, cpu="cortex-m55", dsp=True, mve=True)
DSP = Target(board="mps2-an386", cpu="cortex-m4", dsp=True)
MVE_KERNELS = {"kiln_conv2d_mve_s8", "kiln_conv2d_mve_im2col_s8", "kiln_dwconv2d_mve_s8",
               "kiln_fully_connected_mve_s8"}


# --- host: choice, layouts, scratch ----------------------------------------------------

def test_target_for_follows_the_core():
    assert target_for(BOARD).mve and target_for(BOARD).dsp
    assert not target_for("mps2-an386").mve and not target_for("host").mve


def test_mve_variants_lead_on_mve_boards_only():
    conv = LayerShape(input=(1, 8, 8, 16), filter=(32, 3, 3, 16), output=(1, 8, 8, 32),
                      padding=(1, 1))
    dw = LayerShape(input=(1, 8, 8, 12), filter=(1, 3, 3, 12), output=(1, 8, 8, 12),
                    padding=(1, 1))
    fc = LayerShape(input=(2, 1, 1, 30), filter=(10, 1, 1, 30), output=(2, 1, 1, 10))
    assert conv2d_variant(conv, MVE).kernel in ("kiln_conv2d_mve_s8", "kiln_conv2d_mve_im2col_s8")
    assert {k.get("window") for k in candidates("CONV_2D", conv, MVE)
            if k["variant"] == "mve"} == {"rows", "im2col"}
    assert dwconv2d_variant(dw, MVE).kernel == "kiln_dwconv2d_mve_s8"
    assert fully_connected_variant(fc, MVE).kernel == "kiln_fully_connected_mve_s8"
    for op, shape in (("CONV_2D", conv), ("DEPTHWISE_CONV_2D", dw), ("FULLY_CONNECTED", fc)):
        assert all(k["variant"] != "mve" for k in candidates(op, shape, DSP))
        # After the MVE ones, the DSP board's list as it is: a tuner still times them.
        mve = candidates(op, shape, MVE)
        assert [k for k in mve if k["variant"] != "mve"] == candidates(op, shape, DSP)
    # Exact for any shift: no requant_fast needed. Not for groups or multipliers > 1.
    slow = LayerShape(input=(1, 8, 8, 16), filter=(32, 3, 3, 16), output=(1, 8, 8, 32),
                      requant_fast=False)
    assert conv2d_variant(slow, MVE).knobs["variant"] == "mve"
    grouped = LayerShape(input=(1, 8, 8, 16), filter=(32, 3, 3, 8), output=(1, 8, 8, 32))
    assert all(k["variant"] != "mve" for k in candidates("CONV_2D", grouped, MVE))
    mult2 = LayerShape(input=(1, 8, 8, 4), filter=(1, 3, 3, 8), output=(1, 8, 8, 8),
                       depth_multiplier=2)
    assert all(k["variant"] != "mve" for k in candidates("DEPTHWISE_CONV_2D", mult2, MVE))


def test_mve_filter_and_quant_layouts():
    """Per block of four rows, per run, per group of 16 k: 16 bytes of each row, zeros
    past the run and in the padding rows; quant blocks of four lanes (bias, multiplier,
    left shift, negated right shift), depthwise lanes by fours of channels per 16."""
    rows = (np.arange(5)[:, None, None] * 40 + np.arange(2)[None, :, None] * 20 +
            np.arange(18)[None, None, :]).astype(np.int8)          # (5 rows, 2 runs, 18)
    packed = pack_mve_rows(rows).reshape(2, 2, 2, 4, 16)          # block, run, group, row, k
    assert packed.shape[0] * 4 == 8
    assert packed[0, 1, 0, 2].tolist() == rows[2, 1, :16].tolist()
    assert packed[0, 1, 1, 3].tolist() == rows[3, 1, 16:].tolist() + [0] * 14
    assert packed[1, 0, 0, 0].tolist() == rows[4, 0, :16].tolist()
    assert not packed[1, :, :, 1:].any()                            # padding rows
    blocks = quant4_blocks(np.array([7, 8, 9]), np.array([1 << 30, 5, 6]),
                           np.array([-3, 2, 0]))
    assert blocks.tolist() == [[7, 8, 9, 0, 1 << 30, 5, 6, 0, 0, 2, 0, 0, -3, 0, 0, 0]]
    assert dw_lanes(18)[:8] == [0, 2, 4, 6, 1, 3, 5, 7]
    assert dw_lanes(18)[16:24] == [16, 18, 20, 22, 17, 19, 21, 23]
    dw = quant4_blocks(np.arange(10), np.full(10, 1 << 30), np.full(10, -1), dw_lanes(10))
    assert dw[:, :4].tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 0, 0, 0], [9, 0, 0, 0]]


def _sizes_main(shapes: list[LayerShape]) -> str:
    lines = ["#include <stdio.h>", '#include "kernels_mve.h"', "", "int main(void)", "{"]
    for i, s in enumerate(shapes):
        lines += [
            f"    const kiln_conv_params_t p{i} = {{{{{s.stride[0]}, {s.stride[1]}}}, "
            f"{{{s.padding[0]}, {s.padding[1]}}}, {{{s.dilation[0]}, {s.dilation[1]}}}, 0, 0, "
            "{-128, 127}};",
            f"    const kiln_dims_t in{i} = {{{', '.join(map(str, s.input))}}};",
            f"    const kiln_dims_t f{i} = {{{', '.join(map(str, s.filter))}}};",
            f"    const kiln_dims_t out{i} = {{{', '.join(map(str, s.output))}}};",
            f"    const kiln_dims_t dwf{i} = {{1, {s.filter[1]}, {s.filter[2]}, {s.input[3]}}};",
            f'    printf("%d %d %d\\n", '
            f"(int)kiln_conv2d_mve_s8_get_buffer_size(&p{i}, &in{i}, &f{i}, &out{i}), "
            f"(int)kiln_conv2d_mve_im2col_s8_get_buffer_size(&p{i}, &in{i}, &f{i}, &out{i}), "
            f"(int)kiln_dwconv2d_mve_s8_get_buffer_size(&in{i}, &dwf{i}));"]
    return "\n".join(lines + ["    return 0;", "}", ""])


def test_scratch_sizes_match_the_c(tmp_path: Path):
    shapes = [
        LayerShape(input=(1, 25, 5, 64), filter=(64, 1, 1, 64), output=(1, 25, 5, 64)),
        LayerShape(input=(1, 49, 10, 1), filter=(64, 10, 4, 1), output=(1, 25, 5, 64),
                   padding=(4, 1), stride=(2, 2)),
        LayerShape(input=(1, 96, 96, 3), filter=(8, 3, 3, 3), output=(1, 48, 48, 8),
                   stride=(2, 2)),                      # SAME, padding after only
        LayerShape(input=(1, 9, 9, 5), filter=(4, 3, 3, 5), output=(1, 7, 7, 4)),  # VALID
        LayerShape(input=(1, 9, 9, 5), filter=(4, 1, 3, 5), output=(1, 9, 7, 4)),
        LayerShape(input=(1, 9, 9, 5), filter=(4, 3, 2, 5), output=(1, 5, 7, 4),
                   dilation=(2, 2)),
        LayerShape(input=(1, 9, 9, 20), filter=(4, 2, 2, 20), output=(1, 5, 5, 4),
                   padding=(1, 0), stride=(2, 2)),
    ]
    out = run_sanitized_c(tmp_path, _sizes_main(shapes),
                          ["conv_mve.c", "dwconv_mve.c", "fully_connected_mve.c"])
    got = [[int(v) for v in line.split()] for line in out.strip().splitlines()]
    want = [[conv2d_variant(s, MVE, {"variant": "mve", "oc_block": 4, "window": w}).scratch
             for w in ("rows", "im2col")] +
            [dwconv2d_variant(LayerShape(input=s.input, filter=(1, *s.filter[1:3], s.input[3]),
                                         output=s.output, padding=s.padding), MVE,
                              {"variant": "mve", "ch_block": 8}).scratch] for s in shapes]
    assert got == want
    assert got[0][:2] == [0, 0] and got[3][0] == got[4][0] == 0      # read in place
    assert got[2][0] == 48          # SAME: the last row and column of windows cross the edge
    assert got[1][1] == 40 and got[5][0] > 0


# --- QEMU mps3-an547 -------------------------------------------------------------------

def _run_c_on_qemu(tmp_path: Path, main_c: str) -> str:
    """Build `main_c` as the firmware's main.c (the kernels and platform of a project
    for BOARD) and return what it prints under QEMU."""
    from kiln.project_gen import create_project
    from kiln.project_gen.qemu import run_elf
    rng = np.random.default_rng(1)
    art = kc.compile(kc.load(_build([fc_case(rng, 0)])), board=BOARD)
    p = create_project(art, board=BOARD, out_dir=tmp_path / "p")
    (p.path / "src" / "main.c").write_text(main_c)
    p.build()
    run = run_elf(p.board, p.elf)
    assert run.exit_code == 0, run.stdout + run.stderr
    return run.stdout


_REQUANT_MAIN = r"""
#include <stdint.h>
#include "conv_mve.h"
#include "platform.h"

static uint32_t state = 2463534242u;
static uint32_t next(void) { state ^= state << 13; state ^= state >> 17; state ^= state << 5;
                             return state; }

static void put_str(const char *s) { while (*s) kiln_platform_putc((uint8_t)*s++); }
static void put_num(long v)
{
    char d[24];
    int n = 0;
    unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
    do { d[n++] = (char)('0' + (int)(u % 10u)); u /= 10u; } while (u);
    if (v < 0) kiln_platform_putc('-');
    while (n) kiln_platform_putc((uint8_t)d[--n]);
}

/* One lane's (x, multiplier) for shift `shift`, case `i`: random values of every size,
 * edges, and the two kinds of ties (mult 2^30 halves x exactly: an even x makes the
 * rounding shift's tie, an odd one the high multiply's). */
static void pick(long i, int32_t shift, int32_t *x, int32_t *mult)
{
    static const int32_t edges[] = {0, 1, -1, 2, -2, 3, -3, INT32_MAX, INT32_MIN,
                                    INT32_MIN + 1, INT32_MAX - 1, 1 << 30, -(1 << 30),
                                    (1 << 30) - 1, 65535, -65536};
    const int32_t right = shift < 0 ? -shift : 0;
    *mult = (int32_t)((1u << 30) + next() % (1u << 30));
    *x = (int32_t)next();
    switch (i % 8) {
    case 1: *x >>= next() % 32; break;
    case 2: *x = edges[next() % (sizeof edges / sizeof edges[0])]; break;
    case 3: *mult = next() % 4 == 0 ? INT32_MAX : (next() % 4 == 0 ? 0 : *mult);
            *x >>= next() % 32; break;
    case 4: case 5: {                       /* rounding-shift ties: x / 2 = k 2^n + 2^(n-1) */
        *mult = 1 << 30;
        if (right > 0) {
            const int64_t k = (int64_t)(next() % 64u) - 32;
            const int64_t half = ((k << right) + (INT64_C(1) << (right - 1))) * 2;
            if (half >= INT32_MIN && half <= INT32_MAX) *x = (int32_t)half;
        }
        if (i % 8 == 5) *x = -*x;
        break;
    }
    case 6: *mult = 1 << 30; *x = (int32_t)(next() | 1u) >> (next() % 32); break;  /* odd */
    default: break;
    }
}

int main(void)
{
    kiln_platform_init();
    long bad = 0, checked = 0;
    for (int32_t shift = -31; shift <= 30; ++shift) {
        for (long i = 0; i < 1600; ++i) {
            int32_t x[4], m[4], want[4], got[4], left[4], neg[4];
            for (int l = 0; l < 4; ++l) {
                pick(i * 4 + l, shift, &x[l], &m[l]);
                left[l] = shift > 0 ? shift : 0;
                neg[l] = shift < 0 ? shift : 0;
                want[l] = kiln_requantize(x[l], m[l], shift);
            }
            vst1q_s32(got, kiln_mve_requantize(vld1q_s32(x), vld1q_s32(m), vld1q_s32(left),
                                               vld1q_s32(neg)));
            for (int l = 0; l < 4; ++l) {
                ++checked;
                if (got[l] != want[l] && bad++ < 8) {
                    put_str("MISMATCH x "); put_num(x[l]); put_str(" mult "); put_num(m[l]);
                    put_str(" shift "); put_num(shift); put_str(" got "); put_num(got[l]);
                    put_str(" want "); put_num(want[l]); put_str("\n");
                }
            }
        }
    }
    put_str("MVE REQUANT mismatches "); put_num(bad); put_str(" checked "); put_num(checked);
    put_str("\n");
    return 0;
}
"""


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_mve_requantize_is_tflites_on_qemu(tmp_path: Path):
    """kiln_mve_requantize (VQRDMULH, then VRSHL after moving negative values down by one)
    equals kiln_requantize (TFLite's double rounding) on 396,800 values: every shift in
    [-31, 30], random values of every magnitude, edges, and ties of both rounding steps."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    out = _run_c_on_qemu(tmp_path, _REQUANT_MAIN)
    m = re.search(r"MVE REQUANT mismatches (\d+) checked (\d+)", out)
    assert m, out
    assert (int(m.group(1)), int(m.group(2))) == (0, 62 * 1600 * 4), out


def _mve_cases() -> list:
    """The SIMD tests' cases, plus shapes around the MVE kernels' blocks: channels around
    multiples of 16 (depthwise; filters with and without -128) and 4 (conv, FC), k around
    16, windows read in place (VALID, 1x1 strided, SAME with padding after only) and
    gathered (padding, dilation along the width), a filter zero point (FC)."""
    rng = np.random.default_rng(701)
    cases = (gemm_cases(702, 10) + gemm_tail_cases(703) + dw3x3_cases(704, 6) +
             dw_channels_cases(705) + fc_rows_cases(706, 6) + fc_tail_cases(707) +
             [dead_channel_case(rng), live_big_scale_case(rng)])
    n = len(cases)
    for i, cin in enumerate((1, 3, 7, 8, 9, 15, 16, 17, 24, 33, 48)):
        cases.append(dwconv_case(rng, n + i, cin=cin, mult=1, kh=3, kw=3))
    n = len(cases)
    cases += [dwconv_case(rng, n, cin=12, mult=1, kh=5, kw=5, padding="SAME", dh=2, dw=2),
              dwconv_case(rng, n + 1, cin=10, mult=1, kh=3, kw=3, sh=2, sw=2, padding="VALID"),
              dwconv_case(rng, n + 2, cin=5, mult=1, kh=1, kw=4, n=2)]
    n = len(cases)
    # the asm paths: eight channels at stride 1 two pixels a pass (odd widths end on one
    # pixel), sixteen channels a pass plus eight plus a predicated tail, even and odd tap
    # counts, dilation, stride 2 along the height only
    for i, (cin, kh, kw, sh, dil, pad, w, act) in enumerate([
            (8, 3, 3, 1, 1, "SAME", 9, "RELU6"), (8, 3, 3, 2, 1, "VALID", 10, "NONE"),
            (8, 2, 2, 1, 1, "SAME", 7, "RELU"), (8, 3, 3, 1, 2, "SAME", 11, "NONE"),
            (24, 3, 3, 1, 1, "SAME", 6, "RELU6"), (20, 3, 3, 1, 1, "SAME", 5, "NONE"),
            (40, 2, 2, 1, 1, "VALID", 5, "RELU"), (16, 1, 5, 1, 2, "SAME", 12, "NONE")]):
        cases.append(dwconv_case(rng, n + i, cin=cin, mult=1, kh=kh, kw=kw, sh=sh, sw=1,
                                 dh=dil, dw=dil, padding=pad, w=w, h=6, act=act))
    for cin in (8, 13, 32):                 # a -128 filter value: no int16 tap pairs
        case = dwconv_case(rng, len(cases), cin=cin, mult=1, kh=3, kw=3, padding="SAME")
        case.inputs[1].data.reshape(-1)[::5] = -128
        cases.append(case)
    n = len(cases)
    for i, (cin, cout, k, s, pad, dil) in enumerate([
            (16, 5, 1, 1, "VALID", 1), (17, 9, 1, 2, "SAME", 1), (33, 4, 1, 1, "VALID", 1),
            (3, 8, 3, 2, "SAME", 1), (5, 6, 3, 1, "VALID", 1), (6, 3, 3, 1, "SAME", 2),
            (15, 7, 2, 1, "SAME", 1), (1, 13, 5, 2, "SAME", 1), (20, 4, 2, 3, "VALID", 1)]):
        cases.append(conv_case(rng, n + i, cin=cin, cout=cout, kh=k, kw=k, sh=s, sw=s,
                               dh=dil, dw=dil, padding=pad, groups=1, h=9, w=8))
    n = len(cases)
    # kernel rows of at most 16 values (conv_short, conv_in_place_short): 1x1 on 8 and 16
    # channels, stride 2 (rows apart), 3x3 on 3-5 channels with padding on both sides and
    # after only, 4x4 and 2x5 filters, clamps; odd widths and channel counts not of 4
    for i, (cin, cout, kh, kw, s, pad, w, act) in enumerate([
            (8, 16, 1, 1, 1, "VALID", 7, "RELU6"), (8, 6, 1, 1, 2, "VALID", 9, "NONE"),
            (16, 5, 1, 1, 1, "VALID", 5, "RELU"), (3, 8, 3, 3, 2, "SAME", 11, "RELU6"),
            (4, 7, 3, 3, 1, "SAME", 5, "NONE"), (5, 9, 3, 3, 2, "VALID", 9, "RELU"),
            (2, 5, 4, 4, 1, "SAME", 7, "RELU6"), (3, 4, 2, 5, 1, "SAME", 6, "NONE")]):
        cases.append(conv_case(rng, n + i, cin=cin, cout=cout, kh=kh, kw=kw, sh=s, sw=s,
                               dh=1, dw=1, padding=pad, groups=1, h=7, w=w, act=act))
    n = len(cases)
    cases += [fc_case(rng, n, depth=16, units=4), fc_case(rng, n + 1, depth=33, units=7),
              fc_case(rng, n + 2, depth=5, units=1, batches=3),
              fc_case(rng, n + 3, depth=40, units=9, per_channel=False, w_zp=7),
              fc_case(rng, n + 4, depth=17, units=6, per_channel=False, w_zp=-12)]
    return cases


def _mve_rounds(model: bytes) -> list[kc.Artifact]:
    """`model` for BOARD once per MVE candidate index (every tunable layer forced to its
    i-th MVE variant, its last when it has fewer, through tuning records)."""
    graph = kc.compile(kc.load(model), board=BOARD, optimize="speed").graph
    layers = {step: (workload_key(op, shape),
                     [k for k in candidates(op, shape, MVE) if k["variant"] == "mve"])
              for step, (op, shape) in layer_shapes(graph, MVE).items()}
    layers = {step: v for step, v in layers.items() if v[1]}
    arts = []
    for i in range(max(len(options) for _, options in layers.values())):
        want = {step: options[min(i, len(options) - 1)] for step, (_, options) in layers.items()}
        records = Records(entries=[
            {"workload": layers[step][0], "board": BOARD, "knobs": k, "status": "ok",
             "cycles": {"median": 1, "min": 1, "max": 1}} for step, k in want.items()])
        art = kc.compile(kc.load(model), board=BOARD, tuning_records=records, optimize="speed")
        got = {op["index"]: op.get("knobs") for op in art.report["ops"]}
        assert all(got[step] == k for step, k in want.items()), (want, got)
        arts.append(art)
    return arts


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_mve_layers_on_qemu(tmp_path: Path):
    """Every MVE variant of every layer (both CONV_2D windows) on QEMU mps3-an547 matches
    tflite-micro exactly; the layers MVE cannot take (groups, depth multiplier > 1) keep
    the DSP kernels in the same firmware."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    cases = _mve_cases()
    model = _build(cases)
    xs = [rand_int8(t.shape, np.random.default_rng(708), c.x_low, c.x_high)
          for c in cases for t in c.inputs if t is not None and t.data is None]
    want = run_reference(_reference_model(cases), xs)
    failures, kernels = [], set()
    for i, art in enumerate(_mve_rounds(model)):
        kernels |= {op["kernel"] for op in art.report["ops"]}
        p = create_project(art, board=BOARD, out_dir=tmp_path / f"p{i}", inputs=xs)
        got = p.run(timeout=300).outputs
        for c, g, w in zip(cases, got, want):
            try:
                assert_equal_exact(g, w, f"{c.label} on QEMU {BOARD}, round {i}")
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, "\n".join(failures)
    assert kernels >= MVE_KERNELS


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("model", MLPERF_INT8)
def test_mlperf_mve_half_of_dsp_on_qemu(tmp_path: Path, model: str):
    """On QEMU mps3-an547 the MVE build is bit-exact with tflite-micro and takes at most
    0.5x the instructions of the same board's DSP kernels (benchmarks/mve.py prints both)."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    path = model_path(model)
    p = create_project(path, board=BOARD, out_dir=tmp_path / "mve")
    assert {o["kernel"] for o in p.manifest["ops"]} & MVE_KERNELS
    r = p.run()
    [x] = p.sample_inputs()
    for i, (g, w) in enumerate(zip(r.outputs, run_reference(path.read_bytes(), x))):
        assert_equal_exact(g, w, f"{model} output {i} (MVE)")
    dsp = create_project(path, board=BOARD, out_dir=tmp_path / "dsp", inputs=[x],
                         tuning_records=dsp_records(path.read_bytes()))
    assert not {o["kernel"] for o in dsp.manifest["ops"]} & MVE_KERNELS
    base = dsp.run()
    ratio = r.instructions / base.instructions
    print(f"{model}: MVE {r.instructions:,} vs DSP {base.instructions:,} instructions "
          f"({ratio:.3f}x)")
    # Issue 17's goal is 0.5: KWS 0.434, VWW 0.451, IC 0.35, AD 0.22 measured. The DSP side's
    # depthwise is being made faster (2.5 instructions a MAC would put VWW near 0.49), so
    # the bound stays the goal rather than today's figures.
    assert ratio <= 0.5


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_mve_add_sub_on_qemu(tmp_path: Path):
    """ADD and SUB on QEMU mps3-an547 match tflite-micro: every one of the 65,536 int8
    input pairs under random quantizations, random inputs with a tail of elements not a
    multiple of four, every activation (the MVE kernels), and the broadcasting shapes of
    tests/test_ops_elementwise.py (which keep the plain kernels)."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    from test_ops_elementwise import SHAPES, Case as EwCase, _grid, _random_cases
    from tflite_builder import OpSpec, TensorSpec, build_model
    rng = np.random.default_rng(709)
    full = _grid()                                # all 65,536 pairs, 16,384 steps of four
    tail = (rand_int8((1, 7, 9, 13), rng), rand_int8((1, 7, 9, 13), rng))   # 819: a tail of 3
    cases, pairs = [], []
    for i, op in enumerate(("ADD", "SUB", "ADD", "SUB")):
        a, b = full if i < 2 else tail
        q = [(float(np.float32(rng.uniform(1e-3, 0.3))), int(rng.integers(-128, 128)))
             for _ in range(3)]
        q[2] = (max(q[2][0], 4 * max(q[0][0], q[1][0]) / (1 << 20)), q[2][1])
        act = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")[i]
        cases.append(EwCase(op, *(TensorSpec(a.shape, scale=s, zero_point=z) for s, z in q),
                            {"fused_activation_function": act}))
        pairs.append((a, b))
    for op in ("ADD", "SUB"):
        extra = _random_cases(op, rng, len(SHAPES))
        cases += extra
        pairs += [(rand_int8(c.a.shape, rng), rand_int8(c.b.shape, rng)) for c in extra]
    tensors, ops, inputs = [], [], []
    for c in cases:
        base = len(tensors)
        tensors += [c.a, c.b, c.out]
        ops.append(OpSpec(c.op, [base, base + 1], [base + 2], dict(c.options)))
        inputs += [base, base + 1]
    model = build_model(ops, tensors, inputs, [3 * i + 2 for i in range(len(cases))])
    xs = [x for pair in pairs for x in pair]
    art = kc.compile(kc.load(model), board=BOARD)
    kernels = [o["kernel"] for o in art.report["ops"]]
    assert kernels[:4] == ["kiln_add_mve_s8", "kiln_sub_mve_s8"] * 2
    assert {"kiln_add_mve_s8", "kiln_sub_mve_s8", "kiln_add_s8"} <= set(kernels)
    got = create_project(art, board=BOARD, out_dir=tmp_path / "p", inputs=xs).run(
        timeout=300).outputs
    for c, g, w in zip(cases, got, run_reference(model, xs)):
        assert_equal_exact(g, w, c.label())


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_mve_pooling_on_qemu(tmp_path: Path):
    """AVERAGE_POOL_2D and MAX_POOL_2D on QEMU mps3-an547 (kiln_avgpool_mve_s8,
    kiln_maxpool_mve_s8) match tflite-micro: the pool tests' edge shapes (global pools,
    clipped windows, channel tails around 4 and 16), random ones, rounding ties, and
    extreme values over a large window."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    from test_ops_pool import EDGE_SHAPES, batch_model, pool_case, random_pool_cases
    rng = np.random.default_rng(710)
    cases = []
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        for shape, k, s, padding in EDGE_SHAPES:
            cases.append(pool_case(op, shape, k, s, padding, "NONE", 0.02, -128))
            cases.append(pool_case(op, shape, k, s, padding, "RELU6", 0.03, -20))
        cases += random_pool_cases(op, rng, 24)
    cases.append(pool_case("AVERAGE_POOL_2D", (1, 2, 2, 64), (2, 2), (2, 2), zp=0))
    cases.append(pool_case("AVERAGE_POOL_2D", (1, 61, 67, 2), (61, 67), (1, 1), zp=0))
    model = batch_model(cases)
    xs = [rand_int8(c.inputs[0].shape, rng) for c in cases]
    ties = np.array([1, 1, 0, 0, -1, -1, 0, 0, 3, 4, 3, 4, -3, -4, -3, -4], np.int8)
    xs[-2] = np.tile(ties.reshape(4, 4).T.reshape(1, 2, 2, 4), (1, 1, 1, 16))
    xs[-1] = rng.choice(np.array([-128, 127], np.int8), xs[-1].shape)
    art = kc.compile(kc.load(model), board=BOARD)
    assert {o["kernel"] for o in art.report["ops"]} == {"kiln_avgpool_mve_s8",
                                                         "kiln_maxpool_mve_s8"}
    got = create_project(art, board=BOARD, out_dir=tmp_path / "p", inputs=xs).run(
        timeout=300).outputs
    for c, g, w in zip(cases, got, run_reference(model, xs)):
        assert_equal_exact(g, w.reshape(g.shape) if g.size == w.size else w, c.label)
