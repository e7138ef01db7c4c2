"""The int8 channel/row-pair kernels (kiln_conv2d_gemm_p8_s8, kiln_fully_connected_rows8_p8_s8).

Their filter words hold two channels at once: each 16-bit half is w_c + 256 * w_d, so one
SMLAD on the raw word adds sum x * w_c + 256 * sum x * w_d and one on its SXTB16 adds
sum x * w_c; channel d comes back from the difference (crt/kernels/conv_dsp.h). That is
exact only while 128 * sum |w_d| < 2^23 and the stored high byte w_d - [w_c < 0] fits int8
(conv.py pairs8_ok); other filters keep the int16 kernels. These tests pin the packing,
the eligibility rule at its edges, and bit-exactness with TFLM where the recovered sums
are largest (the plain C path here; tests/test_ops_conv_simd.py runs the SMLAD path on
QEMU for every candidate).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import kiln.compiler as kc
from kiln.compiler.codegen.ops.conv import _pair8_words, pack_fc_filter_p8, pairs8_ok
from test_ops_conv import conv_case, fc_case, run_cases

BOARD = "mps2-an386"


def _halves(word: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w = word.astype(np.int64)
    lo, hi = w & 0xFFFF, (w >> 16) & 0xFFFF
    return (lo - ((lo & 0x8000) << 1), hi - ((hi & 0x8000) << 1))


def _sxtb16(word: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w = word.astype(np.int64)
    b0, b2 = w & 0xFF, (w >> 16) & 0xFF
    return (b0 - ((b0 & 0x80) << 1), b2 - ((b2 & 0x80) << 1))


def test_pair_words_hold_both_channels():
    rng = np.random.default_rng(3)
    rows = rng.integers(-127, 128, size=(7, 13))
    rows[0, :4] = -128                                      # -128 as w_c packs too
    words = _pair8_words(rows)                              # (4, 4, 2): pairs, groups, A/B
    padded = np.zeros((8, 16), dtype=np.int64)
    padded[:7, :13] = rows
    for p in range(4):
        c, d = padded[2 * p].reshape(4, 4), padded[2 * p + 1].reshape(4, 4)
        for part, (k0, k1) in enumerate(((0, 2), (1, 3))):      # A = (k0, k2), B = (k1, k3)
            lo, hi = _halves(words[p, :, part])
            assert (lo == c[:, k0] + 256 * d[:, k0]).all() and \
                (hi == c[:, k1] + 256 * d[:, k1]).all()
            e0, e1 = _sxtb16(words[p, :, part])
            assert (e0 == c[:, k0]).all() and (e1 == c[:, k1]).all()


def test_fc_pack_blocks_whole_eight_rows_then_pairs():
    w = np.arange(13 * 4, dtype=np.int64).reshape(13, 4) % 100 - 50
    flat = pack_fc_filter_p8(w).view(np.uint32)
    words = _pair8_words(w)                                 # 7 pairs, 1 group
    # Block of four pairs: per group [A][B] of each pair; then pairs 4, 5, 6 alone.
    assert list(flat[:8]) == list(words[:4, 0].reshape(-1))
    assert list(flat[8:]) == list(words[4:].reshape(-1))


def test_pairs8_ok_edges():
    assert pairs8_ok(np.array([[-1, 5], [-127, 3]]))
    assert not pairs8_ok(np.array([[-1, 5], [-128, 3]]))        # -128 - 1 overflows int8
    assert pairs8_ok(np.array([[1, 5], [-128, 3]]))             # after a non-negative w_c
    assert pairs8_ok(np.array([[-128, 5], [3, 3]]))             # -128 as w_c is fine
    assert pairs8_ok(np.array([[0] * 4]))                       # a lone row pairs a zero one
    big = np.full((2, 516), 127)                                # 128 * 127 * 516 = 2^23 - 128
    assert pairs8_ok(big)
    bigger = np.full((2, 517), 127)
    assert not pairs8_ok(bigger)                                # 128 * 127 * 517 >= 2^23
    assert pairs8_ok(np.vstack([np.full(517, 127), np.zeros(517, np.int64)]))  # w_c's sum: free
    assert not pairs8_ok(np.array([[200, 1], [1, 1]]))


def _kernels(art: kc.Artifact) -> list[str]:
    return [op["kernel"] for op in art.report["ops"]]


def test_largest_recovered_sums_and_ineligible_filters_match_tflm():
    """Odd channels at the bound (every weight +-127 over K = 516: |sum| up to
    128 * 127 * 516 = 2^23 - 2^14), an output scale that keeps those sums unsaturated,
    inputs at both ends; next to them a filter with -128 after a negative weight and one
    just over the bound, which take the int16 kernel. All bit-exact with TFLM."""
    rng = np.random.default_rng(8)
    cases = []
    for i, (k, sign, fill) in enumerate(((516, 1, 127), (516, -1, 127), (517, 1, 127))):
        c = conv_case(rng, i, n=1, kh=1, kw=1, sh=1, sw=1, dh=1, dw=1, padding="VALID",
                      h=3, w=2, cin=k, cout=5, groups=1, per_channel=False, bias=True,
                      act="NONE", x_zp=0, y_zp=0)
        x, wt, b = c.inputs
        data = np.full(wt.shape, fill * sign, dtype=np.int8)
        data[0::2] = rng.integers(-127, 128, size=data[0::2].shape)    # even: any values
        wt = replace(wt, data=data)
        # |acc| up to 2^23: an output scale that maps it to about +-100.
        y = replace(c.output, scale=float(x.scale) * float(wt.scale) * (1 << 23) / 100)
        cases.append(replace(c, inputs=[x, wt, b], output=y, x_low=-128, x_high=-128)
                     if i == 1 else replace(c, inputs=[x, wt, b], output=y))
    c = conv_case(rng, 3, cin=6, cout=4, groups=1, per_channel=True)
    x, wt, b = c.inputs
    data = wt.data.copy()
    data[0].flat[0], data[1].flat[0] = -5, -128
    cases.append(replace(c, inputs=[x, replace(wt, data=data), b]))
    f = fc_case(rng, 4, depth=516, units=6, batches=2, per_channel=False, w_zp=0, bias=True,
                act="NONE", x_zp=0, y_zp=0)
    x, wt, b = f.inputs
    data = np.where(np.arange(6)[:, None] % 2 == 1, -127, wt.data).astype(np.int8)
    y = replace(f.output, scale=float(x.scale) * float(wt.scale) * (1 << 23) / 100)
    cases.append(replace(f, inputs=[x, replace(wt, data=data), b], output=y, x_low=127))
    art = run_cases(cases, seed=21, board=BOARD)
    assert _kernels(art) == ["kiln_conv2d_gemm_p8_s8", "kiln_conv2d_gemm_p8_s8",
                             "kiln_conv2d_gemm_s8", "kiln_conv2d_gemm_s8",
                             "kiln_fully_connected_rows8_p8_pt_s8"]     # per-tensor


def test_full_range_entry_unless_a_layer_clamps():
    """When no int8-pair gemm layer clamps its output (every activation the full int8
    range), each calls kiln_conv2d_gemm_p8_full_s8, which links no clamping pixel loop;
    one RELU6 layer keeps them all on kiln_conv2d_gemm_p8_s8 (one kernel linked, not two).
    Both models bit-exact with TFLM."""
    rng = np.random.default_rng(12)
    full = [conv_case(rng, i, n=1, kh=kh, kw=3, cin=8, cout=cout, groups=1, act="NONE")
            for i, (kh, cout) in enumerate(((3, 12), (1, 7)))]
    clamp = conv_case(rng, 2, n=1, kh=3, kw=3, cin=8, cout=6, groups=1, act="RELU6", y_zp=0)
    art = run_cases(full, seed=3, board=BOARD)
    assert _kernels(art) == ["kiln_conv2d_gemm_p8_s8"] * 2
    full_entries = {"kiln_conv2d_gemm_p8_full_s8", "kiln_conv2d_gemm_p8_full_banded_s8",
                    "kiln_conv2d_gemm_p8_full_flat_banded_s8"}
    assert all(op["called"] in full_entries for op in art.report["ops"])
    assert art.files["model.c"].count("return kiln_conv2d_gemm_p8_full_") == 2
    art = run_cases(full + [clamp], seed=3, board=BOARD)
    assert _kernels(art) == ["kiln_conv2d_gemm_p8_s8"] * 3
    assert all(op.get("called", op["kernel"]) in ("kiln_conv2d_gemm_p8_s8",
                                                  "kiln_conv2d_gemm_p8_banded_s8")
               for op in art.report["ops"])
    assert "_full_" not in art.files["model.c"]


def test_p8_weights_take_int8_bytes_and_five_per_channel():
    """The packed filter is as many bytes as the model's int8 one (whole words per kernel
    row, an even channel count) and the requantization 5 bytes a channel."""
    rng = np.random.default_rng(5)
    c = conv_case(rng, 0, n=1, kh=3, kw=3, cin=8, cout=16, groups=1, per_channel=True)
    art = run_cases([c], seed=2, board=BOARD)
    assert _kernels(art) == ["kiln_conv2d_gemm_p8_s8"]
    # filter 16 * 9 * 8 + bias 16 * 4 + multiplier 16 * 4 + shift 16
    assert art.report["weights_bytes"] == 16 * 72 + 64 + 64 + 16


def test_speed_builds_take_int16_filters_where_the_flash_has_room():
    """--optimize speed moves layers on the int8-pair default to the int16 twin, largest
    first, while the weights stay within the board's budget; the default build keeps int8."""
    from conftest import model_path
    from kiln.compiler.compile import weights_budget
    g = kc.load(model_path("ad01_int8"))
    default = kc.compile(g, BOARD)
    assert default.report["speed_widen"] == []
    assert {op.get("knobs", {}).get("weights") for op in default.report["ops"]} == {"p8"}
    roomy = kc.compile(g, BOARD, optimize="speed")
    assert len(roomy.report["speed_widen"]) == len(roomy.report["ops"])     # all ten FCs
    assert {op["kernel"] for op in roomy.report["ops"]} == {"kiln_fully_connected_rows6_pt_s8"}
    added = sum(m["added_bytes"] for m in roomy.report["speed_widen"])
    # per-layer figures, while codegen stores a constant equal to an earlier layer's once
    # (lowering.LowerCtx.same_consts): ad01's default build shares three 128-byte arrays
    # that its int16 twin does not
    extra = roomy.report["weights_bytes"] - (default.report["weights_bytes"] + added)
    assert 0 <= extra <= 1024, extra
    # A budget with room for some int16 layers only (as a smaller flash would leave).
    from kiln.compiler.codegen.fit import widen_for_speed
    from kiln.compiler.compile import target_for
    from kiln.compiler.tune.workloads import layer_shapes
    target = target_for(BOARD)
    graph = default.graph
    weights = default.report["weights_bytes"]
    knobs, moves = widen_for_speed(graph, target, layer_shapes(graph, target), {}, weights,
                                   weights + 40_000)
    sizes = [m["added_bytes"] for m in moves]
    assert moves and len(moves) < len(default.report["ops"]) and sum(sizes) <= 40_000
    assert all(knobs[m["layer"]] == m["to"] for m in moves)
    # Largest first; a layer left out would not have fitted with the ones taken before it.
    skipped = [m for m in roomy.report["speed_widen"] if m["layer"] not in knobs]
    assert all(m["added_bytes"] > 40_000 - sum(sizes) for m in skipped)
    tuned = {m["layer"]: m["from"] for m in moves}         # tuned layers are never widened
    assert widen_for_speed(graph, target, layer_shapes(graph, target), tuned, weights,
                           None)[1] == [m for m in roomy.report["speed_widen"]
                                        if m["layer"] not in tuned]
