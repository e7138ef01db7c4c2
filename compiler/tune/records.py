"""Tuning records: one JSON object per line, appended as measurements finish.

    {"workload": "CONV_2D in 1x49x10x1 ...", "op": "CONV_2D", "board": "mps2-an386",
     "cpu": "cortex-m4", "toolchain": "arm-none-eabi-gcc 12.2.1", "kiln": "0.1.0",
     "knobs": {"variant": "gemm", ...}, "status": "ok",
     "cycles": {"median": 81234, "min": 81230, "max": 81240}, "unit": "instructions",
     "repeat": 5, "time": "2026-11-22T08:10:00Z", "model": "kws_ref_model",
     "session": "…", "elapsed_s": 12.5}

status "ok" is a timed candidate whose output matched the reference kernel's on the
device; "mismatch" a candidate whose output did not (a kiln bug: never chosen, never
measured again); "error" a kernel that returned a non-zero status; "unfit" a candidate
whose tuning build does not fit the board (a layer's input, output and scratch side by
side; "detail" says by how much), left to the default heuristic. A file is never
rewritten: `kiln tune` appends, so an interrupted run resumes where it stopped, and a
line that does not parse (a run killed mid-write) is skipped with a warning.

`best_knobs` is the choice compile() makes: per workload, the fastest "ok" record on
the board (median, then min, then the knobs' text, so the pick does not depend on the
order of the lines).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..fsutil import read_regular_file
from .workloads import knobs_id

# Bounds on what Records.load reads: a record is one line of ~500 bytes, and a file of
# many tuning sessions a few MB. A larger file is refused unread; a longer line, a line
# nested too deep for the JSON parser or holding a 5,000-digit number is not a record
# (skipped and counted, like any line that does not parse).
MAX_RECORDS_BYTES = 256 << 20
MAX_RECORD_LINE = 64 << 10
_SCALARS = (str, int, float, bool, type(None))


@dataclass
class Records:
    path: Path | None = None
    entries: list[dict] = field(default_factory=list)
    skipped_lines: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # id(entry) → its 1-based line in `path` (entries read by load), for kiln.json's
    # "tuning record <file>:<line>" (kiln.compiler.schedule)
    _lines: dict[int, int] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def load(cls, path: str | os.PathLike[str], missing_ok: bool = False) -> "Records":
        """The records in the .jsonl file `path` (lines that are not records are counted in
        `skipped_lines`); an empty Records bound to `path` if it is missing and
        `missing_ok`, else InputError (also for a directory)."""
        path = Path(path)
        if not path.exists():
            if missing_ok:
                return cls(path=path)
            raise InputError(f"{path}: no such tuning records file")
        if path.is_dir():
            raise InputError(f"{path} is a directory, not a tuning records file (.jsonl)")
        # A FIFO, a device or /dev/zero is refused unread; so is a file past the cap.
        data = read_regular_file(path, "tuning records file", MAX_RECORDS_BYTES)
        entries, skipped, lines = [], 0, {}
        for number, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), 1):
            if not line.strip():
                continue
            entry = _parse_line(line)
            if entry is not None and _valid(entry):
                entries.append(entry)
                lines[id(entry)] = number
            else:
                skipped += 1
        return cls(path=path, entries=entries, skipped_lines=skipped, _lines=lines)

    def line_of(self, entry: dict) -> int | None:
        """The line of `path` that `entry` (one of `entries`) was read from; None for an
        entry added in memory or appended since."""
        return self._lines.get(id(entry))

    def append(self, entry: dict) -> None:
        """Add a record, and write it to the file at once (one line, flushed)."""
        if not _valid(entry):
            raise ValueError(f"not a tuning record: {entry}")
        with self._lock:
            self.entries.append(entry)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                _end_last_line(self.path)
                _append_line(self.path, json.dumps(entry, sort_keys=True) + "\n")

    def measured(self, board: str) -> set[tuple[str, str]]:
        """(workload key, knobs id) pairs already measured on `board`, whatever the result."""
        return {(e["workload"], knobs_id(e["knobs"])) for e in self.entries
                if e["board"] == board}

    def best(self, board: str, candidates: dict[str, set[str]] | None = None
             ) -> dict[str, dict]:
        """workload key → its fastest "ok" record on `board`; with `candidates` (workload
        key → knobs ids), only among records whose knobs are still a candidate, so a
        record from an older kiln never hides the valid ones behind it."""
        best: dict[str, tuple] = {}
        for e in self.entries:
            if e["board"] != board or e["status"] != "ok":
                continue
            if candidates is not None and knobs_id(e["knobs"]) not in candidates.get(
                    e["workload"], ()):
                continue
            c = e["cycles"]
            rank = (c["median"], c["min"], knobs_id(e["knobs"]))
            if e["workload"] not in best or rank < best[e["workload"]][0]:
                best[e["workload"]] = (rank, e)
        return {k: v[1] for k, v in best.items()}

    def cycles(self, board: str) -> dict[tuple[str, str], int]:
        """(workload key, knobs id) → median cycles of the "ok" records on `board`."""
        return {(e["workload"], knobs_id(e["knobs"])): e["cycles"]["median"]
                for e in self.entries if e["board"] == board and e["status"] == "ok"}


def _append_line(path: Path, line: str) -> None:
    """Append `line` with one write() on an O_APPEND descriptor: a Ctrl-C lands before
    or after it, never inside, and lines of two kiln processes appending to one file do
    not interleave (a buffered text file may split a long line into several writes)."""
    data = line.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0),
                 0o666)
    try:
        while data:                     # a regular file takes it whole; loop regardless
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def _end_last_line(path: Path) -> None:
    """A file cut off mid-line (a killed writer, a hand edit) gets its newline, so the
    next record starts a line of its own instead of joining the broken one."""
    try:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            last = f.read(1)
    except OSError:          # no file yet, or empty
        return
    if last != b"\n":
        with open(path, "a", encoding="utf-8") as f:
            f.write("\n")


def _parse_line(line: str) -> object | None:
    """The JSON value on one line, or None when the line cannot be a record: too long,
    malformed, nested deeper than the parser's recursion limit (100,000 brackets), or
    holding a number Python refuses to convert (ValueError past 4,300 digits)."""
    if len(line) > MAX_RECORD_LINE:
        return None
    try:
        return json.loads(line)
    except (ValueError, RecursionError):     # JSONDecodeError is a ValueError
        return None


def _count(value: object) -> bool:
    """A cycle count: a whole number (not a bool) a 64-bit counter can hold."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64


def _valid(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    knobs = entry.get("knobs")
    if not (isinstance(entry.get("workload"), str) and isinstance(entry.get("board"), str)
            and isinstance(knobs, dict) and entry.get("status") in
            ("ok", "mismatch", "error", "unfit")):
        return False
    # Knobs are flat (name → scalar): knobs_id and the code generator never see nesting.
    if not all(isinstance(v, _SCALARS) for v in knobs.values()):
        return False
    if entry["status"] == "ok":
        c = entry.get("cycles")
        return (isinstance(c, dict) and all(_count(c.get(k)) for k in ("median", "min", "max"))
                and c["min"] <= c["median"] <= c["max"])
    return True


def as_records(tuning_records: "Records | str | os.PathLike[str] | None") -> Records | None:
    """compile()'s tuning_records argument: None, a Records, or a path to a .jsonl file."""
    if tuning_records is None or isinstance(tuning_records, Records):
        return tuning_records
    if isinstance(tuning_records, (str, os.PathLike)):
        return Records.load(tuning_records)
    raise InputError("tuning_records must be a path to a .jsonl file or a Records object")
