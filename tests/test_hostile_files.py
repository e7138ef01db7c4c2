"""Hostile file systems and interrupted or concurrent runs (issue 19, data loss).

kiln never writes through a symbolic link out of its output, never replaces a file the
command read, writes every output folder in a staging folder swapped into place (an
interrupted `project create` leaves the old project or none), and serialises the
commands that change one project. Each test names the attack it replays; most drive the
real CLI on the host board (fast, no cross toolchain).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, models_root, require_tool, one_error, run_kiln as kiln
from kiln.compiler.fsutil import STAGING_PREFIX
from kiln.compiler.outdir import LOCK_FILE
from kiln.project_gen import Project
from kiln.project_gen.project import SAMPLES_FILE

DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"
DIGITS_X = REPO / "examples" / "digits" / "digits_test_x.npy"
# What the `kiln` console script runs (pyproject.toml [project.scripts]).
KILN = [sys.executable, "-c", "import sys; from kiln.launcher import main; sys.exit(main())"]


def tree(root: Path) -> dict[str, object]:
    """Every entry under root without following links: file bytes, link targets, folders
    (not the lock file, which kiln creates in a project it changes)."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + [f for f in filenames if f != LOCK_FILE]:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            out[rel] = (f"-> {os.readlink(p)}" if p.is_symlink() else
                        "dir" if p.is_dir() else p.read_bytes())
    return out


def outside(tmp_path: Path) -> Path:
    """A folder of the user's outside the project, holding one precious file."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "precious.txt").write_text("the user's own file\n")
    return home


def create(capsys, out: Path, *extra) -> tuple[int, str, str]:
    return kiln(capsys, "project", "create", DIGITS, "--board", "host", "-o", out, *extra)


def edit_manifest(project: Path, change) -> None:
    path = project / "kiln.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


# --- project create --force never follows a link -----------------------------------------

def test_force_writes_no_kiln_file_through_a_linked_folder(tmp_path, capsys):
    """src/ and crt/ replaced by links to the user's folders: --force used to write
    main.c and the runtime into them."""
    home = outside(tmp_path)
    for name in ("src", "crt"):
        (home / name).mkdir()
        (home / name / "main.c").write_text("my main\n")
    pk = tmp_path / "pk"
    assert create(capsys, pk)[0] == 0
    for name in ("src", "crt"):
        shutil.rmtree(pk / name)
        (pk / name).symlink_to(home / name)
    before = tree(home)
    assert create(capsys, pk, "--force")[0] == 0
    assert tree(home) == before
    for name in ("src", "crt"):
        assert not (pk / name).is_symlink() and (pk / name).is_dir()
    assert (pk / "src" / "main.c").read_text() != "my main\n"


def test_force_deletes_no_stale_file_through_a_link(tmp_path, capsys):
    """kiln.json lists a stale file under a folder that is a link to the user's folder
    (or with `..`, or as an absolute path): --force used to delete the user's file."""
    home = outside(tmp_path)
    pk = tmp_path / "pk"
    assert create(capsys, pk)[0] == 0
    (pk / "notes").symlink_to(home)
    listed = ["notes/precious.txt", "../home/precious.txt", str(home / "precious.txt")]
    edit_manifest(pk, lambda doc: doc["project"]["files"].extend(listed))
    before = tree(home)
    code, out, _ = create(capsys, pk, "--force")
    assert code == 0 and tree(home) == before
    assert (pk / "notes").is_symlink()               # the user's link is left alone too


def test_force_writes_no_kiln_file_through_a_link_or_hard_link(tmp_path, capsys):
    """A kiln file that is a symbolic or a hard link to a user's file: writing it in
    place changed the user's file."""
    home = outside(tmp_path)
    (home / "Makefile").write_text("my makefile\n")
    pk = tmp_path / "pk"
    assert create(capsys, pk)[0] == 0
    (pk / "Makefile").unlink()
    (pk / "Makefile").hardlink_to(home / "Makefile")
    (pk / "README.md").unlink()
    (pk / "README.md").symlink_to(home / "precious.txt")
    before = tree(home)
    assert create(capsys, pk, "--force")[0] == 0
    assert tree(home) == before
    assert (pk / "Makefile").stat().st_ino != (home / "Makefile").stat().st_ino
    assert not (pk / "README.md").is_symlink()


@pytest.mark.slow
def test_a_linked_build_folder_is_dropped_and_never_built_into(tmp_path, capsys):
    """build/ as a link to the user's folder: --force kept it and `make` then wrote the
    objects and the firmware there."""
    require_tool("cc")
    home = outside(tmp_path)
    pk = tmp_path / "pk"
    assert create(capsys, pk)[0] == 0
    (pk / "build").symlink_to(home)
    before = tree(home)
    assert create(capsys, pk, "--force")[0] == 0
    assert not (pk / "build").exists()
    assert kiln(capsys, "project", "build", pk)[0] == 0
    assert tree(home) == before and (pk / "build" / "firmware").is_file()
    # A link planted in build/ after that: the build refuses rather than follow it.
    shutil.rmtree(pk / "build" / "model")
    (pk / "build" / "model").symlink_to(home)
    code, _, err = kiln(capsys, "project", "build", pk)
    assert code == 2 and "is a symbolic link" in one_error(err)
    assert tree(home) == before


def test_a_project_folder_that_is_a_link_is_refused(tmp_path, capsys):
    """-o naming a link to an empty folder (created into it) or to a project (replaced
    through the link): kiln replaces its output folder whole, so it refuses the link."""
    empty, pk = tmp_path / "empty", tmp_path / "pk"
    empty.mkdir()
    assert create(capsys, pk)[0] == 0
    before = tree(pk)
    for target, force in ((empty, []), (pk, ["--force"])):
        link = tmp_path / f"link-{target.name}"
        link.symlink_to(target)
        code, _, err = create(capsys, link, *force)
        assert code == 2 and "is a symbolic link" in one_error(err)
    assert not any(empty.iterdir()) and tree(pk) == before


def test_set_inputs_writes_no_file_through_a_linked_folder(tmp_path, capsys):
    """`kiln run DIR --input` bakes src/kiln_inputs.c: not into a linked src/."""
    home = outside(tmp_path)
    pk = tmp_path / "pk"
    assert create(capsys, pk)[0] == 0
    shutil.move(pk / "src", home / "src")
    (pk / "src").symlink_to(home / "src")
    before = tree(home)
    code, _, err = kiln(capsys, "run", pk, "--input", DIGITS_X)
    assert code == 2 and "is a symbolic link" in one_error(err)
    assert tree(home) == before


# --- never replace a file the command read -----------------------------------------------

@pytest.fixture
def model(tmp_path) -> Path:
    m = tmp_path / "m.tflite"
    shutil.copy(DIGITS, m)
    (tmp_path / "hard.tflite").hardlink_to(m)
    (tmp_path / "soft.tflite").symlink_to(m)
    return m


def test_run_output_never_replaces_the_model_or_an_input(model, tmp_path, capsys):
    before = model.read_bytes()
    x = tmp_path / "x.npy"
    np.save(x, np.load(DIGITS_X)[:1])
    for out in (model, tmp_path / "hard.tflite", tmp_path / "soft.tflite",
                tmp_path / "." / "m.tflite"):
        code, _, err = kiln(capsys, "run", model, "--output", out)
        assert code == 2 and "a file this command reads" in one_error(err)
    code, _, err = kiln(capsys, "run", model, "--input", x, "--output", x)
    assert code == 2 and "a file this command reads" in one_error(err)
    assert model.read_bytes() == before and np.load(x).shape == (1, 8, 8, 1)


def test_run_output_never_replaces_a_project_manifest(tmp_path, capsys):
    pk = tmp_path / "pk"
    assert create(capsys, pk)[0] == 0
    before = (pk / "kiln.json").read_bytes()
    code, _, err = kiln(capsys, "run", pk, "--output", pk / "kiln.json")
    assert code == 2 and "a file this command reads" in one_error(err)
    assert (pk / "kiln.json").read_bytes() == before


def test_profile_json_never_replaces_the_model(model, tmp_path, capsys):
    before = model.read_bytes()
    for out in (model, tmp_path / "hard.tflite"):
        code, _, err = kiln(capsys, "profile", model, "--json", out)
        assert code == 2 and "a file this command reads" in one_error(err)
    assert model.read_bytes() == before


def test_compile_never_replaces_the_model_in_its_output_folder(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    m = d / "weights.c"                  # a model whose name is one compile writes
    shutil.copy(DIGITS, m)
    code, _, err = kiln(capsys, "compile", m, "-o", d, "--force")
    assert code == 2 and "a file this command reads" in one_error(err)
    assert m.read_bytes() == DIGITS.read_bytes()
    shutil.copy(DIGITS, d / "model.tflite")   # any other name stays beside the output
    assert kiln(capsys, "compile", d / "model.tflite", "-o", d, "--force")[0] == 0
    assert (d / "model.tflite").read_bytes() == DIGITS.read_bytes()


def test_project_force_keeps_the_model_and_inputs_it_reads(tmp_path, capsys):
    """The model and --input files inside the project folder are not kiln files, even
    when a hand-edited kiln.json lists them as stale."""
    pk = tmp_path / "pk"
    assert create(capsys, pk)[0] == 0
    m, x = pk / "digits.tflite", pk / "x.npy"
    shutil.copy(DIGITS, m)
    np.save(x, np.load(DIGITS_X)[:2])
    edit_manifest(pk, lambda doc: doc["project"]["files"].extend(["digits.tflite", "x.npy"]))
    code, out, _ = kiln(capsys, "project", "create", m, "--board", "host", "-o", pk,
                        "--input", x, "--force")
    assert code == 0 and "digits.tflite" in out.split("left alone")[1]
    assert m.read_bytes() == DIGITS.read_bytes() and np.load(x).shape[0] == 2


def test_quantize_output_never_replaces_the_calibration_data(tmp_path, capsys):
    src = models_root() / "digits"
    model, calib = src / "digits_cnn_float.tflite", src / "digits_calib_x.npy"
    if not (model.exists() and calib.exists()):
        pytest.skip(f"float digits model or calibration data not found under {src}")
    c = tmp_path / "calib.npy"
    shutil.copy(calib, c)
    code, _, err = kiln(capsys, "quantize", model, "--calibration", c, "-o", c, "--force")
    assert code == 2 and "a file this command reads" in one_error(err)
    assert c.read_bytes() == calib.read_bytes()


def test_tune_creates_no_file_where_a_dangling_link_points(tmp_path, capsys, monkeypatch):
    import kiln.compiler.tune.cli as tune_cli

    def no_tuning(*args, **kwargs):
        raise tune_cli.InputError("stopped by the test")
    monkeypatch.setattr(tune_cli, "tune", no_tuning)
    link = tmp_path / "records.jsonl"
    link.symlink_to(tmp_path / "home" / "made.jsonl")
    (tmp_path / "home").mkdir()
    code, _, err = kiln(capsys, "tune", DIGITS, "--board", "host", "-o", link)
    assert code == 2 and not (tmp_path / "home" / "made.jsonl").exists()


# --- kiln.json of the wrong shape is one line --------------------------------------------

@pytest.mark.parametrize("damage", [
    lambda d: d["project"].pop("mode"),
    lambda d: d["project"].pop("build_id"),
    lambda d: d.pop("outputs"),
    lambda d: d.pop("inputs"),
    lambda d: d.__setitem__("inputs", "x"),
    lambda d: d["inputs"][0].__setitem__("shape", ["a"]),
    lambda d: d["outputs"][0].__setitem__("dtype", "complex"),
    lambda d: d["project"].__setitem__("files", 3),
    lambda d: d.__setitem__("tensors", [1]),
], ids=["mode", "build_id", "outputs", "inputs", "inputs-type", "shape", "dtype", "files",
        "tensors"])
def test_a_manifest_missing_a_field_is_one_line(tmp_path, capsys, damage):
    pk = tmp_path / "pk"
    assert create(capsys, pk)[0] == 0
    edit_manifest(pk, damage)
    for argv in (["project", "build", pk], ["run", pk]):
        code, _, err = kiln(capsys, *argv)
        assert code == 2 and "is damaged" in one_error(err) and "--force" in err
    assert create(capsys, pk, "--force")[0] == 0      # and the way out works
    Project.open(pk)


# --- interrupted project create: the old project or none ---------------------------------

def _interrupt_after(monkeypatch, n: int) -> None:
    """Ctrl-C after the n-th file kiln writes (Path.write_text: the project's text files)."""
    real = pathlib.Path.write_text
    count = [0]

    def write_text(self, *args, **kwargs):
        count[0] += 1
        if count[0] > n:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)
    monkeypatch.setattr(pathlib.Path, "write_text", write_text)


@pytest.mark.parametrize("n", [0, 4, 9])
def test_interrupted_create_leaves_nothing_and_a_rerun_works(tmp_path, capsys, monkeypatch, n):
    pk = tmp_path / "pk"
    with monkeypatch.context() as m:
        _interrupt_after(m, n)
        assert create(capsys, pk)[0] == 130
    assert not any(tmp_path.iterdir())                # no project, no staging leftovers
    assert create(capsys, pk)[0] == 0
    Project.open(pk)


@pytest.mark.parametrize("n", [0, 5, 10])
def test_interrupted_force_leaves_the_old_project(tmp_path, capsys, monkeypatch, n):
    pk = tmp_path / "pk"
    assert create(capsys, pk, "--mode", "host-driven")[0] == 0
    (pk / "NOTES.md").write_text("mine")
    (pk / "data").mkdir()
    (pk / "data" / "a.bin").write_bytes(b"\x01")
    before = tree(pk)
    with monkeypatch.context() as m:
        _interrupt_after(m, n)
        assert create(capsys, pk, "--force")[0] == 130
    assert tree(pk) == before and Project.open(pk).mode == "host-driven"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(STAGING_PREFIX)]
    code, out, _ = create(capsys, pk, "--force")
    assert code == 0 and Project.open(pk).mode == "standalone"
    assert (pk / "NOTES.md").read_text() == "mine" and (pk / "data" / "a.bin").exists()


def test_interrupt_while_carrying_user_files_loses_none(tmp_path, capsys, monkeypatch):
    import kiln.compiler.outdir as outdir

    pk = tmp_path / "pk"
    assert create(capsys, pk)[0] == 0
    for i in range(3):
        (pk / f"mine{i}.txt").write_text(str(i))
    before = tree(pk)
    real, count = outdir.carry, [0]

    def carry(src, dst):
        count[0] += 1
        if count[0] == 2:
            raise KeyboardInterrupt
        real(src, dst)
    monkeypatch.setattr(outdir, "carry", carry)
    assert create(capsys, pk, "--force")[0] == 130
    assert tree(pk) == before


def test_staging_leftovers_of_a_killed_run_do_not_block_the_next(tmp_path, capsys):
    pk = tmp_path / "pk"
    pk.mkdir()
    (pk / f"{STAGING_PREFIX}123-kiln.json").write_text("half")   # a killed atomic write
    assert create(capsys, pk)[0] == 0                 # "empty" but for kiln's leftovers
    (pk / f"{STAGING_PREFIX}456-kiln.json").write_text("half")
    code, out, _ = create(capsys, pk, "--force")
    assert code == 0 and STAGING_PREFIX not in out
    assert not [p for p in pk.iterdir() if p.name.startswith(STAGING_PREFIX)]


def test_compile_output_is_swapped_whole(tmp_path, capsys, monkeypatch):
    out = tmp_path / "c"
    assert kiln(capsys, "compile", DIGITS, "-o", out)[0] == 0
    (out / "notes.txt").write_text("keep")
    (out / "model.c").unlink()
    (out / "model.c").symlink_to(outside(tmp_path) / "precious.txt")
    before = tree(out)
    with monkeypatch.context() as m:
        _interrupt_after(m, 2)
        assert kiln(capsys, "compile", DIGITS, "-o", out)[0] == 130
    assert tree(out) == before
    assert kiln(capsys, "compile", DIGITS, "-o", out)[0] == 0
    assert (tmp_path / "home" / "precious.txt").read_text() == "the user's own file\n"
    assert (out / "notes.txt").read_text() == "keep" and not (out / "model.c").is_symlink()


# --- concurrent builds of one project ----------------------------------------------------

@pytest.mark.slow
def test_concurrent_project_builds_all_succeed(tmp_path, capsys):
    """Three `kiln project build` of one project at once used to fail 2 tries in 3 (an
    empty or half-linked build/firmware: "not a little-endian ELF file")."""
    require_tool("cc")
    for attempt in range(2):
        pk = tmp_path / f"pk{attempt}"
        assert create(capsys, pk)[0] == 0
        procs = [subprocess.Popen([*KILN, "project", "build", str(pk)], text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(3)]
        results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
        for out, err, code in results:
            assert code == 0, err
        assert (pk / "build" / "firmware").stat().st_size > 0
        assert "size" in Project.open(pk).manifest


def test_create_force_waits_for_the_project_lock(tmp_path, capsys):
    """A build holds the project's lock: --force waits for it instead of swapping the
    folder from under make."""
    import threading

    from kiln.project_gen import create_project
    from kiln.project_gen.project import project_lock

    pk = tmp_path / "pk"
    assert create(capsys, pk)[0] == 0
    done = []
    worker = threading.Thread(target=lambda: done.append(
        create_project(DIGITS, board="host", out_dir=pk, mode="host-driven", force=True)))
    with project_lock(pk):
        worker.start()
        worker.join(1.0)
        assert worker.is_alive() and Project.open(pk).mode == "standalone"
    worker.join(60)
    assert done and Project.open(pk).mode == "host-driven"


@pytest.mark.slow
def test_a_build_after_create_force_keeps_the_new_manifest(tmp_path, capsys):
    """A Project opened before `create --force` replaced the folder builds what is there
    now and never writes its stale kiln.json beside the new model's files."""
    require_tool("cc")
    pk = tmp_path / "pk"
    assert create(capsys, pk)[0] == 0
    stale = Project.open(pk)
    assert create(capsys, pk, "--mode", "host-driven", "--force")[0] == 0
    stale.build()
    fresh = Project.open(pk)
    assert fresh.mode == "host-driven" == stale.mode and "size" in fresh.manifest
    assert SAMPLES_FILE not in fresh.manifest["project"]["files"]


# --- the real Ctrl-C: SIGINT to a running `kiln project create` --------------------------

def _default_sigint() -> None:
    """A background job of a shell starts with SIGINT ignored; Python then never raises
    KeyboardInterrupt. The child takes Ctrl-C as from a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _complete(pk: Path) -> bool:
    project = Project.open(pk)
    return all((pk / rel).is_file() for rel in project.manifest["project"]["files"])


def _before_kiln_ran(err: str) -> bool:
    """Whether the interrupt's report shows it landed in Python's start-up: site's fatal
    error, or a traceback with no frame in kiln's source (only the -c line and importlib)."""
    if "init_import_site" in err:
        return True
    kiln_source = tuple(f'File "{REPO / part}/' for part in ("launcher", "compiler", "project_gen"))
    frames = [line.strip() for line in err.splitlines() if line.lstrip().startswith('File "')]
    return bool(frames) and not any(line.startswith(kiln_source) for line in frames)


@pytest.mark.slow
@pytest.mark.parametrize("force", [False, True])
def test_sigint_during_project_create(tmp_path, capsys, force):
    pk = tmp_path / "pk"
    if force:
        assert create(capsys, pk, "--mode", "host-driven")[0] == 0
        old = tree(pk)
    argv = [*KILN, "project", "create", str(DIGITS), "--board", "host", "-o", str(pk)] + \
        (["--force"] if force else [])
    for delay in (0.05, 0.3, 0.6, 1.0, 2.0):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_default_sigint)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        # Python's own start-up (site, the import machinery finding kiln.launcher) is out
        # of kiln's reach (kiln.launcher): a signal there ends the process before any line
        # of kiln runs. From the first line of kiln's code on, a Ctrl-C is one line.
        if not _before_kiln_ran(err):
            assert "Traceback" not in err, (delay, err)
            assert proc.returncode in (0, 130) or (proc.returncode == -signal.SIGINT
                                                   and not err.strip()), (delay, err)
        if not os.path.lexists(pk):
            assert not force, delay
        elif force and tree(pk) == old:
            pass
        else:
            assert _complete(pk) and Project.open(pk).mode == "standalone", delay
        # The next run works: --force over a complete project, plain over none.
        rerun = ["--force"] if os.path.lexists(pk) else []
        assert create(capsys, pk, *rerun)[0] == 0 and _complete(pk)
        if force:
            assert create(capsys, pk, "--mode", "host-driven", "--force")[0] == 0
            old = tree(pk)
        else:
            shutil.rmtree(pk)
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(STAGING_PREFIX)]
