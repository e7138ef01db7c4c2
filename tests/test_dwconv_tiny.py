"""kiln_dwconv2d_3x3_tiny_s8 (dwconv_3x3_tiny.c: 3x3 depthwise onto 3x3 output maps, only
the taps in the image, the planes kernel's records) vs tflite-micro, the layer forced onto
it through tuning records: on the host (the C path), under ASan/UBSan, on QEMU mps2-an386
(the assembly of 3x3 -> 3x3 at stride 1 and 6x6 -> 3x3 at stride 2, SAME; the C path for
the rest) and on mps2-an385 (Cortex-M3: the C path).

Cases: strides 1 and 2 (and mixed), SAME and VALID, inputs 3x3 to 7x7, C in {1, 3, 4, 5,
8, 28} (the assembly's blocks of four and the C tail), RELU6 (clamped: C), batches, extreme
zero points, per-channel shifts from -2 to -31.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import require_tool
from kiln.compiler.codegen.ops.conv import LayerShape, candidates, dwconv2d_variant
from reference import assert_equal_exact
from test_dwconv_planes import shifts_case
from test_ops_conv import dwconv_case
from test_ops_conv_simd import BOARD, DSP, compile_forced, eligible_for

KERNEL = "kiln_dwconv2d_3x3_tiny_s8"
TINY = {"variant": "3x3_tiny"}


def tiny_cases(seed: int) -> list:
    rng = np.random.default_rng(seed)
    cases = []
    for i, (cin, h, w, sh, sw, padding, act, n) in enumerate([
            # The assembly's geometries (C % 4 tails in C), then the C path's.
            (28, 6, 6, 2, 2, "SAME", "NONE", 1), (8, 3, 3, 1, 1, "SAME", "NONE", 2),
            (5, 6, 6, 2, 2, "SAME", "NONE", 2), (4, 3, 3, 1, 1, "SAME", "NONE", 1),
            (3, 6, 6, 2, 2, "SAME", "NONE", 1), (1, 3, 3, 1, 1, "SAME", "NONE", 1),
            (8, 6, 6, 2, 2, "SAME", "RELU6", 1), (5, 3, 3, 1, 1, "SAME", "RELU6", 1),
            (4, 5, 5, 2, 2, "SAME", "NONE", 1), (3, 7, 7, 2, 2, "VALID", "NONE", 1),
            (5, 5, 5, 1, 1, "VALID", "NONE", 1), (8, 3, 6, 1, 2, "SAME", "NONE", 1),
            (1, 5, 7, 1, 2, "VALID", "RELU6", 1), (28, 7, 7, 2, 2, "VALID", "NONE", 1)]):
        cases.append(dwconv_case(rng, 600 + i, kh=3, kw=3, dh=1, dw=1, mult=1, cin=cin, h=h,
                                 w=w, sh=sh, sw=sw, padding=padding, act=act, n=n))
    cases += [
        dwconv_case(rng, 620, kh=3, kw=3, dh=1, dw=1, mult=1, cin=8, h=6, w=6, sh=2, sw=2,
                    padding="SAME", x_zp=-128, y_zp=127),
        dwconv_case(rng, 621, kh=3, kw=3, dh=1, dw=1, mult=1, cin=5, h=3, w=3, sh=1, sw=1,
                    padding="SAME", x_zp=127, y_zp=-128, bias=False),
        shifts_case(rng, 622, 8, 1, h=3, w=3), shifts_case(rng, 623, 28, 2, h=6, w=6),
        shifts_case(rng, 624, 5, 2, h=5, w=5),
    ]
    return cases


def _eligible(cases: list) -> list:
    return eligible_for(cases, TINY, slack=3)


def _compile(cases: list, board: str = BOARD, **kw) -> tuple[kc.Artifact, list, list]:
    return compile_forced(cases, TINY, KERNEL, board, 60, **kw)


def test_tiny_is_a_candidate_with_its_scratch():
    """It leads on VWW's 3x3 maps (the assembly's geometries) with 288 bytes of scratch,
    stays behind elsewhere, and is no candidate for other output sizes."""
    s1 = LayerShape(input=(1, 3, 3, 32), filter=(1, 3, 3, 32), output=(1, 3, 3, 32),
                    padding=(1, 1))
    s2 = LayerShape(input=(1, 6, 6, 28), filter=(1, 3, 3, 28), output=(1, 3, 3, 28),
                    stride=(2, 2))
    valid = LayerShape(input=(1, 7, 7, 8), filter=(1, 3, 3, 8), output=(1, 3, 3, 8),
                       stride=(2, 2))
    four = LayerShape(input=(1, 4, 4, 8), filter=(1, 3, 3, 8), output=(1, 4, 4, 8),
                      padding=(1, 1))
    clamped = LayerShape(input=(1, 3, 3, 32), filter=(1, 3, 3, 32), output=(1, 3, 3, 32),
                         padding=(1, 1), clamped=True)
    assert candidates("DEPTHWISE_CONV_2D", s1, DSP)[0] == TINY
    assert candidates("DEPTHWISE_CONV_2D", s2, DSP)[0] == TINY
    for shape in (valid, clamped):
        options = candidates("DEPTHWISE_CONV_2D", shape, DSP)
        assert TINY in options and options[0] != TINY
    assert TINY not in candidates("DEPTHWISE_CONV_2D", four, DSP)
    assert dwconv2d_variant(s2, DSP).scratch == 288
    assert dwconv2d_variant(s1, DSP).kernel == KERNEL


def test_tiny_on_host():
    cases = _eligible(tiny_cases(601))
    art, xs, want = _compile(cases, optimize="speed")
    for c, g, w in zip(cases, art.run(*xs), want):
        assert_equal_exact(g, w, f"{c.label} tiny")


@pytest.mark.slow
def test_tiny_clean_under_sanitizers(tmp_path: Path):
    """Built with -fsanitize=address,undefined: no read outside the input, the records or
    the scratch, whatever C % 4, the padding and the strides."""
    require_tool("cc")
    from test_ops_conv import run_sanitized
    cases = _eligible(tiny_cases(611))
    art, xs, want = _compile(cases, optimize="speed")
    got = run_sanitized(art, xs, tmp_path, len(cases))
    for c, g, w in zip(cases, got, want):
        assert_equal_exact(g, w.reshape(-1), f"{c.label} under sanitizers")


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("board", [BOARD, "mps2-an385"])
def test_tiny_on_qemu(tmp_path: Path, board: str):
    """One firmware of every case: on mps2-an386 the assembly (SXTAB16 / PKH / SMLAD /
    SMLATT / SMLABT / SMMLAR) where it applies, on mps2-an385 (M3) the C path."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    cases = _eligible(tiny_cases(621))
    art, xs, want = _compile(cases, board=board)
    project = create_project(art, board=board, out_dir=tmp_path / "fw")
    result = project.run(xs, timeout=120)
    for c, g, w in zip(cases, result.outputs, want):
        assert_equal_exact(g, w, f"{c.label} tiny on {board}")
