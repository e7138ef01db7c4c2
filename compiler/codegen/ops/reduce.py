"""Lowerings: reduce ops (being written)."""
