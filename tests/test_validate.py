"""`kiln validate`: metrics, references, per-layer bisection, exit codes (issue 16).

The host board runs the same host-driven firmware path as QEMU (RPC over a pipe to the
POSIX build), so most tests run there in seconds; the QEMU tests repeat the headline
checks on mps2-an386 (and mps2-an385, slow).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import model_path, models_root, one_error, require_tool, run_kiln
from kiln.compiler import compile, load
from kiln.compiler.artifact import layer_output_locations
from kiln.project_gen.validate import (exact_metrics, float_metrics, labels_as_classes,
                                       sqnr_db)

DIGITS = "digits_cnn_int8"
FAULT_LAYER = 4          # digits: the second 3x3 CONV_2D


def _digits_data() -> tuple[Path, Path, Path]:
    root = models_root() / "digits"
    paths = (root / "digits_test_x.npy", root / "digits_test_y.npy", root / "digits_calib_x.npy")
    if not all(p.exists() for p in paths):
        pytest.skip(f"digits test data not found under {root}")
    return paths


# -- metrics --------------------------------------------------------------------------------

def test_exact_metrics_count_samples_elements_and_histogram():
    host = np.zeros((3, 1, 4), np.int8)
    target = host.copy()
    target[1, 0, 2] = 3
    target[2, 0, 0] = -1
    m = exact_metrics(target, host)
    assert m["exact_samples"] == 1 and m["exact_rate"] == pytest.approx(1 / 3)
    assert m["differing_elements"] == 2 and m["max_abs_diff_lsb"] == 3
    assert m["diff_histogram_lsb"] == {"0": 10, "1": 1, "3": 1}


def test_float_metrics_known_values():
    ref = np.array([3.0, 4.0, 0.0, 0.0])
    approx = ref + np.array([0.0, 0.0, 0.5, -0.5])
    m = float_metrics(approx, ref)
    assert m["mae"] == pytest.approx(0.25) and m["rmse"] == pytest.approx(np.sqrt(0.125))
    assert m["l2r"] == pytest.approx(np.sqrt(0.5) / 5)
    assert m["sqnr_db"] == pytest.approx(10 * np.log10(25 / 0.5))
    assert m["cosine"] == pytest.approx(25 / (5 * np.sqrt(25.5)))
    assert sqnr_db(ref, ref) is None                       # identical: no noise at all


def test_layer_sqnr_is_the_noise_the_layer_adds():
    from kiln.project_gen.validate import layer_sqnr_db

    assert layer_sqnr_db(None, 30.0) == pytest.approx(30.0)     # exact input: all its own
    # input NSR 1e-3, output 2e-3: the layer added 1e-3, i.e. 30 dB of its own
    assert layer_sqnr_db(30.0, 10 * np.log10(1 / 2e-3)) == pytest.approx(30.0)
    assert layer_sqnr_db(20.0, 25.0) is None                    # a layer that lowers the noise


def test_labels_integer_or_one_hot_and_refused():
    assert labels_as_classes(np.array([[0, 1], [1, 0]]), 2).tolist() == [1, 0]
    assert labels_as_classes(np.array([[2], [5], [7]]), 2).tolist() == [2, 5]
    from kiln.compiler.errors import InputError
    with pytest.raises(InputError, match="3 labels for 4 samples"):
        labels_as_classes(np.arange(3), 4)
    with pytest.raises(InputError, match="class numbers"):
        labels_as_classes(np.array([0.5, 1.5]), 2)


# -- references -------------------------------------------------------------------------------

def test_float_twin_dequantizes_weights_and_biases():
    from kiln.compiler.quantize.float_eval import FloatModel
    from kiln.compiler.quantize.float_twin import float_twin

    g = load(model_path(DIGITS))
    twin = float_twin(g)
    bias = next(t for t in g.tensors if t.is_const and t.dtype == "int32" and t.quant is not None)
    tb = twin.tensor(bias.id)
    assert tb.dtype == "float32" and tb.quant is None
    np.testing.assert_allclose(tb.data, bias.data * bias.quant.scale.reshape(-1), rtol=1e-6)
    x, _, _ = _digits_data()
    xs = np.load(x)[:50]
    art = compile(g, board="host")
    spec = art.report["outputs"][0]
    q = np.stack([art.run(s)[0] for s in xs]).astype(np.float32)
    real = (q - spec["zero_point"]) * spec["scale"]
    twin_out = FloatModel(twin).run([xs.reshape(-1, 1, 8, 8, 1)])[0]
    assert sqnr_db(real, twin_out) > 30     # the int8 model is close to its float twin


@pytest.mark.parametrize("name", [DIGITS, "kws_ref_model"])
def test_host_run_layers_ends_in_run(name):
    """Each layer read right after it ran (KWS's plan writes layers over their inputs):
    the last layer's output is the model's output."""
    art = compile(load(model_path(name)), board="host")
    rng = np.random.default_rng(1)
    spec = art.report["inputs"][0]
    x = rng.integers(-128, 128, size=spec["shape"], dtype=np.int8)
    layers = art.run_layers(x)
    assert len(layers) == len(art.report["ops"])
    np.testing.assert_array_equal(layers[-1][0], art.run(x)[0])
    shapes = [list(loc[0][3]) for loc in layer_output_locations(art.report)]
    assert [list(lay[0].shape) for lay in layers] == shapes


# -- the command on the host board ---------------------------------------------------------------

def _accuracy_of_kiln_run(capsys, tmp_path, model, x, y, *extra) -> float:
    out = tmp_path / "run.npz"
    code, _, err = run_kiln(capsys, "run", model, "--board", "host", "--input", x,
                            "--output", out, *extra)
    assert code == 0, err
    probs = np.load(out)["output_0"]
    return float(np.mean(probs.reshape(len(probs), -1).argmax(1) == np.load(y)))


def _validate(capsys, tmp_path, *argv) -> tuple[int, dict, str]:
    report = tmp_path / "report.json"
    code, out, err = run_kiln(capsys, "validate", *argv, "--json", report)
    return code, json.loads(report.read_text()), out


@pytest.mark.parametrize("kind", ["int8", "float"])
def test_validate_host_digits_exact_and_accuracy_of_kiln_run(kind, capsys, tmp_path):
    x, y, calib = _digits_data()
    if kind == "int8":
        model, extra = model_path(DIGITS), ()
    else:
        model, extra = model_path("digits_cnn_float"), ("--calibration", calib)
    code, doc, out = _validate(capsys, tmp_path, model, "--board", "host", "--data", x,
                               "--labels", y, *extra)
    assert code == 0, out
    assert doc["samples"] == 397 and doc["matches_host_reference"]
    assert doc["outputs"][0]["vs_host"]["exact_rate"] == 1.0
    assert doc["outputs"][0]["vs_float"]["sqnr_db"] > 25
    acc = _accuracy_of_kiln_run(capsys, tmp_path, model, x, y, *extra)
    assert doc["accuracy"]["target"] == doc["accuracy"]["host"] == pytest.approx(acc)
    assert doc["float_reference"] == ("twin" if kind == "int8" else "model")
    assert doc["per_inference"]["mean"] > 0
    assert "exit 0" in out


def test_validate_float_flag_and_per_layer_on_host(capsys, tmp_path):
    x, y, _ = _digits_data()
    code, doc, out = _validate(capsys, tmp_path, model_path(DIGITS), "--data", x, "--labels", y,
                               "--float", model_path("digits_cnn_float"), "--samples", 40,
                               "--per-layer", 3)
    assert code == 0, out
    assert doc["samples"] == 40 and doc["float_reference"].startswith("--float")
    pl = doc["per_layer"]
    assert pl["samples"] == 3 and pl["first_difference"] is None
    assert len(pl["layers"]) == 8 and all(r["exact_rate"] == 1.0 for r in pl["layers"])
    assert all(r["sqnr_db"] is not None and r["sqnr_db"] > 20 for r in pl["layers"])
    ranked = pl["ranked_by_layer_sqnr"]
    assert ranked and len(set(ranked)) == len(ranked)
    own = [pl["layers"][i]["layer_sqnr_db"] for i in ranked]
    assert own == sorted(own)                          # noisiest layer first
    assert "every layer's output matches" in out


@pytest.mark.parametrize("argv,message", [
    (["{float}"], "float model: give --calibration"),
    (["{int8}", "--labels", "{y}", "--data", "{x}", "--samples", "5", "--labels", "{few}"],
     "labels for"),
    (["{dir}"], "give the model it was built from with --tflite"),
    (["{int8}", "--tflite", "{int8}"], "--tflite is for a project directory"),
    (["{int8}", "--float", "{int8}"], "is not a float model"),
])
def test_validate_bad_input_is_one_line(argv, message, capsys, tmp_path):
    x, y, _ = _digits_data()
    few = tmp_path / "few.npy"
    np.save(few, np.zeros(2, np.int64))
    (tmp_path / "proj").mkdir()
    names = {"float": model_path("digits_cnn_float"), "int8": model_path(DIGITS), "x": x, "y": y,
             "few": few, "dir": tmp_path / "proj"}
    code, _, err = run_kiln(capsys, "validate", *[a.format(**names) for a in argv])
    assert code == 2
    assert message in one_error(err)


# -- fault injection -------------------------------------------------------------------------------

def inject_fault(project_dir: Path, layer: int) -> None:
    """Make one layer of a generated project wrong: its first output element + 1 (wrapping
    at 127), after the kernel ran; only in this project's model/model.c."""
    from kiln.project_gen.project import Project

    offset = layer_output_locations(Project.open(project_dir).manifest)[layer][0][0]
    model_c = project_dir / "model" / "model.c"
    text = model_c.read_text()
    head = f"static int layer_{layer}(uint8_t *arena)\n{{"
    start = text.index(head)
    end = text.index("\n}\n", start) + 3
    wrapper = (f"\nstatic int layer_{layer}(uint8_t *arena)\n{{\n"
               f"    const int status = layer_{layer}_kernel(arena);\n"
               f"    int8_t *out = (int8_t *)(arena + {offset});\n"
               f"    out[0] = (int8_t)(out[0] == 127 ? -128 : out[0] + 1); /* injected fault */\n"
               f"    return status;\n}}\n")
    text = (text[:start] + head.replace(f"layer_{layer}(", f"layer_{layer}_kernel(")
            + text[start + len(head): end] + wrapper + text[end:])
    model_c.write_text(text)


def _faulty_project(tmp_path: Path, board: str) -> Path:
    from kiln.project_gen.project import Project, create_project

    out = tmp_path / f"fw-{board}"
    create_project(str(model_path(DIGITS)), board=board, out_dir=out, mode="host-driven")
    inject_fault(out, FAULT_LAYER)
    Project.open(out).build()
    return out


def _check_fault_named(capsys, tmp_path, project_dir: Path) -> None:
    x, _, _ = _digits_data()
    code, doc, out = _validate(capsys, tmp_path, project_dir, "--tflite", model_path(DIGITS),
                               "--data", x, "--samples", 20, "--per-layer", 2)
    assert code == 1, out
    first = doc["per_layer"]["first_difference"]
    assert first["layer"] == FAULT_LAYER and first["op"] == "CONV_2D"
    assert first["max_abs_diff_lsb"] >= 1 and first["differences"][0]["index"] == 0
    assert first["inputs"][0] == [1, 4, 4, 32] and "stride_h" in first["options"]
    rows = doc["per_layer"]["layers"]
    assert all(r["exact_rate"] == 1.0 for r in rows[:FAULT_LAYER])
    assert rows[FAULT_LAYER]["exact_rate"] == 0.0
    assert not doc["matches_host_reference"]
    assert re.search(rf"first layer that differs on the target: layer {FAULT_LAYER} CONV_2D", out)
    assert "DIFFERS" in out and "exit 1" in out


def test_fault_in_one_layer_is_named_first_on_host(capsys, tmp_path):
    require_tool("cc")
    _check_fault_named(capsys, tmp_path, _faulty_project(tmp_path, "host"))


# -- RPC: STEP and the arena space on a real server ------------------------------------------------

def test_step_and_arena_reads_are_bounds_checked(tmp_path):
    import argparse

    from kiln.project_gen.rpc_cli import connect, host_driven_project
    from kiln.project_gen.rpc_client import RpcStatusError
    from kiln.project_gen.session import SPACE_ARENA

    project = host_driven_project(model_path(DIGITS), "host")
    with connect(project, argparse.Namespace()) as s:
        dev = s.device
        assert dev.has_step
        assert s.client.tensor(SPACE_ARENA, 0).bytes >= dev.arena_bytes - 16
        for bad in (lambda: s.client.step(0, dev.num_layers + 1),
                    lambda: s.client.step(dev.num_layers, 1),
                    lambda: s.client.read(SPACE_ARENA, 0, dev.arena_bytes, 1),
                    lambda: s.client.read(SPACE_ARENA, 1, 0, 1),
                    lambda: s.client.write(SPACE_ARENA, 0, 0, b"\x01")):
            with pytest.raises(RpcStatusError):
                bad()
        s.client.step(0, dev.num_layers)   # a whole pass in one STEP: raises unless accepted


# -- QEMU --------------------------------------------------------------------------------------------

def _qemu_digits(capsys, tmp_path, board: str) -> None:
    require_tool("qemu-system-arm")
    require_tool("arm-none-eabi-gcc")
    x, y, calib = _digits_data()
    acc = {}
    for model, extra in ((model_path(DIGITS), ()),
                         (model_path("digits_cnn_float"), ("--calibration", calib))):
        code, doc, out = _validate(capsys, tmp_path, model, "--board", board, "--data", x,
                                   "--labels", y, *extra)
        assert code == 0, out
        assert doc["outputs"][0]["vs_host"]["exact_rate"] == 1.0 and doc["samples"] == 397
        assert doc["unit"] == "instructions" and doc["per_inference"]["min"] > 10_000
        acc[model] = doc["accuracy"]["target"]
        assert acc[model] == pytest.approx(_accuracy_of_kiln_run(capsys, tmp_path, model, x, y,
                                                                 *extra))


@pytest.mark.qemu
def test_validate_digits_on_mps2_an386(capsys, tmp_path):
    _qemu_digits(capsys, tmp_path, "mps2-an386")


@pytest.mark.qemu
@pytest.mark.slow
def test_validate_digits_on_mps2_an385(capsys, tmp_path):
    _qemu_digits(capsys, tmp_path, "mps2-an385")


@pytest.mark.qemu
def test_fault_in_one_layer_is_named_first_on_qemu(capsys, tmp_path):
    require_tool("qemu-system-arm")
    require_tool("arm-none-eabi-gcc")
    _check_fault_named(capsys, tmp_path, _faulty_project(tmp_path, "mps2-an386"))


def test_progress_shows_eta_on_a_terminal_only():
    import io

    from kiln.project_gen.validate import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        p = Progress("samples", 4, stream)
        for i in range(1, 5):
            p.step(i)
        p.close()
    assert "samples 4/4" in tty.getvalue() and "ETA" in tty.getvalue()
    assert pipe.getvalue() == ""


@pytest.mark.qemu
@pytest.mark.slow
def test_thousand_digits_samples_on_qemu_in_under_a_minute(capsys, tmp_path):
    import time

    require_tool("qemu-system-arm")
    require_tool("arm-none-eabi-gcc")
    x, y, _ = _digits_data()
    xs, ys = np.load(x), np.load(y)
    np.save(tmp_path / "x.npy", np.concatenate([xs] * 3)[:1000])
    np.save(tmp_path / "y.npy", np.concatenate([ys] * 3)[:1000])
    argv = [model_path(DIGITS), "--board", "mps2-an386", "--data", tmp_path / "x.npy",
            "--labels", tmp_path / "y.npy"]
    run_kiln(capsys, "validate", *argv, "--samples", 1)      # the cached project is built
    t0 = time.monotonic()
    code, doc, out = _validate(capsys, tmp_path, *argv)
    assert time.monotonic() - t0 < 60
    assert code == 0 and doc["samples"] == 1000, out


def test_multi_output_layer_and_no_float_evaluator(capsys, tmp_path):
    """UNPACK has two outputs (both compared, side by side) and no float implementation in
    kiln's evaluator: the validation still compares with the host build, without float
    figures."""
    from tflite_builder import TensorSpec, single_op_model

    def act(shape):
        return TensorSpec(tuple(shape), scale=0.05, zero_point=3)

    model = tmp_path / "unpack.tflite"
    model.write_bytes(single_op_model("UNPACK", [act((2, 5))], [act((5,)), act((5,))],
                                      {"num": 2, "axis": 0}))
    code, doc, out = _validate(capsys, tmp_path, model, "--per-layer", 2, "--samples", 3)
    assert code == 0, out
    assert "no float figures" in out and doc["float_reference"] == "none"
    assert doc["outputs"][1]["vs_float"] is None and doc["outputs"][1]["vs_host"]["exact_rate"] == 1
    row = doc["per_layer"]["layers"][0]
    assert row["outputs"] == 2 and row["exact_rate"] == 1.0 and row["sqnr_db"] is None
