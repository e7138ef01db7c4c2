"""Mutated and truncated copies of real models: each compiles or raises ModelError.

Nothing else is allowed: no other exception type, no crash, no hang (every case runs
in-process, so a crash or hang would fail the whole test run).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from kiln.compiler import ModelError, compile, load

from conftest import model_path

CASES = 2000


def _mutate(data: bytes, rng: np.random.Generator) -> bytes:
    b = bytearray(data)
    kind = rng.integers(0, 5)
    if kind == 0:                                   # truncate
        return bytes(b[: int(rng.integers(0, len(b)))])
    if kind == 1:                                   # flip a few random bytes anywhere
        for _ in range(int(rng.integers(1, 8))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        return bytes(b)
    if kind == 2:                                   # flip bytes in the flatbuffer tables (not weights)
        head = min(len(b), 4096)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(0, head))] = int(rng.integers(0, 256))
        tail = max(0, len(b) - 4096)
        for _ in range(int(rng.integers(0, 4))):
            b[int(rng.integers(tail, len(b)))] = int(rng.integers(0, 256))
        return bytes(b)
    if kind == 3:                                   # insert garbage
        at = int(rng.integers(0, len(b)))
        return bytes(b[:at]) + rng.bytes(int(rng.integers(1, 64))) + bytes(b[at:])
    # overwrite a 32-bit word with an extreme value (offsets, lengths, shapes)
    at = int(rng.integers(0, max(1, len(b) - 4))) & ~3
    b[at:at + 4] = int(rng.choice([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, 0x10000])).to_bytes(4, "little")
    return bytes(b)


@pytest.mark.slow
def test_mutated_models_compile_or_raise_model_error():
    sources = {name: model_path(name).read_bytes()
               for name in ("kws_ref_model", "ad01_int8", "pretrainedResnet_quant", "vww_96_int8")}
    weights = {"kws_ref_model": 0.4, "ad01_int8": 0.2, "pretrainedResnet_quant": 0.3, "vww_96_int8": 0.1}
    rng = np.random.default_rng(1234)
    names = list(sources)
    outcomes = {"compiled": 0, "ModelError": 0}
    slowest = 0.0
    for case in range(CASES):
        name = names[int(rng.choice(len(names), p=[weights[n] for n in names]))]
        data = _mutate(sources[name], rng)
        start = time.perf_counter()
        try:
            compile(load(data))
            outcomes["compiled"] += 1
        except ModelError:
            outcomes["ModelError"] += 1
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"case {case} ({name}): {type(e).__name__}: {e}")
        slowest = max(slowest, time.perf_counter() - start)
    assert sum(outcomes.values()) == CASES
    assert outcomes["ModelError"] > CASES // 10     # the mutations do break things
    assert slowest < 10.0, f"one case took {slowest:.1f} s"
