"""kiln_dwconv2d_3x3_s2ring_s8 (dwconv_3x3_s2ring.c: 3x3 depthwise at stride 2, a channel at
a time over a ring of one widened line) vs tflite-micro, the layer forced onto it through
tuning records: on the host (plain C), under ASan/UBSan, on QEMU mps2-an386 (the DSP path)
and mps2-an385 (Cortex-M3, plain C); and written exactly over its input (delta 0, the rule
of ops/inplace.py on its raster order) through forced_build.

Cases: stride 2, SAME (pad 0 or 1 before: even or odd sizes) and VALID, odd and even widths,
C % 4 != 0, tiny maps (every tap but a few padding), clamps (RELU6), extreme zero points,
16 channels at in_w = 2 out_w (the rows with immediate offsets).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import require_tool
from kiln.compiler.codegen.ops.conv import LayerShape, candidates, dwconv2d_variant
from kiln.compiler.codegen.ops.inplace import Band, in_order_delta, order_s2ring
from reference import assert_equal_exact, run_reference
from test_memory_overlap import forced_build
from test_ops_conv import _build, dwconv_case, run_sanitized
from test_ops_conv_simd import (DSP, _inputs, _kernels, _reference_model, compile_forced,
                                eligible_for, layer_candidates)

VARIANT = {"variant": "3x3_s2ring"}
KERNEL = "kiln_dwconv2d_3x3_s2ring_s8"


def s2ring_cases(seed: int, n: int | None = None) -> list:
    """n: every case's batch (None: random, 1 or 2)."""
    rng = np.random.default_rng(seed)
    spec = [  # cin, h, w, padding, act, x_zp, y_zp
        (16, 12, 12, "SAME", "NONE", None, -128), (8, 11, 11, "SAME", "RELU6", None, None),
        (5, 9, 8, "VALID", "NONE", None, None), (3, 10, 7, "SAME", "RELU", None, -128),
        (6, 7, 10, "VALID", "RELU6", None, None), (13, 5, 6, "SAME", "NONE", None, None),
        (4, 3, 3, "SAME", "NONE", None, None), (2, 1, 2, "SAME", "RELU6", None, None),
        (7, 2, 1, "SAME", "NONE", None, None), (9, 3, 4, "VALID", "NONE", None, None),
        (8, 6, 13, "SAME", "NONE", -128, 127), (5, 13, 9, "SAME", "RELU", 127, -128),
        # 16 channels, in_w = 2 out_w, out_w even: s2ring_rows16 (pad 0 or 1 on top, one
        # pair or more a row, both requantizations, the last row's bottom padding).
        (16, 8, 16, "SAME", "NONE", None, None), (16, 9, 8, "SAME", "NONE", -128, None),
        (16, 10, 20, "SAME", "NONE", 127, -128)]
    return [dwconv_case(rng, 700 + i, kh=3, kw=3, dh=1, dw=1, mult=1, cin=cin, h=h, w=w,
                        sh=2, sw=2, padding=padding, act=act, **({} if n is None else {"n": n}),
                        **({} if x_zp is None else {"x_zp": x_zp}),
                        **({} if y_zp is None else {"y_zp": y_zp}))
            for i, (cin, h, w, padding, act, x_zp, y_zp) in enumerate(spec)]


def _eligible(cases: list) -> list:
    return eligible_for(cases, VARIANT, slack=3)


def _compile(cases: list, board: str = "mps2-an386", **kw) -> tuple[kc.Artifact, list, list]:
    return compile_forced(cases, VARIANT, KERNEL, board, 41, **kw)


def test_s2ring_is_a_candidate_with_its_scratch():
    vww3 = LayerShape(input=(1, 48, 48, 16), filter=(1, 3, 3, 16), output=(1, 24, 24, 16),
                      stride=(2, 2), padding=(0, 0))
    vww7 = LayerShape(input=(1, 24, 24, 32), filter=(1, 3, 3, 32), output=(1, 12, 12, 32),
                      stride=(2, 2), padding=(0, 0))
    s1 = LayerShape(input=(1, 24, 24, 16), filter=(1, 3, 3, 16), output=(1, 24, 24, 16),
                    padding=(1, 1))
    assert candidates("DEPTHWISE_CONV_2D", vww3, DSP)[0] == VARIANT     # planes do not fit
    assert VARIANT in candidates("DEPTHWISE_CONV_2D", vww7, DSP)[1:]
    assert VARIANT not in candidates("DEPTHWISE_CONV_2D", s1, DSP)
    assert dwconv2d_variant(vww3, DSP, VARIANT).scratch == 4 * 25


def test_s2ring_order_allows_delta_0():
    """Raster order at stride 2, pad 0 or 1 before: exactly over the input."""
    for h, w, pad in ((48, 48, (0, 0)), (11, 11, (1, 1)), (9, 8, (0, 0))):
        oh, ow = (h + 2 * pad[0] - 3) // 2 + 1, (w + 2 * pad[1] - 3) // 2 + 1
        calls = [(Band(0, oh, 0, h, pad[0]), order_s2ring(oh, ow))]
        assert in_order_delta(calls, (h, w), (oh, ow), (3, 3), (2, 2), pad, (1, 1), 16) == 0


def test_s2ring_on_host():
    cases = _eligible(s2ring_cases(701))
    art, xs, want = _compile(cases, optimize="speed")
    for c, g, w in zip(cases, art.run(*xs), want):
        assert_equal_exact(g, w, f"{c.label} s2ring")


def _ordered(modes):
    ordered = [m for m in modes if m.name == "ordered"]
    return (ordered[0], False) if ordered else None


def test_s2ring_exactly_over_its_input_on_host():
    """Every layer at delta 0 (forced_build): TFLM's outputs."""
    cases = _eligible(s2ring_cases(703, n=1))
    model = _build(cases)
    knobs = {step: VARIANT for step in layer_candidates(model)}
    art, variants = forced_build(model, "mps2-an386", _ordered, knobs=knobs)
    assert set(variants) == {f"{KERNEL} ordered"}, variants
    shared = {o.layer: d for o, d in art.plan.shared()}
    assert set(shared.values()) == {0} and len(shared) == len(cases), shared
    xs = _inputs(cases, np.random.default_rng(42))
    for c, got, want in zip(cases, art.run(*xs), run_reference(_reference_model(cases), xs)):
        assert_equal_exact(got, want, f"{c.label} s2ring at delta 0")


@pytest.mark.slow
def test_s2ring_clean_under_sanitizers(tmp_path: Path):
    require_tool("cc")
    cases = _eligible(s2ring_cases(711))
    art, xs, want = _compile(cases, optimize="speed")
    got = run_sanitized(art, xs, tmp_path, len(cases))
    for c, g, w in zip(cases, got, want):
        assert_equal_exact(g, w.reshape(-1), f"{c.label} under sanitizers")


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an385"])
def test_s2ring_on_qemu(tmp_path: Path, board: str):
    """The DSP path (M4) and the plain C one (M3), one firmware of every case."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    cases = _eligible(s2ring_cases(721))
    art, xs, want = _compile(cases, board=board)
    project = create_project(art, board=board, out_dir=tmp_path / "fw")
    result = project.run(xs, timeout=120)
    for c, g, w in zip(cases, result.outputs, want):
        assert_equal_exact(g, w, f"{c.label} s2ring on {board}")


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_s2ring_exactly_over_its_input_on_qemu(tmp_path: Path):
    """The assembly rows at delta 0 on mps2-an386: TFLM's outputs."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    cases = _eligible(s2ring_cases(723, n=1))
    model = _build(cases)
    knobs = {step: VARIANT for step in layer_candidates(model)}
    art, variants = forced_build(model, "mps2-an386", _ordered, knobs=knobs)
    assert set(variants) == {f"{KERNEL} ordered"}, variants
    assert set(d for _, d in art.plan.shared()) == {0}
    xs = _inputs(cases, np.random.default_rng(43))
    result = create_project(art, board="mps2-an386", out_dir=tmp_path / "fw").run(xs, timeout=120)
    for c, got, want in zip(cases, result.outputs,
                            run_reference(_reference_model(cases), xs)):
        assert_equal_exact(got, want, f"{c.label} s2ring at delta 0 on QEMU")
