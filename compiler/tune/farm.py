"""`kiln tune --ray ADDRESS`: measure tuning candidates on a farm of machines through Ray.

The host that runs `kiln tune` (the driver) keeps the whole tuning loop of tuner.py:
the search, the batches, the records file and the progress line. Only the measurement
moves: a round's candidates go into as few tuning firmwares as the board holds (one,
usually), each built here, once, and put in Ray's object store; its candidates are
shared out among the workers (FarmWorker actors on the nodes), which boot or flash the
same firmware and stream their Measurements back one by one, so the records grow as
results arrive, whichever node they come from. Each record says where it was measured ("node": host and Ray node id,
"worker": "qemu" or the board and its port).

Workers:
* QEMU: on every live node where qemu-system-arm and kiln are installed, one actor per
  CPU the node offers Ray (num_cpus=1 each, pinned to the node), at most --workers in all.
* real boards: `kiln farm serve --board B --port P` (project_gen/farm_serve.py) on the
  host a board is plugged into starts a Ray node there with the custom resources
  `board:B` and a unique `kiln-board-…`, and a named actor that holds them (the board's
  work lands there and only there). When the farm serves boards of B, tune uses those
  (cycles); otherwise a QEMU board runs on the QEMU workers (instructions).

Faults: a worker that dies (its process, or its node) loses only the candidate it was
measuring; what its batch had left goes to the next free worker (a killed actor is
restarted by Ray and used again once it answers). A served board whose link fails is
marked down for the run and reported. Ctrl-C kills this run's QEMU actors (their QEMU
dies with them: prctl PDEATHSIG) and leaves the records file as every append left it.

`kiln validate --ray` (FarmSession) uses one worker the same way: the host-driven
firmware is built here and shipped, and each Session call validate makes is a call on
the worker that holds the firmware's session.

Ray is an optional extra (`pip install 'kiln[farm]'`), imported only here and only
when --ray is given.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import socket
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import DeviceError, InputError, KilnError, TransportError
from .firmware import Variant
from .measure import (Batch, Measurement, MeasureOptions, built_firmware, measurements)
from .workloads import knobs_id

NAMESPACE = "kiln-farm"              # Ray namespace of the served boards' named actors
BOARD_ACTOR = "board:{board}:{uid}"  # a served board's actor name
ATTEMPTS = 6                         # workers a batch may lose before the run fails
READY_TIMEOUT_S = 60.0               # an actor that does not start by then is not used
INSTALL_HINT = "pip install 'kiln[farm]'"

# QEMU started by a worker ends with the worker, even when the worker is SIGKILLed (a
# node lost, a worker killed): PR_SET_PDEATHSIG, set between fork and exec.
_PDEATHSIG = ("import ctypes, os, signal, sys; "
              "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0); "
              "os.execv(sys.argv[1], sys.argv[1:])")


def import_ray():
    """The ray module, or InputError saying how to get it."""
    try:
        import ray
    except ImportError:
        raise InputError(f"--ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def connect(address: str):
    """Join the Ray cluster at `address` ('auto', HOST:PORT, ray://…) as a driver."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    check_reachable(address)
    try:
        ray.init(address=address, namespace=NAMESPACE, logging_level=logging.WARNING,
                 log_to_driver=False, configure_logging=True)
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise InputError(f"cannot join the Ray cluster at {address}: "
                         f"{str(e).strip().splitlines()[0] if str(e).strip() else e}") from None
    return ray


def check_reachable(address: str) -> None:
    """InputError when nothing listens at a HOST:PORT address: ray.init would retry it
    forever, printing a warning every few seconds."""
    host, sep, port = address.rpartition(":")
    if "://" in address or not sep or not port.isdigit():
        return                          # auto, local, ray://…: Ray answers those itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5.0).close()
    except (OSError, ValueError) as e:
        raise InputError(f"cannot reach the Ray cluster at {address}: {e} (start its head "
                         f"with `ray start --head`; docs/farm.md)") from None


# -- the worker side ----------------------------------------------------------------------

@dataclass(frozen=True)
class ShippedWorkload:
    """What a worker needs of a Workload: its key (the input's seed) and reference knobs."""

    key: str
    reference: dict


@dataclass
class FarmFirmware:
    """A built tuning firmware as it travels through the object store."""

    board: object                       # the Board (a board file's path may not exist there)
    build_id: str
    files: dict[str, bytes]             # "elf", "hex", "bin" (those the build made)
    variants: list[Variant]             # their workloads: ShippedWorkload


def node_label() -> str:
    """This process's host and Ray node: 'lab-3 1f0c9a2e'."""
    import ray

    return f"{socket.gethostname()} {ray.get_runtime_context().get_node_id()[:8]}"


def probe() -> dict:
    """What a node offers QEMU workers (run there as a task)."""
    from ..compile import KILN_VERSION

    return {"qemu": shutil.which("qemu-system-arm") is not None, "kiln": KILN_VERSION,
            "node": node_label()}


class FarmWorker:
    """A Ray actor measuring tuning firmwares: on QEMU (port None), or on the board at
    serial `port`, flashed with `flash_command` (or as the board file says, `flash`)."""

    def __init__(self, board, port: str | None = None, flash_command: str | None = None,
                 flash: bool = False) -> None:
        self.board, self.port = board, port
        self.flash_command, self.flash = flash_command, flash
        self.last_error: str | None = None

    def describe(self) -> dict:
        from ..compile import KILN_VERSION

        return {"board": self.board.name, "port": self.port, "node": node_label(),
                "pid": os.getpid(), "kiln": KILN_VERSION, "last_error": self.last_error}

    def measure(self, fw: FarmFirmware, wanted: list[tuple[str, str]],
                options: MeasureOptions):
        """Flash (a board) or boot (QEMU) `fw` and yield a Measurement per wanted
        (workload key, knobs id) as it is known (a Ray streaming generator)."""
        from kiln.project_gen.rpc_client import RpcOptions
        from kiln.project_gen.session import ExpectedFirmware, Session

        try:
            with tempfile.TemporaryDirectory(prefix="kiln-farm-") as tmp:
                build = Path(tmp) / "build"
                build.mkdir()
                for kind, data in fw.files.items():
                    (build / f"firmware.{kind}").write_bytes(data)
                transport = self._open(build, fw.board)
                session = Session(transport, expected=ExpectedFirmware(
                    build_id=fw.build_id, board=fw.board.name),
                    options=RpcOptions(command_timeout=options.timeout))
                with session:
                    yield from measurements(session, fw.variants, set(wanted), options,
                                            qemu=self.port is None)
            self.last_error = None
        except KilnError as e:
            self.last_error = str(e)
            raise

    # -- a session on a firmware, for kiln validate --ray (FarmSession drives it) ----------

    def session_open(self, fw: FarmFirmware, inputs, outputs, timeout: float) -> dict:
        """Flash or boot `fw` and keep a Session with it open (one at a time)."""
        from kiln.project_gen.rpc_client import RpcOptions
        from kiln.project_gen.session import ExpectedFirmware, Session

        self.session_close()
        self._tmp = tempfile.mkdtemp(prefix="kiln-farm-")
        build = Path(self._tmp) / "build"
        build.mkdir()
        for kind, data in fw.files.items():
            (build / f"firmware.{kind}").write_bytes(data)
        self._session = Session(self._open(build, fw.board), inputs=inputs, outputs=outputs,
                                expected=ExpectedFirmware(build_id=fw.build_id,
                                                          board=fw.board.name),
                                options=RpcOptions(command_timeout=timeout))
        return self._session.device

    def session_call(self, name: str, *args):
        """One call of the open Session's public methods; run() also returns its ticks."""
        if name.startswith("_") or name in ("close", "connect") or not callable(
                getattr(self._session, name, None)):
            raise ValueError(f"not a session call: {name}")
        result = getattr(self._session, name)(*args)
        return (result, self._session.last_run_ticks) if name == "run" else result

    def session_close(self) -> None:
        session, self._session = getattr(self, "_session", None), None
        if session is not None:
            session.close()
        tmp, self._tmp = getattr(self, "_tmp", None), None
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    def _open(self, build: Path, board):
        from kiln.project_gen.flash import firmware_files, flash_firmware, run_flash_command
        from kiln.project_gen.qemu import ICOUNT_SHIFT
        from kiln.project_gen.transport import SerialTransport, SubprocessTransport, qemu_argv

        if self.port is not None:
            if self.flash_command is not None:
                run_flash_command(self.flash_command, firmware_files(build), self.port)
            elif self.flash:
                flash_firmware(board, build, self.port)
            return SerialTransport(self.port)
        argv = qemu_argv(build / "firmware.elf", board.qemu.machine, "stdio", ICOUNT_SHIFT,
                         board.qemu.args)
        # As QemuTransport's pipe, behind the PDEATHSIG launcher.
        return SubprocessTransport([sys.executable, "-c", _PDEATHSIG, *argv],
                                   name=f"QEMU {board.qemu.machine} on {node_label()}",
                                   bytes_per_second=14_000.0)


# -- the driver side ----------------------------------------------------------------------

@dataclass
class Slot:
    """One worker the driver hands batches to."""

    actor: object
    node: str
    worker: str                          # "qemu" or "BOARD at PORT"
    owned: bool                          # started by this run (a served board's is not)
    down: str | None = None


def _ray_errors(ray) -> tuple[tuple[type, ...], type]:
    """(errors that mean a worker or its node is gone, the error a task raised)."""
    ex = ray.exceptions
    lost = tuple(getattr(ex, n) for n in ("RayActorError", "WorkerCrashedError",
                                           "NodeDiedError", "ObjectLostError",
                                           "OwnerDiedError") if hasattr(ex, n))
    return lost, ex.RayTaskError


@dataclass
class Farm:
    """The workers of one `kiln tune --ray` run, and the measurement of batches on them.
    Farm.start joins the cluster and finds or starts the workers for a board."""

    address: str
    board: object
    slots: list[Slot]
    unit: str
    notes: list[str] = field(default_factory=list)      # workers skipped or marked down

    def __post_init__(self) -> None:
        import ray

        self._ray = ray
        self._lost, self._task_error = _ray_errors(ray)
        self._free: queue.Queue[Slot] = queue.Queue()
        for s in self.slots:
            self._free.put(s)
        self._lock = threading.Lock()
        self._aborted = threading.Event()
        # Builds run here, on the driver: at most one per CPU at a time.
        self._builds = threading.Semaphore(max(1, os.cpu_count() or 1))

    @property
    def size(self) -> int:
        return len(self.slots)

    def describe(self) -> str:
        nodes = sorted({s.node for s in self.slots})
        kind = "QEMU worker" if self.unit == "instructions" else f"{self.board.name} board"
        return (f"farm at {self.address}: {len(self.slots)} {kind}"
                f"{'s' if len(self.slots) != 1 else ''} on {len(nodes)} node"
                f"{'s' if len(nodes) != 1 else ''}")

    @classmethod
    def start(cls, address: str, board, workers: int | None = None) -> "Farm":
        """Join the cluster at `address` and gather the workers for `board` (a Board):
        its served boards if any, else (a QEMU board) QEMU actors, at most `workers`."""
        if board.is_host:
            raise InputError("the host board runs on this host: tune or validate it without "
                             "--ray")
        ray = connect(address)
        served = _served_boards(ray, board.name)
        notes: list[str] = []
        if served:
            slots = []
            for actor in served:
                try:
                    d = ray.get(actor.describe.remote(), timeout=READY_TIMEOUT_S)
                except Exception as e:          # noqa: BLE001 - any failure: not used
                    notes.append(f"a served {board.name} does not answer: {_first_line(e)}")
                    continue
                slots.append(Slot(actor, d["node"], f"{board.name} at {d['port']}", False))
            if workers is not None:
                slots = slots[:workers]
            unit = "cycles"
        elif board.runs_on == "qemu":
            slots, notes = _qemu_workers(ray, board, workers)
            unit = "instructions"
        else:
            raise InputError(f"no {board.name} is served in the farm at {address}: run "
                             f"`kiln farm serve --board {board.name} --port PORT` on the "
                             f"host it is plugged into")
        if not slots:
            raise InputError(f"the farm at {address} has no worker for {board.name}"
                             + (f" ({'; '.join(notes)})" if notes else
                                ": no node has qemu-system-arm and a CPU free for Ray"))
        return cls(address, board, slots, unit, notes)

    # -- measuring ---------------------------------------------------------------------

    def measure_batch(self, batch: Batch, target, options: MeasureOptions,
                      on_result: Callable[[Measurement], None], board=None) -> float:
        """tuner's measure step on the farm: build the batch here once, ship it, and
        measure its candidates in shares, one per live worker, all at once, until every
        candidate has a result (or the run is aborted). A tuning build compiles all of
        kiln's kernels (seconds), a share is a boot or a flash: one firmware for many
        workers keeps the driver's builds from being the bottleneck. Returns the seconds
        the build took."""
        with self._builds:
            with built_firmware(batch, target, options, board) as (project, build_s):
                fw = _shipped(project, batch)
        ref = self._ray.put(fw)
        workloads = {w.key: w for w, _ in batch.candidates}
        # Shares of consecutive candidates: a workload's stay together where they can (a
        # worker runs the reference kernel once per workload it measures).
        wanted = sorted({(w.key, knobs_id(k)) for w, k in batch.candidates})
        n = max(1, min(len(wanted), sum(1 for s in self.slots if not s.down)))
        shares = [wanted[i * len(wanted) // n:(i + 1) * len(wanted) // n] for i in range(n)]
        with ThreadPoolExecutor(max_workers=n) as pool:
            futures = [pool.submit(self._measure_share, ref, set(share), workloads, options,
                                   on_result) for share in shares]
            for f in futures:
                f.result()              # the first failure, once every share has ended
        return build_s

    def _measure_share(self, ref, remaining: set, workloads: dict, options: MeasureOptions,
                       on_result: Callable[[Measurement], None]) -> None:
        """Measure `remaining` (workload key, knobs id) of the firmware `ref` on the next
        free worker; what a lost worker leaves goes to the next one."""
        lost = 0
        while remaining and not self._aborted.is_set():
            slot = self._take()
            if slot is None:
                return
            try:
                for m in self._stream(slot, ref, sorted(remaining), options):
                    key = (m.workload.key, knobs_id(m.knobs))
                    if key not in remaining:
                        continue
                    remaining.discard(key)
                    on_result(Measurement(workloads[m.workload.key], m.knobs, m.status,
                                          m.cycles, m.detail,
                                          where={"node": slot.node, "worker": slot.worker}))
                self._free.put(slot)
            except self._lost as e:
                if self._aborted.is_set():
                    return
                lost += 1
                self._recover(slot, e)
                if lost >= ATTEMPTS:
                    raise TransportError(f"{lost} workers were lost measuring one tuning "
                                         f"firmware; the last: {_first_line(e)}") from None
            except self._task_error as e:
                cause = e.cause if isinstance(getattr(e, "cause", None), BaseException) else e
                if not slot.owned and isinstance(cause, (TransportError, DeviceError,
                                                         KilnError)):
                    self._mark_down(slot, cause)    # a served board: the others go on
                    lost += 1
                    if lost >= ATTEMPTS:
                        raise cause from None
                    continue
                self._free.put(slot)
                if isinstance(cause, KilnError):
                    raise cause from None
                raise TransportError(f"worker on {slot.node} failed: "
                                     f"{_first_line(e)}") from None

    def _stream(self, slot: Slot, ref, wanted: list, options: MeasureOptions):
        """The worker's Measurements as they come; stops waiting on abort."""
        ray = self._ray
        gen = slot.actor.measure.options(num_returns="streaming").remote(ref, wanted, options)
        while True:
            ready, _ = ray.wait([gen], timeout=0.5)
            if self._aborted.is_set():
                ray.cancel(gen)
                return
            if not ready:
                continue
            try:
                item = next(gen)
            except StopIteration:
                return
            yield ray.get(item)

    def _take(self) -> Slot | None:
        """A free live worker (waits for one); None when aborted. TransportError when
        every worker is down."""
        while not self._aborted.is_set():
            with self._lock:
                if all(s.down for s in self.slots):
                    raise TransportError("every worker of the farm is down: " +
                                         "; ".join(f"{s.worker} on {s.node}: {s.down}"
                                                   for s in self.slots))
            try:
                slot = self._free.get(timeout=0.5)
            except queue.Empty:
                continue
            if not slot.down:
                return slot
        return None

    def _recover(self, slot: Slot, error: BaseException) -> None:
        """A worker died mid-batch: use it again if Ray brings it back, else mark it down."""
        try:
            self._ray.get(slot.actor.describe.remote(), timeout=READY_TIMEOUT_S)
        except Exception:                   # noqa: BLE001 - gone for good
            self._mark_down(slot, error)
            return
        self._free.put(slot)

    def _mark_down(self, slot: Slot, error: BaseException) -> None:
        with self._lock:
            slot.down = _first_line(error)
            self.notes.append(f"{slot.worker} on {slot.node} stopped answering and is "
                              f"marked down: {slot.down}")

    def abort(self) -> None:
        """Ctrl-C: stop handing out work and end this run's own workers at once."""
        self._aborted.set()
        for s in self.slots:
            if s.owned:
                try:
                    self._ray.kill(s.actor, no_restart=True)
                except Exception:               # noqa: BLE001 - best effort
                    pass

    def close(self) -> None:
        """Release the workers this run started and leave the cluster."""
        for s in self.slots:
            if s.owned:
                try:
                    self._ray.kill(s.actor, no_restart=True)
                except Exception:               # noqa: BLE001 - best effort
                    pass
        self._ray.shutdown()


class FarmSession:
    """A Session on a farm worker (a QEMU worker, or a served board) for `kiln validate`:
    `device` is the worker's DeviceInfo, and every public Session method is a call on the
    worker. `port`: the served board's label (its figures are cycles), None on QEMU."""

    def __init__(self, farm: Farm, project, timeout: float) -> None:
        self.farm, self.slot = farm, farm.slots[0]
        self.port = None if self.slot.worker == "qemu" else self.slot.worker
        self.where = f"{self.slot.worker} on {self.slot.node}"
        self.last_run_ticks: int | None = None
        fw = _shipped(project, None)
        self.device = self._get(self.slot.actor.session_open.remote(
            fw, project.input_specs, project.output_specs, timeout))

    def _get(self, ref):
        lost, task_error = _ray_errors(self.farm._ray)
        try:
            return self.farm._ray.get(ref)
        except task_error as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, KilnError):
                raise cause from None
            raise TransportError(f"{self.where} failed: {_first_line(e)}") from None
        except lost as e:
            raise TransportError(f"{self.where} was lost: {_first_line(e)}") from None

    def _call(self, name: str, *args):
        return self._get(self.slot.actor.session_call.remote(name, *args))

    def run(self, sample):
        outputs, self.last_run_ticks = self._call("run", sample)
        return outputs

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args: self._call(name, *args)

    def __enter__(self) -> "FarmSession":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.farm._ray.get(self.slot.actor.session_close.remote(), timeout=60)
        except Exception:                       # noqa: BLE001 - the worker may be gone
            pass
        self.farm.close()


def farm_session(address: str, project, timeout: float) -> FarmSession:
    """kiln validate --ray: `project` (a built host-driven project) on one worker of the
    farm at `address` for its board."""
    farm = Farm.start(address, project.board, workers=1)
    try:
        return FarmSession(farm, project, timeout)
    except BaseException:
        farm.close()
        raise


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def _shipped(project, batch: Batch | None) -> FarmFirmware:
    """A built project's firmware as a worker gets it (with a tuning batch's table)."""
    from kiln.project_gen.flash import firmware_files

    files = {kind: path.read_bytes()
             for kind, path in firmware_files(project.path / "build").items() if path.is_file()}
    variants = [Variant(v.index, ShippedWorkload(v.workload.key, v.workload.reference),
                        v.knobs, v.input_bytes, v.output_bytes)
                for v in (batch.variants if batch is not None else [])]
    return FarmFirmware(project.board, project.manifest["project"]["build_id"], files,
                        variants)


def _served_boards(ray, board: str) -> list:
    """Handles of the actors `kiln farm serve --board BOARD` registered."""
    prefix = BOARD_ACTOR.format(board=board, uid="")
    names = [a["name"] if isinstance(a, dict) else a
             for a in ray.util.list_named_actors(all_namespaces=False)]
    out = []
    for name in sorted(n for n in names if n.startswith(prefix)):
        try:
            out.append(ray.get_actor(name, namespace=NAMESPACE))
        except ValueError:                      # gone since it was listed
            pass
    return out


def _qemu_workers(ray, board, cap: int | None) -> tuple[list[Slot], list[str]]:
    """One QEMU actor per CPU of every live node with qemu-system-arm and kiln (at most
    `cap` in all, spread over the nodes), pinned to its node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from ..compile import KILN_VERSION

    notes: list[str] = []
    nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) >= 1]
    remote_probe = ray.remote(probe)
    probes = {n["NodeID"]: remote_probe.options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
    ).remote() for n in nodes}
    places: list[tuple[str, str]] = []          # (node id, label) per worker to start
    per_node: list[list[tuple[str, str]]] = []
    for n in nodes:
        try:
            found = ray.get(probes[n["NodeID"]], timeout=READY_TIMEOUT_S)
        except Exception as e:                  # noqa: BLE001 - kiln missing there, …
            notes.append(f"node {n['NodeManagerAddress']} {n['NodeID'][:8]} cannot run "
                         f"kiln: {_first_line(e)}")
            continue
        if not found["qemu"]:
            notes.append(f"node {found['node']} has no qemu-system-arm")
            continue
        if found["kiln"] != KILN_VERSION:
            notes.append(f"node {found['node']} runs kiln {found['kiln']}, this host "
                         f"{KILN_VERSION}: not used")
            continue
        per_node.append([(n["NodeID"], found["node"])] * int(n["Resources"]["CPU"]))
    while any(per_node):                        # round robin: a cap spreads over nodes
        for group in per_node:
            if group:
                places.append(group.pop())
    places = places[:cap] if cap is not None else places
    worker = ray.remote(FarmWorker)
    actors = [(worker.options(num_cpus=1, max_restarts=3, max_task_retries=0,
                              scheduling_strategy=NodeAffinitySchedulingStrategy(
                                  node_id, soft=False)).remote(board), label)
              for node_id, label in places]
    slots = []
    for actor, label in actors:
        try:
            ray.get(actor.describe.remote(), timeout=READY_TIMEOUT_S)
        except Exception as e:                  # noqa: BLE001 - no CPU free there, …
            notes.append(f"a QEMU worker on {label} did not start: {_first_line(e)}")
            ray.kill(actor, no_restart=True)
            continue
        slots.append(Slot(actor, label, "qemu", True))
    return slots, notes
