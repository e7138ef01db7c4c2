"""A short libFuzzer pass over the RPC parser and command handler (ASan + UBSan).
benchmarks/fuzz_rpc.py runs the long one (>= 1,000,000 inputs)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from fuzz_rpc import run_fuzzer  # noqa: E402
from rpc_support import fuzz_compiler  # noqa: E402


@pytest.mark.skipif(fuzz_compiler() is None, reason="clang with libFuzzer not installed")
def test_short_fuzz_run(tmp_path):
    r = run_fuzzer(tmp_path, runs=30_000, seconds=60)
    assert r["ok"], r["log"][-4000:]
    assert r["runs"] >= 1000
    assert r["cov"] > 100  # the structured mode reaches the handler, not just the CRC check
