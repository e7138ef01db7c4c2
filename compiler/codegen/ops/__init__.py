"""Lowerings, one module per op family (each registers itself with @lowering)."""

from . import (activation, conv, data_movement, elementwise, indexing,  # noqa: F401
               lstm, math_ops, pool, quantize_ops, reduce)
from . import resize  # noqa: F401  (RESIZE_BILINEAR)
from . import inplace  # noqa: F401  (overlap rules, no lowerings)
from . import svdf  # noqa: F401
from . import variables  # noqa: F401  (resource variables: READ/ASSIGN_VARIABLE, CALL_ONCE)
