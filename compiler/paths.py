"""Where kiln's non-Python folders (crt/, templates/, boards/) live, installed or editable."""

from importlib import resources
from pathlib import Path


def _package_dir(package: str) -> Path:
    return Path(str(resources.files(package)))


def crt_dir() -> Path:
    return _package_dir("kiln.crt")


def templates_dir() -> Path:
    return _package_dir("kiln.templates")


def boards_dir() -> Path:
    return _package_dir("kiln.boards")
