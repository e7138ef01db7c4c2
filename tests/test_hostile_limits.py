"""Limits named in one line before any build (issue 19): a model with more inputs or
outputs than the RPC server's tables was accepted by `project create --mode host-driven`
and the build failed on a static assert ("size of array is negative"). The limits live in
kiln.compiler.limits and must agree with the C that sets them."""

from __future__ import annotations

import re

import pytest

from conftest import REPO, require_tool
from kiln.compiler import limits
from kiln.compiler.cli import main
from kiln.compiler.errors import ModelError
from kiln.project_gen.boards import NAME_MAX
from tflite_builder import OpSpec, TensorSpec, build_model


def fan_model(n_in: int, n_out: int) -> bytes:
    """n_in inputs, n_out outputs, each output a RELU of one input."""
    ts = [TensorSpec((1, 8), scale=0.05, zero_point=0, name=f"in{i}") for i in range(n_in)]
    ops = []
    for j in range(n_out):
        ts.append(TensorSpec((1, 8), scale=0.05, zero_point=0, name=f"out{j}"))
        ops.append(OpSpec("RELU", [j % n_in], [len(ts) - 1]))
    return build_model(ops, ts, list(range(n_in)), list(range(n_in, len(ts))))


def kiln(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, err


def test_the_limits_are_the_c_ones():
    server = (REPO / "crt" / "rpc" / "kiln_rpc_server.c").read_text()
    m = re.search(r"kiln_rpc_check_tensors\[\(KILN_NUM_INPUTS >= 1 && KILN_NUM_INPUTS <= (\d+) &&"
                  r"\s*KILN_NUM_OUTPUTS >= 1 && KILN_NUM_OUTPUTS <= (\d+)\)", server)
    assert m, "the static assert on the tensor counts moved: update kiln.compiler.limits"
    assert (limits.RPC_MAX_INPUTS, limits.RPC_MAX_OUTPUTS) == (int(m[1]), int(m[2]))
    wire = (REPO / "crt" / "rpc" / "kiln_rpc_wire.h").read_text()
    assert f"#define KILN_RPC_MAX_STRING {limits.RPC_MAX_STRING}u" in wire
    readme = (REPO / "crt" / "rpc" / "README.md").read_text()
    assert "| 0x08 | TIME | u16 warm-up runs, 2 pad, u32 repeat (≥ 1) |" in readme
    assert (limits.RPC_MAX_WARMUP, limits.RPC_MAX_REPEAT) == (2**16 - 1, 2**32 - 1)
    assert NAME_MAX <= limits.RPC_MAX_STRING     # the host compares the board name whole


@pytest.mark.parametrize("n_in, n_out, what", [(1, 9, "9 outputs"), (9, 1, "9 inputs"),
                                               (9, 12, "9 inputs")])
def test_too_many_tensors_refused_before_any_build(capsys, tmp_path, n_in, n_out, what):
    model = tmp_path / "wide.tflite"
    model.write_bytes(fan_model(n_in, n_out))
    out = tmp_path / "fw"
    code, err = kiln(capsys, "project", "create", model, "--board", "host", "--mode",
                     "host-driven", "-o", out)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert what in lines[0] and "1 to 8" in lines[0] and "standalone" in lines[0]
    assert not out.exists()                 # refused before a file was written


def test_standalone_has_no_tensor_limit(tmp_path):
    from kiln.project_gen import create_project

    model = tmp_path / "wide.tflite"
    model.write_bytes(fan_model(1, 9))
    p = create_project(model, "host", tmp_path / "fw")
    assert len(p.manifest["outputs"]) == 9


@pytest.mark.parametrize("report, match", [
    ({"arena_bytes": 2**31}, r"2,147,483,648-byte arena.*int32_t"),
    ({"inputs": [{}], "outputs": [{}] * 9}, "9 outputs"),
    ({"inputs": [], "outputs": [{}]}, "0 inputs"),
    ({"inputs": [{}], "outputs": [{}], "ops": [{}] * 65536}, "65,536 layers"),
])
def test_check_firmware_limits(report, match):
    with pytest.raises(ModelError, match=match) as e:
        limits.check_firmware_limits({"model": {"name": "m"}, **report}, "host-driven", "host")
    assert "\n" not in str(e.value)


def test_within_the_limits_nothing_is_raised():
    ok = {"model": {"name": "m"}, "inputs": [{}] * 8, "outputs": [{}] * 8, "ops": [{}] * 65535,
          "arena_bytes": 2**31 - 1}
    limits.check_firmware_limits(ok, "host-driven")
    limits.check_firmware_limits({**ok, "outputs": [{}] * 100}, "standalone")


@pytest.mark.slow
def test_a_model_at_the_limit_builds(capsys, tmp_path):
    require_tool("cc")
    model = tmp_path / "wide.tflite"
    model.write_bytes(fan_model(8, 8))
    out = tmp_path / "fw"
    assert kiln(capsys, "project", "create", model, "--board", "host", "--mode", "host-driven",
                "-o", out)[0] == 0
    code, err = kiln(capsys, "project", "build", out)
    assert code == 0, err
