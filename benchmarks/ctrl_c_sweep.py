#!/usr/bin/env python3
"""Ctrl-C sweep: each kiln command interrupted at N delays; what it left behind.

    python benchmarks/ctrl_c_sweep.py [--delays 20] [--only compile,create,...] [--board B]

Per command, one uninterrupted reference run gives its output and its duration T; then
each trial starts the command afresh (own folder, cache and TMPDIR), sends SIGINT to its
process group (a terminal's Ctrl-C) after a delay spread from the end of Python's own
start-up (before it, no program's code runs: see python_start_s) to 1.1 T, and sorts
the result into:

  ok                 the command finished before the signal, its output whole
  interrupted-clean  exit 130 (or killed by SIGINT before Python ran), one line, and the
                     output is absent, the old one, or whole
  python-start       SIGINT while Python itself starts (site; "Fatal Python error:
                     init_import_site") or while pip's console script imports
                     kiln.launcher, before any line of kiln runs: a load spike can put
                     a delay there; out of kiln's reach, not counted as a failure
  error              exit 2: a one-line error (listed below the table)
  traceback          a Python traceback on stderr
  broken             an output that is neither absent, the old one, nor whole (byte-for-
                     byte the reference's); staging/temporary folders left behind; a
                     child process still running; or a cache the next run cannot use

Commands: compile (into a fresh folder, and over an earlier output of another model),
project create (fresh, and --force over another model's project), quantize (fresh, and
--force over an older file), tune (records file), and the cached host-driven build
(`kiln run MODEL --board B`, B = mps2-an386 with QEMU, else `kiln profile` on the host;
the next run on the same cache must work). tests/test_hostile_interrupts.py runs a few
delays of the quick ones.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from _common import models_root

from kiln.compiler.fsutil import STAGING_PREFIX
from kiln.compiler.outdir import LOCK_FILE
from kiln.compiler.processes import group_members

KILN = str(Path(sys.executable).with_name("kiln"))
STAGING = STAGING_PREFIX
OUTCOMES = ("ok", "interrupted-clean", "python-start", "error", "traceback", "broken")


def digits(name: str) -> Path:
    return models_root() / "digits" / name


def snapshot(path: Path) -> dict[str, str] | None:
    """relative path → sha256 of every file under `path` (a file or a folder), None if
    absent. Build products of a cached project are not compared (timestamps); nor is a
    project's lock file (`create --force` locks the old project before replacing it, so
    an interrupt may leave the old one with its .kiln-lock: kiln's own, never listed)."""
    if not path.exists():
        return None
    if path.is_file():
        return {"": hashlib.sha256(path.read_bytes()).hexdigest()}
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file() and p.name != LOCK_FILE}


def env_for(trial: Path) -> dict[str, str]:
    env = dict(os.environ)
    (trial / "tmp").mkdir(exist_ok=True)
    env.update(XDG_CACHE_HOME=str(trial / "cache"), TMPDIR=str(trial / "tmp"),
               PYTHONUNBUFFERED="1")
    return env


def kiln(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([KILN, *args], cwd=cwd, env=env_for(cwd), capture_output=True,
                          text=True, timeout=timeout)


@dataclass
class Case:
    name: str
    argv: list[str]                         # relative to the trial folder
    output: str                             # what the command writes (relative path)
    setup: Callable[[Path], None] = lambda trial: None   # the old output, if any
    check: Callable[["Case", Path], str | None] | None = None   # extra check of a trial
    reference: dict | None = field(default=None)
    old: dict | None = field(default=None)
    duration: float = 0.0


def valid_output(case: Case, trial: Path) -> str | None:
    """None when the output is absent, the old one or the reference; else why not."""
    got = snapshot(trial / case.output)
    if got is None or got == case.old or got == case.reference:
        return None
    if case.reference is None:
        return "output differs"
    missing = sorted(set(case.reference) - set(got))
    changed = sorted(k for k in got if k in case.reference and got[k] != case.reference[k])
    extra = sorted(set(got) - set(case.reference))
    return f"half an output: missing {missing[:3]}, changed {changed[:3]}, extra {extra[:3]}"


def litter(trial: Path) -> str | None:
    left = [str(p.relative_to(trial)) for p in trial.rglob(f"{STAGING}*")]
    left += [str(p.relative_to(trial)) for p in (trial / "tmp").iterdir()]
    return f"left behind: {left[:3]}" if left else None


def check_records(case: Case, trial: Path) -> str | None:
    path = trial / case.output
    if not path.exists():
        return None
    text = path.read_text()
    if text and not text.endswith("\n"):
        return "records file ends mid-line"
    for n, line in enumerate(text.splitlines(), 1):
        try:
            json.loads(line)
        except ValueError:
            return f"records line {n} is not JSON"
    return None


def check_cache(case: Case, trial: Path) -> str | None:
    """Every cached project whole, and the next run on this cache works."""
    root = trial / "cache" / "kiln" / "projects"
    for entry in (root.iterdir() if root.exists() else []):
        if entry.is_dir() and not ((entry / "kiln.json").is_file() and
                                   any((entry / "build").glob("firmware*"))):
            return f"cache entry {entry.name} is incomplete"
    again = kiln(case.argv, trial)
    if again.returncode != 0:
        return f"next run failed ({again.returncode}): {again.stderr.strip()[-200:]}"
    return None


def cases(board: str) -> list[Case]:
    model, other = digits("digits_cnn_int8.tflite"), models_root() / "external" / \
        "tfm_hello_world_int8.tflite"
    float_model, calib = digits("digits_cnn_float.tflite"), digits("digits_calib_x.npy")
    m, o = str(model), str(other)

    def old_compile(t: Path) -> None:
        assert kiln(["compile", o, "-o", "out"], t).returncode == 0

    def old_project(t: Path) -> None:
        assert kiln(["project", "create", o, "--board", "mps2-an386", "-o", "proj"],
                    t).returncode == 0

    def old_file(t: Path) -> None:
        shutil.copy(other, t / "q.tflite")

    cached = (["run", m, "--board", board] if board != "host" else ["profile", m])
    return [
        Case("compile", ["compile", m, "-o", "out"], "out"),
        Case("compile over old", ["compile", m, "-o", "out"], "out", old_compile),
        Case("project create", ["project", "create", m, "--board", "mps2-an386", "-o",
                                "proj"], "proj"),
        Case("project create --force", ["project", "create", m, "--board", "mps2-an386",
                                        "-o", "proj", "--force"], "proj", old_project),
        Case("quantize", ["quantize", str(float_model), "--calibration", str(calib), "-o",
                          "q.tflite"], "q.tflite"),
        Case("quantize --force", ["quantize", str(float_model), "--calibration", str(calib),
                                  "-o", "q.tflite", "--force"], "q.tflite", old_file),
        Case("tune", ["tune", m, "--board", "host", "-o", "r.jsonl", "--trials", "4"],
             "r.jsonl", check=check_records),
        Case("cached build", cached, "cache/kiln/projects", check=check_cache),
    ]


def prepare(case: Case, work: Path) -> None:
    """The reference run: the command's whole output and how long it takes."""
    ref = Path(tempfile.mkdtemp(prefix="ref-", dir=work))
    case.setup(ref)
    case.old = snapshot(ref / case.output)
    started = time.monotonic()
    done = kiln(case.argv, ref)
    case.duration = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"{case.name}: the uninterrupted run failed: {done.stderr.strip()}")
    if case.check is None:
        case.reference = snapshot(ref / case.output)
    shutil.rmtree(ref, ignore_errors=True)


def trial(case: Case, delay: float, work: Path) -> tuple[str, str]:
    """(outcome, detail) of one run interrupted after `delay` seconds."""
    t = Path(tempfile.mkdtemp(prefix="trial-", dir=work))
    try:
        case.setup(t)
        proc = subprocess.Popen([KILN, *case.argv], cwd=t, env=env_for(t),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        time.sleep(delay)
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        _, err = proc.communicate(timeout=900)
        time.sleep(0.2)
        if before_kiln_code(err):
            return "python-start", ""       # Python's own start-up, before kiln's code
        if "Traceback" in err or "Fatal Python error" in err:
            lines = err.strip().splitlines()
            return "traceback", f"{lines[0]} … {lines[-1]}"
        alive = group_members(proc.pid)
        if alive:
            return "broken", f"still running: {alive}"
        problem = (litter(t) or valid_output(case, t) if case.check is None
                   else litter(t) or case.check(case, t))
        if problem:
            return "broken", problem
        if proc.returncode == 0:
            return "ok", ""
        if proc.returncode in (130, -signal.SIGINT):
            return "interrupted-clean", ""
        return "error", err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}"
    finally:
        shutil.rmtree(t, ignore_errors=True)


def before_kiln_code(err: str) -> bool:
    """Whether stderr shows a SIGINT that came before any line of kiln ran: in Python's
    own start-up (site: "Fatal Python error: init_import_site") or in the console script
    pip generates, while it imports kiln.launcher (its only frames the script's import
    line and importlib's frozen ones; kiln.launcher handles Ctrl-C from its first line)."""
    if err.startswith("Fatal Python error: init_import_site"):
        return True
    frames = re.findall(r'^  File "([^"]+)"', err, flags=re.MULTILINE)
    return (err.startswith("Traceback") and err.rstrip().endswith("KeyboardInterrupt")
            and bool(frames) and frames[0] == KILN
            and all(f.startswith("<frozen ") for f in frames[1:]))


def python_start_s() -> float:
    """How long this Python takes to start (site, the editable install's finder) before
    it runs the first line of any program: a SIGINT then is Python's own "Fatal Python
    error: init_import_site", before kiln's code exists. The sweep starts after it."""
    runs = []
    for _ in range(3):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        runs.append(time.monotonic() - started)
    return max(runs)


def delays_for(case: Case, n: int, start: float) -> list[float]:
    """n delays from just after Python's start-up to 1.1 T: kiln's imports, every phase,
    and just after the end."""
    first = start + 0.01
    if n == 1:
        return [max(first, case.duration / 2)]
    return [round(first + (1.1 * case.duration - first) * i / (n - 1), 3) for i in range(n)]


def sweep(names: list[str] | None, n: int, board: str, work: Path,
          log: Callable[[str], None] = print) -> dict[str, list[tuple[float, str, str]]]:
    results: dict[str, list[tuple[float, str, str]]] = {}
    start = python_start_s()
    log(f"Python starts in {start * 1000:.0f} ms here; delays begin after that")
    for case in cases(board):
        if names and not any(case.name.startswith(x) for x in names):
            continue
        prepare(case, work)
        results[case.name] = []
        for delay in delays_for(case, n, start):
            outcome, detail = trial(case, delay, work)
            results[case.name].append((delay, outcome, detail))
            if outcome not in ("ok", "interrupted-clean", "python-start"):
                log(f"  {case.name} at {delay:.2f} s: {outcome}: {detail}")
    return results


def main() -> int:
    # Started in the background by a shell without job control, SIGINT comes ignored and
    # every kiln started here would inherit that: the handler resets at their exec.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delays", type=int, default=20, help="delays per command (default 20)")
    ap.add_argument("--only", help="comma-separated command names (prefixes)")
    ap.add_argument("--board", default=None,
                    help="board of the cached build (default mps2-an386 with QEMU, else host)")
    args = ap.parse_args()
    board = args.board or ("mps2-an386" if shutil.which("qemu-system-arm") else "host")
    with tempfile.TemporaryDirectory(prefix="kiln-ctrl-c-") as tmp:
        results = sweep(args.only.split(",") if args.only else None, args.delays, board,
                        Path(tmp))
    print(f"\nCtrl-C sweep, {args.delays} delays per command (SIGINT to the process group)")
    print(f"{'command':<24} " + " ".join(f"{o:>12}" for o in OUTCOMES))
    bad = 0
    for name, rows in results.items():
        counts = Counter(outcome for _, outcome, _ in rows)
        bad += counts["traceback"] + counts["broken"]
        print(f"{name:<24} " + " ".join(f"{counts[o]:>12}" for o in OUTCOMES))
    details = [(name, d, o, x) for name, rows in results.items() for d, o, x in rows
               if o not in ("ok", "interrupted-clean", "python-start")]
    for name, delay, outcome, detail in details:
        print(f"  {name} at {delay:.2f} s: {outcome}: {detail}")
    print(f"{bad} traceback(s) or broken output(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
