"""Lowerings: activation ops (being written)."""
