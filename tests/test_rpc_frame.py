"""The RPC framing on the Python side, pinned to the same golden frames as the C tests
(tests/rpc_c/test_rpc_frame.c) and crt/rpc/README.md."""

from __future__ import annotations

import random

import pytest

from kiln.project_gen.rpc_frame import (
    BadFrame, Frame, FrameDecoder, FrameFault, cobs_decode, cobs_encode, crc16, crc32,
    encode_body, encode_frame, parse_body,
)


def crc16_recipe(data: bytes) -> int:
    """CRC-16/CCITT-FALSE exactly as README.md writes it: poly 0x1021, init 0xFFFF,
    MSB first, no reflection, no final xor."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


# (name, cmd, seq, payload, crc16 of the body without its CRC, the wire bytes)
GOLDEN = [
    ("HELLO", 0x01, 0x0001, bytes.fromhex("78563412 0004"), 0xF83E,
     "00 03 01 01 02 06 05 78 56 34 12 04 04 f8 3e 00"),
    ("ECHO", 0x03, 0x1234, b"hi\x00", 0x9D6E, "00 05 03 34 12 03 03 68 69 03 9d 6e 00"),
    ("WRITE response", 0x85, 0x0102, b"\x00", 0x9C36, "00 05 85 02 01 01 01 03 9c 36 00"),
    ("NAK", 0xFF, 0xFFFF, b"\x01", 0x6CB2, "00 05 ff ff ff 01 04 01 6c b2 00"),
    ("ACK", 0xFE, 0x0007, b"\x07", 0x3F0C, "00 03 fe 07 02 01 04 07 3f 0c 00"),
    ("READ", 0x06, 0x0010, bytes.fromhex("00 00 0000 00010000 4000"), 0xE480,
     "00 03 06 10 02 0a 01 01 01 01 01 02 01 01 02 40 03 e4 80 00"),
    ("RESET", 0x0D, 0x00FF, b"\x01", 0x3DED, "00 03 0d ff 02 01 04 01 3d ed 00"),
    ("STEP", 0x0E, 0x0020, bytes.fromhex("0300 0100"), 0xBE21,
     "00 03 0e 20 02 04 02 03 02 01 03 be 21 00"),
    ("READ arena", 0x06, 0x0021, bytes.fromhex("03 00 0000 00060000 4000"), 0x12C2,
     "00 03 06 21 02 0a 02 03 01 01 01 02 06 01 02 40 03 12 c2 00"),
]


def test_crc_check_values():
    assert crc16(b"123456789") == 0x29B1 == crc16_recipe(b"123456789")
    assert crc32(b"123456789") == 0xCBF43926
    rng = random.Random(1)
    for n in (0, 1, 7, 100, 1000):
        data = bytes(rng.randrange(256) for _ in range(n))
        assert crc16(data) == crc16_recipe(data)


@pytest.mark.parametrize("name,cmd,seq,payload,crc,wire", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_frames(name, cmd, seq, payload, crc, wire):
    body = encode_body(cmd, seq, payload)
    assert crc16_recipe(body[:-2]) == crc
    assert body[-2:] == crc.to_bytes(2, "big")
    assert crc16(body) == 0  # the residue property the receivers rely on
    assert encode_frame(cmd, seq, payload) == bytes.fromhex(wire)
    assert FrameDecoder().feed(bytes.fromhex(wire)) == [Frame(cmd, seq, payload)]


def test_long_golden_frame():
    payload = bytes(range(1, 255)) + b"\x00ab"
    body = encode_body(0x03, 0xABCD, payload)
    assert crc16_recipe(body[:-2]) == 0x87A6
    wire = encode_frame(0x03, 0xABCD, payload)
    assert len(wire) == 268
    assert wire[:4] == bytes.fromhex("00 ff 03 cd")  # a full 254-byte COBS block
    assert wire[-8:] == bytes.fromhex("fd fe 05 61 62 87 a6 00")
    assert FrameDecoder().feed(wire) == [Frame(0x03, 0xABCD, payload)]


def test_cobs_round_trip_edges():
    rng = random.Random(2)
    for n in list(range(0, 600)) + [1000, 5000]:
        for data in (bytes(n), b"\x01" * n, bytes(rng.randrange(256) for _ in range(n))):
            enc = cobs_encode(data)
            assert 0 not in enc
            assert len(enc) <= n + n // 254 + 1
            assert cobs_decode(enc) == data


def test_damaged_frames_are_classified_like_the_c_side():
    dec = FrameDecoder()
    assert dec.feed(b"\x00\x00\x00") == []
    assert dec.feed(bytes.fromhex("00 03 01 02 00")) == [BadFrame(FrameFault.LENGTH, bytes.fromhex("03 01 02"))]
    assert dec.feed(bytes.fromhex("00 09 01 02 00"))[0].fault == FrameFault.COBS
    wire = bytearray(encode_frame(0x03, 0x1234, b"hi\x00"))
    wire[8] ^= 1
    assert dec.feed(bytes(wire))[0].fault == FrameFault.CRC
    body = bytearray(encode_body(0x03, 1, b"xyz"))
    body[3] = 4  # the length field lies; a fixed-up CRC leaves only the length check
    body[-2:] = crc16(bytes(body[:-2])).to_bytes(2, "big")
    assert parse_body(bytes(body)) == FrameFault.LENGTH


def test_decoder_resynchronises_after_garbage():
    rng = random.Random(3)
    frames = [Frame(0x83, i, bytes(rng.randrange(256) for _ in range(rng.randrange(50)))) for i in range(200)]
    stream = bytearray()
    for f in frames:
        stream += bytes(rng.randrange(256) for _ in range(rng.randrange(20)))  # noise, zeros included
        stream += encode_frame(f.cmd, f.seq, f.payload)
    got: list[Frame] = []
    dec = FrameDecoder()
    pos = 0
    while pos < len(stream):  # fed in random pieces
        step = rng.randrange(1, 64)
        got += [e for e in dec.feed(bytes(stream[pos:pos + step])) if isinstance(e, Frame)]
        pos += step
    # noise can only add frames if it forms a valid CRC'd frame: it never did here
    assert got == frames


def test_decoder_is_bounded():
    dec = FrameDecoder(max_body=100)
    events = dec.feed(b"\x55" * 10_000)
    assert events == []
    events = dec.feed(b"\x00" + encode_frame(0x81, 1, b"\x00ok"))
    assert events[0] == BadFrame(FrameFault.OVERFLOW, b"")
    assert events[-1] == Frame(0x81, 1, b"\x00ok")
    assert len(dec.noise) <= 256
