"""Data-movement ops against tflite-micro (TFLite's reference kernels where TFLM lacks the
op or the parameter), bit for bit; plus the compile-time views and maps."""

from __future__ import annotations

import numpy as np
import pytest

from kiln.compiler import compile as kiln_compile
from kiln.compiler import load
from kiln.compiler.codegen.ops.data_movement import (nearest_map, pad_dims,
                                                     strided_slice_view, tile_view,
                                                     transpose_view)
from kiln.compiler.errors import ModelError
from test_ops_pool import (ARM_TARGETS, OpCase, check_cases, check_sanitized, compile_single,
                           cross_compile)
from tflite_builder import OpSpec, TensorSpec, build_model, const

Q = (0.05, -3)


def act(shape, dtype="int8", q=Q) -> TensorSpec:
    if dtype != "int8":
        return TensorSpec(tuple(shape), dtype)
    return TensorSpec(tuple(shape), scale=q[0], zero_point=q[1])


def rand_shape(rng, rank, lo=1, hi=6):
    return tuple(int(v) for v in rng.integers(lo, hi + 1, rank))


# --------------------------------------------------------------------------- views (numpy)


def test_views_match_numpy():
    rng = np.random.default_rng(0)
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    v = transpose_view(x.shape, [3, 1, 0, 2])
    np.testing.assert_array_equal(v.gather(x), x.transpose(3, 1, 0, 2))
    np.testing.assert_array_equal(v.simplified().gather(x).reshape(-1),
                                  x.transpose(3, 1, 0, 2).reshape(-1))
    v = tile_view(x.shape, [2, 1, 3, 1])
    np.testing.assert_array_equal(v.simplified().gather(x).reshape(-1),
                                  np.tile(x, (2, 1, 3, 1)).reshape(-1))
    for _ in range(200):
        shape = rand_shape(rng, 3, 1, 7)
        y = rng.integers(0, 100, shape)
        begin = [int(b) for b in rng.integers(-8, 8, 3)]
        end = [int(e) for e in rng.integers(-8, 8, 3)]
        strides = [int(s) for s in rng.choice([-3, -2, -1, 1, 2, 3], 3)]
        bm, em = int(rng.integers(0, 8)), int(rng.integers(0, 8))
        view, out_shape = strided_slice_view(shape, begin, end, strides, bm, em)
        sl = tuple(slice(None if (bm >> i) & 1 else begin[i], None if (em >> i) & 1 else end[i],
                         strides[i]) for i in range(3))
        want = y[sl]
        assert list(want.shape) == out_shape
        if want.size:
            np.testing.assert_array_equal(view.simplified().gather(y).reshape(want.shape), want)


def test_strided_slice_spec_expansion():
    shape = (2, 3, 4, 5)
    # x[..., 1:3] with a new axis in front: ellipsis covers 3 dims.
    view, out = strided_slice_view(shape, [0, 0, 1], [0, 0, 3], [1, 1, 1],
                                   ellipsis_mask=0b010, new_axis_mask=0b001)
    assert out == [1, 2, 3, 4, 2]
    # x[1] on a short spec: shrink, the rest implicit.
    view, out = strided_slice_view(shape, [1], [2], [1], shrink_axis_mask=1)
    assert out == [3, 4, 5] and view.offset == 60


def test_pad_dims_fold_unpadded_inner_dims():
    assert pad_dims((1, 5, 5, 8), [[0, 0], [1, 1], [2, 0], [0, 0]]) == ([5, 40], [1, 16], [1, 0])
    assert pad_dims((3, 4), [[0, 0], [0, 0]]) == ([12], [0], [0])


def test_nearest_map_known_values():
    assert nearest_map(4, 8, False, False).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert nearest_map(3, 5, True, False).tolist() == [0, 1, 1, 2, 2]   # 0.5 rounds up
    assert nearest_map(4, 2, False, True).tolist() == [1, 3]


# --------------------------------------------------------------------------- TRANSPOSE


def transpose_cases(rng, ranks, per_rank=5) -> list[OpCase]:
    cases = []
    for rank in ranks:
        for _ in range(per_rank if rank > 1 else 1):
            shape = rand_shape(rng, rank, 1, 5 if rank < 5 else 3)
            perm = [int(p) for p in rng.permutation(rank)]
            cases.append(OpCase(f"TRANSPOSE {shape} {perm}", "TRANSPOSE",
                                [act(shape), const(perm)], [act([shape[p] for p in perm])]))
    return cases


def test_transpose():
    cases = transpose_cases(np.random.default_rng(1), (1, 2, 3, 4, 5))
    cases.append(OpCase("TRANSPOSE NHWC->NCHW", "TRANSPOSE",
                        [act((1, 7, 9, 16)), const([0, 3, 1, 2])], [act((1, 16, 7, 9))]))
    check_cases(cases, seed=1)


def test_transpose_6d_against_tflite_ref():
    """TFLM's TRANSPOSE stops at 5-D."""
    check_cases(transpose_cases(np.random.default_rng(2), (6,)), seed=1, engine="tflite_ref")


def test_transpose_int32():
    cases = [OpCase("TRANSPOSE int32", "TRANSPOSE",
                    [act((3, 4, 5), "int32"), const([2, 0, 1])], [act((5, 3, 4), "int32")]),
             OpCase("TRANSPOSE int16", "TRANSPOSE",
                    [act((3, 4, 5), "int16"), const([1, 2, 0])], [act((4, 5, 3), "int16")])]
    check_cases(cases, seed=2, engine="tflite_ref")


# --------------------------------------------------------------------------- STRIDED_SLICE


def slice_case(shape, begin, end, strides, **masks) -> OpCase:
    _, out = strided_slice_view(shape, begin, end, strides, **masks)
    return OpCase(f"STRIDED_SLICE {shape} {begin}:{end}:{strides} {masks}", "STRIDED_SLICE",
                  [act(shape), const(begin), const(end), const(strides)], [act(out)], masks)


def test_strided_slice_random():
    rng = np.random.default_rng(3)
    cases = []
    while len(cases) < 60:
        rank = int(rng.integers(1, 5))
        shape = rand_shape(rng, rank, 1, 8)
        begin = [int(b) for b in rng.integers(-9, 9, rank)]
        end = [int(e) for e in rng.integers(-9, 9, rank)]
        strides = [int(s) for s in rng.choice([-3, -2, -1, 1, 1, 2, 3], rank)]
        masks = {"begin_mask": int(rng.integers(0, 1 << rank)),
                 "end_mask": int(rng.integers(0, 1 << rank))}
        if rng.random() < 0.3:
            masks["shrink_axis_mask"] = int(rng.integers(0, 1 << rank))
            for i in range(rank):   # shrink: a valid index, positive stride
                if (masks["shrink_axis_mask"] >> i) & 1:
                    strides[i] = 1
                    begin[i] = int(rng.integers(-shape[i], shape[i]))
        view, out = strided_slice_view(shape, begin, end, strides, **masks)
        if 0 in out or 0 in view.shape:
            continue
        cases.append(slice_case(shape, begin, end, strides, **masks))
    check_cases(cases, seed=3)


def test_strided_slice_tflite_only_features():
    """Ellipsis, new axes, short specs and 5-D inputs: TFLM ignores or refuses them,
    TFLite's reference kernel implements them."""
    cases = [
        slice_case((2, 3, 4, 5), [0, 1], [0, 3], [1, 1], ellipsis_mask=1),
        slice_case((2, 3, 4, 5), [0, 0, 1], [0, 0, 3], [1, 1, 1],
                   ellipsis_mask=0b010, new_axis_mask=0b001),
        slice_case((2, 3, 4, 5), [1, 0], [2, 0], [1, 1], shrink_axis_mask=1, ellipsis_mask=2),
        slice_case((2, 3, 4, 5), [1], [2], [1], shrink_axis_mask=1),
        slice_case((2, 3, 4, 5, 3), [0, 1, 3, 4, 2], [2, 3, 0, 0, 0], [1, 1, -1, -2, -1]),
        slice_case((3, 4), [0, 0, 0], [0, 0, 0], [1, 1, 1], new_axis_mask=0b100,
                   begin_mask=0b011, end_mask=0b011),
        slice_case((4, 6, 5), [1, 2, 0], [2, 3, 5], [1, 1, 1], offset=True),
        slice_case((4, 6, 5), [-3, 1, 4], [2, 4, -3], [1, 2, -1], offset=True),
    ]
    check_cases(cases, seed=4, engine="tflite_ref")


# --------------------------------------------------------------------------- TILE


def test_tile_against_tflite_ref():
    rng = np.random.default_rng(5)
    cases = []
    for rank in (1, 2, 3, 4, 4, 5):
        shape = rand_shape(rng, rank, 1, 4)
        mult = [int(m) for m in rng.integers(1, 4, rank)]
        cases.append(OpCase(f"TILE {shape} x {mult}", "TILE", [act(shape), const(mult)],
                            [act([s * m for s, m in zip(shape, mult)])]))
    check_cases(cases, seed=5, engine="tflite_ref")
    # Separate model: int32 TILE has another op version than int8 TILE.
    check_cases([OpCase("TILE int32", "TILE", [act((2, 3), "int32"), const([3, 2])],
                        [act((6, 6), "int32")])], seed=5, engine="tflite_ref")


# --------------------------------------------------------------------------- CONCAT / PACK


def test_concatenation():
    rng = np.random.default_rng(6)
    cases = []
    for _ in range(25):
        rank = int(rng.integers(1, 5))
        base = rand_shape(rng, rank, 1, 5)
        axis = int(rng.integers(-rank, rank))
        a = axis % rank
        n = int(rng.integers(1, 5))
        shapes = [tuple(int(rng.integers(1, 4)) if d == a else e for d, e in enumerate(base))
                  for _ in range(n)]
        out = tuple(sum(s[a] for s in shapes) if d == a else e for d, e in enumerate(base))
        ins = [act(s) for s in shapes]
        if rng.random() < 0.3:   # a constant input
            ins[0] = TensorSpec(shapes[0], scale=Q[0], zero_point=Q[1],
                                data=rng.integers(-128, 128, shapes[0]).astype(np.int8))
        cases.append(OpCase(f"CONCATENATION {shapes} axis {axis}", "CONCATENATION", ins,
                            [act(out)], {"axis": axis}))
    check_cases(cases, seed=6)


def test_pack_unpack():
    rng = np.random.default_rng(7)
    cases = []
    for _ in range(15):
        rank = int(rng.integers(1, 4))
        shape = rand_shape(rng, rank, 1, 5)
        n = int(rng.integers(1, 5))
        axis = int(rng.integers(-(rank + 1), rank + 1))
        a = axis % (rank + 1)
        out = shape[:a] + (n,) + shape[a:]
        cases.append(OpCase(f"PACK {n}x{shape} axis {axis}", "PACK", [act(shape)] * 1 +
                            [act(shape) for _ in range(n - 1)], [act(out)],
                            {"values_count": n, "axis": axis}))
        axis = int(rng.integers(-rank, rank))
        a = axis % rank
        cases.append(OpCase(f"UNPACK {shape} axis {axis}", "UNPACK", [act(shape)],
                            [act(shape[:a] + shape[a + 1:]) for _ in range(shape[a])],
                            {"num": shape[a], "axis": axis}))
    check_cases(cases, seed=7)


def test_split_and_split_v():
    rng = np.random.default_rng(8)
    cases = []
    for _ in range(15):
        rank = int(rng.integers(1, 5))
        n = int(rng.integers(1, 4))
        shape = list(rand_shape(rng, rank, 1, 5))
        axis = int(rng.integers(-rank, rank))
        a = axis % rank
        shape[a] *= n
        part = shape[:a] + [shape[a] // n] + shape[a + 1:]
        cases.append(OpCase(f"SPLIT {shape} axis {axis} n {n}", "SPLIT",
                            [const([axis]), act(shape)], [act(part) for _ in range(n)],
                            {"num_splits": n}))
        sizes = [int(s) for s in rng.integers(1, 4, n)]
        shape[a] = sum(sizes)
        spec = list(sizes)
        if n > 1 and rng.random() < 0.5:
            spec[int(rng.integers(0, n))] = -1   # one size inferred
        cases.append(OpCase(f"SPLIT_V {shape} {spec} axis {axis}", "SPLIT_V",
                            [act(shape), const(spec), const([axis])],
                            [act(shape[:a] + [s] + shape[a + 1:]) for s in sizes],
                            {"num_splits": n}))
    check_cases(cases, seed=8)


def test_concat_rejects_requantization():
    a, b = act((1, 2, 2, 3)), act((1, 2, 2, 3), q=(0.1, 0))
    with pytest.raises(ModelError, match="TFLite requires data-movement ops to keep it"):
        compile_single("CONCATENATION", [a, b], [act((1, 2, 2, 6))], {"axis": 3})


# --------------------------------------------------------------------------- PAD


def test_pad_and_padv2():
    rng = np.random.default_rng(9)
    cases = []
    for i in range(30):
        rank = int(rng.integers(1, 5))
        shape = rand_shape(rng, rank, 1, 5)
        pads = [[int(v) for v in rng.integers(0, 3, 2)] for _ in range(rank)]
        if rng.random() < 0.3:
            pads = [[0, 0]] + pads[1:]
        out = [e + b + a for e, (b, a) in zip(shape, pads)]
        zp = int(rng.choice([-128, 127, 0, -3]))
        q = (0.05, zp)
        if i % 2:
            cases.append(OpCase(f"PAD {shape} {pads} zp {zp}", "PAD",
                                [act(shape, q=q), const(pads)], [act(out, q=q)]))
        else:
            value = TensorSpec((1,), scale=q[0], zero_point=zp,
                               data=np.array([int(rng.integers(-128, 128))], np.int8))
            cases.append(OpCase(f"PADV2 {shape} {pads} zp {zp}", "PADV2",
                                [act(shape, q=q), const(pads), value], [act(out, q=q)]))
    cases.append(OpCase("PAD image style", "PAD",
                        [act((1, 5, 7, 16)), const([[0, 0], [1, 2], [2, 1], [0, 0]])],
                        [act((1, 8, 10, 16))]))
    check_cases(cases, seed=9)


def test_pad_rank5_and_int32_against_tflite_ref():
    cases = [OpCase("PAD 5-D", "PAD", [act((2, 2, 3, 2, 2)),
                                       const([[1, 0], [0, 1], [1, 1], [0, 0], [2, 1]])],
                    [act((3, 3, 5, 2, 5))]),
             OpCase("PAD int32", "PAD", [act((3, 4), "int32"), const([[1, 1], [0, 2]])],
                    [act((5, 6), "int32")])]
    check_cases(cases, seed=10, engine="tflite_ref")


# --------------------------------------------------------------------------- RESIZE_NEAREST


def test_resize_nearest_neighbor():
    rng = np.random.default_rng(11)
    cases = []
    for ac, hp in ((False, False), (True, False), (False, True)):
        for _ in range(8):
            n, h, w, c = 1 + int(rng.integers(0, 2)), *rand_shape(rng, 2, 1, 7), \
                int(rng.choice([1, 3, 8]))
            oh, ow = rand_shape(rng, 2, 1, 15)
            cases.append(OpCase(f"RESIZE {h}x{w}->{oh}x{ow} ac {ac} hp {hp}",
                                "RESIZE_NEAREST_NEIGHBOR", [act((n, h, w, c)), const([oh, ow])],
                                [act((n, oh, ow, c))],
                                {"align_corners": ac, "half_pixel_centers": hp}))
    check_cases(cases, seed=11)


# --------------------------------------------------------------------------- SPACE/BATCH


def s2b_case(shape, block, pads, zp=-3) -> OpCase:
    spatial = len(block)
    sizes = [shape[1 + i] + pads[i][0] + pads[i][1] for i in range(spatial)]
    out = [shape[0] * int(np.prod(block))] + [s // b for s, b in zip(sizes, block)] + [shape[-1]]
    q = (0.05, zp)
    return OpCase(f"SPACE_TO_BATCH_ND {shape} {block} {pads}", "SPACE_TO_BATCH_ND",
                  [act(shape, q=q), const(block), const(pads)], [act(out, q=q)])


def b2s_case(shape, block, crops) -> OpCase:
    spatial = len(block)
    out = [shape[0] // int(np.prod(block))] + [shape[1 + i] * block[i] - crops[i][0] - crops[i][1]
                                               for i in range(spatial)] + [shape[-1]]
    return OpCase(f"BATCH_TO_SPACE_ND {shape} {block} {crops}", "BATCH_TO_SPACE_ND",
                  [act(shape), const(block), const(crops)], [act(out)])


def test_space_to_batch_and_back():
    cases = [
        s2b_case((1, 4, 4, 3), [2, 2], [[0, 0], [0, 0]]),
        s2b_case((2, 6, 3, 2), [2, 3], [[0, 0], [0, 0]], zp=100),
        s2b_case((2, 4, 4), [2], [[0, 0]]),                             # 3-D
        b2s_case((4, 2, 2, 3), [2, 2], [[0, 0], [0, 0]]),
        b2s_case((12, 3, 2, 2), [2, 3], [[1, 0], [2, 1]]),
        b2s_case((9, 4, 4, 8), [3, 3], [[3, 3], [3, 3]]),
        b2s_case((4, 3, 2), [2], [[1, 2]]),
    ]
    check_cases(cases, seed=12)


def test_space_to_batch_padding_against_tflite_ref():
    """Padded positions hold the output zero point, as in TFLite. tflite-micro never sets
    the pad value it uses (SpaceToBatchParams.output_offset stays uninitialised: zeros or
    stale arena bytes), so padded cases are compared with TFLite's reference kernel."""
    cases = [
        s2b_case((2, 5, 3, 2), [2, 3], [[1, 0], [2, 1]], zp=100),
        s2b_case((1, 6, 6, 8), [3, 3], [[3, 3], [3, 3]], zp=-128),     # dilated-conv padding
        s2b_case((2, 5, 4), [2], [[1, 2]]),                             # 3-D
        s2b_case((1, 3, 3, 1), [2, 2], [[1, 0], [0, 1]], zp=127),
    ]
    check_cases(cases, seed=12, engine="tflite_ref")


def test_dilated_conv_pattern_roundtrip():
    """S2B → B2S with matching paddings/crops is the identity (the dilated conv frame)."""
    x, mid, y = act((1, 7, 7, 4)), act((9, 3, 3, 4)), act((1, 7, 7, 4))
    tensors = [x, const([3, 3]), const([[1, 1], [1, 1]]), mid, const([3, 3]),
               const([[1, 1], [1, 1]]), y]
    ops = [OpSpec("SPACE_TO_BATCH_ND", [0, 1, 2], [3]), OpSpec("BATCH_TO_SPACE_ND", [3, 4, 5], [6])]
    art = kiln_compile(load(build_model(ops, tensors, [0], [6])), board="host")
    data = np.random.default_rng(13).integers(-128, 128, (1, 7, 7, 4)).astype(np.int8)
    np.testing.assert_array_equal(art.run(data)[0], data)


def test_data_movement_clean_under_sanitizers(tmp_path):
    rng = np.random.default_rng(41)
    cases = transpose_cases(rng, (1, 3, 6), 2) + [
        slice_case((2, 3, 4, 5), [0, 1], [0, 3], [1, 1], ellipsis_mask=1),
        slice_case((5, 6), [4, -1], [-9, 0], [-2, -1]),
        OpCase("TILE", "TILE", [act((2, 3)), const([3, 2])], [act((6, 6))]),
        OpCase("CONCATENATION", "CONCATENATION", [act((2, 3)), act((2, 1))], [act((2, 4))],
               {"axis": 1}),
        OpCase("SPLIT_V", "SPLIT_V", [act((2, 5)), const([2, 3]), const([1])],
               [act((2, 2)), act((2, 3))], {"num_splits": 2}),
        OpCase("PAD", "PAD", [act((1, 3, 3, 2)), const([[0, 0], [1, 2], [2, 1], [0, 1]])],
               [act((1, 6, 6, 3))]),
        OpCase("PAD int32", "PAD", [act((3, 4), "int32"), const([[1, 1], [0, 2]])],
               [act((5, 6), "int32")]),
        OpCase("RESIZE", "RESIZE_NEAREST_NEIGHBOR", [act((1, 3, 5, 2)), const([7, 2])],
               [act((1, 7, 2, 2))], {"half_pixel_centers": True}),
        s2b_case((2, 5, 3, 2), [2, 3], [[1, 0], [2, 1]]),
        b2s_case((12, 3, 2, 2), [2, 3], [[1, 0], [2, 1]]),
    ]
    check_sanitized(cases, tmp_path)


@pytest.mark.cross
@pytest.mark.parametrize("target", sorted(ARM_TARGETS))
def test_data_movement_cross_compiles(target):
    cross_compile(["data_movement.c"], ARM_TARGETS[target])
