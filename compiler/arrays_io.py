"""Arrays on disk for the CLI: model inputs as .npy files, outputs as one .npz.

The npz keys `output_0`, `output_1`, ... are part of kiln's CLI contract (DESIGN.md).
An input file must be a .npy array of numbers: pickled objects are never loaded
(allow_pickle stays off), and anything else is an InputError naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import InputError

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"          # an .npz is a zip archive


def read_input(path: str | Path) -> np.ndarray:
    """The array in the .npy file `path`; InputError if it is not one.

    Format problems (empty, truncated, another format, an .npz archive, a
    pickled object array) say "is not a .npy array file"; a missing or
    unreadable file keeps the operating system's reason.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            magic = f.read(len(_NPY_MAGIC))
            if magic != _NPY_MAGIC:
                kind = ("an .npz archive (give one .npy file per input)"
                        if magic.startswith(_ZIP_MAGIC) else
                        "empty" if not magic else "in another format")
                raise InputError(f"{path} is not a .npy array file: it is {kind}")
            f.seek(0)
            try:
                return np.lib.format.read_array(f, allow_pickle=False)
            except (ValueError, EOFError) as e:
                reason = ("it holds Python objects, which kiln does not unpickle"
                          if "allow_pickle" in str(e) else f"it is damaged ({e})")
                raise InputError(f"{path} is not a .npy array file: {reason}") from None
    except (IsADirectoryError, FileNotFoundError, PermissionError) as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None


def read_inputs(paths: Sequence[str | Path]) -> list[np.ndarray]:
    """One array per model input, in order; see read_input for what is refused."""
    return [read_input(p) for p in paths]


def check_output_path(path: str | Path) -> Path:
    """The path write_outputs will write, refused early if it is a directory."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"--output {path} is a directory: name the .npz file to write")
    return path


def write_outputs(path: str | Path, outputs: Sequence[np.ndarray]) -> Path:
    """Write `outputs` as an npz at exactly `path` (numpy's savez would add ".npz" to a
    name without it; kiln writes the file the user named) and return that path."""
    path = check_output_path(path)
    with open(path, "wb") as f:
        np.savez(f, **{f"output_{i}": y for i, y in enumerate(outputs)})
    return path


def print_samples(samples: Sequence[Sequence[np.ndarray]]) -> None:
    """Every output of every sample, one line each (first 16 values, and the argmax of a
    vector): `output o ...` for a single sample, `sample s output o ...` for several."""
    for s, outputs in enumerate(samples):
        prefix = f"sample {s} " if len(samples) > 1 else ""
        for o, y in enumerate(outputs):
            flat = y.reshape(-1)
            shown = np.array2string(flat[:16], separator=" ", max_line_width=200)
            more = f" ... ({flat.size} values)" if flat.size > 16 else ""
            arg = f"  argmax {int(np.argmax(flat))}" if flat.size > 1 else ""
            print(f"{prefix}output {o} {list(y.shape)} {y.dtype}: {shown}{more}{arg}")
