"""Framing of kiln's RPC wire protocol: the Python twin of crt/rpc/kiln_rpc_frame.c.

A frame on the wire is ``00 COBS(body) 00``; the body is::

    cmd u8 | seq u16le | len u16le | payload[len] | crc16 (big-endian)

with CRC-16/CCITT-FALSE over cmd..payload. crt/rpc/README.md has the byte-by-byte
description and worked examples that tests pin on both sides.
"""

from __future__ import annotations

import binascii
import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum

PROTOCOL_VERSION = 1
MAGIC = b"KILN"
HEADER_BYTES = 5
CRC_BYTES = 2
RESPONSE_BIT = 0x80


class Cmd(IntEnum):
    """Request codes (crt/rpc/kiln_rpc_wire.h kiln_rpc_cmd_t)."""

    HELLO = 0x01
    INFO = 0x02
    ECHO = 0x03
    TENSOR = 0x04
    WRITE = 0x05
    READ = 0x06
    RUN = 0x07
    TIME = 0x08
    PROFILE = 0x09
    LAYER = 0x0A
    TUNE_INFO = 0x0B
    TUNE_RUN = 0x0C
    RESET = 0x0D
    STEP = 0x0E


class DeviceFrame(IntEnum):
    """Frames only the device sends."""

    BOOT = 0xFD
    ACK = 0xFE
    NAK = 0xFF


class Status(IntEnum):
    """First byte of every response payload (kiln_rpc_status_t)."""

    OK = 0
    UNKNOWN_CMD = 1
    LENGTH = 2
    RANGE = 3
    ARG = 4
    NO_SESSION = 5
    UNSUPPORTED = 6
    MODEL = 7
    INPUT_CRC = 8


STATUS_TEXT = {
    Status.OK: "ok",
    Status.UNKNOWN_CMD: "unknown command",
    Status.LENGTH: "request payload has the wrong length",
    Status.RANGE: "offset or length outside the buffer",
    Status.ARG: "bad buffer, index, variant, mode or repeat",
    Status.NO_SESSION: "no session: the device was reset",
    Status.UNSUPPORTED: "not supported by this firmware",
    Status.MODEL: "the model (or kernel) returned an error",
    Status.INPUT_CRC: "inputs on the device differ from what was sent",
}


class FrameFault(IntEnum):
    """Why a received frame was dropped (negated kiln_rpc_frame_status_t; NAK payload)."""

    CRC = 1
    LENGTH = 2
    OVERFLOW = 3
    COBS = 4


def crc16(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, no xorout.

    binascii.crc_hqx is this CRC (XMODEM's) with a caller-chosen initial value.
    """
    return binascii.crc_hqx(data, crc)


def crc32(data: bytes, crc: int = 0) -> int:
    """CRC-32 as zlib computes it (the device's kiln_rpc_crc32)."""
    return zlib.crc32(data, crc) & 0xFFFFFFFF


def cobs_encode(data: bytes) -> bytes:
    """COBS without the delimiter: no 0x00 in the result."""
    out = bytearray()
    start = 0
    n = len(data)
    while True:
        end = start
        while end < n and data[end] != 0 and end - start < 254:
            end += 1
        out.append(end - start + 1)
        out += data[start:end]
        if end >= n:
            return bytes(out)
        start = end if end - start == 254 else end + 1


def cobs_decode(data: bytes) -> bytes:
    """Inverse of cobs_encode; ValueError when a block runs past the end or holds a 0x00."""
    out = bytearray()
    i = 0
    n = len(data)
    while i < n:
        code = data[i]
        if code == 0:
            raise ValueError("0x00 inside a COBS frame")
        block = data[i + 1 : i + code]
        if len(block) != code - 1:
            raise ValueError("COBS block runs past the end of the frame")
        if 0 in block:
            raise ValueError("0x00 inside a COBS frame")
        out += block
        i += code
        if code != 0xFF and i < n:
            out.append(0)
    return bytes(out)


def encode_body(cmd: int, seq: int, payload: bytes) -> bytes:
    """Header, payload and CRC (before COBS)."""
    head = struct.pack("<BHH", cmd, seq & 0xFFFF, len(payload)) + payload
    return head + struct.pack(">H", crc16(head))


def encode_frame(cmd: int, seq: int, payload: bytes = b"") -> bytes:
    """The bytes to put on the line: 00 COBS(body) 00."""
    return b"\x00" + cobs_encode(encode_body(cmd, seq, payload)) + b"\x00"


@dataclass(frozen=True)
class Frame:
    """One valid frame."""

    cmd: int
    seq: int
    payload: bytes

    @property
    def status(self) -> int:
        """Status byte of a response (Status)."""
        return self.payload[0] if self.payload else -1


@dataclass(frozen=True)
class BadFrame:
    """Bytes between two delimiters that were not a valid frame."""

    fault: FrameFault
    raw: bytes


def parse_body(body: bytes) -> Frame | FrameFault:
    """Validate a decoded body; the same checks, in the same order, as the C side."""
    if len(body) < HEADER_BYTES + CRC_BYTES:
        return FrameFault.LENGTH
    if crc16(body) != 0:
        return FrameFault.CRC
    cmd, seq, length = struct.unpack_from("<BHH", body)
    if length + HEADER_BYTES + CRC_BYTES != len(body):
        return FrameFault.LENGTH
    return Frame(cmd, seq, body[HEADER_BYTES : HEADER_BYTES + length])


class FrameDecoder:
    """Splits a byte stream into Frames and BadFrames; bounded like the device.

    A run of more than ``max_body`` encoded bytes without a delimiter is reported
    once as an OVERFLOW BadFrame and dropped (its first bytes kept for messages).
    """

    def __init__(self, max_body: int = HEADER_BYTES + 65535 + CRC_BYTES) -> None:
        self.max_encoded = max_body + max_body // 254 + 2
        self._buf = bytearray()
        self._overflowed = False
        self.noise = bytearray()  # the start of what was not a frame, for error messages

    def feed(self, data: bytes) -> list[Frame | BadFrame]:
        events: list[Frame | BadFrame] = []
        start = 0
        while True:
            zero = data.find(0, start)
            chunk = data[start:] if zero < 0 else data[start:zero]
            if not self._overflowed:
                self._buf += chunk
                if len(self._buf) > self.max_encoded:
                    self._note_noise(bytes(self._buf))
                    self._buf.clear()
                    self._overflowed = True
            if zero < 0:
                return events
            events += self._end_frame()
            start = zero + 1

    def _end_frame(self) -> list[Frame | BadFrame]:
        raw = bytes(self._buf)
        self._buf.clear()
        if self._overflowed:
            self._overflowed = False
            return [BadFrame(FrameFault.OVERFLOW, b"")]
        if not raw:
            return []
        try:
            body = cobs_decode(raw)
        except ValueError:
            self._note_noise(raw)
            return [BadFrame(FrameFault.COBS, raw)]
        parsed = parse_body(body)
        if isinstance(parsed, Frame):
            return [parsed]
        self._note_noise(raw)
        return [BadFrame(parsed, raw)]

    def unframed(self, limit: int = 64) -> bytes:
        """The first bytes seen that were not kiln frames, including an unterminated run."""
        return (bytes(self.noise) + bytes(self._buf[:limit]))[:limit]

    def _note_noise(self, raw: bytes) -> None:
        if len(self.noise) < 256:
            self.noise += raw[: 256 - len(self.noise)]
