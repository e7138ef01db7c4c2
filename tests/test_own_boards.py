"""Boards of one's own (issue 15): a board file outside kiln's tree, named by its path or
found through KILN_BOARD_PATH, works everywhere a board name does, and a project made
with it keeps working once the file is gone."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from kiln.compiler.cli import main
from kiln.compiler.errors import BoardError, KilnError
from kiln.compiler.paths import boards_dir
from kiln.project_gen import create_project
from kiln.project_gen.boards import (board_digest, board_toml, get_board, is_kiln_board,
                                     list_boards, load_board_file, new_board_toml, parse_board)
from kiln.project_gen.project import BOARD_FILE, Project
from kiln.project_gen.rpc_cli import host_driven_project

from conftest import require_tool

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits_int8.tflite"
NAME = "my-an386"


def own_board(folder: Path, name: str = NAME, file_name: str | None = None) -> Path:
    """boards/mps2-an386.toml copied to folder/<file_name>, its name changed to `name`."""
    text = (boards_dir() / "mps2-an386.toml").read_text()
    assert 'name = "mps2-an386"' in text
    path = folder / (file_name or f"{name}.toml")
    path.write_text(text.replace('name = "mps2-an386"', f'name = "{name}"'))
    return path


@pytest.fixture
def cross_tools():
    require_tool("arm-none-eabi-gcc")


@pytest.fixture
def qemu_tools(cross_tools):
    require_tool("qemu-system-arm")


@pytest.fixture
def board_path(tmp_path, monkeypatch):
    """A folder on KILN_BOARD_PATH (after a relative entry, which is ignored) holding
    my-an386.toml."""
    folder = tmp_path / "boards"
    folder.mkdir()
    own_board(folder)
    monkeypatch.setenv("KILN_BOARD_PATH", os.pathsep.join(["relative/boards", str(folder)]))
    return folder


# --- finding boards -----------------------------------------------------------------------

def test_a_board_file_by_path_whatever_its_file_name(tmp_path):
    path = own_board(tmp_path, file_name="anything.toml")
    board = get_board(str(path))
    assert board.name == NAME and board.source == path and not is_kiln_board(board)
    assert get_board(path) == board                       # a Path too
    # the facts are mps2-an386's: only the name differs
    assert board.cpu_flags == get_board("mps2-an386").cpu_flags
    art = kc.compile(str(DIGITS), board=str(path))
    assert art.board == NAME and art.report["board"] == NAME
    # the same C as for kiln's board with the same facts
    assert art.files["model.c"] == kc.compile(str(DIGITS), board="mps2-an386").files["model.c"]


def test_kiln_board_path_is_searched_first_and_relative_entries_ignored(board_path, tmp_path,
                                                                        monkeypatch):
    assert get_board(NAME).source == board_path / f"{NAME}.toml"
    assert NAME in [b.name for b in list_boards()]
    # a folder of KILN_BOARD_PATH overrides kiln's board of the same name
    own_board(board_path, name="mps2-an385").write_text(
        (boards_dir() / "mps2-an385.toml").read_text().replace("25_000_000", "50_000_000"))
    assert get_board("mps2-an385").clock_hz == 50_000_000
    # a relative entry is ignored, like XDG's: the board must not depend on the folder
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KILN_BOARD_PATH", "boards")
    with pytest.raises(BoardError, match="unknown board 'my-an386'"):
        get_board(NAME)


def test_in_kiln_board_path_the_file_is_named_after_the_board(board_path):
    own_board(board_path, name="other", file_name="mine.toml")
    with pytest.raises(BoardError, match=r"mine\.toml: name 'other' must match the file name"):
        get_board("mine")


@pytest.mark.parametrize("kind", ["fifo", "dir", "missing", "not-toml", "bad-value"])
def test_hostile_board_paths_are_one_line(tmp_path, capsys, kind):
    path = tmp_path / "b.toml"
    if kind == "fifo":
        os.mkfifo(path)                 # must not hang
    elif kind == "dir":
        path.mkdir()
    elif kind == "not-toml":
        path.write_bytes(b"\x7fELF\x00\x01")
    elif kind == "bad-value":
        own_board(tmp_path, file_name="b.toml")
        path.write_text(path.read_text().replace("dsp = true", 'dsp = "yes"'))
    with pytest.raises(KilnError) as e:
        get_board(str(path))
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    assert main(["compile", str(DIGITS), "--board", str(path), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kiln: error: ") and "Traceback" not in err
    assert not (tmp_path / "o").exists()


# --- board files kiln writes ----------------------------------------------------------------

def test_board_toml_round_trips_every_board(tmp_path):
    import dataclasses

    odd = dataclasses.replace(get_board("nucleo-l4r5zi"), name="odd",
                              description='a "quoted" \\ back slash, ünïcode 𝔵 {hex}')
    for board in [*list_boards(), odd]:
        path = tmp_path / f"{board.name}.toml"
        path.write_text(board_toml(board, "a header\nof two lines"))
        assert load_board_file(path) == board, board.name


def test_kiln_boards_new_writes_a_commented_board_that_loads(tmp_path, capsys):
    out = tmp_path / "myboard.toml"
    assert main(["boards", "--new", "myboard", "--like", "nucleo-l4r5zi", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.count("\n# ") >= 10                         # every key explained
    board = load_board_file(out)
    like = get_board("nucleo-l4r5zi")
    assert board.name == "myboard" and board.init == like.init and board.flash == like.flash
    assert parse_board(tomllib.loads(board_toml(board))) == board
    # never over the user's file without --force (and that file is left as it was)
    out.write_text("# mine\n")
    capsys.readouterr()
    assert main(["boards", "--new", "myboard", "-o", str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_text() == "# mine\n"
    assert main(["boards", "--new", "myboard", "-o", str(out), "--force"]) == 0
    assert load_board_file(out).qemu.machine == "mps2-an386"      # --like's default
    for bad in (["--new", "My Board", "-o", str(tmp_path / "x.toml")],
                ["--new", "x", "--like", "host", "-o", str(tmp_path / "x.toml")],
                ["--new", "x"]):
        capsys.readouterr()
        assert main(["boards", *bad]) == 2
        assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "x.toml").exists()
    new_board_toml("x", "mps2-an386")


def test_kiln_boards_lists_the_boards_of_kiln_board_path(board_path, capsys):
    assert main(["boards", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[NAME]["file"] == str(board_path / f"{NAME}.toml")
    assert rows["mps2-an386"]["file"] is None


# --- projects -----------------------------------------------------------------------------

def test_a_project_keeps_its_board_when_the_file_is_gone(tmp_path):
    path = own_board(tmp_path)
    project = create_project(str(DIGITS), board=str(path), out_dir=tmp_path / "p")
    entry = project.manifest["project"]
    assert entry["board"] == NAME and entry["board_file"] == BOARD_FILE
    assert BOARD_FILE in entry["files"]
    path.unlink()
    again = Project.open(tmp_path / "p")
    assert again.board == get_board(str(tmp_path / "p" / BOARD_FILE)) == project.board
    # kiln's own boards are recorded by name, as before (no copy)
    plain = create_project(str(DIGITS), board="mps2-an386", out_dir=tmp_path / "q")
    assert "board_file" not in plain.manifest["project"]
    assert not (tmp_path / "q" / BOARD_FILE).exists()
    # a copy that names another board than kiln.json does is refused, one line
    copy = tmp_path / "p" / BOARD_FILE
    copy.write_text(copy.read_text().replace(f'name = "{NAME}"', 'name = "other"'))
    with pytest.raises(BoardError, match="kiln.json says the project is for 'my-an386'"):
        Project.open(tmp_path / "p")


def test_the_python_api_takes_a_board_built_in_python(tmp_path):
    """A Board that no file holds (dataclasses.replace of a known one) goes through
    compile and create_project, and its project opens later."""
    import dataclasses

    board = dataclasses.replace(get_board("mps2-an386"), name="py-board", source=None)
    art = kc.compile(str(DIGITS), board=board)
    project = create_project(art, board, tmp_path / "p")
    assert Project.open(tmp_path / "p").board == board
    assert project.manifest["project"]["build_id"] != \
        create_project(kc.compile(str(DIGITS), board="mps2-an386"), "mps2-an386",
                       tmp_path / "q").manifest["project"]["build_id"]


@pytest.mark.cross
@pytest.mark.slow
def test_the_cached_project_key_holds_the_board_file_content(tmp_path, cross_tools):
    path = own_board(tmp_path)
    cache = tmp_path / "cache"
    first = host_driven_project(DIGITS, str(path), cache=cache)
    assert first.board.name == NAME and first.manifest["project"]["board_file"] == BOARD_FILE
    path.write_text(path.read_text().replace("stack_bytes", "# stack").replace(
        'runs_on = "qemu"', 'runs_on = "qemu"\nstack_bytes = 8192'))
    second = host_driven_project(DIGITS, str(path), cache=cache)
    assert second.path != first.path and second.board.stack_bytes == 8192
    assert board_digest(first.board) != board_digest(second.board)
    assert NAME in second.path.name and "/" not in second.path.name[len(str(cache)):]


# --- end to end on QEMU ---------------------------------------------------------------------

@pytest.mark.cross
@pytest.mark.qemu
@pytest.mark.slow
def test_an_own_board_runs_end_to_end_on_qemu_by_path_and_by_kiln_board_path(
        board_path, tmp_path, capsys, qemu_tools):
    path = board_path / f"{NAME}.toml"
    outs = []
    for board in (str(path), NAME):             # by path, then by KILN_BOARD_PATH
        out = tmp_path / f"p-{len(outs)}"
        assert main(["project", "create", str(DIGITS), "--board", board, "-o", str(out)]) == 0
        assert main(["project", "build", str(out)]) == 0
        assert main(["run", str(out), "--output", str(tmp_path / f"o{len(outs)}.npz")]) == 0
        text = capsys.readouterr().out
        assert f"per inference on {NAME}" in text
        outs.append(np.load(tmp_path / f"o{len(outs)}.npz")["output_0"])
    # the same outputs as kiln's own mps2-an386, with the file gone from the path
    shutil.move(path, tmp_path / "elsewhere.toml")
    assert main(["run", str(tmp_path / "p-0")]) == 0
    assert main(["run", str(DIGITS), "--board", "mps2-an386",
                 "--output", str(tmp_path / "ref.npz")]) == 0
    expected = np.load(tmp_path / "ref.npz")["output_0"]
    assert all(np.array_equal(o, expected) for o in outs), (outs, expected)
    # over RPC (the cached host-driven project) by path
    assert main(["run", str(DIGITS), "--board", str(tmp_path / "elsewhere.toml"),
                 "--output", str(tmp_path / "rpc.npz")]) == 0
    assert np.array_equal(np.load(tmp_path / "rpc.npz")["output_0"], expected)
    assert "--board" not in capsys.readouterr().err
