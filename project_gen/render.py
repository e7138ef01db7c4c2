"""Render the project skeleton from templates/ (jinja2): build files, board glue, main.c.

Pure text in, text out: {relative path: file content}. project.py decides
where the files go and what else (crt sources, model C) is copied beside them.

Every string a template receives (the model's name, which is its file name; the board
file's name, description, flags, QEMU options) is untrusted: the environment renders it
only through one of the filters below, each an escaper of kiln.compiler.escape for the
language of the file (`{{ board.description | c_comment }}`). That is enforced, not just
a convention: `_render` wraps every string of the context (inside lists, dicts and the
Board dataclass too) as `_Raw`, and the environment's finalize refuses a `_Raw` that
reaches the output unfiltered, so a template that forgets a filter fails on every render
(tests/test_hostile_injection.py renders each one), not on the day a hostile name comes.
Numbers must be non-negative ints: every number in a template is a count, an address or
a size. Kiln's own C fragments (the sample bytes, the UART driver's #defines) are marked
`_Code` and pass as they are.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import jinja2
import numpy as np

from kiln.compiler import escape, export
from kiln.compiler.errors import BoardError
from kiln.compiler.paths import templates_dir

from . import regions
from .boards import UART_DRIVERS, Board
from .inputs import c_bytes
from .qemu import qemu_args


class _Raw(str):
    """A string from outside kiln (model, file name, board file) no filter escaped yet."""


class _Code(str):
    """A C fragment kiln itself generated (sample bytes, a driver's #defines)."""


class _Guarded:
    """A read-only view of a dataclass (Board, Uart, ...) whose attributes are guarded."""

    __slots__ = ("_obj",)

    def __init__(self, obj: object):
        self._obj = obj

    def __getattr__(self, name: str) -> object:
        return _guard(getattr(self._obj, name))


def _guard(value: object) -> object:
    """`value` with every string in it marked _Raw (kiln's _Code strings excepted)."""
    if isinstance(value, (_Raw, _Code)):
        return value
    if isinstance(value, str):
        return _Raw(value)
    if isinstance(value, (list, tuple)):
        return [_guard(v) for v in value]
    if isinstance(value, dict):
        return {_guard(k): _guard(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _Guarded(value)
    return value


def _finalize(value: object) -> object:
    """What `{{ ... }}` may print: plain text (template literals, filter results),
    non-negative ints and floats, kiln's _Code; anything else is an error."""
    if isinstance(value, _Raw):
        raise TypeError(f"template prints unescaped outside text {escape.printable(value)!r}: "
                        f"add the escaping filter of the file's language")
    if isinstance(value, bool) or not isinstance(value, (str, int, float, jinja2.Undefined)):
        raise TypeError(f"template prints a {type(value).__name__}, not text or a number")
    if isinstance(value, (int, float)) and value < 0:
        raise BoardError(f"a board file value is negative ({value}) where a count, an "
                         f"address or a size goes")
    return value


def _plain_words(words: object) -> str:
    try:
        return escape.plain_words(words)  # type: ignore[arg-type]
    except ValueError as e:
        raise BoardError(f"a board file value that becomes a build flag: {e}") from None


def _hex(value: object, digits: int = 8) -> str:
    """A 32-bit address, size or register value as C/ld hex: 0x0000ABCD."""
    if type(value) is not int or not 0 <= value < 1 << 32:
        raise BoardError(f"a board file value {escape.printable(value)!r} is not an address "
                         f"or size (an integer in [0, 2**32))")
    return f"0x{value:0{digits}X}"


# filter name → escaper, one per target language (docstrings in kiln.compiler.escape).
_FILTERS = {
    "c_comment": escape.c_comment,
    "c_string": escape.c_string,
    # A string firmware prints (KILN_BOARD_NAME): one line of printable ASCII.
    "c_printable_string": lambda text: escape.c_string(escape.printable(text)),
    "ld_comment": escape.ld_comment,
    "make_comment": escape.make_comment,
    "make_recipe_word": escape.make_recipe_word,
    "cmake_comment": escape.cmake_comment,
    "project_name": escape.project_name,
    "plain_words": _plain_words,
    "hex": _hex,
    # A MEMORY region or section name of the linker script: checked, never escaped.
    "ld_name": regions.ld_name,
    "markdown_text": escape.markdown_text,
    "markdown_code": escape.markdown_code,
}


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined, finalize=_finalize,
    )
    env.filters.update(_FILTERS)
    return env


def _render(template: str, **context: object) -> str:
    return _env().get_template(template).render(**{k: _guard(v) for k, v in context.items()})


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


def _kernels_cmake() -> _Code:
    """CMakeLists.txt's kiln_kernels target: the exported library folder's text
    (kiln.compiler.export.cmake_kernels), so a project folder and exported model folders
    added to one parent build share one copy of the kernels, and the board's CPU flags,
    -Werror and -O2 apply only when the project is built on its own. Kiln's own names only."""
    kernels = export.kernel_files()
    sources = [f"crt/{name}" for name in kernels if name.endswith(".c")]
    return _Code(export.cmake_kernels("kiln_model", "crt/kernels", sources,
                                      export.kernels_id(kernels), "KILN_TOP_LEVEL",
                                      "${KILN_CPU_FLAGS} ${KILN_C_FLAGS}"))


def _region_context(board: Board, report: dict, inputs_bytes: int) -> dict:
    """linker.ld's memory regions: the extra MEMORY entries, the per-region sections of a
    multi-region board's placement (kiln.project_gen.regions) and the inputs' region."""
    placement = report.get("placement") if not board.is_host and board.multi_region else None
    if not placement:
        return dict(extra_memories=[], region_sections=[],
                    inputs_region=board.flash.name if board.flash else "")
    return dict(extra_memories=[r for r in board.memories[2:]],
                region_sections=regions.linker_sections(placement, board),
                inputs_region=regions.inputs_region(placement, board, inputs_bytes))


def project_files(board: Board, report: dict, mode: str, kiln_version: str,
                  icount_shift: int, build_id: str = "", inputs_bytes: int = 0
                  ) -> dict[str, str]:
    """The rendered project files; `inputs_bytes`: the baked sample inputs (standalone),
    which a multi-region board may place outside its flash."""
    name = model_name(report)
    rpc = mode == "host-driven"
    ctx = dict(board=board, model_name=name, mode=mode, rpc=rpc, kiln_version=kiln_version,
               **_region_context(board, report, inputs_bytes),
               run_help=_run_help(board), icount_shift=icount_shift,
               qemu_args=qemu_args(board, icount_shift) if board.qemu else [],
               num_outputs=len(report["outputs"]),
               uart_defines={_Code(k): _Code(v)
                             for k, v in UART_DRIVERS[board.uart.kind][1].items()},
               kernels_cmake=_kernels_cmake())
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


def inputs_files(model_name: str, samples: list[list[np.ndarray]],
                 origin: str | None) -> dict[str, str]:
    ctx = dict(model_name=model_name, origin=origin,
               samples=[[_Code(c_bytes(x)) for x in sample] for sample in samples])
    return {
        "src/kiln_inputs.h": _render("kiln_inputs.h.j2", **ctx),
        "src/kiln_inputs.c": _render("kiln_inputs.c.j2", **ctx),
    }
