"""kiln's caches (host shared libraries, cached host-driven projects): one way to fill
an entry, shared by every cache.

An entry is a folder. It is built in a staging folder beside it and renamed into place
whole, under a lock per entry (<entry>.lock), so:
- an interrupted build (Ctrl-C, kill -9, a full disk) leaves no entry, never half of one;
- concurrent kiln processes wanting the same entry wait for the one building it and then
  share it, rather than build into the same folder;
- an entry found damaged (an older kiln's, a hand edit) is rebuilt, never reported as the
  user's problem.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

from .errors import BuildError
from .fsutil import STAGING_PREFIX, file_lock, replace_dir, staging_dir
from .paths import cache_dir

__all__ = ["cache_dir", "cached_entry"]


def _remove_stale_staging(entry: Path) -> None:
    """Staging folders of `entry` left by a killed build. Called with the entry's lock
    held, so no live process is staging it. staging_dir names them
    .kiln-staging-<entry>-<random>, the random part without '-': a longer entry name
    sharing this one's prefix (…-t<records digest>) is another entry's, and is kept."""
    head = f"{STAGING_PREFIX}{entry.name}-"
    for stale in entry.parent.glob(f"{head}*"):
        if "-" not in stale.name[len(head):] and stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)


def cached_entry(entry: Path, complete: Callable[[Path], bool],
                 build: Callable[[Path], None], what: str) -> Path:
    """The cache folder `entry`, built first if it is missing or not `complete`.

    complete(folder): whether a folder holds a whole, usable entry.
    build(folder): fill the empty folder given (a staging folder, not `entry`: nothing
    it writes may name the folder it is in, since the folder is renamed afterwards).
    what: the entry's role in the message of a lock that cannot be taken.
    """
    if complete(entry):                 # the common case: no lock, no write
        return entry
    with file_lock(entry.with_name(entry.name + ".lock"), what):
        if complete(entry):             # another process built it while this one waited
            return entry
        _remove_stale_staging(entry)
        with staging_dir(entry) as staging:
            build(staging)
            if not complete(staging):
                raise BuildError(f"kiln bug: the {what} built in {staging} is incomplete")
            if entry.is_symlink() or (entry.exists() and not entry.is_dir()):
                entry.unlink()          # not kiln's: a cache entry is always a folder
            replace_dir(staging, entry)  # a damaged entry is swapped out and removed
    return entry
