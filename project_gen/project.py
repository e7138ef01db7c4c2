"""Firmware projects: create one from a compiled model and a board, build it, run it.

A project is a plain directory (layout in templates/README.md.j2) whose
kiln.json holds the compiler's report plus a "project" entry (board, mode,
inputs, the files kiln wrote) and, after a build, a "size" entry.
`Project.open(dir)` is all kiln needs to build or run it again later.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from kiln.compiler.errors import BoardError, BuildError, InputError, KilnError
from kiln.compiler.paths import crt_dir

from . import render
from .boards import Board, get_board
from .console import RunResult, to_result
from kiln.compiler.inputs import DEFAULT_SEED, TensorSpec, random_inputs, split_samples
from .qemu import ICOUNT_SHIFT, run_elf, ticks_to_instructions
from .render import model_name
from .sizes import SizeReport, check_fits, linker_overflows, overflow_error, size_report
from .toolchain import MAKE, compiler_for, find_tool

MODES = ("standalone", "host-driven")
MANIFEST = "kiln.json"
SAMPLES_FILE = "inputs.npz"    # the baked sample inputs, for comparing against a reference
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
        manifest_path = path / MANIFEST
        if not manifest_path.exists():
            raise KilnError(f"{path} is not a kiln project (it has no {MANIFEST}): {create}")
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError) as e:
            why = f"line {e.lineno}: {e.msg}" if isinstance(e, json.JSONDecodeError) else \
                (getattr(e, "strerror", None) or str(e))
            raise KilnError(f"{manifest_path} is damaged ({why}): recreate the project with "
                            f"`kiln project create … --force`") from None
        entry = manifest.get("project") if isinstance(manifest, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("board"), str):
            raise KilnError(f"{path} is not a kiln project: its {MANIFEST} has no 'project' "
                            f"entry naming a board (`kiln compile` output is not a project); "
                            f"{create}")
        return cls(path, get_board(entry["board"]), manifest)

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
        (self.path / MANIFEST).write_text(json.dumps(self.manifest, indent=2) + "\n")

    # -- build -------------------------------------------------------------

    def build(self, jobs: int | None = None) -> SizeReport:
        """`make` the firmware (incremental), then record and return its size report.

        Raises BoardError naming the region and the overflow when the model
        does not fit, BuildError with the first compiler error otherwise.
        """
        find_tool(compiler_for(self.board))
        argv = [find_tool(MAKE), "-C", str(self.path), f"-j{jobs or os.cpu_count() or 1}"]
        proc = subprocess.run(argv, capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        (self.path / "build").mkdir(exist_ok=True)
        (self.path / "build" / "build.log").write_text(log)
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

    def size_report(self) -> SizeReport:
        if not self.elf.exists():
            raise BuildError(f"{self.elf} does not exist: build the project first")
        return size_report(self.elf, self.board)

    # -- inputs ------------------------------------------------------------

    def set_inputs(self, arrays: Sequence[np.ndarray] | None, origin: str | None = None) -> int:
        """Bake new sample inputs into src/kiln_inputs.c; returns the number of samples."""
        if self.mode != "standalone":
            raise KilnError("sample inputs are baked only into standalone firmware; a "
                            "host-driven project takes inputs over its serial link")
        specs = self.input_specs
        if arrays is None:
            arrays, origin = random_inputs(specs, DEFAULT_SEED), f"random, seed {DEFAULT_SEED}"
        samples = split_samples(arrays, specs)
        _check_fits(self.manifest, self.board, samples)
        _save_samples(self.path, samples)
        files = render.inputs_files(self.model_name, samples, origin)
        for rel, text in files.items():
            target = self.path / rel
            if not target.exists() or target.read_text() != text:   # keep make incremental
                target.write_text(text)
        self.manifest["project"]["samples"] = len(samples)
        self.manifest["project"]["inputs"] = origin or "given"
        self._save_manifest()
        return len(samples)

    def sample_inputs(self) -> list[list[np.ndarray]]:
        """samples[s][i]: the inputs baked into the firmware (from inputs.npz)."""
        with np.load(self.path / SAMPLES_FILE) as z:
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
        if self.mode != "standalone":
            raise KilnError("run() runs standalone firmware; connect to a host-driven "
                            "project with its RPC session instead")
        if x is not None:
            arrays = [x] if isinstance(x, np.ndarray) else list(x)
            self.set_inputs(arrays, origin="given")
        self.build()
        board = self.board
        if board.runs_on == "qemu":
            where = f"{board.name} (QEMU {board.qemu.machine})"
            proc = run_elf(board, self.elf, **({"timeout": timeout} if timeout else {}))
            out, code = proc.stdout, proc.exit_code
        elif board.is_host:
            where = "host"
            try:
                done = subprocess.run([str(self.elf)], capture_output=True, text=True,
                                      stdin=subprocess.DEVNULL,
                                      timeout=timeout or HOST_RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise KilnError(f"{self.elf} did not finish within "
                                f"{timeout or HOST_RUN_TIMEOUT_S:g} s") from None
            out, code = done.stdout, done.returncode
        else:
            raise BoardError(f"{board.name} is a real board and kiln does not flash boards: "
                             f"flash {self.path / 'build' / 'firmware.hex'} with your probe's "
                             f"tool and read its serial port, or use host-driven mode")
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
            raise BoardError(f"{board.name} is a real board: flash "
                             f"{self.path / 'build' / 'firmware.hex'} and pass its serial "
                             f"port (--port, or port= in Python)")

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
        return kiln_compile(load(model), board=board.name, tuning_records=tuning_records,
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


def _save_samples(out_dir: Path, samples: list[list[np.ndarray]]) -> None:
    stacked = {f"input_{i}": np.stack([s[i] for s in samples])      # (N, *input shape)
               for i in range(len(samples[0]))}
    np.savez(out_dir / SAMPLES_FILE, **stacked)


def _build_id(files: dict[str, str], board: Board, mode: str) -> str:
    """A digest of what makes this firmware what it is: model C, board, mode, kiln."""
    h = hashlib.sha256(f"{board.name}\0{mode}\0{kiln_version()}".encode())
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return h.hexdigest()[:16]


def _check_fits(report: dict, board: Board, samples: list[list[np.ndarray]] | None) -> None:
    """check_fits with the weights, the arena and the sample inputs' flash bytes."""
    inputs_bytes = sum(x.nbytes for sample in samples or [] for x in sample)
    check_fits(model_name(report), board, int(report.get("weights_bytes", 0)),
               int(report.get("arena_bytes", 0)), inputs_bytes, len(samples or []))


def _previous_project(out_dir: Path) -> dict | None:
    """The "project" entry of the kiln.json in out_dir if it is a project's, {} if that
    kiln.json is damaged (not JSON: Project.open says to recreate the project), else None."""
    try:
        manifest = json.loads((out_dir / MANIFEST).read_text())
    except OSError:
        return None
    except ValueError:
        return {}
    entry = manifest.get("project") if isinstance(manifest, dict) else None
    return entry if isinstance(entry, dict) else None


def _prepare_dir(out_dir: Path, force: bool, files: set[str]) -> Replacement | None:
    """Make out_dir ready for a project whose kiln files are `files` (relative paths).

    An empty or new directory is fine. A non-empty one needs force and must hold a
    kiln project; then build/ goes, and so do the earlier project's files that its
    kiln.json lists and this project does not write. Nothing else is touched: the
    kiln files are written over afterwards, other files stay.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir} exists and is not a directory")
    if not out_dir.exists() or not any(out_dir.iterdir()):
        out_dir.mkdir(parents=True, exist_ok=True)
        return None
    if not force:
        raise InputError(f"{out_dir} is not empty: choose another directory or pass "
                         f"--force (force=True in Python) to replace the project in it")
    previous = _previous_project(out_dir)
    if previous is None:
        raise InputError(f"{out_dir} is not empty and holds no kiln project; kiln will "
                         f"not write into it, even with --force")
    listed = previous.get("files")
    listed = {str(f) for f in listed} if isinstance(listed, list) else None
    removed = []
    build = out_dir / "build"
    if build.is_dir() and not build.is_symlink():
        shutil.rmtree(build)
        removed.append("build/")
    stale = sorted(rel for rel in (listed or set()) - files
                   if _inside(rel) and (out_dir / rel).is_file())
    for rel in stale:
        (out_dir / rel).unlink()
        parent = (out_dir / rel).parent
        while parent != out_dir and not any(parent.iterdir()):   # its emptied folders
            parent.rmdir()
            parent = parent.parent
    removed += stale
    replaced = sorted(rel for rel in files | {MANIFEST} if (out_dir / rel).exists())
    return Replacement(replaced=replaced, removed=removed, listed=listed is not None,
                       kept=_others(out_dir, files | {MANIFEST}))


def _inside(rel: str) -> bool:
    """A relative path with no "..": a hand-edited kiln.json cannot point out of the project."""
    return not Path(rel).is_absolute() and ".." not in Path(rel).parts


def _others(root: Path, kiln_files: set[str]) -> list[str]:
    """The files under root that are not kiln_files: a folder holding none of them as "dir/"."""
    kiln_dirs = {str(parent) for rel in kiln_files for parent in Path(rel).parents}
    others = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath).relative_to(root)
        for d in sorted(dirnames):
            rel = str(here / d)
            if rel not in kiln_dirs:
                others.append(rel + "/")
                dirnames.remove(d)
        others += [str(here / f) for f in sorted(filenames) if str(here / f) not in kiln_files]
    return others


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
                   tuning_records: Any = None, optimize: str | None = None) -> Project:
    """Render a self-contained firmware project for `board` into `out_dir`.

    model: a compiled Artifact, or a .tflite path (compiled here for the board).
    inputs: standalone mode's sample inputs, one array per model input (N samples
    stacked on axis 0 allowed); default one fixed-seed random sample.
    Refuses a non-empty out_dir unless force, and then one that holds no kiln
    project; force writes over kiln's own files (listed in kiln.json's "project"
    entry), removes build/ and the earlier project's stale files, and leaves every
    other file alone (the returned Project's `replacement` says what it did).
    Refuses a model that cannot fit the board, sample inputs counted (BoardError).
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
    _check_fits(report, board, samples)

    build_id = _build_id(art.files, board, mode)
    files: dict[str, str | Path] = dict(_crt_files(board, rpc))   # text, or a file to copy
    files.update({f"model/{fname}": text for fname, text in art.files.items()
                  if fname != MANIFEST})
    files.update(render.project_files(board, report, mode, kiln_version(), ICOUNT_SHIFT,
                                      build_id))
    if samples is not None:
        files.update(render.inputs_files(name, samples, inputs_origin or "given"))
    kiln_files = sorted([*files, *([SAMPLES_FILE] if samples is not None else [])])

    replacement = _prepare_dir(out_dir, force, set(kiln_files))
    for rel, content in files.items():
        target = out_dir / rel
        if target.is_symlink():          # write the project's own file, not through a link
            target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copy2(content, target)
        else:
            target.write_text(content)
    if samples is not None:
        _save_samples(out_dir, samples)

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
        # What --force may write over or remove when the project is created again.
        "files": kiln_files,
    }
    project = Project(out_dir, board, manifest, replacement)
    project._save_manifest()     # last: a project half written has no kiln.json
    return project
