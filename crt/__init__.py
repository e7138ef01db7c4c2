"""Package data: kiln's crt folder (shipped with the wheel, read with importlib.resources)."""
