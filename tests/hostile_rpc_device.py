"""A fake kiln RPC device that answers on real bytes, some of them hostile.

    python hostile_rpc_device.py CONFIG_JSON            # serial line on stdin/stdout
    python hostile_rpc_device.py CONFIG_JSON --tcp      # prints its port, serves one client

It speaks the wire protocol of crt/rpc/README.md (frames, ACKs of long commands, a
well-formed answer to every command by default), so the host under test is kiln's own
RpcClient and Session, unchanged, reading bytes from a pipe or a socket. CONFIG_JSON:

    {"identity": {"board": "host", "build_id": "b", ...},   # fields of the identity block
     "identity_hex": "...",      # or the whole identity block, verbatim
     "inputs": [bytes, ...], "outputs": [bytes, ...], "layers": ["CONV_2D", ...],
     "replies": {"TIME": "00ffff...", ...},                 # a payload (status first) per command
     "flood": "TIME"}            # answer that command with ACKs and stale frames, forever

A command named in "replies" always gets that payload, whatever was asked.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import zlib

from kiln.project_gen.rpc_frame import Cmd, DeviceFrame, Frame, FrameDecoder, encode_frame

LONG = {Cmd.RUN, Cmd.TIME, Cmd.PROFILE, Cmd.TUNE_RUN}
TICKS = 1000                      # every run and layer takes this long


def identity(config: dict, token: int) -> bytes:
    if "identity_hex" in config:
        return bytes.fromhex(config["identity_hex"])
    f = {"version": 1, "flags": 0, "max_payload": 1024, "tick_hz": 1_000_000_000,
         "arena": 1 << 16, "board": "host", "build_id": "fake-build", "model_name": "fake",
         "model_hash": "fake-hash", **config.get("identity", {})}
    block = b"KILN" + struct.pack("<BBHIIBBHHI", f["version"], f["flags"], f["max_payload"],
                                  f["tick_hz"], f["arena"], len(config["inputs"]),
                                  len(config["outputs"]), len(config["layers"]), 0, token)
    for key in ("board", "build_id", "model_name", "model_hash"):
        text = f[key].encode()
        block += bytes((len(text),)) + text
    return block


class Device:
    def __init__(self, config: dict) -> None:
        config.setdefault("inputs", [16])
        config.setdefault("outputs", [4])
        config.setdefault("layers", ["CONV_2D", "SOFTMAX"])
        self.config = config
        self.token = 0

    def answer(self, frame: Frame) -> bytes:
        cmd, p = frame.cmd, frame.payload
        out = b""
        if cmd in LONG:
            out += encode_frame(DeviceFrame.ACK, frame.seq, bytes((cmd,)))
        return out + encode_frame(cmd | 0x80, frame.seq, self.payload(cmd, p))

    def payload(self, cmd: int, p: bytes) -> bytes:
        c = self.config
        name = Cmd(cmd).name if cmd in Cmd._value2member_map_ else str(cmd)
        if name in c.get("replies", {}):
            return bytes.fromhex(c["replies"][name])
        ok = b"\x00"
        if cmd == Cmd.HELLO:
            self.token = struct.unpack_from("<I", p)[0]
            return ok + identity(c, self.token)
        if cmd == Cmd.INFO:
            return ok + identity(c, self.token)
        if cmd == Cmd.ECHO:
            return ok + p
        if cmd == Cmd.TENSOR:
            space, index = p[0], p[1]
            sizes = c["inputs"] if space == 0 else c["outputs"]
            offset = sum(c["inputs"]) * (space == 1) + sum(sizes[:index])
            return ok + struct.pack("<IIB", sizes[index], offset, int(space == 0))
        if cmd in (Cmd.WRITE, Cmd.RESET):
            return ok
        if cmd == Cmd.READ:
            return ok + bytes(struct.unpack_from("<H", p, 8)[0])
        if cmd == Cmd.RUN:
            return ok + struct.pack("<iQI", 0, TICKS, zlib.crc32(bytes(sum(c["outputs"]))))
        if cmd == Cmd.TIME:
            repeat = struct.unpack_from("<I", p, 4)[0]
            return ok + struct.pack("<iIQQQII", 0, repeat, TICKS * repeat, TICKS, TICKS,
                                    c.get("identity", {}).get("tick_hz", 1_000_000_000), 10)
        if cmd == Cmd.PROFILE:
            first, count, _ = struct.unpack("<HHH", p)
            n = min(count, len(c["layers"]) - first)
            return ok + struct.pack(f"<iHHHQ{n}I", 0, len(c["layers"]), first, n,
                                    TICKS * len(c["layers"]), *[TICKS] * n)
        if cmd == Cmd.LAYER:
            text = c["layers"][struct.unpack("<H", p)[0]].encode()
            return ok + bytes((len(text),)) + text
        return b"\x01"                                          # UNKNOWN_CMD


def flood(write, frame: Frame) -> None:
    """Frames that each look like progress (an ACK of the request, an answer to another
    seq), never the answer: until the host hangs up."""
    stale = encode_frame(frame.cmd | 0x80, (frame.seq + 1) & 0xFFFF, b"\x00")
    ack = encode_frame(DeviceFrame.ACK, frame.seq, bytes((frame.cmd,)))
    batch = (ack + stale) * 200          # faster than a host can read them one by one
    while True:
        try:
            write(batch)
        except (BrokenPipeError, ConnectionError, OSError):
            return


def serve(read, write, device: Device) -> None:
    decoder = FrameDecoder()
    flooded = device.config.get("flood")
    while True:
        data = read()
        if not data:
            return
        for event in decoder.feed(data):
            if isinstance(event, Frame) and event.cmd < 0x80:
                if flooded and event.cmd == Cmd[flooded]:
                    return flood(write, event)
                write(device.answer(event))


def main() -> None:
    device = Device(json.loads(sys.argv[1]))
    if "--tcp" in sys.argv:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        print(server.getsockname()[1], flush=True)
        conn, _ = server.accept()
        serve(lambda: conn.recv(4096), conn.sendall, device)
        return
    out = sys.stdout.buffer

    def write(data: bytes) -> None:
        out.write(data)
        out.flush()

    serve(lambda: os.read(0, 4096), write, device)


if __name__ == "__main__":
    main()
