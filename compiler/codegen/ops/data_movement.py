"""Lowerings: data_movement ops (being written)."""
