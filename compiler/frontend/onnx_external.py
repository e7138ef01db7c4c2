"""ONNX external data: tensors whose bytes live in a file beside the .onnx
(onnx.save(..., save_as_external_data=True) writes `model.onnx.data` and a `location`,
`offset`, `length` per tensor).

The .onnx is hostile input (docs/hostile_input.md): its `location` is a path the model
chose. kiln reads only files in the model's own folder or below it: an absolute path, a
'..' component, or a symbolic link whose target leaves the folder is refused, by tensor
and location, before anything is opened. Each file is read once through fsutil (a
regular file, under the models' size cap), every tensor's range is checked against the
file's size, and the bytes read in all are capped like a model file.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath, PureWindowsPath

from ..errors import InputError, ModelError
from ..fsutil import read_regular_file

# The bytes of every external file read for one model, together (as a model file's cap).
MAX_EXTERNAL_BYTES = 1 << 30


def external_tensors(graph) -> list:
    """The graph's tensors (initializers and Constant nodes' values, subgraphs not
    included: kiln's ONNX reader reads no control flow) kept in external files."""
    import onnx

    tensors = list(graph.initializer) + [a.t for n in graph.node for a in n.attribute
                                         if a.type == onnx.AttributeProto.TENSOR]
    return [t for t in tensors if t.data_location == onnx.TensorProto.EXTERNAL]


def _fields(t) -> dict[str, str]:
    return {e.key: e.value for e in t.external_data}


def _safe_location(location: str, name: str) -> PurePosixPath:
    """`location` as a relative path inside the model's folder, or ModelError."""
    posix, windows = PurePosixPath(location), PureWindowsPath(location)
    if (not location or "\0" in location or posix.is_absolute() or windows.is_absolute()
            or windows.drive or ".." in posix.parts or ".." in windows.parts):
        raise ModelError(f"tensor {name!r} keeps its data at {location!r}, outside the model's "
                         "folder: kiln reads external data only from the model's folder "
                         "(a relative path without '..')")
    return PurePosixPath(*windows.parts)   # '\\' separators as '/' (an export on Windows)


def load_external_data(graph, folder: Path | None) -> bytes:
    """Read every external tensor of `graph` into the tensor itself (raw_data), from files
    in `folder`; returns a digest of the data read (b"" when there is none), which the
    caller folds into the graph's sha256: the same .onnx with other data is another model.
    ModelError names the tensor and the file that is missing, unreadable or too short."""
    import onnx

    tensors = external_tensors(graph)
    if not tensors:
        return b""
    if folder is None:
        t = tensors[0]
        raise ModelError(f"tensor {t.name!r} keeps its data in an external file "
                         f"({_fields(t).get('location', '?')!r}); kiln reads external data "
                         "next to a model loaded from a path, not from bytes")
    root = Path(os.path.realpath(folder))
    files: dict[str, bytes] = {}
    total = 0
    digest = hashlib.sha256()
    for t in tensors:
        fields = _fields(t)
        location = fields.get("location", "")
        relative = _safe_location(location, t.name)
        path = root / relative
        real = Path(os.path.realpath(path))
        if real != root and root not in real.parents:
            raise ModelError(f"tensor {t.name!r} keeps its data at {location!r}, a link out "
                             "of the model's folder: kiln reads external data only from the "
                             "model's folder")
        key = str(real)
        if key not in files:
            if not path.exists():
                raise ModelError(f"tensor {t.name!r} keeps its data in {location!r}, which is "
                                 f"missing: put {relative.name!r} next to the model "
                                 f"(looked in {folder})")
            try:
                files[key] = read_regular_file(path, "ONNX external data file",
                                               MAX_EXTERNAL_BYTES - total)
            except InputError as e:
                raise ModelError(f"tensor {t.name!r}: {e}") from None
            total += len(files[key])
        blob = files[key]
        try:
            offset = int(fields.get("offset", "0"))
            length = int(fields["length"]) if "length" in fields else len(blob) - offset
        except ValueError:
            raise ModelError(f"tensor {t.name!r}: external data offset/length are not whole "
                             "numbers") from None
        if offset < 0 or length < 0 or offset + length > len(blob):
            raise ModelError(f"tensor {t.name!r} reads bytes {offset}..{offset + length} of "
                             f"{location!r}, which holds {len(blob):,} bytes (truncated data "
                             "file, or another model's)")
        t.raw_data = blob[offset:offset + length]
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT
        digest.update(t.name.encode("utf-8", "replace") + b"\0" + t.raw_data + b"\0")
    return digest.digest()
