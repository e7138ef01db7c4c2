"""Model inputs from the user, for every way kiln runs a model (Artifact.run, RPC,
baked firmware): checked against the input's shape, quantized if float, split into
samples.

A model input is described by the kiln.json entry {name, shape, dtype, scale,
zero_point}. The user gives one array per model input; each holds one sample (the
input's shape, or without its batch axis of 1) or N stacked on axis 0 (shape
(N, *shape[1:]) for a batch-1 model, or (N, *shape)). Float arrays for an
integer input are quantized with the input's scale and zero point, so
`--input digits.npy` works with the raw data.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .escape import terminal

DEFAULT_SEED = 0


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    scale: float | None
    zero_point: int | None

    @classmethod
    def from_report(cls, entry: dict) -> "TensorSpec":
        scale = entry.get("scale")
        zp = entry.get("zero_point")
        # Per-channel parameters never occur on model inputs; take the first if listed.
        if isinstance(scale, list):
            scale = scale[0] if scale else None
        if isinstance(zp, list):
            zp = zp[0] if zp else None
        return cls(entry["name"], tuple(int(d) for d in entry["shape"]),
                   np.dtype(entry["dtype"]), scale, zp)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


def random_inputs(specs: Sequence[TensorSpec], seed: int = DEFAULT_SEED) -> list[np.ndarray]:
    """One fixed-seed random sample per input, over the dtype's whole range."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        if spec.dtype.kind in "iu":
            info = np.iinfo(spec.dtype)
            arrays.append(rng.integers(info.min, info.max, size=spec.shape,
                                       endpoint=True).astype(spec.dtype))
        elif spec.dtype.kind == "b":
            arrays.append(rng.integers(0, 1, size=spec.shape, endpoint=True).astype(spec.dtype))
        else:
            arrays.append(rng.standard_normal(spec.shape).astype(spec.dtype))
    return arrays


def _sample_axis(x: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """x as a stack of samples, shape (N, *spec.shape), or InputError.

    Accepted, told apart by their number of dimensions:
      spec.shape                       one sample
      spec.shape[1:]                   one sample without its batch axis (batch-1 models)
      (N, *spec.shape[1:])             N samples stacked on the batch axis (batch-1 models)
      (N, *spec.shape)                 N samples stacked on a new axis
    Any other shape is refused even when its size matches: reshaping it would
    scramble the data (a (1, 10, 49, 1) array is not a (1, 49, 10, 1) sample).
    """
    shape, got = spec.shape, tuple(x.shape)
    batch1 = bool(shape) and shape[0] == 1
    if got == shape:
        return x.reshape((1, *shape))
    if batch1 and got == shape[1:]:
        return x.reshape((1, *shape))
    if batch1 and len(got) == len(shape) and got[1:] == shape[1:] and got[0] > 0:
        return x.reshape((got[0], *shape))
    if len(got) == len(shape) + 1 and got[1:] == shape and got[0] > 0:
        return x
    forms = ([_dims(shape), _dims(shape[1:]), _dims(("N", *shape[1:]))] if batch1 else
             [_dims(shape), _dims(("N", *shape))])
    raise InputError(f"input '{spec.name}' has shape {_dims(shape)}; got an array of shape "
                     f"{_dims(got)} (give {', '.join(forms[:-1])} or {forms[-1]} for N samples)")


def _dims(shape: Sequence[int | str]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _to_dtype(x: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """x in the input's dtype: float data quantized (clamped, with a warning on stderr),
    integer data of another dtype only if every value fits."""
    if x.dtype == spec.dtype:
        return x
    if x.dtype.kind == "f" and spec.dtype.kind in "iu":
        if not spec.scale:
            raise InputError(f"input '{spec.name}' is {spec.dtype} without quantization "
                             f"parameters: give {spec.dtype} data, not {x.dtype}")
        finite = np.isfinite(x)
        if not finite.all():
            raise InputError(f"input '{spec.name}' holds {int((~finite).sum())} NaN or "
                             f"infinite value(s): nothing to quantize them to")
        info, zp = np.iinfo(spec.dtype), spec.zero_point or 0
        q = np.round(x.astype(np.float64) / spec.scale) + zp
        clamped = int(np.count_nonzero((q < info.min) | (q > info.max)))
        if clamped:
            lo, hi = (info.min - zp) * spec.scale, (info.max - zp) * spec.scale
            # the name is the model's text: one line, no terminal escapes
            print(f"kiln: warning: input '{terminal(spec.name)}': {clamped} of {x.size} "
                  f"value(s) outside [{lo:.6g}, {hi:.6g}] (what {spec.dtype} holds at scale "
                  f"{spec.scale:.6g}, zero point {zp}) were clamped", file=sys.stderr)
        return np.clip(q, info.min, info.max).astype(spec.dtype)
    if x.dtype.kind in "iu" and spec.dtype.kind in "iuf":
        if spec.dtype.kind == "f":
            fits = np.array_equal(x.astype(spec.dtype).astype(x.dtype), x)
        else:
            info = np.iinfo(spec.dtype)
            fits = not x.size or (x.min() >= info.min and x.max() <= info.max)
        if not fits:
            raise InputError(f"input '{spec.name}': {x.dtype} values [{x.min()}, {x.max()}] do "
                             f"not fit {spec.dtype} (float data would be quantized)")
        return x.astype(spec.dtype)
    if x.dtype.kind == "f" and spec.dtype.kind == "f":
        return x.astype(spec.dtype)
    raise InputError(f"input '{spec.name}' wants {spec.dtype} data (or float to quantize), "
                     f"got {x.dtype}")


def split_samples(arrays: Sequence[np.ndarray], specs: Sequence[TensorSpec]) -> list[list[np.ndarray]]:
    """samples[s][i]: input i of sample s, in the input's dtype and shape.

    The one check of user inputs for every path (host library, RPC, baked
    firmware): see _sample_axis for the shapes accepted, _to_dtype for the dtypes.
    """
    if len(arrays) != len(specs):
        raise InputError(f"the model has {len(specs)} input(s), got {len(arrays)} array(s)")
    per_input: list[np.ndarray] = []
    for x, spec in zip(arrays, specs):
        stack = _to_dtype(_sample_axis(np.asarray(x), spec), spec)
        per_input.append(np.ascontiguousarray(stack))
    counts = {len(stack) for stack in per_input}
    if len(counts) != 1:
        raise InputError(f"every input needs the same number of samples, got "
                         f"{[len(stack) for stack in per_input]}")
    return [[stack[s] for stack in per_input] for s in range(counts.pop())]
