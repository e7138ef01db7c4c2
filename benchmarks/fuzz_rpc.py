"""Fuzz the RPC frame parser and command handler under libFuzzer + ASan + UBSan.

    .venv/bin/python benchmarks/fuzz_rpc.py [--runs 1000000] [--seconds 0] [--out DIR]

Builds tests/rpc_c/fuzz_rpc.c with the server, the fixture model (with its tuning
table) and the fake platform, seeds a corpus (every command, raw frames), runs
`--runs` inputs and prints executions, speed, coverage and the verdict. Exit code 0
when libFuzzer found nothing; a crash reproducer is left in DIR otherwise.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rpc_support import build_fuzzer, fuzz_compiler, write_seed_corpus  # noqa: E402


def run_fuzzer(out: Path, runs: int, seconds: int = 0, max_len: int = 4096) -> dict:
    """Build and run; returns {"runs", "seconds", "exec_per_s", "cov", "ok", "log"}."""
    exe = build_fuzzer(out / "fuzz_rpc")
    corpus = out / "corpus"
    write_seed_corpus(corpus)
    argv = [str(exe), str(corpus), f"-runs={runs}", f"-max_len={max_len}", "-timeout=20",
            "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={out}/"]
    if seconds:
        argv.append(f"-max_total_time={seconds}")
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=out)
    elapsed = time.monotonic() - start
    log = proc.stderr
    done = re.findall(r"#(\d+)\s+DONE", log) or re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
    cov = re.findall(r"cov: (\d+)", log)
    executed = int(done[-1]) if done else 0
    return {"runs": executed, "seconds": elapsed, "exec_per_s": executed / elapsed if elapsed else 0,
            "cov": int(cov[-1]) if cov else 0, "ok": proc.returncode == 0, "log": log}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=int, default=0, help="stop after this long (0: no limit)")
    ap.add_argument("--out", type=Path, default=Path("build/fuzz_rpc"))
    args = ap.parse_args()
    if fuzz_compiler() is None:
        print("clang (with libFuzzer) is not installed: apt-get install clang libclang-rt-dev")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    r = run_fuzzer(args.out.resolve(), args.runs, args.seconds)
    print(f"fuzz_rpc: {r['runs']:,} inputs in {r['seconds']:.1f} s "
          f"({r['exec_per_s']:,.0f}/s), coverage {r['cov']} edges: "
          f"{'no finding' if r['ok'] else 'FINDING'}")
    if not r["ok"]:
        print(r["log"][-4000:])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
