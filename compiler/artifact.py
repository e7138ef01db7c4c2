"""The result of compiling a model: C sources, the memory plan and a report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import InputError, KilnError
from .export import KERNELS_DIR, check_prefix, library_files
from .fsutil import read_regular_file
from .inputs import TensorSpec, split_samples
from .ir import DTYPES, Graph
from .memory_plan import Plan
from .outdir import entries, output_dir, write_dir

SOURCE_FILES = ("model.h", "model.c", "weights.h", "weights.c")
MANIFEST = "kiln.json"
# Keys every kiln.json that `compile()` writes holds (kiln.compiler.compile); a firmware
# project's kiln.json holds them too, plus a "project" entry.
COMPILE_KEYS = ("kiln_version", "model", "board", "inputs", "outputs", "arena_bytes", "ops")


MAX_MANIFEST_BYTES = 256 << 20     # a kiln.json lists every tensor: MBs for a large model


def manifest_kind(path: Path) -> str | None:
    """What wrote the kiln.json at `path`: "compile", "project", or None (absent,
    unreadable, or not kiln's)."""
    try:
        doc = json.loads(read_regular_file(path, "kiln.json", MAX_MANIFEST_BYTES))
    except (KilnError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("project"), dict):
        return "project"
    return "compile" if all(k in doc for k in COMPILE_KEYS) else None


Location = tuple[int, int, np.dtype, tuple[int, ...]]   # arena offset, bytes, dtype, shape


def _location(tensors: dict, tid: int) -> Location:
    t = tensors[tid]
    if not isinstance(t.get("offset"), int):
        raise InputError(f"tensor {tid} ({t.get('name')}) has no arena offset in kiln.json")
    dtype = np.dtype(DTYPES[t["dtype"]])
    shape = tuple(int(d) for d in t["shape"])
    return t["offset"], int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, dtype, shape


def tensor_locations(report: dict, role: str) -> list[Location]:
    """Where the model's "inputs" or "outputs" lie in the arena, from a kiln.json report."""
    tensors = {t["id"]: t for t in report["tensors"]}
    return [_location(tensors, e["id"]) for e in report[role]]


def layer_output_locations(report: dict) -> list[list[Location]]:
    """Where each layer's outputs lie in the arena (kiln.json's plan), by layer index: read
    them right after that layer ran, on the host or a device."""
    tensors = {t["id"]: t for t in report["tensors"]}
    return [[_location(tensors, tid) for tid in op["outputs"]] for op in report["ops"]]


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tensor_problem(entry: object) -> str | None:
    """What keeps a kiln.json tensor entry from being read as a TensorSpec, or None."""
    if not isinstance(entry, dict):
        return "is not an object"
    if not isinstance(entry.get("name"), str):
        return "has no 'name'"
    shape = entry.get("shape")
    if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool)
                                            and d >= 0 for d in shape)):
        return "has no 'shape' of whole numbers"
    if entry.get("dtype") not in DTYPES:
        return f"has dtype {entry.get('dtype')!r}, not one of {', '.join(DTYPES)}"
    for key, ok in (("scale", _number), ("zero_point", lambda v: isinstance(v, int)
                                          and not isinstance(v, bool))):
        value = entry.get(key)
        values = value if isinstance(value, list) else [value]
        if not all(v is None or ok(v) for v in values):
            return f"has a '{key}' that is not a number"
    return None


def report_problem(doc: dict) -> str | None:
    """What is wrong with the shape of a kiln.json's model part (its 'inputs' and
    'outputs', read back when a project runs or an RPC session starts), or None."""
    for key in ("inputs", "outputs"):
        tensors = doc.get(key)
        if not isinstance(tensors, list) or (key == "outputs" and not tensors):
            return f"its '{key}' is missing or not a list"
        for i, entry in enumerate(tensors):
            problem = _tensor_problem(entry)
            if problem:
                return f"'{key}' entry {i} {problem}"
    for key in ("ops", "tensors"):
        if key in doc and not (isinstance(doc[key], list)
                               and all(isinstance(e, dict) for e in doc[key])):
            return f"its '{key}' is not a list of objects"
    if not all("id" in t and "shape" in t for t in doc.get("tensors", [])):
        return "a 'tensors' entry has no 'id' or 'shape'"
    for key in ("arena_bytes", "weights_bytes", "state_bytes"):
        value = doc.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"its '{key}' is not a byte count"
    return None


def _in_project(out: Path) -> bool:
    """Whether `out` (from output_dir) is a firmware project's model/ folder."""
    return out.name == "model" and manifest_kind(out.parent / MANIFEST) == "project"


def _private_dlopen(ffi, path: Path):
    """dlopen a copy of the shared library at `path`: the same file opened twice is one
    library (one copy of its static data), so two artifacts of one stateful model would
    share their state. The copy is unlinked once loaded (the mapping stays)."""
    import os
    import shutil
    import tempfile

    fd, copy = tempfile.mkstemp(suffix=".so", prefix="kiln_state_")
    os.close(fd)
    try:
        shutil.copyfile(path, copy)
        return ffi.dlopen(copy)
    finally:
        os.unlink(copy)


@dataclass
class Artifact:
    graph: Graph
    board: str
    files: dict[str, str]          # file name → text (model.h, model.c, weights.*, kiln.json)
    plan: Plan
    report: dict
    layers: list | None = field(default=None, repr=False)   # codegen's EmittedLayers
    consts: dict | None = field(default=None, repr=False)   # codegen's ConstArrays
    # The Board compiled for (a board file of the user's need not be one kiln can find
    # by `board`, its name).
    board_spec: object = field(default=None, repr=False, compare=False)
    _lib: object = field(default=None, repr=False)
    saved_files: list[str] = field(default_factory=list, repr=False, compare=False)  # by save()

    def __repr__(self) -> str:
        """One line (the C sources and the report stay in `files` and `report`)."""
        r = self.report
        return (f"Artifact(model={self.graph.name!r}, board={self.board!r}, "
                f"layers={len(r.get('ops', []))}, weights_bytes={r.get('weights_bytes')}, "
                f"arena_bytes={r.get('arena_bytes')}, files={sorted(self.files)})")

    # --- saving --------------------------------------------------------------------
    def sources(self, prefix: str | None = None) -> dict[str, str]:
        """The model's C: model.h, model.c, weights.h, weights.c as in `files`; with a
        `prefix` P (kiln.compiler.export.check_prefix), P.h and P.c exporting only P_*
        names (weights file-static), so several models link into one program."""
        if check_prefix(prefix) is None:
            return {k: v for k, v in self.files.items() if k in SOURCE_FILES}
        if self.layers is None or self.consts is None:
            raise KilnError("this artifact keeps no lowered layers (it was not made by "
                            "kiln.compiler.compile): compile the model again to export it")
        from .codegen import emit_sources
        from .compile import KILN_VERSION
        return emit_sources(self.graph, self.layers, self.consts, self.plan, KILN_VERSION,
                            prefix=prefix)

    def library(self, prefix: str | None = None) -> dict[str, str | bytes]:
        """Every file of the library folder `save` writes, by relative path: the model's
        C (sources(prefix)), kiln.json, kernels/, CMakeLists.txt and the Make fragment
        (kiln.compiler.export)."""
        from .compile import KILN_VERSION
        sources = self.sources(prefix)
        cpu_flags = None
        if self.board != "host":
            from kiln.project_gen.boards import get_board   # a later stage: imported when used
            cpu_flags = get_board(self.board_spec or self.board).cpu_flags
        files: dict[str, str | bytes] = dict(sources)
        files[MANIFEST] = self.files[MANIFEST]
        files.update(library_files(sources, prefix, self.graph.name, KILN_VERSION, cpu_flags))
        return files

    def output_files(self, out_dir: str | Path, prefix: str | None = None
                     ) -> dict[str, str | bytes]:
        """What save(out_dir, prefix=prefix) writes, by relative path: the library folder
        (library(prefix)), or, into a firmware project's model/ folder, which builds
        its own crt/kernels and includes model.h, only the model's files (`files`)."""
        if _in_project(output_dir(out_dir)):
            if prefix is not None:
                raise KilnError(f"{out_dir} is a firmware project's model folder, whose "
                                f"project includes model.h: compile it without --prefix")
            return dict(self.files)
        return self.library(prefix)

    def save(self, out_dir: str | Path, force: bool = False, prefix: str | None = None) -> Path:
        """Write the library folder (library(prefix): the sources, kiln.json, the kernels
        and build files) to `out_dir`, as a whole (kiln.compiler.outdir): an interrupted
        save leaves the folder as it was, and a link in it is replaced, never written
        through.

        Refuses a non-empty directory that is not an earlier `kiln compile` output
        unless `force`, and a firmware project's directory even with `force` (its
        kiln.json is the project's manifest). Files other than the ones written stay.
        """
        out = output_dir(out_dir)
        in_project = _in_project(out)
        files = self.output_files(out_dir, prefix)
        names = entries(out)
        if names:
            kind = manifest_kind(out / MANIFEST)
            theirs = sorted(set(names) & {"CMakeLists.txt", KERNELS_DIR, *files}
                            - {*SOURCE_FILES, MANIFEST})
            if kind != "compile" and kind != "project" and theirs and not in_project:
                raise KilnError(f"{out_dir} holds {', '.join(theirs)}, not written by kiln "
                                f"(no kiln.json of an earlier compile); kiln's library folder "
                                f"would replace it, so even --force does not: compile into a "
                                f"folder of its own, e.g. {Path(out_dir) / 'kiln_model'}")
            if kind == "project":
                raise KilnError(f"{out_dir} is a kiln firmware project; compiling into it would "
                                f"break it, even with --force: to replace its model C, "
                                f"compile into {Path(out_dir) / 'model'} with --force, or choose "
                                f"another directory")
            if kind != "compile" and not force:
                raise KilnError(f"{out_dir} is not empty and holds no earlier kiln output; "
                                "choose another directory or pass --force (force=True in Python)")
        top = {name.split("/")[0] for name in files}

        def write(folder: Path) -> None:
            for name, data in files.items():
                path = folder / name
                path.parent.mkdir(exist_ok=True)
                if isinstance(data, bytes):
                    path.write_bytes(data)
                else:
                    path.write_text(data)

        write_dir(out, write, keep=[n for n in names if n not in top])
        self.saved_files = sorted(files)      # what the last save wrote, for its caller's report
        return Path(out_dir)

    # --- host execution --------------------------------------------------------------
    def _check_inputs(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """One sample, by the rules of every run path (kiln.compiler.inputs): the input's
        shape or without its batch axis; float data quantized; wider ints that fit."""
        specs = [TensorSpec.from_report(e) for e in self.report["inputs"]]
        if len(inputs) != len(specs):
            raise InputError(f"{self.graph.name} takes {len(specs)} input(s), got {len(inputs)}")
        samples = split_samples(list(inputs), specs)
        if len(samples) != 1:
            raise InputError(f"run() takes one sample, got {len(samples)} stacked: run them "
                             f"one by one (or `kiln run --input`, which does)")
        return samples[0]

    @property
    def state_bytes(self) -> int:
        """Bytes of model state (variable tensors) kept from one run to the next."""
        return int(self.report.get("state_bytes", 0))

    def reset(self) -> None:
        """Set the model state to its initial value (kiln_reset): the next run() starts
        from there, as tflite-micro's interpreter does after reset(). A no-op for a model
        without state."""
        lib, _ = self._load()
        lib.kiln_reset()

    def run(self, *inputs: np.ndarray) -> list[np.ndarray]:
        """Run one sample on the host: build the C once (cached under ~/.cache/kiln/host),
        call kiln_run. Works for an artifact of any board (the C is the same; the kernels
        take their plain-C forms). Returns one array per model output, in its kiln.json
        dtype and shape; raises InputError for inputs that do not fit the model and
        KilnError if a kernel rejects its arguments. A stateful model (state_bytes > 0)
        carries its state from one run() to the next, as kiln_run does on a device; this
        artifact's state is its own (reset() starts it over)."""
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = tuple(inputs[0])
        xs = self._check_inputs(inputs)
        lib, ffi = self._load()
        arena = ffi.new("uint8_t[]", self.report["arena_bytes"] + 16)
        base = int(ffi.cast("uintptr_t", arena))
        aligned = ffi.cast("uint8_t *", arena) + ((-base) % 16)
        in_ptrs = ffi.new("void *[]", [ffi.from_buffer(x) for x in xs] or [ffi.NULL])
        outs = [np.zeros(o["shape"], dtype=DTYPES[o["dtype"]]) for o in self.report["outputs"]]
        out_ptrs = ffi.new("void *[]", [ffi.from_buffer(o) for o in outs])
        status = lib.kiln_run(in_ptrs, out_ptrs, aligned)
        if status != 0:
            raise KilnError(f"kiln_run returned status {status} (a kernel rejected its arguments)")
        return outs

    def run_layers(self, *inputs: np.ndarray) -> list[list[np.ndarray]]:
        """Run one sample layer by layer (kiln_run_layer) on the host and return every
        layer's outputs, read from the arena right after that layer ran, before a later
        one can write over them (in-place plans): the host reference of `kiln validate
        --per-layer`. Same input rules and errors as run(); a stateful model's state
        carries on from the previous run, as in run()."""
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = tuple(inputs[0])
        xs = self._check_inputs(inputs)
        lib, ffi = self._load()
        size = self.report["arena_bytes"]
        buf = np.zeros(size + 16, dtype=np.uint8)
        skip = -buf.ctypes.data % 16                    # the kernels assume 16-byte alignment
        arena = buf[skip: skip + size]
        for (offset, nbytes, _, _), x in zip(tensor_locations(self.report, "inputs"), xs):
            arena[offset: offset + nbytes] = np.ascontiguousarray(x).view(np.uint8).reshape(-1)
        pointer = ffi.cast("uint8_t *", ffi.from_buffer(arena))
        outputs = []
        for k, locations in enumerate(layer_output_locations(self.report)):
            status = lib.kiln_run_layer(k, pointer)
            if status != 0:
                raise KilnError(f"kiln_run_layer({k}) returned status {status}")
            outputs.append([arena[o: o + n].view(dtype).reshape(shape).copy()
                            for o, n, dtype, shape in locations])
        return outputs

    def _load(self):
        if self._lib is None:
            import cffi

            from .host_build import build_shared_library

            ffi = cffi.FFI()
            ffi.cdef("int kiln_run(const void *const *inputs, void *const *outputs, uint8_t *arena);"
                     "int kiln_run_layer(int32_t layer, uint8_t *arena);"
                     "void kiln_reset(void);")
            path = build_shared_library({k: v for k, v in self.files.items() if k in SOURCE_FILES})
            if self.state_bytes:
                self._lib = (_private_dlopen(ffi, path), ffi)
            else:
                self._lib = (ffi.dlopen(str(path)), ffi)
        return self._lib

    def to_json(self) -> str:
        return json.dumps(self.report, indent=2, sort_keys=False) + "\n"
