"""Where kiln's non-Python folders (crt/, templates/, boards/) live, installed or editable."""

import os
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


def cache_dir(kind: str) -> Path:
    """kiln's cache folder for `kind` ("host": host shared libraries, "projects": cached
    host-driven projects): $XDG_CACHE_HOME/kiln/<kind>, or ~/.cache/kiln/<kind>.

    Always absolute: a relative XDG_CACHE_HOME is invalid by the XDG spec and ignored
    (it broke the host build, whose compiler runs in another working directory)."""
    from .fsutil import absolute_dir_from_env

    base = absolute_dir_from_env(os.environ.get("XDG_CACHE_HOME"), Path.home() / ".cache")
    return base / "kiln" / kind
