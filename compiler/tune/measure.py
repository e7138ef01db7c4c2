"""Measure a batch of candidates on the target: build one tuning firmware, then per
candidate check its output against the reference kernel's and time it, over RPC.

The input of each workload is fixed-seed random int8 (derived from the workload key), so
a rerun measures the same thing. Each candidate is run once on it and its output compared
byte for byte with the output of the plain reference kernel (the "generic" variant, which
tests hold bit-exact with tflite-micro) run on the same device; a candidate that differs
is reported as a mismatch, never timed and never chosen. Timing: `warmup` runs, then
`repeat` single runs timed one by one (median, min, max). On QEMU, ticks become
instruction counts (-icount); on a board they are core cycles.
"""

from __future__ import annotations

import hashlib
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from ..artifact import Artifact
from ..codegen.lowering import Target
from ..errors import DeviceError
from .firmware import Variant, tuning_artifact
from .workloads import Workload, knobs_id


@dataclass
class Measurement:
    workload: Workload
    knobs: dict
    status: str                           # "ok", "mismatch", "error", "unfit"
    cycles: list[int] = field(default_factory=list)
    detail: str = ""
    where: dict = field(default_factory=dict)   # kiln tune --ray: the node and worker


@dataclass
class MeasureOptions:
    repeat: int = 5
    warmup: int = 1
    timeout: float = 120.0
    ports: list[str] = field(default_factory=list)   # real boards: one worker per port
    flash_command: str | None = None      # e.g. "st-flash write {bin} 0x08000000"
    flash: bool = False                   # flash as the board file says (flashing = ...)
    keep_dir: Path | None = None          # keep the tuning projects here (debugging)


@lru_cache(maxsize=None)
def toolchain_version(board_is_host: bool) -> str:
    cc = "cc" if board_is_host else "arm-none-eabi-gcc"
    if shutil.which(cc) is None:
        return f"{cc} (not found)"
    out = subprocess.run([cc, "--version"], capture_output=True, text=True,
                         errors="replace").stdout
    return out.splitlines()[0].strip() if out else cc


def workload_input(w: Workload, nbytes: int) -> bytes:
    seed = int.from_bytes(hashlib.sha256(w.key.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).integers(-128, 128, nbytes, dtype=np.int8).tobytes()


def _first_difference(a: bytes, b: bytes) -> str:
    diff = np.flatnonzero(np.frombuffer(a, np.int8) != np.frombuffer(b, np.int8))
    return (f"{diff.size} of {len(a)} output bytes differ from the reference kernel's, "
            f"first at {int(diff[0])}: {np.frombuffer(a, np.int8)[diff[0]]} vs "
            f"{np.frombuffer(b, np.int8)[diff[0]]}")


@dataclass
class Batch:
    """The candidates one tuning firmware measures, and that firmware's sources."""

    candidates: list[tuple[Workload, dict]]
    artifact: Artifact
    variants: list[Variant]


def make_batch(candidates: list[tuple[Workload, dict]], target: Target, version: str) -> Batch:
    """The firmware sources for `candidates`, plus the reference kernel of every workload
    (run on the device to check the others' outputs) where it is not a candidate itself."""
    wanted = {(w.key, knobs_id(k)) for w, k in candidates}
    full = list(candidates)
    for w in {w.key: w for w, _ in candidates}.values():
        if (w.key, knobs_id(w.reference)) not in wanted:
            full.append((w, w.reference))
    art, variants = tuning_artifact(full, target, version)
    return Batch(list(candidates), art, variants)


@contextmanager
def built_firmware(batch: Batch, target: Target, options: MeasureOptions,
                   board=None) -> Iterator[tuple[object, float]]:
    """The batch's tuning firmware built in a temporary project (removed on exit unless
    options.keep_dir): yields (the Project, the seconds the build took). `board`: the
    Board (default: kiln's board target.board names)."""
    from kiln.project_gen import create_project

    tmp = tempfile.mkdtemp(prefix="kiln-tune-", dir=options.keep_dir)
    try:
        project = create_project(batch.artifact, board or target.board, Path(tmp) / "fw",
                                 mode="host-driven")
        started = time.monotonic()
        project.build()
        yield project, time.monotonic() - started
    finally:
        if options.keep_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)


def measure_batch(batch: Batch, target: Target, options: MeasureOptions,
                  on_result: Callable[[Measurement], None], port: str | None = None,
                  board=None) -> float:
    """Build the batch's firmware and measure every candidate in it, on QEMU (or the
    host), or on the board at serial `port` after running the flash command; each result
    goes to `on_result` as soon as it is known. `board`: the Board (default: kiln's board
    target.board names). Returns the seconds the build took."""
    from kiln.project_gen.rpc_client import RpcOptions

    wanted = {(w.key, knobs_id(k)) for w, k in batch.candidates}
    with built_firmware(batch, target, options, board) as (project, build_s):
        if port is not None and (options.flash_command or options.flash):
            _flash(options.flash_command, project, port)
        qemu = project.board.runs_on == "qemu" and port is None
        with project.connect(port=port,
                             options=RpcOptions(command_timeout=options.timeout)) as session:
            for m in measurements(session, batch.variants, wanted, options, qemu):
                on_result(m)
        return build_s


def _flash(command: str | None, project, port: str) -> None:
    # The one runner of flash commands (kiln flash, run/profile --flash-command): what kiln
    # puts in the user's shell line (paths under a temporary or --keep folder, the port)
    # is quoted, so a space or `;` in it stays one argument. Without a command: as the
    # board file says.
    from kiln.project_gen.flash import firmware_files, flash_firmware, run_flash_command

    if command is None:
        flash_firmware(project.board, project.path / "build", port)
    else:
        run_flash_command(command, firmware_files(project.path / "build"), port)


def measurements(session, variants: list[Variant], wanted: set[tuple[str, str]],
                 options: MeasureOptions, qemu: bool) -> Iterator[Measurement]:
    """Check and time each (workload key, knobs id) in `wanted` of the firmware `session`
    talks to, whose tuning table is `variants`; a Measurement as each is known. `qemu`:
    ticks become instruction counts (-icount), else they are the board's cycles. A
    variant's workload needs only .key and .reference (a farm worker gets no graph)."""
    from kiln.project_gen.qemu import ticks_to_instructions

    to_cycles = ((lambda t, hz: ticks_to_instructions(t, hz)) if qemu else (lambda t, hz: t))
    by_workload: dict[str, list[Variant]] = {}
    for v in variants:
        by_workload.setdefault(v.workload.key, []).append(v)
    for key, group in by_workload.items():
        if not any((key, knobs_id(v.knobs)) in wanted for v in group):
            continue                # a farm's retry of what a lost worker left
        w = group[0].workload
        x = workload_input(w, group[0].input_bytes)
        ref = next(v for v in group if knobs_id(v.knobs) == knobs_id(w.reference))
        expected = session.run_kernel(ref.index, [x])[0]
        for v in group:
            if (key, knobs_id(v.knobs)) not in wanted:
                continue
            yield _measure_one(session, v, x, expected, options, to_cycles)


def _measure_one(session, v: Variant, x: bytes, expected: bytes, options: MeasureOptions,
                 to_cycles: Callable[[int, int], int]) -> Measurement:
    try:
        got = session.run_kernel(v.index, [x])[0]
    except DeviceError as e:
        return Measurement(v.workload, v.knobs, "error", detail=str(e))
    if got != expected:
        return Measurement(v.workload, v.knobs, "mismatch", detail=_first_difference(got, expected))
    cycles = []
    if options.warmup:
        session.time_kernel(v.index, repeat=options.warmup, warmup=0, timeout=options.timeout)
    for _ in range(max(1, options.repeat)):
        t = session.time_kernel(v.index, repeat=1, warmup=0, timeout=options.timeout)
        cycles.append(to_cycles(t.min_ticks, t.tick_hz))
    return Measurement(v.workload, v.knobs, "ok", cycles=cycles)


def summary(cycles: list[int]) -> dict[str, int]:
    return {"median": int(statistics.median_low(cycles)), "min": min(cycles),
            "max": max(cycles)}
