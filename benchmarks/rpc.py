"""RPC figures: round-trip latency and upload/download throughput to QEMU and the host board.

    .venv/bin/python benchmarks/rpc.py [--echoes 200] [--repeat 3] [--json F]

Builds the RPC test fixture (tests/fixtures/rpc_model, with a 27,648-byte input: the VWW
input size) as host-driven projects through project_gen for `host` and `mps2-an386`,
then per link: connect time, echo round trip (16-byte payload; median), upload and
download of 27,648 bytes (chunked WRITE/READ at the negotiated payload; best and median
of --repeat) and a whole RUN round trip (upload, run, verified download). QEMU runs with
`-icount shift=6,sleep=off`, over its stdio pipe and over a TCP socket chardev.
Timings are wall-clock and depend on the machine's load; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np  # noqa: E402

from rpc_support import build_fixture_project, fixture_specs  # noqa: E402

from kiln.project_gen.session import Session  # noqa: E402
from kiln.project_gen.transport import QemuTransport, SubprocessTransport, Transport  # noqa: E402

VWW_INPUT = 96 * 96 * 3


def measure(transport: Transport, echoes: int, repeat: int) -> dict:
    ins, outs = fixture_specs(VWW_INPUT)
    t0 = time.monotonic()
    s = Session(transport, inputs=ins, outputs=outs)
    connect = time.monotonic() - t0
    try:
        rtts = []
        for _ in range(echoes):
            t = time.monotonic()
            s.echo(b"0123456789abcdef")
            rtts.append(time.monotonic() - t)
        ups, downs, runs = [], [], []
        rng = np.random.default_rng(0)
        for _ in range(repeat):
            data = os.urandom(VWW_INPUT)
            t = time.monotonic()
            s.write_input(0, data)
            ups.append(time.monotonic() - t)
            t = time.monotonic()
            back = s._download(0, 0, VWW_INPUT)
            downs.append(time.monotonic() - t)
            assert back == data, "download differs from upload"
            x0 = rng.integers(-128, 128, VWW_INPUT, dtype=np.int8)
            t = time.monotonic()
            s.run([x0, np.zeros(8, np.int8)])
            runs.append(time.monotonic() - t)
        stats = s.client.stats
        return {
            "connect_s": connect, "max_payload": s.client.max_payload,
            "rtt_ms_median": 1e3 * statistics.median(rtts), "rtt_ms_p95": 1e3 * sorted(rtts)[int(0.95 * (len(rtts) - 1))],
            "upload_s_best": min(ups), "upload_s_median": statistics.median(ups),
            "upload_kBps": VWW_INPUT / min(ups) / 1e3,
            "download_s_best": min(downs), "download_kBps": VWW_INPUT / min(downs) / 1e3,
            "run_round_trip_s_median": statistics.median(runs),
            "retransmissions": stats.retransmissions,
        }
    finally:
        s.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--echoes", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", metavar="F")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="kiln-rpc-bench-") as tmp:
        host_elf = build_fixture_project("host", Path(tmp) / "host", VWW_INPUT)
        links = {"host board (stdio pipe)": lambda: SubprocessTransport([host_elf])}
        try:
            qemu_elf = build_fixture_project("mps2-an386", Path(tmp) / "an386", VWW_INPUT)
            links["QEMU mps2-an386, stdio pipe"] = lambda: QemuTransport(qemu_elf, "mps2-an386", "pipe")
            links["QEMU mps2-an386, TCP socket"] = lambda: QemuTransport(qemu_elf, "mps2-an386", "socket")
        except Exception as exc:  # no cross compiler or QEMU: host figures only
            print(f"(QEMU skipped: {exc})")
        for name, make in links.items():
            results[name] = measure(make(), args.echoes, args.repeat)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"payload {VWW_INPUT:,} bytes (the VWW input)")
    print(f"{'link':<30} {'connect':>8} {'RTT med':>8} {'RTT p95':>8} {'upload':>8} {'up KB/s':>8} "
          f"{'download':>9} {'dn KB/s':>8} {'run RT':>8} {'retx':>5}")
    for name, r in results.items():
        print(f"{name:<30} {r['connect_s']:>7.2f}s {r['rtt_ms_median']:>6.2f}ms {r['rtt_ms_p95']:>6.2f}ms "
              f"{r['upload_s_best']:>7.2f}s {r['upload_kBps']:>8.1f} {r['download_s_best']:>8.2f}s "
              f"{r['download_kBps']:>8.1f} {r['run_round_trip_s_median']:>7.2f}s {r['retransmissions']:>5}")
    pipe = results.get("QEMU mps2-an386, stdio pipe")
    if pipe:
        verdict = "meets" if pipe["upload_s_best"] < 3.0 else "MISSES"
        print(f"VWW input to QEMU: {pipe['upload_s_best']:.2f} s ({verdict} the 3 s goal)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
