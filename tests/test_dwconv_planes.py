"""kiln_dwconv2d_3x3_planes_s8 (dwconv_3x3_planes.c: 3x3 depthwise a channel at a time over
int16 planes of the input, horizontal stride 1 or 2) vs tflite-micro, the layer forced onto
it through tuning records: on the host (plain C twins), under ASan/UBSan, and on QEMU
mps2-an386 (the assembly rows, slow).

Cases: channel counts 1 to 13 (a last block of fewer than four), odd and even input sizes
at stride 2 with SAME and VALID padding (SAME pads one column on the left when the size is
odd), vertical strides 1-3, tiny maps (1x1, 2x2, 3x3: the general rows), the widest rows
the planes take (15 outputs at stride 2, 29 at stride 1), clamps (RELU6: the C rows),
stride 2 on rows of six and twelve (a block a call, and all blocks in one), extreme zero
points, batches, dead channels, per-channel shifts from -2 to -31.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import require_tool
from kiln.compiler.codegen.ops.conv import (LayerShape, candidates, dwconv2d_variant,
                                            planes_channels)
from reference import assert_equal_exact
from test_ops_conv import dwconv_case
from test_ops_conv_simd import BOARD, DSP, compile_forced, eligible_for
from test_ops_dwconv_blocked import dead_channel_dw_case
from tflite_builder import TensorSpec

KERNEL = "kiln_dwconv2d_3x3_planes_s8"
PLANES = {"variant": "3x3_planes"}


def shifts_case(rng: np.random.Generator, i: int, cin: int, stride: int, h: int = 7,
                w: int = 8):
    """Per-channel effective scales from 0.24 (shift -2) down to 0.75 * 2^-31 (shift -31)."""
    c = dwconv_case(rng, i, kh=3, kw=3, dh=1, dw=1, mult=1, cin=cin, h=h, w=w, sh=stride,
                    sw=stride, padding="SAME", per_channel=True, bias=True, act="NONE")
    w, b = c.inputs[1], c.inputs[2]
    x_scale, y_scale = c.inputs[0].scale, c.output.scale
    effective = np.geomspace(0.24, 0.75 * 2.0**-31, cin)
    scales = [float(np.float32(e * y_scale / x_scale)) for e in effective]
    c.inputs[1] = TensorSpec(w.shape, "int8", scale=scales, zero_point=w.zero_point,
                             quantized_dimension=3, data=w.data)
    b_scales = [float(np.float32(x_scale * s)) for s in scales]
    c.inputs[2] = TensorSpec(b.shape, "int32", scale=b_scales, zero_point=[0] * cin,
                             data=b.data)
    c.label += " shifts -2..-31"
    return c


def planes_cases(seed: int) -> list:
    rng = np.random.default_rng(seed)
    cases = []
    for i, (cin, h, w, sh, sw, padding, act, n) in enumerate([
            (4, 1, 1, 1, 1, "SAME", "NONE", 1), (1, 2, 2, 2, 2, "SAME", "RELU6", 1),
            (3, 6, 6, 2, 2, "SAME", "NONE", 2), (5, 7, 7, 2, 2, "SAME", "NONE", 1),
            (6, 8, 9, 2, 2, "VALID", "NONE", 1), (7, 9, 8, 2, 2, "VALID", "RELU", 1),
            (13, 12, 12, 2, 2, "SAME", "NONE", 1), (8, 6, 6, 1, 1, "SAME", "NONE", 1),
            (9, 3, 3, 1, 1, "SAME", "NONE", 1), (2, 5, 7, 1, 1, "VALID", "NONE", 1),
            (12, 6, 6, 1, 1, "SAME", "RELU6", 1), (10, 9, 7, 3, 1, "SAME", "NONE", 2),
            (4, 5, 30, 2, 2, "SAME", "NONE", 1), (3, 4, 29, 1, 1, "SAME", "RELU_N1_TO_1", 1),
            (11, 10, 5, 1, 2, "SAME", "NONE", 1), (16, 6, 6, 2, 1, "VALID", "RELU", 1),
            # 3x3 maps (the general rows: pairs and a last pixel; SAME 6x6 and 5x5 at
            # stride 2, 3x3 at stride 1, a last block of two, VALID 5x5 and 7x7),
            # clamped in C; 2x2 maps.
            (8, 6, 6, 2, 2, "SAME", "NONE", 1), (12, 5, 5, 2, 2, "SAME", "NONE", 1),
            (6, 3, 3, 1, 1, "SAME", "NONE", 2), (8, 5, 5, 1, 1, "VALID", "NONE", 1),
            (8, 7, 7, 2, 2, "VALID", "NONE", 1), (4, 7, 7, 2, 2, "VALID", "RELU6", 1),
            (8, 2, 2, 1, 1, "SAME", "NONE", 1), (5, 4, 3, 2, 2, "SAME", "NONE", 1),
            # Stride 2 on rows of six and twelve (block_s2_six, _twelve): VWW's 24x24
            # and 12x12 inputs (pad 0 at the left, the fill by whole quads), odd widths
            # (pad 1 at the left), VALID, vertical strides 1 and 3, a last block of
            # fewer than four channels, one-row maps, RELU6 (the C rows).
            (8, 24, 24, 2, 2, "SAME", "NONE", 1), (6, 7, 23, 2, 2, "SAME", "NONE", 1),
            (5, 13, 14, 2, 2, "VALID", "NONE", 1), (4, 2, 12, 2, 2, "SAME", "NONE", 2),
            (9, 6, 11, 3, 2, "SAME", "NONE", 1), (4, 12, 12, 2, 2, "SAME", "RELU6", 1),
            (8, 4, 25, 1, 2, "VALID", "NONE", 1), (7, 3, 26, 2, 2, "VALID", "NONE", 1),
            # All whole blocks in one call (blocks_s2_six: 6x6 outputs; _twelve: an
            # even number of rows of twelve; 12x12 and 24x24 above) in a batch of two,
            # two rows of twelve; rows of six not six of them (5 and 4: a block a call).
            (8, 12, 12, 2, 2, "SAME", "NONE", 2), (4, 4, 24, 2, 2, "SAME", "NONE", 1),
            (5, 10, 12, 2, 2, "SAME", "NONE", 1), (5, 8, 12, 2, 2, "SAME", "NONE", 1)]):
        cases.append(dwconv_case(rng, 500 + i, kh=3, kw=3, dh=1, dw=1, mult=1, cin=cin, h=h,
                                 w=w, sh=sh, sw=sw, padding=padding, act=act, n=n))
    cases += [
        dwconv_case(rng, 520, kh=3, kw=3, dh=1, dw=1, mult=1, cin=8, h=6, w=7, sh=2, sw=2,
                    padding="SAME", x_zp=-128, y_zp=127),
        dwconv_case(rng, 521, kh=3, kw=3, dh=1, dw=1, mult=1, cin=5, h=5, w=5, sh=1, sw=1,
                    padding="SAME", x_zp=127, y_zp=-128, bias=False),
        dead_channel_dw_case(np.random.default_rng(522)),
        shifts_case(rng, 523, 12, 2), shifts_case(rng, 524, 7, 1),
        shifts_case(rng, 525, 8, 1, h=3, w=3), shifts_case(rng, 526, 8, 2, h=6, w=6),
        dwconv_case(rng, 527, kh=3, kw=3, dh=1, dw=1, mult=1, cin=8, h=3, w=3, sh=1, sw=1,
                    padding="SAME", x_zp=127, y_zp=-128),
    ]
    return cases


def _eligible(cases: list) -> list:
    return eligible_for(cases, PLANES, slack=8)


def _compile(cases: list, **kw) -> tuple[kc.Artifact, list, list]:
    return compile_forced(cases, PLANES, KERNEL, BOARD, 50, **kw)


def test_planes_is_a_candidate_with_its_scratch():
    s2 = LayerShape(input=(1, 12, 12, 60), filter=(1, 3, 3, 60), output=(1, 6, 6, 60),
                    stride=(2, 2))
    small = LayerShape(input=(1, 6, 6, 108), filter=(1, 3, 3, 108), output=(1, 6, 6, 108),
                       padding=(1, 1))
    wide = LayerShape(input=(1, 12, 12, 64), filter=(1, 3, 3, 64), output=(1, 12, 12, 64),
                      padding=(1, 1))
    big_s2 = LayerShape(input=(1, 48, 48, 16), filter=(1, 3, 3, 16), output=(1, 24, 24, 16),
                        stride=(2, 2))
    s3 = LayerShape(input=(1, 9, 9, 8), filter=(1, 3, 3, 8), output=(1, 3, 3, 8),
                    stride=(3, 3))
    tiny = LayerShape(input=(1, 3, 3, 32), filter=(1, 3, 3, 32), output=(1, 3, 3, 32),
                      padding=(1, 1))
    # Stride 2 and maps up to 12x12 (rows of three or more) lead with it; wider maps at
    # stride 1 keep the pixel pairs (their planes of the whole map would outgrow VWW's
    # arena at 24x24).
    # (3x3 maps of the tiny kernel's assembly lead with it, the planes next: test_dwconv_tiny.)
    assert candidates("DEPTHWISE_CONV_2D", tiny, DSP)[:2] == [{"variant": "3x3_tiny"}, PLANES]
    assert candidates("DEPTHWISE_CONV_2D", s2, DSP)[0] == PLANES
    assert candidates("DEPTHWISE_CONV_2D", small, DSP)[0] == PLANES
    assert candidates("DEPTHWISE_CONV_2D", wide, DSP)[0] == PLANES
    wider = LayerShape(input=(1, 24, 24, 32), filter=(1, 3, 3, 32), output=(1, 24, 24, 32),
                       padding=(1, 1))
    assert candidates("DEPTHWISE_CONV_2D", wider, DSP)[0]["variant"] == "3x3_px2"
    assert PLANES in candidates("DEPTHWISE_CONV_2D", wider, DSP)
    # Rows of 24 outputs at stride 2 (49 columns) and horizontal stride 3: not a candidate.
    assert PLANES not in candidates("DEPTHWISE_CONV_2D", big_s2, DSP)
    assert PLANES not in candidates("DEPTHWISE_CONV_2D", s3, DSP)
    # Four planes of (H - 1) * stride_h + 3 rows of 16 words.
    assert dwconv2d_variant(s2, DSP).scratch == 4 * 4 * 16 * 13
    assert dwconv2d_variant(small, DSP).scratch == 4 * 4 * 16 * 8


def test_planes_channel_records():
    """kiln_dw_planes_channel_t (conv.h): per filter row (w0, w1) and (w1, w2) as int16
    lanes, the bias as given, the multiplier doubled, right shift | k << 8."""
    w = np.array([[-128, 127, -1], [0, 5, -7], [64, -64, 1]], dtype=np.int8)
    weights = np.stack([w, -w.astype(np.int16).clip(-128, 127).astype(np.int8)], axis=-1)
    table = np.array([[1 << 30, 1, 3], [(1 << 31) - 1, 1 << 28, 30]], dtype=np.int32)
    rec = planes_channels(weights.reshape(1, 3, 3, 2), np.array([-5, 1 << 20]), table, -128)
    assert rec.shape == (2, 9) and rec.dtype == np.uint32
    lanes = lambda a, b: (int(a) & 0xFFFF) | (int(b) & 0xFFFF) << 16
    for c in range(2):
        f = weights[..., c]
        assert list(rec[c, :6]) == [lanes(f[r, i], f[r, i + 1]) for r in range(3)
                                    for i in (0, 1)]
    assert [int(v) for v in rec[:, 6]] == [(-5) & 0xFFFFFFFF, 1 << 20]
    assert [int(v) for v in rec[:, 7]] == [1 << 31, ((1 << 31) - 1) << 1]
    k = (1 - 256) & 0xFFFFFF      # k = 1 + 2 * (-128), above the shift's byte
    assert [int(v) for v in rec[:, 8]] == [3 | k << 8, 30 | k << 8]


def test_planes_on_host():
    cases = _eligible(planes_cases(501))
    art, xs, want = _compile(cases, optimize="speed")
    for c, g, w in zip(cases, art.run(*xs), want):
        assert_equal_exact(g, w, f"{c.label} planes")


@pytest.mark.slow
def test_planes_clean_under_sanitizers(tmp_path: Path):
    """Built with -fsanitize=address,undefined: no read outside the input, the filter, the
    quantization tables or the scratch, whatever C % 4, the padding and the strides."""
    require_tool("cc")
    from test_ops_conv import run_sanitized
    cases = _eligible(planes_cases(511))
    art, xs, want = _compile(cases, optimize="speed")
    got = run_sanitized(art, xs, tmp_path, len(cases))
    for c, g, w in zip(cases, got, want):
        assert_equal_exact(g, w.reshape(-1), f"{c.label} under sanitizers")


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_planes_on_qemu(tmp_path: Path):
    """The assembly rows (SMLAD / SMLABT / SMLATB / SMMLAR): one firmware of every case on
    mps2-an386."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    cases = _eligible(planes_cases(521))
    art, xs, want = _compile(cases)
    project = create_project(art, board=BOARD, out_dir=tmp_path / "fw")
    result = project.run(xs, timeout=120)
    for c, g, w in zip(cases, result.outputs, want):
        assert_equal_exact(g, w, f"{c.label} planes on QEMU")
