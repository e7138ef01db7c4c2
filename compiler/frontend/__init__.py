"""Model importers. TFLite is the one format kiln reads."""

from __future__ import annotations

import os

from ..errors import InputError
from ..ir import Graph
from .tflite_reader import load, parse


def as_graph(graph) -> Graph:
    """The `graph` argument of compile(), quantize() and tune(): a Graph from load(), or a
    .tflite path (loaded here)."""
    if isinstance(graph, Graph):
        return graph
    if isinstance(graph, (str, os.PathLike)):
        return load(graph)
    raise InputError(f"expected a Graph from kiln.compiler.load() or a .tflite path, "
                     f"not {type(graph).__name__}")


__all__ = ["as_graph", "load", "parse"]
