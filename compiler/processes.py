"""Ending the processes kiln started (make, gcc, QEMU) when it is interrupted.

A Ctrl-C at a terminal reaches kiln's whole process group, so its children stop with
it. A SIGINT sent to kiln alone (`kill -INT`, an IDE's stop button, a Python caller's
KeyboardInterrupt) does not: subprocess.run kills the child it waits for, but not that
child's own children (gcc under make, cc1 under gcc), and worker threads' children
(`kiln tune`'s builds and QEMU instances) are not waited for by the interrupted thread at
all. These helpers find them through /proc (Linux; elsewhere they find nothing and the
caller falls back to waiting).
"""

from __future__ import annotations

import os
import signal
import time


def _stat(pid: int | str) -> tuple[bytes, bytes, list[bytes]] | None:
    """(comm, state, the fields after state) of /proc/<pid>/stat; None once it has ended.
    "pid (comm) state ppid pgrp …": comm may hold spaces and ')', so split after the
    last ')'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        head, _, tail = stat.rpartition(b")")
        state, *rest = tail.split()
        return head.partition(b"(")[2], state, rest
    except (OSError, ValueError):
        return None


def _pids() -> list[str]:
    try:
        return [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def descendants(pid: int | None = None, skip: frozenset[int] = frozenset()) -> set[int]:
    """The live processes below `pid` (default: this process), at any depth, leaving out
    the processes in `skip` and everything below them."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for name in _pids():
        info = _stat(name)
        if info is None or not info[2]:
            continue                    # the process ended while this loop ran
        children.setdefault(int(info[2][0]), []).append(int(name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found and child not in skip:
                found.add(child)
                todo.append(child)
    return found


def group_members(pgid: int) -> list[str]:
    """The names of the processes of group `pgid` still running (zombies, which only wait
    for a reaper, left out): what a Ctrl-C to that group left behind."""
    found = []
    for name in _pids():
        info = _stat(name)
        if info is not None and len(info[2]) > 1 and int(info[2][1]) == pgid \
                and info[1] != b"Z":
            found.append(info[0].decode(errors="replace"))
    return found


def _running(pid: int) -> bool:
    """Whether `pid` still runs (a zombie has ended: it only waits for its parent)."""
    info = _stat(pid)
    return info is not None and info[1] != b"Z"


def _signal(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def end_processes(pids: set[int], grace_s: float = 0.5) -> None:
    """SIGTERM each of `pids`, then SIGKILL those still running after `grace_s`. TERM
    first: gcc deletes its temporary files and make its half-written target on it, and
    QEMU exits; their outputs are staging or temporary folders removed anyway."""
    _signal(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        pids = {pid for pid in pids if _running(pid)}
        if pids:
            time.sleep(0.02)
    _signal(pids, signal.SIGKILL)


def end_descendants(keep: frozenset[int] = frozenset()) -> int:
    """End every process below this one except those in `keep` and below them (the
    processes that existed before the interrupted work started: a library caller's
    own); returns how many were signalled."""
    pids = descendants(skip=keep)
    end_processes(pids)
    return len(pids)
