#!/usr/bin/env python3
"""Speed-up of two Ray workers over one for `kiln tune --ray` on this machine.

    python benchmarks/farm_speedup.py [--model kws_ref_model] [--board mps2-an386]
                                      [--trials 32] [--repeat 5] [--cpus 2]
                                      [--boards [--flash-delay 2]]

Starts a one-node Ray cluster here (127.0.0.1, --cpus CPUs, its own temporary folder,
no dashboard), tunes the model through it with --workers 1, then --workers 2 (fresh
records each time, the same candidates), prints the wall time of each and the ratio,
and stops the cluster. The tuning firmware of each batch is built on this host and the
QEMU workers measure; on a 2-core machine both workers and the builds share the two
cores, so the ratio is what one extra worker buys here, not on a farm of machines.
Each line says when the first result came (the builds before it) and the last: a
tuning build compiles every kernel of crt/ (about 10 s here), so two batches cost two
such builds on the driver, while the measuring itself takes a few seconds on QEMU.
With --boards, two `kiln farm serve` (each its own Ray node) offer QEMU boards behind TCP
serial ports, "flashed" by a script that takes --flash-delay seconds as a probe would:
what a farm of real boards spends is waiting on flashing and serial lines, not CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KILN = str(Path(sys.executable).with_name("kiln"))
RAY = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; "
       "sys.argv[0] = 'ray'; sys.exit(main())"]


def start_head(cpus: int, temp: str) -> tuple[subprocess.Popen, str]:
    from kiln.project_gen.transport import free_tcp_port

    port = free_tcp_port()
    log = Path(temp) / "head.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([*RAY, "start", "--head", "--node-ip-address", "127.0.0.1",
                                 "--port", str(port), "--num-cpus", str(cpus),
                                 "--include-dashboard", "false", "--disable-usage-stats",
                                 "--temp-dir", temp, "--block"],
                                stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + 120
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"ray start failed: {log.read_text(errors='replace')[-600:]}")
        time.sleep(0.2)
    return proc, f"127.0.0.1:{port}"


def stop_head(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)       # whatever the node left in its group
    except OSError:
        pass


FLASH = """\
#!/bin/sh
# A board on the farm, played by QEMU behind a TCP serial port ($2 = socket://HOST:PORT):
# "flashing" $1 takes {delay} s, as a probe would, then boots it.
sleep {delay}
P=$(echo "$2" | sed 's/.*://')
OLD=$(cat "{dir}/$P.pid" 2>/dev/null)
if [ -n "$OLD" ]; then      # the last firmware's QEMU: wait until its port is free
    kill $OLD 2>/dev/null
    for i in $(seq 100); do kill -0 $OLD 2>/dev/null || break; sleep 0.05; done
fi
qemu-system-arm {args} -kernel "$1" >/dev/null 2>&1 &
echo $! > "{dir}/$P.pid"
"""


def serve_boards(args, address: str, temp: str) -> list[subprocess.Popen]:
    """Two `kiln farm serve` (each its own Ray node here) for QEMU boards on TCP ports."""
    from kiln.project_gen import get_board
    from kiln.project_gen.qemu import qemu_args
    from kiln.project_gen.transport import free_tcp_port

    qemu = qemu_args(get_board(args.board))
    qemu[qemu.index("stdio")] = "tcp:127.0.0.1:$P,server=on,wait=off"
    script = Path(temp) / "flash.sh"
    script.write_text(FLASH.format(delay=args.flash_delay, dir=temp, args=" ".join(qemu)))
    script.chmod(0o755)
    serves = []
    for i in range(2):
        log = Path(temp) / f"serve{i}.log"
        node_temp = tempfile.mkdtemp(prefix="n", dir=temp)
        with open(log, "wb") as f:
            serves.append(subprocess.Popen(
                [KILN, "farm", "serve", "--board", args.board, "--port",
                 f"socket://127.0.0.1:{free_tcp_port()}", "--flash-command",
                 f"{script} {{elf}} {{port}}", "--address", address,
                 "--ray-temp-dir", node_temp], stdout=f, stderr=subprocess.STDOUT,
                start_new_session=True))
        deadline = time.monotonic() + 180
        while "serving" not in log.read_text(errors="replace"):
            if serves[-1].poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"kiln farm serve failed: {log.read_text()[-600:]}")
            time.sleep(0.3)
    return serves


def stop_boards(serves: list[subprocess.Popen], temp: str) -> None:
    for s in serves:
        s.terminate()                   # the board leaves, its node stops
    for s in serves:
        try:
            s.wait(timeout=60)
        except subprocess.TimeoutExpired:
            s.kill()
    for pid in Path(temp).glob("*.pid"):
        subprocess.run(["kill", pid.read_text().strip()], capture_output=True)


def tune(model: Path, args, address: str, workers: int, out: Path) -> float:
    started = time.monotonic()
    done = subprocess.run([KILN, "tune", str(model), "--board", args.board, "--trials",
                           str(args.trials), "--repeat", str(args.repeat), "--workers",
                           str(workers), "--ray", address, "-o", str(out)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"kiln tune failed: {done.stderr[-800:]}")
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="kws_ref_model")
    parser.add_argument("--board", default="mps2-an386")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs the Ray node offers")
    parser.add_argument("--boards", action="store_true",
                        help="measure on two served boards (QEMU behind TCP, flashed by a "
                             "script) instead of QEMU workers")
    parser.add_argument("--flash-delay", type=float, default=2.0, metavar="S",
                        help="with --boards: seconds each flash takes (default 2)")
    parser.add_argument("--json", metavar="OUT.json", help="also write the figures as JSON")
    args = parser.parse_args()
    models = Path(os.environ.get("KILN_MODELS", REPO.parent / "shared" / "models"))
    model = models / "mlperf_tiny" / f"{args.model}.tflite"
    if not model.is_file():
        raise SystemExit(f"{model} not found (set KILN_MODELS)")
    temp = tempfile.mkdtemp(prefix="kfb", dir="/tmp")
    proc, address = start_head(args.cpus, temp)
    figures = {}
    serves = []
    try:
        if args.boards:
            serves = serve_boards(args, address, temp)
        for workers in (1, 2):
            out = Path(temp) / f"w{workers}.jsonl"
            figures[workers] = tune(model, args, address, workers, out)
            elapsed = [json.loads(line)["elapsed_s"] for line in out.read_text().splitlines()]
            print(f"{workers} worker{'s' if workers > 1 else ' '}: {figures[workers]:6.1f} s "
                  f"({len(elapsed)} candidates; the first result after {min(elapsed):.1f} s "
                  f"of building, the last at {max(elapsed):.1f} s)", flush=True)
    finally:
        stop_boards(serves, temp)
        stop_head(proc)
        shutil.rmtree(temp, ignore_errors=True)
    ratio = figures[1] / figures[2]
    what = (f"served boards, {args.flash_delay:g} s per flash" if args.boards else
            "QEMU workers")
    print(f"speed-up of 2 workers over 1: {ratio:.2f}x ({args.model} on {args.board}, "
          f"{what}, {os.cpu_count()} cores here)")
    if args.json:
        Path(args.json).write_text(json.dumps({"seconds": figures, "speedup": ratio}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
