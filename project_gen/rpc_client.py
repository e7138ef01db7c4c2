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

from kiln.compiler.errors import DeviceError, KilnError, TransportError

from .rpc_frame import (
    MAGIC, PROTOCOL_VERSION, RESPONSE_BIT, STATUS_TEXT, BadFrame, Cmd,
    DeviceFrame, Frame, FrameDecoder, Status, encode_frame,
)
from .transport import Transport

LONG_COMMANDS = frozenset({Cmd.RUN, Cmd.TIME, Cmd.PROFILE, Cmd.TUNE_RUN})


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

    @classmethod
    def parse(cls, data: bytes) -> DeviceInfo:
        if len(data) < 26 or data[:4] != MAGIC:
            raise DeviceError(f"the device answered HELLO without kiln's identity block "
                              f"(got {data[:16]!r}): other firmware?")
        version, flags, max_payload, tick_hz, arena, n_in, n_out, n_layers, n_var, token = \
            struct.unpack_from("<BBHIIBBHHI", data, 4)
        if version != PROTOCOL_VERSION:
            raise DeviceError(f"the device speaks kiln RPC protocol {version}, this kiln speaks "
                              f"{PROTOCOL_VERSION}: rebuild and flash the firmware")
        strings = []
        at = 26
        for _ in range(4):
            if at >= len(data) or at + 1 + data[at] > len(data):
                raise DeviceError("truncated identity block from the device")
            strings.append(data[at + 1: at + 1 + data[at]].decode("utf-8", "replace"))
            at += 1 + data[at]
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
        while not self._events:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            data = self._read(min(remaining, 0.5))
            if data:
                self._events.extend(self._decoder.feed(data))
        return self._events.popleft()

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
        info = DeviceInfo.parse(reply.payload[1:])
        if info.session_token != token:
            raise DeviceError("the device answered HELLO with another session's token")
        self.device = info
        self._in_session = True
        return info

    def info(self) -> DeviceInfo:
        return DeviceInfo.parse(self.call(Cmd.INFO, response_bytes=240).payload[1:])

    def echo(self, data: bytes) -> bytes:
        return self.call(Cmd.ECHO, data, response_bytes=len(data) + 1).payload[1:]

    def tensor(self, space: int, index: int, variant: int = 0) -> TensorInfo:
        r = self.call(Cmd.TENSOR, struct.pack("<BBH", space, index, variant)).payload
        size, offset, writable = struct.unpack_from("<IIB", r, 1)
        return TensorInfo(size, offset, bool(writable))

    def write(self, space: int, index: int, offset: int, data: bytes, variant: int = 0) -> None:
        self.call(Cmd.WRITE, struct.pack("<BBHI", space, index, variant, offset) + data)

    def read(self, space: int, index: int, offset: int, length: int, variant: int = 0) -> bytes:
        r = self.call(Cmd.READ, struct.pack("<BBHIH", space, index, variant, offset, length),
                      response_bytes=length + 1).payload[1:]
        if len(r) != length:
            raise DeviceError(f"READ returned {len(r)} bytes, asked for {length}")
        return r

    def run(self, input_crc: int | None, timeout: float | None = None) -> RunReply:
        flags = 0 if input_crc is None else 0x01
        r = self.call(Cmd.RUN, struct.pack("<B3xI", flags, input_crc or 0), timeout=timeout).payload
        _rc, ticks, out_crc = struct.unpack_from("<iQI", r, 1)
        return RunReply(ticks, out_crc)

    @staticmethod
    def _timing(payload: bytes) -> Timing:
        _rc, done, total, lo, hi, hz, overhead = struct.unpack_from("<iIQQQII", payload, 1)
        return Timing(done, total, lo, hi, hz, overhead)

    def time(self, repeat: int, warmup: int = 1, timeout: float | None = None) -> Timing:
        if not 1 <= repeat <= 0xFFFFFFFF or not 0 <= warmup <= 0xFFFF:
            raise ValueError("repeat must be in [1, 2^32), warmup in [0, 65535]")
        return self._timing(self.call(Cmd.TIME, struct.pack("<H2xI", warmup, repeat),
                                      timeout=timeout).payload)

    def profile(self, first: int, count: int, warmup: int = 0,
                timeout: float | None = None) -> ProfileChunk:
        r = self.call(Cmd.PROFILE, struct.pack("<HHH", first, count, warmup),
                      response_bytes=24 + 4 * count, timeout=timeout).payload
        _rc, num_layers, got_first, n, total = struct.unpack_from("<iHHHQ", r, 1)
        ticks = list(struct.unpack_from(f"<{n}I", r, 19))
        return ProfileChunk(num_layers, got_first, ticks, total)

    def layer_name(self, index: int) -> str:
        r = self.call(Cmd.LAYER, struct.pack("<H", index), response_bytes=260).payload
        return r[2: 2 + r[1]].decode("utf-8", "replace")

    def tune_info(self, variant: int) -> VariantInfo:
        r = self.call(Cmd.TUNE_INFO, struct.pack("<H", variant), response_bytes=140).payload
        num_variants, nb = struct.unpack_from("<HB", r, 1)
        at = 4
        buffers, outputs = [], []
        for _ in range(nb):
            flags, size, offset = struct.unpack_from("<BII", r, at)
            buffers.append(TensorInfo(size, offset, not flags & 0x01))
            outputs.append(bool(flags & 0x01))
            at += 9
        name = r[at + 1: at + 1 + r[at]].decode("utf-8", "replace")
        return VariantInfo(variant, num_variants, name, buffers, outputs)

    def tune_run(self, variant: int, repeat: int = 1, warmup: int = 0,
                 timeout: float | None = None) -> Timing:
        return self._timing(self.call(Cmd.TUNE_RUN, struct.pack("<HHI", variant, warmup, repeat),
                                      timeout=timeout).payload)

    def reset(self, exit_server: bool = False) -> None:
        """RESET: mode 0 ends the session and zeroes the arena; mode 1 leaves kiln_rpc_serve()."""
        self.call(Cmd.RESET, bytes((1 if exit_server else 0,)))
        self._in_session = False

