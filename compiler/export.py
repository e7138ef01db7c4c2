"""The folder `kiln compile -o DIR [--prefix P]` writes: a library that builds with
nothing else from kiln (docs/own_firmware.md).

    DIR/P.h, DIR/P.c          the model (without --prefix: model.h, model.c, weights.h,
                              weights.c, exactly as before)
    DIR/kernels/              kiln's kernels (crt/kernels), all of them: a static library
                              links only the ones the model calls
    DIR/CMakeLists.txt        static library target P (kiln_model without a prefix) and,
                              once however many models a build adds, kiln_kernels
    DIR/P.mk                  Make fragment: P_SRCS, P_INCLUDES, P_CFLAGS, P_LDLIBS and,
                              once, KILN_KERNELS_SRCS
    DIR/kiln.json             the compile report

The prefix is checked here (check_prefix) before any name is made from it; the model's
name reaches these files only through kiln.compiler.escape's comment functions, and the
board's CPU flags only through plain_words (a board file's fields are schema-checked).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from .errors import InputError
from .escape import cmake_comment, make_comment, plain_words
from .paths import crt_dir

KERNELS_DIR = "kernels"
KERNELS_TARGET = "kiln_kernels"
MAX_PREFIX = 32
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def check_prefix(prefix: str | None) -> str | None:
    """`prefix` if it can begin every exported name of a model (P_run, P_ARENA_BYTES) and
    name its files and build target; InputError otherwise (one line)."""
    if prefix is None:
        return None
    if not (isinstance(prefix, str) and _PREFIX.fullmatch(prefix) and len(prefix) <= MAX_PREFIX):
        raise InputError(f"--prefix {prefix!r} is not a C identifier of 1..{MAX_PREFIX} "
                         f"characters (a letter, then letters, digits or _), e.g. --prefix kws")
    if prefix.endswith("_") or "__" in prefix:
        raise InputError(f"--prefix {prefix!r}: no '__' and no trailing '_' (names would hold "
                         f"'__', reserved in C++), e.g. --prefix kws")
    stem = next((k for k in kernel_files() if Path(k).stem.lower() == prefix.lower()), None)
    if stem is not None:
        raise InputError(f"--prefix {prefix!r} is the name of a kiln kernel file ({stem}): "
                         f"P.h and P.c would clash with it; choose another, e.g. --prefix kws")
    if prefix.lower().startswith("kiln"):
        raise InputError(f"--prefix {prefix!r}: kiln_ and KILN_ names are kiln's runtime's; "
                         f"choose another, e.g. --prefix kws (or none for kiln_run)")
    return prefix


def kernel_files() -> dict[str, bytes]:
    """kernels/<name> → bytes, for every source and header of crt/kernels."""
    folder = crt_dir() / "kernels"
    return {f"{KERNELS_DIR}/{p.name}": p.read_bytes()
            for p in sorted(folder.iterdir()) if p.suffix in (".c", ".h") and p.is_file()}


def kernels_id(kernels: dict[str, bytes]) -> str:
    """A digest of the kernel files: models whose folders share kiln_kernels must have
    been compiled with the same kernels (their parameter structs are the interface)."""
    h = hashlib.sha256()
    for name, data in sorted(kernels.items()):
        h.update(name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()[:16]


def _names(prefix: str | None) -> tuple[str, str, str]:
    """(library target, Make variable stem, fragment file) of a model's folder."""
    if prefix is None:
        return "kiln_model", "KILN_MODEL", "model.mk"
    return prefix, prefix, f"{prefix}.mk"


def cmake_kernels(owner: str, kernels_dir: str, kernels: list[str], kid: str, top: str,
                  top_options: str) -> str:
    """The CMake text that decides how kiln's kernels build, shared by an exported library
    folder (cmake_lists) and a `kiln project create` folder (templates/CMakeLists.txt.j2):
    the target kiln_kernels, defined by the first kiln folder a build adds and reused by
    the next ones (stopping the configure step if their kernels differ: `kid`, kernels_id),
    built with the parent's compiler and flags, and with `top_options` (a CMake list
    expression: the board's CPU flags...) only when the variable `top` is ON, i.e. the
    folder is built on its own. `owner`: the model's target (in the messages); `kernels`:
    the kernel sources relative to the folder, in `kernels_dir`. Only kiln's own names
    reach this text."""
    kernel_list = "\n".join(f"        ${{CMAKE_CURRENT_SOURCE_DIR}}/{k}" for k in kernels)
    return f"""if(NOT TARGET {KERNELS_TARGET})
    add_library({KERNELS_TARGET} STATIC
{kernel_list})
    target_include_directories({KERNELS_TARGET} PUBLIC ${{CMAKE_CURRENT_SOURCE_DIR}}/{kernels_dir})
    target_compile_features({KERNELS_TARGET} PRIVATE c_std_99)
    if(NOT MSVC)
        target_link_libraries({KERNELS_TARGET} PUBLIC m)
    endif()
    if({top})
        target_compile_options({KERNELS_TARGET} PRIVATE {top_options})
    endif()
    set_property(TARGET {KERNELS_TARGET} PROPERTY KILN_KERNELS_ID {kid})
else()
    get_property(_kiln_kernels_id TARGET {KERNELS_TARGET} PROPERTY KILN_KERNELS_ID)
    if(NOT _kiln_kernels_id STREQUAL "{kid}")
        message(FATAL_ERROR "kiln model {owner} was compiled with other kernels than the "
                            "kiln model added first ({KERNELS_TARGET} ${{_kiln_kernels_id}}, "
                            "{owner} {kid}): compile all models with the same kiln")
    endif()
endif()
"""


def cmake_lists(target: str, sources: list[str], kernels: list[str], kid: str, model_name: str,
                version: str, cpu_flags: list[str] | None) -> str:
    top = "KILN_TOP_LEVEL_" + target.upper()
    cross = ""
    if cpu_flags is not None:
        cross = ("    # Built on its own for the board: cross-compile bare-metal, the board's CPU flags.\n"
                 "    set(CMAKE_SYSTEM_NAME Generic)\n"
                 "    set(CMAKE_SYSTEM_PROCESSOR arm)\n"
                 "    set(CMAKE_C_COMPILER arm-none-eabi-gcc)\n"
                 "    set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)\n")
    flags = plain_words(cpu_flags or [])
    return f"""# CMakeLists.txt - C library of the model {cmake_comment(model_name)}, generated by kiln {cmake_comment(version)}.
#
# In your build:  add_subdirectory(<this folder>)
#                 target_link_libraries(<your target> PRIVATE {target})
#   The library builds with your project's compiler and flags (C must be enabled:
#   project(app C CXX)); it adds no warnings, -Werror, -O or CPU flags of its own.
#   Its kernels are the target {KERNELS_TARGET}, defined by the first kiln model folder
#   added: several models share one copy.
# On its own:     cmake -B build && cmake --build build   (with the board's CPU flags)
cmake_minimum_required(VERSION 3.16)

if(CMAKE_SOURCE_DIR STREQUAL CMAKE_CURRENT_SOURCE_DIR)
{cross}    set({top} ON)
    project({target} C)
    if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
        set(CMAKE_BUILD_TYPE Release)    # optimized when built on its own
    endif()
else()
    get_property(_kiln_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
    if(NOT "C" IN_LIST _kiln_languages)
        message(FATAL_ERROR "kiln model {target} is C code: enable C in your project, "
                            "e.g. project(app C CXX)")
    endif()
endif()

set({target.upper()}_CPU_FLAGS {flags})

{cmake_kernels(target, KERNELS_DIR, kernels, kid, top, '${' + target.upper() + '_CPU_FLAGS}')}
add_library({target} STATIC {" ".join(sources)})
target_include_directories({target} PUBLIC ${{CMAKE_CURRENT_SOURCE_DIR}})
target_compile_features({target} PRIVATE c_std_99)
target_link_libraries({target} PUBLIC {KERNELS_TARGET})
if({top})
    target_compile_options({target} PRIVATE ${{{target.upper()}_CPU_FLAGS}})
endif()
"""


def make_fragment(stem: str, fragment: str, sources: list[str], kernels: list[str], kid: str,
                  model_name: str, version: str, cpu_flags: list[str] | None) -> str:
    kernel_sources = " \\\n    ".join(f"$(KILN_KERNELS_DIR)/{Path(k).name}" for k in kernels)
    board = (f"# The board's CPU flags, for your CFLAGS if your build has none yet:\n"
             f"{stem}_CPU_FLAGS := {plain_words(cpu_flags)}\n") if cpu_flags else ""
    return f"""# {fragment} - Make fragment of the model {make_comment(model_name)}, generated by kiln {make_comment(version)}.
#
#   include path/to/this/{fragment}
#   SRCS   += $({stem}_SRCS) $(KILN_KERNELS_SRCS)
#   CFLAGS += $({stem}_CFLAGS)
#   LDLIBS += $({stem}_LDLIBS)
#
# The code is C99 and needs only these include directories; your CC and CFLAGS build it.
# Several models: include every fragment and add each one's $(<P>_SRCS) and $(<P>_CFLAGS),
# but $(KILN_KERNELS_SRCS) once: the first fragment included defines it (?=), so the
# kernels all models share are compiled and linked once.

{stem}_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
{stem}_SRCS := {" ".join(f"$({stem}_DIR)/{s}" for s in sources)}
KILN_KERNELS_DIR ?= $({stem}_DIR)/{KERNELS_DIR}
KILN_KERNELS_SRCS ?= {kernel_sources}
KILN_KERNELS_ID ?= {kid}
ifneq ($(KILN_KERNELS_ID),{kid})
$(error kiln model {stem} was compiled with other kernels than the kiln model included first ($(KILN_KERNELS_ID), {stem} {kid}): compile all models with the same kiln)
endif
{stem}_INCLUDES := $({stem}_DIR) $(KILN_KERNELS_DIR)
{stem}_CFLAGS := $(addprefix -I,$({stem}_INCLUDES))
{stem}_LDLIBS := -lm
{board}"""


def library_files(sources: dict[str, str], prefix: str | None, model_name: str, version: str,
                  cpu_flags: list[str] | None) -> dict[str, str | bytes]:
    """Every file of the library folder besides the model's sources and kiln.json: the
    kernels, CMakeLists.txt and the Make fragment. `sources`: the model's C files by name;
    `cpu_flags`: the board's (None for the host)."""
    target, stem, fragment = _names(prefix)
    kernels = kernel_files()
    c_sources = sorted(name for name in sources if name.endswith(".c"))
    kernel_sources = [k for k in kernels if k.endswith(".c")]
    kid = kernels_id(kernels)
    files: dict[str, str | bytes] = dict(kernels)
    files["CMakeLists.txt"] = cmake_lists(target, c_sources, kernel_sources, kid, model_name,
                                          version, cpu_flags)
    files[fragment] = make_fragment(stem, fragment, c_sources, kernel_sources, kid, model_name,
                                    version, cpu_flags)
    return files
