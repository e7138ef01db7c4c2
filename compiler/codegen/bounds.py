"""Compile-time proof that the C kernels' int32_t arithmetic cannot overflow.

Python reasons in unbounded integers; the kernels compute dims, indices, offsets and
loop bounds in int32_t (kiln_dims_t, kiln_tile_t, loop counters, kiln_context_t.size).
A model may declare values (dims, strides, dilations, paddings, filter sizes) whose
products leave int32: the C would then wrap (undefined behaviour) and read or write
outside its buffers. This module is the one place that proves, before any C is
written, that every such quantity fits, at three levels:

- every tensor (whatever op reads it): its element count, the stride of each axis
  and its byte size (`tensor_extremes`, checked by `check_tensors`);
- every op: the extreme values its kernel computes, declared beside its lowering
  (compiler/codegen/ops/*.py) with `@extremes("CONV_2D")`: fn(ctx) returns (what,
  value) pairs, `what` written as the C kernel's expression, for an op its lowering's
  check accepted. `window_extremes` is the shared declaration of the
  sliding-window kernels (conv, depthwise conv, pooling);
- the memory plan: the arena size, every buffer's end (offsets and scratch sizes), and
  every constant array's size (`check_plan`).

Each value is the largest magnitude the expression reaches (all terms taken with
their largest magnitude, so every partial sum the C forms in any order fits too). A
value beyond the limit is a ModelError naming the op or tensor, the quantity and the
limit. Lowerings may then use plain Python ints: nothing they emit can wrap in C.
"""

from __future__ import annotations

from typing import Callable, Iterable

from ..errors import ModelError
from ..ir import DTYPES, Graph, Tensor
from ..numerics import INT32_MAX

Extreme = tuple[str, int]                   # (C expression, its largest magnitude)
ExtremesFn = Callable[..., Iterable[Extreme]]


def beyond(extremes: Iterable[Extreme], limit: int = INT32_MAX) -> str | None:
    """The first quantity whose magnitude exceeds `limit`, as a reason; else None."""
    for what, value in extremes:
        if abs(int(value)) > limit:
            return f"{what} reaches {int(value):,}, more than int32_t holds ({limit:,})"
    return None


def require_int32(where: str, what: str, value: int, limit: int = INT32_MAX) -> None:
    """Raise ModelError("<where>: <what> reaches <value>, beyond ...") if |value| > limit."""
    reason = beyond([(what, value)], limit)
    if reason:
        raise ModelError(f"{where}: {reason}")


# --- tensors ---------------------------------------------------------------------------

def tensor_extremes(t: Tensor) -> list[Extreme]:
    """What any kernel may compute from a tensor's shape: the stride of each axis (the
    product of the dims after it, a 0 dim counted as 1 so an empty tensor's strides are
    bounded too), the element count, and the byte size."""
    out: list[Extreme] = []
    stride = 1
    for axis in range(len(t.shape) - 1, -1, -1):
        stride *= max(int(t.shape[axis]), 1)
        out.append((f"the product of dims {axis}.. of shape {list(t.shape)}", stride))
    item = DTYPES[t.dtype].itemsize if t.dtype in DTYPES else 1
    out.append((f"the byte size of shape {list(t.shape)} {t.dtype}", stride * item))
    return out


def check_tensors(graph: Graph) -> None:
    """Every tensor's element count, axis strides and byte size fit int32."""
    for t in graph.tensors:
        reason = beyond(tensor_extremes(t))
        if reason:
            raise ModelError(f"tensor {t.id} ({t.name}): {reason}")


# --- ops -------------------------------------------------------------------------------

def window_extremes(axis: str, in_size: int, out_size: int, filter_size: int, stride: int,
                    dilation: int, padding: int) -> list[Extreme]:
    """The values a sliding-window kernel computes along one axis (conv2d.c, dwconv*.c,
    conv2d_gemm.c, conv_inplace.c, pool.c): the window origin o = out * stride - padding,
    the tap index o + k * dilation, the clipped tap range (-o + dilation - 1) / dilation
    and (in - 1 - o) / dilation + 1. All are bounded by the last one's reach."""
    last = (out_size - 1) * stride
    extent = (filter_size - 1) * dilation + 1
    return [
        (f"the dilated filter extent (filter_{axis} - 1) * dilation_{axis} + 1", extent),
        (f"the last window's start (out_{axis} - 1) * stride_{axis}", last),
        (f"the window reach (out_{axis} - 1) * stride_{axis} + padding_{axis} + "
         f"(filter_{axis} - 1) * dilation_{axis} + dilation_{axis} + in_{axis}",
         last + padding + extent + dilation + in_size),
    ]


EXTREMES: dict[str, ExtremesFn] = {}


def extremes(*op_types: str):
    """Register the function declaring the extreme values an op type's kernel computes."""

    def register(fn: ExtremesFn) -> ExtremesFn:
        for t in op_types:
            if t in EXTREMES:
                raise RuntimeError(f"two extremes declarations for {t}")
            EXTREMES[t] = fn
        return fn

    return register


def op_problem(ctx) -> str | None:
    """Why an op's kernel could overflow int32 (its declared extremes), or None."""
    fn = EXTREMES.get(ctx.op.type)
    return beyond(fn(ctx)) if fn is not None else None


# --- the memory plan -------------------------------------------------------------------

def check_plan(plan, consts: dict) -> None:
    """The arena, every buffer's end offset in it, and every constant array fit int32
    (kernels index them and kiln_context_t carries scratch sizes as int32_t)."""
    require_int32("the memory plan", "the arena size in bytes", plan.arena_bytes)
    for b in plan.buffers:
        require_int32(f"arena buffer {b.name}", "its end offset in the arena", b.offset + b.size)
    for c in consts.values():
        require_int32(f"constant {c.name}", "its size in bytes", int(c.values.nbytes))
