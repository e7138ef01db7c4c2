"""kiln.compiler: TFLite → Graph IR → passes → memory plan → C.

    from kiln.compiler import load, quantize, compile
    g = load("kws.tflite")
    art = compile(g, board="host")
    outputs = art.run(x)
"""

from .artifact import Artifact
from .compile import KILN_VERSION as __version__
from .compile import compile
from .errors import (BoardError, BuildError, DeviceError, InputError, KilnError, ModelError,
                     TransportError)
from .frontend import load


def quantize(graph, calibration, **options):
    """Float or hybrid graph → int8 graph, calibrated on `calibration` (see kiln.compiler.quantize)."""
    from .quantize import quantize as _quantize

    return _quantize(graph, calibration, **options)


__all__ = ["load", "quantize", "compile", "Artifact", "KilnError", "ModelError", "InputError",
           "BoardError", "BuildError", "TransportError", "DeviceError", "__version__"]
