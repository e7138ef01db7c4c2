"""`kiln tune --ray` and `kiln farm serve` (compiler/tune/farm.py, project_gen/farm_serve.py).

The cluster tests start real Ray nodes on this machine, each `ray start --block` in its
own process group and its own short temporary folder (Ray's socket paths must stay
under 108 bytes), and end every process of those groups when the test ends, so no raylet
outlives its test. They are slow (a node takes seconds to start) and skipped without Ray
(`pip install 'kiln[farm]'`; `make setup` installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO, model_path, one_error, require_tool, run_kiln

DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"
BOARD = "mps2-an386"
KILN = str(Path(sys.executable).with_name("kiln"))
START_TIMEOUT_S = 120.0


def require_ray():
    try:
        import ray  # noqa: F401
    except ImportError:
        pytest.skip("ray is not installed: pip install 'kiln[farm]' (make setup installs it)")


def _free_port() -> int:
    from kiln.project_gen.transport import free_tcp_port

    return free_tcp_port()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            "utf-8", "replace")
    except OSError:
        return ""


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


class Node:
    """`ray start --block …` in a process group of its own; its temporary folder is
    short and its own, so every process it starts can be found and ended."""

    def __init__(self, *args: str):
        self.temp = tempfile.mkdtemp(prefix="kf", dir="/tmp")
        self.log = Path(self.temp) / "node.log"
        argv = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; "
                "sys.argv[0] = 'ray'; sys.exit(main())", "start", *args, "--block",
                "--temp-dir", self.temp, "--disable-usage-stats"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Ray runtime started" not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"ray start failed: {self.log.read_text(errors='replace')[-800:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()            # drains, then ends the node's processes
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        end_groups({self.proc.pid}, self.temp)
        shutil.rmtree(self.temp, ignore_errors=True)


def end_groups(pgids: set[int], temp: str) -> None:
    """End what is left of the process groups `pgids` and of any process naming `temp`
    (a node serve started, and its workers), then check nothing is left."""
    groups = set(pgids) | {g for pid in _pids() if temp in _cmdline(pid)
                           for g in [_pgid(pid)] if g is not None}
    groups.discard(os.getpgid(0))
    deadline = time.monotonic() + 15
    while True:
        left = [pid for pid in _pids() if _pgid(pid) in groups and pid != os.getpid()]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.5)
    assert not [p for p in _pids() if _pgid(p) in groups and _cmdline(p)], "Ray leftovers"


@pytest.fixture
def head():
    """A one-node cluster: 127.0.0.1, 2 CPUs, no dashboard; its address."""
    require_ray()
    require_tool("qemu-system-arm")
    require_tool("arm-none-eabi-gcc")
    port = _free_port()
    node = Node("--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                "--num-cpus", "2", "--include-dashboard", "false")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        node.stop()


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _pairs(entries: list[dict]) -> Counter:
    from kiln.compiler.tune import knobs_id

    return Counter((e["workload"], knobs_id(e["knobs"])) for e in entries)


def _tune(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([KILN, "tune", *argv], capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def kws_local(tmp_path_factory) -> Path:
    """KWS tuned on this host (2 QEMU workers): what a farm run must agree with."""
    require_tool("qemu-system-arm")
    require_tool("arm-none-eabi-gcc")
    model = model_path("kws_ref_model")
    out = tmp_path_factory.mktemp("local") / "kws.jsonl"
    done = _tune(str(model), "--board", BOARD, "--repeat", "1", "--workers", "2", "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


# -- without a cluster -----------------------------------------------------------------

def test_ray_is_imported_only_for_ray_runs():
    code = ("import sys; import kiln.compiler.cli, kiln.compiler.tune.cli, "
            "kiln.compiler.tune.farm, kiln.project_gen.farm_serve; "
            "from kiln.compiler.cli import main; "
            "assert 'ray' not in sys.modules, 'ray imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("argv", [
    ["tune", str(DIGITS), "--board", BOARD, "--ray", "auto"],
    ["farm", "serve", "--board", BOARD, "--port", "socket://127.0.0.1:9",
     "--flash-command", "true {elf}"],
])
def test_without_ray_the_farm_says_how_to_get_it(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)        # `import ray` fails
    out = tmp_path / "r.jsonl"
    code, _, err = run_kiln(capsys, *argv, *(["-o", out] if argv[0] == "tune" else []))
    assert code == 2
    assert "pip install 'kiln[farm]'" in one_error(err)
    assert not out.exists()


def test_bad_farm_requests_are_one_line(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    code, _, err = run_kiln(capsys, "tune", DIGITS, "--board", BOARD, "--ray", "auto",
                            "--port", "socket://127.0.0.1:9", "-o", out)
    assert code == 2 and "kiln farm serve" in one_error(err)
    code, _, err = run_kiln(capsys, "farm", "serve", "--board", BOARD, "--port",
                            "socket://127.0.0.1:9")
    assert code == 2 and "--flash-command" in one_error(err)
    require_ray()
    code, _, err = run_kiln(capsys, "tune", DIGITS, "--board", "host", "--ray", "auto",
                            "-o", out)
    assert code == 2 and "without --ray" in one_error(err) and not out.exists()
    start = time.monotonic()
    code, _, err = run_kiln(capsys, "tune", DIGITS, "--board", BOARD, "--ray",
                            f"127.0.0.1:{_free_port()}", "-o", out)
    assert code == 2 and "cannot reach the Ray cluster" in one_error(err)
    assert time.monotonic() - start < 30 and not out.exists()
    start = time.monotonic()        # serve checks the head before starting a node there
    code, _, err = run_kiln(capsys, "farm", "serve", "--board", BOARD, "--port",
                            "socket://127.0.0.1:9", "--flash-command", "true {elf}",
                            "--address", f"127.0.0.1:{_free_port()}")
    assert code == 2 and "cannot reach the Ray cluster" in one_error(err)
    assert time.monotonic() - start < 30


# -- on a cluster -----------------------------------------------------------------------

def _same_choices(farm: list[dict], local: Path) -> None:
    """Per workload, the farm's fastest candidate is the local run's, or one the local
    run timed within 0.1% of it: QEMU's -icount counts are deterministic up to a few
    instructions of serial-line timing (1-5 in 600,000 seen)."""
    from kiln.compiler.tune import Records, knobs_id

    ours = Records(entries=farm).best(BOARD)
    theirs = Records.load(local)
    best = theirs.best(BOARD)
    cycles = theirs.cycles(BOARD)
    assert ours.keys() == best.keys()
    for key, e in ours.items():
        want = best[key]["cycles"]["median"]
        got = cycles[(key, knobs_id(e["knobs"]))]
        assert got <= want * 1.001, (key, e["knobs"], best[key]["knobs"])


@pytest.mark.slow
@pytest.mark.qemu
def test_a_farm_run_chooses_what_a_local_run_chooses(head, kws_local, tmp_path):
    out = tmp_path / "farm.jsonl"
    done = _tune(str(model_path("kws_ref_model")), "--board", BOARD, "--repeat", "1",
                 "--ray", head, "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert f"farm at {head}: 2 QEMU workers on 1 node" in done.stderr
    farm, local = _records(out), _records(kws_local)
    assert _pairs(farm) == _pairs(local)                  # every candidate, once
    assert all(e["status"] == "ok" and e["unit"] == "instructions" for e in farm)
    assert {e["worker"] for e in farm} == {"qemu"} and len({e["node"] for e in farm}) == 1
    _same_choices(farm, kws_local)
    # A rerun measures nothing: the records hold it all (resumable, as a local run).
    again = _tune(str(model_path("kws_ref_model")), "--board", BOARD, "--repeat", "1",
                  "--ray", head, "-o", str(out))
    assert again.returncode == 0 and "measured 0 candidates" in again.stdout
    assert len(_records(out)) == len(farm)
    # kiln validate --ray: the same farm runs the model, layer by layer too, on a worker.
    done = subprocess.run([KILN, "validate", str(DIGITS), "--board", BOARD, "--samples", "2",
                           "--per-layer", "1", "--ray", head], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"on {BOARD} (qemu on " in done.stdout
    assert "the target matches the host reference on every sample" in done.stdout


def _workers_measuring() -> list[int]:
    return [pid for pid in _pids() if _cmdline(pid).startswith("ray::FarmWorker.measure")]


@pytest.mark.slow
@pytest.mark.qemu
def test_a_worker_killed_mid_run_loses_only_its_candidate(head, kws_local, tmp_path):
    out = tmp_path / "farm.jsonl"
    run = subprocess.Popen([KILN, "tune", str(model_path("kws_ref_model")), "--board", BOARD,
                            "--repeat", "1", "--ray", head, "-o", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not (out.exists() and out.read_text().strip()):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.05)
        victims = _workers_measuring()
        assert victims, "no worker measuring"
        os.kill(victims[0], signal.SIGKILL)
        at_kill = len(_records(out))
        stdout, stderr = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, stderr
    local = _records(kws_local)
    assert at_kill < len(local)                           # killed mid-run
    farm = _records(out)
    assert _pairs(farm) == _pairs(local)                  # every layer, every candidate
    assert all(e["status"] == "ok" for e in farm)
    # The killed worker's QEMU ended with it (PDEATHSIG): no firmware of the farm runs.
    assert not [p for p in _pids() if "kiln-farm-" in _cmdline(p)]


FLASH = """\
#!/bin/sh
# Stands in for a probe on the host a board hangs off: "flashes" $1 by booting it in QEMU
# with its UART on the TCP port of $2 (socket://127.0.0.1:PORT); fails while a file
# broken-PORT exists (a board that stopped answering).
P=$(echo "$2" | sed 's/.*://')
[ -e "{dir}/broken-$P" ] && {{ echo "no probe found" >&2; exit 1; }}
OLD=$(cat "{dir}/$P.pid" 2>/dev/null)
if [ -n "$OLD" ]; then      # the last firmware's QEMU: wait until its port is free
    kill $OLD 2>/dev/null
    for i in $(seq 100); do kill -0 $OLD 2>/dev/null || break; sleep 0.05; done
fi
qemu-system-arm {args} -kernel "$1" >/dev/null 2>&1 &
echo $! > "{dir}/$P.pid"
"""


@pytest.mark.slow
@pytest.mark.qemu
def test_two_hosts_with_a_served_board_each_split_the_work(head, tmp_path):
    """Two "hosts" (two Ray nodes here), each running `kiln farm serve` for a QEMU board
    behind a TCP serial port: the tune's records say which node measured what, both did;
    then one board's probe fails: it is marked down and the other board does the rest."""
    from kiln.project_gen import get_board
    from kiln.project_gen.qemu import qemu_args

    args = qemu_args(get_board(BOARD))
    args[args.index("stdio")] = "tcp:127.0.0.1:$P,server=on,wait=off"
    script = tmp_path / "flash.sh"
    script.write_text(FLASH.format(dir=tmp_path, args=" ".join(args)))
    script.chmod(0o755)
    ports = [_free_port() for _ in range(2)]
    temps = [tempfile.mkdtemp(prefix="kf", dir="/tmp") for _ in ports]
    serves = []
    try:
        for port, temp in zip(ports, temps):
            log = open(tmp_path / f"serve-{port}.log", "w")
            serves.append(subprocess.Popen(
                [KILN, "farm", "serve", "--board", BOARD, "--port",
                 f"socket://127.0.0.1:{port}", "--flash-command", f"{script} {{elf}} {{port}}",
                 "--address", head, "--ray-temp-dir", temp],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        nodes = {}
        deadline = time.monotonic() + 2 * START_TIMEOUT_S
        while len(nodes) < 2:
            for port in ports:
                text = (tmp_path / f"serve-{port}.log").read_text()
                if "serving" in text:
                    nodes[port] = text.split("(node ")[1].split(")")[0]
            assert time.monotonic() < deadline and all(s.poll() is None for s in serves), \
                [(tmp_path / f"serve-{p}.log").read_text() for p in ports]
            time.sleep(0.3)
        assert len(set(nodes.values())) == 2

        out = tmp_path / "boards.jsonl"
        done = _tune(str(DIGITS), "--board", BOARD, "--repeat", "1", "--ray", head,
                     "-o", str(out))
        assert done.returncode == 0, done.stderr
        assert f"farm at {head}: 2 {BOARD} boards on 2 nodes" in done.stderr
        entries = _records(out)
        assert all(e["status"] == "ok" and e["unit"] == "cycles" for e in entries)
        by_node = Counter((e["node"], e["worker"]) for e in entries)
        assert set(by_node) == {(nodes[p], f"{BOARD} at socket://127.0.0.1:{p}") for p in ports}
        assert max(_pairs(entries).values()) == 1

        (tmp_path / f"broken-{ports[1]}").touch()
        out2 = tmp_path / "one-down.jsonl"
        done = _tune(str(DIGITS), "--board", BOARD, "--repeat", "1", "--ray", head,
                     "-o", str(out2))
        assert done.returncode == 0, done.stderr
        assert f"socket://127.0.0.1:{ports[1]} on {nodes[ports[1]]} stopped answering and " \
               f"is marked down" in done.stderr and "no probe found" in done.stderr
        again = _records(out2)
        assert _pairs(again) == _pairs(entries)
        assert {e["node"] for e in again} == {nodes[ports[0]]}
    finally:
        for s in serves:
            s.terminate()                   # the board leaves, its node stops
        for s in serves:
            try:
                s.wait(timeout=60)
            except subprocess.TimeoutExpired:
                s.kill()
        for pid in tmp_path.glob("*.pid"):
            subprocess.run(["kill", pid.read_text().strip()], capture_output=True)
        for s, temp in zip(serves, temps):
            end_groups({s.pid}, temp)
        for temp in temps:
            shutil.rmtree(temp, ignore_errors=True)
    assert all(s.returncode == 0 for s in serves)
