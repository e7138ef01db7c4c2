"""kiln_dwconv2d_3x3_px2_s8 and _px2v_s8 (dwconv_3x3_px2.c: 3x3 depthwise in horizontal,
or vertical, pixel pairs over a ring of padded lines) vs tflite-micro, the layer forced onto
it through tuning records: on the host (plain C twins, and px2v's banded twin over its own
input), under ASan/UBSan, and on QEMU mps2-an386 (the SMLAD path, slow).

Cases: any channel count (1 to 13: the last C % 4 channels form a block of their own),
odd and even widths (the last pixel on its own, its third tap from the ring or, SAME,
the zero point: a short ring, a last tile of one such pixel joined to the one before), vertical strides 1-3,
SAME and VALID, tiny maps (1x1: every tap but the centre is padding), clamps, extreme zero
points, batches, dead channels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import require_tool
from kiln.compiler.codegen.ops.conv import LayerShape, candidates, dwconv2d_variant
from kiln.compiler.tune import Records
from reference import assert_equal_exact, run_reference
from test_ops_conv import Case, _build, dwconv_case
from test_ops_conv_simd import BOARD, DSP, _inputs, _kernels, _reference_model, layer_candidates
from test_ops_dwconv_blocked import dead_channel_dw_case
from tflite_builder import TensorSpec

KERNEL = "kiln_dwconv2d_3x3_px2_s8"


def _px2(options: list[dict], variant: str = "3x3_px2") -> list[dict]:
    return [k for k in options if k["variant"] == variant]


def px2_cases(seed: int) -> list:
    rng = np.random.default_rng(seed)
    cases = []
    for i, (cin, h, w, sh, padding, act, n) in enumerate([
            (4, 1, 1, 1, "SAME", "NONE", 1), (1, 1, 2, 1, "SAME", "RELU6", 1),
            (3, 2, 3, 1, "SAME", "NONE", 2), (5, 3, 3, 1, "VALID", "RELU", 1),
            (8, 25, 5, 1, "SAME", "RELU6", 1), (7, 6, 6, 1, "SAME", "NONE", 1),
            (13, 5, 8, 2, "SAME", "NONE", 1), (2, 9, 7, 3, "VALID", "RELU", 1),
            (12, 7, 9, 2, "VALID", "NONE", 2), (6, 3, 4, 1, "VALID", "NONE", 1),
            (16, 12, 12, 1, "SAME", "NONE", 1), (9, 4, 11, 1, "SAME", "RELU_N1_TO_1", 1),
            # Odd lines of 9 with SAME: the last pixel's third tap is padding, so at the
            # smallest tile (8) the one-pixel last tile joins the one before (short ring).
            (5, 3, 9, 1, "SAME", "RELU6", 1), (6, 9, 2, 1, "SAME", "NONE", 1)]):
        cases.append(dwconv_case(rng, 600 + i, kh=3, kw=3, dh=1, dw=1, mult=1, cin=cin, h=h,
                                 w=w, sh=sh, sw=1, padding=padding, act=act, n=n))
    cases += [
        dwconv_case(rng, 620, kh=3, kw=3, dh=1, dw=1, mult=1, cin=8, h=5, w=7, sh=1, sw=1,
                    padding="SAME", x_zp=-128, y_zp=127),
        dwconv_case(rng, 621, kh=3, kw=3, dh=1, dw=1, mult=1, cin=5, h=5, w=5, sh=1, sw=1,
                    padding="SAME", x_zp=127, y_zp=-128, bias=False),
        dead_channel_dw_case(np.random.default_rng(622)),
    ]
    # Output zero point -128 with RELU or no clamp: the assembly line loop (px2_line_relu,
    # without TFLite's rounding correction of negative values) over the assembly fill
    # (whole blocks of four channels) or the C one (a tail block): odd and even pair
    # counts, lines and maps of 1 to 7 pixels (an odd last pixel, short or not), SAME and
    # VALID, vertical stride 2.
    for i, (cin, h, w, act, padding, sh) in enumerate([
            (8, 6, 13, "RELU", "SAME", 1), (12, 5, 12, "NONE", "SAME", 1),
            (6, 4, 7, "RELU", "SAME", 1), (4, 3, 2, "NONE", "SAME", 1),
            (8, 7, 5, "RELU", "SAME", 1), (4, 1, 7, "NONE", "SAME", 1),
            (12, 6, 1, "RELU", "SAME", 1), (8, 2, 3, "NONE", "SAME", 1),
            (4, 7, 4, "RELU", "VALID", 1), (8, 5, 6, "NONE", "VALID", 2),
            (10, 3, 3, "RELU", "SAME", 1), (4, 4, 4, "NONE", "SAME", 2)]):
        cases.append(dwconv_case(rng, 630 + i, kh=3, kw=3, dh=1, dw=1, mult=1, cin=cin, h=h,
                                 w=w, sh=sh, sw=1, padding=padding, act=act, y_zp=-128,
                                 x_zp=int(rng.integers(-128, 128))))
    cases.append(extreme_shift_dw_case(rng))
    return cases


def extreme_shift_dw_case(rng: np.random.Generator) -> Case:
    """Per-channel effective scales at both ends the packed requantization takes (shift
    -2, just under 0.25, and -31, just over 2^-32) and between, output zero point -128 (the
    assembly loop: right_shift 1 and 30 as an ASR by a register's low byte)."""
    c = dwconv_case(rng, 650, kh=3, kw=3, dh=1, dw=1, mult=1, cin=8, h=5, w=7, sh=1, sw=1,
                    padding="SAME", act="NONE", per_channel=True, bias=True, y_zp=-128)
    x, w, b = c.inputs
    y_scale = c.output.scale
    effective = [0.24, 0.126, 2.0 ** -31.8, 2.0 ** -30.5, 2.0 ** -16.3, 0.2, 2.0 ** -9, 0.13]
    scales = [float(np.float32(e * y_scale / x.scale)) for e in effective]
    c.inputs[1] = TensorSpec(w.shape, "int8", scale=scales, zero_point=w.zero_point,
                             quantized_dimension=3, data=w.data)
    b_scales = [float(np.float32(x.scale) * np.float32(s)) for s in scales]
    c.inputs[2] = TensorSpec(b.shape, "int32", scale=b_scales, zero_point=[0] * len(scales),
                             data=b.data)
    c.label += " extreme shifts"
    return c


def _eligible(cases: list, variant: str = "3x3_px2") -> list:
    """The cases whose layer can take the kernel (the random scales of a few need the
    slow requantization, which no blocked kernel takes; px2v needs vertical stride 1)."""
    layers = layer_candidates(_build(cases))
    keep = [c for step, c in enumerate(cases) if _px2(layers[step][1], variant)]
    assert len(keep) >= len(cases) - 8, len(keep)
    return keep


def _compile(cases: list, smallest_tile: bool = False, variant: str = "3x3_px2",
             **kw) -> tuple[kc.Artifact, list, list]:
    """Every layer on the kernel: its default tile, or its smallest (the most tiles)."""
    model = _build(cases)
    records = Records(entries=[
        {"workload": key, "board": BOARD, "status": "ok",
         "knobs": min(_px2(options, variant), key=lambda k: k["tile"]) if smallest_tile
         else _px2(options, variant)[0], "cycles": {"median": 1, "min": 1, "max": 1}}
        for key, options in layer_candidates(model).values()])
    art = kc.compile(kc.load(model), board=BOARD, tuning_records=records, **kw)
    assert {k.replace("_banded", "") for k in _kernels(art)} == {f"kiln_dwconv2d_{variant}_s8"}
    xs = _inputs(cases, np.random.default_rng(40))
    return art, xs, run_reference(_reference_model(cases), xs)


def test_px2_is_a_candidate_with_its_scratch():
    kws = LayerShape(input=(1, 25, 5, 64), filter=(1, 3, 3, 64), output=(1, 25, 5, 64),
                     padding=(1, 1))
    odd = LayerShape(input=(1, 6, 6, 107), filter=(1, 3, 3, 107), output=(1, 6, 6, 107),
                     padding=(1, 1))
    s2 = LayerShape(input=(1, 12, 12, 32), filter=(1, 3, 3, 32), output=(1, 6, 6, 32),
                    stride=(2, 2))
    big = LayerShape(input=(1, 48, 48, 8), filter=(1, 3, 3, 8), output=(1, 48, 48, 8),
                     padding=(1, 1))
    # Tiles of 24 output columns first (VWW's arena), then the others, the whole row last.
    assert _px2(candidates("DEPTHWISE_CONV_2D", big, DSP)) == [
        {"variant": "3x3_px2", "tile": t} for t in (24, 8, 16, 48)]
    assert _px2(candidates("DEPTHWISE_CONV_2D", kws, DSP)) == [
        {"variant": "3x3_px2", "tile": 6}]
    assert _px2(candidates("DEPTHWISE_CONV_2D", odd, DSP)) == [
        {"variant": "3x3_px2", "tile": 6}]
    assert not _px2(candidates("DEPTHWISE_CONV_2D", s2, DSP))      # horizontal stride 2
    # The default where rows are more than 12 pixels, or C % 4 != 0 (no other 3x3 kernel);
    # on 12x12 maps the channel planes lead.
    wide = LayerShape(input=(1, 24, 24, 32), filter=(1, 3, 3, 32), output=(1, 24, 24, 32),
                      padding=(1, 1))
    assert candidates("DEPTHWISE_CONV_2D", wide, DSP)[0] == {"variant": "3x3_px2", "tile": 24}
    twelve = LayerShape(input=(1, 12, 12, 64), filter=(1, 3, 3, 64), output=(1, 12, 12, 64),
                        padding=(1, 1))
    assert candidates("DEPTHWISE_CONV_2D", twelve, DSP)[0] == {"variant": "3x3_planes"}
    assert {"variant": "3x3_px2", "tile": 12} in candidates("DEPTHWISE_CONV_2D", twelve, DSP)
    assert candidates("DEPTHWISE_CONV_2D", odd, DSP)[0]["variant"] == "3x3_px2"
    # Tall narrow maps (KWS's 25x5) lead with the vertical pairs.
    assert candidates("DEPTHWISE_CONV_2D", kws, DSP)[0] == {"variant": "3x3_px2v", "tile": 24}
    assert _px2(candidates("DEPTHWISE_CONV_2D", kws, DSP), "3x3_px2v") == [
        {"variant": "3x3_px2v", "tile": t} for t in (24, 8, 16, 26)]
    assert dwconv2d_variant(kws, DSP).scratch == 12 * 26
    # A ring of three rows of tile + 2 words: 5 rounded up to even + 2, or 24 + 2.
    assert dwconv2d_variant(kws, DSP, {"variant": "3x3_px2", "tile": 6}).scratch == 12 * 8
    assert dwconv2d_variant(big, DSP).scratch == 12 * 26


@pytest.mark.parametrize("variant", ["3x3_px2", "3x3_px2v"])
@pytest.mark.parametrize("smallest_tile", [False, True])
def test_px2_on_host(smallest_tile, variant):
    cases = _eligible(px2_cases(601), variant)
    art, xs, want = _compile(cases, smallest_tile, variant, optimize="speed")
    for c, g, w in zip(cases, art.run(*xs), want):
        assert_equal_exact(g, w, f"{c.label} {variant} smallest tile {smallest_tile}")


@pytest.mark.parametrize("smallest_tile", [False, True])
def test_px2v_banded_in_place_on_host(smallest_tile):
    """optimize="memory": px2v's banded twin over its own input, in one call where the
    output lies whole rows from the input (KWS's layers), else band by band."""
    cases = _eligible(px2_cases(603), "3x3_px2v")
    art, xs, want = _compile(cases, smallest_tile, "3x3_px2v", optimize="memory")
    banded = {o["kernel"] for o in art.report["overlaps"] if o["banded"]}
    assert banded == {"kiln_dwconv2d_3x3_px2v_s8"}, banded
    for c, g, w in zip(cases, art.run(*xs), want):
        assert_equal_exact(g, w, f"{c.label} banded, smallest tile {smallest_tile}")


@pytest.mark.slow
@pytest.mark.parametrize("smallest_tile", [False, True])
def test_px2_clean_under_sanitizers(tmp_path: Path, smallest_tile: bool):
    """Built with -fsanitize=address,undefined: no read outside the input, the filter, the
    quantization tables or the scratch, whatever C % 4, the padding and the tiles."""
    require_tool("cc")
    from test_ops_conv import run_sanitized
    cases = _eligible(px2_cases(611))
    art, xs, want = _compile(cases, smallest_tile, optimize="speed")
    got = run_sanitized(art, xs, tmp_path, len(cases))
    for c, g, w in zip(cases, got, want):
        assert_equal_exact(g, w.reshape(-1), f"{c.label} under sanitizers")


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("variant", ["3x3_px2", "3x3_px2v"])
def test_px2_on_qemu(tmp_path: Path, variant: str):
    """The SMLAD / PKH / SMMLAR path: one firmware of every case on mps2-an386, each layer in
    its smallest tiles (rows of 12 and 13 pixels in tiles of 8)."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    cases = _eligible(px2_cases(621), variant)
    art, xs, want = _compile(cases, smallest_tile=True, variant=variant)
    project = create_project(art, board=BOARD, out_dir=tmp_path / "fw")
    result = project.run(xs, timeout=120)
    for c, g, w in zip(cases, result.outputs, want):
        assert_equal_exact(g, w, f"{c.label} {variant} on QEMU")


# --- the lean entry points (kiln_dwconv2d_3x3_px2[v]_relu_s8) ------------------------------

def relu_px2_cases(seed: int) -> list:
    """Layers the _relu entry points take: output zero point -128 with RELU or no clamp,
    C a multiple of four; odd and even lines (the last pixel short or not), SAME and VALID,
    vertical strides 1 and 2, tiny maps."""
    rng = np.random.default_rng(seed)
    return [dwconv_case(rng, 700 + i, kh=3, kw=3, dh=1, dw=1, mult=1, cin=cin, h=h, w=w,
                        sh=sh, sw=1, padding=padding, act=act, y_zp=-128,
                        x_zp=int(rng.integers(-128, 128)))
            for i, (cin, h, w, act, padding, sh) in enumerate([
                (8, 6, 13, "RELU", "SAME", 1), (12, 5, 12, "NONE", "SAME", 1),
                (4, 9, 5, "RELU", "SAME", 1), (8, 1, 1, "NONE", "SAME", 1),
                (16, 7, 6, "RELU", "VALID", 1), (4, 8, 7, "NONE", "VALID", 2),
                (8, 25, 5, "RELU", "SAME", 1)])]


def _called(art: kc.Artifact) -> set[str]:
    return {op.get("called", op["kernel"]) for op in art.report["ops"]}


@pytest.mark.parametrize("variant", ["3x3_px2", "3x3_px2v"])
def test_relu_entry_when_every_px2_layer_qualifies(variant):
    """Every px2 layer a RELU at -128 over whole blocks of four channels: each calls the
    _relu entry point (no C line loop, last pixel or fill linked), bit-exact; one layer
    that is not (six channels) keeps them all on the general one."""
    cases = _eligible(relu_px2_cases(701), variant)
    assert len(cases) >= 5
    art, xs, want = _compile(cases, False, variant)
    assert _called(art) == {f"kiln_dwconv2d_{variant}_relu_s8"}
    assert f"kiln_dwconv2d_{variant}_s8(" not in art.files["model.c"]
    for c, g, w in zip(cases, art.run(*xs), want):
        assert_equal_exact(g, w, f"{c.label} {variant} relu entry")
    odd = dwconv_case(np.random.default_rng(9), 720, kh=3, kw=3, dh=1, dw=1, mult=1, cin=6,
                      h=5, w=6, sh=1, sw=1, padding="SAME", act="RELU", y_zp=-128)
    art, xs, want = _compile(cases + [odd], False, variant)
    assert _called(art) == {f"kiln_dwconv2d_{variant}_s8"}
    for c, g, w in zip(cases + [odd], art.run(*xs), want):
        assert_equal_exact(g, w, f"{c.label} {variant} general entry")


def test_relu_banded_entry_in_place_on_host():
    """optimize="memory": px2v's _relu banded twin over its own input, bit-exact."""
    cases = _eligible(relu_px2_cases(703), "3x3_px2v")
    art, xs, want = _compile(cases, True, "3x3_px2v", optimize="memory")
    assert "kiln_dwconv2d_3x3_px2v_relu_banded_s8" in _called(art)
    assert _called(art) <= {"kiln_dwconv2d_3x3_px2v_relu_s8",
                            "kiln_dwconv2d_3x3_px2v_relu_banded_s8"}
    for c, g, w in zip(cases, art.run(*xs), want):
        assert_equal_exact(g, w, f"{c.label} relu banded")


_RELU_ARGS_MAIN = r"""
#include <stdio.h>
#include "inplace.h"

int main(void)
{
    static int8_t x[3 * 3 * 8], y[3 * 3 * 8], filter[9 * 8];
    static int32_t bias[8], ring[64];
    static const int32_t mult[8] = {1 << 30, 1 << 30, 1 << 30, 1 << 30,
                                    1 << 30, 1 << 30, 1 << 30, 1 << 30};
    static const int8_t shift[8] = {-8, -8, -8, -8, -8, -8, -8, -8};
    const kiln_requant_packed_t q = {mult, shift, NULL};
    const kiln_context_t ctx = {ring, sizeof ring};
    const kiln_conv_params_t relu = {{1, 1}, {1, 1}, {1, 1}, 3, -128, {-128, 127}};
    kiln_conv_params_t zp0 = relu, relu6 = relu;
    zp0.output_offset = 0;
    relu6.activation.max = 100;
    const kiln_dwconv_params_t ok = {relu, 1}, bad_zp = {zp0, 1}, bad_clamp = {relu6, 1};
    const kiln_dims_t d8 = {1, 3, 3, 8}, f8 = {1, 3, 3, 8};
    const kiln_dims_t d6 = {1, 3, 3, 6}, f6 = {1, 3, 3, 6};
    const kiln_band_params_t band = {1, 0, 0, 0};
    int refused = 0, accepted = 0;
#define REFUSED(call) refused += (call) == KILN_ERR_ARG
#define ACCEPTED(call) accepted += (call) == KILN_OK
    REFUSED(kiln_dwconv2d_3x3_px2_relu_s8(&ctx, &bad_zp, &q, &d8, x, &f8, filter, bias, &d8, y));
    REFUSED(kiln_dwconv2d_3x3_px2_relu_s8(&ctx, &bad_clamp, &q, &d8, x, &f8, filter, bias, &d8,
                                          y));
    REFUSED(kiln_dwconv2d_3x3_px2v_relu_s8(&ctx, &ok, &q, &d6, x, &f6, filter, bias, &d6, y));
    REFUSED(kiln_dwconv2d_3x3_px2v_relu_banded_s8(&band, &ctx, &bad_zp, &q, &d8, x, &f8, filter,
                                                  bias, &d8, y));
    ACCEPTED(kiln_dwconv2d_3x3_px2_relu_s8(&ctx, &ok, &q, &d8, x, &f8, filter, bias, &d8, y));
    ACCEPTED(kiln_dwconv2d_3x3_px2v_relu_s8(&ctx, &ok, &q, &d8, x, &f8, filter, bias, &d8, y));
    ACCEPTED(kiln_dwconv2d_3x3_px2_s8(&ctx, &bad_zp, &q, &d6, x, &f6, filter, bias, &d6, y));
    printf("refused %d accepted %d\n", refused, accepted);
    return 0;
}
"""


def test_relu_entries_refuse_other_layers_in_c(tmp_path: Path):
    """The _relu entry points return KILN_ERR_ARG for a layer with another output zero
    point, a narrower clamp or C % 4 != 0 (the general ones take it)."""
    from conftest import run_sanitized_c
    from kiln.compiler.paths import crt_dir
    kernels = sorted(p.name for p in (crt_dir() / "kernels").glob("*.c"))    # the band helpers'
    out = run_sanitized_c(tmp_path, _RELU_ARGS_MAIN, kernels)
    assert "refused 4 accepted 3" in out, out


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("variant", ["3x3_px2", "3x3_px2v"])
def test_relu_entry_on_qemu(tmp_path: Path, variant: str):
    """The _relu entry points' assembly on mps2-an386, smallest tiles: bit-exact, and the
    firmware links none of the general path's C line loop, last pixel or fill, nor the C
    library's memcpy and memset (the start-up code's word loops, kiln_copy_bytes)."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    import subprocess
    from kiln.project_gen import create_project
    cases = _eligible(relu_px2_cases(721), variant)
    art, xs, want = _compile(cases, smallest_tile=True, variant=variant)
    project = create_project(art, board=BOARD, out_dir=tmp_path / "fw")
    result = project.run(xs, timeout=120)
    for c, g, w in zip(cases, result.outputs, want):
        assert_equal_exact(g, w, f"{c.label} {variant} relu entry on QEMU")
    nm = subprocess.run(["arm-none-eabi-nm", str(tmp_path / "fw" / "build" / "firmware.elf")],
                        capture_output=True, text=True, check=True).stdout
    # Function names without GCC's clone suffixes (px2_tile_relu.constprop.0).
    symbols = {line.split()[-1].split(".")[0] for line in nm.splitlines() if line.strip()}
    assert {"px2_tile_relu", "px2_line_relu", "px2_run_relu"} <= symbols
    assert not {"px2_tile", "px2_run", "px2_line_c", "px2_last", "px2_fill", "memcpy",
                "memset"} & symbols


def test_px2_biases_as_int16_where_every_channel_fits():
    """A pixel-pair layer whose biases all fit int16 stores them as int16 (quant.bias16,
    the bias argument NULL), the others as int32; both bit-exact (the cases' biases reach
    200,000)."""
    import re
    cases = _eligible(px2_cases(605), "3x3_px2v")
    art, xs, want = _compile(cases, False, "3x3_px2v")
    weights, model = art.files["weights.c"], art.files["model.c"]
    kinds = dict((int(n), k) for k, n in re.findall(r"const (int16_t|int32_t) l(\d+)_bias\[",
                                                    weights))
    assert set(kinds.values()) == {"int16_t", "int32_t"}, kinds
    for n, kind in kinds.items():
        wide = kind == "int32_t"
        assert (f"quant = {{l{n}_mult, l{n}_shift, NULL}};" in model) == wide
        assert (f"quant = {{l{n}_mult, l{n}_shift, l{n}_bias}};" in model) == (not wide)
    for c, g, w in zip(cases, art.run(*xs), want):
        assert_equal_exact(g, w, f"{c.label} int16/int32 biases")
