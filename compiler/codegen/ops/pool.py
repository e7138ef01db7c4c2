"""Lowerings: pool ops (being written)."""
