"""Auto-tuning: workloads, records, the search, tuning firmware on QEMU, tuned compiles.

Pure-Python tests first; then the real thing on QEMU mps2-an386 with the bundled digits
model (three tunable layers, a tuning build in a few seconds).
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import MLPERF_INT8, REPO, model_path, require_tool
from kiln.compiler.cli import main
from kiln.compiler.compile import target_for
from kiln.compiler.errors import InputError
from kiln.compiler.passes import optimize
from kiln.compiler.tune import Records, knobs_id
from kiln.compiler.tune.search import Search
from kiln.compiler.tune.workloads import extract_workloads
from reference import assert_equal_exact, run_reference

BOARD = "mps2-an386"
DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"


def _record(key: str, knobs: dict, median: int, board: str = BOARD, status: str = "ok") -> dict:
    entry = {"workload": key, "board": board, "knobs": knobs, "status": status}
    if status == "ok":
        entry["cycles"] = {"median": median, "min": median - 1, "max": median + 1}
    return entry


# --- workloads ---------------------------------------------------------------------------

def test_kws_layers_fold_into_four_workloads():
    g = optimize(kc.load(model_path("kws_ref_model")))
    ws = extract_workloads(g, target_for(BOARD))
    assert [len(w.layers) for w in ws] == [1, 4, 4, 1]
    assert ws[1].key == ("DEPTHWISE_CONV_2D in 1x25x5x64 filter 1x3x3x64 out 1x25x5x64 "
                         "stride 1x1 dilation 1x1 pad 1,1 mult 1 fast")
    for w in ws:
        assert w.candidates[0] != w.reference and w.reference in w.candidates


def test_workload_key_ignores_weight_values_but_not_the_board():
    g = optimize(kc.load(DIGITS))
    g2 = copy.deepcopy(g)
    for t in g2.tensors:
        if t.is_const and t.dtype == "int8":
            t.data = np.random.default_rng(1).integers(-127, 128, t.shape).astype(np.int8)
    keys = [w.key for w in extract_workloads(g, target_for(BOARD))]
    assert keys == [w.key for w in extract_workloads(g2, target_for(BOARD))]
    host = extract_workloads(g, target_for("host"))
    assert [w.key for w in host] == keys          # same key; records also carry the board
    for w, m in zip(host, extract_workloads(g, target_for(BOARD))):
        # same kernels to time, but without DSP the plain kernel stays the default
        assert sorted(map(knobs_id, w.candidates)) == sorted(map(knobs_id, m.candidates))
        assert w.candidates[0] == {"variant": "generic"} != m.candidates[0]


# --- records -----------------------------------------------------------------------------

def test_records_append_reload_and_pick_the_fastest(tmp_path):
    path = tmp_path / "r.jsonl"
    r = Records.load(path, missing_ok=True)
    r.append(_record("W", {"variant": "a"}, 300))
    r.append(_record("W", {"variant": "b"}, 200))
    r.append(_record("W", {"variant": "c"}, 100, status="mismatch"))
    r.append(_record("W", {"variant": "d"}, 50, board="mps2-an500"))
    with open(path, "a") as f:
        f.write('{"workload": "W", "board": "mps2-an386", "kno\n')     # a run killed mid-line
        f.write('{"workload": "W"}\n')
    again = Records.load(path)
    assert again.skipped_lines == 2 and len(again.entries) == 4
    assert again.best(BOARD)["W"]["knobs"] == {"variant": "b"}
    assert again.best("mps2-an500")["W"]["knobs"] == {"variant": "d"}
    assert ("W", knobs_id({"variant": "c"})) in again.measured(BOARD)
    with pytest.raises(ValueError):
        r.append({"workload": "W", "board": BOARD, "knobs": {}, "status": "ok"})   # no cycles


def test_a_record_after_a_line_cut_off_without_newline_starts_its_own_line(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(_record("W", {"variant": "a"}, 300)) + "\n" +
                    '{"workload": "W", "board": "mps2-an3')          # killed mid-line
    r = Records.load(path)
    r.append(_record("W", {"variant": "b"}, 200))
    again = Records.load(path)
    assert again.skipped_lines == 1
    assert [e["knobs"]["variant"] for e in again.entries] == ["a", "b"]


def test_best_skips_records_whose_knobs_are_no_longer_candidates():
    """A stale record (an older kiln's knob) with the lowest median must not hide the
    fastest valid one."""
    r = Records(entries=[_record("W", {"variant": "turbo"}, 1), _record("W", {"variant": "a"}, 300),
                         _record("W", {"variant": "b"}, 200)])
    valid = {"W": {knobs_id({"variant": "a"}), knobs_id({"variant": "b"})}}
    assert r.best(BOARD)["W"]["knobs"] == {"variant": "turbo"}
    assert r.best(BOARD, valid)["W"]["knobs"] == {"variant": "b"}


def test_best_record_does_not_depend_on_line_order():
    entries = [_record("W", {"variant": v}, 100) for v in "zyxabc"]
    entries.append(_record("W", {"variant": "q"}, 99))
    entries.append(_record("W", {"variant": "p"}, 99))
    picks = set()
    for seed in range(5):
        random.Random(seed).shuffle(entries)
        picks.add(knobs_id(Records(entries=list(entries)).best(BOARD)["W"]["knobs"]))
    assert picks == {knobs_id({"variant": "p"})}


def test_missing_or_wrong_records_file_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="no such tuning records"):
        Records.load(tmp_path / "none.jsonl")
    with pytest.raises(InputError, match="directory"):
        Records.load(tmp_path)


@pytest.mark.parametrize("board", ["mps2-an385", "mps2-an386", "mps2-an500"])
def test_committed_records_cover_every_candidate_of_the_mlperf_models(board):
    """benchmarks/records/<board>.jsonl is complete: `kiln tune` on any of the four models
    measures nothing (a new knob without new records fails here), and holds no failures."""
    records = Records.load(REPO / "benchmarks" / "records" / f"{board}.jsonl")
    assert records.skipped_lines == 0
    assert all(e["status"] == "ok" and e["board"] == board for e in records.entries)
    measured = records.measured(board)
    for name in MLPERF_INT8:
        ws = extract_workloads(optimize(kc.load(model_path(name))), target_for(board))
        missing = [f"{w.key}: {knobs_id(k)}" for w in ws for k in w.candidates
                   if (w.key, knobs_id(k)) not in measured]
        assert not missing, f"{name}: no record for\n" + "\n".join(missing)


# --- search ------------------------------------------------------------------------------

def _grid(n: int) -> list[dict]:
    return [{"variant": "v", "a": a, "b": b} for a in range(n) for b in range(n)]


def _cost(k: dict) -> int:
    return 1000 + 7 * (k["a"] - 5) ** 2 + 3 * (k["b"] - 2) ** 2 + (k["a"] * k["b"]) % 5


def _run(search: Search) -> int:
    measured = 0
    while not search.done:
        picks = search.next_round()
        assert picks and all(knobs_id(k) not in search.measured for k in picks)
        for k in picks:
            search.report(k, _cost(k))
        measured += len(picks)
        search.end_round()
    return measured


def test_search_is_exhaustive_when_the_space_fits_the_trials():
    space = _grid(3)
    s = Search(space, trials=9)
    assert s.next_round() == space


def test_search_finds_the_optimum_of_a_large_space_within_its_budget():
    space = _grid(10)                            # 100 candidates, optimum at a=5, b=2
    best = min(space, key=_cost)
    found = 0
    for seed in range(10):
        s = Search(space, trials=40, round_size=8, patience=3, seed=seed)
        assert _run(s) <= 40
        found += s.best() == best
        assert _cost(s.best()) <= _cost(best) + 10
    assert found >= 7


def test_search_stops_early_and_resumes_from_measurements():
    space = _grid(10)
    s = Search(space, trials=99, round_size=4, patience=1, seed=3)
    spent = _run(s)
    assert spent < 99                            # patience, not the budget, ended it
    resumed = Search(space, trials=99, round_size=4, patience=1, seed=3,
                     measured=dict(s.measured))
    assert all(knobs_id(k) not in s.measured for k in resumed.next_round())


# --- tuning on QEMU ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def qemu_tools():
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")


@pytest.fixture(scope="module")
def digits_records(qemu_tools, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tune") / "digits.jsonl"
    assert main(["tune", str(DIGITS), "--board", BOARD, "--workers", "2", "--repeat", "3",
                 "-o", str(path)]) == 0
    return path


def test_tune_measures_every_candidate_once_and_checks_them(digits_records, capsys):
    g = optimize(kc.load(DIGITS))
    ws = extract_workloads(g, target_for(BOARD))
    entries = [json.loads(line) for line in digits_records.read_text().splitlines()]
    want = {(w.key, knobs_id(k)) for w in ws for k in w.candidates}
    got = [(e["workload"], knobs_id(e["knobs"])) for e in entries]
    assert sorted(got) == sorted(want)                       # each once
    for e in entries:
        assert e["status"] == "ok", e
        c = e["cycles"]
        assert 0 < c["min"] <= c["median"] <= c["max"] and e["unit"] == "instructions"
        assert e["cpu"] == "cortex-m4" and e["repeat"] == 3 and "gcc" in e["toolchain"]
    # The SIMD GEMM beats the plain kernel on the 3x3 convolution of 8 channels.
    conv = [e for e in entries if e["workload"].startswith("CONV_2D in 1x4x4x8")]
    by_variant = {e["knobs"]["variant"]: e["cycles"]["median"] for e in conv}
    assert by_variant["gemm"] < by_variant["generic"]
    # A rerun measures nothing and leaves the file as it was.
    before = digits_records.read_text()
    capsys.readouterr()
    assert main(["tune", str(DIGITS), "--board", BOARD, "-o", str(digits_records)]) == 0
    assert "measured 0 candidates in 0 tuning firmware(s)" in capsys.readouterr().out
    assert digits_records.read_text() == before


def test_tuned_compile_follows_the_records_and_stays_exact(digits_records, tmp_path):
    # Make the plain kernels the fastest: the compile must follow the records.
    entries = [json.loads(line) for line in digits_records.read_text().splitlines()]
    for e in entries:
        if e["knobs"] == {"variant": "generic"}:
            e["cycles"] = {"median": 1, "min": 1, "max": 1}
    flipped = tmp_path / "flipped.jsonl"
    flipped.write_text("".join(json.dumps(e) + "\n" for e in reversed(entries)))
    g = kc.load(DIGITS)
    default = kc.compile(g, BOARD)
    tuned = kc.compile(g, BOARD, tuning_records=flipped)
    assert {o["kernel"] for o in default.report["ops"]} >= {"kiln_conv2d_gemm_p8_s8"}
    tunable = [o for o in tuned.report["ops"] if "workload" in o]
    assert tunable and all(o["tuned"] and o["knobs"] == {"variant": "generic"} for o in tunable)
    assert tuned.files == kc.compile(g, BOARD, tuning_records=Records.load(flipped)).files
    assert tuned.files != default.files
    # The tuned firmware on QEMU: outputs identical to tflite-micro.
    from kiln.project_gen import create_project

    x = np.load(REPO / "examples" / "digits" / "digits_test_x.npy")[:3]
    project = create_project(str(DIGITS), BOARD, tmp_path / "fw", inputs=[x],
                             tuning_records=flipped)
    assert "kiln_conv2d_s8(" in (tmp_path / "fw" / "model" / "model.c").read_text()
    result = project.run()
    data = DIGITS.read_bytes()
    got = result.outputs[0].reshape(len(x), -1)
    for i in range(len(x)):
        want = run_reference(data, [x[i:i + 1]])[0]
        assert_equal_exact(got[i].reshape(want.shape), want, f"sample {i}")


def test_profile_and_run_take_the_records(digits_records, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))    # a fresh project cache
    entries = [json.loads(line) for line in digits_records.read_text().splitlines()]
    for e in entries:
        if e["knobs"] == {"variant": "generic"}:
            e["cycles"] = {"median": 1, "min": 1, "max": 1}
    flipped = tmp_path / "flipped.jsonl"
    flipped.write_text("".join(json.dumps(e) + "\n" for e in entries))
    prof = tmp_path / "profile.json"
    assert main(["profile", str(DIGITS), "--board", BOARD, "--tuning-records", str(flipped),
                 "--json", str(prof), "--repeat", "2"]) == 0
    kernels = {row["op"]: row["kernel"] for row in json.loads(prof.read_text())["layers"]}
    assert kernels["CONV_2D"] == "kiln_conv2d_s8"
    assert kernels["FULLY_CONNECTED"] == "kiln_fully_connected_s8"
    capsys.readouterr()
    out = tmp_path / "y.npz"
    assert main(["run", str(DIGITS), "--board", BOARD, "--tuning-records", str(flipped),
                 "--output", str(out)]) == 0
    assert main(["run", str(DIGITS), "--board", BOARD, "--output", str(tmp_path / "d.npz")]) == 0
    assert np.array_equal(np.load(out)["output_0"], np.load(tmp_path / "d.npz")["output_0"])
    assert main(["profile", str(DIGITS), "--board", BOARD, "--tuning-records",
                 str(tmp_path / "missing.jsonl")]) == 2
    assert "no such tuning records file" in capsys.readouterr().err


def test_stale_or_foreign_records_leave_the_default(digits_records, tmp_path):
    entries = [json.loads(line) for line in digits_records.read_text().splitlines()]
    stale = [dict(e, knobs={"variant": "gemm", "oc_block": 64}, cycles={"median": 1, "min": 1,
                                                                        "max": 1})
             for e in entries] + [dict(e, board="mps2-an500", knobs={"variant": "generic"})
                                  for e in entries]
    path = tmp_path / "stale.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in stale))
    g = kc.load(DIGITS)
    art = kc.compile(g, BOARD, tuning_records=path)
    default = kc.compile(g, BOARD)
    assert {k: v for k, v in art.files.items() if k != "kiln.json"} == \
        {k: v for k, v in default.files.items() if k != "kiln.json"}
    assert art.report["tuning"]["tuned_layers"] == 0
    # Stale records beside valid ones: the valid ones still decide.
    both = tmp_path / "both.jsonl"
    both.write_text(path.read_text() + digits_records.read_text())
    mixed = kc.compile(g, BOARD, tuning_records=both)
    assert mixed.files["model.c"] == kc.compile(g, BOARD, tuning_records=digits_records).files["model.c"]
    assert mixed.report["tuning"]["tuned_layers"] == 3


def test_records_of_another_board_are_named(digits_records, tmp_path, capsys):
    assert main(["compile", str(DIGITS), "--board", "mps2-an500", "--tuning-records",
                 str(digits_records), "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert ("0 of 3 tunable layers" in out
            and "the file has records for mps2-an386, none for mps2-an500" in out), out
    assert main(["compile", str(DIGITS), "--board", BOARD, "--tuning-records",
                 str(digits_records), "-o", str(tmp_path / "out2")]) == 0
    out = capsys.readouterr().out
    assert "3 of 3 tunable layers" in out and "default variant" not in out, out


def test_a_file_of_other_lines_is_named_when_compiling(tmp_path, capsys):
    junk = tmp_path / "notes.jsonl"
    junk.write_text('{"workload": 1}\nnot json\n')
    assert main(["compile", str(DIGITS), "--board", BOARD, "--tuning-records", str(junk),
                 "-o", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert "0 of 3 tunable layers" in captured.out
    assert "skipped 2 line(s) that are not tuning records" in captured.err


def test_a_candidate_whose_output_differs_is_rejected_as_a_bug(qemu_tools):
    from kiln.compiler.compile import KILN_VERSION
    from kiln.compiler.tune.measure import MeasureOptions, _measure_one, make_batch, \
        workload_input
    from kiln.project_gen import create_project
    import tempfile

    target = target_for(BOARD)
    w = extract_workloads(optimize(kc.load(DIGITS)), target)[0]
    batch = make_batch([(w, w.candidates[0])], target, KILN_VERSION)
    assert len(batch.variants) == 2                     # the candidate and the reference
    with tempfile.TemporaryDirectory() as tmp:
        project = create_project(batch.artifact, BOARD, Path(tmp) / "fw", mode="host-driven")
        with project.connect() as session:
            v = batch.variants[0]
            x = workload_input(w, v.input_bytes)
            good = session.run_kernel(batch.variants[1].index, [x])[0]
            ok = _measure_one(session, v, x, good, MeasureOptions(repeat=2), lambda t, hz: t)
            bad = bytearray(good)
            bad[5] ^= 1
            m = _measure_one(session, v, x, bytes(bad), MeasureOptions(), lambda t, hz: t)
    assert ok.status == "ok" and len(ok.cycles) == 2
    assert m.status == "mismatch" and not m.cycles and "first at 5" in m.detail


@pytest.mark.parametrize("board", ["mps2-an385", "microbit"])
def test_cores_without_dsp_tune_the_plain_c_blocked_kernels(board, qemu_tools, tmp_path):
    """Cortex-M3 and M0: the plain kernels stay the default, the blocked kernels' plain-C
    forms are timed (and checked on the device) too, and a build that picks them is exact."""
    records = tmp_path / "r.jsonl"
    assert main(["tune", str(DIGITS), "--board", board, "--workers", "2", "--repeat", "1",
                 "-o", str(records)]) == 0
    entries = [json.loads(line) for line in records.read_text().splitlines()]
    assert {e["knobs"]["variant"] for e in entries} >= {"generic", "gemm", "rows"}
    assert all(e["status"] == "ok" for e in entries), entries
    g = kc.load(DIGITS)
    default_kernels = {o["kernel"] for o in kc.compile(g, board).report["ops"]}
    assert {"kiln_conv2d_s8", "kiln_fully_connected_s8"} <= default_kernels
    for e in entries:                    # make the blocked kernels win every layer
        if e["knobs"]["variant"] == "generic":
            e["cycles"] = {"median": 10**9, "min": 10**9, "max": 10**9}
    flipped = tmp_path / "flipped.jsonl"
    flipped.write_text("".join(json.dumps(e) + "\n" for e in entries))
    from kiln.project_gen import create_project

    x = np.load(REPO / "examples" / "digits" / "digits_test_x.npy")[:2]
    project = create_project(str(DIGITS), board, tmp_path / "fw", inputs=[x],
                             tuning_records=flipped)
    kernels = {o["kernel"] for o in project.manifest["ops"]}
    assert any(k.startswith("kiln_conv2d_gemm") for k in kernels), kernels
    assert any(k.startswith("kiln_fully_connected_rows") for k in kernels), kernels
    got = project.run().outputs[0].reshape(len(x), -1)
    for i in range(len(x)):
        want = run_reference(DIGITS.read_bytes(), [x[i:i + 1]])[0]
        assert_equal_exact(got[i].reshape(want.shape), want, f"{board} sample {i}")


@pytest.mark.parametrize("trust_estimate", [True, False])
def test_layers_too_large_to_tune_alone_are_named_not_fatal(trust_estimate, qemu_tools,
                                                           tmp_path, monkeypatch):
    """KWS on the micro:bit (16 KB RAM): the model fits in place, but a tuning build holds a
    layer's 8,000-byte input and output side by side. With the size estimate (or, when the
    estimate lets everything through, with the linker's verdict and batch halving) those
    layers are named and left to the default; the others are tuned."""
    from kiln.compiler.tune import tuner

    if not trust_estimate:
        monkeypatch.setattr(tuner, "_room", lambda size, margin: 10**9)
    records = Records.load(tmp_path / "r.jsonl", missing_ok=True)
    g = kc.load(model_path("kws_ref_model"))
    summary = tuner.tune(g, "microbit", records, tuner.TuneOptions(workers=2))
    big = {w.key for w in extract_workloads(optimize(g), target_for("microbit"))
           if w.op_type == "DEPTHWISE_CONV_2D" or w.key.startswith("CONV_2D in 1x25x5x64")}
    assert set(summary.unfit) == big
    why = "does not fit microbit: RAM overflows" if not trust_estimate else "needs arena 16,"
    assert all(why in reason for reason in summary.unfit.values()), summary.unfit
    timed = {e["workload"] for e in records.entries if e["status"] == "ok"}
    assert timed and not timed & big and not summary.problems
    assert {e["status"] for e in records.entries} == {"ok", "unfit"}
    assert {e["workload"] for e in records.entries if e["status"] == "unfit"} == big
    assert summary.measured == len(records.entries) - len(
        [e for e in records.entries if e["status"] == "unfit"])
    again = tuner.tune(g, "microbit", records, tuner.TuneOptions(workers=2))
    assert again.measured == 0 and again.batches == 0


@pytest.mark.parametrize("argv, message", [
    (["--board", "nucleo-l4r5zi"], "--port"),
    (["--board", BOARD, "--workers", "0"], "--workers: must be at least 1"),
    (["--board", BOARD, "--timeout", "-5"], "--timeout: must be a positive number"),
    (["--board", "no-such-board"], "unknown board"),
])
def test_tune_refuses_bad_requests_with_one_line(argv, message, tmp_path, capsys):
    try:
        rc = main(["tune", str(DIGITS), *argv, "-o", str(tmp_path / "r.jsonl")])
    except SystemExit as exc:           # argparse refuses a bad number itself
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert main(["tune", str(DIGITS), "--board", BOARD, "-o", str(tmp_path / "r.txt")]) == 2
    capsys.readouterr()
    assert main(["tune", str(DIGITS), "--board", BOARD, "-o", "/proc/kiln-none/r.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "/proc/kiln-none" in err and "Traceback" not in err and "candidates" not in err


def test_tuning_boards_over_their_serial_ports_with_a_flash_command(qemu_tools, tmp_path,
                                                                    capsys):
    """The real-board path: each tuning firmware is "flashed" by the user's command, then
    reached over --port; two ports, two boards, two workers. Here each board is a QEMU the
    command starts with its UART on a TCP port (pyserial's socket:// URL), so the bytes go
    through a real serial stack."""
    import socket
    import subprocess

    from kiln.project_gen import get_board
    from kiln.project_gen.qemu import qemu_args

    tcp_ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            tcp_ports.append(s.getsockname()[1])
    args = qemu_args(get_board(BOARD))
    args[args.index("stdio")] = "tcp:127.0.0.1:$P,server=on,wait=off"
    flash = (f"P=$(echo {{port}} | sed 's/.*://'); kill $(cat {tmp_path}/$P.pid) 2>/dev/null; "
             f"qemu-system-arm {' '.join(args)} -kernel {{elf}} >/dev/null 2>&1 & "
             f"echo $! > {tmp_path}/$P.pid")
    records = tmp_path / "board.jsonl"
    try:
        rc = main(["tune", str(DIGITS), "--board", BOARD, "--flash-command", flash,
                   "--repeat", "2", "-o", str(records)] +
                  [f"--port=socket://127.0.0.1:{p}" for p in tcp_ports])
    finally:
        for pid in tmp_path.glob("*.pid"):
            subprocess.run(["kill", pid.read_text().strip()], capture_output=True)
    assert rc == 0, capsys.readouterr().err
    assert len(list(tmp_path.glob("*.pid"))) == 2                   # both boards were used
    entries = [json.loads(line) for line in records.read_text().splitlines()]
    ws = extract_workloads(optimize(kc.load(DIGITS)), target_for(BOARD))
    assert len(entries) == sum(len(w.candidates) for w in ws)
    assert all(e["status"] == "ok" and e["unit"] == "cycles" for e in entries)
    assert main(["tune", str(DIGITS), "--board", BOARD, "--flash-command", "true",
                 "-o", str(records)]) == 2                    # a flash command needs a port
