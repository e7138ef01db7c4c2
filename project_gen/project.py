"""Firmware projects: create one from a compiled model and a board, build it, run it.

A project is a plain directory (layout in templates/README.md.j2) whose
kiln.json holds the compiler's report plus a "project" entry (board, mode,
inputs, the files kiln wrote) and, after a build, a "size" entry.
`Project.open(dir)` is all kiln needs to build or run it again later.

Safety on disk: a project is created (or replaced, --force) whole, in a staging folder
swapped into place, so Ctrl-C leaves the earlier project or none; every later change
(build, new sample inputs) is made under the project's lock (.kiln-lock) with atomic
file writes; kiln never writes through a symbolic link in the project, and kiln.json's
shape is checked once, in Project.open.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from kiln.compiler.artifact import MAX_MANIFEST_BYTES, report_problem
from kiln.compiler.errors import BoardError, BuildError, FitError, InputError, KilnError
from kiln.compiler.fsutil import (atomic_write_bytes, check_regular_file, file_lock,
                                  read_regular_file, same_file)
from kiln.compiler.outdir import (LOCK_FILE, entries, is_scratch, output_dir,
                                  signals_deferred, write_dir)
from kiln.compiler.paths import crt_dir

from . import render
from .boards import Board, board_digest, board_toml, get_board, is_kiln_board, load_board_file
from .console import RunResult, to_result
from kiln.compiler.inputs import DEFAULT_SEED, TensorSpec, random_inputs, split_samples
from kiln.compiler.limits import check_firmware_limits
from .qemu import ICOUNT_SHIFT, run_elf, ticks_to_instructions
from .render import model_name
from .sizes import (SizeReport, check_fits, check_link_fits, linker_overflows, overflow_error,
                    size_report)
from .toolchain import MAKE, compiler_for, find_tool

MODES = ("standalone", "host-driven")
MANIFEST = "kiln.json"
SAMPLES_FILE = "inputs.npz"    # the baked sample inputs, for comparing against a reference
BOARD_FILE = "board.toml"      # the board of a project whose board is not one of kiln's own
HOST_RUN_TIMEOUT_S = 120.0


def kiln_version() -> str:
    try:
        return metadata.version("kiln")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _summary(paths: Sequence[str], most: int = 4) -> str:
    """"a, b, c, d and 3 more"."""
    shown = ", ".join(paths[:most])
    return shown + (f" and {len(paths) - most} more" if len(paths) > most else "")


def _by_folder(paths: Sequence[str]) -> list[str]:
    """Files at the top by name, then the rest counted per top folder: "30 in crt/"."""
    top = sorted(rel for rel in paths if "/" not in rel)
    folders: dict[str, int] = {}
    for rel in sorted(paths):
        if "/" in rel:
            folder = rel.split("/")[0] + "/"
            folders[folder] = folders.get(folder, 0) + 1
    return top + [f"{n} in {folder}" for folder, n in folders.items()]


@dataclass
class Replacement:
    """What create_project(force=True) did in a directory holding an earlier project."""
    replaced: list[str]        # kiln files written over (project-relative paths)
    removed: list[str]         # build/, and stale kiln files the earlier kiln.json listed
    kept: list[str]            # everything else, left alone ("dir/" for a whole folder)
    listed: bool               # whether the earlier kiln.json listed its files

    def summary(self, path: Path) -> str:
        """One line for the CLI."""
        text = f"replaced the kiln project in {path}: {len(self.replaced)} kiln files " \
               f"({_summary(_by_folder(self.replaced), 8)})"
        if self.removed:
            text += f"; removed {_summary(self.removed)}"
        if self.kept:
            why = "not kiln's" if self.listed else \
                "not kiln's, or stale kiln files: the earlier kiln.json lists none"
            text += f"; left alone ({why}): {_summary(self.kept)}"
        return text


@dataclass
class Project:
    path: Path
    board: Board
    manifest: dict[str, Any]
    # Set by create_project(force=True) over an earlier project: what it replaced.
    replacement: Replacement | None = field(default=None, repr=False)
    # Set by create_project: the fit verdict it reached (kiln.project_gen.sizes.FitVerdict).
    fit: Any = field(default=None, repr=False, compare=False)
    _lock_depth: int = field(default=0, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        """One line: the whole kiln.json is in `manifest`."""
        return (f"Project(path={str(self.path)!r}, board={self.board.name!r}, "
                f"mode={self.mode!r}, model={self.model_name!r})")

    @classmethod
    def open(cls, path: str | Path) -> "Project":
        """The project in `path`. Raises KilnError when `path` does not exist, holds no
        kiln.json, or holds one that is damaged or is not a project's."""
        path = Path(path)
        create = "create one with `kiln project create`"
        if not path.exists():
            raise KilnError(f"{path} does not exist: {create}")
        if not path.is_dir():
            raise KilnError(f"{path} is not a directory: a kiln project is a directory; {create}")
        manifest = _read_manifest(path)
        return cls(path, _project_board(path, manifest), manifest)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the project's lock for a change to it (build, new inputs), with the
        manifest and board read again under the lock: another process may have changed
        or replaced the project since it was opened. Re-entrant within this object."""
        if self._lock_depth:
            yield
            return
        with project_lock(self.path):
            self._lock_depth += 1
            try:
                self.manifest = _read_manifest(self.path)
                self.board = _project_board(self.path, self.manifest)   # replaced since?
                yield
            finally:
                self._lock_depth -= 1

    def _write(self, rel: str, data: bytes) -> None:
        """Write the project file `rel` atomically (readers see the old or the new file;
        a link at it is replaced, never written through). Refuses when a folder on
        the way is a link: it would lead out of the project."""
        folder = self.path
        for part in Path(rel).parts[:-1]:
            folder = folder / part
            if folder.is_symlink() or not folder.is_dir():
                what = "a symbolic link" if folder.is_symlink() else "not a directory"
                raise KilnError(f"{folder} is {what}: kiln writes only inside the project; "
                                f"recreate it with `kiln project create … --force`")
        atomic_write_bytes(self.path / rel, data)

    # -- facts -------------------------------------------------------------

    @property
    def mode(self) -> str:
        return self.manifest["project"]["mode"]

    @property
    def model_name(self) -> str:
        return model_name(self.manifest)

    @property
    def elf(self) -> Path:
        return self.path / "build" / ("firmware" if self.board.is_host else "firmware.elf")

    @property
    def input_specs(self) -> list[TensorSpec]:
        return [TensorSpec.from_report(e) for e in self.manifest["inputs"]]

    @property
    def output_specs(self) -> list[TensorSpec]:
        return [TensorSpec.from_report(e) for e in self.manifest["outputs"]]

    def _save_manifest(self) -> None:
        self._write(MANIFEST, _manifest_bytes(self.manifest))

    # -- build -------------------------------------------------------------

    def build(self, jobs: int | None = None) -> SizeReport:
        """`make` the firmware (incremental), then record and return its size report.

        Holds the project's lock: concurrent builds of one project take turns (the
        second finds little left to do). Raises BoardError naming the region and the
        overflow when the model does not fit, BuildError with the first compiler error
        otherwise, KilnError when build/ holds a symbolic link (make would write
        through it, out of the project).
        """
        with self._locked():
            # A project made by an older kiln may break a limit create_project checks now.
            check_firmware_limits(self.manifest, self.mode, self.board)
            find_tool(compiler_for(self.board))
            self._check_build_dir()
            argv = [find_tool(MAKE), "-C", str(self.path), f"-j{jobs or os.cpu_count() or 1}"]
            proc = subprocess.run(argv, capture_output=True, text=True, errors="replace")
            log = proc.stdout + proc.stderr
            self._write("build/build.log", log.encode("utf-8", "replace"))
            if proc.returncode != 0:
                overflows = linker_overflows(log)
                if overflows:
                    raise overflow_error(self.model_name, self.board, overflows)
                # The compiler's own "error:" line (command lines carry -Werror, so not "error").
                first = next((ln.strip() for ln in log.splitlines() if "error:" in ln.lower()),
                             log.strip().splitlines()[-1] if log.strip() else "no output")
                raise BuildError(f"building {self.path} failed: {first} "
                                 f"(full log: {self.path / 'build' / 'build.log'})")
            report = self.size_report()
            self.manifest["size"] = report.to_json()
            self._save_manifest()
            return report

    def _check_build_dir(self) -> None:
        """build/ as a real folder with no symbolic link in it: make writes every object
        file and the firmware there, and would follow a link out of the project."""
        build = self.path / "build"
        if not os.path.lexists(build):
            build.mkdir()
        bad = [build] if build.is_symlink() or not build.is_dir() else \
            [Path(d) / n for d, dirs, files in os.walk(build) for n in dirs + files
             if (Path(d) / n).is_symlink()]
        if bad:
            what = "a symbolic link" if bad[0].is_symlink() else "not a directory"
            raise KilnError(f"{bad[0]} is {what}: kiln builds only inside the project; remove "
                            f"it (or recreate the project with `kiln project create … --force`)")

    def size_report(self) -> SizeReport:
        if not self.elf.exists():
            raise BuildError(f"{self.elf} does not exist: build the project first")
        return size_report(self.elf, self.board)

    # -- inputs ------------------------------------------------------------

    def set_inputs(self, arrays: Sequence[np.ndarray] | None, origin: str | None = None) -> int:
        """Bake new sample inputs into src/kiln_inputs.c; returns the number of samples.

        The files (inputs.npz, src/kiln_inputs.*, kiln.json) are each replaced
        atomically, all of them with Ctrl-C held off, under the project's lock."""
        with self._locked():
            if self.mode != "standalone":
                raise KilnError("sample inputs are baked only into standalone firmware; a "
                                "host-driven project takes inputs over its serial link")
            specs = self.input_specs
            if arrays is None:
                arrays, origin = random_inputs(specs, DEFAULT_SEED), f"random, seed {DEFAULT_SEED}"
            samples = split_samples(arrays, specs)
            _check_fits(self.manifest, self.board, samples)
            writes = {SAMPLES_FILE: _samples_bytes(samples)}
            for rel, text in render.inputs_files(self.model_name, samples, origin).items():
                data = text.encode()
                if not _holds(self.path / rel, data):      # keep make incremental
                    writes[rel] = data
            self.manifest["project"]["samples"] = len(samples)
            self.manifest["project"]["inputs"] = origin or "given"
            writes[MANIFEST] = _manifest_bytes(self.manifest)
            with signals_deferred():       # all of the files or none of them
                for rel, data in writes.items():
                    self._write(rel, data)
            return len(samples)

    def sample_inputs(self) -> list[list[np.ndarray]]:
        """samples[s][i]: the inputs baked into the firmware (from inputs.npz)."""
        path = check_regular_file(self.path / SAMPLES_FILE, "sample inputs")
        with np.load(path, allow_pickle=False) as z:
            n_inputs = len(self.input_specs)
            stacked = [z[f"input_{i}"] for i in range(n_inputs)]
        return [[x[s] for x in stacked] for s in range(len(stacked[0]))]

    # -- run ---------------------------------------------------------------

    def run(self, x: np.ndarray | Sequence[np.ndarray] | None = None,
            timeout: float | None = None) -> RunResult:
        """Build if needed and run the standalone firmware (QEMU or host process).

        x: one array per model input (or a single array for a one-input model)
        to bake in before running; None keeps the inputs the project has.
        """
        with self._locked():       # the inputs baked, built and run are the same ones
            if self.mode != "standalone":
                raise KilnError("run() runs standalone firmware; connect to a host-driven "
                                "project with its RPC session instead")
            if x is not None:
                arrays = [x] if isinstance(x, np.ndarray) else list(x)
                self.set_inputs(arrays, origin="given")
            self.build()
            return self._run_built(timeout)

    def _run_built(self, timeout: float | None) -> RunResult:
        board = self.board
        if board.runs_on == "qemu":
            where = f"{board.name} (QEMU {board.qemu.machine})"
            proc = run_elf(board, self.elf, **({"timeout": timeout} if timeout else {}))
            out, code = proc.stdout, proc.exit_code
        elif board.is_host:
            where = "host"
            try:
                done = subprocess.run([str(self.elf)], capture_output=True, text=True,
                                      errors="replace",
                                      stdin=subprocess.DEVNULL,
                                      timeout=timeout or HOST_RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise KilnError(f"{self.elf} did not finish within "
                                f"{timeout or HOST_RUN_TIMEOUT_S:g} s") from None
            out, code = done.stdout, done.returncode
        else:
            raise BoardError(f"{board.name} is a real board: flash it (`kiln flash "
                             f"{self.path}`, or {self.path / 'build' / 'firmware.hex'} with "
                             f"your probe's tool) and read its serial port, or use "
                             f"host-driven mode")
        result = to_result(out, self.output_specs, board.tick_unit, code, where)
        if board.runs_on == "qemu":
            result.instructions = ticks_to_instructions(result.ticks[0], result.tick_hz)
            result.cycles = result.instructions
        elif not board.is_host:
            result.cycles = result.ticks[0]
        return result


    # -- host-driven -------------------------------------------------------

    def connect(self, port: str | None = None, chardev: str = "pipe", **options: Any) -> Any:
        """An RPC Session with this host-driven firmware (build it first if needed).

        port: a real board's serial URL (pyserial), the board already flashed;
        otherwise QEMU boards boot the ELF (chardev "pipe" or "socket") and the
        host board runs it as a subprocess. The session checks that the device
        runs this project's build (build id and board). `options` go to Session.
        """
        from .session import ExpectedFirmware, Session
        from .transport import QemuTransport, SerialTransport, SubprocessTransport

        if self.mode != "host-driven":
            raise KilnError("connect() talks to host-driven firmware; this project is "
                            "standalone: use run()")
        board = self.board
        if port is None:
            self.build()
        if port is not None:
            transport = SerialTransport(port)
        elif board.runs_on == "qemu":
            transport = QemuTransport(self.elf, board.qemu.machine, chardev=chardev,
                                      icount_shift=ICOUNT_SHIFT, extra=board.qemu.args)
        elif board.is_host:
            transport = SubprocessTransport([self.elf])
        else:
            raise BoardError(f"{board.name} is a real board: pass its serial port (--port, "
                             f"or port= in Python), with --flash to flash "
                             f"{self.path / 'build' / 'firmware.hex'} first (or `kiln flash`)")

        expected = ExpectedFirmware(build_id=self.manifest["project"]["build_id"],
                                    board=board.name)
        try:
            return Session(transport, inputs=self.input_specs, outputs=self.output_specs,
                           expected=expected, **options)
        except BaseException:
            transport.close()
            raise


def _load_artifact(model: Any, board: Board, tuning_records: Any = None,
                   optimize: str | None = None) -> Any:
    """An Artifact from a model path (compiled here for `board`, with the tuning records
    and optimize goal given) or an Artifact as given."""
    if isinstance(model, (str, os.PathLike)):
        from kiln.compiler import compile as kiln_compile, load
        from kiln.compiler.compile import DEFAULT_OPTIMIZE
        return kiln_compile(load(model), board=board, tuning_records=tuning_records,
                            optimize=optimize or DEFAULT_OPTIMIZE)
    if not hasattr(model, "files") or not hasattr(model, "report"):
        raise InputError("create_project takes a model file path or a compiled Artifact "
                         "(kiln.compiler.compile(...))")
    if tuning_records is not None or optimize is not None:
        raise InputError("tuning records and the optimize goal apply when compiling: pass "
                         "them to kiln.compiler.compile(), or give create_project the model file")
    built_for = model.report.get("board")
    if built_for and built_for != board.name:
        raise BoardError(f"the artifact was compiled for board '{built_for}', not "
                         f"'{board.name}': compile it for {board.name} (or pass the model file)")
    return model


def _samples_bytes(samples: list[list[np.ndarray]]) -> bytes:
    """inputs.npz: input_i holds input i of every sample, stacked (N, *input shape)."""
    stacked = {f"input_{i}": np.stack([s[i] for s in samples])
               for i in range(len(samples[0]))}
    buffer = io.BytesIO()
    np.savez(buffer, **stacked)
    return buffer.getvalue()


def _manifest_bytes(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=2) + "\n").encode()


def _holds(path: Path, data: bytes) -> bool:
    """Whether `path` is a regular file (not a link) holding exactly `data`."""
    if path.is_symlink():
        return False
    try:
        return read_regular_file(path, "project file", len(data)) == data
    except KilnError:
        return False


def _read_manifest(path: Path) -> dict[str, Any]:
    """The kiln.json of the project folder `path`, its shape checked: a file that is
    damaged, or a project's with a field missing or of the wrong type, is one
    KilnError line saying to recreate the project, never a KeyError later."""
    create = "create one with `kiln project create`"
    manifest_path = path / MANIFEST
    if not os.path.lexists(manifest_path):
        raise KilnError(f"{path} is not a kiln project (it has no {MANIFEST}): {create}")

    def damaged(why: str) -> KilnError:
        return KilnError(f"{manifest_path} is damaged ({why}): recreate the project with "
                         f"`kiln project create … --force`")
    try:
        manifest = json.loads(read_regular_file(manifest_path, MANIFEST, MAX_MANIFEST_BYTES))
    except json.JSONDecodeError as e:
        raise damaged(f"line {e.lineno}: {e.msg}") from None
    except (ValueError, RecursionError) as e:      # not UTF-8; nested past the parser
        raise damaged(type(e).__name__ if isinstance(e, RecursionError) else "not UTF-8 text"
                      ) from None
    entry = manifest.get("project") if isinstance(manifest, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("board"), str):
        raise KilnError(f"{path} is not a kiln project: its {MANIFEST} has no 'project' "
                        f"entry naming a board (`kiln compile` output is not a project); "
                        f"{create}")
    problem = report_problem(manifest)
    if entry.get("mode") not in MODES:
        problem = f"its project mode is {entry.get('mode')!r}, not one of {', '.join(MODES)}"
    elif not isinstance(entry.get("build_id"), str):
        problem = "it has no project build_id"
    elif not isinstance(entry.get("files", []), list) or \
            not all(isinstance(f, str) for f in entry.get("files", [])):
        problem = "its project 'files' is not a list of paths"
    elif not isinstance(entry.get("samples", 0), int) or isinstance(entry.get("samples"), bool):
        problem = "its project 'samples' is not a count"
    elif not isinstance(manifest.get("size", {}), dict):
        problem = "its 'size' is not an object"
    if problem:
        raise damaged(problem)
    return manifest


def _project_board(path: Path, manifest: dict[str, Any]) -> Board:
    """The board of the project in `path`: its own copy (board.toml, written when the
    board is not one of kiln's: a file of the user's, or a Board built in Python), else
    kiln's board of that name. The copy is checked like any board file and must be the
    board kiln.json names."""
    entry = manifest["project"]
    if entry.get("board_file") is None:
        return get_board(entry["board"])
    if entry["board_file"] != BOARD_FILE:
        raise KilnError(f"{path / MANIFEST} is damaged (its board_file is not {BOARD_FILE}): "
                        f"recreate the project with `kiln project create … --force`")
    board = load_board_file(path / BOARD_FILE, named_after_file=False)
    if board.name != entry["board"]:
        raise BoardError(f"{path / BOARD_FILE} is board '{board.name}', but {MANIFEST} says "
                         f"the project is for '{entry['board']}': recreate the project")
    return board


def _lock_inode(lock: Path) -> int:
    """The inode of the lock file `lock`, created if missing. A link at its place is
    removed first: kiln never creates or locks a file a link points to."""
    if lock.is_symlink():
        lock.unlink()
    fd = os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        return os.fstat(fd).st_ino
    finally:
        os.close(fd)


@contextlib.contextmanager
def project_lock(root: Path) -> Iterator[None]:
    """Hold the lock of the project folder `root` (its .kiln-lock, a file kiln never
    lists, copies or keeps): builds, new inputs and `create --force` of one project
    take turns instead of colliding in build/ or in kiln.json.

    `create --force` replaces the whole folder, lock file included, so a process that
    waited on the old folder's lock then finds another lock file at the path: it
    takes that one instead (the check is on the inode, after the lock is held)."""
    lock = root / LOCK_FILE
    while True:
        if not root.is_dir():
            raise KilnError(f"{root} does not exist any more (removed by another process?)")
        inode = _lock_inode(lock)
        with file_lock(lock, f"the project {root}"):
            try:
                current = os.lstat(lock).st_ino
            except FileNotFoundError:
                current = None
            if current == inode:
                yield
                return
        # The folder was replaced while this process waited: lock the new one.


def _build_id(files: dict[str, str], board: Board, mode: str) -> str:
    """A digest of what makes this firmware what it is: model C, board, mode, kiln."""
    h = hashlib.sha256(f"{board.name}\0{mode}\0{kiln_version()}".encode())
    if not is_kiln_board(board):          # a board of one's own: its facts too
        h.update(board_digest(board).encode())
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return h.hexdigest()[:16]


def _check_fits(report: dict, board: Board, samples: list[list[np.ndarray]] | None) -> None:
    """check_fits with the weights, the arena and model state (both RAM) and the sample
    inputs' flash bytes."""
    inputs_bytes = sum(x.nbytes for sample in samples or [] for x in sample)
    check_fits(model_name(report), board, int(report.get("weights_bytes", 0)),
               int(report.get("arena_bytes", 0)) + int(report.get("state_bytes", 0)),
               inputs_bytes, len(samples or []))


def _previous_project(out_dir: Path) -> dict | None:
    """The "project" entry of the kiln.json in out_dir if it is a project's, {} if that
    kiln.json is damaged (not JSON: Project.open says to recreate the project), else None."""
    try:
        manifest = json.loads(read_regular_file(out_dir / MANIFEST, MANIFEST,
                                                MAX_MANIFEST_BYTES))
    except KilnError:
        return None
    except (ValueError, RecursionError):
        return {}
    entry = manifest.get("project") if isinstance(manifest, dict) else None
    return entry if isinstance(entry, dict) else None


def _plan_replacement(root: Path, previous: dict, files: set[str],
                      protect: Sequence[Path]) -> tuple[Replacement, list[str]]:
    """What create_project(force=True) does to the earlier project in `root`, whose
    kiln.json's "project" entry is `previous`, for a new project writing `files`:
    the Replacement to report and the entries to carry over into the new folder.

    Carried over: everything that is not a kiln file of the new project, not build/,
    not a stale kiln file (one the earlier kiln.json lists and this project does not
    write; never a file this command read, in `protect`) and not kiln's scratch. Paths
    come from walking `root` without following links, so a hand-edited list (`..`,
    absolute paths, links) can only ever name files inside the folder.
    """
    listed = previous.get("files")
    listed = {f for f in listed if isinstance(f, str)} if isinstance(listed, list) else None
    def folders(paths: set[str]) -> set[str]:
        return {str(parent) for rel in paths for parent in Path(rel).parents} - {"."}
    kiln_dirs = folders(files)
    look_inside = kiln_dirs | folders(listed or set())   # the others are kept whole
    replaced, removed, kept = [], [], []
    for dirpath, dirnames, filenames in os.walk(root):      # never follows links
        here = Path(dirpath).relative_to(root)
        top = here == Path(".")
        for d in sorted(dirnames):
            rel = str(here / d)
            link = (root / rel).is_symlink()
            if top and is_scratch(d):
                pass                                          # a killed run's leftovers
            elif top and d == "build":
                removed.append("build/")
            elif rel in files and link:
                replaced.append(rel)
            elif rel in files:
                raise InputError(f"{root / rel} is a folder where the project writes its file "
                                 f"{rel}: move it and run again")
            elif rel not in look_inside or (link and rel not in kiln_dirs):
                kept.append(rel + "/")          # the whole folder, or the user's link as is
            elif link:
                removed.append(rel)      # a link where kiln has a folder: dropped, not followed
            else:
                continue                                      # look inside
            dirnames.remove(d)
        for f in sorted(filenames):
            rel = str(here / f)
            if top and is_scratch(f):
                pass
            elif top and f == "build":
                removed.append("build")
            elif rel in files:
                replaced.append(rel)
            elif rel in kiln_dirs and not (root / rel).is_symlink():
                raise InputError(f"{root / rel} is in the way of the project's folder {rel}/: "
                                 f"move it and run again")
            elif rel in kiln_dirs or (rel in (listed or ()) and
                                      not any(same_file(root / rel, p) for p in protect)):
                removed.append(rel)                           # stale, or a dangling link
            else:
                kept.append(rel)
    replacement = Replacement(replaced=sorted(replaced), removed=removed, kept=kept,
                              listed=listed is not None)
    return replacement, [rel.rstrip("/") for rel in kept]


def _crt_files(board: Board, rpc: bool) -> dict[str, Path]:
    """The C runtime sources a project gets: {project-relative path: source file}."""
    src = crt_dir()
    files = {"crt/platform.h": src / "platform.h"}
    for f in sorted((src / "kernels").iterdir()):
        if f.suffix in (".c", ".h"):
            files[f"crt/kernels/{f.name}"] = f
    if board.is_host:
        platform_files = ["posix.c"]
    else:
        exit_file = "exit_semihosting.c" if board.runs_on == "qemu" else "exit_halt.c"
        platform_files = ["platform_internal.h", "platform_init.c", "startup_cortexm.c",
                          "syscalls.c", board.uart_driver, board.timer_driver, exit_file]
    for name in platform_files:
        files[f"crt/platform/{name}"] = src / "platform" / name
    if rpc:
        for f in sorted((src / "rpc").iterdir()):
            if f.suffix in (".c", ".h"):
                files[f"crt/rpc/{f.name}"] = f
    return files


def create_project(model: Any, board: str | Board, out_dir: str | Path,
                   mode: str = "standalone", inputs: Sequence[np.ndarray] | None = None,
                   force: bool = False, inputs_origin: str | None = None,
                   tuning_records: Any = None, optimize: str | None = None,
                   protect: Sequence[str | Path] = ()) -> Project:
    """Render a self-contained firmware project for `board` into `out_dir`.

    model: a compiled Artifact, or a .tflite path (compiled here for the board).
    inputs: standalone mode's sample inputs, one array per model input (N samples
    stacked on axis 0 allowed); default one fixed-seed random sample.
    Refuses a non-empty out_dir unless force, and then one that holds no kiln
    project; force writes over kiln's own files (listed in kiln.json's "project"
    entry), removes build/ and the earlier project's stale files, and leaves every
    other file alone (the returned Project's `replacement` says what it did).
    Refuses a model that cannot fit the board, sample inputs counted (BoardError).

    The project is written in a staging folder beside out_dir and swapped into place
    (kiln.compiler.outdir), under the earlier project's lock: an interrupted create
    leaves the earlier project or nothing, never half of one, and nothing is written
    through a symbolic link. With force, the user's files are carried over as hard
    links. `protect`: files the caller read (--input arrays), kept even when the earlier
    kiln.json lists them; the model and tuning records files are protected too.
    """
    board = get_board(board)
    if mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, not '{mode}'")
    rpc = mode == "host-driven"
    if rpc and not (crt_dir() / "rpc" / "kiln_rpc.h").exists():
        raise KilnError("host-driven mode needs kiln's RPC server (crt/rpc/kiln_rpc.h), "
                        "which this kiln does not include yet")
    if rpc and inputs is not None:
        raise InputError("sample inputs are for standalone mode; a host-driven firmware "
                         "takes its inputs over the serial link")
    where = output_dir(out_dir)          # absolute; refuses a link or a file
    out_dir = Path(out_dir)
    art = _load_artifact(model, board, tuning_records, optimize)
    report = art.report
    name = model_name(report)
    # Check the inputs before touching the directory: a bad --input leaves nothing behind.
    specs = [TensorSpec.from_report(e) for e in report["inputs"]]
    samples = None
    if not rpc:
        if inputs is None:
            inputs, inputs_origin = random_inputs(specs), f"random, seed {DEFAULT_SEED}"
        samples = split_samples(inputs, specs)
    check_firmware_limits(report, mode, board)     # I/O counts, layers, arena: before any build
    try:
        _check_fits(report, board, samples)
        too_large = None
    except FitError as e:        # by at least N bytes: a link below says exactly how many
        too_large = e

    build_id = _build_id(art.files, board, mode)
    files: dict[str, str | bytes | Path] = dict(_crt_files(board, rpc))   # or a file to copy
    files.update({f"model/{fname}": text for fname, text in art.files.items()
                  if fname != MANIFEST})
    files.update(render.project_files(board, report, mode, kiln_version(), ICOUNT_SHIFT,
                                      build_id, sum(x.nbytes for s in samples or [] for x in s)))
    if samples is not None:
        files.update(render.inputs_files(name, samples, inputs_origin or "given"))
    own_board = not is_kiln_board(board)
    if own_board:          # what Project.open needs later, wherever the board file went
        files[BOARD_FILE] = board_toml(board, f"The board of this project, {board.name}, as kiln "
                                              f"read it (the project's own copy).")
    kiln_files = sorted([*files, *([SAMPLES_FILE] if samples is not None else [])])

    manifest = dict(report)
    manifest["project"] = {
        "board": board.name,
        "mode": mode,
        "kiln_version": kiln_version(),
        "build_id": build_id,
        "samples": 0 if rpc else len(samples),
        "inputs": None if rpc else (inputs_origin or "given"),
        "tick_unit": board.tick_unit,
        **({"qemu": {"machine": board.qemu.machine, "icount_shift": ICOUNT_SHIFT}}
           if board.qemu else {}),
        **({"board_file": BOARD_FILE} if own_board else {}),
        # What --force may write over or remove when the project is created again.
        "files": kiln_files,
    }
    files[MANIFEST] = _manifest_bytes(manifest).decode()
    if samples is not None:
        files[SAMPLES_FILE] = _samples_bytes(samples)

    def write(folder: Path) -> None:
        for rel, content in files.items():
            _write_file(folder / rel, content)

    # The verdict the build will reach (sizes.check_link_fits: a link when the estimate
    # may not fit): refuse now, with the linker's figure, a project that cannot link.
    fit = check_link_fits(name, report, board, mode,
                          sum(x.nbytes for s in samples or [] for x in s), len(samples or []),
                          write, too_large)
    replacement = None
    if not entries(where):
        write_dir(where, write)
    elif not force:
        raise InputError(f"{out_dir} is not empty: choose another directory or pass "
                         f"--force (force=True in Python) to replace the project in it")
    else:
        protected = [Path(p) for p in (model, tuning_records, *protect)
                     if isinstance(p, (str, os.PathLike))]
        def previous_project() -> dict:
            previous = _previous_project(where)
            if previous is None:
                raise InputError(f"{out_dir} is not empty and holds no kiln project; kiln "
                                 f"will not write into it, even with --force")
            return previous
        previous_project()           # before the lock: no lock file in a folder not kiln's
        with project_lock(where):
            previous = previous_project()       # again: another process may have been first
            replacement, keep = _plan_replacement(where, previous,
                                                  {*kiln_files, MANIFEST}, protected)
            write_dir(where, write, keep)
    project = Project(out_dir, board, manifest, replacement)
    project.fit = fit
    return project


def _write_file(path: Path, content: str | bytes | Path) -> None:
    """One file of a new project, in its (fresh, private) staging folder: text, bytes,
    or a file of kiln's to copy."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, Path):
        shutil.copyfile(content, path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
