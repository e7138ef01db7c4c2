"""Structured fuzz run: hostile-but-valid models through compile, their C through ASan/UBSan.

    .venv/bin/python benchmarks/fuzz_structured.py [--models 2000] [--seed 1] [--jobs 1]
        [--out DIR] [--findings FILE --repro-dir DIR]

Generates `--models` models with tests/fuzz_structured.py (every op kiln supports, alone
or in chains of 2-5, with shapes, options, quantization and constants drawn ordinary or
hostile), compiles each in a worker subprocess (a crash or hang is pinned to its model),
builds the generated C of each model that compiles with -fsanitize=address,undefined
and runs it on random input bytes. Prints the counts per outcome and per op, the time,
and every failure (traceback, crash, hang, C build error, sanitizer report, kiln_run
refusing a model kiln accepted). Exit code 0 when there is no failure.

With --findings, each new distinct failure (by op, kind and place) is appended to FILE
with a reproducer .tflite in --repro-dir.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz_structured import run_fuzz, record_findings  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="index of the first model")
    ap.add_argument("--jobs", type=int, default=1, help="parallel workers (2 cores: 1-2)")
    ap.add_argument("--out", type=Path, help="keep models and C here (default: a temp dir)")
    ap.add_argument("--no-sanitize", action="store_true", help="compile only")
    ap.add_argument("--compile-timeout", type=float, default=60.0)
    ap.add_argument("--run-timeout", type=float, default=60.0)
    ap.add_argument("--max-run-mb", type=int, default=1024,
                    help="skip running models whose arena + I/O exceed this")
    ap.add_argument("--findings", type=Path, help="append new distinct failures here")
    ap.add_argument("--repro-dir", type=Path, help="reproducers for --findings")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        s = run_fuzz(args.models, args.seed, work, jobs=args.jobs, start=args.start,
                     compile_timeout=args.compile_timeout, run_timeout=args.run_timeout,
                     sanitize=not args.no_sanitize, max_run_bytes=args.max_run_mb << 20,
                     log=lambda m: print(m, file=sys.stderr, flush=True))
        print(f"structured fuzz: {args.models} models, seed {args.seed}")
        print(s.table())
        fails = s.failures()
        for m, r in sorted(fails.items()):
            c = s.cases[m]
            print(f"FAIL {m} {r['outcome']}: {' -> '.join(c.ops)} [{', '.join(c.notes)}] "
                  f"{r.get('detail', '')} {r.get('where', '')}")
        if args.findings:
            ids = record_findings(s, args.findings, args.repro_dir or args.findings.parent)
            print(f"findings in this run: {', '.join(ids) or 'none'}")
        print(f"failures: {len(fails)}")
        return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
