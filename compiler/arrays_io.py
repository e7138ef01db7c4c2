"""Arrays on disk for the CLI: model inputs as .npy files, outputs as one .npz.

The npz keys `output_0`, `output_1`, ... are part of kiln's CLI contract (DESIGN.md).
An input file must be a .npy array of numbers: pickled objects are never loaded
(allow_pickle stays off), and anything else is an InputError naming the file.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import InputError
from .fsutil import atomic_write_bytes, read_regular_file, refuse_overwriting_inputs

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"          # an .npz is a zip archive
# The largest .npy kiln reads (an input or a calibration set): the file is read whole and
# copied once into its array, so the peak is twice this.
MAX_ARRAY_BYTES = 2 << 30
# The header is a Python literal numpy parses; real ones are ~128 bytes. A longer one is
# refused before it is parsed (deep nesting, huge shapes).
MAX_NPY_HEADER = 4096
MAX_NPY_RANK = 32                   # numpy's own limit is 64; tensors have a handful of axes


class NotNpyError(InputError):
    """A file that is not a .npy array kiln reads; `reason` says what it is instead."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} is not a .npy array file: {reason}")
        self.reason = reason


def read_npy(path: str | Path, what: str = "input") -> np.ndarray:
    """The array in the .npy file `path`, checked before anything is allocated.

    The file must be a regular file of at most MAX_ARRAY_BYTES (a FIFO, a device or
    /dev/zero is refused unread; `what` names the file's role then). Its header must be
    a .npy 1.0/2.0 header of bounded length, holding a scalar dtype (never objects,
    which would mean unpickling) and a shape whose bytes are exactly the data that
    follows: a header claiming terabytes in a small file is refused, not allocated.
    Fortran order and any byte order are fine (the array comes back in native order).
    Format problems are a NotNpyError naming the file.
    """
    path = Path(path)
    data = read_regular_file(path, what, MAX_ARRAY_BYTES)
    if not data.startswith(_NPY_MAGIC):
        raise NotNpyError(path, "it is an .npz archive (give one .npy file per input)"
                          if data.startswith(_ZIP_MAGIC) else
                          "it is empty" if not data else "it is in another format")
    f = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise NotNpyError(path, f"it is .npy format version {version[0]}.{version[1]}, "
                                    f"kiln reads 1.0 and 2.0")
        length_bytes = 2 if version == (1, 0) else 4
        header_len = int.from_bytes(data[8:8 + length_bytes], "little")
        if header_len > MAX_NPY_HEADER:
            raise NotNpyError(path, f"its header claims {header_len:,} bytes (real ones "
                                    f"are a few hundred)")
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0) else
                       np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read_header(f, max_header_size=MAX_NPY_HEADER)
    except NotNpyError:
        raise
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError, EOFError,
            OverflowError) as e:       # whatever a hostile header makes numpy's parser raise
        raise NotNpyError(path, f"its header is damaged ({_first_line(e)})") from None
    if dtype.hasobject:
        raise NotNpyError(path, "it holds Python objects, which kiln does not unpickle")
    if dtype.fields is not None or dtype.subdtype is not None:
        # Records and sub-arrays are not tensors; other scalar dtypes (strings, dates)
        # load, and the caller's dtype check names them against what the model takes.
        raise NotNpyError(path, f"its dtype {dtype} is a record, not one number per element")
    if len(shape) > MAX_NPY_RANK:
        raise NotNpyError(path, f"its header gives {len(shape)} dimensions (kiln reads at "
                                f"most {MAX_NPY_RANK})")
    if any(d < 0 for d in shape):
        raise NotNpyError(path, f"its header gives a negative dimension: shape {shape}")
    if math.prod(d for d in shape if d) * dtype.itemsize > MAX_ARRAY_BYTES:
        # Even with a 0 axis (no data), axes this long overflow numpy's index type.
        raise NotNpyError(path, f"its header gives shape {list(shape)}, more than kiln "
                                f"reads ({MAX_ARRAY_BYTES:,} bytes)")
    offset = f.tell()
    claimed = math.prod(shape) * dtype.itemsize        # Python ints: no overflow
    if claimed != len(data) - offset:
        raise NotNpyError(path, f"it is damaged: its header says {list(shape)} {dtype} "
                                f"({claimed:,} bytes of data), the file holds "
                                f"{len(data) - offset:,}")
    flat = np.frombuffer(data, dtype=dtype, count=math.prod(shape), offset=offset)
    array = flat.reshape(shape, order="F" if fortran else "C")
    return array.astype(dtype.newbyteorder("="))     # a writable copy in native byte order


def _first_line(e: BaseException) -> str:
    """numpy's reason, short and printable (it may quote the file's own header bytes)."""
    lines = str(e).strip().splitlines()
    text = lines[0] if lines else type(e).__name__
    return "".join(c if c.isprintable() and c.isascii() else "?" for c in text[:80])


def read_input(path: str | Path) -> np.ndarray:
    """The array in the .npy file `path`; InputError if it is not one (see read_npy)."""
    return read_npy(path, "input")


def read_inputs(paths: Sequence[str | Path]) -> list[np.ndarray]:
    """One array per model input, in order; see read_input for what is refused."""
    return [read_input(p) for p in paths]


def files_read(*arguments: str | Path | Sequence[str | Path] | None) -> list[Path]:
    """The files a command reads, from its path arguments (a path, a list of paths or
    None): a directory stands for the files in it (a calibration set, a project's
    kiln.json and inputs.npz). For refusing an output that would replace one of them."""
    paths: list[Path] = []
    for argument in arguments:
        if argument is None:
            continue
        for item in [argument] if isinstance(argument, (str, Path)) else argument:
            item = Path(item)
            paths += sorted(item.iterdir()) if item.is_dir() else [item]
    return paths


def check_output_path(path: str | Path, reads: Sequence[str | Path] = (),
                      option: str = "--output") -> Path:
    """The path write_outputs will write, refused early if it is a directory or one of
    the files `reads` the command reads (through links and hard links too): `kiln run
    --output MODEL.tflite` must never replace the model."""
    path = Path(path)
    if path.is_dir():
        kind = ".npz " if option == "--output" else ""
        raise InputError(f"{option} {path} is a directory: name the {kind}file to write")
    refuse_overwriting_inputs(path, reads, option)
    return path


def write_outputs(path: str | Path, outputs: Sequence[np.ndarray]) -> Path:
    """Write `outputs` as an npz at exactly `path` (numpy's savez would add ".npz" to a
    name without it; kiln writes the file the user named) and return that path. The
    file is written beside and renamed over `path`: an interrupted write leaves the old
    file, and a link at `path` is replaced, not written through."""
    path = check_output_path(path)
    buffer = io.BytesIO()
    np.savez(buffer, **{f"output_{i}": y for i, y in enumerate(outputs)})
    return atomic_write_bytes(path, buffer.getvalue())


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
