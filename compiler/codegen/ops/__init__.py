"""Lowerings, one module per op family (each registers itself with @lowering)."""

from . import activation, conv, data_movement, elementwise, pool, quantize_ops, reduce  # noqa: F401
from . import inplace  # noqa: F401  (overlap rules, no lowerings)
