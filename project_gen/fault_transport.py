"""A Transport wrapper that damages bytes on purpose, to test the RPC's recovery.

Each byte, in each chosen direction, is hit with probability ``rate`` by one fault
drawn from ``kinds``: corrupt (xor with a random non-zero value), drop, duplicate,
or insert (a random byte before it). Deterministic for a given seed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from .transport import Transport

FAULT_KINDS = ("corrupt", "drop", "duplicate", "insert")


class FaultyTransport(Transport):
    """Wraps another Transport and injects byte faults at a set rate."""

    def __init__(self, inner: Transport, rate: float = 0.01, seed: int = 0,
                 kinds: Sequence[str] = FAULT_KINDS, to_device: bool = True,
                 from_device: bool = True) -> None:
        unknown = set(kinds) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}")
        self.inner = inner
        self.rate = rate
        self.kinds = tuple(kinds)
        self.to_device = to_device
        self.from_device = from_device
        self.name = f"{inner.name} (faults {rate:.2%})"
        self.bytes_per_second = inner.bytes_per_second
        self.lossless = False
        self.injected: Counter[str] = Counter()
        self._rng = random.Random(seed)

    def _mangle(self, data: bytes) -> bytes:
        if not data or self.rate <= 0:
            return data
        out = bytearray()
        rng = self._rng
        for byte in data:
            if rng.random() >= self.rate:
                out.append(byte)
                continue
            kind = rng.choice(self.kinds)
            self.injected[kind] += 1
            if kind == "corrupt":
                out.append(byte ^ rng.randrange(1, 256))
            elif kind == "duplicate":
                out += bytes((byte, byte))
            elif kind == "insert":
                out += bytes((rng.randrange(256), byte))
            # "drop": nothing
        return bytes(out)

    def write(self, data: bytes) -> None:
        self.inner.write(self._mangle(data) if self.to_device else data)

    def read(self, timeout: float) -> bytes:
        data = self.inner.read(timeout)
        return self._mangle(data) if self.from_device else data

    def failure(self) -> str | None:
        return self.inner.failure()

    def close(self) -> None:
        self.inner.close()
