"""The RPC under line faults: bytes corrupted, dropped, duplicated and inserted at 1%,
in both directions, and a line full of garbage before the host connects.

Every command must end with the right result or a clear KilnError after bounded
retries; never a wrong result, never a hang.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from kiln.compiler.errors import DeviceError, KilnError, TransportError
from kiln.project_gen.fault_transport import FaultyTransport
from kiln.project_gen.rpc_client import RpcOptions
from kiln.project_gen.session import Session
from kiln.project_gen.transport import SubprocessTransport
from rpc_support import build_host_fixture, expected_outputs, fixture_specs

IN0 = 200
OPTIONS = RpcOptions(retry_timeout=0.05, max_backoff=0.2, max_retries=16, command_timeout=5.0,
                     connect_timeout=5.0)


@pytest.fixture(scope="module")
def firmware(tmp_path_factory):
    return build_host_fixture(tmp_path_factory.mktemp("rpcf") / "fixture", in0_bytes=IN0)


def run_mixed_commands(session: Session, n: int, seed: int) -> tuple[int, list[str]]:
    """n commands of every kind; returns (correct results, error messages). Asserts on a
    wrong result."""
    rng = np.random.default_rng(seed)
    ok, errors = 0, []
    for i in range(n):
        kind = i % 5
        try:
            if kind == 0:
                # 1% per byte: a frame of n bytes survives 0.99^n; keep echoes short
                blob = rng.integers(0, 256, rng.integers(0, 32), dtype=np.uint8).tobytes()
                assert session.echo(blob) == blob, f"echo {i} came back different"
            elif kind == 1:
                x0 = rng.integers(-128, 128, IN0, dtype=np.int8)
                x1 = rng.integers(-128, 128, 8, dtype=np.int8)
                got = session.run([x0, x1])
                want = expected_outputs(x0, x1)
                assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), \
                    f"run {i} returned a wrong result"
            elif kind == 2:
                blob = rng.integers(0, 256, IN0, dtype=np.uint8).tobytes()
                session.write_input(0, blob)
                assert session._download(0, 0, IN0) == blob, f"readback {i} differs"
            elif kind == 3:
                t = session.time(repeat=3)
                assert t.repeat == 3 and t.min_ticks <= t.max_ticks
            else:
                prof = session.profile()
                assert [layer.name for layer in prof.layers] == ["add_one", "sum", "clobber"]
            ok += 1
        except (TransportError, DeviceError) as exc:
            assert str(exc), "an error without a message"
            errors.append(f"{i}: {type(exc).__name__}: {exc}")
    return ok, errors


def test_1000_commands_at_one_percent_faults(firmware):
    ins, outs = fixture_specs(IN0)
    inner = SubprocessTransport([firmware])
    faulty = FaultyTransport(inner, rate=0.01, seed=1234)
    start = time.monotonic()
    session = Session(faulty, inputs=ins, outputs=outs, options=OPTIONS)
    ok, errors = run_mixed_commands(session, 1000, seed=5)
    elapsed = time.monotonic() - start
    stats = session.client.stats
    session.close()
    print(f"\n{ok} ok, {len(errors)} errors in {elapsed:.1f} s; injected {dict(faulty.injected)}; "
          f"{stats}")
    assert sum(faulty.injected.values()) > 1000  # the faults really happened
    assert set(faulty.injected) == {"corrupt", "drop", "duplicate", "insert"}
    assert stats.retransmissions > 100
    assert ok + len(errors) == 1000
    assert len(errors) <= 10, "\n".join(errors)  # clear errors are allowed, but rare


def test_faults_in_each_direction_alone(firmware):
    ins, outs = fixture_specs(IN0)
    for to_device, from_device in ((True, False), (False, True)):
        faulty = FaultyTransport(SubprocessTransport([firmware]), rate=0.02, seed=7,
                                 to_device=to_device, from_device=from_device)
        with Session(faulty, inputs=ins, outputs=outs, options=OPTIONS) as session:
            ok, errors = run_mixed_commands(session, 100, seed=9)
        assert ok >= 98, errors


def test_hopeless_line_fails_cleanly(firmware):
    """At 30% faults nothing gets through: a clear error in bounded time, not a hang."""
    faulty = FaultyTransport(SubprocessTransport([firmware]), rate=0.3, seed=3)
    start = time.monotonic()
    with pytest.raises(KilnError):
        Session(faulty, options=RpcOptions(retry_timeout=0.05, max_backoff=0.1, max_retries=5,
                                           connect_timeout=2.0)).echo(b"x" * 200)
    assert time.monotonic() - start < 15
    faulty.close()


def test_connect_after_garbage_on_the_line(firmware):
    ins, outs = fixture_specs(IN0)
    rng = np.random.default_rng(11)
    for trial in range(3):
        transport = SubprocessTransport([firmware])
        transport.write(os.urandom(5000) + b"\x00" * 3 + os.urandom(300))  # no trailing delimiter
        with Session(transport, inputs=ins, outputs=outs, options=OPTIONS) as session:
            x0 = rng.integers(-128, 128, IN0, dtype=np.int8)
            x1 = rng.integers(-128, 128, 8, dtype=np.int8)
            got = session.run([x0, x1])
            np.testing.assert_array_equal(got[0], expected_outputs(x0, x1)[0])
