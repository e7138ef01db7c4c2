"""Hostile replies from a device (issue 19, item 4): every RPC reply is checked for length
and range before use.

The device is tests/hostile_rpc_device.py, a process that speaks the wire protocol on its
stdin/stdout (or a TCP socket, reached through `--port socket://...`) and answers one
command with bytes chosen here; the host is kiln's own RpcClient and Session, unchanged.
A short, long or impossible reply must be one DeviceError naming the command and the
defect: never a struct.error, never a loop, never an impossible figure printed.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO
from kiln.compiler.errors import DeviceError, InputError
from kiln.project_gen.rpc_client import RpcOptions
from kiln.project_gen.session import Session
from kiln.project_gen.transport import SubprocessTransport

DEVICE = Path(__file__).with_name("hostile_rpc_device.py")
KILN = Path(sys.executable).with_name("kiln")
DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"
FAST = RpcOptions(retry_timeout=0.1, max_backoff=0.3, max_retries=4, command_timeout=5.0,
                  connect_timeout=5.0)
HZ = 1_000_000_000
U64 = 0xFFFF_FFFF_FFFF_FFFF


def device(replies: dict[str, bytes] | None = None, **config) -> Session:
    """A session with the fake device answering `replies` (command name → payload)."""
    config["replies"] = {k: v.hex() for k, v in (replies or {}).items()}
    t = SubprocessTransport([sys.executable, str(DEVICE), json.dumps(config)], name="fake")
    return Session(t, options=FAST)


def timing(rc=0, runs=10, total=10_000, lo=1000, hi=1000, hz=HZ, overhead=10) -> bytes:
    return b"\x00" + struct.pack("<iIQQQII", rc, runs, total, lo, hi, hz, overhead)


def profile_reply(ticks, layers=2, first=0, total=None, rc=0, n=None) -> bytes:
    n = len(ticks) if n is None else n
    total = sum(ticks) if total is None else total
    return b"\x00" + struct.pack("<iHHHQ", rc, layers, first, n, total) + \
        struct.pack(f"<{len(ticks)}I", *ticks)


def refused(session: Session, call, *defect: str) -> str:
    with pytest.raises(DeviceError) as e:
        call(session)
    message = str(e.value)
    assert "malformed" in message and "\n" not in message, message
    for d in defect:
        assert d in message, message
    return message


def test_the_fake_device_is_well_formed_by_default():
    with device() as s:
        t = s.time(repeat=10)
        assert (t.repeat, t.mean_ticks, t.tick_hz) == (10, 1000, HZ)
        assert [layer.ticks for layer in s.profile().layers] == [1000, 1000]
        assert s.layer_names() == ["CONV_2D", "SOFTMAX"]
        assert s.client.tensor(0, 0).bytes == 16
        assert s.echo(b"abc") == b"abc"
        assert len(s.run(np.zeros(16, np.int8))[0]) == 4


@pytest.mark.parametrize("reply, defect", [
    (b"\x00", "1 bytes, too short for its timing block"),
    (timing()[:20], "too short for its timing block"),
    # every field 0xFF: 2^64-1 ticks over 2^32-1 runs was printed as "4,294,967,297 ns"
    (b"\x00" + b"\xff" * 40, "status OK with return code -1"),
    (timing(runs=0xFFFF_FFFF, total=U64, lo=U64, hi=U64), "4,294,967,295 runs timed, 10 asked"),
    (timing(total=U64, lo=U64, hi=U64), "the device's timer wrapped"),
    (timing(lo=2000, hi=1000), "fastest run 2,000 ticks, slowest 1,000"),
    (timing(total=5), "5 ticks in total for 10 runs of 1,000 to 1,000 ticks"),
    (timing(hz=0), "a tick rate of 0 Hz"),
    (timing(hz=HZ + 1), "the handshake said 1,000,000,000"),
    (timing() + b"\x00", "1 byte(s) after its last field"),
])
def test_time_replies_are_checked(reply, defect):
    with device({"TIME": reply}) as s:
        refused(s, lambda s: s.time(repeat=10), "TIME reply", defect)


@pytest.mark.parametrize("reply, defect", [
    (b"\x00", "too short for its header"),
    (profile_reply([1000, 1000])[:-2], "too short for its 2 layer tick counts"),
    (profile_reply([1000], n=200), "too short for its 200 layer tick counts"),
    (profile_reply([1000, 1000], layers=7), "7 layers, the handshake said 2"),
    (profile_reply([1000, 1000], first=1), "layers from 1, asked from 0"),
    (profile_reply([1000, 0xFFFF_FFFF], total=U64 >> 2), "layer 1 took 2^32-1 ticks"),
    (profile_reply([1000, 1000], total=5), "add up to 2,000, more than the total 5"),
    (profile_reply([1000, 1000], total=U64), "timer wrapped"),
    (profile_reply([1000, 1000], rc=3), "return code 3"),
    (profile_reply([]), "no layers from 0 of 2"),              # used to loop forever
])
def test_profile_replies_are_checked(reply, defect):
    with device({"PROFILE": reply}) as s:
        refused(s, lambda s: s.profile(), "PROFILE reply", defect)


@pytest.mark.parametrize("reply, defect", [
    (b"\x00", "too short for its layer 0 name length"),
    (b"\x00\x20abc", "its layer 0 name runs past the end"),
    (b"\x00\x0b\x1b[31mEVIL\x1b[0m", "holds control characters"),
    (b"\x00\x03abcdef", "3 byte(s) after its last field"),
])
def test_layer_replies_are_checked(reply, defect):
    with device({"LAYER": reply}) as s:
        refused(s, lambda s: s.layer_names(), "LAYER reply", defect)


@pytest.mark.parametrize("reply, defect", [
    (b"\x00", "too short for its size, offset and flag"),
    (b"\x00" + struct.pack("<IIB", 16, 0, 1) + b"!", "1 byte(s) after its last field"),
    (b"\x00" + struct.pack("<IIB", 0xFFFF_FFF0, 0x100, 1), "outside the 65,536-byte arena"),
    (b"\x00" + struct.pack("<IIB", 16, 0, 7), "writable flag 7"),
])
def test_tensor_replies_are_checked(reply, defect):
    t = SubprocessTransport([sys.executable, str(DEVICE), json.dumps(
        {"replies": {"TENSOR": reply.hex()}})], name="fake")
    with Session(t, options=FAST) as s:
        refused(s, lambda s: s.client.tensor(0, 0), "TENSOR reply", defect)


@pytest.mark.parametrize("reply, defect", [
    (b"\x00", "too short for its return code, ticks and output CRC-32"),
    (b"\x00" + struct.pack("<iQI", 4, 1000, 0), "status OK with return code 4"),
    (b"\x00" + struct.pack("<iQI", 0, U64, 0), "timer wrapped"),
])
def test_run_replies_are_checked(reply, defect):
    with device({"RUN": reply}) as s:
        refused(s, lambda s: s.run(np.zeros(16, np.int8)), "RUN reply", defect)


def test_echo_and_read_replies_are_checked():
    with device({"ECHO": b"\x00abX"}) as s:
        refused(s, lambda s: s.echo(b"abc"), "ECHO reply", "the bytes came back different")
    with device({"ECHO": b"\x00ab"}) as s:
        refused(s, lambda s: s.echo(b"abc"), "ECHO reply", "2 bytes back for 3 sent")
    with device({"READ": b"\x00" + bytes(3)}) as s:
        refused(s, lambda s: s.read_output(0), "READ reply", "3 bytes, asked for 4")


def test_write_and_reset_replies_are_checked():
    with device({"WRITE": b"\x00junk"}) as s:
        refused(s, lambda s: s.write_input(0, bytes(16)), "WRITE reply", "4 byte(s) after")


@pytest.mark.parametrize("identity, defect", [
    ({"max_payload": 0}, "max payload 0, less than the protocol's 256"),
    ({"tick_hz": 0}, "tick rate of 0 Hz"),
    ({"board": "\x1b]0;pwned\x07"}, "its board name '\\x1b]0;pwned\\x07' holds control"),
    ({"model_hash": "h" * 49}, "its model hash is 49 bytes, more than 48"),
])
def test_identity_blocks_are_checked(identity, defect):
    config = json.dumps({"identity": identity, "replies": {}})
    t = SubprocessTransport([sys.executable, str(DEVICE), config], name="fake")
    with pytest.raises(DeviceError) as e:
        Session(t, options=FAST)
    assert "malformed HELLO reply" in str(e.value) and defect in str(e.value), str(e.value)


def test_a_truncated_or_padded_identity_block_is_refused():
    good = b"KILN" + struct.pack("<BBHIIBBHHI", 1, 0, 1024, HZ, 4096, 1, 1, 2, 0, 0)
    for block, defect in ((good + b"\x09host", "board name runs past the end"),
                          (good + b"\x00" * 4 + b"extra", "5 byte(s) after its last field")):
        config = json.dumps({"identity_hex": block.hex()})
        t = SubprocessTransport([sys.executable, str(DEVICE), config], name="fake")
        with pytest.raises(DeviceError, match="malformed HELLO reply.*" + re.escape(defect)):
            Session(t, options=FAST)


def test_request_arguments_out_of_their_field_are_input_errors():
    with device() as s:
        with pytest.raises(InputError, match="repeat must be a whole number in"):
            s.time(repeat=1 << 32)
        with pytest.raises(InputError, match="warmup must be a whole number in"):
            s.time(repeat=1, warmup=70000)
        with pytest.raises(InputError, match="first layer must be"):
            s.client.profile(1 << 16, 1)
        with pytest.raises(InputError, match="variant must be"):
            s.client.tune_run(-1)


def test_tune_info_replies_are_checked():
    body = struct.pack("<HB", 3, 1) + struct.pack("<BII", 0, 64, 0) + b"\x04gemm"
    cases = [
        (struct.pack("<HB", 3, 9), "9 buffers, more than 8"),
        (struct.pack("<HB", 0, 0) + b"\x00", "variant 0 of 0"),
        (struct.pack("<HB", 3, 1) + struct.pack("<BII", 0, 1 << 20, 0) + b"\x00",
         "outside the 65,536-byte arena"),
        (struct.pack("<HB", 3, 1) + struct.pack("<BII", 6, 64, 0) + b"\x00", "flags 0x06"),
        (body[:-2], "variant name runs past the end"),
    ]
    for reply, defect in cases:
        with device({"TUNE_INFO": b"\x00" + reply}) as s:
            refused(s, lambda s: s.kernel_info(0), "TUNE_INFO reply", defect)
    with device({"TUNE_INFO": b"\x00" + body}) as s:
        assert s.kernel_info(0).name == "gemm"


# --- the CLI, end to end over --port --------------------------------------------------------

@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "proj"
    proc = subprocess.run([str(KILN), "project", "create", str(DIGITS), "--board", "host",
                           "--mode", "host-driven", "-o", str(out)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def _fake_port(project: Path, replies: dict[str, bytes]) -> tuple[subprocess.Popen, str]:
    manifest = json.loads((project / "kiln.json").read_text())
    nbytes = lambda t: int(np.prod(t["shape"])) * np.dtype(t["dtype"]).itemsize  # noqa: E731
    config = {"identity": {"build_id": manifest["project"]["build_id"], "board": "host"},
              "inputs": [nbytes(t) for t in manifest["inputs"]],
              "outputs": [nbytes(t) for t in manifest["outputs"]],
              "layers": [op["type"] for op in manifest["ops"]],
              "replies": {k: v.hex() for k, v in replies.items()}}
    proc = subprocess.Popen([sys.executable, str(DEVICE), json.dumps(config), "--tcp"],
                            stdout=subprocess.PIPE, text=True)
    port = proc.stdout.readline().strip()
    return proc, f"socket://127.0.0.1:{port}"


def test_profile_refuses_an_impossible_time_reply_in_one_line(project):
    """A TIME reply of 0xFF bytes was printed as `whole model 4,294,967,297 ns`."""
    reply = b"\x00" + struct.pack("<iIQQQII", 0, 0xFFFF_FFFF, U64, U64, U64, HZ, 0)
    dev, url = _fake_port(project, {"TIME": reply})
    try:
        proc = subprocess.run([str(KILN), "profile", str(project), "--port", url],
                              capture_output=True, text=True, timeout=60)
    finally:
        dev.kill()
        dev.wait()
    assert "4,294,967,297" not in proc.stdout
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "kiln: error: the device sent a malformed TIME reply: 4,294,967,295 runs timed, "
        "10 asked (other firmware, or a damaged build?)"]


def test_profile_refuses_a_short_profile_reply_in_one_line(project):
    dev, url = _fake_port(project, {"PROFILE": b"\x00\x00\x00"})
    try:
        proc = subprocess.run([str(KILN), "profile", str(project), "--port", url],
                              capture_output=True, text=True, timeout=60)
    finally:
        dev.kill()
        dev.wait()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "malformed PROFILE reply: 3 bytes, too short" in lines[0]


@pytest.mark.parametrize("command, call, message", [
    ("TIME", "s.time(repeat=1, timeout=1.0)", "accepted TIME but gave no answer within 1.0 s"),
    ("ECHO", "s.echo(b'x')", "no answer to ECHO from fake"),
])
def test_a_device_flooding_acks_and_stale_frames_cannot_hold_a_request(command, call, message):
    """ACKs and answers to other requests used to keep the client reading forever. Run in
    a child with a timeout, so that a hang fails the test instead of stalling the suite."""
    code = f"""
import json, sys
from kiln.compiler.errors import TransportError
from kiln.project_gen.rpc_client import RpcOptions
from kiln.project_gen.session import Session
from kiln.project_gen.transport import SubprocessTransport
config = json.dumps({{"flood": {command!r}}})
t = SubprocessTransport([sys.executable, {str(DEVICE)!r}, config], name="fake")
s = Session(t, options=RpcOptions(retry_timeout=0.1, max_backoff=0.3, max_retries=4,
                                  command_timeout=5.0, connect_timeout=5.0))
try:
    {call}
except TransportError as e:
    print(e)
s.close()
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert message in proc.stdout, proc.stdout + proc.stderr


# --- what a standalone firmware prints (project_gen/console.py) ------------------------------

@pytest.mark.parametrize("text, message", [
    ("KILN BEGIN m b 1\nKILN OUTPUT 0 0 1 05\nKILN TICKS 0 5\nKILN END 0 0\n",
     "tick rate of 0 Hz"),                                   # was a ZeroDivisionError later
    ("KILN BEGIN m b 1\nKILN OUTPUT 0 0 1 05\nKILN TICKS 0 -5\nKILN END 0 100\n",
     "impossible ticks {0: -5}"),
    ("KILN BEGIN m b 1\nKILN FAULT \x1b[2J\x1b]0;pwned\x07\n", r"faulted \(\\x1b\[2J"),
])
def test_a_hostile_transcript_is_one_clean_device_error(text, message):
    from kiln.compiler.inputs import TensorSpec
    from kiln.project_gen.console import to_result

    out = [TensorSpec("y", (1,), np.dtype(np.int8), None, None)]
    with pytest.raises(DeviceError, match=message) as e:
        to_result(text, out, "cycles", 0, "test").seconds
    assert "\x1b" not in str(e.value)
