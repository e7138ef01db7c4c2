"""Projects on the host board (system C compiler): create, build, run, refuse, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import REPO, model_path, require_tool
from reference import run_reference

from kiln.compiler import compile, load
from kiln.compiler.cli import main as kiln_main
from kiln.compiler.errors import BoardError, InputError, KilnError
from kiln.project_gen import Project, create_project

DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"
DIGITS_X = REPO / "examples" / "digits" / "digits_test_x.npy"


@pytest.fixture(scope="module")
def digits_art():
    return compile(load(DIGITS), board="host")


def test_host_project_runs_bit_exact(tmp_path, digits_art):
    require_tool("cc")
    x = np.load(DIGITS_X)[:5]
    p = create_project(digits_art, board="host", out_dir=tmp_path / "p", inputs=[x])
    report = p.build()
    assert report.weights > 0 and report.arena == digits_art.report["arena_bytes"]
    r = p.run()
    ref = np.concatenate([run_reference(DIGITS.read_bytes(), xi[None])[0] for xi in x])
    np.testing.assert_array_equal(r.outputs[0], ref)
    assert r.unit == "ns" and r.cycles is None and len(r.ticks) == 5
    manifest = json.loads((tmp_path / "p" / "kiln.json").read_text())
    assert manifest["project"]["board"] == "host" and manifest["size"]["weights"] == report.weights
    assert manifest["arena_bytes"] == digits_art.report["arena_bytes"]


def test_run_with_new_inputs_rebakes_them(tmp_path, digits_art):
    require_tool("cc")
    p = create_project(digits_art, board="host", out_dir=tmp_path / "p")
    x = np.load(DIGITS_X)[7]
    r = p.run(x)
    np.testing.assert_array_equal(r.outputs[0], run_reference(DIGITS.read_bytes(), x[None])[0])
    assert Project.open(tmp_path / "p").manifest["project"]["inputs"] == "given"


def test_refuses_a_non_empty_directory_without_force(tmp_path, digits_art):
    out = tmp_path / "p"
    create_project(digits_art, board="host", out_dir=out)
    with pytest.raises(InputError, match="is not empty.*--force"):
        create_project(digits_art, board="host", out_dir=out)
    (out / "stale.txt").write_text("old")
    create_project(digits_art, board="host", out_dir=out, force=True)
    assert (out / "stale.txt").read_text() == "old"     # --force replaces kiln's files only


def test_force_never_deletes_a_directory_kiln_did_not_make(tmp_path, digits_art):
    (tmp_path / "precious.txt").write_text("mine")
    with pytest.raises(InputError, match="holds no kiln project"):
        create_project(digits_art, board="host", out_dir=tmp_path, force=True)
    assert (tmp_path / "precious.txt").read_text() == "mine"


def test_bad_options_leave_nothing_behind(tmp_path, digits_art):
    with pytest.raises(InputError, match="mode must be"):
        create_project(digits_art, board="host", out_dir=tmp_path / "a", mode="flashy")
    with pytest.raises(InputError, match="shape"):
        create_project(digits_art, board="host", out_dir=tmp_path / "b",
                       inputs=[np.zeros(5, np.int8)])
    with pytest.raises(BoardError, match="compiled for board 'host'"):
        create_project(digits_art, board="mps2-an386", out_dir=tmp_path / "c")
    assert not any((tmp_path / d).exists() for d in "abc")


def test_ad01_does_not_fit_lm3s6965evb(tmp_path):
    with pytest.raises(BoardError) as e:
        create_project(model_path("ad01_int8"), board="lm3s6965evb", out_dir=tmp_path / "p")
    assert str(e.value).startswith("ad01_int8 does not fit lm3s6965evb: FLASH overflows by ")
    assert not (tmp_path / "p").exists()


def test_host_driven_project_has_the_rpc_server(tmp_path, digits_art):
    require_tool("cc")
    p = create_project(digits_art, board="host", out_dir=tmp_path / "p", mode="host-driven")
    main_c = (tmp_path / "p" / "src" / "main.c").read_text()
    assert "kiln_rpc_serve();" in main_c
    assert (tmp_path / "p" / "crt" / "rpc" / "kiln_rpc_server.c").exists()
    config = (tmp_path / "p" / "src" / "kiln_config.h").read_text()
    assert f'KILN_BUILD_ID "{p.manifest["project"]["build_id"]}"' in config
    p.build()
    with pytest.raises(KilnError, match="standalone"):
        p.run()


# ---- the CLI ----------------------------------------------------------------------

def test_cli_boards(capsys):
    assert kiln_main(["boards"]) == 0
    out = capsys.readouterr().out
    for name in ("mps2-an386", "microbit", "nucleo-l4r5zi", "host"):
        assert name in out
    assert "build only" in out


def test_cli_create_build_run(tmp_path, capsys):
    require_tool("cc")
    out = tmp_path / "p"
    assert kiln_main(["project", "create", str(DIGITS), "--board", "host", "-o", str(out),
                      "--input", str(DIGITS_X)]) == 0
    assert Project.open(out).manifest["project"]["samples"] == 360
    assert kiln_main(["project", "create", str(DIGITS), "--board", "host", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--force" in err
    assert kiln_main(["project", "create", str(DIGITS), "--board", "host", "-o", str(out),
                      "--force"]) == 0
    assert kiln_main(["project", "build", str(out)]) == 0
    assert "arena" in capsys.readouterr().out
    npz = tmp_path / "out.npz"
    assert kiln_main(["run", str(out), "--output", str(npz)]) == 0
    y = np.load(npz)["output_0"]
    assert y.dtype == np.int8 and y.shape == (1, 10)


def test_cli_overflow_is_one_line_and_exit_2(tmp_path, capsys):
    code = kiln_main(["project", "create", str(model_path("ad01_int8")), "--board",
                      "lm3s6965evb", "-o", str(tmp_path / "p")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "FLASH overflows by " in err[0] and "bytes" in err[0]


def test_cli_not_a_project(tmp_path):
    assert kiln_main(["project", "build", str(tmp_path)]) == 2


def test_connect_runs_a_host_driven_project_over_rpc(tmp_path, digits_art):
    require_tool("cc")
    x = np.load(DIGITS_X)[3]
    p = create_project(digits_art, board="host", out_dir=tmp_path / "p", mode="host-driven")
    with p.connect() as session:
        assert session.device.build_id == p.manifest["project"]["build_id"]
        [y] = session.run(x[None])
    np.testing.assert_array_equal(y, run_reference(DIGITS.read_bytes(), x[None])[0])


def test_run_command_on_a_host_driven_project(tmp_path, digits_art, capsys):
    import argparse

    from kiln.project_gen.cli_commands import cmd_run, wants_project_run

    require_tool("cc")
    create_project(digits_art, board="host", out_dir=tmp_path / "p", mode="host-driven")
    args = argparse.Namespace(model=str(tmp_path / "p"), board="host", input=[str(DIGITS_X)],
                              output=str(tmp_path / "o.npz"))
    assert wants_project_run(args)
    with pytest.raises(InputError, match="one sample"):     # RPC runs one at a time
        cmd_run(args)
    np.save(tmp_path / "one.npy", np.load(DIGITS_X)[:1])
    args.input = [str(tmp_path / "one.npy")]
    assert cmd_run(args) == 0
    assert "ms per inference on the host" in capsys.readouterr().out
    assert np.load(tmp_path / "o.npz")["output_0"].shape == (1, 10)
