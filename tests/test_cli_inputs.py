"""Input arrays on the CLI: `kiln run --input/--output` and `kiln project create --input`.

Every path (host library, baked firmware, RPC) checks inputs with the same
split_samples, so the same file is accepted or refused with the same line
everywhere. Host tests use the bundled digits model (input [1, 8, 8, 1] int8,
scale 1/255, zero point -128); two QEMU tests show the firmware paths agree.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, require_tool
from kiln.compiler.cli import main

DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"
TEST_X = REPO / "examples" / "digits" / "digits_test_x.npy"
TEST_Y = REPO / "examples" / "digits" / "digits_test_y.npy"


def _save(path: Path, x: np.ndarray) -> str:
    np.save(path, x)
    return str(path)


def _run_host(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["run", str(DIGITS), "--board", "host", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def _as_float(q: np.ndarray) -> np.ndarray:
    """Float data that the digits input quantizes back to exactly q."""
    return ((q.astype(np.float32) + 128) / 255).astype(np.float32)


def _bad_file(tmp_path: Path, kind: str) -> str:
    path = tmp_path / f"bad_{kind}.npy"
    if kind == "empty":
        path.touch()
    elif kind == "text":
        path.write_text("0 1 2 3\n")
    elif kind == "tflite":
        path.write_bytes(DIGITS.read_bytes())
    elif kind == "objects":
        np.save(path, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    elif kind == "pickle":
        path.write_bytes(pickle.dumps([1, 2, 3]))
    return str(path)


@pytest.mark.parametrize("kind", ["empty", "text", "tflite", "objects", "pickle"])
def test_a_file_that_is_not_a_npy_array_is_one_line_on_every_path(tmp_path, capsys, kind):
    bad = _bad_file(tmp_path, kind)
    code, _, err = _run_host(capsys, "--input", bad)
    assert code == 2 and err.startswith(f"kiln: error: {bad} is not a .npy array file: ")
    assert err.count("\n") == 1
    fw = tmp_path / "fw"
    assert main(["project", "create", str(DIGITS), "--board", "mps2-an386", "-o", str(fw),
                 "--input", bad]) == 2
    assert capsys.readouterr().err == err           # same line, and nothing left behind
    assert not fw.exists()


def test_the_npz_that_output_writes_is_refused_as_an_input(tmp_path, capsys):
    y = tmp_path / "y.npz"
    assert _run_host(capsys, "--output", str(y))[0] == 0
    code, _, err = _run_host(capsys, "--input", str(y))
    assert code == 2 and f"{y} is not a .npy array file: it is an .npz archive" in err


@pytest.mark.parametrize("shape", [(1, 1, 8, 8), (64,), (8, 8), (0, 8, 8, 1), (2, 3, 8, 8, 1)])
def test_a_shape_that_is_not_the_input_shape_is_refused_on_every_path(tmp_path, capsys, shape):
    x = _save(tmp_path / "x.npy", np.zeros(shape, np.int8))
    code, _, err = _run_host(capsys, "--input", x)
    assert code == 2
    assert err == (f"kiln: error: input 'input' has shape [1, 8, 8, 1]; got an array of shape "
                   f"{list(shape)} (give [1, 8, 8, 1], [8, 8, 1] or [N, 8, 8, 1] for N samples)\n")
    assert main(["project", "create", str(DIGITS), "--board", "mps2-an386",
                 "-o", str(tmp_path / "fw"), "--input", x]) == 2
    assert capsys.readouterr().err == err


def test_one_sample_without_its_batch_axis_runs_like_the_full_shape(tmp_path, capsys):
    x0 = np.load(TEST_X)[:1]
    full = _run_host(capsys, "--input", _save(tmp_path / "a.npy", x0))
    bare = _run_host(capsys, "--input", _save(tmp_path / "b.npy", x0[0]))
    assert full[0] == bare[0] == 0 and full[1] == bare[1]
    assert full[1].startswith("output 0 [1, 10] int8: ")


def test_stacked_samples_run_one_by_one_on_the_host(tmp_path, capsys):
    x, labels = np.load(TEST_X), np.load(TEST_Y)
    y = tmp_path / "y.npz"
    code, out, _ = _run_host(capsys, "--input", str(TEST_X), "--output", str(y))
    assert code == 0
    lines = out.splitlines()
    assert [line.split(" [")[0] for line in lines[:-1]] == \
        [f"sample {s} output 0" for s in range(len(x))]
    with np.load(y) as z:
        logits = z["output_0"]
    assert logits.shape == (len(x), 10) and logits.dtype == np.int8
    assert np.mean(np.argmax(logits, axis=1) == labels) > 0.9
    assert lines[7].endswith(f"argmax {int(np.argmax(logits[7]))}")
    # Sample 7 alone, and stacked as (N, 1, 8, 8, 1), give the same outputs.
    single = tmp_path / "one.npz"
    assert _run_host(capsys, "--input", _save(tmp_path / "x7.npy", x[7]), "--output", str(single))[0] == 0
    with np.load(single) as z:
        assert np.array_equal(z["output_0"], logits[7:8])
    assert _run_host(capsys, "--input", _save(tmp_path / "x3.npy", x[:3, None]),
                     "--output", str(single))[0] == 0
    with np.load(single) as z:
        assert np.array_equal(z["output_0"], logits[:3])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int16])
def test_float_and_wider_int_inputs_give_the_int8_outputs(tmp_path, capsys, dtype):
    q = np.load(TEST_X)[:4]
    data = _as_float(q).astype(dtype) if np.dtype(dtype).kind == "f" else q.astype(dtype)
    ref = _run_host(capsys, "--input", _save(tmp_path / "q.npy", q))
    got = _run_host(capsys, "--input", _save(tmp_path / "d.npy", data))
    assert ref[0] == got[0] == 0 and got[1] == ref[1] and got[2] == ""


def test_integers_that_do_not_fit_int8_are_refused(tmp_path, capsys):
    x = np.zeros((1, 8, 8, 1), np.int32)
    x[0, 3, 3, 0] = 300
    code, _, err = _run_host(capsys, "--input", _save(tmp_path / "x.npy", x))
    assert code == 2 and "int32 values [0, 300] do not fit int8" in err


def test_clamped_float_values_are_counted_in_one_warning(tmp_path, capsys):
    q = np.load(TEST_X)[:2]
    x = _as_float(q)
    x[0, 0, :5, 0] = 1000.0
    x[1, 7, 7, 0] = -3.0
    clamped = q.copy()
    clamped[0, 0, :5, 0] = 127
    clamped[1, 7, 7, 0] = -128
    ref = _run_host(capsys, "--input", _save(tmp_path / "q.npy", clamped))
    code, out, err = _run_host(capsys, "--input", _save(tmp_path / "x.npy", x))
    assert code == 0 and out == ref[1]
    assert err.splitlines() == ["kiln: warning: input 'input': 6 of 128 value(s) outside [0, 1] "
                                "(what int8 holds at scale 0.00392157, zero point -128) were "
                                "clamped"]


def test_nan_inputs_are_refused(tmp_path, capsys):
    x = _as_float(np.load(TEST_X)[:1])
    x[0, 1, 1, 0] = np.nan
    code, _, err = _run_host(capsys, "--input", _save(tmp_path / "x.npy", x))
    assert code == 2 and "1 NaN or infinite value(s)" in err


def test_output_is_written_at_the_path_given(tmp_path, capsys):
    y = tmp_path / "y_noext"
    code, out, _ = _run_host(capsys, "--output", str(y))
    assert code == 0 and out.splitlines()[-1] == f"wrote {y}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y_noext"]
    with np.load(y) as z:
        assert list(z) == ["output_0"] and z["output_0"].shape == (1, 10)


def test_output_that_is_a_directory_is_refused_before_running(tmp_path, capsys):
    code, out, err = _run_host(capsys, "--output", str(tmp_path))
    assert code == 2 and out == ""
    assert err == f"kiln: error: --output {tmp_path} is a directory: name the .npz file to write\n"
    assert list(tmp_path.iterdir()) == []


# --- the firmware paths agree with the host (QEMU) ----------------------------------------

def _needs_qemu() -> None:
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")


def test_baked_float_samples_on_qemu_match_the_host(tmp_path, capsys):
    _needs_qemu()
    x = _save(tmp_path / "x.npy", _as_float(np.load(TEST_X)[:3]))
    fw = tmp_path / "fw"
    assert main(["project", "create", str(DIGITS), "--board", "mps2-an386", "-o", str(fw),
                 "--input", x]) == 0
    capsys.readouterr()
    assert main(["run", str(fw), "--output", str(tmp_path / "qemu.npz")]) == 0
    qemu_out = capsys.readouterr().out
    code, host_out, _ = _run_host(capsys, "--input", x, "--output", str(tmp_path / "host.npz"))
    assert code == 0
    with np.load(tmp_path / "qemu.npz") as a, np.load(tmp_path / "host.npz") as b:
        assert a["output_0"].shape == (3, 10) and np.array_equal(a["output_0"], b["output_0"])
    samples = [line for line in qemu_out.splitlines() if line.startswith("sample ")]
    assert samples == [line for line in host_out.splitlines() if line.startswith("sample ")]


def test_rpc_run_on_qemu_takes_the_inputs_the_host_takes(tmp_path, capsys):
    _needs_qemu()
    x = _save(tmp_path / "x.npy", _as_float(np.load(TEST_X)[5]))        # float, no batch axis
    assert main(["run", str(DIGITS), "--board", "mps2-an386", "--input", x,
                 "--output", str(tmp_path / "qemu.npz")]) == 0
    assert _run_host(capsys, "--input", x, "--output", str(tmp_path / "host.npz"))[0] == 0
    with np.load(tmp_path / "qemu.npz") as a, np.load(tmp_path / "host.npz") as b:
        assert np.array_equal(a["output_0"], b["output_0"])
    bad = _save(tmp_path / "bad.npy", np.zeros(64, np.int8))
    assert main(["run", str(DIGITS), "--board", "mps2-an386", "--input", bad]) == 2
    rpc_err = capsys.readouterr().err
    assert rpc_err == _run_host(capsys, "--input", bad)[2]
