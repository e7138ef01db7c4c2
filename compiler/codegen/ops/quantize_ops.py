"""Lowerings: quantize_ops ops (being written)."""
