"""Host-compiled C tests of crt/rpc (under ASan/UBSan), and its warning-clean builds."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from rpc_support import CRT, FIXTURE, RPC, WARNINGS, build_c_test, rpc_sources


@pytest.mark.parametrize("name,tuning", [("test_rpc_frame", False), ("test_rpc_server", False),
                                         ("test_rpc_server", True)],
                         ids=["frame", "server", "server-tuning"])
def test_c_suite(tmp_path, name, tuning):
    exe = build_c_test(name, tmp_path / name, tuning=tuning)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith(" 0 failed")


@pytest.mark.parametrize("compiler", ["gcc", "clang", "arm-none-eabi-gcc"])
def test_rpc_sources_compile_warning_free(tmp_path, compiler):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    flags = ["-mcpu=cortex-m0plus", "-mthumb", "-Os"] if compiler.startswith("arm") else ["-O2"]
    for src in rpc_sources():
        for extra in ([], ["-DKILN_HAS_TUNING", "-DKILN_RPC_MAX_PAYLOAD=256u"]):
            argv = [compiler, *WARNINGS, *flags, *extra, f"-I{CRT}", f"-I{RPC}", f"-I{FIXTURE}",
                    "-c", str(src), "-o", str(tmp_path / (src.stem + ".o"))]
            proc = subprocess.run(argv, capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr
