"""Package data: kiln's boards folder (shipped with the wheel, read with importlib.resources)."""
