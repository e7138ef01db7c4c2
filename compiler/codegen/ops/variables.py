"""Lowerings of the resource-variable ops, over the variable tensors the frontend made of
them (compiler/frontend/resources.py; tflite-micro's read_variable.cc,
assign_variable.cc, call_once.cc):

- READ_VARIABLE(var) → value: the state's bytes copied to the value;
- ASSIGN_VARIABLE(var, value): the value's bytes copied into the state;
- CALL_ONCE(var1, init1, ...): each constant copied into its variable, the first time
  the layer runs only (a flag of its own in .bss: kiln_reset leaves it set, as
  tflite-micro's reset leaves CALL_ONCE's).

Copies of raw bytes, as tflite-micro's: a value and its variable have the same type and
size (checked by the frontend), whatever their quantization.
"""

from __future__ import annotations

from ..lowering import LayerCode, LowerCtx, lowering


def _check_copy(ctx: LowerCtx) -> str | None:
    pairs = _pairs(ctx)
    for var, value in pairs:
        if var is None or value is None or not var.is_variable:
            return "expects a variable tensor and a value"
        if var.dtype != value.dtype or var.nbytes != value.nbytes:
            return (f"{value.name} ({value.dtype} {list(value.shape)}) does not match the "
                    f"variable {var.name} ({var.dtype} {list(var.shape)})")
    return None


def _pairs(ctx: LowerCtx) -> list:
    """(variable, value) pairs the op copies between."""
    op = ctx.op
    if op.type == "READ_VARIABLE":
        return [(ctx.input(0), ctx.output(0) if op.outputs else None)]
    if op.type == "ASSIGN_VARIABLE":
        return [(ctx.input(0), ctx.input(1))]
    return [(ctx.input(i), ctx.input(i + 1)) for i in range(0, len(op.inputs), 2)]


@lowering("READ_VARIABLE", check=_check_copy)
def lower_read_variable(ctx: LowerCtx) -> LayerCode:
    var, value = _pairs(ctx)[0]
    body = f"memcpy({ctx.ptr(value)}, {ctx.ptr(var)}, {value.nbytes});\nreturn 0;\n"
    return LayerCode(kernel="memcpy", body=body, summary=f"{value.nbytes} bytes out of the state")


@lowering("ASSIGN_VARIABLE", check=_check_copy)
def lower_assign_variable(ctx: LowerCtx) -> LayerCode:
    var, value = _pairs(ctx)[0]
    body = f"memcpy({ctx.ptr(var)}, {ctx.ptr(value)}, {value.nbytes});\nreturn 0;\n"
    return LayerCode(kernel="memcpy", body=body, summary=f"{value.nbytes} bytes into the state")


@lowering("CALL_ONCE", check=_check_copy)
def lower_call_once(ctx: LowerCtx) -> LayerCode:
    lines = ["static uint8_t done; /* set by the first run; kiln_reset leaves it set */",
             "if (!done) {"]
    total = 0
    for var, value in _pairs(ctx):
        lines.append(f"    memcpy({ctx.ptr(var)}, {ctx.ptr(value)}, {value.nbytes});")
        total += value.nbytes
    lines += ["    done = 1;", "}", "return 0;"]
    return LayerCode(kernel="memcpy", body="\n".join(lines) + "\n",
                     summary=f"init subgraph: {total} bytes of initial values, first run only")
