"""The host end of kiln's RPC: requests, retransmission, handshake, typed commands.

RpcClient turns each command into one request frame and waits for its response:

* every request gets a fresh 16-bit seq; a retransmission reuses it, and the device
  answers a repeated (seq, cmd, CRC) from its kept response without re-executing;
* a NAK or a damaged frame triggers a retransmission at once; silence does too on a
  lossy link (a real UART), at most ``max_retries`` times, the wait doubling up to
  ``max_backoff``. On a lossless link (pipe, socket, QEMU) silence only means a slow
  device, so the client waits (the same bounded number of times) instead of queueing
  copies behind the first. Waits scale with the frame's size, using a latency and
  per-byte cost learnt from clean exchanges (a QEMU UART slows 10x on a busy machine);
* long commands (RUN, TIME, PROFILE, TUNE_RUN) are ACKed by the device when it
  starts executing; then the client waits up to ``command_timeout`` for the answer
  and names a device that never answers as hung;
* a BOOT frame or a NO_SESSION status mid-session means the device was reset.

Errors: TransportError when the link is dead or silent, DeviceError (RpcStatusError
for a status code) when the device answered wrongly, runs other firmware or reset.
"""

from __future__ import annotations

import random
import struct
import time
from collections import deque
from dataclasses import dataclass, field

from kiln.compiler.errors import DeviceError, InputError, KilnError, TransportError
from kiln.compiler.limits import RPC_MAX_STRING

from .rpc_frame import (
    MAGIC, PROTOCOL_VERSION, RESPONSE_BIT, STATUS_TEXT, BadFrame, Cmd,
    DeviceFrame, Frame, FrameDecoder, Status, encode_frame,
)
from .transport import Transport

LONG_COMMANDS = frozenset({Cmd.RUN, Cmd.TIME, Cmd.PROFILE, Cmd.TUNE_RUN, Cmd.STEP})
_FEED_BYTES = 4096             # bytes decoded between two looks at the clock

# Limits of the wire format (crt/rpc/kiln_rpc_wire.h, kiln_rpc_tune.h) a reply must keep;
# the others are in kiln.compiler.limits.
MIN_DEVICE_PAYLOAD = 256       # KILN_RPC_MIN_PAYLOAD: the identity block must fit
MAX_TUNE_BUFFERS = 8           # KILN_TUNE_MAX_BUFFERS
SATURATED_U32 = 0xFFFF_FFFF    # a PROFILE layer's ticks saturate here: the true count is lost
WRAPPED_TICKS = 1 << 63        # a u64 tick difference this large is a timer that ran backwards


class Reply:
    """A response payload read field by field, after its status byte.

    Every read is checked against the payload's length and every value a caller
    checks against its range, so a short, long or impossible reply is one DeviceError
    naming the command and the defect: never a struct.error, and never a figure the
    device cannot have measured printed as if it were one.
    """

    def __init__(self, cmd: int, payload: bytes) -> None:
        self.cmd = cmd
        self.data = payload
        self.at = 1

    def error(self, defect: str) -> DeviceError:
        return malformed(self.cmd, defect)

    def check(self, ok: bool, defect: str) -> None:
        if not ok:
            raise self.error(defect)

    def fields(self, fmt: str, what: str) -> tuple[int, ...]:
        """The little-endian fields `fmt` (struct codes) at the cursor, named `what`."""
        size = struct.calcsize("<" + fmt)
        self.check(self.at + size <= len(self.data),
                   f"{len(self.data)} bytes, too short for its {what}")
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += size
        return values

    def string(self, what: str, max_len: int) -> str:
        """A u8 length and that many bytes of UTF-8 text, printable (it reaches messages
        and tables on the terminal)."""
        (n,) = self.fields("B", f"{what} length")
        self.check(n <= max_len, f"its {what} is {n} bytes, more than {max_len}")
        self.check(self.at + n <= len(self.data), f"its {what} runs past the end")
        text = self.data[self.at: self.at + n].decode("utf-8", "replace")
        self.at += n
        self.check(text.isprintable(), f"its {what} {text!r} holds control characters")
        return text

    def end(self) -> None:
        self.check(self.at == len(self.data),
                   f"{len(self.data) - self.at} byte(s) after its last field")


def malformed(cmd: int, defect: str) -> DeviceError:
    """The one error for a reply that breaks the protocol: which command, what is wrong."""
    return DeviceError(f"the device sent a malformed {_cmd_name(cmd)} reply: {defect} "
                       f"(other firmware, or a damaged build?)")


def _check_arg(value: int, bits: int, what: str, lo: int = 0) -> int:
    """A request field: InputError (not a struct.error) when it does not fit its width."""
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value < 1 << bits:
        raise InputError(f"{what} must be a whole number in [{lo}, {(1 << bits) - 1}], "
                         f"got {value!r}")
    return value


@dataclass(frozen=True)
class RpcOptions:
    """Timeouts and limits of the host side (seconds, bytes)."""

    retry_timeout: float = 0.25   # first wait for an answer before retransmitting (plus wire time)
    max_backoff: float = 1.0      # the wait doubles per retransmission up to this
    max_retries: int = 8          # retransmissions of one request before giving up
    command_timeout: float = 60.0  # RUN/TIME/PROFILE/TUNE_RUN: how long the device may compute
    connect_timeout: float = 5.0  # handshake, including a device still booting
    max_payload: int = 1024       # the host's cap on a frame's payload (the device's also applies)
    link_bytes_per_second: float = 20_000.0  # used when the transport does not know its rate


@dataclass(frozen=True)
class DeviceInfo:
    """The identity block of HELLO / INFO / BOOT."""

    protocol_version: int
    flags: int
    max_payload: int
    tick_hz: int
    arena_bytes: int
    num_inputs: int
    num_outputs: int
    num_layers: int
    num_tune_variants: int
    session_token: int
    board: str
    build_id: str
    model_name: str
    model_hash: str

    @property
    def has_tuning(self) -> bool:
        return bool(self.flags & 0x01)

    @property
    def inputs_overwritten(self) -> bool:
        """A run writes over the model inputs (the memory plan reuses their bytes)."""
        return bool(self.flags & 0x04)

    @property
    def has_state_reset(self) -> bool:
        """The server resets the model state on HELLO and has RESET mode 2 (reset it
        within a session); firmware built before model state has not."""
        return bool(self.flags & 0x10)

    @property
    def has_step(self) -> bool:
        """The server has STEP and the ARENA space (layer-by-layer runs, `kiln validate
        --per-layer`); firmware built before them has not."""
        return bool(self.flags & 0x08)

    @classmethod
    def parse(cls, data: bytes, cmd: int = Cmd.HELLO) -> DeviceInfo:
        """The identity block `data` (a HELLO/INFO payload after its status byte)."""
        if len(data) < 26 or data[:4] != MAGIC:
            raise DeviceError(f"the device answered {_cmd_name(cmd)} without kiln's identity "
                              f"block (got {data[:16]!r}): other firmware?")
        r = Reply(cmd, b"\x00" + data)
        r.at += 4
        version, flags, max_payload, tick_hz, arena, n_in, n_out, n_layers, n_var, token = \
            r.fields("BBHIIBBHHI", "identity block")
        if version != PROTOCOL_VERSION:
            raise DeviceError(f"the device speaks kiln RPC protocol {version}, this kiln speaks "
                              f"{PROTOCOL_VERSION}: rebuild and flash the firmware")
        r.check(max_payload >= MIN_DEVICE_PAYLOAD,
                f"max payload {max_payload}, less than the protocol's {MIN_DEVICE_PAYLOAD}")
        r.check(tick_hz > 0, "a tick rate of 0 Hz")
        r.check(n_var == 0 or flags & 0x01, f"{n_var} tuning variants without a tuning table")
        strings = [r.string(what, RPC_MAX_STRING)
                   for what in ("board name", "build id", "model name", "model hash")]
        r.end()
        return cls(version, flags, max_payload, tick_hz, arena, n_in, n_out, n_layers, n_var,
                   token, *strings)


@dataclass(frozen=True)
class TensorInfo:
    bytes: int
    offset: int
    writable: bool


@dataclass(frozen=True)
class Timing:
    """Result of TIME / TUNE_RUN: ticks of `repeat` timed runs after the warm-up."""

    repeat: int
    total_ticks: int
    min_ticks: int
    max_ticks: int
    tick_hz: int
    timer_overhead: int

    @property
    def mean_ticks(self) -> float:
        return self.total_ticks / self.repeat if self.repeat else 0.0

    @property
    def mean_seconds(self) -> float:
        return self.mean_ticks / self.tick_hz if self.tick_hz else 0.0


@dataclass(frozen=True)
class RunReply:
    ticks: int
    output_crc: int


@dataclass(frozen=True)
class ProfileChunk:
    num_layers: int
    first: int
    ticks: list[int]
    total_ticks: int


@dataclass(frozen=True)
class VariantInfo:
    variant: int
    num_variants: int
    name: str
    buffers: list[TensorInfo]
    outputs: list[bool]


@dataclass
class LinkStats:
    """What the client saw on the line (benchmarks and fault tests print these)."""

    requests: int = 0
    retransmissions: int = 0
    damage_retransmissions: int = 0  # after a NAK or a damaged frame (not mere silence)
    naks: int = 0
    bad_frames: int = 0
    stale_frames: int = 0
    bytes_sent: int = 0


class NoisyLinkError(TransportError):
    """Retries ran out while frames kept arriving damaged: shorter frames may get through."""


class RpcStatusError(DeviceError):
    """The device answered a request with a non-OK status."""

    def __init__(self, cmd: int, status: int, detail: str = "", payload: bytes = b"") -> None:
        self.cmd = cmd
        self.status = status
        self.payload = payload
        try:
            text = STATUS_TEXT[Status(status)]
            name = Status(status).name
        except ValueError:
            text, name = "unknown status", str(status)
        what = _cmd_name(cmd)
        super().__init__(f"device refused {what}: {name} ({text})" + (f": {detail}" if detail else ""))


def _cmd_name(cmd: int) -> str:
    try:
        return Cmd(cmd).name
    except ValueError:
        return f"command 0x{cmd:02x}"


@dataclass
class _Pending:
    cmd: int
    seq: int
    frame: bytes
    long: bool
    wire: float
    accepted: bool = False
    noisy: bool = False  # damaged frames or NAKs seen (not mere silence)
    reacted: bool = False  # a damaged frame/NAK already triggered a resend of this copy
    retries: int = 0
    backoff: float = 0.0
    last_send: float = 0.0
    deadlines: dict[str, float] = field(default_factory=dict)


class RpcClient:
    """Speaks kiln RPC over a Transport. Use connect() first; then the command methods."""

    def __init__(self, transport: Transport, options: RpcOptions | None = None) -> None:
        self.transport = transport
        self.options = options or RpcOptions()
        self.stats = LinkStats()
        self.device: DeviceInfo | None = None
        self._decoder = FrameDecoder()
        self._events: deque[Frame | BadFrame] = deque()
        self._unread = b""             # bytes read from the transport, not yet decoded
        self._unread_at = 0
        self._seq = random.randrange(0x10000)
        self._in_session = False
        self._any_valid_frame = False
        self._latency = 0.0
        self._sec_per_byte = 1.0 / self._rate()

    # ---- plumbing ---------------------------------------------------------------------

    @property
    def max_payload(self) -> int:
        device_max = self.device.max_payload if self.device else 256
        return min(self.options.max_payload, device_max)

    def _rate(self) -> float:
        return self.transport.bytes_per_second or self.options.link_bytes_per_second

    def _expected_time(self, nbytes: int) -> float:
        """How long an exchange of nbytes should take on this link, from what it has done
        so far (a QEMU UART slows down a lot on a busy machine): latency + bytes x cost,
        both learnt from clean exchanges, doubled for margin."""
        return 2.0 * (self._latency + nbytes * self._sec_per_byte)

    def _learn(self, nbytes: int, elapsed: float) -> None:
        """Update the link model from an exchange that needed no retransmission (Karn)."""
        def ewma(old: float, sample: float) -> float:
            return 0.5 * old + 0.5 * sample if sample > old else 0.875 * old + 0.125 * sample

        if nbytes < 128:
            self._latency = ewma(self._latency, elapsed)
        elif nbytes >= 256:
            self._sec_per_byte = ewma(self._sec_per_byte, max(0.0, elapsed - self._latency) / nbytes)

    def _next_seq(self) -> int:
        self._seq = (self._seq + 1) & 0xFFFF
        return self._seq

    def _send(self, p: _Pending) -> None:
        # One extra delimiter (an empty frame, ignored): if noise eats the frame's own
        # closing 00, the device still sees the end of the frame without waiting for
        # our next one.
        self.transport.write(p.frame + b"\x00")
        p.reacted = False
        self.stats.bytes_sent += len(p.frame)
        p.last_send = time.monotonic()

    def _next_event(self, deadline: float) -> Frame | BadFrame | None:
        """The next frame, or None once `deadline` has passed. The deadline is checked
        before every frame and every _FEED_BYTES decoded, so a device that floods the line
        with ACKs or stale frames faster than they are decoded cannot hold a request open
        past its timeouts (what is still queued is seen on the next call)."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if self._events:
                return self._events.popleft()
            if self._unread_at >= len(self._unread):
                self._unread, self._unread_at = self._read(min(remaining, 0.5)), 0
            chunk = self._unread[self._unread_at: self._unread_at + _FEED_BYTES]
            self._unread_at += len(chunk)
            if chunk:
                self._events.extend(self._decoder.feed(chunk))

    def _read(self, timeout: float) -> bytes:
        """transport.read, naming a device that printed something else and hung up."""
        try:
            return self.transport.read(timeout)
        except TransportError as exc:
            noise = self._decoder.unframed(48)
            if self._any_valid_frame or not noise:
                raise
            raise DeviceError(
                f"no kiln RPC server on {self.transport.name}: it sent {noise!r}… and closed "
                f"the line ({exc}); a standalone build or other firmware?") from exc

    def drain(self, quiet: float = 0.05, limit: float = 1.0) -> None:
        """Discard what arrives until the line has been quiet for `quiet` s (at most `limit` s)."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            data = self._read(quiet)
            if not data:
                break
            self._decoder.feed(data)
        self._events.clear()
        self._unread, self._unread_at = b"", 0

    def _retransmit(self, p: _Pending, why: str, give_up_at: float | None) -> None:
        p.retries += 1
        self.stats.retransmissions += 1
        if why != "silence":
            self.stats.damage_retransmissions += 1
        now = time.monotonic()
        out_of_time = give_up_at is not None and now >= give_up_at
        if (give_up_at is None and p.retries > self.options.max_retries) or out_of_time:
            raise self._silence_error(p, why)
        self._send(p)
        p.deadlines["answer"] = p.last_send + p.backoff + p.wire
        p.backoff = min(p.backoff * 2, self.options.max_backoff)

    def _wait_longer(self, p: _Pending, give_up_at: float | None) -> None:
        """Silence on a lossless link: count it like a retransmission, send nothing."""
        p.retries += 1
        now = time.monotonic()
        if (give_up_at is None and p.retries > self.options.max_retries) or \
                (give_up_at is not None and now >= give_up_at):
            raise self._silence_error(p, "silence")
        p.deadlines["answer"] = now + p.backoff + p.wire
        p.backoff = min(p.backoff * 2, self.options.max_backoff)

    def _silence_error(self, p: _Pending, why: str) -> KilnError:
        failure = self.transport.failure()
        if failure:
            return TransportError(f"{failure} (during {_cmd_name(p.cmd)})")
        noise = self._decoder.unframed(48)
        if not self._any_valid_frame and noise:
            return DeviceError(
                f"no kiln RPC server on {self.transport.name}: it sent bytes that are not kiln "
                f"frames ({noise!r}…); other firmware, a wrong baud rate, or a standalone build?")
        if not p.noisy:
            return TransportError(
                f"no answer to {_cmd_name(p.cmd)} from {self.transport.name} after {p.retries} "
                f"retransmissions: the device hangs, was reset into other code, or is unplugged")
        return NoisyLinkError(
            f"{_cmd_name(p.cmd)} to {self.transport.name} failed {p.retries} times on {why}: "
            f"the line is too noisy for frames this long")

    def call(self, cmd: Cmd, payload: bytes = b"", *, response_bytes: int = 64,
             timeout: float | None = None, give_up_at: float | None = None,
             check: bool = True) -> Frame:
        """Send one request, retransmitting as needed; returns the response frame.

        Raises RpcStatusError for a non-OK status when `check`, DeviceError on a reset
        or foreign firmware, TransportError when the device stays silent or hangs.
        """
        opts = self.options
        long = cmd in LONG_COMMANDS
        frame = encode_frame(cmd, self._next_seq(), payload)
        p = _Pending(cmd, self._seq, frame, long,
                     wire=self._expected_time(len(frame) + response_bytes + 16),
                     backoff=opts.retry_timeout)
        self.stats.requests += 1
        self._send(p)
        p.deadlines["answer"] = p.last_send + p.backoff + p.wire
        p.backoff = min(p.backoff * 2, opts.max_backoff)
        compute_limit = timeout if timeout is not None else opts.command_timeout
        p.deadlines["compute"] = p.last_send + compute_limit + p.wire
        while True:
            deadline = p.deadlines["answer"]
            if p.accepted:
                deadline = min(deadline, p.deadlines["compute"])
            event = self._next_event(deadline)
            now = time.monotonic()
            if event is None:
                if p.accepted and now >= p.deadlines["compute"]:
                    raise TransportError(
                        f"{self.transport.name}: the device accepted {_cmd_name(cmd)} but gave no "
                        f"answer within {compute_limit:.1f} s: it hangs (or needs a longer timeout)")
                if long and now < p.deadlines["compute"]:
                    # Busy computing (ACK seen or lost), or the answer was lost: ask again
                    # now and then; a busy device answers the copies from its kept
                    # response when done. Bounded by the compute deadline, not by count.
                    p.retries -= 1
                if self.transport.lossless:
                    self._wait_longer(p, give_up_at)  # slow, not lost: a copy would only queue
                else:
                    self._retransmit(p, "silence", give_up_at)
                continue
            if isinstance(event, BadFrame):
                self.stats.bad_frames += 1
                p.noisy = True
                if not p.reacted:  # one resend per copy sent: older noise may NAK too
                    self._retransmit(p, "damaged frames", give_up_at)
                continue
            self._any_valid_frame = True
            if event.cmd == DeviceFrame.NAK:
                self.stats.naks += 1
                p.noisy = True
                if not p.reacted:
                    self._retransmit(p, "NAKs", give_up_at)
                continue
            if event.cmd == DeviceFrame.BOOT:
                if self._in_session:
                    self._in_session = False
                    raise DeviceError(f"the device on {self.transport.name} reset (it sent a BOOT "
                                      f"frame) while {_cmd_name(cmd)} was pending")
                continue
            if event.seq != p.seq:
                self.stats.stale_frames += 1
                continue
            if event.cmd == DeviceFrame.ACK:
                if long and not p.accepted:
                    p.accepted = True
                    p.deadlines["compute"] = now + compute_limit
                continue
            if event.cmd != (cmd | RESPONSE_BIT) or not event.payload:
                self.stats.stale_frames += 1
                continue
            if p.retries == 0 and not long:
                self._learn(len(frame) + len(event.payload) + 9, now - p.last_send)
            if check and event.status != Status.OK:
                self._raise_status(cmd, event)
            return event

    def _raise_status(self, cmd: int, frame: Frame) -> None:
        if frame.status == Status.NO_SESSION:
            self._in_session = False
            raise DeviceError(f"the device on {self.transport.name} was reset: it has no session "
                              f"(answering {_cmd_name(cmd)})")
        detail = ""
        if frame.status == Status.MODEL and len(frame.payload) >= 5:
            detail = f"return code {struct.unpack_from('<i', frame.payload, 1)[0]}"
        raise RpcStatusError(cmd, frame.status, detail, frame.payload)

    # ---- session ----------------------------------------------------------------------

    def connect(self, timeout: float | None = None) -> DeviceInfo:
        """Resynchronise the line and open a session (HELLO); returns the device's identity."""
        limit = self.options.connect_timeout if timeout is None else timeout
        give_up_at = time.monotonic() + limit
        self._in_session = False
        self.transport.write(b"\x00")  # end whatever partial frame the device holds
        self.drain(limit=min(0.5, limit / 4))
        token = random.randrange(1, 1 << 32)
        reply = self.call(Cmd.HELLO, struct.pack("<IH", token, self.options.max_payload),
                          response_bytes=240, give_up_at=give_up_at)
        info = DeviceInfo.parse(reply.payload[1:], Cmd.HELLO)
        if info.session_token != token:
            raise DeviceError("the device answered HELLO with another session's token")
        self.device = info
        self._in_session = True
        return info

    def info(self) -> DeviceInfo:
        return DeviceInfo.parse(self.call(Cmd.INFO, response_bytes=240).payload[1:], Cmd.INFO)

    def echo(self, data: bytes) -> bytes:
        """The device's copy of `data`; DeviceError if it came back different."""
        r = self.call(Cmd.ECHO, data, response_bytes=len(data) + 1).payload[1:]
        if r != bytes(data):
            raise malformed(Cmd.ECHO, f"{len(r)} bytes back for {len(data)} sent"
                            if len(r) != len(data) else "the bytes came back different")
        return r

    def _arena(self) -> int | None:
        return self.device.arena_bytes if self.device else None

    def _buffer(self, r: Reply, size: int, offset: int, what: str) -> None:
        """A buffer the device describes must lie inside the arena it declared."""
        arena = self._arena()
        r.check(arena is None or size + offset <= arena,
                f"{what} of {size:,} bytes at offset {offset:,} lies outside the "
                f"{arena:,}-byte arena")

    def tensor(self, space: int, index: int, variant: int = 0) -> TensorInfo:
        request = struct.pack("<BBH", _check_arg(space, 8, "space"), _check_arg(index, 8, "index"),
                              _check_arg(variant, 16, "variant"))
        r = Reply(Cmd.TENSOR, self.call(Cmd.TENSOR, request).payload)
        size, offset, writable = r.fields("IIB", "size, offset and flag")
        r.end()
        r.check(writable in (0, 1), f"writable flag {writable} (0 or 1)")
        self._buffer(r, size, offset, f"tensor {index} of space {space}")
        return TensorInfo(size, offset, bool(writable))

    def write(self, space: int, index: int, offset: int, data: bytes, variant: int = 0) -> None:
        request = struct.pack("<BBHI", _check_arg(space, 8, "space"), _check_arg(index, 8, "index"),
                              _check_arg(variant, 16, "variant"), _check_arg(offset, 32, "offset"))
        Reply(Cmd.WRITE, self.call(Cmd.WRITE, request + data).payload).end()

    def read(self, space: int, index: int, offset: int, length: int, variant: int = 0) -> bytes:
        request = struct.pack("<BBHIH", _check_arg(space, 8, "space"), _check_arg(index, 8, "index"),
                              _check_arg(variant, 16, "variant"), _check_arg(offset, 32, "offset"),
                              _check_arg(length, 16, "length"))
        r = self.call(Cmd.READ, request, response_bytes=length + 1).payload[1:]
        if len(r) != length:
            raise malformed(Cmd.READ, f"{len(r)} bytes, asked for {length}")
        return r

    def run(self, input_crc: int | None, timeout: float | None = None) -> RunReply:
        flags = 0 if input_crc is None else 0x01
        crc = _check_arg(input_crc or 0, 32, "input CRC-32")
        r = Reply(Cmd.RUN, self.call(Cmd.RUN, struct.pack("<B3xI", flags, crc),
                                     timeout=timeout).payload)
        rc, ticks, out_crc = r.fields("iQI", "return code, ticks and output CRC-32")
        r.end()
        r.check(rc == 0, f"status OK with return code {rc}")
        r.check(ticks < WRAPPED_TICKS, f"{ticks:,} ticks: the device's timer wrapped")
        return RunReply(ticks, out_crc)

    def _timing(self, r: Reply, repeat: int) -> Timing:
        """The timing block of TIME / TUNE_RUN for `repeat` runs asked, checked whole:
        each run lies in [min, max], so the total does too, times the runs."""
        rc, done, total, lo, hi, hz, overhead = r.fields("iIQQQII", "timing block")
        r.end()
        r.check(rc == 0, f"status OK with return code {rc}")
        r.check(done == repeat, f"{done:,} runs timed, {repeat:,} asked")
        r.check(hi < WRAPPED_TICKS, f"a run of {hi:,} ticks: the device's timer wrapped")
        r.check(lo <= hi, f"fastest run {lo:,} ticks, slowest {hi:,}")
        r.check(lo * done <= total <= hi * done,
                f"{total:,} ticks in total for {done:,} runs of {lo:,} to {hi:,} ticks")
        r.check(hz > 0, "a tick rate of 0 Hz")
        r.check(self.device is None or hz == self.device.tick_hz,
                f"tick rate {hz:,} Hz, the handshake said {self._tick_hz():,}")
        return Timing(done, total, lo, hi, hz, overhead)

    def _tick_hz(self) -> int:
        return self.device.tick_hz if self.device else 0

    def time(self, repeat: int, warmup: int = 1, timeout: float | None = None) -> Timing:
        request = struct.pack("<H2xI", _check_arg(warmup, 16, "warmup"),
                              _check_arg(repeat, 32, "repeat", lo=1))
        r = Reply(Cmd.TIME, self.call(Cmd.TIME, request, timeout=timeout).payload)
        return self._timing(r, repeat)

    def profile(self, first: int, count: int, warmup: int = 0,
                timeout: float | None = None) -> ProfileChunk:
        request = struct.pack("<HHH", _check_arg(first, 16, "first layer"),
                              _check_arg(count, 16, "layer count"), _check_arg(warmup, 16, "warmup"))
        r = Reply(Cmd.PROFILE, self.call(Cmd.PROFILE, request, response_bytes=24 + 4 * count,
                                         timeout=timeout).payload)
        rc, num_layers, got_first, n, total = r.fields("iHHHQ", "header")
        ticks = list(r.fields(f"{n}I", f"{n} layer tick counts"))
        r.end()
        r.check(rc == 0, f"status OK with return code {rc}")
        r.check(self.device is None or num_layers == self.device.num_layers,
                f"{num_layers} layers, the handshake said "
                f"{self.device.num_layers if self.device else 0}")
        r.check(got_first == first, f"layers from {got_first}, asked from {first}")
        r.check(n <= count and first + n <= num_layers,
                f"{n} layers from {first}, asked {count} of {num_layers}")
        r.check(n > 0 or count == 0, f"no layers from {first} of {num_layers}")
        r.check(total < WRAPPED_TICKS, f"{total:,} ticks in total: the device's timer wrapped")
        for k, t in enumerate(ticks):
            r.check(t != SATURATED_U32, f"layer {first + k} took 2^32-1 ticks or more: its "
                                        f"count saturated and its time is lost")
        r.check(sum(ticks) <= total, f"the layers' ticks add up to {sum(ticks):,}, more than "
                                     f"the total {total:,}")
        return ProfileChunk(num_layers, got_first, ticks, total)

    def step(self, first: int, count: int = 1, timeout: float | None = None) -> int:
        """STEP: run layers [first, first + count) on what the arena holds; their ticks."""
        request = struct.pack("<HH", _check_arg(first, 16, "first layer"),
                              _check_arg(count, 16, "layer count", lo=1))
        r = Reply(Cmd.STEP, self.call(Cmd.STEP, request, timeout=timeout).payload)
        rc, ticks = r.fields("iQ", "return code and ticks")
        r.end()
        r.check(rc == 0, f"status OK with return code {rc}")
        r.check(ticks < WRAPPED_TICKS, f"{ticks:,} ticks: the device's timer wrapped")
        return ticks

    def layer_name(self, index: int) -> str:
        r = Reply(Cmd.LAYER, self.call(Cmd.LAYER, struct.pack("<H", _check_arg(index, 16, "layer")),
                                       response_bytes=260).payload)
        name = r.string(f"layer {index} name", 255)
        r.end()
        return name

    def tune_info(self, variant: int) -> VariantInfo:
        request = struct.pack("<H", _check_arg(variant, 16, "variant"))
        r = Reply(Cmd.TUNE_INFO, self.call(Cmd.TUNE_INFO, request, response_bytes=140).payload)
        num_variants, nb = r.fields("HB", "variant count and buffer count")
        r.check(variant < num_variants, f"variant {variant} of {num_variants}")
        r.check(nb <= MAX_TUNE_BUFFERS, f"{nb} buffers, more than {MAX_TUNE_BUFFERS}")
        buffers, outputs = [], []
        for i in range(nb):
            flags, size, offset = r.fields("BII", f"buffer {i}")
            r.check(flags in (0, 1), f"buffer {i} flags 0x{flags:02x}")
            self._buffer(r, size, offset, f"buffer {i}")
            buffers.append(TensorInfo(size, offset, not flags & 0x01))
            outputs.append(bool(flags & 0x01))
        name = r.string("variant name", RPC_MAX_STRING)
        r.end()
        return VariantInfo(variant, num_variants, name, buffers, outputs)

    def tune_run(self, variant: int, repeat: int = 1, warmup: int = 0,
                 timeout: float | None = None) -> Timing:
        request = struct.pack("<HHI", _check_arg(variant, 16, "variant"),
                              _check_arg(warmup, 16, "warmup"), _check_arg(repeat, 32, "repeat", lo=1))
        r = Reply(Cmd.TUNE_RUN, self.call(Cmd.TUNE_RUN, request, timeout=timeout).payload)
        return self._timing(r, repeat)

    def reset(self, exit_server: bool = False) -> None:
        """RESET: mode 0 ends the session, zeroes the arena and resets the model state;
        mode 1 leaves kiln_rpc_serve()."""
        Reply(Cmd.RESET, self.call(Cmd.RESET, bytes((1 if exit_server else 0,))).payload).end()

    def reset_state(self) -> None:
        """RESET mode 2: the model state back to its initial value (kiln_reset); the
        session goes on."""
        Reply(Cmd.RESET, self.call(Cmd.RESET, bytes((2,))).payload).end()
        self._in_session = False

