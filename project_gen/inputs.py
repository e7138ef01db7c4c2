"""Baked sample inputs as C bytes (the samples themselves are checked and split by
kiln.compiler.inputs, one rule for every way kiln runs a model)."""

from __future__ import annotations

import numpy as np


def c_bytes(array: np.ndarray, per_line: int = 16) -> str:
    """The array's little-endian bytes as the body of a C initializer."""
    raw = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
    lines = []
    for start in range(0, len(raw), per_line):
        chunk = raw[start:start + per_line]
        lines.append("    " + " ".join(f"0x{b:02x}," for b in chunk))
    return "\n".join(lines)
