"""How one IR op becomes C: the registry of lowerings and what they return.

A lowering is a function `(ctx: LowerCtx) -> LayerCode`, registered per TFLite op
type with `@lowering("CONV_2D")`. It writes the body of the layer's C function with
the tensor pointer names `ctx.ptr(tid)` gives it (the emitter declares them from the
memory plan), asks `ctx.const(...)` for constant arrays (weights, multipliers), and
declares the scratch it needs; the body refers to scratch as `scratch`.

Each registration also carries a `check(ctx) -> str | None` that says why an op
cannot be compiled (types, options), so every unsupported op is reported at once
before any code is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import ModelError
from ..ir import C_TYPES, Graph, Op, Tensor
from ..numerics import activation_range, quantize_multiplier


def c_float(value: float) -> str:
    """A finite float32 value as a C float literal that reads back exactly: 9 significant
    digits, and always a '.' or an exponent (a scale of exactly 1 is "1.0f"; "1f" is not C)."""
    text = f"{float(np.float32(value)):.9g}"
    if "." not in text and "e" not in text:
        text += ".0"
    return text + "f"


@dataclass
class ConstArray:
    name: str
    values: np.ndarray
    ctype: str
    comment: str = ""              # plain text, may quote tensor names: emit.py escapes it


@dataclass
class LayerCode:
    kernel: str                    # the kernel variant (kiln.json "kernel", tuning)
    body: str                      # C statements; the last one returns a kiln_status_t
    scratch_bytes: int = 0
    macs: int = 0
    summary: str = ""              # one line for the layer comment: stride, padding, ...
                                   # (plain text: emit.py escapes it with c_comment)
    knobs: dict = field(default_factory=dict)   # the variant's knobs (kiln.json, tuning)
    shape: Any = None              # a tunable layer's LayerShape (ops/conv.py): its workload
    called: str = ""               # the function the body calls, when not `kernel` (its
                                   # banded in-place twin: ops/inplace.py)


@dataclass
class Lowering:
    fn: Callable[["LowerCtx"], LayerCode]
    check: Callable[["LowerCtx"], str | None] | None = None


LOWERINGS: dict[str, Lowering] = {}


def lowering(*op_types: str, check: Callable[["LowerCtx"], str | None] | None = None):
    """Register a lowering for one or more TFLite op types."""

    def register(fn):
        for t in op_types:
            if t in LOWERINGS:
                raise RuntimeError(f"two lowerings registered for {t}")
            LOWERINGS[t] = Lowering(fn=fn, check=check)
        return fn

    return register


@dataclass(frozen=True)
class Target:
    """What the code is for: the board and the CPU features kernel variants depend on."""

    board: str = "host"
    cpu: str = "host"
    dsp: bool = False              # Armv7E-M/v8-M DSP extension (SMLAD, SXTB16, ...)
    mve: bool = False              # M-profile Vector Extension, integer (Helium: Cortex-M55)


@dataclass
class LowerCtx:
    graph: Graph
    op: Op
    layer: int                                     # position in the compiled op order
    consts: dict[str, ConstArray] = field(default_factory=dict)   # shared across layers
    pointers: dict[int, str] = field(default_factory=dict)         # tid → local name used
    target: Target = field(default_factory=Target)
    knobs: dict | None = None      # variant knobs forced for this layer (tuning); None: default
    # (ctype, bytes) → name of the layer-private arrays so far (shared across layers):
    # a layer whose array equals an earlier one reads that one (the unrolled steps of a
    # GRU pack the same weights; frontend/control_flow.py).
    same_consts: dict = field(default_factory=dict)

    # --- tensors -----------------------------------------------------------------
    def input(self, i: int) -> Tensor | None:
        if i >= len(self.op.inputs) or self.op.inputs[i] < 0:
            return None
        return self.graph.tensor(self.op.inputs[i])

    def output(self, i: int = 0) -> Tensor:
        return self.graph.tensor(self.op.outputs[i])

    def ptr(self, tensor: Tensor) -> str:
        """C name of a tensor's data: a local pointer into the arena, a const array, or,
        for a variable (model state), a pointer into the state region that the layer may
        read and write in place (the emitter declares it non-const)."""
        if tensor.is_const:
            return self.tensor_const(tensor)
        self.pointers[tensor.id] = tensor.c_name
        return tensor.c_name

    # --- constants ---------------------------------------------------------------
    def const(self, suffix: str, values: np.ndarray, ctype: str, comment: str = "") -> str:
        """A layer-private constant array, named l<layer>_<suffix>, or an earlier layer's
        with the same type and values."""
        values = np.ascontiguousarray(values)
        key = (ctype, values.dtype.str, values.tobytes())
        if key in self.same_consts:
            return self.same_consts[key]
        name = self._add_const(f"l{self.layer}_{suffix}", values, ctype, comment)
        self.same_consts[key] = name
        return name

    def tensor_const(self, tensor: Tensor, values: np.ndarray | None = None,
                     ctype: str | None = None) -> str:
        """A constant tensor's data (shared by every layer that reads it)."""
        values = tensor.data if values is None else values
        ctype = ctype or C_TYPES[tensor.dtype]
        return self._add_const(tensor.c_name, values, ctype,
                               f"{tensor.name} {list(tensor.shape)} {tensor.dtype}")

    def _add_const(self, name: str, values: np.ndarray, ctype: str, comment: str) -> str:
        values = np.ascontiguousarray(values)
        existing = self.consts.get(name)
        if existing is not None:
            if existing.ctype != ctype or not np.array_equal(existing.values, values):
                raise RuntimeError(f"constant {name} defined twice with different values")
            return name
        self.consts[name] = ConstArray(name=name, values=values, ctype=ctype, comment=comment)
        return name


# --- helpers lowerings share ---------------------------------------------------------

def qparams(t: Tensor) -> tuple[float, int]:
    """(scale, zero_point) of a per-tensor quantized tensor."""
    if t.quant is None:
        raise ModelError(f"tensor {t.id} ({t.name}) is not quantized")
    return t.quant.single()


def fused_range(ctx: LowerCtx, out: Tensor) -> tuple[int, int]:
    scale, zp = qparams(out)
    act = ctx.op.options.get("fused_activation_function", "NONE")
    return activation_range(act, scale, zp)


def per_channel_multipliers(in_scale: float, w_scales: np.ndarray, out_scale: float,
                            channels: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel (multiplier, shift) as TFLite derives them, in double."""
    if w_scales.size == 1:
        w_scales = np.repeat(w_scales, channels)
    mults, shifts = zip(*(quantize_multiplier(float(in_scale) * float(ws) / float(out_scale))
                          for ws in w_scales.astype(np.float32)))
    return np.array(mults, dtype=np.int32), np.array(shifts, dtype=np.int32)


def dims4(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """NHWC dims of a tensor of rank ≤ 4, leading dims padded with 1."""
    if len(shape) > 4:
        raise ModelError(f"rank {len(shape)} tensors are not supported here")
    s = (1,) * (4 - len(shape)) + tuple(shape)
    return s  # type: ignore[return-value]


def c_dims(shape: tuple[int, ...]) -> str:
    n, h, w, c = dims4(shape)
    return f"{{{n}, {h}, {w}, {c}}}"


def fmt_quant(t: Tensor) -> str:
    if t.quant is None:
        return t.dtype
    if t.quant.per_channel:
        return f"{t.dtype} per-channel({t.quant.scale.size})"
    s, z = t.quant.single()
    return f"{t.dtype} s={s:.6g} zp={z}"
