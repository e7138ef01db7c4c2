"""Safe file-system primitives: every file kiln reads or writes goes through these.

Reads: a file is opened without blocking (a FIFO cannot hang kiln), checked to be a
regular file of bounded size on the open descriptor itself (no race between check and
read), and only then read.

Writes: a file is written beside its target and renamed over it, and a directory is
built in a staging folder and renamed into place, so an interrupted command leaves the
old output or none, never half of one. Renames replace a symlink, never write through it.

Locks: `file_lock` serialises the writers of one cache entry or one project across
processes (fcntl.flock: released by the kernel when a process dies, so a Ctrl-C or a
crash never leaves a stale lock behind).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from .errors import InputError, KilnError

STAGING_PREFIX = ".kiln-staging-"     # staging folders and files; safe to delete when stale
MiB = 1 << 20


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(path: str | Path, what: str, max_bytes: int) -> bytes:
    """The bytes of `path`, which must be a regular file of at most `max_bytes`.

    `what` names the file's role in messages ("model", "tuning records"). A FIFO, a
    device, a directory, a missing or unreadable file, or one larger than max_bytes is an
    InputError naming the path and the reason; nothing is read from such a file.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputError(f"cannot read {what} {path}: {e.strerror or e}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{what} {path} is {_kind(info.st_mode)}: kiln reads regular files only")
        if info.st_size > max_bytes:
            raise InputError(f"{what} {path} is {info.st_size:,} bytes, more than kiln reads "
                             f"for a {what} ({max_bytes:,} bytes)")
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while total <= max_bytes:           # the file may grow after fstat: stop past the cap
            chunk = os.read(fd, min(MiB, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise InputError(f"{what} {path} grew past {max_bytes:,} bytes while kiln read it")
        return b"".join(chunks)
    except OSError as e:
        raise InputError(f"cannot read {what} {path}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def check_regular_file(path: str | Path, what: str, max_bytes: int | None = None) -> Path:
    """`path` if it is a regular file (following symlinks) of at most max_bytes; InputError
    naming what it is otherwise. For files a library opens itself (np.load, tomllib)."""
    path = Path(path)
    try:
        info = path.stat()
    except OSError as e:
        raise InputError(f"cannot read {what} {path}: {e.strerror or e}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{what} {path} is {_kind(info.st_mode)}: kiln reads regular files only")
    if max_bytes is not None and info.st_size > max_bytes:
        raise InputError(f"{what} {path} is {info.st_size:,} bytes, more than kiln reads for a "
                         f"{what} ({max_bytes:,} bytes)")
    return path


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether a and b name the same existing file (through links, `..`, hard links)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def refuse_overwriting_inputs(output: str | Path, inputs: Sequence[str | Path | None],
                              option: str) -> None:
    """InputError when the file `output` would replace one of the files a command reads
    (`kiln run --output MODEL.tflite` must never replace the model)."""
    for source in inputs:
        if source is not None and same_file(output, source):
            raise InputError(f"{option} {output} is {source}, a file this command reads: "
                             f"kiln will not write over it; name another file")


def _staging_name(target: Path) -> Path:
    return target.parent / f"{STAGING_PREFIX}{os.getpid()}-{target.name}"


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` through a temporary file renamed over it: readers see the
    old file or the new one, an interrupted write leaves the old one. A symlink at `path`
    is replaced by the file, never written through."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=STAGING_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def current_umask() -> int:
    """The process umask (reading it means setting it, so it is set straight back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def staging_dir(target: str | Path) -> Iterator[Path]:
    """A fresh empty folder beside `target` (same file system, so it can be renamed onto
    it), removed again if the block raises or is interrupted. The caller moves it into
    place with `replace_dir` (or renames it) inside the block."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{target.name}-", dir=target.parent))
    try:
        yield staging
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


_RENAME_EXCHANGE = 2     # renameat2 flag (Linux 3.15+): swap two paths atomically


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap the directories a and b (Linux renameat2); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def replace_dir(staging: Path, target: Path) -> None:
    """Put the folder `staging` at `target`: a plain rename when target does not exist,
    else an atomic swap (the old folder then ends up at `staging` and is removed by
    staging_dir). Where the swap is unsupported, the old folder is renamed aside first,
    so at every instant `target` is the old folder, the new one, or briefly absent."""
    if not target.exists() and not target.is_symlink():
        os.rename(staging, target)
        return
    if target.is_symlink() or not target.is_dir():
        raise InputError(f"{target} exists and is not a directory")
    if _exchange(staging, target):
        return
    aside = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}old-", dir=target.parent))
    os.rename(target, aside / "old")
    os.rename(staging, target)
    os.rename(aside / "old", staging)        # removed with the staging folder
    aside.rmdir()


@contextlib.contextmanager
def file_lock(path: str | Path, what: str, timeout_s: float | None = None) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (created if missing) for the block.

    Concurrent kiln processes wanting the same cache entry or project wait here rather
    than collide. `timeout_s` None waits for as long as it takes; otherwise a KilnError
    names `what` when the lock is still held after that many seconds.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        if timeout_s is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise KilnError(f"{what} is locked by another kiln process "
                                        f"(lock file {path}); waited {timeout_s:g} s") from None
                    time.sleep(0.05)
        yield
    finally:
        os.close(fd)           # closing the descriptor releases the lock


def absolute_dir_from_env(value: str | None, default: Path) -> Path:
    """A base folder from an environment variable, made absolute: the XDG spec says a
    relative path in XDG_* is invalid and must be ignored, so it falls back to default."""
    if value and os.path.isabs(value):
        return Path(value)
    return default
