"""Output folders written as a whole: `kiln compile -o DIR`, `kiln project create`.

The new folder is built in a staging folder beside the target and swapped into place
(fsutil.staging_dir + replace_dir), so an interrupted command leaves the old folder or
the new one, never half of one. Files of the user's that the new folder keeps are
carried over as hard links, not moved: until the swap they are all still in the old
folder, so an interrupt at any point loses none of them; after it the old folder (its
kiln files, its links, build/) is removed, and nothing it pointed to is touched.

Nothing here writes through a symbolic link: the staging folder is fresh and private,
and links in the old folder are carried over as links or dropped, never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from .errors import InputError
from .fsutil import STAGING_PREFIX, current_umask, replace_dir, staging_dir

# The lock file of a folder kiln mutates in place (a firmware project: fsutil.file_lock).
LOCK_FILE = ".kiln-lock"


def is_scratch(name: str) -> bool:
    """kiln's bookkeeping in an output folder (a killed process's staging leftovers, the
    lock file): never a user's file, never content that makes a folder "not empty"."""
    return name.startswith(STAGING_PREFIX) or name == LOCK_FILE


def entries(folder: Path) -> list[str]:
    """The names in `folder` other than scratch ones; [] when it does not exist."""
    try:
        return sorted(n for n in os.listdir(folder) if not is_scratch(n))
    except FileNotFoundError:
        return []


def output_dir(path: str | Path) -> Path:
    """`path` as an absolute path whose parent is resolved (the staging folder goes
    there, on the same file system). Refuses a `path` that is a symbolic link (kiln
    replaces the folder as a whole and would not follow a link to do it) or exists and
    is not a directory."""
    path = Path(path)
    if path.name in ("", ".", ".."):
        path = path.resolve()
    else:
        path = path.parent.resolve() / path.name
    if path.is_symlink():
        raise InputError(f"{path} is a symbolic link (to {os.readlink(path)}): kiln writes "
                         f"its output folder as a whole and does not follow links; name the "
                         f"folder itself")
    if path.exists() and not path.is_dir():
        raise InputError(f"{path} exists and is not a directory")
    return path


def write_dir(target: Path, write: Callable[[Path], None], keep: Iterable[str] = ()) -> None:
    """Make `target` (from output_dir) the folder `write(folder)` fills, plus the entries
    `keep` of the current target (relative paths, files or whole folders), in one swap.

    Raises InputError when a kept entry is in the way of a written one (a file where the
    new folder has a folder). The target keeps its permissions; a new one gets the
    umask's."""
    try:
        with staging_dir(target) as staging:
            write(staging)
            for rel in keep:
                carry(target / rel, staging / rel)
            mode = stat.S_IMODE(os.stat(target).st_mode) if target.is_dir() else \
                0o777 & ~current_umask()
            os.chmod(staging, mode)       # mkdtemp made it private while it was filled
            replace_dir(staging, target)
    except PermissionError as e:
        if e.filename and Path(e.filename).parent == target.parent:
            raise InputError(f"cannot write {target}: kiln builds it beside, in "
                             f"{target.parent}, and renames it into place, but that folder "
                             f"is not writable") from None
        raise
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST) and e.filename2 == str(target):
            raise InputError(f"{target} was created by another process meanwhile: "
                             f"run again (with --force to replace it)") from None
        raise


def carry(src: Path, dst: Path) -> None:
    """Put the file, link or folder `src` at `dst` too, without copying data: files
    become hard links to the same inode (the user's own file, edits and all), links
    are linked as links, folders are made anew with src's permissions. Where a hard link
    is refused (a file system without them, protected_hardlinks), a regular file is
    copied and a link re-made. An entry that vanished meanwhile is skipped."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    stack, folders = [(src, dst)], []
    while stack:                          # iterative: a deep tree cannot overflow the stack
        s, d = stack.pop()
        try:
            info = os.lstat(s)
        except FileNotFoundError:
            continue
        if os.path.lexists(d):
            raise InputError(f"{s} is in the way: the new output writes {d.name} there; "
                             f"move it and run again")
        if stat.S_ISDIR(info.st_mode):
            d.mkdir()
            folders.append((s, d))
            stack.extend((s / name, d / name) for name in os.listdir(s))
        else:
            _link(s, d, info)
    for s, d in reversed(folders):        # innermost first: a read-only folder last
        shutil.copystat(s, d, follow_symlinks=False)


def _link(src: Path, dst: Path, info: os.stat_result) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
        return
    except FileExistsError:
        raise
    except OSError:
        pass
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(src), dst)
    elif stat.S_ISREG(info.st_mode):
        shutil.copy2(src, dst, follow_symlinks=False)
    else:
        raise InputError(f"cannot keep {src} in the new output: the file system refuses a "
                         f"hard link to it and kiln copies only regular files; move it away")


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT), SIGTERM and SIGHUP for the block and deliver them after it:
    for a few renames in place that must all happen or none (the interrupt comes when
    the last one is done). A no-op off the main thread, where Python takes no signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
