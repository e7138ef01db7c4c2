"""ONNX on the command line: --input-shape (dynamic dims pinned on every command that
reads a model, part of every model-keyed cache key), --layout, and external data files
(loaded from the model's folder only; a missing one named). Run as a user runs kiln:
the CLI's main (in-process) and one subprocess; errors are exit 2 and one line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import one_error, run_kiln
from kiln.compiler import ModelError, load

ort = pytest.importorskip("onnxruntime")

KILN = [sys.executable, "-c", "import sys; from kiln.launcher import main; sys.exit(main())"]
RNG = np.random.default_rng(1414)
# Every command that reads a model, with the arguments it needs besides the model.
MODEL_COMMANDS = {
    "info": [], "compile": ["-o", "out"], "run": [], "profile": [],
    "tune": ["--board", "mps2-an386", "-o", "r.jsonl"], "validate": [],
    "project create": ["--board", "host", "-o", "proj"], "quantize": ["-o", "q.tflite"],
}


def conv_relu(batch="N", channels=3) -> onnx.ModelProto:
    """Conv(3→4, 3×3, pad 1) → Relu on [batch, 3, 6, 5]: a dynamic batch by default."""
    w = (RNG.standard_normal((4, channels, 3, 3)) * 0.5).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, channels, 6, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, 6, 5])],
        [numpy_helper.from_array(w, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.fixture()
def dynamic(tmp_path):
    path = tmp_path / "dyn.onnx"
    onnx.save_model(conv_relu(), path)
    return path


@pytest.fixture()
def calib(tmp_path):
    path = tmp_path / "calib.npy"
    np.save(path, RNG.uniform(-1, 1, (8, 1, 3, 6, 5)).astype(np.float32))
    return path


# -- --input-shape --------------------------------------------------------------------------

def test_dynamic_model_without_pin_names_the_flag(dynamic, capsys):
    code, _, err = run_kiln(capsys, "info", dynamic)
    line = one_error(err)
    assert code == 2
    assert "input 'x' has a dynamic shape [N,3,6,5]" in line
    assert "add --input-shape x=1,3,6,5" in line


def test_dynamic_model_error_as_a_subprocess(dynamic):
    """The same as a user's shell sees it: exit 2, one line, no traceback."""
    r = subprocess.run([*KILN, "compile", str(dynamic), "-o", str(dynamic.parent / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--input-shape x=1,3,6,5" in r.stderr


def test_info_with_pin(dynamic, capsys):
    code, out, _ = run_kiln(capsys, "info", dynamic, "--input-shape", "x=1,3,6,5")
    assert code == 0
    assert "input  x [1, 3, 6, 5] float32" in out
    assert "output y [1, 4, 6, 5] float32" in out


def test_compile_and_run_with_pin_match_onnxruntime(dynamic, calib, tmp_path, capsys):
    """compile writes C for the pinned shape; run computes what onnxruntime computes."""
    import json

    code, out, _ = run_kiln(capsys, "compile", dynamic, "--input-shape", "x=1,3,6,5",
                            "--calibration", calib, "-o", tmp_path / "c")
    assert code == 0, out
    manifest = json.loads((tmp_path / "c" / "kiln.json").read_text())
    assert manifest["inputs"][0]["shape"] == [1, 3, 6, 5]
    assert manifest["outputs"][0]["shape"] == [1, 4, 6, 5]
    x = RNG.uniform(-1, 1, (1, 3, 6, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code, out, _ = run_kiln(capsys, "run", dynamic, "--input-shape", "x=1,3,6,5",
                            "--calibration", calib, "--input", tmp_path / "x.npy",
                            "--output", tmp_path / "y.npz")
    assert code == 0, out
    out_q = manifest["outputs"][0]
    got = (np.load(tmp_path / "y.npz")["output_0"].astype(np.float32)
           - out_q["zero_point"]) * out_q["scale"]
    sess = ort.InferenceSession(str(dynamic), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    assert got.shape == want.shape == (1, 4, 6, 5)
    assert np.max(np.abs(got - want)) <= 3 * out_q["scale"]     # int8 vs float: a few steps


def test_quantize_with_pin_writes_the_pinned_model(dynamic, calib, tmp_path, capsys):
    out_file = tmp_path / "q.tflite"
    code, out, _ = run_kiln(capsys, "quantize", dynamic, "--input-shape", "x=1,3,6,5",
                            "--calibration", calib, "-o", out_file)
    assert code == 0, out
    g = load(out_file)
    assert g.tensor(g.inputs[0]).shape == (1, 3, 6, 5)


def test_project_create_with_pin(dynamic, calib, tmp_path, capsys):
    code, out, _ = run_kiln(capsys, "project", "create", dynamic, "--input-shape", "x=1,3,6,5",
                            "--calibration", calib, "--board", "host", "-o", tmp_path / "p")
    assert code == 0, out
    assert (tmp_path / "p" / "kiln.json").is_file()


@pytest.mark.slow
def test_validate_with_pin(dynamic, calib, tmp_path, capsys):
    """kiln validate quantizes the pinned model, builds its host-driven project (~10 s)
    and compares: the target matches the host build."""
    code, out, _ = run_kiln(capsys, "validate", dynamic, "--input-shape", "x=1,3,6,5",
                            "--calibration", calib, "--samples", "2")
    assert code == 0, out
    assert "[1, 4, 6, 5]" in out and "matches the host reference on every sample" in out


@pytest.mark.parametrize("command", sorted(MODEL_COMMANDS))
def test_every_model_command_takes_the_options(command):
    """argparse of each command accepts --input-shape (repeatable) and --layout."""
    from kiln.compiler.cli import build_parser, _PLUGIN_MODULES
    import importlib

    parser, sub = build_parser()
    for name in _PLUGIN_MODULES:
        importlib.import_module(name).add_parsers(sub)
    args = parser.parse_args([*command.split(), "m.onnx", *MODEL_COMMANDS[command],
                              "--input-shape", "x=1,3,6,5", "--input-shape", "a=b=2,7",
                              "--layout", "nhwc"])
    assert args.input_shape == [("x", (1, 3, 6, 5)), ("a=b", (2, 7))]
    assert args.layout == "nhwc"


@pytest.mark.parametrize("value, match", [
    ("x", "is not NAME=DIMS"),
    ("=1,2", "is not NAME=DIMS"),
    ("x=1,a,3", "whole numbers separated by commas"),
    ("x=1,0,3", "every dim must be at least 1"),
    ("x=", "whole numbers"),
])
def test_bad_input_shape_syntax_is_one_line(dynamic, capsys, value, match):
    with pytest.raises(SystemExit) as e:           # argparse's refusal, in kiln's shape
        run_kiln(capsys, "info", dynamic, "--input-shape", value)
    assert e.value.code == 2 and match in one_error(capsys.readouterr().err)


@pytest.mark.parametrize("pins, match", [
    (["z=1,3,6,5"], "the model's inputs are 'x'"),
    (["x=1,3,6"], "has rank 4"),
    (["x=1,3,6,5", "x=2,3,6,5"], "names 'x' twice"),
])
def test_pin_mismatch_is_one_line(dynamic, capsys, pins, match):
    argv = [a for p in pins for a in ("--input-shape", p)]
    code, _, err = run_kiln(capsys, "info", dynamic, *argv)
    assert code == 2 and match in one_error(err)


def test_tflite_refuses_input_shape_and_layout(tmp_path, capsys):
    from tflite_builder import TensorSpec, single_op_model

    path = tmp_path / "relu.tflite"
    path.write_bytes(single_op_model("RELU", [TensorSpec((1, 4), scale=0.1, zero_point=0)],
                                     [TensorSpec((1, 4), scale=0.1, zero_point=0)]))
    code, _, err = run_kiln(capsys, "info", path, "--input-shape", "x=1,4")
    assert code == 2 and "a .tflite model's shapes are static" in one_error(err)
    code, _, err = run_kiln(capsys, "compile", path, "--layout", "nhwc", "-o", tmp_path / "o")
    assert code == 2 and "a .tflite model is NHWC as it is" in one_error(err)


def test_project_directory_refuses_model_options(dynamic, tmp_path, capsys):
    (tmp_path / "p").mkdir()
    code, _, err = run_kiln(capsys, "run", tmp_path / "p", "--input-shape", "x=1,3,6,5")
    assert code == 2 and "pass --input-shape/--layout to `kiln project create`" in one_error(err)


def test_cached_project_key_holds_the_pins(dynamic, monkeypatch):
    """Two pins of one .onnx never share a cached host-driven project (kiln run --board,
    kiln profile, kiln validate), nor does a layout; the same pin does."""
    from kiln.project_gen import rpc_cli

    keys = []

    class Stop(Exception):
        pass

    def fake_entry(entry, complete, build, what):
        keys.append(entry.name)
        raise Stop

    monkeypatch.setattr(rpc_cli, "cached_entry", fake_entry)
    for options in ({"input_shapes": {"x": (1, 3, 6, 5)}},
                    {"input_shapes": {"x": (2, 3, 6, 5)}},
                    {"input_shapes": {"x": (1, 3, 6, 5)}, "layout": "nhwc"},
                    {"input_shapes": {"x": (1, 3, 6, 5)}}):
        with pytest.raises(Stop):
            rpc_cli.host_driven_project(dynamic, "host", model_options=options)
    assert len(set(keys[:3])) == 3 and keys[0] == keys[3]


def test_static_onnx_key_is_its_bytes(tmp_path, monkeypatch):
    """Without options a model is keyed by its file's bytes, as before: the entries
    cached by an earlier kiln stay valid."""
    import hashlib

    from kiln.project_gen import rpc_cli

    path = tmp_path / "static.onnx"
    onnx.save_model(conv_relu(batch=1), path)
    keys = []

    def fake_entry(entry, complete, build, what):
        keys.append(entry.name)
        raise KeyError

    monkeypatch.setattr(rpc_cli, "cached_entry", fake_entry)
    with pytest.raises(KeyError):
        rpc_cli.host_driven_project(path, "host")
    assert hashlib.sha256(path.read_bytes()).hexdigest()[:16] in keys[0]


# -- external data ---------------------------------------------------------------------------

def save_external(folder, location="w.data"):
    m = conv_relu(batch=1)
    path = folder / "ext.onnx"
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=0)
    return m, path


def test_external_data_next_to_the_model_loads(tmp_path, calib, capsys):
    m, path = save_external(tmp_path)
    inline = tmp_path / "inline.onnx"
    onnx.save_model(m, inline)
    g, ref = load(path), load(inline)
    assert [t.data.tobytes() for t in g.tensors if t.is_const] == \
        [t.data.tobytes() for t in ref.tensors if t.is_const]
    # The data file is part of the model's identity: other weights, another sha256.
    data = bytearray((tmp_path / "w.data").read_bytes())
    data[:4] = np.float32(9.0).tobytes()
    (tmp_path / "w.data").write_bytes(bytes(data))
    assert load(path).sha256 != g.sha256
    code, out, _ = run_kiln(capsys, "quantize", path, "--calibration", calib,
                            "-o", tmp_path / "q.tflite")
    assert code == 0, out


def test_external_data_in_a_subfolder_loads(tmp_path):
    (tmp_path / "weights").mkdir()
    _, path = save_external(tmp_path, "weights/w.data")
    assert load(path).tensor(load(path).inputs[0]).shape == (1, 3, 6, 5)


def test_missing_external_data_is_named(tmp_path, capsys):
    _, path = save_external(tmp_path)
    (tmp_path / "w.data").unlink()
    code, _, err = run_kiln(capsys, "info", path)
    line = one_error(err)
    assert code == 2 and "tensor 'w' keeps its data in 'w.data', which is missing" in line


def test_truncated_external_data_is_named(tmp_path):
    _, path = save_external(tmp_path)
    (tmp_path / "w.data").write_bytes(b"\0" * 10)
    with pytest.raises(ModelError, match="tensor 'w' reads bytes 0..432 of 'w.data', which "
                                         "holds 10 bytes"):
        load(path)


def _with_location(path, location):
    m = onnx.load_model(path, load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = location
    onnx.save_model(m, path)


@pytest.mark.parametrize("location", ["../w.data", "sub/../../w.data", "/etc/passwd",
                                      "C:\\w.data", "..\\w.data"])
def test_external_data_outside_the_folder_refused(tmp_path, location):
    """Hostile input: a location that leaves the model's folder is never opened."""
    folder = tmp_path / "m"
    folder.mkdir()
    _, path = save_external(folder)
    (tmp_path / "w.data").write_bytes((folder / "w.data").read_bytes())
    _with_location(path, location)
    with pytest.raises(ModelError, match="outside the model's folder") as e:
        load(path)
    assert "\n" not in str(e.value)


def test_external_data_link_out_of_the_folder_refused(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    _, path = save_external(folder)
    (folder / "w.data").rename(tmp_path / "w.data")
    (folder / "w.data").symlink_to(tmp_path / "w.data")
    with pytest.raises(ModelError, match="a link out of the model's folder"):
        load(path)


def test_external_data_from_bytes_refused(tmp_path):
    _, path = save_external(tmp_path)
    with pytest.raises(ModelError, match="keeps its data in an external file"):
        load(path.read_bytes())
