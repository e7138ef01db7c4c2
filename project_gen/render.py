"""Render the project skeleton from templates/ (jinja2): build files, board glue, main.c.

Pure text in, text out: {relative path: file content}. project.py decides
where the files go and what else (crt sources, model C) is copied beside them.
"""

from __future__ import annotations

from functools import cache

import jinja2
import numpy as np

from kiln.compiler.paths import templates_dir

from .boards import UART_DRIVERS, Board
from .inputs import c_bytes
from .qemu import qemu_args


@cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


def _render(template: str, **context: object) -> str:
    return _env().get_template(template).render(**context)


def model_name(report: dict) -> str:
    """The model's name from a kiln.json report ("model": {"name": ...} or a string)."""
    model = report.get("model")
    if isinstance(model, dict):
        return str(model.get("name", "model"))
    return str(model or "model")


def _run_help(board: Board) -> str:
    if board.is_host:
        return "run it here"
    if board.qemu:
        return f"run it on QEMU ({board.qemu.machine}); exits through semihosting"
    return "(real board: flash build/firmware.hex yourself)"


def project_files(board: Board, report: dict, mode: str, kiln_version: str,
                  icount_shift: int, build_id: str = "") -> dict[str, str]:
    name = model_name(report)
    rpc = mode == "host-driven"
    ctx = dict(board=board, model_name=name, mode=mode, rpc=rpc, kiln_version=kiln_version,
               run_help=_run_help(board), icount_shift=icount_shift,
               qemu_args=qemu_args(board, icount_shift) if board.qemu else [],
               num_outputs=len(report["outputs"]), uart_defines=UART_DRIVERS[board.uart.kind][1])
    files = {
        "Makefile": _render("Makefile.j2", **ctx),
        "CMakeLists.txt": _render("CMakeLists.txt.j2", **ctx),
        "README.md": _render("README.md.j2", **ctx),
        "src/kiln_board.h": _render("kiln_board.h.j2", **ctx),
        "src/main.c": _render("main_rpc.c.j2" if rpc else "main_standalone.c.j2",
                              **ctx),
    }
    if rpc:
        files["src/kiln_config.h"] = _render("kiln_config.h.j2", build_id=build_id,
                                             tuning_variants=report.get("tuning_variants", 0))
    if not board.is_host:
        files["linker.ld"] = _render("linker.ld.j2", **ctx)
        files["src/kiln_board.c"] = _render("kiln_board.c.j2", **ctx)
    return files


def inputs_files(model_name: str, samples: list[list[np.ndarray]], origin: str | None) -> dict[str, str]:
    ctx = dict(model_name=model_name, origin=origin,
               samples=[[c_bytes(x) for x in sample] for sample in samples])
    return {
        "src/kiln_inputs.h": _render("kiln_inputs.h.j2", **ctx),
        "src/kiln_inputs.c": _render("kiln_inputs.c.j2", **ctx),
    }
