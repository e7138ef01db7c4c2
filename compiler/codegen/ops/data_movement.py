"""Lowerings of the ops that only move elements.

Each op is reduced at compile time to one of a few byte-moving kernels
(crt/kernels/data_movement.h), with every shape, stride and offset computed here:

- TRANSPOSE, STRIDED_SLICE, TILE, BROADCAST_TO, REVERSE_V2 → `kiln_strided_copy`, a
  gather through a strided view (`View`) of the input, simplified (size-1 dimensions
  dropped, contiguous runs merged) so the innermost run is as long as the layout allows;
- CONCATENATION, PACK → `kiln_concat`; SPLIT, SPLIT_V, UNPACK → `kiln_split`;
- PAD, PADV2 → `kiln_pad`; RESIZE_NEAREST_NEIGHBOR → `kiln_resize_nearest` with index maps
  computed here in float32 exactly as TFLite does; SPACE_TO_BATCH_ND,
  BATCH_TO_SPACE_ND → `kiln_space_to_batch` / `kiln_batch_to_space`.

The kernels take an element size, so int16/int32 tensors work as well as int8. None of
these ops requantizes: for quantized tensors the lowering requires the output to share
the input's scale and zero point (TFLite's own rule; tflite-micro would copy the raw
values regardless).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import ModelError
from ...ir import DTYPES, Tensor, same_quant
from ...numerics import round_half_away
from ..lowering import LayerCode, LowerCtx, fmt_quant, lowering

COPY_MAX_DIMS = 8   # KILN_COPY_MAX_DIMS
PAD_MAX_DIMS = 6    # KILN_PAD_MAX_DIMS
MAX_RANK = 6
_MOVABLE = ("int8", "uint8", "int16", "int32", "int64", "bool")


# --------------------------------------------------------------------------- helpers


def c_array(values) -> str:
    return "{" + ", ".join(str(int(v)) for v in values) + "}"


def row_major_strides(shape) -> list[int]:
    """Row-major element strides of `shape`."""
    out, s = [], 1
    for e in reversed(shape):
        out.insert(0, s)
        s *= int(e)
    return out


def elem_bytes(t: Tensor) -> int:
    return DTYPES[t.dtype].itemsize


def _same_quant(a: Tensor, b: Tensor) -> bool:
    return same_quant(a.quant, b.quant)


def check_moves(ctx: LowerCtx, data_inputs: list[Tensor | None],
                 outputs: list[Tensor]) -> str | None:
    """Common checks: supported, identical dtypes and quantization, rank ≤ 6, non-empty."""
    if any(t is None for t in data_inputs):
        return "missing input"
    ref = data_inputs[0]
    for t in list(data_inputs) + list(outputs):
        if t.dtype not in _MOVABLE:
            return f"{t.dtype} tensors are not supported"
        if t.dtype != ref.dtype:
            return f"mixed types {ref.dtype} and {t.dtype}"
        if len(t.shape) > MAX_RANK:
            return f"rank {len(t.shape)} tensor (at most {MAX_RANK})"
        if t.size == 0:
            return f"empty tensor {t.name} {list(t.shape)}"
        if not _same_quant(ref, t):
            return (f"quantization of {t.name} ({fmt_quant(t)}) differs from {ref.name}'s "
                    f"({fmt_quant(ref)}); TFLite requires data-movement ops to keep it")
    return None


def const_ints(t: Tensor | None, what: str) -> np.ndarray | str:
    if t is None or not t.is_const:
        return f"the {what} tensor must be a constant"
    if t.dtype not in ("int32", "int64"):
        return f"{what} tensor of type {t.dtype} (int32 or int64 expected)"
    return np.asarray(t.data, dtype=np.int64)


def normalize_axis(axis: int, rank: int) -> int | str:
    a = axis + rank if axis < 0 else axis
    return a if 0 <= a < rank else f"axis {axis} out of range for rank {rank}"


# --------------------------------------------------------------------------- strided views


@dataclass
class View:
    """output[i...] = input[offset + Σ i_d · strides[d]], output row-major over shape."""

    shape: list[int]
    strides: list[int]
    offset: int = 0

    def simplified(self) -> "View":
        """Drop extent-1 dimensions; merge d into d+1 where they form one contiguous run."""
        dims = [(e, s) for e, s in zip(self.shape, self.strides) if e != 1]
        merged: list[tuple[int, int]] = []
        for e, s in dims:
            if merged and merged[-1][1] == s * e:
                pe, _ = merged.pop()
                merged.append((pe * e, s))
            else:
                merged.append((e, s))
        if not merged:
            merged = [(1, 1)]
        return View([e for e, _ in merged], [s for _, s in merged], self.offset)

    def c_body(self, elem: int, in_size: int, src: str, dst: str) -> str:
        v = self.simplified()
        if len(v.shape) > COPY_MAX_DIMS:
            raise ModelError(f"copy view of rank {len(v.shape)} (at most {COPY_MAX_DIMS})")
        return ("static const kiln_copy_params_t params = {\n"
                f"    .elem_size = {elem},\n"
                f"    .rank = {len(v.shape)},\n"
                f"    .shape = {c_array(v.shape)},\n"
                f"    .in_stride = {c_array(v.strides)},\n"
                f"    .in_offset = {v.offset},\n"
                f"    .in_size = {in_size},\n"
                "};\n"
                f"return kiln_strided_copy(&params, {src}, {dst});\n")

    def gather(self, x: np.ndarray) -> np.ndarray:
        """numpy twin of kiln_strided_copy (for tests)."""
        idx = np.full(self.shape, self.offset, dtype=np.int64)
        for d, (e, s) in enumerate(zip(self.shape, self.strides)):
            shape = [1] * len(self.shape)
            shape[d] = e
            idx = idx + (np.arange(e, dtype=np.int64) * s).reshape(shape)
        return x.reshape(-1)[idx]


def copy_layer(ctx: LowerCtx, view: View, summary: str) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    v = view.simplified()
    body = view.c_body(elem_bytes(x), x.size, ctx.ptr(x), ctx.ptr(y))
    return LayerCode(kernel="kiln_strided_copy", body=body,
                     summary=f"{summary}; view {v.shape} strides {v.strides} offset {v.offset}")


# --------------------------------------------------------------------------- TRANSPOSE


def transpose_view(shape, perm) -> View:
    st = row_major_strides(shape)
    return View([int(shape[p]) for p in perm], [st[p] for p in perm])


def _transpose_perm(ctx: LowerCtx) -> list[int] | str:
    x = ctx.input(0)
    perm = const_ints(ctx.input(1), "perm")
    if isinstance(perm, str):
        return perm
    perm = [int(p) + len(x.shape) if p < 0 else int(p) for p in perm.reshape(-1)]
    if sorted(perm) != list(range(len(x.shape))):
        return f"perm {perm} is not a permutation of {len(x.shape)} axes"
    return perm


def _check_transpose(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    perm = _transpose_perm(ctx)
    if isinstance(perm, str):
        return perm
    want = [x.shape[p] for p in perm]
    if list(y.shape) != want:
        return f"output shape {list(y.shape)} != {want}"
    return None


@lowering("TRANSPOSE", check=_check_transpose)
def lower_transpose(ctx: LowerCtx) -> LayerCode:
    perm = _transpose_perm(ctx)
    return copy_layer(ctx, transpose_view(ctx.input(0).shape, perm), f"perm {perm}")


# --------------------------------------------------------------------------- STRIDED_SLICE


def _clamp(v: int, lo: int, hi: int) -> int:
    return hi if v > hi else (lo if v < lo else v)


def _start_for_axis(begin: int, stride: int, masked: bool, size: int) -> int:
    """TFLite's StartForAxis (strided_slice_logic.h)."""
    if masked:
        begin = -(1 << 31) if stride > 0 else (1 << 31) - 1
    if begin < 0:
        begin += size
    return _clamp(begin, 0, size) if stride > 0 else _clamp(begin, -1, size - 1)


def _stop_for_axis(end: int, stride: int, masked: bool, size: int) -> int:
    """TFLite's StopForAxis, without the shrink case."""
    if masked:
        end = (1 << 31) - 1 if stride > 0 else -(1 << 31)
    if end < 0:
        end += size
    return _clamp(end, 0, size) if stride > 0 else _clamp(end, -1, size - 1)


def strided_slice_view(shape, begin, end, strides, begin_mask=0, end_mask=0,
                       shrink_axis_mask=0, ellipsis_mask=0, new_axis_mask=0,
                       offset=False) -> tuple[View, list[int]]:
    """The input view and output shape of a TFLite STRIDED_SLICE.

    The sparse spec (begin/end/strides with masks, possibly shorter than the input rank,
    with an ellipsis and new axes) is expanded to one entry per input dimension the way
    TFLite's BuildStridedSliceParams does; each dimension then follows TFLite's
    StartForAxis/StopForAxis. With `offset` (op version 8), `end` counts from `begin`.
    """
    rank = len(shape)
    n = len(begin)
    if offset and (begin_mask or end_mask or ellipsis_mask or new_axis_mask):
        # TFLite sizes the output from `end` alone but slices with the masks applied.
        raise ModelError("STRIDED_SLICE with offset=true and masks")
    if bin(ellipsis_mask & ((1 << n) - 1)).count("1") > 1:
        raise ModelError("STRIDED_SLICE with more than one ellipsis")
    explicit = sum(1 for i in range(n) if not (ellipsis_mask >> i) & 1
                   and not (new_axis_mask >> i) & 1)
    if explicit > rank:
        raise ModelError(f"STRIDED_SLICE indexes {explicit} axes of a rank-{rank} input")
    # Dense spec: one (begin, end, stride, begin_masked, end_masked, shrink) per input dim,
    # and the output layout (input dim index, or None for a new axis).
    dense: list[tuple[int, int, int, bool, bool, bool]] = []
    layout: list[int | None] = []
    has_ellipsis = any((ellipsis_mask >> i) & 1 for i in range(n))
    for i in range(n):
        if (ellipsis_mask >> i) & 1:
            for _ in range(rank - explicit):
                layout.append(len(dense))
                dense.append((0, 0, 1, True, True, False))
            continue
        if (new_axis_mask >> i) & 1:
            layout.append(None)
            continue
        shrink = bool((shrink_axis_mask >> i) & 1)
        if not shrink:
            layout.append(len(dense))
        dense.append((int(begin[i]), int(end[i]), int(strides[i]), bool((begin_mask >> i) & 1),
                      bool((end_mask >> i) & 1), shrink))
    if not has_ellipsis:                       # an implicit ellipsis at the end
        for _ in range(rank - len(dense)):
            layout.append(len(dense))
            dense.append((0, 0, 1, True, True, False))

    in_strides = row_major_strides(shape)
    view_shape, view_strides, start_offset = [], [], 0
    out_shape: list[int] = []
    counts: list[int] = []
    for d, (b, e, s, bm, em, shrink) in enumerate(dense):
        size = int(shape[d])
        if s == 0:
            raise ModelError("STRIDED_SLICE stride 0")
        start = _start_for_axis(b, s, bm, size)
        if shrink:
            if s < 0:
                raise ModelError("STRIDED_SLICE shrinks an axis with a negative stride")
            count = 1 if start < size else 0
        else:
            stop = _stop_for_axis(e + start if offset else e, s, em, size)
            count = max(0, -(-(stop - start) // s) if s > 0 else -(-(start - stop) // -s))
        counts.append(count)
        if count:
            start_offset += start * in_strides[d]
        view_shape.append(count)
        view_strides.append(s * in_strides[d])
    for entry in layout:
        out_shape.append(1 if entry is None else counts[entry])
    return View(view_shape, view_strides, start_offset), out_shape


def _slice_args(ctx: LowerCtx) -> tuple | str:
    x = ctx.input(0)
    parts = []
    for i, what in ((1, "begin"), (2, "end"), (3, "strides")):
        v = const_ints(ctx.input(i), what)
        if isinstance(v, str):
            return v
        parts.append(v.reshape(-1).tolist())
    if not len(parts[0]) == len(parts[1]) == len(parts[2]):
        return "begin, end and strides differ in length"
    o = ctx.op.options
    try:
        return strided_slice_view(
            x.shape, *parts, begin_mask=o.get("begin_mask", 0), end_mask=o.get("end_mask", 0),
            shrink_axis_mask=o.get("shrink_axis_mask", 0),
            ellipsis_mask=o.get("ellipsis_mask", 0), new_axis_mask=o.get("new_axis_mask", 0),
            offset=bool(o.get("offset", False)))
    except ModelError as e:
        return str(e)


def _check_strided_slice(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    result = _slice_args(ctx)
    if isinstance(result, str):
        return result
    view, out_shape = result
    if list(y.shape) != out_shape:
        return f"output shape {list(y.shape)} != {out_shape} implied by the slice"
    if 0 in view.shape:
        return "the slice is empty along a shrunk axis"
    if len(view.simplified().shape) > COPY_MAX_DIMS:
        return "slice view too complex"
    return None


@lowering("STRIDED_SLICE", check=_check_strided_slice)
def lower_strided_slice(ctx: LowerCtx) -> LayerCode:
    view, out_shape = _slice_args(ctx)
    return copy_layer(ctx, view, f"slice to {out_shape}")


# --------------------------------------------------------------------------- TILE


def tile_view(shape, multiples) -> View:
    st = row_major_strides(shape)
    v_shape, v_strides = [], []
    for e, m, s in zip(shape, multiples, st):
        v_shape += [int(m), int(e)]
        v_strides += [0, s]
    return View(v_shape, v_strides)


def _check_tile(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    m = const_ints(ctx.input(1), "multiples")
    if isinstance(m, str):
        return m
    m = m.reshape(-1)
    if len(m) != len(x.shape) or (m < 1).any():
        return f"multiples {m.tolist()} do not fit a rank-{len(x.shape)} input"
    if list(y.shape) != [int(a * b) for a, b in zip(x.shape, m)]:
        return f"output shape {list(y.shape)} does not match multiples {m.tolist()}"
    if len(tile_view(x.shape, m).simplified().shape) > COPY_MAX_DIMS:
        return f"tiling {len(x.shape)} axes at once needs a view of more than {COPY_MAX_DIMS} dims"
    return None


@lowering("TILE", check=_check_tile)
def lower_tile(ctx: LowerCtx) -> LayerCode:
    m = ctx.input(1).data.reshape(-1).tolist()
    return copy_layer(ctx, tile_view(ctx.input(0).shape, m), f"multiples {m}")


# --------------------------------------------------------------------------- BROADCAST_TO


def broadcast_view(in_shape, out_shape) -> View:
    """The input (right-aligned, as numpy broadcasts) read with stride 0 along every axis
    it has extent 1 and the output more."""
    lead = len(out_shape) - len(in_shape)
    st = row_major_strides(in_shape)
    strides = [0 if d < lead or int(in_shape[d - lead]) == 1 else st[d - lead]
               for d in range(len(out_shape))]
    return View([int(e) for e in out_shape], strides)


def _check_broadcast_to(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    target = const_ints(ctx.input(1), "shape")
    if isinstance(target, str):
        return target
    target = target.reshape(-1).tolist()
    if list(y.shape) != target or len(x.shape) > len(target):
        return f"output shape {list(y.shape)} != the shape input {target}"
    lead = len(target) - len(x.shape)
    if any(int(e) not in (1, target[lead + d]) for d, e in enumerate(x.shape)):
        return f"{list(x.shape)} does not broadcast to {target}"
    if len(broadcast_view(x.shape, y.shape).simplified().shape) > COPY_MAX_DIMS:
        return "broadcast view too complex"
    return None


@lowering("BROADCAST_TO", check=_check_broadcast_to)
def lower_broadcast_to(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    return copy_layer(ctx, broadcast_view(x.shape, y.shape), f"{list(x.shape)} to {list(y.shape)}")


# --------------------------------------------------------------------------- REVERSE_V2


def reverse_view(shape, axes) -> View:
    """Each reversed axis read from its last element with a negative stride."""
    st = row_major_strides(shape)
    offset = sum((int(shape[a]) - 1) * st[a] for a in axes)
    return View([int(e) for e in shape], [-s if d in axes else s for d, s in enumerate(st)],
                offset)


def _reverse_axes(ctx: LowerCtx) -> list[int] | str:
    x = ctx.input(0)
    axes = const_ints(ctx.input(1), "axis")
    if isinstance(axes, str):
        return axes
    out = []
    for a in axes.reshape(-1).tolist():
        n = normalize_axis(int(a), len(x.shape))
        if isinstance(n, str):
            return n
        out.append(n)
    return sorted(set(out))


def _check_reverse(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    axes = _reverse_axes(ctx)
    if isinstance(axes, str):
        return axes
    if tuple(y.shape) != tuple(x.shape):
        return f"output shape {list(y.shape)} != input shape {list(x.shape)}"
    return None


@lowering("REVERSE_V2", check=_check_reverse)
def lower_reverse(ctx: LowerCtx) -> LayerCode:
    axes = _reverse_axes(ctx)
    return copy_layer(ctx, reverse_view(ctx.input(0).shape, axes), f"axes {axes}")


# --------------------------------------------------------------------------- concat / split


def _concat_body(ctx: LowerCtx, kernel: str, outer: int, row_bytes: list[int],
                 many: list[Tensor], one: Tensor) -> str:
    n = len(many)
    ptrs = ", ".join(ctx.ptr(t) for t in many)
    if kernel == "kiln_concat":
        lists = f"const void *const inputs[{n}] = {{{ptrs}}};\n"
        call = f"return kiln_concat(&params, inputs, {ctx.ptr(one)});\n"
    else:
        lists = f"void *const outputs[{n}] = {{{ptrs}}};\n"
        call = f"return kiln_split(&params, {ctx.ptr(one)}, outputs);\n"
    return (f"static const int32_t row_bytes[{n}] = {c_array(row_bytes)};\n"
            "static const kiln_concat_params_t params = {\n"
            f"    .count = {n},\n"
            f"    .outer = {outer},\n"
            "    .row_bytes = row_bytes,\n"
            "};\n"
            + lists + call)


def _check_concat(ctx: LowerCtx) -> str | None:
    ins = [ctx.input(i) for i in range(len(ctx.op.inputs))]
    y = ctx.output(0)
    reason = check_moves(ctx, ins, [y])
    if reason:
        return reason
    act = ctx.op.options.get("fused_activation_function", "NONE")
    if act != "NONE":
        return f"fused activation {act} (TFLM supports NONE only)"
    rank = len(y.shape)
    axis = normalize_axis(int(ctx.op.options.get("axis", 0)), rank)
    if isinstance(axis, str):
        return axis
    for t in ins:
        if len(t.shape) != rank or any(a != b for d, (a, b) in enumerate(zip(t.shape, y.shape))
                                       if d != axis):
            return f"input {list(t.shape)} does not fit output {list(y.shape)} on axis {axis}"
    if sum(t.shape[axis] for t in ins) != y.shape[axis]:
        return f"inputs do not add up to the output's {y.shape[axis]} along axis {axis}"
    return None


@lowering("CONCATENATION", check=_check_concat)
def lower_concatenation(ctx: LowerCtx) -> LayerCode:
    ins = [ctx.input(i) for i in range(len(ctx.op.inputs))]
    y = ctx.output(0)
    axis = normalize_axis(int(ctx.op.options.get("axis", 0)), len(y.shape))
    outer = int(np.prod(y.shape[:axis], dtype=np.int64))
    inner = int(np.prod(y.shape[axis + 1:], dtype=np.int64)) * elem_bytes(y)
    rows = [int(t.shape[axis]) * inner for t in ins]
    body = _concat_body(ctx, "kiln_concat", outer, rows, ins, y)
    return LayerCode(kernel="kiln_concat", body=body, summary=f"axis {axis}, {len(ins)} inputs")


def _check_pack(ctx: LowerCtx) -> str | None:
    ins = [ctx.input(i) for i in range(len(ctx.op.inputs))]
    y = ctx.output(0)
    reason = check_moves(ctx, ins, [y])
    if reason:
        return reason
    axis = normalize_axis(int(ctx.op.options.get("axis", 0)), len(y.shape))
    if isinstance(axis, str):
        return axis
    want = list(ins[0].shape[:axis]) + [len(ins)] + list(ins[0].shape[axis:])
    if any(tuple(t.shape) != tuple(ins[0].shape) for t in ins) or list(y.shape) != want:
        return f"inputs {[list(t.shape) for t in ins]} do not stack to {list(y.shape)}"
    return None


@lowering("PACK", check=_check_pack)
def lower_pack(ctx: LowerCtx) -> LayerCode:
    ins = [ctx.input(i) for i in range(len(ctx.op.inputs))]
    y = ctx.output(0)
    axis = normalize_axis(int(ctx.op.options.get("axis", 0)), len(y.shape))
    outer = int(np.prod(y.shape[:axis], dtype=np.int64))
    inner = int(np.prod(y.shape[axis + 1:], dtype=np.int64)) * elem_bytes(y)
    body = _concat_body(ctx, "kiln_concat", outer, [inner] * len(ins), ins, y)
    return LayerCode(kernel="kiln_concat", body=body, summary=f"axis {axis}, {len(ins)} inputs")


def _split_parts(ctx: LowerCtx) -> tuple[Tensor, int] | str:
    """(data input, resolved axis) of SPLIT / SPLIT_V / UNPACK."""
    t = ctx.op.type
    if t == "UNPACK":
        x = ctx.input(0)
        return x, normalize_axis(int(ctx.op.options.get("axis", 0)), len(x.shape))
    x, axis_t = (ctx.input(1), ctx.input(0)) if t == "SPLIT" else (ctx.input(0), ctx.input(2))
    axis = const_ints(axis_t, "axis")
    if isinstance(axis, str):
        return axis
    if x is None or axis.size != 1:
        return "SPLIT needs an input and a scalar axis"
    return x, normalize_axis(int(axis.reshape(-1)[0]), len(x.shape))


def _check_split(ctx: LowerCtx) -> str | None:
    parts = _split_parts(ctx)
    if isinstance(parts, str):
        return parts
    x, axis = parts
    if isinstance(axis, str):
        return axis
    outs = [ctx.output(i) for i in range(len(ctx.op.outputs))]
    reason = check_moves(ctx, [x], outs)
    if reason:
        return reason
    unpack = ctx.op.type == "UNPACK"
    for o in outs:
        want = [e for d, e in enumerate(x.shape) if d != axis] if unpack else \
            [o.shape[d] if d == axis else e for d, e in enumerate(x.shape)]
        if list(o.shape) != want:
            return f"output {list(o.shape)} is not a slice of {list(x.shape)} on axis {axis}"
    total = len(outs) if unpack else sum(o.shape[axis] for o in outs)
    if total != x.shape[axis]:
        return f"outputs cover {total} of the input's {x.shape[axis]} along axis {axis}"
    return None


@lowering("SPLIT", "SPLIT_V", "UNPACK", check=_check_split)
def lower_split(ctx: LowerCtx) -> LayerCode:
    x, axis = _split_parts(ctx)
    outs = [ctx.output(i) for i in range(len(ctx.op.outputs))]
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64)) * elem_bytes(x)
    extents = [1 if ctx.op.type == "UNPACK" else int(o.shape[axis]) for o in outs]
    body = _concat_body(ctx, "kiln_split", outer, [e * inner for e in extents], outs, x)
    return LayerCode(kernel="kiln_split", body=body,
                     summary=f"axis {axis}, {len(outs)} outputs {extents}")


# --------------------------------------------------------------------------- PAD


def pad_dims(shape, paddings) -> tuple[list[int], list[int], list[int]]:
    """(extents, before, after), a dimension folded into its outer neighbour wherever it
    has no padding (an unpadded inner dimension only scales the outer one's row)."""
    dims = [[int(e), int(b), int(a)] for e, (b, a) in zip(shape, paddings)]
    merged: list[list[int]] = []
    for e, b, a in dims:
        if merged and b == 0 and a == 0:
            merged[-1] = [merged[-1][0] * e, merged[-1][1] * e, merged[-1][2] * e]
        else:
            merged.append([e, b, a])
    merged = [d for d in merged if d != [1, 0, 0]] or [[1, 0, 0]]
    return [d[0] for d in merged], [d[1] for d in merged], [d[2] for d in merged]


def _pad_value(ctx: LowerCtx) -> tuple[str, str] | str:
    """(C declaration, C expression of the pad value's address)."""
    x, y = ctx.input(0), ctx.output(0)
    c = ctx.input(2) if ctx.op.type == "PADV2" else None
    ctype = {1: "int8_t", 2: "int16_t", 4: "int32_t", 8: "int64_t"}[elem_bytes(x)]
    if c is not None:
        if not c.is_const:
            return "constant_values must be a constant"
        if c.dtype != x.dtype or c.size != 1:
            return f"constant_values must be one {x.dtype} value"
        if x.quant is not None and not _same_quant(c, y):
            return "constant_values is quantized differently from the output"
        value = int(np.asarray(c.data).reshape(-1)[0])
    elif y.quant is not None and x.dtype in ("int8", "uint8"):
        value = int(y.quant.zero_point[0])    # TFLite pads int8 with the output zero point
    else:
        value = 0
    return f"static const {ctype} pad_value = {value};\n", "&pad_value"


def _check_pad(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    p = const_ints(ctx.input(1), "paddings")
    if isinstance(p, str):
        return p
    if p.shape != (len(x.shape), 2) or (p < 0).any():
        return f"paddings {p.tolist()} do not fit a rank-{len(x.shape)} input"
    want = [int(e + b + a) for e, (b, a) in zip(x.shape, p)]
    if list(y.shape) != want:
        return f"output shape {list(y.shape)} != {want}"
    value = _pad_value(ctx)
    return value if isinstance(value, str) else None


@lowering("PAD", "PADV2", check=_check_pad)
def lower_pad(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    paddings = ctx.input(1).data.reshape(-1, 2).tolist()
    ext, before, after = pad_dims(x.shape, paddings)   # rank <= MAX_RANK == PAD_MAX_DIMS
    lead = PAD_MAX_DIMS - len(ext)
    decl, value = _pad_value(ctx)
    body = (decl +
            "static const kiln_pad_params_t params = {\n"
            f"    .elem_size = {elem_bytes(x)},\n"
            f"    .in_shape = {c_array([1] * lead + ext)},\n"
            f"    .before = {c_array([0] * lead + before)},\n"
            f"    .after = {c_array([0] * lead + after)},\n"
            "};\n"
            f"return kiln_pad(&params, {value}, {ctx.ptr(x)}, {ctx.ptr(y)});\n")
    return LayerCode(kernel="kiln_pad", body=body, summary=f"paddings {paddings}")


# --------------------------------------------------------------------------- RESIZE_NEAREST


def nearest_map(in_size: int, out_size: int, align_corners: bool,
                half_pixel_centers: bool) -> np.ndarray:
    """TFLite's GetNearestNeighbor for every output index, in float32 as TFLite computes."""
    f32 = np.float32
    if align_corners and out_size > 1:
        scale = f32(in_size - 1) / f32(out_size - 1)
    else:
        scale = f32(in_size) / f32(out_size)
    offset = f32(0.5) if half_pixel_centers else f32(0.0)
    out = []
    for i in range(out_size):
        v = f32(f32(i) + offset) * scale
        idx = int(round_half_away(float(v))) if align_corners else int(math.floor(float(v)))
        idx = min(idx, in_size - 1)
        if half_pixel_centers:
            idx = max(0, idx)
        out.append(idx)
    return np.array(out, dtype=np.int32)


def _check_resize(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    size = const_ints(ctx.input(1), "size")
    if isinstance(size, str):
        return size
    if len(x.shape) != 4 or len(y.shape) != 4:
        return "RESIZE_NEAREST_NEIGHBOR needs 4-D NHWC tensors"
    if size.reshape(-1).tolist() != list(y.shape[1:3]) or (x.shape[0], x.shape[3]) != (
            y.shape[0], y.shape[3]):
        return f"output shape {list(y.shape)} does not match size {size.reshape(-1).tolist()}"
    return None


@lowering("RESIZE_NEAREST_NEIGHBOR", check=_check_resize)
def lower_resize_nearest(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    ac = bool(ctx.op.options.get("align_corners", False))
    hp = bool(ctx.op.options.get("half_pixel_centers", False))
    n, h, w, c = x.shape
    _, oh, ow, _ = y.shape
    ymap = ctx.const("y_map", nearest_map(h, oh, ac, hp), "int32_t",
                     f"input row of each output row ({h} -> {oh})")
    xmap = ctx.const("x_map", nearest_map(w, ow, ac, hp), "int32_t",
                     f"input column of each output column ({w} -> {ow})")
    body = ("static const kiln_resize_nearest_params_t params = {\n"
            f"    .elem_size = {elem_bytes(x)},\n"
            f"    .input = {{{n}, {h}, {w}, {c}}},\n"
            f"    .output = {{{n}, {oh}, {ow}, {c}}},\n"
            f"    .y_map = {ymap},\n"
            f"    .x_map = {xmap},\n"
            "};\n"
            f"return kiln_resize_nearest(&params, {ctx.ptr(x)}, {ctx.ptr(y)});\n")
    summary = f"align_corners {str(ac).lower()}, half_pixel_centers {str(hp).lower()}"
    return LayerCode(kernel="kiln_resize_nearest", body=body, summary=summary)


# --------------------------------------------------------------------------- SPACE/BATCH


def _space_batch_args(ctx: LowerCtx) -> tuple[list[int], list[list[int]]] | str:
    x = ctx.input(0)
    block = const_ints(ctx.input(1), "block_shape")
    if isinstance(block, str):
        return block
    what = "paddings" if ctx.op.type == "SPACE_TO_BATCH_ND" else "crops"
    margins = const_ints(ctx.input(2), what)
    if isinstance(margins, str):
        return margins
    spatial = len(x.shape) - 2
    if len(x.shape) not in (3, 4):
        return f"rank {len(x.shape)} input (3-D or 4-D expected)"
    block = block.reshape(-1).tolist()
    if len(block) != spatial or margins.shape != (spatial, 2):
        return f"block_shape {block} / margins {margins.tolist()} do not fit {list(x.shape)}"
    if min(block) < 1 or (margins < 0).any():
        return "block sizes must be >= 1 and paddings/crops >= 0"
    return block, margins.tolist()


def _nhwc(shape) -> list[int]:
    return list(shape) if len(shape) == 4 else [shape[0], shape[1], 1, shape[2]]


def _check_space_batch(ctx: LowerCtx) -> str | None:
    x, y = ctx.input(0), ctx.output(0)
    reason = check_moves(ctx, [x], [y])
    if reason:
        return reason
    if x.dtype == "int16" and x.quant is not None and x.quant.zero_point.any():
        # TFLite's rule (tflite-micro has no int16 kernel): int16 pads with 0.
        return f"int16 tensors with zero point {int(x.quant.zero_point[0])} (0 required)"
    args = _space_batch_args(ctx)
    if isinstance(args, str):
        return args
    block, margins = args
    spatial = len(block)
    prod = int(np.prod(block))
    if ctx.op.type == "SPACE_TO_BATCH_ND":
        sizes = [x.shape[1 + i] + margins[i][0] + margins[i][1] for i in range(spatial)]
        if any(s % b for s, b in zip(sizes, block)):
            return f"padded spatial sizes {sizes} are not multiples of block {block}"
        want = [x.shape[0] * prod] + [s // b for s, b in zip(sizes, block)] + [x.shape[-1]]
    else:
        if x.shape[0] % prod:
            return f"batch {x.shape[0]} is not a multiple of the block size {prod}"
        want = [x.shape[0] // prod] + [x.shape[1 + i] * block[i] - margins[i][0] - margins[i][1]
                                       for i in range(spatial)] + [x.shape[-1]]
    if list(y.shape) != want:
        return f"output shape {list(y.shape)} != {want}"
    return None


def _space_batch_body(ctx: LowerCtx, kernel: str, pad: tuple[str, str] | None) -> str:
    x, y = ctx.input(0), ctx.output(0)
    block, margins = _space_batch_args(ctx)
    bh, bw = (block + [1])[:2]
    mh, mw = ([m[0] for m in margins] + [0])[:2]
    decl, args = (pad[0], f"{pad[1]}, ") if pad else ("", "")
    return (decl +
            "static const kiln_space_batch_params_t params = {\n"
            f"    .elem_size = {elem_bytes(x)},\n"
            f"    .input = {c_array(_nhwc(x.shape))},\n"
            f"    .output = {c_array(_nhwc(y.shape))},\n"
            f"    .block = {{{bh}, {bw}}},\n"
            f"    .margin = {{{mh}, {mw}}},\n"
            "};\n"
            f"return {kernel}(&params, {args}{ctx.ptr(x)}, {ctx.ptr(y)});\n")


@lowering("SPACE_TO_BATCH_ND", check=_check_space_batch)
def lower_space_to_batch(ctx: LowerCtx) -> LayerCode:
    x, y = ctx.input(0), ctx.output(0)
    ctype = {1: "int8_t", 2: "int16_t", 4: "int32_t", 8: "int64_t"}[elem_bytes(x)]
    zp = int(y.quant.zero_point[0]) if y.quant is not None and x.dtype in ("int8", "uint8") else 0
    pad = (f"static const {ctype} pad_value = {zp};\n", "&pad_value")
    block, margins = _space_batch_args(ctx)
    return LayerCode(kernel="kiln_space_to_batch",
                     body=_space_batch_body(ctx, "kiln_space_to_batch", pad),
                     summary=f"block {block}, paddings {margins}")


@lowering("BATCH_TO_SPACE_ND", check=_check_space_batch)
def lower_batch_to_space(ctx: LowerCtx) -> LayerCode:
    block, margins = _space_batch_args(ctx)
    return LayerCode(kernel="kiln_batch_to_space",
                     body=_space_batch_body(ctx, "kiln_batch_to_space", None),
                     summary=f"block {block}, crops {margins}")
