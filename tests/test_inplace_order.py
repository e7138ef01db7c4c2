"""Depthwise layers written over their input in the kernel's own order (ops/inplace.py,
in_order_delta): the rule against an emulation of the orders, then the kernels
(kiln_dwconv2d_3x3_w8_s8 in one-row bands, kiln_dwconv2d_3x3_px2_s8 as it is) run at
the rule's delta on QEMU and under ASan/UBSan on the host, bit-exact with tflite-micro
and with the no-overlap build."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from reference import assert_equal_exact, run_reference
from test_memory_overlap import forced_build
from test_ops_conv import _build, dwconv_case, run_sanitized
from test_ops_conv_simd import layer_candidates
from tflite_builder import rand_int8

import kiln.compiler as kc
from kiln.compiler.codegen import choose_overlaps, lower
from kiln.compiler.codegen.ops.inplace import (Band, band_rows, in_order_delta, order_px2,
                                               order_w8)
from kiln.compiler.compile import target_for
from kiln.compiler.memory_plan import ALIGN, Buffer, Overlap, _orders, _point_orders
from kiln.compiler.passes import optimize as optimize_graph

from conftest import model_path, require_tool


# --- the rule against an emulation ---------------------------------------------------------

def _emulate(calls, in_hw, out_hw, stride, pad, c, delta, channel_major, rng):
    """Run the calls' orders on one memory holding the input, the output `delta` bytes
    from it (3x3 taps, positive weights, input values below 100, outputs from 1000 on:
    an overwritten input read later always changes a sum). Returns (got, want)."""
    (in_h, in_w), (out_h, out_w) = in_hw, out_hw
    x = rng.integers(0, 100, size=in_h * in_w * c)
    wts = rng.integers(1, 5, size=(9, c))
    base = max(0, -delta)
    mem = np.zeros(base + max(x.size, delta + out_h * out_w * c) + 8, dtype=np.int64)
    mem[base:base + x.size] = x
    steps = [(b, oy, ox) for b, order in calls for oy, ox in order]

    def out(src, b, oy, ox, ch):
        s = 0
        for ky in range(3):
            iy = oy * stride[0] - b.pad_top + ky
            for kx in range(3):
                ix = ox * stride[1] - pad[1] + kx
                if 0 <= iy < b.in_rows and 0 <= ix < in_w:
                    s += wts[3 * ky + kx, ch] * src[((b.in_row + iy) * in_w + ix) * c + ch]
        return 1000 + s % 1000003      # bounded: outputs read as inputs do not overflow

    want = np.array([[out(x, b, oy, ox, ch) for ch in range(c)] for b, oy, ox in steps])
    jobs = ([(ch, i) for ch in range(c) for i in range(len(steps))] if channel_major
            else [(ch, i) for i in range(len(steps)) for ch in range(c)])
    for ch, i in jobs:
        b, oy, ox = steps[i]
        q = (b.out_row + oy) * out_w + ox
        mem[base + delta + q * c + ch] = out(mem[base:], b, oy, ox, ch)
    got = np.array([[mem[base + delta + ((b.out_row + oy) * out_w + ox) * c + ch]
                     for ch in range(c)] for b, oy, ox in steps])
    return got, want


def _geometries():
    rng = np.random.default_rng(3)
    out = [(16, 16, 2, "SAME"), (11, 11, 2, "SAME"), (9, 10, 1, "SAME"), (8, 9, 1, "VALID"),
           (7, 6, 2, "VALID"), (10, 7, (2, 1), "SAME"), (5, 13, 1, "SAME")]
    out += [(int(rng.integers(3, 14)), int(rng.integers(3, 14)),
             [1, 2, (2, 1), (1, 2)][int(rng.integers(0, 4))], ["SAME", "VALID"][i % 2])
            for i in range(8)]
    return out


def _shape(h, w, stride, padding):
    sh, sw = stride if isinstance(stride, tuple) else (stride, stride)
    if padding == "SAME":
        oh, ow = -(-h // sh), -(-w // sw)
        pad = (max((oh - 1) * sh + 3 - h, 0) // 2, max((ow - 1) * sw + 3 - w, 0) // 2)
    else:
        oh, ow, pad = (h - 3) // sh + 1, (w - 3) // sw + 1, (0, 0)
    return (oh, ow), (sh, sw), pad


@pytest.mark.parametrize("geometry", _geometries())
@pytest.mark.parametrize("kind", ["raster", "w8", "w8_bands", "px2_tiles"])
def test_rule_is_exact_for_the_emulated_orders(geometry, kind):
    """At the rule's delta every interleaving of the channels gives the true outputs; at
    each closer (aligned) delta, one a channel order is wrong: the rule is tight."""
    h, w, stride, padding = geometry
    (oh, ow), s, pad = _shape(h, w, stride, padding)
    c = 3 if kind == "px2_tiles" else 4
    whole = Band(0, oh, 0, h, pad[0])
    if kind == "raster":
        calls = [(whole, [(y, x) for y in range(oh) for x in range(ow)])]
    elif kind == "w8":
        calls = [(whole, order_w8(oh, ow, h, w, s, pad))]
    elif kind == "w8_bands":
        calls = [(b, order_w8(b.out_rows, ow, b.in_rows, w, s, (b.pad_top, pad[1])))
                 for b in band_rows(1, h, 3, oh, s[0], pad[0], 1)]
    else:           # the ring of a four-pixel tile
        calls = [(whole, order_px2(oh, ow, w, pad[1], 12 * 6))]
    delta = in_order_delta(calls, (h, w), (oh, ow), (3, 3), s, pad, (1, 1), c)
    rng = np.random.default_rng(oh * 100 + ow)
    if delta is not None:
        assert delta <= 0 and delta % c == 0 and delta % ALIGN == 0
        for channel_major in (True, False):
            got, want = _emulate(calls, (h, w), (oh, ow), s, pad, c, delta, channel_major, rng)
            np.testing.assert_array_equal(got, want)
    last = oh * ow * c if delta is None else -delta
    closer = [d for d in range(-last + 1, 1) if d % c == 0 and d % ALIGN == 0]
    for d in sorted(set(closer[:1] + closer[-1:])):     # the next one, and 0
        got, want = _emulate(calls, (h, w), (oh, ow), s, pad, c, d, True, rng)
        assert not np.array_equal(got, want), (kind, geometry, d)


def test_the_rule_says_what_the_layers_need():
    """Stride 2 (pad 0 or 1 before) in raster order: delta 0, so VWW's layer 3 fits in its
    input; stride 1 with padding 1 refused at 0 (its closest: a line and a pixel before);
    stride 1 unpadded: 0; edge pixels after the interior (w8 in one call) refused at 0,
    the same kernel in one-row bands allowed."""
    def raster(oh, ow):
        return [(y, x) for y in range(oh) for x in range(ow)]

    def delta(h, w, stride, padding, order, c=16):
        (oh, ow), s, pad = _shape(h, w, stride, padding)
        whole = Band(0, oh, 0, h, pad[0])
        return in_order_delta([(whole, order(oh, ow, h, w, s, pad))], (h, w), (oh, ow),
                              (3, 3), s, pad, (1, 1), c)

    r = lambda oh, ow, *_: raster(oh, ow)               # noqa: E731
    assert delta(48, 48, 2, "SAME", r) == 0             # pad 0 top/left
    assert delta(47, 47, 2, "SAME", r) == 0             # pad 1
    assert delta(24, 24, 1, "VALID", r) == 0
    assert delta(48, 48, 1, "SAME", r, c=8) == -(48 + 1) * 8
    assert delta(48, 48, 2, "SAME", order_w8) != 0
    (oh, ow), s, pad = _shape(48, 48, 2, "SAME")
    calls = [(b, order_w8(b.out_rows, ow, b.in_rows, 48, s, (b.pad_top, pad[1])))
             for b in band_rows(1, 48, 3, oh, 2, pad[0], 1)]
    assert in_order_delta(calls, (48, 48), (oh, ow), (3, 3), s, pad, (1, 1), 16) == 0


# --- the kernels at the rule's delta ------------------------------------------------------

def _cases():
    rng = np.random.default_rng(21)
    spec = [  # cin, h, w, (sh, sw), padding; w8 needs C % 4 == 0, px2 stride 1 along x
        (16, 12, 12, (2, 2), "SAME"), (8, 11, 11, (2, 2), "SAME"), (12, 9, 8, (2, 2), "VALID"),
        (6, 9, 10, (1, 1), "SAME"), (5, 8, 9, (1, 1), "VALID"), (12, 10, 8, (2, 1), "SAME"),
        (3, 7, 14, (1, 1), "VALID")]
    return [dwconv_case(rng, 1000 + i, n=1, kh=3, kw=3, dh=1, dw=1, mult=1, cin=cin, h=h,
                        w=w, sh=sh, sw=sw, padding=padding, bias=True)
            for i, (cin, h, w, (sh, sw), padding) in enumerate(spec)]


def _knobs(model: bytes) -> dict[int, dict]:
    """Per layer: w8 where the layer takes it (C % 4 == 0, stride 2), else px2 (its
    smallest tile on the last layer: tiles, out of raster order)."""
    out = {}
    layers = layer_candidates(model)
    for step, (_, options) in layers.items():
        w8 = [k for k in options if k["variant"] == "3x3_w8"]
        px2 = sorted((k for k in options if k["variant"] == "3x3_px2"), key=lambda k: k["tile"])
        pick = px2[0] if step == max(layers) and px2 else (w8 or px2)[0]
        out[step] = pick
    return out


def _pick(modes):
    """One-row bands at their single delta where they have one, else the kernel as it is
    at the delta its order allows."""
    pointed = [m for m in modes if m.name == "banded" and m.points]
    if pointed:
        return min(pointed, key=lambda m: m.rows), None
    ordered = [m for m in modes if m.name == "ordered"]
    return (ordered[0], False) if ordered else None


def _in_order_build(cases):
    model = _build(cases)
    rng = np.random.default_rng(5)
    xs = [rand_int8(c.inputs[0].shape, rng, c.x_low, c.x_high) for c in cases]
    art, variants = forced_build(model, "mps2-an386", _pick, knobs=_knobs(model))
    return model, xs, art, variants


def test_kernels_in_order_match_tflm_and_the_plain_build():
    """Every layer at the delta its kernel's order allows (w8 in one-row bands at delta 0
    where the bands pass, px2 and w8 as they are), the M4's sources in their plain-C
    forms: TFLM's outputs, and the no-overlap build's."""
    cases = _cases()
    model, xs, art, variants = _in_order_build(cases)
    assert "kiln_dwconv2d_3x3_w8_banded_s8 reverse=0 copy=0 flat=0" in variants, variants
    assert {"kiln_dwconv2d_3x3_px2_s8 ordered", "kiln_dwconv2d_3x3_w8_s8 ordered"} <= set(
        variants), variants
    shared = {o.layer: d for o, d in art.plan.shared()}
    assert 0 in shared.values() and len(shared) == len(cases), (shared, variants)
    plain = kc.compile(kc.load(model), board="mps2-an386", optimize="speed").run(*xs)
    for c, got, want, p in zip(cases, art.run(*xs), run_reference(model, xs), plain):
        assert_equal_exact(got, want, f"{c.label} vs TFLM (in order)")
        assert_equal_exact(got, p, f"{c.label} vs the no-overlap build")


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_kernels_in_order_on_qemu(tmp_path: Path):
    """The same build as one firmware on mps2-an386 (the DSP paths): TFLM's outputs."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project
    cases = _cases()
    model, xs, art, _ = _in_order_build(cases)
    result = create_project(art, board="mps2-an386", out_dir=tmp_path / "fw").run(xs, timeout=120)
    for c, got, want in zip(cases, result.outputs, run_reference(model, xs)):
        assert_equal_exact(got, want, f"{c.label} in order on QEMU")


@pytest.mark.slow
def test_kernels_in_order_clean_under_sanitizers(tmp_path: Path):
    """The same build on the host with -fsanitize=address,undefined: no report, TFLM's
    outputs."""
    require_tool("cc")
    cases = _cases()
    model, xs, art, _ = _in_order_build(cases)
    _run_sanitized(art, model, cases, xs, tmp_path)


def _run_sanitized(art, model, cases, xs, tmp: Path):
    got = run_sanitized(art, xs, tmp, len(cases), timeout=300)
    for c, g, want in zip(cases, got, run_reference(model, xs)):
        assert_equal_exact(g, want.reshape(-1), c.label + " in order, under sanitizers")


# --- the planner ----------------------------------------------------------------------------

def test_point_orders_place_an_output_right_after_its_input():
    a, b, c, d = (Buffer("a", 800, 0, 1), Buffer("b", 200, 1, 2), Buffer("c", 400, 2, 3),
                  Buffer("d", 100, 0, 3))
    rules = [Overlap("a", "b", ((0, 0),)), Overlap("c", "d", ((None, -8), (8, None)))]
    orders = _point_orders(_orders([a, b, c, d]), rules)
    assert set(orders) == {f"{n}+points" for n in _orders([a, b, c, d])}
    for order in orders.values():
        names = [x.name for x in order]
        assert names.index("b") == names.index("a") + 1 and sorted(names) == list("abcd")
    assert _point_orders(_orders([a, b, c, d]), rules[1:]) == {}     # no single delta


def test_vww_layer_3_writes_exactly_over_its_input():
    """VWW on the M4: layer 3 (48x48x16 stride 2) at delta 0, below the arena of its band
    rule alone (37,264 B): on s2ring (its default) as it is, on w8 in one-row bands;
    --optimize memory no larger."""
    g = optimize_graph(kc.load(model_path("vww_96_int8").read_bytes()))
    layers, _ = lower(g, target_for("mps2-an386"))
    assert layers[3].code.kernel == "kiln_dwconv2d_3x3_s2ring_s8"
    plan, choice = choose_overlaps(g, layers, "balanced")
    shared = {o.layer: d for o, d in plan.shared()}
    assert shared.get(3) == 0 and choice[3].name == "ordered", shared
    assert plan.arena_bytes < 37264
    assert choose_overlaps(g, layers, "memory")[0].arena_bytes <= plan.arena_bytes
    layers, _ = lower(g, target_for("mps2-an386"), {3: {"variant": "3x3_w8"}})
    plan, choice = choose_overlaps(g, layers, "balanced")
    shared = {o.layer: d for o, d in plan.shared()}
    assert shared.get(3) == 0 and choice[3].name == "banded" and choice[3].rows == 1, shared
    assert plan.arena_bytes < 37264
    assert choose_overlaps(g, layers, "memory")[0].arena_bytes <= plan.arena_bytes
