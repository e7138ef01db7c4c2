"""Lowerings of the ops that select elements by index.

- ARG_MAX, ARG_MIN (int8 input; int32 or int64 output as the model's output tensor says)
  → `kiln_arg_max_s8` / `kiln_arg_min_s8` over [outer, axis, inner]; ties give the lowest
  index (TFLite's strict comparison).
- GATHER (params of any movable type, int32/int64 indices, constant or not, `axis` and
  `batch_dims`) → `kiln_gather`. Constant indices are range-checked here and emitted as
  int32; run-time indices are checked by the kernel (KILN_ERR_ARG, as TFLite fails).
- SLICE, DEPTH_TO_SPACE, SPACE_TO_DEPTH → `kiln_strided_copy` (data_movement.py's `View`):
  a slice is an offset view, and depth/space rearrangements are transposes of the tensor
  seen with its block dimensions split out.
- MIRROR_PAD (REFLECT, SYMMETRIC) → `kiln_mirror_pad`, with the input offset of every
  output index along each dimension computed here by TFLite's GetInputDimension.

tflite-micro (the version tests run) refuses ARG_MAX/ARG_MIN with an int64 output or an
int64 axis tensor, and GATHER with int64 indices; for those kiln follows TFLite's
reference kernels (the tests compare with them). As for data movement, the quantization
of the moved tensor must not change.
"""

from __future__ import annotations

import numpy as np

from ..lowering import LayerCode, LowerCtx, lowering
from .data_movement import (MAX_RANK, View, c_array, check_moves, const_ints, copy_layer,
                            elem_bytes, normalize_axis, row_major_strides)

MIRROR_PAD_MAX_DIMS = 6   # KILN_MIRROR_PAD_MAX_DIMS
SLICE_MAX_RANK = 5        # TFLite's and tflite-micro's SLICE stop at 5-D
_INDEX_TYPES = ("int32", "int64")


def _prod(values) -> int:
    return int(np.prod([int(v) for v in values], dtype=np.int64))


# --------------------------------------------------------------------------- ARG_MAX / ARG_MIN


def _arg_axis(ctx: LowerCtx) -> int | str:
    x = ctx.input(0)
    axis = const_ints(ctx.input(1), "axis")
    if isinstance(axis, str):
        return axis
    if axis.size != 1:
        return f"axis tensor holds {axis.size} values (one expected)"
    return normalize_axis(int(axis.reshape(-1)[0]), len(x.shape))


def _check_arg(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    if x is None:
        return "missing input"
    if x.dtype != "int8":
        return f"{x.dtype} input (int8 supported)"
    if y.dtype not in _INDEX_TYPES:
        return f"{y.dtype} output (int32 or int64 expected)"
    if len(x.shape) > MAX_RANK or x.size == 0:
        return f"input shape {list(x.shape)} (non-empty, rank <= {MAX_RANK})"
    axis = _arg_axis(ctx)
    if isinstance(axis, str):
        return axis
    want = [e for d, e in enumerate(x.shape) if d != axis]
    if list(y.shape) != want:
        return f"output shape {list(y.shape)} != {want}"
    return None


@lowering("ARG_MAX", "ARG_MIN", check=_check_arg)
def lower_arg(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    axis = _arg_axis(ctx)
    kernel = "kiln_arg_max_s8" if ctx.op.type == "ARG_MAX" else "kiln_arg_min_s8"
    body = ("static const kiln_arg_params_t params = {\n"
            f"    .outer = {_prod(x.shape[:axis])},\n"
            f"    .axis_size = {int(x.shape[axis])},\n"
            f"    .inner = {_prod(x.shape[axis + 1:])},\n"
            f"    .index_size = {elem_bytes(y)},\n"
            "};\n"
            f"return {kernel}(&params, {ctx.ptr(x)}, {ctx.ptr(y)});\n")
    return LayerCode(kernel=kernel, body=body, summary=f"axis {axis}, {y.dtype} indices")


# --------------------------------------------------------------------------- GATHER


def _gather_args(ctx: LowerCtx) -> tuple[int, int] | str:
    """(axis, batch_dims), resolved and validated as TFLite's Prepare does."""
    x, idx = ctx.input(0), ctx.input(1)
    axis = normalize_axis(int(ctx.op.options.get("axis", 0)), len(x.shape))
    if isinstance(axis, str):
        return axis
    bd = int(ctx.op.options.get("batch_dims", 0))
    batch_dims = bd + len(idx.shape) if bd < 0 else bd
    if not 0 <= batch_dims <= min(axis, len(idx.shape)):
        return (f"batch_dims {bd} out of range (0 <= batch_dims <= axis {axis} and <= the "
                f"indices' rank {len(idx.shape)})")
    if tuple(x.shape[:batch_dims]) != tuple(idx.shape[:batch_dims]):
        return (f"batch dimensions differ: params {list(x.shape[:batch_dims])}, "
                f"indices {list(idx.shape[:batch_dims])}")
    return axis, batch_dims


def _check_gather(ctx: LowerCtx) -> str | None:
    x, idx, y = ctx.input(0), ctx.input(1), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    if idx is None or idx.dtype not in _INDEX_TYPES:
        what = "missing indices" if idx is None else f"indices of type {idx.dtype}"
        return f"{what} (int32 or int64 expected)"
    if idx.size == 0:
        return "empty indices"
    args = _gather_args(ctx)
    if isinstance(args, str):
        return args
    axis, batch_dims = args
    want = list(x.shape[:axis]) + list(idx.shape[batch_dims:]) + list(x.shape[axis + 1:])
    if list(y.shape) != want:
        return f"output shape {list(y.shape)} != {want}"
    if idx.is_const:
        values = np.asarray(idx.data, dtype=np.int64).reshape(-1)
        bad = np.flatnonzero((values < 0) | (values >= x.shape[axis]))
        if bad.size:
            return (f"GATHER index {int(values[bad[0]])} (at flat position {int(bad[0])}) "
                    f"is out of range [0, {x.shape[axis]}) for axis {axis}")
    return None


@lowering("GATHER", check=_check_gather)
def lower_gather(ctx: LowerCtx) -> LayerCode:
    x, idx, y = ctx.input(0), ctx.input(1), ctx.output(0)
    axis, batch_dims = _gather_args(ctx)
    if idx.is_const and idx.dtype == "int32":
        indices, index_size = ctx.ptr(idx), 4
    elif idx.is_const:   # int64, checked in range by _check_gather: narrowed to int32
        indices = ctx.const("indices", np.asarray(idx.data).astype(np.int32).reshape(-1),
                            "int32_t", f"{idx.name} {list(idx.shape)} narrowed to int32")
        index_size = 4
    else:
        indices, index_size = ctx.ptr(idx), elem_bytes(idx)
    body = ("static const kiln_gather_params_t params = {\n"
            f"    .elem_size = {elem_bytes(x)},\n"
            f"    .batch = {_prod(x.shape[:batch_dims])},\n"
            f"    .outer = {_prod(x.shape[batch_dims:axis])},\n"
            f"    .axis_size = {int(x.shape[axis])},\n"
            f"    .coords = {_prod(idx.shape[batch_dims:])},\n"
            f"    .inner = {_prod(x.shape[axis + 1:])},\n"
            f"    .index_size = {index_size},\n"
            "};\n"
            f"return kiln_gather(&params, {ctx.ptr(x)}, {indices}, {ctx.ptr(y)});\n")
    where = "constant" if idx.is_const else "run-time"
    return LayerCode(kernel="kiln_gather", body=body,
                     summary=f"axis {axis}, batch_dims {batch_dims}, {where} {idx.dtype} "
                             f"indices {list(idx.shape)}")


# --------------------------------------------------------------------------- SLICE


def slice_view(shape, begin, size) -> tuple[View, list[int]] | str:
    """The input view and output shape of SLICE; size -1 runs to the end of the axis."""
    if len(begin) != len(shape) or len(size) != len(shape):
        return f"begin {list(begin)} / size {list(size)} do not fit a rank-{len(shape)} input"
    out = []
    for d, (e, b, s) in enumerate(zip(shape, begin, size)):
        s = int(e) - int(b) if s == -1 else int(s)
        if b < 0 or s < 0 or b + s > e:
            return (f"slice begin {int(b)} size {int(size[d])} is out of range for "
                    f"dimension {d} of extent {int(e)}")
        out.append(s)
    offset = sum(int(b) * st for b, st in zip(begin, row_major_strides(shape)))
    return View(out, row_major_strides(shape), offset), out


def _slice_args(ctx: LowerCtx) -> tuple[View, list[int]] | str:
    x = ctx.input(0)
    begin = const_ints(ctx.input(1), "begin")
    if isinstance(begin, str):
        return begin
    size = const_ints(ctx.input(2), "size")
    if isinstance(size, str):
        return size
    return slice_view(x.shape, begin.reshape(-1).tolist(), size.reshape(-1).tolist())


def _check_slice(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    if len(x.shape) > SLICE_MAX_RANK:
        return f"rank {len(x.shape)} input (SLICE stops at {SLICE_MAX_RANK}-D in TFLite)"
    args = _slice_args(ctx)
    if isinstance(args, str):
        return args
    if list(y.shape) != args[1]:
        return f"output shape {list(y.shape)} != {args[1]} implied by the slice"
    return None


@lowering("SLICE", check=_check_slice)
def lower_slice(ctx: LowerCtx) -> LayerCode:
    view, out = _slice_args(ctx)
    return copy_layer(ctx, view, f"slice to {out}")


# --------------------------------------------------------------------------- DEPTH/SPACE


def depth_to_space_view(shape, block: int) -> View:
    """output[n, h*b + i, w*b + j, c] = input[n, h, w, (i*b + j)*C + c], C the output depth:
    the output walked as (n, h, i, w, j, c)."""
    n, h, w, depth = (int(v) for v in shape)
    c = depth // (block * block)
    return View([n, h, block, w, block, c],
                [h * w * depth, w * depth, block * c, depth, c, 1])


def space_to_depth_view(shape, block: int) -> View:
    """output[n, h, w, (i*b + j)*C + c] = input[n, h*b + i, w*b + j, c]: the output walked
    as (n, h, w, i, j, c)."""
    n, h, w, c = (int(v) for v in shape)
    return View([n, h // block, w // block, block, block, c],
                [h * w * c, block * w * c, block * c, w * c, c, 1])


def _check_depth_space(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    if len(x.shape) != 4:
        return f"rank {len(x.shape)} input ({ctx.op.type} needs 4-D NHWC)"
    b = int(ctx.op.options.get("block_size", 0))
    if b < 1:
        return f"block_size {b} (>= 1 expected)"
    n, h, w, c = (int(v) for v in x.shape)
    if ctx.op.type == "DEPTH_TO_SPACE":
        if c % (b * b):
            return f"depth {c} is not a multiple of block_size² {b * b}"
        want = [n, h * b, w * b, c // (b * b)]
    else:
        if h % b or w % b:
            return f"height {h} and width {w} must be multiples of block_size {b}"
        want = [n, h // b, w // b, c * b * b]
    if list(y.shape) != want:
        return f"output shape {list(y.shape)} != {want}"
    return None


@lowering("DEPTH_TO_SPACE", "SPACE_TO_DEPTH", check=_check_depth_space)
def lower_depth_space(ctx: LowerCtx) -> LayerCode:
    b = int(ctx.op.options["block_size"])
    make = depth_to_space_view if ctx.op.type == "DEPTH_TO_SPACE" else space_to_depth_view
    return copy_layer(ctx, make(ctx.input(0).shape, b), f"block_size {b}")


# --------------------------------------------------------------------------- MIRROR_PAD

MIRROR_MODES = {0: "REFLECT", 1: "SYMMETRIC", "REFLECT": "REFLECT", "SYMMETRIC": "SYMMETRIC"}


def mirror_index(i: int, before: int, size: int, reflect: bool) -> int:
    """TFLite's GetInputDimension: the input index along one dimension of output index i.
    REFLECT excludes the edge element (offset 1), SYMMETRIC repeats it (offset 0)."""
    offset = 1 if reflect else 0
    if i < before:
        original = before + offset - 1
        return original - min(i, original - offset)
    i -= before
    if i >= size:
        i -= size
        original = size - (1 + offset)
        return original - min(i, original)
    return i


def mirror_pad_maps(shape, paddings, reflect: bool) -> tuple[list[int], list[np.ndarray], int]:
    """(output extents, input element offset maps, run): the dimensions after the last
    padded one fold into the contiguous run each map entry copies."""
    padded = [d for d, (b, a) in enumerate(paddings) if b or a]
    last = padded[-1] if padded else -1
    run = _prod(shape[last + 1:])
    strides = row_major_strides(shape)
    extents, maps = [], []
    for d in range(last + 1):
        b, a = (int(v) for v in paddings[d])
        e = int(shape[d])
        extents.append(e + b + a)
        maps.append(np.array([mirror_index(i, b, e, reflect) * strides[d]
                              for i in range(e + b + a)], dtype=np.int32))
    if not extents:
        extents, maps = [1], [np.zeros(1, dtype=np.int32)]
    return extents, maps, run


def _mirror_args(ctx: LowerCtx) -> tuple[list[list[int]], bool] | str:
    x = ctx.input(0)
    mode = MIRROR_MODES.get(ctx.op.options.get("mode", 0))
    if mode is None:
        return f"mirror pad mode {ctx.op.options.get('mode')!r} (REFLECT or SYMMETRIC)"
    p = const_ints(ctx.input(1), "paddings")
    if isinstance(p, str):
        return p
    if p.shape != (len(x.shape), 2) or (p < 0).any():
        return f"paddings {p.tolist()} do not fit a rank-{len(x.shape)} input"
    reflect = mode == "REFLECT"
    for d, (e, (b, a)) in enumerate(zip(x.shape, p.tolist())):
        limit = e - 1 if reflect else e
        if b > limit or a > limit:
            return (f"{mode} padding {[b, a]} of dimension {d} exceeds {limit} "
                    f"(the input extent {e}{' - 1' if reflect else ''})")
    return p.tolist(), reflect


def _check_mirror_pad(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    args = _mirror_args(ctx)
    if isinstance(args, str):
        return args
    want = [int(e + b + a) for e, (b, a) in zip(x.shape, args[0])]
    if list(y.shape) != want:
        return f"output shape {list(y.shape)} != {want}"
    return None


@lowering("MIRROR_PAD", check=_check_mirror_pad)
def lower_mirror_pad(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    paddings, reflect = _mirror_args(ctx)
    extents, maps, run = mirror_pad_maps(x.shape, paddings, reflect)
    mode = "REFLECT" if reflect else "SYMMETRIC"
    offsets = ctx.const("offsets", np.concatenate(maps), "int32_t",
                        f"{mode} input offset of each output index, dims {extents}")
    body = ("static const kiln_mirror_pad_params_t params = {\n"
            f"    .elem_size = {elem_bytes(x)},\n"
            f"    .rank = {len(extents)},\n"
            f"    .shape = {c_array(extents)},\n"
            f"    .run = {run},\n"
            f"    .in_size = {x.size},\n"
            f"    .offsets = {offsets},\n"
            "};\n"
            f"return kiln_mirror_pad(&params, {ctx.ptr(x)}, {ctx.ptr(y)});\n")
    return LayerCode(kernel="kiln_mirror_pad", body=body,
                     summary=f"{mode}, paddings {paddings}; runs of {run}")
