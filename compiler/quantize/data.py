"""Calibration data: from Python objects or files to one float32 batch per model input.

Accepted forms (every model input gets an array of shape (N, *input_shape)):

- Python: an array with a batch axis (one-input models); a list with one such array per
  model input; or an iterable of samples (an array, or a tuple with one array per input).
- Files: a `.npy` with a batch axis, or a directory of `.npy` files (one sample each,
  sorted by name); one such path per model input.

A sample may leave out a leading batch dimension of 1 (`(8, 8, 1)` for an input of shape
`(1, 8, 8, 1)`). Anything else (wrong shape, non-float dtype, no samples, NaN/inf) is an
InputError with one line that says which file or input and what was expected.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..arrays_io import NotNpyError, read_npy
from ..errors import InputError
from ..ir import Graph, Tensor


def _shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _sample_shapes(t: Tensor) -> list[tuple[int, ...]]:
    """Shapes one sample may have: the input's, and without a leading batch of 1."""
    shapes = [tuple(t.shape)]
    if len(t.shape) > 1 and t.shape[0] == 1:
        shapes.append(tuple(t.shape[1:]))
    return shapes


def _check_values(x: np.ndarray, t: Tensor, what: str) -> np.ndarray:
    if x.dtype.kind != "f":
        raise InputError(f"{what}: dtype {x.dtype} is not float; input {t.name} of the float "
                         "model takes float values in the range the model was trained on")
    x = x.astype(np.float32, copy=False)
    if x.shape[0] == 0:
        raise InputError(f"{what}: holds no samples")
    bad = ~np.isfinite(x)
    if bad.any():
        first = int(np.argwhere(bad.reshape(x.shape[0], -1).any(axis=1))[0, 0])
        raise InputError(f"{what}: {int(bad.sum())} NaN or infinite value(s), first in sample {first}")
    return x


def as_batch(x: np.ndarray, t: Tensor, what: str) -> np.ndarray:
    """An array with a leading sample axis → (N, *t.shape) float32, checked."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        _check_values(x, t, what)               # raises: not float
    for shape in _sample_shapes(t):
        if x.ndim == len(shape) + 1 and tuple(x.shape[1:]) == shape:
            x = _check_values(x, t, what)
            return x.reshape((x.shape[0],) + tuple(t.shape))
    raise InputError(f"{what}: shape {_shape(x.shape)} does not hold samples of input {t.name}; "
                     f"expected (N, {', '.join(str(d) for d in t.shape)}) or "
                     f"(N, {', '.join(str(d) for d in _sample_shapes(t)[-1])})")


def _as_sample(x: np.ndarray, t: Tensor, what: str) -> np.ndarray | None:
    """One sample → (1, *t.shape), or None if `x` is not shaped like one sample."""
    x = np.asarray(x)
    if tuple(x.shape) in _sample_shapes(t) and x.dtype != object:
        return _check_values(x.reshape((1,) + tuple(t.shape)), t, what)
    return None


def calibration_arrays(graph: Graph, calibration) -> list[np.ndarray]:
    """Normalise the Python forms of calibration data (see the module doc)."""
    inputs = [graph.tensor(t) for t in graph.inputs]
    if calibration is None:
        raise InputError("no calibration data given")
    if isinstance(calibration, (str, Path)):
        return load_calibration(graph, [calibration])
    if isinstance(calibration, np.ndarray):
        if len(inputs) != 1:
            raise InputError(f"{graph.name} has {len(inputs)} inputs: give one calibration "
                             "array per input")
        return [as_batch(calibration, inputs[0], "calibration data")]
    if isinstance(calibration, Sequence) and len(calibration) == len(inputs) and all(
            isinstance(a, np.ndarray) and tuple(a.shape) not in _sample_shapes(t)
            for a, t in zip(calibration, inputs)):
        return [as_batch(a, t, f"calibration data for input {i}")
                for i, (a, t) in enumerate(zip(calibration, inputs))]
    if not isinstance(calibration, Iterable):
        raise InputError(f"calibration data of type {type(calibration).__name__} is not an "
                         "array or an iterable of samples")
    parts: list[list[np.ndarray]] = [[] for _ in inputs]
    for k, item in enumerate(calibration):
        arrays = [item] if isinstance(item, np.ndarray) or len(inputs) == 1 and not isinstance(
            item, (tuple, list)) else list(item)
        if len(arrays) != len(inputs):
            raise InputError(f"calibration sample {k} has {len(arrays)} array(s); "
                             f"{graph.name} takes {len(inputs)} input(s)")
        for i, (a, t) in enumerate(zip(arrays, inputs)):
            what = f"calibration sample {k}" + (f", input {i}" if len(inputs) > 1 else "")
            one = _as_sample(a, t, what)
            parts[i].append(one if one is not None else as_batch(a, t, what))
    if not parts or not parts[0]:
        raise InputError("calibration data holds no samples")
    return [np.concatenate(p, axis=0) for p in parts]


def _load_npy(path: Path) -> np.ndarray:
    """One calibration file, read like every .npy kiln reads (arrays_io.read_npy: a
    regular file, a sane header, no objects, no allocation beyond the file's size)."""
    try:
        return read_npy(path, "calibration file")
    except NotNpyError as e:
        raise InputError(f"cannot read calibration file {path}: {e.reason}") from None


def load_calibration(graph: Graph, paths: Sequence[str | Path]) -> list[np.ndarray]:
    """Calibration files (one `.npy` or directory of `.npy` per model input) → batches."""
    inputs = [graph.tensor(t) for t in graph.inputs]
    if len(paths) != len(inputs):
        raise InputError(f"{graph.name} has {len(inputs)} input(s); give one calibration "
                         f"file or directory per input, got {len(paths)}")
    result = []
    for path, t in zip(paths, inputs):
        path = Path(path)
        if path.is_dir():
            files = sorted(path.glob("*.npy"))
            if not files:
                raise InputError(f"calibration directory {path} holds no .npy files")
            samples = []
            for f in files:
                x = _load_npy(f)
                one = _as_sample(x, t, f"calibration file {f}")
                samples.append(one if one is not None else as_batch(x, t, f"calibration file {f}"))
            result.append(np.concatenate(samples, axis=0))
        elif path.exists():
            result.append(as_batch(_load_npy(path), t, f"calibration file {path}"))
        else:
            raise InputError(f"calibration file {path} does not exist")
    n = {x.shape[0] for x in result}
    if len(n) > 1:
        raise InputError(f"calibration files hold different numbers of samples: {sorted(n)}")
    return result
