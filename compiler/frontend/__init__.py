"""Model importers: TFLite (tflite_reader) and ONNX (onnx_reader), picked by load()."""

from __future__ import annotations

import os

from ..errors import InputError
from ..ir import Graph
from . import tflite_reader
from .tflite_reader import parse


def load(source) -> Graph:
    """A .tflite or .onnx model (path or bytes) as a Graph; the reader is picked by the file's
    extension (.onnx), bytes by their content (no 'TFL3' at byte 4 and a protobuf's first
    field, ir_version, at byte 0). Raises ModelError."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if len(data) >= 8 and data[4:8] != b"TFL3" and data[:1] == b"\x08":
            from . import onnx_reader   # imported only for ONNX: `onnx` is slow to import
            return onnx_reader.parse(data)
        return tflite_reader.load(data)
    if isinstance(source, (str, os.PathLike)) and os.fsdecode(source).lower().endswith(".onnx"):
        from . import onnx_reader
        return onnx_reader.load(source)
    return tflite_reader.load(source)


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
