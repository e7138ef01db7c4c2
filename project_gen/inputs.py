"""Sample inputs baked into a standalone firmware: checked, quantized if float, as C bytes.

A model input is described by the kiln.json entry {name, shape, dtype, scale,
zero_point}. The user gives one array per model input; each holds one sample
(the tensor's size) or several stacked along axis 0 (shape (N, *shape[1:])
for a batch-1 model). Float arrays for an integer input are quantized with the
input's scale and zero point, so `--input digits.npy` works with the raw data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kiln.compiler.errors import InputError

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


def _to_dtype(x: np.ndarray, spec: TensorSpec) -> np.ndarray:
    if x.dtype == spec.dtype:
        return x
    if x.dtype.kind == "f" and spec.dtype.kind in "iu":
        if not spec.scale:
            raise InputError(f"input '{spec.name}' is {spec.dtype} without quantization "
                             f"parameters: give {spec.dtype} data, not {x.dtype}")
        info = np.iinfo(spec.dtype)
        q = np.round(x.astype(np.float64) / spec.scale) + (spec.zero_point or 0)
        return np.clip(q, info.min, info.max).astype(spec.dtype)
    if x.dtype.kind in "iu" and spec.dtype.kind in "iu":
        info = np.iinfo(spec.dtype)
        if x.size and (x.min() < info.min or x.max() > info.max):
            raise InputError(f"input '{spec.name}' values [{x.min()}, {x.max()}] do not fit "
                             f"{spec.dtype}")
        return x.astype(spec.dtype)
    raise InputError(f"input '{spec.name}' wants {spec.dtype} data (or float to quantize), "
                     f"got {x.dtype}")


def split_samples(arrays: Sequence[np.ndarray], specs: Sequence[TensorSpec]) -> list[list[np.ndarray]]:
    """samples[s][i]: input i of sample s, in the input's dtype and shape."""
    if len(arrays) != len(specs):
        raise InputError(f"the model has {len(specs)} input(s), got {len(arrays)} array(s)")
    per_input: list[list[np.ndarray]] = []
    for x, spec in zip(arrays, specs):
        x = np.asarray(x)
        if x.size == spec.size:
            batches = [x.reshape(spec.shape)]
        elif (spec.shape and spec.shape[0] == 1 and x.ndim == len(spec.shape)
              and tuple(x.shape[1:]) == spec.shape[1:] and x.shape[0] > 0):
            batches = [x[i:i + 1] for i in range(x.shape[0])]
        else:
            raise InputError(f"input '{spec.name}' has shape {list(spec.shape)}; got an array "
                             f"of shape {list(x.shape)} (one sample, or N stacked on axis 0)")
        per_input.append([_to_dtype(b, spec) for b in batches])
    counts = {len(b) for b in per_input}
    if len(counts) != 1:
        raise InputError(f"every input needs the same number of samples, got {sorted(counts)}")
    return [list(sample) for sample in zip(*per_input)]


def c_bytes(array: np.ndarray, per_line: int = 16) -> str:
    """The array's little-endian bytes as the body of a C initializer."""
    raw = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
    lines = []
    for start in range(0, len(raw), per_line):
        chunk = raw[start:start + per_line]
        lines.append("    " + " ".join(f"0x{b:02x}," for b in chunk))
    return "\n".join(lines)
