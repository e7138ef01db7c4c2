"""Shared fixtures: where the real models live, and skips with a reason when they don't."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

MLPERF_INT8 = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8"]


def models_root() -> Path:
    """../shared/models next to the repo, or $KILN_MODELS."""
    return Path(os.environ.get("KILN_MODELS", REPO.parent / "shared" / "models"))


@pytest.fixture(scope="session")
def models_dir() -> Path:
    root = models_root()
    if not root.is_dir():
        pytest.skip(f"test models not found at {root} (set KILN_MODELS to the shared/models folder)")
    return root


def model_path(name: str) -> Path:
    """Path of a shared model by file stem; skips the test if it is missing."""
    root = models_root()
    for sub in ("mlperf_tiny", "digits"):
        p = root / sub / f"{name}.tflite"
        if p.exists():
            return p
    pytest.skip(f"model {name}.tflite not found under {root} (set KILN_MODELS)")


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not installed (make setup installs it)")
    return path


def run_kiln(capsys, *argv) -> tuple[int, str, str]:
    """Exit code, stdout, stderr of `kiln argv` run in-process; never a traceback."""
    from kiln.compiler.cli import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def one_error(err: str) -> str:
    """The single `kiln: error:` line stderr must consist of."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiln: error: "), err
    return lines[0]


def pytest_addoption(parser):
    parser.addoption("--update-snapshots", action="store_true",
                     help="rewrite tests/snapshots/ from the current code generator")


@pytest.fixture
def update_snapshots(request) -> bool:
    return bool(request.config.getoption("--update-snapshots"))


def run_sanitized_c(tmp_path: Path, main_source: str, kernels: list[str]) -> str:
    """Build `main_source` with the named crt/kernels sources (-Werror, ASan + UBSan,
    aborting on the first report), run it, and return its stdout; fails the test on a
    build error, a sanitizer report or a non-zero exit."""
    import subprocess

    from kiln.compiler.paths import crt_dir

    require_tool("cc")
    kdir = crt_dir() / "kernels"
    src, exe = tmp_path / "main.c", tmp_path / "checks"
    src.write_text(main_source)
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-g", "-O1",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-I", str(kdir), "-o", str(exe), str(src),
                    *(str(kdir / k) for k in kernels), "-lm"], check=True)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout
