"""`kiln tune MODEL --board B [--trials N] [--workers N] [--ray ADDRESS] -o RECORDS.jsonl`.

Appends to RECORDS (creating it): a rerun measures only what the file does not hold.
Progress goes to stderr (a bar on a terminal, a line per tenth otherwise); the summary
to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..cli_args import (add_model_options, model_options, positive_float, positive_int,
                        repeat_count, worker_count)
from ..errors import InputError
from ..fsutil import refuse_overwriting_inputs
from . import Records, TuneOptions, TuneProgress, TuneSummary, tune
from .measure import MeasureOptions
from .workloads import knobs_id


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("tune", help="time every layer's kernel variants on a board "
                                           "and record the fastest (auto-tuning)")
    p.add_argument("model", help="an int8 .tflite or QDQ .onnx model")
    p.add_argument("--board", "-b", required=True, help="board name (see `kiln boards`)")
    p.add_argument("-o", "--output", required=True, metavar="RECORDS.jsonl",
                   help="tuning records to append to (created if missing)")
    p.add_argument("--trials", type=positive_int, default=32,
                   help="candidates measured at most per workload (default 32)")
    p.add_argument("--workers", type=worker_count, default=None,
                   help="tuning firmwares built and measured in parallel (QEMU instances; "
                        "default 1; with --ray: at most this many QEMU workers or served "
                        "boards, default all)")
    p.add_argument("--repeat", type=repeat_count, default=5,
                   help="timed runs per candidate, after one warm-up (default 5)")
    p.add_argument("--port", metavar="URL", action="append", default=[],
                   help="a real board's serial port (pyserial URL); repeat for several "
                        "boards of the same kind, one worker each. Each tuning firmware is "
                        "flashed with --flash-command first")
    p.add_argument("--flash-command", metavar="CMD",
                   help="shell command that flashes a firmware: {elf}, {bin}, {hex} are "
                        "replaced by its files and {port} by the board's port, e.g. "
                        "'st-flash write {bin} 0x08000000'")
    p.add_argument("--flash", action="store_true",
                   help="flash each tuning firmware as the board file says (flashing = ...)")
    p.add_argument("--timeout", type=positive_float, default=120.0, metavar="S",
                   help="seconds one kernel run may take on the device (default 120)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="measure on a Ray cluster (auto, HOST:PORT): QEMU workers on its "
                        "nodes, or the boards `kiln farm serve` offers; docs/farm.md")
    add_model_options(p)
    p.set_defaults(handler=cmd_tune)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class ProgressBar:
    """One line on stderr: candidates done, the tunable layers' cycles (default → best so
    far), elapsed time and ETA. Redrawn in place on a terminal; otherwise printed each
    time another tenth is done."""

    def __init__(self, unit: str, stream=None):
        self.unit = unit
        self.stream = stream or sys.stderr      # looked up now: sys.stderr may be replaced
        self.tty = self.stream.isatty()
        self._last_tenth = -1

    def __call__(self, p: TuneProgress) -> None:
        frac = p.done / p.total if p.total else 1.0
        width = 24
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        best = ""
        if p.model_default and p.model_best:
            best = (f"  layers {p.model_default:,} -> {p.model_best:,} {self.unit} "
                    f"({p.model_best / p.model_default:.3f}x)")
        line = (f"[{bar}] {p.done}/{p.total} candidates{best}  "
                f"{_duration(p.elapsed_s)} elapsed, ETA {_duration(p.eta_s)}")
        if self.tty:
            self.stream.write("\r" + line + "\033[K")
            self.stream.flush()
        elif int(frac * 10) != self._last_tenth:
            self._last_tenth = int(frac * 10)
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def print_summary(s: TuneSummary, records: Records) -> None:
    print(f"{'layers':>6}  {'default':>12}  {'tuned':>12}  {'speed-up':>8}  best knobs    workload")
    total_default = total_best = untimed = 0
    for r in s.workloads:
        n = len(r.workload.layers)
        if r.default_cycles is not None and r.best_cycles is not None:
            total_default += n * r.default_cycles
            total_best += n * r.best_cycles
            ratio = f"{r.default_cycles / r.best_cycles:7.2f}x"
        else:
            untimed += n
            ratio = "      -"
        knobs = knobs_id(r.best_knobs) if r.best_knobs else "-"
        default = "-" if r.default_cycles is None else f"{r.default_cycles:,}"
        best = "-" if r.best_cycles is None else f"{r.best_cycles:,}"
        print(f"{n:>6}  {default:>12}  {best:>12}  {ratio:>8}  {knobs}  {r.workload.key}")
    if total_best:
        without = f"; {untimed} untimed layer(s) left out" \
            if untimed else ""
        print(f"tunable layers: {total_default:,} -> {total_best:,} {s.unit} per inference "
              f"({total_default / total_best:.2f}x{without})")
    print(f"measured {s.measured} candidates in {s.batches} tuning firmware(s) "
          f"({s.already} already in the records) in {_duration(s.wall_s)}; "
          f"records: {records.path}")
    for key, why in s.unfit.items():
        print(f"kiln: note: {key}: candidates not measured, {why}", file=sys.stderr)
    for p in s.problems:
        print(f"kiln bug, please report: {p}", file=sys.stderr)


def cmd_tune(args: argparse.Namespace) -> int:
    from kiln.compiler import load

    out = Path(args.output)
    if out.suffix not in (".jsonl", ".json"):
        raise InputError(f"{out}: tuning records are JSON Lines; name the file *.jsonl")
    if args.ray is not None and (args.port or args.flash_command or args.flash):
        raise InputError("with --ray, boards are served by `kiln farm serve --board B --port "
                         "P --flash-command CMD` on their hosts: drop --port/--flash*")
    if (args.flash_command or args.flash) and not args.port:
        raise InputError(f"{'--flash-command' if args.flash_command else '--flash'} needs "
                         f"--port (the board's serial port)")
    refuse_overwriting_inputs(out, [args.model], "-o")
    if out.is_symlink() and not out.exists():
        raise InputError(f"{out} is a symbolic link to a missing file: kiln will not create "
                         f"a file where a link points; name another records file")
    graph = load(args.model, **model_options(args))
    records = Records.load(out, missing_ok=True)
    farm = None
    if args.ray is not None:             # joined before the records file is created
        from kiln.project_gen.boards import get_board

        from .farm import Farm

        farm = Farm.start(args.ray, get_board(args.board), args.workers)
        print(f"kiln: {farm.describe()}", file=sys.stderr)
    created = not os.path.lexists(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Fail on an unwritable path before any build. A new file is created with O_EXCL, so
    # a link put at `out` meanwhile is refused, never followed; an existing one is only
    # ever appended to.
    os.close(os.open(out, os.O_WRONLY | os.O_APPEND | (os.O_CREAT | os.O_EXCL if created
                                                        else 0), 0o666))
    if records.skipped_lines:
        print(f"kiln: warning: skipped {records.skipped_lines} unreadable line(s) in {out}",
              file=sys.stderr)
    options = TuneOptions(trials=args.trials, workers=args.workers or 1, farm=farm,
                          measure=MeasureOptions(repeat=args.repeat, timeout=args.timeout,
                                                 ports=args.port,
                                                 flash_command=args.flash_command,
                                                 flash=args.flash))
    from .tuner import _unit

    bar = ProgressBar(farm.unit if farm is not None else
                      _unit(args.board, args.port[0] if args.port else None))
    try:
        summary = tune(graph, args.board, records, options, progress=bar,
                       model_name=Path(args.model).stem)
    except BaseException:
        if created and out.stat().st_size == 0:
            out.unlink()                 # a run that measured nothing leaves no file behind
        raise
    finally:
        bar.close()
        if farm is not None:
            for note in farm.notes:
                print(f"kiln: warning: {note}", file=sys.stderr)
            farm.close()
    print_summary(summary, records)
    return 1 if summary.problems else 0
