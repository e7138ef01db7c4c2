"""Reference interpreters for kernel tests, and exact comparison.

- ``run_reference``: the tflite-micro interpreter (what kiln must match on a device).
- ``run_tflite_ref``: TFLite (ai-edge-litert) with the BUILTIN_REF op resolver, i.e. the
  reference kernels, for ops TFLM lacks.
- ``reference_for``: TFLM if it accepts and runs the model, else TFLite-ref; says which.
- ``assert_equal_exact``: integer outputs compare exactly; the message lists differing
  indices.
"""

from __future__ import annotations

import os
import re
import struct
import tempfile
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import tflite

TFLM = "tflm"
TFLITE_REF = "tflite_ref"

_ITEMSIZE = {tflite.TensorType.FLOAT32: 4, tflite.TensorType.INT32: 4,
             tflite.TensorType.INT64: 8, tflite.TensorType.INT16: 2}


def _arena_size(model: bytes) -> int:
    """Generous TFLM arena: every tensor live at once, twice, plus 256 KiB of scratch."""
    m = tflite.Model.GetRootAs(model, 0)
    total = 0
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            n = int(np.prod(t.ShapeAsNumpy(), dtype=np.int64)) if t.ShapeLength() else 1
            total += n * _ITEMSIZE.get(t.Type(), 1)
    return 2 * total + 256 * 1024


def _as_list(inputs: np.ndarray | Sequence[np.ndarray]) -> list[np.ndarray]:
    return [inputs] if isinstance(inputs, np.ndarray) else list(inputs)


def run_reference(model: bytes, inputs: np.ndarray | Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run ``model`` in the tflite-micro interpreter; one array per model output.

    Raises RuntimeError (from TFLM) if TFLM cannot allocate or invoke the model.
    """
    from tflite_micro.python.tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(bytes(model), arena_size=_arena_size(model))
    for i, x in enumerate(_as_list(inputs)):
        interp.set_input(np.ascontiguousarray(x), i)
    interp.invoke()
    n_out = tflite.Model.GetRootAs(model, 0).Subgraphs(0).OutputsLength()
    return [np.array(interp.get_output(i), copy=True) for i in range(n_out)]


def run_tflite_ref(model: bytes, inputs: np.ndarray | Sequence[np.ndarray],
                   clamp_versions: bool = True) -> list[np.ndarray]:
    """Run ``model`` in TFLite with the reference kernels (BUILTIN_REF resolver).

    The REF resolver registers some ops with a lower maximum version than the converter
    writes (TILE int8 is written as v3, REF knows v1-2; DEPTH_TO_SPACE int8 v2 vs v1).
    Versions only gate registration, so with ``clamp_versions`` an op code the resolver
    refuses is lowered one version at a time until it is found.
    """
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    model = bytearray(model)
    while True:
        try:
            interp = Interpreter(model_content=bytes(model),
                                 experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                                 num_threads=1)
            break
        except ValueError as e:
            found = re.search(r"builtin opcode '(\w+)' version '(\d+)'", str(e))
            if not (clamp_versions and found and int(found.group(2)) > 1):
                raise
            _set_op_version(model, found.group(1), int(found.group(2)) - 1)
    interp.allocate_tensors()
    details = interp.get_input_details()
    xs = _as_list(inputs)
    if len(xs) != len(details):
        raise ValueError(f"model has {len(details)} inputs, got {len(xs)} arrays")
    for d, x in zip(details, xs):
        interp.set_tensor(d["index"], np.ascontiguousarray(x))
    interp.invoke()
    return [np.array(interp.get_tensor(d["index"]), copy=True)
            for d in interp.get_output_details()]


def _set_op_version(model: bytearray, op_name: str, version: int) -> None:
    """Overwrite, in place, the version of every op code for builtin ``op_name``. The
    field must be present in the flatbuffer (it is whenever the version is above 1)."""
    code_value = getattr(tflite.BuiltinOperator, op_name)
    m = tflite.Model.GetRootAs(model, 0)
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        if max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode()) != code_value:
            continue
        field = oc._tab.Offset(8)  # OperatorCode.version
        if field == 0:
            raise ValueError(f"{op_name}: version field absent, cannot patch")
        struct.pack_into("<i", model, oc._tab.Pos + field, version)


@dataclass
class Reference:
    """A reference interpreter chosen for one model."""

    engine: str              # TFLM or TFLITE_REF
    run: Callable[[Sequence[np.ndarray]], list[np.ndarray]]
    tflm_error: str = ""     # why TFLM was refused ("" if TFLM is used)


def reference_for(model: bytes, probe_inputs: Sequence[np.ndarray] | None = None) -> Reference:
    """TFLM if it builds and invokes ``model`` (on ``probe_inputs``, default zeros), else
    TFLite-ref. ``ref.engine`` says which; ``ref.run(inputs)`` runs it; ``ref.tflm_error``
    holds TFLM's log when it refused (e.g. "Didn't find op for builtin opcode 'TILE'")."""
    if probe_inputs is None:
        probe_inputs = zero_inputs(model)
    try:
        _capture_stderr(run_reference, model, probe_inputs)
    except _TflmRefused as e:
        return Reference(TFLITE_REF, lambda xs: run_tflite_ref(model, xs), str(e))
    return Reference(TFLM, lambda xs: run_reference(model, xs))


def zero_inputs(model: bytes) -> list[np.ndarray]:
    """Zeros of each model input's shape and dtype."""
    np_types = {tflite.TensorType.FLOAT32: np.float32, tflite.TensorType.INT32: np.int32,
                tflite.TensorType.UINT8: np.uint8, tflite.TensorType.INT64: np.int64,
                tflite.TensorType.BOOL: np.bool_, tflite.TensorType.INT16: np.int16,
                tflite.TensorType.INT8: np.int8}
    sg = tflite.Model.GetRootAs(model, 0).Subgraphs(0)
    out = []
    for i in range(sg.InputsLength()):
        t = sg.Tensors(sg.Inputs(i))
        shape = tuple(t.ShapeAsNumpy()) if t.ShapeLength() else ()
        out.append(np.zeros(shape, dtype=np_types[t.Type()]))
    return out


class _TflmRefused(Exception):
    pass


def _capture_stderr(fn: Callable, *args: object) -> object:
    """Run ``fn`` with the C-level stderr captured (TFLM logs its refusals there); on an
    exception raise _TflmRefused carrying the exception and the log."""
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as log:
        os.dup2(log.fileno(), 2)
        try:
            return fn(*args)
        except Exception as e:
            os.dup2(saved, 2)
            log.seek(0)
            text = log.read().decode(errors="replace").strip()
            raise _TflmRefused(f"{type(e).__name__}: {e}" + (f"\n{text}" if text else "")) from e
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def assert_equal_exact(got: np.ndarray, want: np.ndarray, label: str = "",
                       max_listed: int = 20) -> None:
    """Exact equality of shape, dtype and every element; no tolerance.

    On mismatch, raises AssertionError listing the first ``max_listed`` differing indices
    with got/want and the total count.
    """
    got, want = np.asarray(got), np.asarray(want)
    prefix = f"{label}: " if label else ""
    if got.shape != want.shape:
        raise AssertionError(f"{prefix}shape {got.shape} != expected {want.shape}")
    if got.dtype != want.dtype:
        raise AssertionError(f"{prefix}dtype {got.dtype} != expected {want.dtype}")
    if want.dtype.kind == "f":
        diff = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    else:
        diff = got != want
    n = int(np.count_nonzero(diff))
    if n == 0:
        return
    idx = np.argwhere(diff)[:max_listed]
    lines = [f"{prefix}{n} of {want.size} elements differ "
             f"(first {len(idx)} listed as index: got / want):"]
    for ix in idx:
        t = tuple(int(v) for v in ix)
        lines.append(f"  {t}: {got[t].item()} / {want[t].item()}")
    raise AssertionError("\n".join(lines))
