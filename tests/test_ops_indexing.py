"""Indexing ops (ARG_MAX, ARG_MIN, GATHER, SLICE, DEPTH_TO_SPACE, SPACE_TO_DEPTH,
MIRROR_PAD) against tflite-micro, bit for bit; TFLite's reference kernels where TFLM
refuses the parameters (int64 ARG_* outputs and axes, int64 GATHER indices)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kiln.compiler import compile as kiln_compile
from kiln.compiler import load
from kiln.compiler.codegen.ops.indexing import (depth_to_space_view, mirror_pad_maps,
                                                slice_view, space_to_depth_view)
from kiln.compiler.errors import KilnError, ModelError
from reference import assert_equal_exact, run_reference, run_tflite_ref
from test_ops_data_movement import act, rand_shape
from test_ops_pool import (ARM_TARGETS, OpCase, batch_model, check_cases, check_sanitized,
                           compile_single, cross_compile)
from tflite_builder import TensorSpec, const, rand_int

# --------------------------------------------------------------------------- views (numpy)


def test_views_and_maps_match_numpy():
    x = np.arange(2 * 3 * 4 * 18).reshape(2, 3, 4, 18)
    d2s = x.reshape(2, 3, 4, 3, 3, 2).transpose(0, 1, 3, 2, 4, 5).reshape(2, 9, 12, 2)
    np.testing.assert_array_equal(depth_to_space_view(x.shape, 3).gather(x).reshape(d2s.shape),
                                  d2s)
    np.testing.assert_array_equal(space_to_depth_view(d2s.shape, 3).gather(d2s).reshape(x.shape),
                                  x)
    view, out = slice_view(x.shape, [1, 0, 2, 3], [-1, 2, 2, -1])
    np.testing.assert_array_equal(view.gather(x), x[1:, 0:2, 2:4, 3:])
    y = np.arange(3 * 4 * 5).reshape(3, 4, 5)
    for mode in ("reflect", "symmetric"):
        pads = [[2, 1], [0, 0], [0, 0]] if mode == "reflect" else [[3, 3], [1, 0], [0, 0]]
        extents, maps, run = mirror_pad_maps(y.shape, pads, mode == "reflect")
        assert run == (20 if mode == "reflect" else 5) and len(maps) == len(extents)
        want = np.pad(y, pads, mode=mode).reshape(-1)
        idx = sum(np.ix_(*maps)).reshape(-1, 1) + np.arange(run)
        np.testing.assert_array_equal(y.reshape(-1)[idx.reshape(-1)], want)


# --------------------------------------------------------------------------- ARG_MAX / ARG_MIN


def arg_case(op, shape, axis, out_dtype="int32", axis_dtype="int32") -> OpCase:
    a = axis % len(shape)
    out = TensorSpec(tuple(e for d, e in enumerate(shape) if d != a), out_dtype)
    return OpCase(f"{op} {shape} axis {axis} -> {out_dtype}", op,
                  [act(shape), const([axis], axis_dtype)], [out], {"output_type": out_dtype})


@pytest.mark.parametrize("op", ["ARG_MAX", "ARG_MIN"])
def test_arg_min_max(op):
    rng = np.random.default_rng(20 if op == "ARG_MAX" else 21)
    cases = [arg_case(op, (1, 6, 6, 10), 3), arg_case(op, (7,), 0), arg_case(op, (4, 1), 1)]
    for _ in range(12):
        rank = int(rng.integers(1, 6))
        shape = rand_shape(rng, rank, 1, 6)
        cases.append(arg_case(op, shape, int(rng.integers(-rank, rank))))
    check_cases(cases, seed=22, runs=3)


def test_arg_min_max_ties_pick_lowest_index():
    """Inputs drawn from 3 values: every row has ties."""
    cases = [arg_case(op, (3, 40, 5), axis) for op in ("ARG_MAX", "ARG_MIN") for axis in (1, 2)]
    model = batch_model(cases)
    art = kiln_compile(load(model), board="host")
    rng = np.random.default_rng(23)
    xs = [rng.integers(-1, 2, (3, 40, 5)).astype(np.int8) for _ in cases]
    for g, w, c in zip(art.run(*xs), run_reference(model, xs), cases):
        assert_equal_exact(g, w, c.label)


def test_arg_min_max_int64_against_tflite_ref():
    """tflite-micro refuses int64 outputs and int64 axis tensors; TFLite's reference
    kernels take both."""
    rng = np.random.default_rng(24)
    cases = []
    for op in ("ARG_MAX", "ARG_MIN"):
        for out_t, axis_t in (("int64", "int32"), ("int32", "int64"), ("int64", "int64")):
            shape = rand_shape(rng, 3, 2, 6)
            cases.append(arg_case(op, shape, int(rng.integers(-3, 3)), out_t, axis_t))
    check_cases(cases, seed=24, engine="tflite_ref")


# --------------------------------------------------------------------------- GATHER


def gather_case(shape, idx_shape, axis, batch_dims, rng, idx_dtype="int32",
                constant=True) -> OpCase:
    a = axis % len(shape)
    bd = batch_dims % len(idx_shape) if batch_dims < 0 else batch_dims
    out = tuple(shape[:a]) + tuple(idx_shape[bd:]) + tuple(shape[a + 1:])
    if constant:
        idx = const(rng.integers(0, shape[a], idx_shape), idx_dtype, shape=tuple(idx_shape))
    else:
        idx = TensorSpec(tuple(idx_shape), idx_dtype)
    opts = {"axis": axis, "batch_dims": batch_dims}
    return OpCase(f"GATHER {shape} idx {idx_shape} {'const' if constant else 'input'} "
                  f"{idx_dtype} axis {axis} bd {batch_dims}", "GATHER", [act(shape), idx],
                  [act(out)], opts)


def random_gather_cases(rng, n, idx_dtype="int32") -> list[OpCase]:
    cases = []
    while len(cases) < n:
        rank = int(rng.integers(1, 5))
        shape = rand_shape(rng, rank, 1, 5)
        axis = int(rng.integers(-rank, rank))
        a = axis % rank
        bd = int(rng.integers(0, a + 1)) if rng.random() < 0.4 else 0
        idx_shape = tuple(shape[:bd]) + rand_shape(rng, int(rng.integers(0, 3)), 1, 4)
        if len(idx_shape) <= bd and bd:   # batch_dims must stay below the indices' rank
            idx_shape = idx_shape + (2,)
        # A scalar model input cannot be fed (reference.py passes it on as 1-D).
        constant = not idx_shape or bool(rng.random() < 0.5)
        cases.append(gather_case(shape, idx_shape, axis, bd, rng, idx_dtype, constant))
    return cases


def test_gather_random():
    rng = np.random.default_rng(30)
    cases = random_gather_cases(rng, 20)
    cases.append(gather_case((5, 4), (3,), 0, 0, rng))
    cases.append(gather_case((2, 5, 4), (2, 3), 1, -1, rng))          # negative batch_dims
    cases.append(gather_case((10, 16), (), 0, 0, rng))                # scalar index
    check_cases_in_range(cases, seed=31)


def test_gather_int64_indices_against_tflite_ref():
    rng = np.random.default_rng(32)
    check_cases_in_range(random_gather_cases(rng, 8, "int64"), seed=33, engine="tflite_ref")
    # Separate model: int32 params are another GATHER version than int8 ones.
    check_cases_in_range([OpCase("GATHER int32 params", "GATHER",
                                 [act((4, 5, 3), "int32"), TensorSpec((2, 2), "int64")],
                                 [act((4, 2, 2, 3), "int32")], {"axis": 1})],
                         seed=34, engine="tflite_ref")


def check_cases_in_range(cases: list[OpCase], seed: int, engine: str = "tflm") -> None:
    """check_cases, with run-time GATHER indices drawn inside their gathered axis (an index
    outside fails the run, in kiln as in the references)."""
    model = batch_model(cases)
    art = kiln_compile(load(model), board="host")
    reference = run_reference if engine == "tflm" else run_tflite_ref
    rng = np.random.default_rng(seed)
    for _ in range(2):
        xs = []
        for c in cases:
            for i, t in enumerate(c.inputs):
                if t is None or t.data is not None:
                    continue
                if c.op == "GATHER" and i == 1:
                    extent = c.inputs[0].shape[c.options["axis"] % len(c.inputs[0].shape)]
                    xs.append(rng.integers(0, extent, t.shape).astype(t.np_dtype))
                else:
                    xs.append(rand_int(t.shape, rng, t.dtype))
        labels = [f"{c.label} output {i}" for c in cases for i in range(len(c.outputs))]
        for g, w, label in zip(art.run(*xs), reference(model, xs), labels):
            assert_equal_exact(g, w, label)


def test_gather_runtime_index_out_of_range_fails_the_run():
    case = gather_case((5, 4), (3,), 0, 0, np.random.default_rng(0), constant=False)
    art = kiln_compile(load(batch_model([case])), board="host")
    x = np.zeros((5, 4), np.int8)
    np.testing.assert_array_equal(art.run(x, np.array([4, 0, 1], np.int32))[0], 0)
    with pytest.raises(KilnError, match="status 1"):
        art.run(x, np.array([0, 5, 1], np.int32))


# --------------------------------------------------------------------------- SLICE


def slice_case(shape, begin, size, dtype="int32") -> OpCase:
    _, out = slice_view(shape, begin, size)
    return OpCase(f"SLICE {shape} begin {begin} size {size} {dtype}", "SLICE",
                  [act(shape), const(begin, dtype), const(size, dtype)], [act(out)])


def test_slice_random():
    rng = np.random.default_rng(40)
    cases = [slice_case((1, 6, 6, 4), [0, 1, 2, 0], [1, 3, 2, 4]),
             slice_case((2, 2, 5, 3, 2), [0, 1, 1, 1, 0], [-1, 1, 2, -1, 1])]
    for i in range(20):
        rank = int(rng.integers(1, 6))
        shape = rand_shape(rng, rank, 1, 6)
        begin = [int(rng.integers(0, e)) for e in shape]
        size = [-1 if rng.random() < 0.25 else int(rng.integers(1, e - b + 1))
                for e, b in zip(shape, begin)]
        cases.append(slice_case(shape, begin, size, "int64" if i % 3 == 0 else "int32"))
    check_cases(cases, seed=41)


# --------------------------------------------------------------------------- DEPTH/SPACE


def test_depth_to_space_and_back():
    rng = np.random.default_rng(50)
    cases = []
    for _ in range(10):
        b = int(rng.integers(1, 4))
        n, h, w, c = 1 + int(rng.integers(0, 2)), *rand_shape(rng, 2, 1, 4), \
            int(rng.integers(1, 4))
        cases.append(OpCase(f"DEPTH_TO_SPACE {(n, h, w, c * b * b)} b {b}", "DEPTH_TO_SPACE",
                            [act((n, h, w, c * b * b))], [act((n, h * b, w * b, c))],
                            {"block_size": b}))
        cases.append(OpCase(f"SPACE_TO_DEPTH {(n, h * b, w * b, c)} b {b}", "SPACE_TO_DEPTH",
                            [act((n, h * b, w * b, c))], [act((n, h, w, c * b * b))],
                            {"block_size": b}))
    check_cases(cases, seed=51)


# --------------------------------------------------------------------------- MIRROR_PAD


def mirror_case(shape, pads, mode) -> OpCase:
    out = [e + b + a for e, (b, a) in zip(shape, pads)]
    return OpCase(f"MIRROR_PAD {mode} {shape} {pads}", "MIRROR_PAD",
                  [act(shape), const(pads)], [act(out)], {"mode": mode})


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad(mode):
    rng = np.random.default_rng(60 if mode == "REFLECT" else 61)
    cases = [mirror_case((1, 5, 7, 3), [[0, 0], [2, 2], [3, 1], [0, 0]], mode),
             mirror_case((4, 3), [[0, 0], [0, 0]], mode)]
    limit = 1 if mode == "REFLECT" else 0
    for _ in range(12):
        rank = int(rng.integers(1, 5))
        shape = rand_shape(rng, rank, 1, 6)
        pads = [[int(rng.integers(0, e - limit + 1)) for _ in range(2)] for e in shape]
        cases.append(mirror_case(shape, pads, mode))
    check_cases(cases, seed=62)


# --------------------------------------------------------------------------- sanitizers, cross


def test_indexing_clean_under_sanitizers(tmp_path):
    rng = np.random.default_rng(70)
    cases = [arg_case("ARG_MAX", (3, 5, 4), 1), arg_case("ARG_MIN", (3, 5, 4), -1, "int64"),
             gather_case((2, 5, 4), (2, 3), 1, 1, rng),
             slice_case((2, 5, 3), [1, 1, 0], [-1, 3, 2]),
             OpCase("DEPTH_TO_SPACE", "DEPTH_TO_SPACE", [act((1, 2, 3, 8))],
                    [act((1, 4, 6, 2))], {"block_size": 2}),
             mirror_case((2, 4, 3), [[1, 0], [3, 3], [0, 2]], "REFLECT")]
    check_sanitized(cases, tmp_path)


@pytest.mark.cross
@pytest.mark.parametrize("target", sorted(ARM_TARGETS))
def test_indexing_cross_compiles(target):
    cross_compile(["indexing.c"], ARM_TARGETS[target])


# --------------------------------------------------------------------------- rejections


REJECTIONS = [
    ("ARG_MAX int16 input", "ARG_MAX", [act((3, 4), "int16"), const([1])],
     [TensorSpec((3,), "int32")], {"output_type": "int32"}, "int16 input"),
    ("ARG_MIN int16 output", "ARG_MIN", [act((3, 4)), const([1])],
     [TensorSpec((3,), "int16")], {"output_type": "int16"}, r"int16 output \(int32 or int64"),
    ("ARG_MAX axis input", "ARG_MAX", [act((3, 4)), TensorSpec((1,), "int32")],
     [TensorSpec((3,), "int32")], {"output_type": "int32"}, "axis tensor must be a constant"),
    ("ARG_MAX two axes", "ARG_MAX", [act((3, 4)), const([0, 1])],
     [TensorSpec((3,), "int32")], {"output_type": "int32"}, "holds 2 values"),
    ("ARG_MAX axis range", "ARG_MAX", [act((3, 4)), const([2])],
     [TensorSpec((3,), "int32")], {"output_type": "int32"}, "axis 2 out of range"),
    ("GATHER constant out of range", "GATHER", [act((5, 4)), const([1, 5])], [act((2, 4))],
     {"axis": 0}, r"GATHER index 5 .*out of range \[0, 5\)"),
    ("GATHER negative constant", "GATHER", [act((5, 4)), const([-1])], [act((1, 4))],
     {"axis": 0}, "GATHER index -1"),
    ("GATHER int16 indices", "GATHER", [act((5, 4)), const([1], "int16")], [act((1, 4))],
     {"axis": 0}, "indices of type int16"),
    ("GATHER batch_dims", "GATHER", [act((2, 5, 4)), const([[1], [0]])], [act((2, 1, 4))],
     {"axis": 0, "batch_dims": 1}, "batch_dims 1 out of range"),
    ("GATHER batch mismatch", "GATHER", [act((2, 5, 4)), const([[1], [0], [2]])],
     [act((2, 1, 4))], {"axis": 1, "batch_dims": 1}, "batch dimensions differ"),
    ("GATHER requantizes", "GATHER", [act((5, 4)), const([1])], [act((1, 4), q=(0.1, 0))],
     {"axis": 0}, "TFLite requires data-movement ops to keep it"),
    ("SLICE input begin", "SLICE", [act((5, 4)), TensorSpec((2,), "int32"), const([1, 1])],
     [act((1, 1))], {}, "begin tensor must be a constant"),
    ("SLICE out of range", "SLICE", [act((5, 4)), const([4, 0]), const([2, -1])],
     [act((2, 4))], {}, "begin 4 size 2 is out of range for dimension 0"),
    ("SLICE 6-D", "SLICE", [act((1,) * 6), const([0] * 6), const([1] * 6)], [act((1,) * 6)],
     {}, "SLICE stops at 5-D"),
    ("DEPTH_TO_SPACE depth", "DEPTH_TO_SPACE", [act((1, 2, 2, 6))], [act((1, 4, 4, 1))],
     {"block_size": 2}, "depth 6 is not a multiple"),
    ("SPACE_TO_DEPTH size", "SPACE_TO_DEPTH", [act((1, 3, 4, 1))], [act((1, 1, 2, 4))],
     {"block_size": 2}, "multiples of block_size 2"),
    ("SPACE_TO_DEPTH rank", "SPACE_TO_DEPTH", [act((4, 4, 1))], [act((2, 2, 4))],
     {"block_size": 2}, "needs 4-D NHWC"),
    ("DEPTH_TO_SPACE block 0", "DEPTH_TO_SPACE", [act((1, 2, 2, 4))], [act((1, 2, 2, 4))],
     {"block_size": 0}, "block_size 0"),
    ("MIRROR_PAD REFLECT too wide", "MIRROR_PAD", [act((3, 4)), const([[3, 0], [0, 0]])],
     [act((6, 4))], {"mode": "REFLECT"}, "REFLECT padding \\[3, 0\\] of dimension 0 exceeds 2"),
    ("MIRROR_PAD SYMMETRIC too wide", "MIRROR_PAD", [act((3, 4)), const([[0, 0], [0, 5]])],
     [act((3, 9))], {"mode": "SYMMETRIC"}, "SYMMETRIC padding .* exceeds 4"),
    ("MIRROR_PAD input paddings", "MIRROR_PAD", [act((3, 4)), TensorSpec((2, 2), "int32")],
     [act((3, 4))], {"mode": "REFLECT"}, "paddings tensor must be a constant"),
]


@pytest.mark.parametrize("case", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_rejections_name_op_and_reason(case):
    _, op, ins, outs, opts, reason = case
    with pytest.raises(ModelError, match=op) as err:
        compile_single(op, ins, outs, opts)
    assert re.search(reason, str(err.value)), str(err.value)
