"""`kiln profile` (and the --port options of `kiln run`) on a host-driven project of the
RPC fixture, built for the host board through project_gen."""

from __future__ import annotations

import json

import pytest

from kiln.compiler.cli import main
from kiln.project_gen.rpc_cli import host_driven_project
from rpc_support import FixtureArtifact


@pytest.fixture(scope="module")
def project_dir(tmp_path_factory):
    from kiln.project_gen.project import create_project

    out = tmp_path_factory.mktemp("rpccli") / "p"
    create_project(FixtureArtifact("host"), board="host", out_dir=out, mode="host-driven")
    return out


def test_profile_table_and_json(project_dir, tmp_path, capsys):
    out_json = tmp_path / "prof.json"
    assert main(["profile", str(project_dir), "--json", str(out_json), "--repeat", "3"]) == 0
    text = capsys.readouterr().out
    assert "ADD" in text and "SUM" in text and "layer sum" in text
    doc = json.loads(out_json.read_text())
    assert doc["unit"] == "ns" and doc["board"] == "host"
    assert [layer["op"] for layer in doc["layers"]] == ["ADD", "SUM", "FILL"]
    assert [layer["index"] for layer in doc["layers"]] == [0, 1, 2]
    assert doc["total_cycles"] == sum(layer["cycles"] for layer in doc["layers"])
    assert abs(sum(layer["percent"] for layer in doc["layers"]) - 100) < 0.1
    for key in ("cycles", "macs", "macs_per_cycle", "ticks"):
        assert key in doc["layers"][0]


def test_profile_refuses_standalone_and_missing(tmp_path, capsys):
    assert main(["profile", str(tmp_path / "nope.tflite"), "--board", "host"]) == 2
    assert "no such model file" in capsys.readouterr().err
    with pytest.raises(Exception, match="not a kiln project"):
        host_driven_project(tmp_path, "host")


def test_run_parser_has_port_options(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--port URL" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--port", "bogus://x"], "protocol 'bogus' not known (a device path such as"),
    (["--timeout", "0"], "--timeout: must be a positive number"),
    (["--repeat", "-1"], "--repeat: must be at least 1"),
])
def test_bad_port_or_numbers_are_one_line(project_dir, argv, message, capsys):
    try:
        rc = main(["profile", str(project_dir), *argv])
    except SystemExit as exc:           # argparse refuses a bad number itself
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err


def test_optimize_reaches_the_cached_project_and_is_refused_on_a_folder(project_dir, tmp_path,
                                                                      capsys):
    """`kiln profile --optimize speed` profiled the default build: the goal keys the cached
    project and reaches the compile; a project folder, compiled already, refuses it."""
    from tflite_builder import TensorSpec, single_op_model

    x = TensorSpec((1, 4, 4, 8), scale=0.05, zero_point=-10)
    y = TensorSpec((1, 4, 4, 8), scale=0.03, zero_point=5)
    out = TensorSpec((1, 4, 4, 8), scale=0.07, zero_point=-2)
    model = tmp_path / "add.tflite"
    model.write_bytes(single_op_model("ADD", [x, y], [out]))
    cache = tmp_path / "cache"
    speed = host_driven_project(model, "host", cache=cache, optimize="speed")
    default = host_driven_project(model, "host", cache=cache)
    assert speed.path != default.path
    assert speed.manifest["optimize"] == "speed"
    assert default.manifest["optimize"] == "balanced"
    assert main(["profile", str(project_dir), "--optimize", "speed"]) == 2
    assert "pass --optimize to `kiln project create`" in capsys.readouterr().err
    assert main(["run", str(project_dir), "--optimize", "speed"]) == 2
    assert "pass --optimize to `kiln project create`" in capsys.readouterr().err
