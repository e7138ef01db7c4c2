"""Lowerings: conv ops (being written)."""
