"""Lowerings: elementwise ops (being written)."""
