"""Model importers: TFLite (tflite_reader) and ONNX (onnx_reader), picked by load()."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError, ModelError
from ..fsutil import read_regular_file
from ..ir import Graph
from . import tflite_reader
from .tflite_reader import parse


def load(source, input_shapes: dict | None = None, layout: str | None = None) -> Graph:
    """A .tflite or .onnx model (path or bytes) as a Graph. The reader is picked by the
    extension (.onnx), else by content: TFLite carries 'TFL3' at byte 4, an ONNX protobuf
    starts with its ir_version field (0x08). ONNX only (the CLI's --input-shape and
    --layout): `input_shapes` ({input name: dims}) pins dynamic input dims; `layout`
    "nhwc" makes the image inputs and outputs NHWC ("nchw", the default, keeps the
    model's). Both are part of the graph's sha256, which keys kiln's caches. An ONNX file
    read from a path may keep its weights in external data files next to it. Raises
    ModelError."""
    if layout not in (None, "nchw", "nhwc"):
        raise InputError(f"layout must be 'nchw' or 'nhwc', not {layout!r}")
    folder = None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), "model"
    else:
        path = Path(source)
        try:   # a regular file of sane size: a FIFO, a device or /dev/zero is refused unread
            data = read_regular_file(path, "model", tflite_reader.MAX_MODEL_BYTES)
        except InputError as e:
            raise ModelError(str(e)) from None
        # A file name that is not UTF-8 (bytes kept as surrogates) would make a model
        # name no file can be written with: such bytes become U+FFFD.
        name = path.stem.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        folder = path.parent
        if path.suffix.lower() == ".onnx":
            return _onnx_parse(data, name, input_shapes, layout, folder)
    if len(data) >= 8 and data[4:8] != b"TFL3" and data[:1] == b"\x08":
        return _onnx_parse(data, name, input_shapes, layout, folder)
    if input_shapes:
        raise ModelError("--input-shape (input_shapes) pins the dynamic dims of an ONNX "
                         "model; a .tflite model's shapes are static: drop it")
    if layout is not None:
        raise ModelError("--layout (layout) chooses an ONNX model's input/output layout; a "
                         ".tflite model is NHWC as it is: drop it")
    return tflite_reader.parse(data, name)


def _onnx_parse(data: bytes, name: str, input_shapes: dict | None = None,
                layout: str | None = None, folder: Path | None = None) -> Graph:
    from ..passes.cancel_transposes import cancel_transposes_in_place
    from . import onnx_reader   # imported only for ONNX models: `onnx` is slow to import

    graph = onnx_reader.parse(data, name, input_shapes, layout=layout or "nchw", folder=folder)
    # ONNX's NCHW against kiln's NHWC leaves transposes a model's own permutes can undo:
    # none stays between layers (passes/cancel_transposes.py).
    graph = cancel_transposes_in_place(graph)
    graph.verify()
    return graph


def as_graph(graph) -> Graph:
    """The `graph` argument of compile(), quantize() and tune(): a Graph from load(), or a
    .tflite / .onnx path (loaded here)."""
    if isinstance(graph, Graph):
        return graph
    if isinstance(graph, (str, os.PathLike)):
        return load(graph)
    raise InputError(f"expected a Graph from kiln.compiler.load() or a .tflite/.onnx path, "
                     f"not {type(graph).__name__}")


__all__ = ["as_graph", "load", "parse"]
