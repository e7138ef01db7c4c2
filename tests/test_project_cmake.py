"""A `kiln project create` folder added to the user's own CMake build (add_subdirectory):
its `kiln_model` library builds with the parent's compiler and flags, with none of the
board's CPU flags, -O2 or -Werror, which it keeps for a build of the folder on its own;
its kernels are the target kiln_kernels, shared with exported model folders."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, require_tool
from reference import run_reference

from kiln.project_gen import create_project

DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"
TOP_ONLY = ("-Werror", "-O2", "-Wextra", "-mfloat-abi=hard", "-std=c99")

# Runs the model on a fixed input (every byte `fill`) and prints the output bytes.
MAIN_C = r"""
#include <stdio.h>
#include <string.h>
#include "model.h"
#ifndef PARENT_DEFINE
#error "the parent's flags did not reach main.c"
#endif

static uint8_t arena[KILN_ARENA_BYTES] __attribute__((aligned(16)));
static int8_t input[KILN_INPUT_0_BYTES];
static int8_t output[KILN_OUTPUT_0_BYTES];

int main(void)
{
    const void *inputs[] = {input};
    void *outputs[] = {output};
    memset(input, FILL, sizeof input);
    int status = kiln_run(inputs, outputs, arena);
    for (unsigned i = 0; i < sizeof output; ++i)
        printf("%d ", output[i]);
    printf("\n");
    return status;
}
"""


def _cmake(*args: object, cwd: Path | None = None) -> str:
    done = subprocess.run(["cmake", *map(str, args)], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _commands(build: Path, under: Path) -> dict[str, list[str]]:
    """compile_commands.json: source file name → its compile command, for the sources of
    the folder `under`."""
    entries = json.loads((build / "compile_commands.json").read_text())
    return {Path(e["file"]).name: shlex.split(e["command"]) for e in entries
            if Path(e["file"]).resolve().is_relative_to(under.resolve())}


def _parent(root: Path, fw: Path, head: str, flags: str, link: str = "",
            before: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "main.c").write_text(MAIN_C.replace("FILL", "-128"))
    (root / "CMakeLists.txt").write_text(f"""cmake_minimum_required(VERSION 3.16)
{head}
project(parent C)
set(CMAKE_C_FLAGS "{flags}")
add_compile_definitions(PARENT_DEFINE=1)
{before}
add_subdirectory({fw.as_posix()} kiln_fw)
add_executable(app main.c)
target_link_libraries(app PRIVATE kiln_model)
{link}
""")
    return root


@pytest.fixture(autouse=True)
def _cmake_installed():
    require_tool("cmake")                    # skips: "cmake not installed (...)"


def _reference() -> list[int]:
    x = np.full((1, 8, 8, 1), -128, np.int8)
    return [int(v) for v in run_reference(DIGITS.read_bytes(), x)[0].ravel()]


def test_host_parent_builds_the_project_with_its_own_flags(tmp_path):
    require_tool("cc")
    fw = create_project(DIGITS, board="host", out_dir=tmp_path / "fw").path
    root = _parent(tmp_path / "app", fw, "", "-Wall -DPARENT_FLAG=1")
    build = tmp_path / "build"
    _cmake("-S", root, "-B", build, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    _cmake("--build", build, "-j2")
    commands = _commands(build, fw)
    assert {"model.c", "weights.c", "conv2d.c", "fully_connected.c"} <= set(commands)
    assert not any(name.endswith(("posix.c", "main.c")) for name in commands)  # no firmware
    for name, cmd in commands.items():
        assert "-DPARENT_FLAG=1" in cmd and "-DPARENT_DEFINE=1" in cmd and "-Wall" in cmd, name
        assert not set(TOP_ONLY) & set(cmd), (name, cmd)
    run = subprocess.run([build / "app"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert [int(v) for v in run.stdout.split()] == _reference()


def test_project_shares_kernels_with_an_exported_model(tmp_path):
    """A parent adding an exported model folder first, then a project folder: one
    kiln_kernels (the exported folder's), both models run."""
    require_tool("cc")
    from kiln import compiler as kc
    kc.compile(DIGITS).save(tmp_path / "dg", prefix="dg")
    fw = create_project(DIGITS, board="host", out_dir=tmp_path / "fw").path
    root = _parent(tmp_path / "app", fw, "", "-Wall", before=f"add_subdirectory("
                   f"{(tmp_path / 'dg').as_posix()} dg)",
                   link="target_link_libraries(app PRIVATE dg)")
    build = tmp_path / "build"
    _cmake("-S", root, "-B", build, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    _cmake("--build", build, "-j2")
    assert "conv2d.c" not in _commands(build, fw)            # the project's copy unused
    assert "conv2d.c" in _commands(build, tmp_path / "dg")
    run = subprocess.run([build / "app"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert [int(v) for v in run.stdout.split()] == _reference()


def test_project_built_on_its_own_keeps_its_flags(tmp_path):
    require_tool("cc")
    fw = create_project(DIGITS, board="host", out_dir=tmp_path / "fw").path
    build = tmp_path / "build"
    _cmake("-S", fw, "-B", build, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    _cmake("--build", build, "-j2")
    commands = _commands(build, fw)
    assert {"model.c", "conv2d.c", "main.c", "posix.c"} <= set(commands)
    for name, cmd in commands.items():
        assert {"-Werror", "-O2", "-std=c99"} <= set(cmd), (name, cmd)
    run = subprocess.run([build / "firmware"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert "KILN OUTPUT" in run.stdout


SOFTFP = "-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=softfp -O1"
CROSS_HEAD = """set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)"""


@pytest.mark.cross
def test_softfp_parent_links_a_hard_float_board_project(tmp_path):
    require_tool("arm-none-eabi-gcc")
    readelf = require_tool("arm-none-eabi-readelf")
    fw = create_project(DIGITS, board="mps2-an386", out_dir=tmp_path / "fw").path
    assert "-mfloat-abi=hard" in (fw / "CMakeLists.txt").read_text()   # the board's own
    root = _parent(tmp_path / "app", fw, CROSS_HEAD, SOFTFP,
                   link="target_link_options(app PRIVATE --specs=nosys.specs)")
    build = tmp_path / "build"
    _cmake("-S", root, "-B", build, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    _cmake("--build", build, "-j2")          # hard-float objects would not link here
    commands = _commands(build, fw)
    assert {"model.c", "conv2d.c"} <= set(commands)
    for name, cmd in commands.items():
        assert "-mfloat-abi=softfp" in cmd and not set(TOP_ONLY) & set(cmd), (name, cmd)
    libs = sorted(build.rglob("libkiln_*.a"))
    assert {p.name for p in libs} == {"libkiln_model.a", "libkiln_kernels.a"}
    for path in [*libs, build / "app"]:
        attrs = subprocess.run([readelf, "-A", path], capture_output=True, text=True,
                               check=True).stdout
        assert "Tag_CPU_arch: v7E-M" in attrs and "Tag_FP_arch: VFPv4-D16" in attrs, attrs
        # hard-float objects say "Tag_ABI_VFP_args: VFP registers"; softfp ones say nothing
        assert "Tag_ABI_VFP_args" not in attrs, f"{path.name} has hard-float objects"
