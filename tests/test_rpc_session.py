"""Session over the host board: the fixture firmware as a subprocess on stdio.

Covers every command end to end, the bounds checks seen from the host, and the
failures the host must name: stale firmware, other firmware, a silent device, a
device that dies, hangs, or resets under the session.
"""

from __future__ import annotations

import struct
import sys
import time

import numpy as np
import pytest

from kiln.compiler.errors import DeviceError, InputError, TransportError
from kiln.project_gen.rpc_client import RpcOptions, RpcStatusError
from kiln.project_gen.rpc_frame import Cmd, DeviceFrame, Status, encode_frame
from kiln.project_gen.session import ExpectedFirmware, Session
from kiln.project_gen.transport import SubprocessTransport, Transport
from rpc_support import build_host_fixture, expected_outputs, fixture_specs

FAST = RpcOptions(retry_timeout=0.1, max_backoff=0.3, max_retries=4, command_timeout=3.0,
                  connect_timeout=2.0)


@pytest.fixture(scope="module")
def firmware(tmp_path_factory):
    return build_host_fixture(tmp_path_factory.mktemp("rpc") / "fixture", sanitize=True)


@pytest.fixture(scope="module")
def tuning_firmware(tmp_path_factory):
    return build_host_fixture(tmp_path_factory.mktemp("rpc") / "fixture_tune", tuning=True)


@pytest.fixture
def session(firmware):
    ins, outs = fixture_specs()
    s = Session(SubprocessTransport([firmware]), inputs=ins, outputs=outs, options=FAST)
    yield s
    s.close()


def random_inputs(rng: np.random.Generator, n: int = 3000) -> tuple[np.ndarray, np.ndarray]:
    return (rng.integers(-128, 128, n, dtype=np.int8),
            rng.integers(-128, 128, 8, dtype=np.int8))


def test_handshake_identity(session):
    info = session.info()
    assert (info.board, info.build_id, info.model_name, info.model_hash) == \
        ("host", "fixture-build", "rpc_fixture", "fixture-0001")
    assert (info.num_inputs, info.num_outputs, info.num_layers) == (2, 2, 3)
    assert info.tick_hz == 1_000_000_000 and info.max_payload == 1024
    assert not info.has_tuning and not info.inputs_overwritten
    assert session.info(refresh=True).session_token == info.session_token


def test_run_matches_numpy(session):
    rng = np.random.default_rng(0)
    for _ in range(5):
        x0, x1 = random_inputs(rng)
        outs = session.run([x0, x1])
        want = expected_outputs(x0, x1)
        np.testing.assert_array_equal(outs[0], want[0])
        np.testing.assert_array_equal(outs[1], want[1])
        assert outs[1].dtype == np.int32 and outs[1].shape == (1,)


def test_write_read_and_echo(session):
    data = bytes(range(256)) * 11 + b"\x00" * 184
    session.write_input(0, data)
    assert session._download(0, 0, 3000) == data
    for n in (0, 1, 253, 254, 255, 1023):
        blob = bytes((i * 7) & 0xFF for i in range(n))
        assert session.echo(blob) == blob


def test_time_and_profile(session):
    rng = np.random.default_rng(1)
    session.run(list(random_inputs(rng)))
    t = session.time(repeat=20, warmup=2)
    assert t.repeat == 20 and t.tick_hz == 1_000_000_000
    assert 0 < t.min_ticks <= t.mean_ticks <= t.max_ticks
    prof = session.profile()
    assert [layer.name for layer in prof.layers] == ["add_one", "sum", "clobber"]
    assert all(layer.ticks > 0 for layer in prof.layers)
    assert prof.total_ticks == sum(layer.ticks for layer in prof.layers)


def test_out_of_range_requests_are_refused(session):
    c = session.client
    with pytest.raises(RpcStatusError) as e:
        c.write(0, 0, 2999, b"ab")
    assert e.value.status == Status.RANGE and "RANGE" in str(e.value)
    with pytest.raises(RpcStatusError) as e:
        c.read(1, 1, 0xFFFFFFFF, 1)
    assert e.value.status == Status.RANGE
    with pytest.raises(RpcStatusError) as e:
        c.read(0, 0, 0, 2000)  # longer than a payload
    assert e.value.status == Status.RANGE
    with pytest.raises(RpcStatusError) as e:
        c.write(1, 0, 0, b"x")  # outputs are read-only
    assert e.value.status == Status.ARG
    with pytest.raises(RpcStatusError) as e:
        c.write(0, 7, 0, b"x")
    assert e.value.status == Status.ARG
    with pytest.raises(RpcStatusError) as e:
        c.call(Cmd.READ, b"\x00" * 9)
    assert e.value.status == Status.LENGTH
    with pytest.raises(RpcStatusError) as e:
        c.call(0x55)
    assert e.value.status == Status.UNKNOWN_CMD
    with pytest.raises(RpcStatusError) as e:
        c.profile(3, 1)
    assert e.value.status == Status.RANGE
    with pytest.raises(RpcStatusError) as e:
        c.tune_info(0)
    assert e.value.status == Status.UNSUPPORTED
    assert session.echo(b"still fine") == b"still fine"


def test_input_checks(session):
    with pytest.raises(InputError):
        session.run([np.zeros(3000, np.int8)])  # one input missing
    with pytest.raises(InputError):
        session.run([np.zeros(2999, np.int8), np.zeros(8, np.int8)])
    with pytest.raises(InputError):
        session.run([np.zeros(3000, np.int16) + 300, np.zeros(8, np.int8)])


def test_model_error_is_named(session):
    x1 = np.zeros(8, np.int8)
    x1[:2] = 0x7F
    with pytest.raises(RpcStatusError, match="return code 3") as e:
        session.run([np.zeros(3000, np.int8), x1])
    assert e.value.status == Status.MODEL


def test_tuning_commands(tuning_firmware):
    with Session(SubprocessTransport([tuning_firmware]), options=FAST) as s:
        assert s.info().has_tuning and s.info().num_tune_variants == 3
        info = s.kernel_info(1)
        assert info.name == "add_one/unrolled" and info.outputs == [False, True]
        x = np.arange(256, dtype=np.uint8)
        for variant in (0, 1):
            out = s.run_kernel(variant, [x])
            assert out[0] == bytes(((x.astype(np.int32) + 1) & 0xFF).astype(np.uint8))
            t = s.time_kernel(variant, repeat=50)
            assert t.repeat == 50 and t.min_ticks > 0
        with pytest.raises(RpcStatusError) as e:
            s.time_kernel(2)  # its buffer lies outside the arena
        assert e.value.status == Status.RANGE
        with pytest.raises(RpcStatusError):
            s.kernel_info(3)


def test_reset_then_reconnect(session):
    rng = np.random.default_rng(2)
    session.client.reset()
    with pytest.raises(DeviceError, match="was reset"):
        session.client.read(1, 0, 0, 4)
    session.connect()
    x0, x1 = random_inputs(rng)
    np.testing.assert_array_equal(session.run([x0, x1])[0], expected_outputs(x0, x1)[0])
    session.reset()
    assert session.echo(b"ok") == b"ok"


def test_exit_server_ends_the_process(firmware):
    t = SubprocessTransport([firmware])
    s = Session(t, options=FAST)
    s.client.reset(exit_server=True)
    t._proc.wait(timeout=5)
    assert t._proc.returncode == 0
    s.close()


def test_stale_firmware_is_named(firmware):
    with pytest.raises(DeviceError, match="stale or other firmware.*model hash is 'fixture-0001'"):
        Session(SubprocessTransport([firmware]), expected=ExpectedFirmware(model_hash="abc"),
                options=FAST).close()
    ins, outs = fixture_specs(in0_bytes=100)
    t = SubprocessTransport([firmware])
    with pytest.raises(DeviceError, match="stale firmware"):
        Session(t, inputs=ins, outputs=outs, options=FAST)
    t.close()


def test_other_firmware_is_named():
    banner = "import sys,time\nwhile True:\n    sys.stdout.write('Hello from blinky v1.2\\r\\n'); sys.stdout.flush(); time.sleep(0.02)"
    t = SubprocessTransport([sys.executable, "-c", banner], name="blinky")
    with pytest.raises(DeviceError, match="no kiln RPC server on blinky.*Hello from blinky"):
        Session(t, options=FAST)
    t.close()


def test_firmware_that_prints_and_exits_is_named():
    script = "import sys; sys.stdout.write('KILN BEGIN kws host\\nKILN END 0\\n')"
    t = SubprocessTransport([sys.executable, "-c", script], name="standalone")
    with pytest.raises(DeviceError, match="no kiln RPC server on standalone.*KILN BEGIN.*exited "
                                          "with code 0.*standalone build"):
        Session(t, options=FAST)


def test_silent_device_is_a_transport_error():
    t = SubprocessTransport([sys.executable, "-c", "import time; time.sleep(60)"], name="mute")
    with pytest.raises(TransportError, match="no answer to HELLO from mute"):
        Session(t, options=FAST)
    t.close()


def test_dead_device_is_named(firmware):
    t = SubprocessTransport([firmware])
    s = Session(t, options=FAST)
    t._proc.kill()
    with pytest.raises(TransportError, match="killed by signal 9"):
        s.echo(b"anyone?")
    s.close()


def test_hang_is_named(firmware):
    s = Session(SubprocessTransport([firmware]), options=FAST)
    x1 = np.zeros(8, np.int8)
    x1[:2] = 0x7E  # the fixture spins forever
    t0 = time.monotonic()
    with pytest.raises(TransportError, match="accepted RUN but gave no answer within 1.0 s: it hangs"):
        s.run([np.zeros(3000, np.int8), x1], timeout=1.0)
    assert time.monotonic() - t0 < 10
    s.transport.close(grace=0.1)


class BootInjector(Transport):
    """Passes bytes through, and once armed slips a BOOT frame into what the device says."""

    def __init__(self, inner: Transport) -> None:
        self.inner, self.name, self.armed = inner, inner.name, False
        self.bytes_per_second = None

    def write(self, data: bytes) -> None:
        self.inner.write(data)

    def read(self, timeout: float) -> bytes:
        data = self.inner.read(timeout)
        if self.armed:
            self.armed = False
            boot = b"\x00KILN" + bytes(30)
            return encode_frame(DeviceFrame.BOOT, 0, boot) + data
        return data

    def close(self) -> None:
        self.inner.close()


def test_reset_mid_session_is_named(firmware):
    t = BootInjector(SubprocessTransport([firmware]))
    s = Session(t, options=FAST)
    t.armed = True
    with pytest.raises(DeviceError, match=r"reset \(it sent a BOOT frame\) while ECHO"):
        s.echo(b"x")
    s.close()


def test_small_payload_device(tmp_path):
    exe = build_host_fixture(tmp_path / "small", max_payload=256)
    rng = np.random.default_rng(3)
    ins, outs = fixture_specs()
    with Session(SubprocessTransport([exe]), inputs=ins, outputs=outs, options=FAST) as s:
        assert s.info().max_payload == 256
        x0, x1 = random_inputs(rng)
        np.testing.assert_array_equal(s.run([x0, x1])[0], expected_outputs(x0, x1)[0])


def test_run_reply_layout(session):
    """RUN on what is in place, without the input check (flags 0)."""
    frame = session.client.call(Cmd.RUN, struct.pack("<B3xI", 0, 0))
    rc, ticks, _crc = struct.unpack_from("<iQI", frame.payload, 1)
    assert rc == 0 and ticks > 0


def test_host_board_platform(tmp_path):
    """The same over crt/platform/posix.c, the host board's own platform hooks."""
    exe = build_host_fixture(tmp_path / "crt_posix", platform="crt")
    rng = np.random.default_rng(4)
    ins, outs = fixture_specs()
    with Session(SubprocessTransport([exe]), inputs=ins, outputs=outs, options=FAST) as s:
        for _ in range(3):
            x0, x1 = random_inputs(rng)
            got = s.run([x0, x1])
            np.testing.assert_array_equal(got[0], expected_outputs(x0, x1)[0])
        assert s.profile().total_ticks > 0


@pytest.mark.parametrize("model", ["tiny_cnn", "digits"])
def test_inputs_a_run_wrote_over_must_be_sent_again(tmp_path, model):
    """tiny_cnn's conv writes its output in place over the image; in the digits CNN a later
    layer's output reuses the image's bytes. Either way the device says so in its identity
    block, the input read back after a run is no longer the input, and run() on the
    inputs in place after a run or TIME is refused, not garbage."""
    from conftest import REPO
    from reference import run_reference
    from test_snapshot import tiny_cnn

    from kiln.project_gen.project import create_project

    if model == "tiny_cnn":
        path = tmp_path / "tiny_cnn.tflite"
        path.write_bytes(tiny_cnn())
    else:
        path = REPO / "examples" / "digits" / "digits_int8.tflite"
    project = create_project(path, board="host", out_dir=tmp_path / "p", mode="host-driven")
    shape = project.input_specs[0].shape
    x = np.random.default_rng(8).integers(-128, 128, shape, dtype=np.int8)
    with project.connect() as s:
        assert s.device.inputs_overwritten
        first = s.run(x)
        assert s._download(0, 0, x.nbytes) != x.tobytes()      # the flag tells the truth
        with pytest.raises(InputError, match=r"wrote over input\(s\) \[0\].*pass the inputs"):
            s.run(None)
        s.write_input(0, x)
        s.time(repeat=3)
        with pytest.raises(InputError, match="wrote over"):
            s.run(None)
        s.write_input(0, x)
        again = s.run(None)
    np.testing.assert_array_equal(first[0], run_reference(path.read_bytes(), [x])[0])
    np.testing.assert_array_equal(again[0], first[0])


@pytest.mark.slow
@pytest.mark.parametrize("model", ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant",
                                   "ad01_int8"])
def test_mlperf_over_rpc_on_host_board(tmp_path, model):
    """The host board's host-driven firmware (crt/platform/posix.c) equals tflite-micro."""
    from conftest import model_path
    from reference import run_reference

    from kiln.compiler.inputs import random_inputs as specs_random
    from kiln.project_gen.project import create_project

    path = model_path(model)
    project = create_project(path, board="host", out_dir=tmp_path / "p", mode="host-driven")
    xs = specs_random(project.input_specs, seed=5)
    with project.connect() as s:
        got = s.run(xs)
        assert len(s.profile().layers) == len(project.manifest["ops"])
    for i, (g, w) in enumerate(zip(got, run_reference(path.read_bytes(), xs))):
        diff = np.flatnonzero(g.reshape(-1) != w.reshape(-1))
        assert diff.size == 0, f"output {i} differs at {diff[:20].tolist()}"
