"""Hostile files and numbers given to kiln (issue 19, item 4): every file kiln reads is
checked for kind and size before it is read, and every count for its range.

Each attack is run as a user would: `kiln` as a subprocess, with a timeout (a FIFO
used to hang kiln forever) and an address-space cap (/dev/zero used to eat 24 GB before
the OOM killer came): exit code 2, one line on stderr, no traceback.
"""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO
from kiln.compiler.arrays_io import MAX_NPY_HEADER, NotNpyError, read_npy
from kiln.compiler.cli_args import RPC_MAX_REPEAT, bounded_int, positive_float
from kiln.compiler.errors import InputError
from kiln.compiler.tune.records import Records

KILN = Path(sys.executable).with_name("kiln")
DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"
DIGITS_X = REPO / "examples" / "digits" / "digits_test_x.npy"
FLOAT_MODEL = Path(os.environ.get("KILN_MODELS", REPO.parent / "shared" / "models")) / \
    "digits" / "digits_cnn_float.tflite"
MEMORY_CAP = 6 << 30          # a runaway read fails fast instead of taking the machine down


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _run(argv: list[str], cwd: Path | None, timeout: float) -> tuple[int, str, str]:
    proc = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, cwd=cwd,
                          timeout=timeout, preexec_fn=_cap_memory)
    return (proc.returncode, proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"))


def kiln(*args: str | Path, cwd: Path | None = None, timeout: float = 60) -> tuple[int, str, str]:
    return _run([str(KILN), *map(os.fsdecode, args)], cwd, timeout)


def python(code: str, timeout: float = 30) -> tuple[int, str, str]:
    """`code` in a capped child: an API call that would read /dev/zero or block on a
    FIFO must not take the test process (or the machine) with it."""
    return _run([sys.executable, "-c", code], None, timeout)


def assert_one_error_line(rc: int, err: str, *words: str) -> None:
    assert "Traceback" not in err, err
    assert rc == 2, (rc, err)
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith(("kiln: error: ", "kiln ")), err
    if not lines[-1].startswith("kiln: error: "):     # argparse: usage lines, then the error
        assert ": error: argument " in lines[-1], err
    else:
        assert len(lines) == 1, err
    for w in words:
        assert w in lines[-1], (w, err)


def npy_header(header: str, version: int = 1) -> bytes:
    """A .npy header holding `header` verbatim (padded as numpy pads it)."""
    text = header.encode("latin1")
    prefix = 10 if version == 1 else 12
    text += b" " * (-(prefix + len(text) + 1) % 64) + b"\n"
    size = struct.pack("<H", len(text)) if version == 1 else struct.pack("<I", len(text))
    return b"\x93NUMPY" + bytes((version, 0)) + size + text


def terabyte_npy(path: Path, shape: str = "(1000000, 1000000, 1)") -> Path:
    """A 128-byte file whose header claims 4 TB of float32."""
    path.write_bytes(npy_header(f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}")
                     + bytes(64))
    return path


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe.npy"
    os.mkfifo(path)
    return path


# --- the model file ------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/null", "directory"])
def test_a_model_that_is_not_a_regular_file_is_refused_unread(tmp_path, fifo, kind):
    model = {"fifo": fifo, "directory": tmp_path}.get(kind, Path(kind))
    for command in (["info", model], ["compile", model, "-o", tmp_path / "out"]):
        rc, _, err = kiln(*command, timeout=30)
        assert_one_error_line(rc, err, str(model), "regular files only")
    assert not (tmp_path / "out").exists()


def test_the_model_reader_refuses_devices_through_the_api(fifo):
    for path in ("/dev/zero", fifo):
        rc, out, err = python(f"from kiln.compiler import load\n"
                              f"try:\n    load({str(path)!r})\n"
                              f"except Exception as e:\n    print(type(e).__name__, e)")
        assert rc == 0 and out.startswith("ModelError model ") and "regular files only" in out, \
            out + err


def test_a_model_file_name_that_is_not_utf8_compiles(tmp_path):
    """The model's name comes from its file name: undecodable bytes used to reach model.h
    as lone surrogates (UnicodeEncodeError, half an output folder)."""
    model = Path(os.fsdecode(b"m\xff\xfe.tflite"))
    (tmp_path / model).write_bytes(DIGITS.read_bytes())
    rc, out, err = kiln("compile", model, "-o", "out", cwd=tmp_path)
    assert rc == 0 and "Traceback" not in err, err
    report = json.loads((tmp_path / "out" / "kiln.json").read_text(encoding="utf-8"))
    assert "\ufffd" in report["model"]["name"]
    assert (tmp_path / "out" / "model.h").read_text(encoding="utf-8")


# --- input arrays ----------------------------------------------------------------------------

def test_an_input_whose_header_claims_terabytes_is_refused_before_allocating(tmp_path):
    x = terabyte_npy(tmp_path / "x.npy")
    rc, _, err = kiln("run", DIGITS, "--input", x)
    assert_one_error_line(rc, err, str(x), "[1000000, 1000000, 1]")


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_an_input_that_is_a_fifo_or_device_is_refused_unread(tmp_path, fifo, kind):
    x = fifo if kind == "fifo" else Path(kind)
    rc, _, err = kiln("run", DIGITS, "--input", x, timeout=30)
    assert_one_error_line(rc, err, str(x), "regular files only")
    rc, _, err = kiln("project", "create", DIGITS, "--board", "host", "-o", tmp_path / "p",
                      "--input", x, timeout=30)
    assert_one_error_line(rc, err, str(x), "regular files only")
    assert not (tmp_path / "p").exists()


def test_npy_reader_accepts_every_layout_numpy_writes(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for name, arr in {"c": x, "f": np.asfortranarray(x), "be": x.astype(">f4"),
                      "i8": x.astype(np.int8), "empty": np.zeros((0, 3), np.int8),
                      "scalar": np.float32(3.5)}.items():
        np.save(tmp_path / f"{name}.npy", arr)
        got = read_npy(tmp_path / f"{name}.npy")
        np.testing.assert_array_equal(got, arr)
        assert got.flags.writeable and got.dtype.isnative
    big = np.zeros((70000,), np.int8)          # a version 2.0 file (numpy writes one when
    with open(tmp_path / "v2.npy", "wb") as f:  # the header outgrows 64 KiB; forced here)
        np.lib.format.write_array(f, big, version=(2, 0))
    np.testing.assert_array_equal(read_npy(tmp_path / "v2.npy"), big)


@pytest.mark.parametrize("header, message", [
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000, 1000), }",
     "more than kiln reads"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 0), }",
     "more than kiln reads"),                                   # zero size, wrapping axes
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }",
     "(64 bytes of data), the file holds 8"),                   # truncated data
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 4), }", "negative dimension"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1," * 1000 + "), }",
     "1000 dimensions"),
    ("{'descr': " + "[" * 1500 + "]" * 1500 + ", 'fortran_order': False, 'shape': (1,), }",
     "header is damaged"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (10**100,), }", "header is damaged"),
    ("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", "Python objects"),
    ("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "a record"),
    ("{'descr': ('<f4', (2,)), 'fortran_order': False, 'shape': (1,), }", "a record"),
])
def test_npy_headers_are_checked_before_use(tmp_path, header, message):
    path = tmp_path / "h.npy"
    path.write_bytes(npy_header(header) + bytes(8))
    with pytest.raises(NotNpyError) as e:
        read_npy(path)
    assert message in str(e.value) and str(path) in str(e.value)


def test_npy_header_length_is_bounded(tmp_path):
    long = tmp_path / "long.npy"
    long.write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{")
    with pytest.raises(NotNpyError, match="header claims 4,294,967,280 bytes"):
        read_npy(long)
    padded = tmp_path / "padded.npy"
    padded.write_bytes(npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }"
                                  + " " * MAX_NPY_HEADER) + bytes(4))
    with pytest.raises(NotNpyError, match="header claims"):
        read_npy(padded)


# --- calibration data --------------------------------------------------------------------------

@pytest.mark.skipif(not FLOAT_MODEL.exists(), reason="shared float digits model missing")
@pytest.mark.parametrize("form", ["file", "dir"])
def test_calibration_whose_header_claims_terabytes_is_refused(tmp_path, form):
    if form == "file":
        calib = terabyte_npy(tmp_path / "calib.npy")
        named = calib
    else:
        calib = tmp_path / "calib"
        calib.mkdir()
        np.save(calib / "000.npy", np.zeros((8, 8, 1), np.float32))
        named = terabyte_npy(calib / "001.npy", "(1000000, 1000000, 8, 8, 1)")
    rc, _, err = kiln("quantize", FLOAT_MODEL, "--calibration", calib, "-o", tmp_path / "q.tflite")
    assert_one_error_line(rc, err, "calibration file", str(named), "more than kiln reads")
    assert not (tmp_path / "q.tflite").exists()


@pytest.mark.skipif(not FLOAT_MODEL.exists(), reason="shared float digits model missing")
def test_calibration_fifo_alone_or_in_a_directory_is_refused_unread(tmp_path, fifo):
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "000.npy", np.zeros((8, 8, 1), np.float32))
    os.mkfifo(calib / "001.npy")
    for path, named in ((fifo, fifo), (calib, calib / "001.npy")):
        rc, _, err = kiln("quantize", FLOAT_MODEL, "--calibration", path,
                          "-o", tmp_path / "q.tflite", timeout=30)
        assert_one_error_line(rc, err, f"calibration file {named} is a FIFO")


# --- tuning records ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_records_that_are_a_fifo_or_device_are_refused_unread(tmp_path, fifo, kind):
    records = fifo if kind == "fifo" else Path(kind)
    rc, _, err = kiln("compile", DIGITS, "--tuning-records", records, "-o", tmp_path / "out",
                      timeout=30)
    assert_one_error_line(rc, err, str(records), "regular files only")
    rc, out, err = python(f"from kiln.compiler.tune.records import Records\n"
                          f"try:\n    Records.load({str(records)!r}, missing_ok=True)\n"
                          f"except Exception as e:\n    print(type(e).__name__, e)")
    assert rc == 0 and out.startswith("InputError tuning records file"), out + err


def _ok_record(median: int = 100) -> dict:
    return {"workload": "W", "board": "mps2-an386", "knobs": {"variant": "a"}, "status": "ok",
            "cycles": {"median": median, "min": median, "max": median}}


def test_a_records_line_of_100000_brackets_is_skipped_not_a_traceback(tmp_path):
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps(_ok_record()) + "\n" + "[" * 100_000 + "\n"
                       + "{" * 100_000 + "\n")
    rc, out, err = kiln("compile", DIGITS, "--board", "mps2-an386", "--tuning-records", records,
                        "-o", tmp_path / "out")
    assert rc == 0 and "Traceback" not in err, err
    assert "skipped 2 line(s) that are not tuning records" in err


def test_records_lines_that_are_hostile_json_are_skipped(tmp_path):
    path = tmp_path / "r.jsonl"
    bad = [
        '{"workload": "W", "cycles": ' + "9" * 5000 + "}",                   # int digits limit
        json.dumps({**_ok_record(), "knobs": {"variant": [[[["x"]]]]}}),        # nested knobs
        json.dumps({**_ok_record(), "cycles": {"median": True, "min": 1, "max": 1}}),
        json.dumps({**_ok_record(), "cycles": {"median": -5, "min": -5, "max": -5}}),
        json.dumps({**_ok_record(), "cycles": {"median": 1 << 70, "min": 1, "max": 1 << 70}}),
        json.dumps({**_ok_record(), "cycles": {"median": 5, "min": 9, "max": 1}}),
        json.dumps({**_ok_record(), "pad": "x" * (70 << 10)}),                  # over-long line
    ]
    path.write_text("\n".join([json.dumps(_ok_record(7)), *bad]) + "\n")
    r = Records.load(path)
    assert r.skipped_lines == len(bad)
    assert [e["cycles"]["median"] for e in r.entries] == [7]


# --- numbers on the command line ------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["profile", DIGITS, "--board", "host", "--repeat", "4294967296"],
     "--repeat: must be at most 4,294,967,295"),
    (["tune", DIGITS, "--board", "mps2-an386", "--repeat", "4294967296", "-o", "r.jsonl"],
     "--repeat: must be at most 4,294,967,295"),
    (["tune", DIGITS, "--board", "mps2-an386", "--workers", "1000000000000", "-o", "r.jsonl"],
     "--workers: must be at most 256"),
    (["profile", DIGITS, "--timeout", "nan"], "--timeout: must be a positive number"),
    (["profile", DIGITS, "--timeout", "inf"], "--timeout: must be a positive number"),
    (["tune", DIGITS, "--board", "mps2-an386", "--timeout", "1e300", "-o", "r.jsonl"],
     "--timeout: must be at most"),
    (["quantize", DIGITS, "--calibration", DIGITS_X, "-o", "q.tflite", "--max-samples", "0"],
     "--max-samples: must be at least 1"),
])
def test_numbers_out_of_their_range_are_refused_by_name(tmp_path, argv, message):
    rc, _, err = kiln(*argv, cwd=tmp_path, timeout=120)
    assert_one_error_line(rc, err, message)
    assert not (tmp_path / "r.jsonl").exists()


def test_bounded_int_parser():
    import argparse

    parse = bounded_int(1, RPC_MAX_REPEAT)
    assert parse("1") == 1 and parse(str(RPC_MAX_REPEAT)) == RPC_MAX_REPEAT
    for text in ("0", str(RPC_MAX_REPEAT + 1), "1.5", "ten", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)
    for text in ("nan", "inf", "-inf", "0", "-1", "1e400", "1e300"):
        with pytest.raises(argparse.ArgumentTypeError):
            positive_float(text)
    assert positive_float("0.5") == 0.5


def test_specs_from_a_hostile_kiln_json_are_one_input_error(tmp_path):
    from kiln.project_gen.session import specs_from_kiln_json

    deep = tmp_path / "kiln.json"
    deep.write_text("[" * 100_000)
    with pytest.raises(InputError, match="not a kiln.json report kiln can read"):
        specs_from_kiln_json(deep)
    deep.write_text('{"inputs": []}')
    with pytest.raises(InputError, match="KeyError"):
        specs_from_kiln_json(deep)


def test_a_damaged_elf_is_one_build_error(tmp_path):
    from kiln.compiler.errors import BuildError
    from kiln.project_gen.elf import read_elf

    elf = tmp_path / "firmware.elf"
    header = b"\x7fELF\x01\x01\x01" + bytes(0x20 - 7) + struct.pack("<I", 1 << 30) + bytes(0x20)
    elf.write_bytes(header)                  # section headers 1 GiB past a 64-byte file
    with pytest.raises(BuildError, match="damaged ELF file"):
        read_elf(elf)
    with pytest.raises(BuildError, match="regular files only"):
        read_elf(tmp_path)
