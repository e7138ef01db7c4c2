"""Layers writing over their input (issue 7): the planner's overlap rules, every banded
and in-place kernel variant, and whole models below the layer-by-layer bound.

ASan cannot see two buffers sharing arena bytes, so every overlapping build here is
checked against tflite-micro *and* against the no-overlap ("speed") build of the same
model. The per-op tests force each overlap at the tightest offset its rule allows
(`forced_build`), in both band orders, with and without the input copy.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from reference import assert_equal_exact, run_reference
from tflite_builder import OpSpec, TensorSpec, build_model, rand_int8
from test_ops_conv import Case, _build, _sanitizer_main, conv_case, dwconv_case

import kiln.compiler as kc
from kiln.compiler.codegen import apply_overlaps, arena_buffers, emit_sources, lower
from kiln.compiler.codegen.ops.inplace import (BANDED_KERNELS, band_rows, flat_banded_gemm,
                                               overlap_modes)
from kiln.compiler.compile import KILN_VERSION, target_for
from kiln.compiler.host_build import build_executable
from kiln.compiler.memory_plan import ALIGN, Buffer, Overlap, Plan, check, lower_bound, plan
from kiln.compiler.passes import optimize as optimize_graph
from kiln.compiler.paths import crt_dir

from conftest import model_path, require_tool


# --- the planner -------------------------------------------------------------------------

def test_overlap_rule_lets_a_chain_go_below_the_bound():
    a, b, c = Buffer("a", 800, 0, 1), Buffer("b", 800, 1, 2), Buffer("c", 800, 2, 3)
    rules = [Overlap("a", "b", ((None, -16), (16, None))), Overlap("b", "c", ((0, 0),))]
    p = plan([a, b, c], rules)
    assert lower_bound([a, b, c]) == 1600
    assert p.arena_bytes == 816
    assert abs(b.offset - a.offset) >= 16 and c.offset == b.offset
    assert {(o.input, o.output) for o, _ in p.shared()} == {("a", "b"), ("b", "c")}


def test_check_rejects_an_overlap_its_rule_does_not_allow():
    a, b = Buffer("a", 100, 0, 1, offset=0), Buffer("b", 100, 1, 2, offset=8)
    rule = Overlap("a", "b", ((None, -16), (16, None)), rule="test rule")
    with pytest.raises(AssertionError, match="does not allow"):
        check(Plan(buffers=[a, b], arena_bytes=200, overlaps=[rule]))
    b.offset = 16
    check(Plan(buffers=[a, b], arena_bytes=200, overlaps=[rule]))
    with pytest.raises(AssertionError, match="both alive"):
        check(Plan(buffers=[a, b], arena_bytes=200))


@pytest.mark.parametrize("seed", range(20))
def test_random_rules_give_valid_plans_no_larger_than_without(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    sizes = [int(rng.integers(1, 3000)) for _ in range(n)]
    chain = [Buffer(f"b{i}", s, max(i - 1, 0), i) for i, s in enumerate(sizes)]
    rules = []
    for i in range(1, n):
        if rng.random() < 0.6:
            lo, hi = int(rng.integers(-sizes[i], 1)), int(rng.integers(0, sizes[i - 1] + 1))
            rules.append(Overlap(f"b{i - 1}", f"b{i}", ((None, lo), (hi, None))))
    with_rules = plan([Buffer(b.name, b.size, b.first, b.last) for b in chain], rules)
    without = plan(chain)
    assert with_rules.arena_bytes <= without.arena_bytes
    assert all(b.offset % ALIGN == 0 for b in with_rules.buffers)


# --- band geometry: the Python twin and the C agree --------------------------------------

_GEOMETRIES = [  # rows, in_h, k_h, out_h, stride, pad_top, dilation
    (1, 25, 3, 25, 1, 1, 1), (2, 25, 3, 25, 1, 1, 1), (1, 96, 3, 48, 2, 0, 1),
    (4, 9, 5, 5, 2, 2, 1), (1, 7, 3, 7, 1, 2, 2), (3, 10, 1, 5, 2, 0, 1),
    (1, 3, 5, 3, 1, 2, 1), (2, 1, 3, 1, 1, 1, 1), (1, 12, 4, 4, 3, 1, 1), (5, 125, 1, 125, 1, 0, 1),
]

_BAND_MAIN = r"""
#include <stdio.h>
#include "inplace.h"

int main(void)
{
    static const int32_t g[][7] = {%s};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; ++i) {
        const kiln_band_params_t band = {.rows = g[i][0], .reverse = 0, .copy = 1, .flat = 0};
        kiln_conv_params_t p = {.stride = {g[i][4], 1}, .padding = {g[i][5], 0},
                                .dilation = {g[i][6], 1}};
        const int32_t n = kiln_band_count(&band, g[i][3]);
        for (int32_t b = 0; b < n; ++b) {
            kiln_band_t out;
            kiln_band_rows(&band, &p, g[i][1], g[i][2], g[i][3], b, &out);
            printf("%%d %%d %%d %%d %%d %%d\n", (int)i, (int)out.out_row, (int)out.out_rows,
                   (int)out.in_row, (int)out.in_rows, (int)out.pad_top);
        }
        const kiln_dims_t in = {1, g[i][1], 3, 2}, outd = {1, g[i][3], 3, 2};
        printf("copy %%d %%d\n", (int)i, (int)kiln_band_copy_bytes(&band, &p, &in, g[i][2], &outd));
    }
    return 0;
}
"""


def test_band_rows_twin_matches_c(tmp_path: Path):
    require_tool("cc")
    rows = ", ".join("{" + ", ".join(map(str, g)) + "}" for g in _GEOMETRIES)
    exe = build_executable({}, _BAND_MAIN % rows, tmp_path / "band", sanitize=True)
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    want = []
    for i, (rows_, in_h, k_h, out_h, stride, pad, dil) in enumerate(_GEOMETRIES):
        bands = band_rows(rows_, in_h, k_h, out_h, stride, pad, dil)
        want += [f"{i} {b.out_row} {b.out_rows} {b.in_row} {b.in_rows} {b.pad_top}" for b in bands]
        want.append(f"copy {i} {(max(b.in_rows for b in bands) * 6 + 7) // 8 * 8}")
    assert got[:-1] == want


# --- every overlap variant, forced at the tightest offset its rule allows ----------------

def _align_down(n: int) -> int:
    return n // ALIGN * ALIGN


def _align_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def forced_build(model: bytes, board: str, pick, flat_twins: bool = False,
                 knobs: dict[int, dict] | None = None) -> tuple[kc.Artifact, list[str]]:
    """Compile `model` (independent ops side by side) with each layer's overlap mode chosen
    by `pick(modes) -> (mode, reverse) | None`, its output placed at the tightest offset
    the mode allows (reverse None: at the mode's first single delta, `points`) and every
    pair in its own region of the arena. Returns the artifact and the variants the
    emitted code runs (kernel, order, copy, flat). `flat_twins`: codegen's
    flat_banded_gemm pass too (the flat-band twins where it applies); `knobs`: the
    layers' kernels forced (lower's layer_knobs)."""
    g = optimize_graph(kc.load(model))
    base = kc.compile(kc.load(model), board=board, optimize="speed")
    layers, consts = lower(g, target_for(board), knobs)
    choice = {}
    for step, e in enumerate(layers):
        picked = pick(overlap_modes(g, e.op, step, e.code))
        if picked is not None:
            choice[step] = picked
    bufs = arena_buffers(g, layers, {s: m.extra_scratch for s, (m, _) in choice.items()})
    by = {b.name: b for b in bufs}
    cursor, overlaps, modes = 0, [], {}
    for step, (m, reverse) in sorted(choice.items()):
        x = by[g.tensor(g.storage_root(m.input_id)).c_name]
        y = by[g.tensor(g.storage_root(layers[step].op.outputs[0])).c_name]
        delta = 0 if m.name == "exact" else m.points[0] if reverse is None else (
            _align_up(m.backward_min) if reverse else _align_down(m.forward_max))
        if not (-y.size < delta < x.size):
            continue                 # the rule allows no overlap that way round
        x.offset = cursor - min(0, delta)
        y.offset = x.offset + delta
        cursor = _align_up(max(x.offset + x.size, y.offset + y.size))
        overlaps.append(Overlap(x.name, y.name, m.allowed, layer=step))
        modes[step] = m
    for b in bufs:
        if b.offset < 0:
            b.offset = cursor
            cursor = _align_up(cursor + b.size)
    p = Plan(buffers=bufs, arena_bytes=cursor, overlaps=overlaps)
    check(p)
    emitted = apply_overlaps(g, layers, p, modes)
    if flat_twins:
        emitted = flat_banded_gemm(emitted)
    files = emit_sources(g, emitted, consts, p, KILN_VERSION)
    report = dict(base.report, arena_bytes=p.arena_bytes)
    files["kiln.json"] = json.dumps(report)
    variants = []
    for step, e in enumerate(emitted):
        band = re.search(r"\.reverse = (\d), \.copy = (\d), \.flat = (\d)", e.code.body)
        if band:
            kernel = re.search(r"return (kiln_\w+_banded_s8)\(", e.code.body)[1]
            variants.append(f"{kernel} reverse={band[1]} copy={band[2]} flat={band[3]}")
        elif step in modes:
            variants.append(f"{e.code.kernel} {modes[step].name}")
    return kc.Artifact(graph=g, board=board, files=files, plan=p, report=report), variants


def _conv_cases(seed: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    cases = [conv_case(rng, i, n=1) for i in range(14)]
    cases += [dwconv_case(rng, 100 + i, n=1, bias=True) for i in range(10)]
    cases += [  # 1x1 stride 1 (flat bands): channels equal, shrinking, growing; strided 1x1
        conv_case(rng, 200, n=1, kh=1, kw=1, sh=1, sw=1, groups=1, cin=8, cout=8, h=6, w=5),
        conv_case(rng, 201, n=1, kh=1, kw=1, sh=1, sw=1, groups=1, cin=12, cout=4, h=5, w=4),
        conv_case(rng, 202, n=1, kh=1, kw=1, sh=1, sw=1, groups=1, cin=4, cout=12, h=7, w=3),
        conv_case(rng, 203, n=1, kh=1, kw=1, sh=2, sw=2, groups=1, cin=5, cout=7, h=9, w=8),
        conv_case(rng, 204, n=1, kh=3, kw=3, sh=2, sw=2, dh=1, dw=1, padding="SAME", h=12, w=11),
        dwconv_case(rng, 205, n=1, bias=True, kh=3, kw=3, mult=1, cin=8, dh=1, dw=1, h=9, w=2,
                    sh=1, sw=1, padding="SAME"),   # the 3x3 SIMD variant (rows of two: not planes)
        dwconv_case(rng, 206, n=1, bias=True, kh=3, kw=3, mult=1, cin=12, dh=1, dw=1, h=10,
                    w=6, sh=2, sw=2, padding="SAME"),
    ]
    return cases


# The banded kernels each board's lowering picks for _conv_cases.
_KERNELS = {"host": ("kiln_conv2d_banded_s8", "kiln_conv2d_1x1_banded_s8",
                     "kiln_dwconv2d_banded_s8"),
            "mps2-an386": ("kiln_conv2d_gemm_p8_banded_s8", "kiln_dwconv2d_3x3_banded_s8")}


@pytest.mark.parametrize("board", ["host", "mps2-an386"])
@pytest.mark.parametrize("mode,reverse,largest", [("banded", False, False),
                                                  ("banded", True, False),
                                                  ("banded_copy", False, False),
                                                  ("banded_copy", True, True)])
def test_banded_variants_match_tflm_and_the_plain_build(board, mode, reverse, largest):
    cases = _conv_cases(seed=11)
    model = _build(cases)
    rng = np.random.default_rng(5)
    xs = [rand_int8(c.inputs[0].shape, rng, c.x_low, c.x_high) for c in cases]
    want = run_reference(model, xs)
    plain = kc.compile(kc.load(model), board=board, optimize="speed").run(*xs)

    def pick(modes):
        ms = [m for m in modes if m.name == mode]
        if not ms:
            return None
        return (max if largest else min)(ms, key=lambda m: m.rows), reverse

    art, variants = forced_build(model, board, pick)
    for kernel in _KERNELS[board]:      # every variant of this board ran this way
        assert f"{kernel} reverse={int(reverse)} copy={int(mode == 'banded_copy')}" in \
            {v[:-len(" flat=0")] for v in variants}, variants
    assert {v[-1] for v in variants} == {"0", "1"}, variants      # flat=0 and flat=1
    got = art.run(*xs)
    for c, g_, w, p in zip(cases, got, want, plain):
        assert_equal_exact(g_, w, f"{c.label} vs TFLM ({mode}, reverse={reverse}, {board})")
        assert_equal_exact(g_, p, f"{c.label} vs the no-overlap build")


def _flat_cases(seed: int) -> list[Case]:
    """1x1 stride-1 layers only (flat bands): channels equal, shrinking, growing; a pixel
    count no band size divides."""
    rng = np.random.default_rng(seed)
    return [conv_case(rng, 300, n=1, kh=1, kw=1, sh=1, sw=1, groups=1, cin=8, cout=8, h=6, w=5),
            conv_case(rng, 301, n=1, kh=1, kw=1, sh=1, sw=1, groups=1, cin=12, cout=4, h=5, w=4),
            conv_case(rng, 302, n=1, kh=1, kw=1, sh=1, sw=1, groups=1, cin=4, cout=12, h=7, w=3)]


@pytest.mark.parametrize("mode,reverse", [("banded", False), ("banded_copy", True)])
def test_flat_twin_matches_tflm(mode, reverse):
    """Where every row-geometry banded layer is a flat int8-pair gemm, codegen's
    flat_banded_gemm calls kiln_conv2d_gemm_p8_flat_banded_s8 (no bands_valid, no
    band_call): the same bands, copied or not, either order, TFLM's outputs; one
    row-banded layer keeps every layer on the general twin."""
    cases = _flat_cases(seed=13)
    model = _build(cases)
    rng = np.random.default_rng(6)
    xs = [rand_int8(c.inputs[0].shape, rng, c.x_low, c.x_high) for c in cases]

    def pick(modes):
        ms = [m for m in modes if m.name == mode]
        return (min(ms, key=lambda m: m.rows), reverse) if ms else None

    art, variants = forced_build(model, "mps2-an386", pick, flat_twins=True)
    # (An exactly-in-place layer, delta 0, runs forward whichever order was asked.)
    assert len(variants) == len(cases) and all(
        v.startswith("kiln_conv2d_gemm_p8_flat_banded_s8 ") and
        v.endswith(f"copy={int(mode == 'banded_copy')} flat=1") for v in variants), variants
    assert f"reverse={int(reverse)}" in " ".join(variants), variants
    for c, g_, w in zip(cases, art.run(*xs), run_reference(model, xs)):
        assert_equal_exact(g_, w, f"{c.label} vs TFLM ({mode}, reverse={reverse}, flat twin)")
    row = conv_case(np.random.default_rng(14), 303, n=1, kh=3, kw=3, sh=1, sw=1, groups=1,
                    cin=4, cout=4, h=6, w=5, padding="SAME")     # row bands
    _, variants = forced_build(_build(cases + [row]), "mps2-an386", pick, flat_twins=True)
    assert "flat=0" in variants[-1] and not any("flat_banded" in v for v in variants), \
        variants


@pytest.mark.slow
@pytest.mark.parametrize("board", ["host", "mps2-an386"])
def test_banded_variants_clean_under_sanitizers(board, tmp_path: Path):
    """Every band order, with and without the copy, layer by layer in turn, built with
    -fsanitize=address,undefined: no report and TFLM's outputs."""
    require_tool("cc")
    cases = _conv_cases(seed=12)
    model = _build(cases)
    kinds = [("banded", False), ("banded", True), ("banded_copy", False), ("banded_copy", True)]
    turn = iter(range(1000))

    def pick(modes):
        name, reverse = kinds[next(turn) % len(kinds)]
        ms = [m for m in modes if m.name == name]
        return (ms[0], reverse) if ms else None

    art, variants = forced_build(model, board, pick)
    assert len(variants) >= len(cases) // 2, variants
    n_in = len(art.report["inputs"])
    sources = {k: v for k, v in art.files.items() if k != "kiln.json"}
    exe = build_executable(sources, _sanitizer_main(n_in, len(cases)), tmp_path / "b",
                           sanitize=True)
    rng = np.random.default_rng(8)
    xs = [rand_int8(c.inputs[0].shape, rng, c.x_low, c.x_high) for c in cases]
    args = [str(exe)]
    for i, x in enumerate(xs):
        (tmp_path / f"in{i}.bin").write_bytes(x.tobytes())
        args.append(str(tmp_path / f"in{i}.bin"))
    args += [str(tmp_path / f"out{j}.bin") for j in range(len(cases))]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "runtime error" not in proc.stderr, proc.stderr[-3000:]
    for j, (c, want) in enumerate(zip(cases, run_reference(model, xs))):
        got = np.frombuffer((tmp_path / f"out{j}.bin").read_bytes(), dtype=np.int8)
        assert_equal_exact(got, want.reshape(-1), c.label + " banded, under sanitizers")


def test_exact_in_place_elementwise_and_activations():
    rng = np.random.default_rng(9)
    tensors, ops, inputs, outputs = [], [], [], []
    shapes = [(1, 6, 5, 8), (1, 17), (2, 3, 4, 5)]
    for i, op in enumerate(["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "ADD"]):
        shape = shapes[i % len(shapes)]
        s, z = float(np.float32(0.05 + 0.01 * i)), int(rng.integers(-100, 100))
        same = op in ("MAXIMUM", "MINIMUM")
        a = TensorSpec(shape, scale=s, zero_point=z)
        b = TensorSpec(shape, scale=s if same else 0.07, zero_point=z if same else 3)
        y = TensorSpec(shape, scale=s if same else 0.11, zero_point=z if same else -7)
        base = len(tensors)
        tensors += [a, b, y]
        opts = {"fused_activation_function": "RELU"} if op in ("ADD", "SUB", "MUL") else {}
        ops.append(OpSpec(op, [base, base + 1], [base + 2], opts))
        inputs += [base, base + 1]
        outputs.append(base + 2)
    for op in ("LOGISTIC", "TANH", "RELU"):
        x = TensorSpec((1, 4, 4, 8), scale=0.03, zero_point=5)
        y = (TensorSpec((1, 4, 4, 8), scale=1 / 256, zero_point=-128) if op == "LOGISTIC" else
             TensorSpec((1, 4, 4, 8), scale=1 / 128, zero_point=0) if op == "TANH" else
             TensorSpec((1, 4, 4, 8), scale=0.02, zero_point=-128))
        tensors += [x, y]
        ops.append(OpSpec(op, [len(tensors) - 2], [len(tensors) - 1], {}))
        inputs.append(len(tensors) - 2)
        outputs.append(len(tensors) - 1)
    model = build_model(ops, tensors, inputs, outputs)
    xs = [rand_int8(tensors[i].shape, rng) for i in inputs]
    want = run_reference(model, xs)
    plain = kc.compile(kc.load(model), optimize="speed").run(*xs)
    # Alternate which input the output sits on.
    turn = iter(range(100))
    art, variants = forced_build(
        model, "host", lambda modes: (modes[next(turn) % len(modes)], False) if modes else None)
    assert len(variants) == len(ops), variants
    assert {"kiln_lut_s8 exact", "kiln_mul_s8 exact"} <= set(variants), variants
    for i, (g_, w, p) in enumerate(zip(art.run(*xs), want, plain)):
        assert_equal_exact(g_, w, f"op {i} {ops[i].op} in place vs TFLM")
        assert_equal_exact(g_, p, f"op {i} {ops[i].op} in place vs the no-overlap build")


# --- whole models ------------------------------------------------------------------------

# Peak arena (scratch included), host board, per optimize mode; the layer-by-layer bound.
TARGETS = {"kws_ref_model": 9_000, "vww_96_int8": 38_000, "pretrainedResnet_quant": 36_000}
SPEED_ARENA = {"kws_ref_model": 16_000, "vww_96_int8": 55_296, "pretrainedResnet_quant": 49_296,
               "ad01_int8": 768}


def _input_bytes_reused(art) -> bool:
    """From kiln.json's memory plan: another buffer lies on a model input's bytes."""
    plan = art.report["memory_plan"]
    names = {art.graph.tensor(art.graph.storage_root(t)).c_name for t in art.graph.inputs}
    inputs = [b for b in plan if b["buffer"] in names]
    assert len(inputs) == len(names)
    return any(a is not b and b["size"] > 0 and a["offset"] < b["offset"] + b["size"]
               and b["offset"] < a["offset"] + a["size"] for a in inputs for b in plan)


@pytest.mark.parametrize("name", list(SPEED_ARENA))
def test_models_below_the_bound_and_identical_to_tflm(name):
    path = model_path(name)
    g = kc.load(path)
    speed = kc.compile(g, optimize="speed")
    assert speed.report["arena_bytes"] == SPEED_ARENA[name]      # the plan before overlaps
    assert speed.report["overlaps"] == []
    assert (f"#define KILN_INPUTS_OVERWRITTEN {int(_input_bytes_reused(speed))}"
            in speed.files["model.h"])
    rng = np.random.default_rng(21)
    xs = [rng.integers(-128, 128, size=i["shape"]).astype(np.int8) for i in speed.report["inputs"]]
    want = run_reference(path.read_bytes(), xs)
    plain = speed.run(*xs)
    for opt in ("balanced", "memory"):
        art = kc.compile(g, optimize=opt)
        r = art.report
        assert r["arena_bytes"] <= TARGETS.get(name, SPEED_ARENA[name]), (opt, r["arena_bytes"])
        assert r["arena_bound_without_overlaps_bytes"] >= r["arena_bytes"]
        assert 0 <= r["peak_layer"] < len(r["ops"])
        names = {art.graph.tensor(art.graph.storage_root(t)).c_name for t in art.graph.inputs}
        overwritten = (any(o["input"] in names for o in r["overlaps"])
                       or _input_bytes_reused(art))
        assert f"#define KILN_INPUTS_OVERWRITTEN {int(overwritten)}" in art.files["model.h"]
        for o in r["ops"]:          # a banded layer reports the twin it calls (kiln profile)
            if "called" in o:
                assert o["called"] == BANDED_KERNELS[o["kernel"]]
                assert f"return {o['called']}(" in art.files["model.c"]
        for got, w, p in zip(art.run(*xs), want, plain):
            assert_equal_exact(got, w, f"{name} {opt} vs TFLM")
            assert_equal_exact(got, p, f"{name} {opt} vs the no-overlap build")
    if name in TARGETS:      # balanced takes only the overlaps that lower the peak
        balanced = kc.compile(g, optimize="balanced")
        memory = kc.compile(g, optimize="memory")
        assert balanced.report["arena_bytes"] == memory.report["arena_bytes"]
        assert len(balanced.report["overlaps"]) <= len(memory.report["overlaps"])


@pytest.mark.slow
def test_memory_build_runs_clean_under_sanitizers(tmp_path: Path):
    require_tool("cc")
    from test_models_host import _SANITIZER_MAIN

    path = model_path("kws_ref_model")
    art = kc.compile(kc.load(path), optimize="memory")
    assert art.report["overlaps"]
    sources = {k: v for k, v in art.files.items() if k != "kiln.json"}
    exe = build_executable(sources, _SANITIZER_MAIN, tmp_path / "build", sanitize=True)
    x = np.random.default_rng(4).integers(-128, 128, size=art.report["inputs"][0]["shape"])
    (tmp_path / "in.bin").write_bytes(x.astype(np.int8).tobytes())
    proc = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "runtime error" not in proc.stderr, proc.stderr[-3000:]
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.int8)
    want = run_reference(path.read_bytes(), [x.astype(np.int8)])[0].reshape(-1)
    assert_equal_exact(got, want, "KWS memory build under sanitizers")


def test_cli_reports_peak_and_draws_the_plot(tmp_path: Path, capsys):
    from kiln.compiler.cli import main

    path = str(model_path("kws_ref_model"))
    assert main(["compile", path, "-o", str(tmp_path / "out"), "--optimize", "memory"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"peak arena 8,\d{3} B at layer \d+ \(\w+\), optimize=memory; "
                     r"bound without overlaps 16,0\d\d B", out), out
    report = json.loads((tmp_path / "out" / "kiln.json").read_text())
    assert report["optimize"] == "memory" and report["overlaps"]
    svg = tmp_path / "kws.svg"
    assert main(["info", path, "--memory-plot", str(svg)]) == 0
    text = svg.read_text()
    assert text.startswith("<svg") and text.count("<rect") > 10 and "bound 16,000 B" in text
    assert main(["info", path, "--memory-plot", str(tmp_path / "kws.png")]) == 2


@pytest.mark.cross
@pytest.mark.parametrize("cpu", ["cortex-m4", "cortex-m0plus", "cortex-m3"])
def test_banded_kernels_cross_compile(cpu: str, tmp_path: Path):
    gcc = shutil.which("arm-none-eabi-gcc")
    if gcc is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    fpu = ["-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"] if cpu == "cortex-m4" else ["-mfloat-abi=soft"]
    src = crt_dir() / "kernels" / "conv_inplace.c"
    subprocess.run([gcc, f"-mcpu={cpu}", "-mthumb", *fpu, "-std=c99", "-O2", "-Wall", "-Wextra",
                    "-Werror", "-c", str(src), "-o", str(tmp_path / "conv_inplace.o")],
                   check=True, capture_output=True, text=True)


@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("name", ["kws_ref_model", "vww_96_int8"])
def test_balanced_build_within_5_percent_of_speed_on_qemu(name, tmp_path: Path):
    """The overlaps balanced mode takes cost at most 5% more instructions on QEMU
    mps2-an386 (Cortex-M4, SIMD kernels) than the speed build, with the same outputs.
    Both builds run the same kernel variants (the balanced build's, pinned as tuning
    records): `--optimize speed` would otherwise also widen filters to int16 pairs
    (codegen/fit.py widen_for_speed), which is not what this measures."""
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.compiler.tune.records import Records
    from kiln.project_gen import create_project

    g = kc.load(model_path(name))
    balanced = kc.compile(g, board="mps2-an386", optimize="balanced")
    pinned = Records(entries=[
        {"board": "mps2-an386", "status": "ok", "workload": op["workload"], "knobs": op["knobs"],
         "cycles": {"min": 1, "median": 1, "max": 1}, "unit": "instructions"}
        for op in balanced.report["ops"] if "workload" in op and op.get("knobs")])
    results = {}
    for opt in ("speed", "balanced"):
        art = kc.compile(g, board="mps2-an386", optimize=opt, tuning_records=pinned)
        x = np.random.default_rng(0).integers(-128, 128, size=art.report["inputs"][0]["shape"])
        p = create_project(art, board="mps2-an386", out_dir=tmp_path / opt, mode="standalone")
        p.build()
        r = p.run(x.astype(np.int8))
        results[opt] = (r.instructions, r.outputs, art.report["arena_bytes"])
    (speed, speed_out, speed_arena), (bal, bal_out, bal_arena) = results["speed"], results["balanced"]
    assert bal_arena <= TARGETS[name] < speed_arena
    assert bal <= 1.05 * speed, (bal, speed)
    for a, b in zip(bal_out, speed_out):
        assert_equal_exact(np.asarray(a), np.asarray(b), f"{name} balanced vs speed on QEMU")
