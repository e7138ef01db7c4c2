"""Lowerings: ADD, SUB, MUL, MAXIMUM, MINIMUM at int8 and int16 (with broadcasting).

Parameters are derived as TFLM's Prepare() does (add_common.cc, sub_common.cc,
mul_common.cc): multipliers in double from the float32 scales. int16 (16x8 models) is
symmetric: TFLM requires zero point 0 for MUL, and kiln for all three (what the
converter writes). TFLM runs int16 ADD/SUB on the general path with a left shift of 15
whatever the options' pot_scale_int16 says, so kiln does too. Broadcast shapes are
collapsed here, so the kernel sees at most 4 dims with the longest possible innermost run.
Large ADD/SUB use a table variant (`kiln_add_lut_s8`, `kiln_add_lut_same_s8` without
broadcasting); `add_variant` is the one place that chooses.
"""

from __future__ import annotations

import numpy as np

from ...numerics import activation_range, quantize_multiplier, requantize
from ..lowering import LayerCode, LowerCtx, lowering, qparams

_LEFT_SHIFT = 20            # TFLM's headroom for int8 ADD/SUB
_LEFT_SHIFT_S16 = 15        # and for int16 ADD/SUB (65535 << 15 < 2^31)
_RANGES = {"int8": (-128, 127), "int16": (-32768, 32767)}
# ADD/SUB over at least this many output elements use kiln_add_lut_s8: a shift and a 1 KB
# table of pre-scaled inputs replace two of the three multiplies per element.
ADD_LUT_MIN_ELEMENTS = 1024
# The table's bytes, and the knob that builds it at run time in the layer's scratch
# instead of flash (fit.tables_to_scratch, chosen by the schedule where the arena keeps
# its size).
ADD_TABLE_BYTES = 256 * 4
ADD_LUT_KERNELS = ("kiln_add_lut_s8", "kiln_add_lut_same_s8")
TABLE_IN_SCRATCH = "scratch"
_QUANTIZED_ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


# --- broadcasting --------------------------------------------------------------------

def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy-style broadcast of two shapes, or None if they do not broadcast."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            return None
        out.append(max(x, y))
    return tuple(out)


def collapse_broadcast(a: tuple[int, ...], b: tuple[int, ...],
                       out: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Merge adjacent output dims that each input reads the same way (whole or
    broadcast), drop unit dims. Returns [a_dims, b_dims, out_dims] of equal rank >= 1."""
    rank = len(out)
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    groups: list[list] = []     # [a_broadcasts, b_broadcasts, extent]
    for x, y, o in zip(a, b, out):
        if o == 1:
            continue
        key = (x == 1, y == 1)
        if groups and (groups[-1][0], groups[-1][1]) == key:
            groups[-1][2] *= o
        else:
            groups.append([key[0], key[1], o])
    if not groups:
        return [(1,), (1,), (1,)]
    return [tuple(1 if g[0] else g[2] for g in groups),
            tuple(1 if g[1] else g[2] for g in groups),
            tuple(g[2] for g in groups)]


def _strip_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def _dims_literal(shape: tuple[int, ...]) -> str:
    n, h, w, c = (1,) * (4 - len(shape)) + tuple(shape)
    return f"{{{n}, {h}, {w}, {c}}}"


# --- checks --------------------------------------------------------------------------

def check_broadcast_int8(ctx: LowerCtx) -> str | None:
    """Two int8 inputs that broadcast to the int8 output in at most 4 merged dims (what
    the C broadcast walk, crt/kernels/broadcast.h, takes)."""
    return check_broadcast(ctx, ("int8",))


def check_broadcast(ctx: LowerCtx, dtypes: tuple[str, ...]) -> str | None:
    """Two inputs of one of `dtypes` that broadcast to an output of the same type in at
    most 4 merged dims."""
    a, b, out = ctx.input(0), ctx.input(1), ctx.output(0)
    if a is None or b is None:
        return "needs two inputs"
    if not (a.dtype == b.dtype == out.dtype and a.dtype in dtypes):
        return (f"only {' or '.join(dtypes)} is supported "
                f"(got {a.dtype}, {b.dtype} -> {out.dtype})")
    shape = broadcast_shape(a.shape, b.shape)
    if shape is None or _strip_ones(shape) != _strip_ones(out.shape):
        return (f"input shapes {list(a.shape)} and {list(b.shape)} do not broadcast to "
                f"{list(out.shape)}")
    if len(collapse_broadcast(a.shape, b.shape, tuple(shape))[2]) > 4:
        return "the broadcast pattern needs more than 4 dimensions after merging"
    return None


def _check_binary(ctx: LowerCtx, quantized: bool = True) -> str | None:
    problem = check_broadcast(ctx, ("int8", "int16"))
    if problem:
        return problem
    a, b, out = ctx.input(0), ctx.input(1), ctx.output(0)
    if quantized:
        for t in (a, b, out):
            if t.quant is None or t.quant.per_channel:
                return f"tensor {t.name} needs per-tensor quantization"
            if float(t.quant.scale[0]) <= 0:
                return f"tensor {t.name} has a non-positive scale"
            if t.dtype == "int16" and qparams(t)[1] != 0:
                return (f"int16 tensor {t.name} has zero point {qparams(t)[1]}; 16x8 "
                        "quantization is symmetric (zero point 0)")
        act = ctx.op.options.get("fused_activation_function", "NONE")
        if act not in _QUANTIZED_ACTIVATIONS:
            return f"fused activation {act} is not supported on {a.dtype}"
        lo, hi = _fused_range(ctx)
        if lo > hi:
            return f"fused activation {act} leaves an empty output range [{lo}, {hi}]"
    return None


def _fused_range(ctx: LowerCtx) -> tuple[int, int]:
    """The fused activation's clamp in the output's quantized domain and type range."""
    out = ctx.output(0)
    scale, zp = qparams(out)
    act = ctx.op.options.get("fused_activation_function", "NONE")
    return activation_range(act, scale, zp, *_RANGES[out.dtype])


def _check_add(ctx: LowerCtx) -> str | None:
    problem = _check_binary(ctx)
    if problem:
        return problem
    _, _, real_out = _add_multipliers(ctx)
    if not 0.0 < real_out < 1.0:
        return (f"output multiplier {real_out:.6g} is not below one (output scale too small "
                "for the input scales); TFLM rejects it too")
    return None


def _check_mul(ctx: LowerCtx) -> str | None:
    problem = _check_binary(ctx)
    if problem:
        return problem
    s1, _ = qparams(ctx.input(0))
    s2, _ = qparams(ctx.input(1))
    so, _ = qparams(ctx.output(0))
    _, shift = quantize_multiplier(s1 * s2 / so)
    if shift > 30:
        return f"multiplier {s1 * s2 / so:.6g} is too large (shift {shift} > 30)"
    return None


# --- parameter derivation ------------------------------------------------------------

def _left_shift(ctx: LowerCtx) -> int:
    return _LEFT_SHIFT_S16 if ctx.output(0).dtype == "int16" else _LEFT_SHIFT


def _add_multipliers(ctx: LowerCtx) -> tuple[float, float, float]:
    """The input1, input2 and output real multipliers of ADD and SUB, in double from the
    float32 scales (add_common.cc). Some TFLM sources divide SUB's scales in float32
    first; the tflite-micro interpreter kiln is tested against computes SUB in double,
    and tests pin scale combinations where the two differ."""
    s1, _ = qparams(ctx.input(0))
    s2, _ = qparams(ctx.input(1))
    so, _ = qparams(ctx.output(0))
    twice_max = 2.0 * max(s1, s2)
    return s1 / twice_max, s2 / twice_max, twice_max / ((1 << _left_shift(ctx)) * so)


def _requant_literal(real: float) -> str:
    m, s = quantize_multiplier(real)
    return f"{{{m}, {s}}}"


def _dims_decls(ctx: LowerCtx) -> tuple[str, list[str]]:
    a, b, out = ctx.input(0), ctx.input(1), ctx.output(0)
    shape = broadcast_shape(a.shape, b.shape)
    da, db, do = collapse_broadcast(a.shape, b.shape, tuple(shape))
    lines = [f"static const kiln_dims_t input1_dims = {_dims_literal(da)};",
             f"static const kiln_dims_t input2_dims = {_dims_literal(db)};",
             f"static const kiln_dims_t output_dims = {_dims_literal(do)};"]
    if da == db == do:
        summary = f"{out.size} elements"
    else:
        summary = f"broadcast {list(da)} x {list(db)} -> {list(do)} (merged dims)"
    return summary, lines


def _call(kernel: str, ctx: LowerCtx, params: str | None) -> str:
    a, b, out = ctx.input(0), ctx.input(1), ctx.output(0)
    args = ([params] if params else []) + [
        "&input1_dims", ctx.ptr(a), "&input2_dims", ctx.ptr(b), "&output_dims", ctx.ptr(out)]
    return f"return {kernel}({', '.join(args)});"


# --- lowerings -----------------------------------------------------------------------

def add_variant(op_type: str, output_elements: int, dtype: str = "int8",
                mve: bool = False, shifted: bool = True, same_shape: bool = False) -> str:
    """The ADD/SUB kernel for an output of this many elements (the only place the
    choice is made); `mve`: an MVE target and inputs of the output's shape, where the
    Helium kernel (crt/kernels/elementwise_mve.c) takes every size; `shifted`: one input
    rescales by a shift (`shifted_input`), which the table variant needs; `same_shape`:
    both inputs have the output's shape, so the table variant needs no broadcast walk
    (kiln_add_lut_same_s8: a firmware without broadcasts links none)."""
    if dtype == "int16":
        return "kiln_add_s16" if op_type == "ADD" else "kiln_sub_s16"
    if mve:
        return "kiln_add_mve_s8" if op_type == "ADD" else "kiln_sub_mve_s8"
    if output_elements >= ADD_LUT_MIN_ELEMENTS and shifted:
        return "kiln_add_lut_same_s8" if same_shape else "kiln_add_lut_s8"
    return "kiln_add_s8" if op_type == "ADD" else "kiln_sub_s8"


def add_input_table(zero_point: int, real_multiplier: float) -> np.ndarray:
    """Every int8 input on ADD's common scale: MultiplyByQuantizedMultiplierSmallerThanOneExp
    of (x - zero_point) << 20, entry i for x = i - 128."""
    m, shift = quantize_multiplier(real_multiplier)
    x = np.arange(-128, 128, dtype=np.int64) - zero_point
    return requantize(x << _LEFT_SHIFT, m, shift).astype(np.int32)


def shifted_input(z1: int, r1: float, z2: int, r2: float) -> int | None:
    """1 or 2: an input whose rescaling to ADD's common scale is exactly
    (x - zero_point) << 19 for every int8 x (its multiplier is 1/2: the input with the
    larger scale, as the common scale is twice that), or None. kiln_add_lut_s8 adds that
    input as a shift and needs a table only for the other one."""
    x = np.arange(-128, 128, dtype=np.int64)
    for index, (z, r) in ((2, (z2, r2)), (1, (z1, r1))):
        if np.array_equal(add_input_table(z, r), (x - z) << (_LEFT_SHIFT - 1)):
            return index
    return None


def add_lut_table(op_type: str, shifted: int, z1: int, r1: float,
                  z2: int, r2: float) -> tuple[np.ndarray, int]:
    """(kiln_add_lut_s8's table, the shifted input's sign): the table input's values on
    the common scale (negated for SUB's input2) minus the shifted input's zero-point term,
    so that table[u] + sign * (v << 19) is TFLM's sum (or difference) of the rescaled
    inputs for every pair of int8 values."""
    signs = {1: 1, 2: 1 if op_type == "ADD" else -1}
    (zu, ru), zv = ((z2, r2), z1) if shifted == 1 else ((z1, r1), z2)
    table = signs[3 - shifted] * add_input_table(zu, ru).astype(np.int64) \
        - signs[shifted] * (zv << (_LEFT_SHIFT - 1))
    assert int(np.abs(table).max()) < (1 << 30)       # the kernel's bound (elementwise.h)
    return table.astype(np.int32), signs[shifted]


@lowering("ADD", "SUB", check=_check_add)
def lower_add(ctx: LowerCtx) -> LayerCode:
    a, b, out = ctx.input(0), ctx.input(1), ctx.output(0)
    _, z1 = qparams(a)
    _, z2 = qparams(b)
    _, zo = qparams(out)
    r1, r2, ro = _add_multipliers(ctx)
    lo, hi = _fused_range(ctx)
    summary, dims = _dims_decls(ctx)
    act = ctx.op.options.get("fused_activation_function", "NONE")
    shifted = shifted_input(z1, r1, z2, r2) if out.dtype == "int8" else None
    # The table variant requantizes its output as kiln_requantize_fast does, which needs
    # an output shift <= -2 (an output scale at least 2^-18 of the common scale's).
    if quantize_multiplier(ro)[1] > -2:
        shifted = None
    same = a.size == b.size == out.size        # (broadcast shapes: then no broadcast)
    kernel = add_variant(ctx.op.type, out.size, out.dtype,
                         ctx.target.mve and tuple(a.shape) == tuple(b.shape) == tuple(out.shape),
                         shifted is not None, same)
    scratch = 0
    knobs: dict = {}
    if kernel in ADD_LUT_KERNELS:
        table, sign = add_lut_table(ctx.op.type, shifted, z1, r1, z2, r2)
        (zu, ru), zv = ((z2, r2), z1) if shifted == 1 else ((z1, r1), z2)
        negated = ", negated" if ctx.op.type == "SUB" and shifted == 1 else ""
        x_zu = f"x - {zu}" if zu >= 0 else f"x + {-zu}"
        what = (f"{ctx.op.type} input{3 - shifted} on the common scale ({x_zu}) << 20 * "
                f"{ru:.9g}{negated}, minus {sign} * ({zv} << 19) of input{shifted}")
        if (ctx.knobs or {}).get("table") == TABLE_IN_SCRATCH:
            # Built at run time into the layer's scratch (elementwise.h): no flash.
            knobs, scratch = {"table": TABLE_IN_SCRATCH}, ADD_TABLE_BYTES
            t = "(const int32_t *)scratch"
            params = [f"/* The table: {what}. */",
                      "static const kiln_add_lut_table_params_t table_params = {",
                      f"    .input = {_requant_literal(ru)}, /* {ru:.9g} */",
                      f"    .input_offset = {-zu},",
                      f"    .sign = {-1 if negated else 1},",
                      f"    .shifted_term = {sign * (zv << (_LEFT_SHIFT - 1))},",
                      "};",
                      "const kiln_status_t built = kiln_add_lut_table_s8(&table_params, "
                      "(int32_t *)scratch);",
                      "if (built != KILN_OK) {",
                      "    return built;",
                      "}"]
            static = ""
        else:
            t = ctx.const("input_table", table, "int32_t", what)
            params, static = [], "static "
        params += [
            f"{static}const kiln_add_lut_params_t params = {{",
            f"    .table = {t},",
            f"    .shifted_input = {shifted}, /* (x - {zv}) << 19: multiplier 0.5 */",
            f"    .shifted_sign = {sign},",
            f"    .output_offset = {zo},",
            f"    .output = {_requant_literal(ro)}, /* {ro:.9g} */",
            f"    .activation = {{{lo}, {hi}}}, /* {act} */",
            "};"]
    else:
        params = [
            "static const kiln_add_params_t params = {",
            f"    .input1_offset = {-z1},",
            f"    .input2_offset = {-z2},",
            f"    .output_offset = {zo},",
            f"    .left_shift = {_left_shift(ctx)},",
            f"    .input1 = {_requant_literal(r1)}, /* {r1:.9g} */",
            f"    .input2 = {_requant_literal(r2)}, /* {r2:.9g} */",
            f"    .output = {_requant_literal(ro)}, /* {ro:.9g} */",
            f"    .activation = {{{lo}, {hi}}}, /* {act} */",
            "};"]
    body = [*params, *dims, _call(kernel, ctx, "&params")]
    return LayerCode(kernel=kernel, body="\n".join(body), summary=summary,
                     scratch_bytes=scratch, knobs=knobs)


@lowering("MUL", check=_check_mul)
def lower_mul(ctx: LowerCtx) -> LayerCode:
    a, b, out = ctx.input(0), ctx.input(1), ctx.output(0)
    s1, z1 = qparams(a)
    s2, z2 = qparams(b)
    so, zo = qparams(out)
    real = s1 * s2 / so                      # double, as mul_common.cc
    lo, hi = _fused_range(ctx)
    kernel = "kiln_mul_s16" if out.dtype == "int16" else "kiln_mul_s8"
    summary, dims = _dims_decls(ctx)
    act = ctx.op.options.get("fused_activation_function", "NONE")
    body = [
        "static const kiln_mul_params_t params = {",
        f"    .input1_offset = {-z1},",
        f"    .input2_offset = {-z2},",
        f"    .output_offset = {zo},",
        f"    .output = {_requant_literal(real)}, /* {real:.9g} */",
        f"    .activation = {{{lo}, {hi}}}, /* {act} */",
        "};",
        *dims,
        _call(kernel, ctx, "&params"),
    ]
    return LayerCode(kernel=kernel, body="\n".join(body), summary=summary,
                     macs=out.size)


def _check_max_min(ctx: LowerCtx) -> str | None:
    return _check_binary(ctx, quantized=False)


@lowering("MAXIMUM", "MINIMUM", check=_check_max_min)
def lower_maximum_minimum(ctx: LowerCtx) -> LayerCode:
    bits = 16 if ctx.output(0).dtype == "int16" else 8
    kernel = f"kiln_{ctx.op.type.lower()}_s{bits}"
    summary, dims = _dims_decls(ctx)
    body = [*dims, _call(kernel, ctx, None)]
    return LayerCode(kernel=kernel, body="\n".join(body), summary=summary)
