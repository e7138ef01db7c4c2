"""The tuning loop: rounds of candidates, batches, parallel workers, records (see
kiln.compiler.tune)."""

from __future__ import annotations

import datetime
import os
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable

from ..compile import KILN_VERSION, board_name, target_for
from ..frontend import as_graph
from ..errors import FitError, InputError
from ..ir import Graph
from ..passes import optimize as optimize_graph
from ..processes import descendants, end_descendants
from .measure import (Batch, Measurement, MeasureOptions, make_batch, measure_batch,
                      summary, toolchain_version)
from .records import Records
from .search import Search
from .workloads import Workload, extract_workloads, knobs_id

# Room kept free for what a tuning build holds besides weights and arena: code (runtime,
# RPC server, every kernel variant: 36-52 KB for the MLPerf models on Cortex-M4) and RAM
# (RPC buffers, statics). A first cut only: a batch that still overflows when linked is
# halved (run_batch), so small boards lose a build, not the run.
_CODE_MARGIN_BYTES = 192 * 1024
_RAM_MARGIN_BYTES = 64 * 1024


def _room(size: int, margin: int) -> int:
    """What a region of `size` bytes leaves for weights or arena: at most a quarter of a
    small part goes to the margin."""
    return size - min(margin, size // 4)


@dataclass
class TuneOptions:
    trials: int = 32                 # candidates measured at most per workload
    workers: int = 1                 # firmware built and measured in parallel
    seed: int = 0
    measure: MeasureOptions = field(default_factory=MeasureOptions)
    farm: object = None              # a farm.Farm: measure on its Ray workers (--ray)


@dataclass
class TuneProgress:
    done: int                        # candidates measured in this run
    total: int                       # candidates this run plans to measure (at most)
    elapsed_s: float
    model_default: int | None        # tunable layers' cycles with the default variants
    model_best: int | None           # ... with the best variants measured so far

    @property
    def eta_s(self) -> float | None:
        if self.done == 0:
            return None
        return self.elapsed_s / self.done * max(0, self.total - self.done)


@dataclass
class WorkloadResult:
    workload: Workload
    default_cycles: int | None
    best_cycles: int | None
    best_knobs: dict | None


@dataclass
class TuneSummary:
    workloads: list[WorkloadResult]
    measured: int                    # candidates timed in this run
    already: int                     # candidates the records held before
    batches: int
    wall_s: float
    problems: list[str]              # mismatches and kernel errors: kiln bugs to report
    unit: str
    # workload key -> why some of its candidates fit no tuning build (records: "unfit")
    unfit: dict[str, str] = field(default_factory=dict)


def _unit(board: str, port: str | None) -> str:
    from kiln.project_gen.boards import get_board

    b = get_board(board)
    if b.is_host:
        return "ns"
    return "instructions" if b.runs_on == "qemu" and port is None else "cycles"


def _split(items: list[tuple[Workload, dict]], parts: int) -> list[list[tuple[Workload, dict]]]:
    """`parts` groups of whole workloads with about the same number of candidates."""
    by_key: dict[str, list[tuple[Workload, dict]]] = {}
    for item in items:
        by_key.setdefault(item[0].key, []).append(item)
    groups: list[list[tuple[Workload, dict]]] = [[] for _ in range(max(1, parts))]
    for group in sorted(by_key.values(), key=len, reverse=True):
        min(groups, key=len).extend(group)
    return [g for g in groups if g]


Unfit = tuple[Workload, dict, str]     # a candidate no tuning build can hold, and why


def _fitting_batches(items: list[tuple[Workload, dict]], target, flash: int | None,
                     ram: int | None) -> tuple[list[Batch], list[Unfit]]:
    """Batches of `items` whose firmware fits the board, halving a batch whose weights or
    arena do not; and the single candidates that fit in no batch. A tuning build holds a
    layer's input, output and scratch side by side, so a layer the model's own plan fits
    in place can be too large to tune alone on a small board."""
    batch = make_batch(items, target, KILN_VERSION)
    weights = batch.artifact.report["weights_bytes"]
    arena = batch.artifact.report["arena_bytes"]
    if (flash is None or weights <= flash) and (ram is None or arena <= ram):
        return [batch], []
    if len(items) == 1:
        w, k = items[0]
        over = [f"{what} {need:,} B where {target.board} leaves {room:,} B"
                for what, need, room in (("weights", weights, flash), ("arena", arena, ram))
                if room is not None and need > room]
        return [], [(w, k, f"its tuning build needs {' and '.join(over)}")]
    half = len(items) // 2
    first, first_unfit = _fitting_batches(items[:half], target, flash, ram)
    second, second_unfit = _fitting_batches(items[half:], target, flash, ram)
    return first + second, first_unfit + second_unfit


def _end_workers(futures: list[Future], keep: frozenset[int]) -> None:
    """End the builds and QEMU instances the running batches started, until every batch
    has returned: a worker between two steps may start another one after a first sweep.
    Each worker then fails on its dead child and removes its temporary project."""
    while True:
        end_descendants(keep)
        _, running = wait(futures, timeout=0.2)
        if not running:
            return


def tune(graph: Graph, board: str, records: Records, options: TuneOptions | None = None,
         progress: Callable[[TuneProgress], None] | None = None,
         model_name: str | None = None) -> TuneSummary:
    """Measure the candidates of every tunable layer of `graph` on `board` that `records`
    does not hold yet, appending each result to `records`; returns what was measured and
    the best knobs per workload.

    graph: a Graph from load() or a .tflite path; board: a name or a Board; records: a
    Records or a .jsonl path (created if missing). Raises InputError / BoardError for bad
    arguments, BuildError / TransportError / DeviceError when a tuning build or the link
    to the target fails."""
    from kiln.project_gen.boards import get_board

    if not isinstance(board, str):
        board_name(board)             # BoardError for what is neither a name nor a Board
    if isinstance(records, (str, os.PathLike)):
        records = Records.load(records, missing_ok=True)
    if not isinstance(records, Records):
        raise InputError(f"records must be a kiln.compiler.tune.Records or a .jsonl path, "
                         f"not {type(records).__name__}")
    if options is not None and not isinstance(options, TuneOptions):
        raise InputError(f"options must be a TuneOptions, not {type(options).__name__}")
    options = options or TuneOptions()
    if options.trials < 1 or options.workers < 1 or options.measure.repeat < 1:
        raise InputError("trials, workers and repeat must be at least 1")
    board_spec = get_board(board)     # a name, a board file's path or a Board: read once
    board = board_spec.name
    ports = list(options.measure.ports)
    farm = options.farm
    if board_spec.runs_on == "board" and not ports and farm is None:
        raise InputError(f"{board} is a real board: pass its serial port (--port) and a "
                         f"command that flashes a firmware (--flash-command)")
    if ports and len(set(ports)) != len(ports):
        raise InputError("the same --port twice: one board per port")
    workers = farm.size if farm is not None else len(ports) if ports else options.workers
    free_ports: queue.Queue[str] = queue.Queue()
    for p in ports:
        free_ports.put(p)
    target = target_for(board_spec)
    started = time.monotonic()
    g = optimize_graph(as_graph(graph))
    workloads = extract_workloads(g, target)
    unit = farm.unit if farm is not None else _unit(board_spec, ports[0] if ports else None)
    session = f"{model_name or g.name}@{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%SZ}"
    searches: dict[str, Search] = {}
    already = 0
    for i, w in enumerate(workloads):
        s = Search(w.candidates, options.trials, seed=options.seed + i)
        for e in records.entries:
            if e["board"] == board and e["workload"] == w.key:
                ok = e["status"] == "ok"
                s.report(e["knobs"], e["cycles"]["median"] if ok else None)
        already += len(s.measured)
        searches[w.key] = s

    lock = threading.Lock()
    stop = threading.Event()       # set on Ctrl-C: workers record and start nothing more
    problems: list[str] = []
    state = {"done": 0, "timed": 0, "batches": 0}   # candidates done and timed, builds
    total = sum(s.remaining() for s in searches.values())

    def model_cycles(pick: Callable[[Workload, Search], int | None]) -> int | None:
        values = [pick(w, searches[w.key]) for w in workloads]
        if any(v is None for v in values):
            return None
        return sum(v * len(w.layers) for v, w in zip(values, workloads))

    def report_progress() -> None:
        if progress is not None:
            progress(TuneProgress(
                state["done"], max(total, state["done"]), time.monotonic() - started,
                model_cycles(lambda w, s: s.measured.get(knobs_id(w.candidates[0]))),
                model_cycles(lambda w, s: s.best_cycles())))

    def on_result(m: Measurement) -> None:
        entry = {
            "workload": m.workload.key, "op": m.workload.op_type, "board": board,
            "cpu": target.cpu, "toolchain": toolchain_version(board_spec.is_host),
            "kiln": KILN_VERSION, "knobs": m.knobs, "status": m.status, "unit": unit,
            "repeat": options.measure.repeat,
            "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "model": model_name or g.name, "session": session,
            "elapsed_s": round(time.monotonic() - started, 2), **m.where,
        }
        if m.status == "ok":
            entry["cycles"] = summary(m.cycles)
        else:
            entry["detail"] = m.detail
        with lock:
            if stop.is_set():      # a worker's link was cut by the interrupt: no result
                return
            records.append(entry)
            searches[m.workload.key].report(m.knobs, entry["cycles"]["median"]
                                            if m.status == "ok" else None)
            state["done"] += 1
            state["timed"] += m.status != "unfit"
            if m.status in ("mismatch", "error"):
                problems.append(f"{m.status}: {m.workload.key} {knobs_id(m.knobs)}: {m.detail}")
            report_progress()

    flash = None if board_spec.is_host else _room(board_spec.flash.size, _CODE_MARGIN_BYTES)
    ram = (None if board_spec.is_host else
           _room(board_spec.ram.size - board_spec.stack_bytes, _RAM_MARGIN_BYTES))
    report_progress()

    def measure(batch: Batch) -> float:
        with lock:
            if stop.is_set():
                return 0.0
            state["batches"] += 1
        if farm is not None:
            return farm.measure_batch(batch, target, options.measure, on_result,
                                      board=board_spec)
        if not ports:
            return measure_batch(batch, target, options.measure, on_result, board=board_spec)
        port = free_ports.get()          # one batch per board at a time
        try:
            return measure_batch(batch, target, options.measure, on_result, port,
                                 board=board_spec)
        finally:
            free_ports.put(port)

    def skip(unfit: list[Unfit]) -> None:
        for w, k, why in unfit:      # recorded, so a rerun does not try them again
            on_result(Measurement(w, k, "unfit", detail=why))

    def run_batch(batch: Batch) -> float:
        try:
            return measure(batch)
        except FitError as exc:          # the linker found it larger than the estimate
            if len(batch.candidates) == 1:
                w, k = batch.candidates[0]
                skip([(w, k, str(exc))])
                return 0.0
            half = len(batch.candidates) // 2
            return sum(run_batch(make_batch(part, target, KILN_VERSION))
                       for part in (batch.candidates[:half], batch.candidates[half:]))

    before = frozenset(descendants())      # a library caller's own processes: kept
    pool = ThreadPoolExecutor(max_workers=workers)
    futures: list[Future] = []
    try:
        while True:
            items = [(w, k) for w in workloads for k in searches[w.key].next_round()]
            if not items:
                break
            batches = []
            # A farm builds one firmware for many workers (farm.py): split only to fit.
            for group in _split(items, 1 if farm is not None else workers):
                fitting, unfit = _fitting_batches(group, target, flash, ram)
                batches += fitting
                skip(unfit)
            futures = [pool.submit(run_batch, b) for b in batches]
            for f in futures:
                f.result()          # a failed build or a dead link ends the run here
            for w in workloads:
                s = searches[w.key]
                if any(w.key == item[0].key for item in items):
                    s.end_round()
    except BaseException as exc:
        # An error ends the run once the running batches are done (their results are
        # recorded, for the next run); Ctrl-C ends them too, at once.
        pool.shutdown(wait=False, cancel_futures=True)   # batches not started never start
        if not isinstance(exc, Exception):
            stop.set()
            if farm is not None:
                farm.abort()
            _end_workers(futures, before)
        raise
    finally:
        pool.shutdown(wait=True)    # workers remove their temporary projects as they end

    results = []
    for w in workloads:
        s = searches[w.key]
        results.append(WorkloadResult(w, s.measured.get(knobs_id(w.candidates[0])),
                                      s.best_cycles(), s.best()))
    unfit = {e["workload"]: e["detail"] for e in records.entries
             if e["board"] == board and e["status"] == "unfit" and e["workload"] in searches}
    return TuneSummary(results, state["timed"], already, state["batches"],
                       time.monotonic() - started, problems, unit, unfit)
