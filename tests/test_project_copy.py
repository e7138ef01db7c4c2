"""A generated project is standalone: copied elsewhere, it builds and runs with make, no kiln."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import REPO, require_tool
from reference import run_reference

from kiln.project_gen import create_project
from kiln.project_gen.console import to_result

pytestmark = pytest.mark.cross

DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"
DIGITS_X = REPO / "examples" / "digits" / "digits_test_x.npy"


def _system_path() -> str:
    """PATH with only the directories of the system tools: no virtualenv, so no kiln."""
    dirs = []
    for tool in ("make", "arm-none-eabi-gcc", "qemu-system-arm", "cmake"):
        found = shutil.which(tool)
        if found and os.path.dirname(found) not in dirs:
            dirs.append(os.path.dirname(found))
    path = os.pathsep.join(dirs + ["/bin"])
    assert shutil.which("kiln", path=path) is None, "kiln is on the system PATH"
    return path


@pytest.mark.qemu
def test_copied_project_builds_and_runs_with_plain_make(tmp_path):
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    x = np.load(DIGITS_X)[:3]
    p = create_project(DIGITS, board="mps2-an386", out_dir=tmp_path / "made", inputs=[x])
    elsewhere = tmp_path / "elsewhere" / "fw"
    shutil.copytree(p.path, elsewhere)
    shutil.rmtree(p.path)                      # nothing may point back at the original
    env = {"PATH": _system_path(), "HOME": str(tmp_path)}
    subprocess.run(["make", "-j2"], cwd=elsewhere, env=env, check=True, capture_output=True)
    run = subprocess.run(["make", "-s", "run"], cwd=elsewhere, env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    result = to_result(run.stdout, p.output_specs, "instructions", run.returncode, "make run")
    ref = np.concatenate([run_reference(DIGITS.read_bytes(), xi[None])[0] for xi in x])
    np.testing.assert_array_equal(result.outputs[0], ref)


def test_cmake_builds_the_same_project(tmp_path):
    require_tool("arm-none-eabi-gcc")
    require_tool("cmake")
    p = create_project(DIGITS, board="mps2-an500", out_dir=tmp_path / "p")
    env = {"PATH": _system_path(), "HOME": str(tmp_path)}
    build = tmp_path / "cmake-build"
    for cmd in (["cmake", "-S", str(p.path), "-B", str(build)],
                ["cmake", "--build", str(build), "-j2"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (build / "firmware.elf").exists()
