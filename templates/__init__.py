"""Package data: kiln's templates folder (shipped with the wheel, read with importlib.resources)."""
