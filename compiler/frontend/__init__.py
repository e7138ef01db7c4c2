"""Model importers. TFLite is the one format kiln reads."""

from .tflite_reader import load, parse

__all__ = ["load", "parse"]
