"""The result of compiling a model: C sources, the memory plan and a report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import InputError, KilnError
from .inputs import TensorSpec, split_samples
from .ir import DTYPES, Graph
from .memory_plan import Plan

SOURCE_FILES = ("model.h", "model.c", "weights.h", "weights.c")
MANIFEST = "kiln.json"
# Keys every kiln.json that `compile()` writes holds (kiln.compiler.compile); a firmware
# project's kiln.json holds them too, plus a "project" entry.
COMPILE_KEYS = ("kiln_version", "model", "board", "inputs", "outputs", "arena_bytes", "ops")


def manifest_kind(path: Path) -> str | None:
    """What wrote the kiln.json at `path`: "compile", "project", or None (absent,
    unreadable, or not kiln's)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("project"), dict):
        return "project"
    return "compile" if all(k in doc for k in COMPILE_KEYS) else None


@dataclass
class Artifact:
    graph: Graph
    board: str
    files: dict[str, str]          # file name → text (model.h, model.c, weights.*, kiln.json)
    plan: Plan
    report: dict
    _lib: object = field(default=None, repr=False)

    # --- saving --------------------------------------------------------------------
    def save(self, out_dir: str | Path, force: bool = False) -> Path:
        """Write the sources and kiln.json to `out_dir`.

        Refuses a non-empty directory that is not an earlier `kiln compile` output
        unless `force`, and a firmware project's directory even with `force` (its
        kiln.json is the project's manifest). Files other than the ones written stay.
        """
        out = Path(out_dir)
        if out.exists() and not out.is_dir():
            raise KilnError(f"{out} exists and is not a directory")
        if out.exists() and any(out.iterdir()):
            kind = manifest_kind(out / MANIFEST)
            if kind == "project":
                raise KilnError(f"{out} is a kiln firmware project; compiling into it would "
                                f"break it, even with --force: to replace its model C, "
                                f"compile into {out / 'model'} with --force, or choose "
                                f"another directory")
            if kind != "compile" and not force:
                raise KilnError(f"{out} is not empty and holds no earlier kiln output; "
                                "choose another directory or pass --force (force=True in Python)")
        out.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (out / name).write_text(text)
        return out

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

    def run(self, *inputs: np.ndarray) -> list[np.ndarray]:
        """Run one sample on the host: build the C once (cached under ~/.cache/kiln/host),
        call kiln_run. Works for an artifact of any board (the C is the same; the kernels
        take their plain-C forms). Returns one array per model output, in its kiln.json
        dtype and shape; raises InputError for inputs that do not fit the model and
        KilnError if a kernel rejects its arguments."""
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

    def _load(self):
        if self._lib is None:
            import cffi

            from .host_build import build_shared_library

            ffi = cffi.FFI()
            ffi.cdef("int kiln_run(const void *const *inputs, void *const *outputs, uint8_t *arena);"
                     "int kiln_run_layer(int32_t layer, uint8_t *arena);")
            path = build_shared_library({k: v for k, v in self.files.items() if k in SOURCE_FILES})
            self._lib = (ffi.dlopen(str(path)), ffi)
        return self._lib

    def to_json(self) -> str:
        return json.dumps(self.report, indent=2, sort_keys=False) + "\n"
