#!/usr/bin/env python3
"""Concurrent runs on one empty cache: N `kiln run MODEL --board B` started at once.

    python benchmarks/concurrent_runs.py [--runs 4] [--rounds 3] [--board B] [--model M]

Each round gives N processes a fresh, empty cache (XDG_CACHE_HOME): one builds the cache
entry (the host kernel library and model library, or the cached host-driven project and
its firmware), the others wait on its lock and reuse it. Prints per round how many
succeeded, whether their outputs are identical, the wall time of the slowest, and what
the cache holds afterwards (entries, staging folders left behind).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import models_root

KILN = str(Path(sys.executable).with_name("kiln"))


def one_round(model: Path, board: str, runs: int, cache: Path) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    started = time.monotonic()
    procs = [subprocess.Popen([KILN, "run", str(model), "--board", board], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(runs)]
    results = [(p.wait(), p.stdout.read(), p.stderr.read()) for p in procs]
    wall = time.monotonic() - started
    outputs = {tuple(line for line in out.splitlines() if line.startswith(("output", "sample")))
               for code, out, _ in results if code == 0}
    kind = "host" if board == "host" else "projects"
    root = cache / "kiln" / kind
    entries = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".kiln-")]
    staging = [p for p in root.iterdir() if p.name.startswith(".kiln-staging-")]
    return {"ok": sum(code == 0 for code, _, _ in results), "identical": len(outputs) == 1,
            "wall_s": wall, "entries": len(entries), "staging": len(staging),
            "errors": [err.strip().splitlines()[-1] for code, _, err in results
                       if code != 0 and err.strip()]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--board", default=None,
                    help="default mps2-an386 with QEMU installed, else host")
    ap.add_argument("--model", default=str(models_root() / "digits" / "digits_cnn_int8.tflite"))
    args = ap.parse_args()
    board = args.board or ("mps2-an386" if shutil.which("qemu-system-arm") else "host")
    print(f"{args.runs} concurrent `kiln run {Path(args.model).name} --board {board}` "
          f"on one empty cache, {args.rounds} rounds")
    print(f"{'round':>5} {'succeeded':>10} {'identical':>10} {'wall s':>8} {'entries':>8} "
          f"{'staging left':>13}")
    failures = 0
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="kiln-concurrent-") as tmp:
            res = one_round(Path(args.model), board, args.runs, Path(tmp))
        failures += (res["ok"] != args.runs) + (not res["identical"]) + res["staging"]
        print(f"{r + 1:>5} {res['ok']:>7}/{args.runs:<2} {str(res['identical']):>10} "
              f"{res['wall_s']:>8.1f} {res['entries']:>8} {res['staging']:>13}")
        for e in res["errors"]:
            print(f"      {e}")
    print("all rounds: every run succeeded with identical outputs" if not failures
          else f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
