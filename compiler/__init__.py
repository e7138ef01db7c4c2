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

# The subpackage is imported here, before `quantize` names its function: importing it
# later (kiln.compiler.quantize.cli, ...) would otherwise rebind `kiln.compiler.quantize`
# to the module and the function would stop being callable.
from . import quantize as _quantize_package  # noqa: E402

quantize = _quantize_package.quantize


__all__ = ["load", "quantize", "compile", "Artifact", "KilnError", "ModelError", "InputError",
           "BoardError", "BuildError", "TransportError", "DeviceError", "__version__"]
