"""Interrupted and concurrent runs (issue 19): the caches, Ctrl-C, `kiln tune`.

Every test runs the installed `kiln` command in a subprocess with its own cache
(XDG_CACHE_HOME) and HOME, as a user would, and sends SIGINT to the process group as a
terminal's Ctrl-C does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import model_path, require_tool
from tflite_builder import TensorSpec, single_op_model

from kiln.compiler.fsutil import STAGING_PREFIX
from kiln.compiler.processes import group_members

KILN = str(Path(sys.executable).with_name("kiln"))
STAGING = STAGING_PREFIX


@pytest.fixture(autouse=True)
def _sigint_not_ignored():
    """A test run started in the background by a shell without job control (`pytest &`)
    inherits SIGINT ignored, and so would every kiln it starts: Ctrl-C could not reach
    them. Python's own handler here resets to the default in each child at exec."""
    before = signal.getsignal(signal.SIGINT)
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, before)


def _env(cache: Path | str, home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(XDG_CACHE_HOME=str(cache), HOME=str(home), PYTHONUNBUFFERED="1")
    return env


def _kiln(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300
          ) -> subprocess.CompletedProcess:
    return subprocess.run([KILN, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def _start(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([KILN, *args], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _ctrl_c(proc: subprocess.Popen, after_s: float, timeout: float = 60
            ) -> tuple[int, str, str, float]:
    """SIGINT to the process group `after_s` seconds after `proc` started (a terminal's
    Ctrl-C); returns (exit code, stdout, stderr, seconds it took to exit)."""
    time.sleep(after_s)
    sent = time.monotonic()
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except ProcessLookupError:
        pass
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err, time.monotonic() - sent


def _assert_clean_interrupt(code: int, err: str) -> None:
    assert "Traceback" not in err and "Fatal Python error" not in err, err
    # 130 from kiln; -SIGINT only if the signal came before Python ran any code at all.
    assert code in (130, -signal.SIGINT), (code, err)
    if code == 130:
        assert err.strip().splitlines()[-1] == "kiln: interrupted", err


def _leftovers(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(f"{STAGING}*")) if root.exists() else []


@pytest.fixture(scope="module")
def add_model(tmp_path_factory) -> Path:
    """A one-op int8 model: builds in a second on the host."""
    a = TensorSpec((1, 4, 4, 8), scale=0.05, zero_point=-10)
    b = TensorSpec((1, 4, 4, 8), scale=0.03, zero_point=5)
    out = TensorSpec((1, 4, 4, 8), scale=0.07, zero_point=-2)
    path = tmp_path_factory.mktemp("model") / "add.tflite"
    path.write_bytes(single_op_model("ADD", [a, b], [out]))
    return path


@pytest.fixture(scope="module")
def warm_kernels(tmp_path_factory, add_model) -> Path:
    """A host cache holding the kernel library only (built once for this module), so
    tests that are not about it need not rebuild it."""
    from kiln.compiler.host_build import HOST_CFLAGS, _kernels_key

    root = tmp_path_factory.mktemp("warm")
    name = f"crt-{_kernels_key(HOST_CFLAGS + ['cc'])}"
    for base in (os.environ.get("XDG_CACHE_HOME"), Path.home() / ".cache"):
        mine = Path(base or "/nonexistent") / "kiln" / "host" / name
        if (mine / "libkiln_kernels.a").is_file():      # content-addressed: safe to reuse
            shutil.copytree(mine, root / "kiln" / "host" / name)
            return root / "kiln" / "host"
    done = _kiln(["run", str(add_model)], _env(root, root), root)
    assert done.returncode == 0, done.stderr
    for entry in (root / "kiln" / "host").iterdir():
        if not entry.name.startswith("crt-"):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    return root / "kiln" / "host"


def _cache_with_kernels(warm: Path, cache: Path) -> Path:
    shutil.copytree(warm, cache / "kiln" / "host")
    return cache


# -- SIGINT from the first instant ------------------------------------------------------

@pytest.fixture(scope="module")
def python_start_s() -> float:
    """How long Python takes to start here (before it can run any of kiln's code): the
    longest of 3 starts, as benchmarks/ctrl_c_sweep.py measures it (one low sample on a
    loaded machine would put a delay inside Python's own start-up)."""
    runs = []
    for _ in range(3):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        runs.append(time.monotonic() - started)
    return max(runs)


def _group_left(pgid: int, within_s: float = 3.0) -> list[str]:
    """The processes of group `pgid` still running once they have had `within_s` to go
    (polled: a loaded machine may take longer than a fixed sleep to reap them)."""
    deadline = time.monotonic() + within_s
    while (left := group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.parametrize("after_s", [0.02, 0.1, 0.25])
def test_ctrl_c_while_kiln_starts_is_one_line_and_exit_130(tmp_path, add_model, after_s,
                                                           python_start_s):
    """Ctrl-C in the first second (while Python imports numpy and the compiler) printed
    a traceback."""
    # `run` on an empty cache builds the kernel library (seconds of gcc): kiln is surely
    # still running at every delay, even on an idle machine where compile alone ends
    # in 0.2 s and a late signal lands in Python's own shutdown.
    # A load spike can stretch Python's own start-up past the calibrated delay, so the
    # signal lands before any line of kiln ran (out of kiln's reach; the sweep's
    # "python-start"): then again, later, up to three times.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from ctrl_c_sweep import before_kiln_code

    delay = python_start_s + after_s
    for attempt in range(3):
        proc = _start(["run", str(add_model)], _env(tmp_path / f"cache{attempt}", tmp_path),
                      tmp_path)
        code, _, err, _ = _ctrl_c(proc, delay)
        if not before_kiln_code(err):
            break
        delay *= 2
    _assert_clean_interrupt(code, err)
    assert code == 130                  # kiln's code was running: it reports the interrupt


# -- the host build cache -----------------------------------------------------------------

def test_relative_xdg_cache_home_is_ignored(tmp_path, add_model, warm_kernels):
    """A relative XDG_CACHE_HOME broke the host build with an assembler error; the XDG
    spec says to ignore it, so kiln falls back to ~/.cache."""
    home = tmp_path / "home"
    _cache_with_kernels(warm_kernels, home / ".cache")
    work = tmp_path / "work"
    work.mkdir()
    done = _kiln(["run", str(add_model)], _env("relative/cache", home), work)
    assert done.returncode == 0, done.stderr
    assert "output 0" in done.stdout
    assert not (work / "relative").exists()
    assert len([p for p in (home / ".cache" / "kiln" / "host").iterdir()
                if p.is_dir() and not p.name.startswith("crt-")]) == 1


def test_damaged_host_cache_entry_is_rebuilt(tmp_path, add_model, warm_kernels):
    """A cached shared library cut short (an older kiln killed mid-write, a full disk)
    is rebuilt, not reported as the user's problem; a dead run's staging folder goes."""
    cache = _cache_with_kernels(warm_kernels, tmp_path / "cache")
    env = _env(cache, tmp_path)
    first = _kiln(["run", str(add_model)], env, tmp_path)
    assert first.returncode == 0, first.stderr
    host = cache / "kiln" / "host"
    (entry,) = [p for p in host.iterdir() if p.is_dir() and not p.name.startswith("crt-")]
    (entry / "libkiln_model.so").write_bytes(b"")
    stale = host / f"{STAGING}{entry.name}-dead1234"
    stale.mkdir()
    (stale / "half.o").write_bytes(b"\x7fEL")
    again = _kiln(["run", str(add_model)], env, tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    assert (entry / "libkiln_model.so").stat().st_size > 0
    assert _leftovers(host) == []


@pytest.mark.slow
def test_four_concurrent_host_runs_on_an_empty_cache(tmp_path, add_model):
    """Four `kiln run MODEL` at once on an empty cache: one builds the kernel library
    and the model's library, the others wait and share them; identical outputs. (A
    guard for the locked cache: the host build's single-file rename held already.)"""
    env = _env(tmp_path / "cache", tmp_path)
    procs = [_start(["run", str(add_model)], env, tmp_path) for _ in range(4)]
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]
    for code, out, err in results:
        assert code == 0, err
    assert len({out for _, out, _ in results}) == 1
    host = tmp_path / "cache" / "kiln" / "host"
    assert len([p for p in host.iterdir() if p.is_dir()]) == 2     # kernels + the model
    assert _leftovers(host) == []


# -- the cached host-driven project (kiln profile / kiln run --board B) --------------------

def _project_entries(cache: Path) -> list[Path]:
    root = cache / "kiln" / "projects"
    return [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(STAGING)] \
        if root.exists() else []


@pytest.fixture
def cached_project(tmp_path, add_model) -> tuple[Path, dict[str, str]]:
    """A cache holding the built host-driven project of add_model (kiln profile)."""
    require_tool("make")
    env = _env(tmp_path / "cache", tmp_path)
    done = _kiln(["profile", str(add_model)], env, tmp_path)
    assert done.returncode == 0, done.stderr
    (entry,) = _project_entries(tmp_path / "cache")
    return entry, env


def _damage_cut_manifest(entry: Path) -> None:
    text = (entry / "kiln.json").read_text()
    (entry / "kiln.json").write_text(text[: len(text) // 2])
    shutil.rmtree(entry / "build")


def _damage_half_created(entry: Path) -> None:
    """What an older kiln's interrupted create left: some files, no kiln.json."""
    shutil.rmtree(entry)
    entry.mkdir()
    (entry / "Makefile").write_text("# half\n")
    (entry / "model").mkdir()


def _damage_unbuilt(entry: Path) -> None:
    shutil.rmtree(entry / "build")


@pytest.mark.slow
@pytest.mark.parametrize("damage", [_damage_cut_manifest, _damage_half_created,
                                    _damage_unbuilt])
def test_damaged_cached_project_is_rebuilt(tmp_path, add_model, cached_project, damage):
    """A damaged cache entry poisoned the cache: every later run exited 2 ("holds no
    kiln project … even with --force") until the user deleted it by hand."""
    entry, env = cached_project
    damage(entry)
    stale = entry.parent / f"{STAGING}{entry.name}-dead1234"
    stale.mkdir()
    done = _kiln(["profile", str(add_model)], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((entry / "kiln.json").read_text())["project"]["mode"] == "host-driven"
    assert (entry / "build" / "firmware").is_file()
    assert _leftovers(entry.parent) == []


@pytest.mark.slow
@pytest.mark.parametrize("after_s", [0.9, 1.6])
def test_ctrl_c_during_cached_build_leaves_no_entry(tmp_path, add_model, after_s,
                                                    python_start_s):
    """Ctrl-C while the cached project is created and built: no entry (or a whole one),
    no staging folder, no child left running; the next run works."""
    require_tool("make")
    env = _env(tmp_path / "cache", tmp_path)
    proc = _start(["profile", str(add_model)], env, tmp_path)
    code, _, err, _ = _ctrl_c(proc, python_start_s + after_s)
    if code != 0:
        _assert_clean_interrupt(code, err)
    assert _group_left(proc.pid) == []
    for entry in _project_entries(tmp_path / "cache"):
        assert (entry / "kiln.json").is_file() and (entry / "build" / "firmware").is_file()
    assert _leftovers(tmp_path / "cache") == []
    done = _kiln(["profile", str(add_model)], env, tmp_path)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_four_concurrent_profiles_share_one_cached_project(tmp_path, add_model):
    """Four runs needing the same cached project at once: one builds it, the others wait
    for it; they used to build into the same folder and fail."""
    require_tool("make")
    env = _env(tmp_path / "cache", tmp_path)
    procs = [_start(["profile", str(add_model)], env, tmp_path) for _ in range(4)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    assert len(_project_entries(tmp_path / "cache")) == 1
    assert _leftovers(tmp_path / "cache") == []


@pytest.mark.qemu
@pytest.mark.slow
def test_four_concurrent_qemu_runs_on_an_empty_cache(tmp_path):
    """Two `kiln run MODEL --board mps2-an386` at once on an empty cache: one failed with
    "can't create build/model/model.o", an empty firmware.elf or a linker error."""
    require_tool("qemu-system-arm")
    require_tool("arm-none-eabi-gcc")
    model = model_path("digits_cnn_int8")
    env = _env(tmp_path / "cache", tmp_path)
    procs = [_start(["run", str(model), "--board", "mps2-an386"], env, tmp_path)
             for _ in range(4)]
    results = [(p.wait(timeout=600), p.stdout.read(), p.stderr.read()) for p in procs]
    for code, _, err in results:
        assert code == 0, err
    # The same outputs from every run; the instruction-count line is left out: QEMU's
    # -icount counts of one firmware differ by a few instructions between runs.
    outputs = {"".join(line for line in out.splitlines(True) if line.startswith("output"))
               for _, out, _ in results}
    assert len(outputs) == 1 and next(iter(outputs))
    assert len(_project_entries(tmp_path / "cache")) == 1


# -- kiln tune ---------------------------------------------------------------------------

@pytest.mark.qemu
@pytest.mark.slow
def test_ctrl_c_stops_kiln_tune_at_once_and_keeps_records_valid(tmp_path):
    """Ctrl-C in `kiln tune` waited for the running batches (~30 s on large models).
    SIGINT to kiln alone (not its children): kiln must end its builds and QEMU itself."""
    require_tool("qemu-system-arm")
    require_tool("arm-none-eabi-gcc")
    model = model_path("kws_ref_model")
    records = tmp_path / "records.jsonl"
    proc = _start(["tune", str(model), "--board", "mps2-an386", "-o", str(records),
                   "--workers", "2", "--trials", "8"], _env(tmp_path / "cache", tmp_path),
                  tmp_path)
    deadline = time.monotonic() + 240
    while not (records.exists() and records.stat().st_size) and proc.poll() is None:
        assert time.monotonic() < deadline, "no record written in 240 s"
        time.sleep(0.1)
    time.sleep(0.5)                      # the workers are in their next batches now
    sent = time.monotonic()
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    took = time.monotonic() - sent
    _assert_clean_interrupt(proc.returncode, err)
    assert took < 3.0, f"kiln tune took {took:.1f} s to stop"
    assert _group_left(proc.pid) == []
    text = records.read_text()
    assert text.endswith("\n")
    assert all(json.loads(line)["status"] for line in text.splitlines())


# -- the Ctrl-C sweep, short (benchmarks/ctrl_c_sweep.py runs 20 delays per command) ----

@pytest.mark.slow
def test_ctrl_c_sweep_short(tmp_path):
    """compile, project create (fresh and --force) and quantize (fresh and --force),
    each interrupted at 3 delays: no traceback, no broken output, no litter."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import ctrl_c_sweep

    model_path("digits_cnn_float")                       # skip without the shared models
    results = ctrl_c_sweep.sweep(["compile", "project create", "quantize"], 3, "host",
                                 tmp_path, log=lambda line: None)
    bad = [(name, delay, outcome, detail) for name, rows in results.items()
           for delay, outcome, detail in rows if outcome in ("traceback", "broken", "error")]
    assert bad == []
