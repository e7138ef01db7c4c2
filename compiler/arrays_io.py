"""Arrays on disk for the CLI: model inputs as .npy files, outputs as one .npz.

The npz keys `output_0`, `output_1`, ... are part of kiln's CLI contract (DESIGN.md).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .errors import InputError


def read_inputs(paths: Sequence[str]) -> list[np.ndarray]:
    """One array per model input; a file that is not a .npy array is an InputError."""
    arrays = []
    for path in paths:
        try:
            arrays.append(np.load(path, allow_pickle=False))
        except (OSError, ValueError) as e:
            raise InputError(f"cannot read {path} as a .npy array: {e}") from None
    return arrays


def write_outputs(path: str, outputs: Sequence[np.ndarray]) -> None:
    np.savez(path, **{f"output_{i}": y for i, y in enumerate(outputs)})
