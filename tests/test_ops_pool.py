"""AVERAGE_POOL_2D and MAX_POOL_2D against tflite-micro, bit for bit.

Many random cases go into one model (one op per case, each with its own input and
output), so a batch costs one kiln host build and one TFLM run. `OpCase` and
`check_cases` are shared with the reduce and data-movement tests.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kiln.compiler import compile as kiln_compile
from kiln.compiler import load
from kiln.compiler.errors import ModelError
from kiln.compiler.numerics import activation_range
from reference import assert_equal_exact, run_reference, run_tflite_ref
from tflite_builder import OpSpec, TensorSpec, build_model, rand_int, single_op_model

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- batch harness


@dataclass
class OpCase:
    """One operator: inputs (constants carry data), outputs, options, a label for messages."""

    label: str
    op: str
    inputs: list[TensorSpec | None]
    outputs: list[TensorSpec]
    options: dict[str, Any] = field(default_factory=dict)


def batch_model(cases: list[OpCase]) -> bytes:
    """One model holding every case as an independent operator."""
    tensors: list[TensorSpec] = []
    ops: list[OpSpec] = []
    model_inputs: list[int] = []
    model_outputs: list[int] = []
    for case in cases:
        ins = []
        for t in case.inputs:
            if t is None:
                ins.append(-1)
                continue
            ins.append(len(tensors))
            if t.data is None:
                model_inputs.append(len(tensors))
            tensors.append(t)
        outs = list(range(len(tensors), len(tensors) + len(case.outputs)))
        tensors.extend(case.outputs)
        model_outputs.extend(outs)
        ops.append(OpSpec(case.op, ins, outs, dict(case.options)))
    return build_model(ops, tensors, model_inputs, model_outputs)


def random_inputs(cases: list[OpCase], rng: np.random.Generator) -> list[np.ndarray]:
    return [rand_int(t.shape, rng, t.dtype) for c in cases for t in c.inputs
            if t is not None and t.data is None]


def check_cases(cases: list[OpCase], seed: int = 0, engine: str = "tflm",
                runs: int = 2) -> None:
    """Compile the batch with kiln, run it on the host and compare every output exactly
    with the reference (`engine` "tflm" or "tflite_ref") on `runs` random inputs."""
    model = batch_model(cases)
    art = kiln_compile(load(model), board="host")
    labels = [f"{c.label} output {i}" for c in cases for i in range(len(c.outputs))]
    rng = np.random.default_rng(seed)
    reference = run_reference if engine == "tflm" else run_tflite_ref
    for _ in range(runs):
        xs = random_inputs(cases, rng)
        want = reference(model, xs)
        got = art.run(*xs)
        failures = []
        for g, w, label in zip(got, want, labels):
            try:
                assert_equal_exact(g, w.reshape(g.shape) if g.size == w.size else w, label)
            except AssertionError as e:
                failures.append(str(e))
        assert not failures, "\n".join(failures[:10])


def _sanitizer_main(n_in: int, n_out: int) -> str:
    """main(): input i from file argv[1 + i]; output j to file argv[1 + n_in + j]."""
    lines = ["#include <stdio.h>", '#include "model.h"', "",
             "static uint8_t arena[KILN_ARENA_BYTES] __attribute__((aligned(16)));"]
    lines += [f"static uint8_t in{i}[KILN_INPUT_{i}_BYTES];" for i in range(n_in)]
    lines += [f"static uint8_t out{j}[KILN_OUTPUT_{j}_BYTES];" for j in range(n_out)]
    lines += ["", "static int io(const char *path, void *buf, size_t n, int write)", "{",
              '    FILE *f = fopen(path, write ? "wb" : "rb");', "    if (f == NULL) return 1;",
              "    size_t done = write ? fwrite(buf, 1, n, f) : fread(buf, 1, n, f);",
              "    fclose(f);", "    return done != n;", "}", "",
              "int main(int argc, char **argv)", "{",
              f"    if (argc != {1 + n_in + n_out}) return 2;"]
    lines += [f"    if (io(argv[{1 + i}], in{i}, sizeof in{i}, 0)) return 3;" for i in range(n_in)]
    lines += ["    const void *inputs[] = {" + ", ".join(f"in{i}" for i in range(n_in)) + "};",
              "    void *outputs[] = {" + ", ".join(f"out{j}" for j in range(n_out)) + "};",
              "    if (kiln_run(inputs, outputs, arena) != 0) return 4;"]
    lines += [f"    if (io(argv[{1 + n_in + j}], out{j}, sizeof out{j}, 1)) return 5;"
              for j in range(n_out)]
    return "\n".join(lines + ["    return 0;", "}", ""])


def check_sanitized(cases: list[OpCase], work: Path, seed: int = 0) -> None:
    """Build the batch with -fsanitize=address,undefined, run it once: no report, and the
    same bytes as the optimised build (which the other tests pin to the reference)."""
    from kiln.compiler.host_build import build_executable
    if shutil.which("cc") is None:
        pytest.skip("no host C compiler")
    art = kiln_compile(load(batch_model(cases)), board="host")
    n_in, n_out = len(art.report["inputs"]), len(art.report["outputs"])
    sources = {k: v for k, v in art.files.items() if k != "kiln.json"}
    exe = build_executable(sources, _sanitizer_main(n_in, n_out), work / "build", sanitize=True)
    xs = random_inputs(cases, np.random.default_rng(seed))
    args = [str(exe)]
    for i, x in enumerate(xs):
        (work / f"in{i}.bin").write_bytes(x.tobytes())
        args.append(str(work / f"in{i}.bin"))
    args += [str(work / f"out{j}.bin") for j in range(n_out)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "runtime error" not in proc.stderr, proc.stderr[-3000:]
    for j, want in enumerate(art.run(*xs)):
        got = np.frombuffer((work / f"out{j}.bin").read_bytes(), dtype=want.dtype)
        assert_equal_exact(got, want.reshape(-1), f"output {j} under sanitizers")


def compile_single(op: str, inputs, outputs, options=None):
    """kiln's artifact for a one-op model (for rejection tests)."""
    return kiln_compile(load(single_op_model(op, inputs, outputs, options or {})), board="host")


def cross_compile(sources: list[str], cpu_flags: list[str]) -> None:
    """Compile kernel sources with arm-none-eabi-gcc -Werror; fail on any diagnostic."""
    cc = shutil.which("arm-none-eabi-gcc")
    if cc is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    kernels = REPO / "crt" / "kernels"
    for src in sources:
        cmd = [cc, *cpu_flags, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I",
               str(kernels), "-c", str(kernels / src), "-o", "/dev/null"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"


ARM_TARGETS = {
    "m4f": ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
    "m0plus": ["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"],
    "m3": ["-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"],
}


# --------------------------------------------------------------------------- pooling cases


def _out_size(padding: str, size: int, k: int, s: int) -> int:
    return (size + s - 1) // s if padding == "SAME" else (size + s - k) // s


def pool_case(op: str, shape, k, s, padding="VALID", act="NONE", scale=0.05, zp=-3,
              label="") -> OpCase:
    n, h, w, c = shape
    oh, ow = _out_size(padding, h, k[0], s[0]), _out_size(padding, w, k[1], s[1])
    x = TensorSpec(shape, scale=scale, zero_point=zp)
    y = TensorSpec((n, oh, ow, c), scale=scale, zero_point=zp)
    opts = {"padding": padding, "stride_h": s[0], "stride_w": s[1], "filter_height": k[0],
            "filter_width": k[1], "fused_activation_function": act}
    label = label or f"{op} {shape} k{k} s{s} {padding} {act} zp{zp}"
    return OpCase(label, op, [x], [y], opts)


def random_pool_cases(op: str, rng: np.random.Generator, n: int) -> list[OpCase]:
    cases = []
    while len(cases) < n:
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 12)), int(rng.integers(1, 12)),
                 int(rng.choice([1, 3, 8, 17, 32, 40, 67])))
        k = (int(rng.integers(1, 6)), int(rng.integers(1, 6)))
        s = (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
        padding = str(rng.choice(["SAME", "VALID"]))
        if padding == "VALID" and (k[0] > shape[1] or k[1] > shape[2]):
            continue
        act = str(rng.choice(["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]))
        scale = float(np.float32(np.exp(rng.uniform(np.log(0.003), np.log(0.3)))))
        zp = int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))
        cases.append(pool_case(op, shape, k, s, padding, act, scale, zp))
    return cases


EDGE_SHAPES = [
    # (shape, kernel, stride, padding)
    ((1, 1, 1, 5), (1, 1), (1, 1), "VALID"),        # 1x1 spatial
    ((1, 1, 1, 5), (3, 3), (2, 2), "SAME"),         # window larger than the input
    ((1, 7, 7, 4), (2, 2), (3, 3), "VALID"),        # stride larger than the kernel
    ((1, 6, 9, 3), (3, 4), (2, 3), "SAME"),         # asymmetric SAME padding
    ((1, 8, 8, 32), (2, 2), (2, 2), "VALID"),       # digits max pool
    ((1, 3, 3, 256), (3, 3), (3, 3), "VALID"),      # vww global average pool
    ((1, 25, 5, 64), (25, 5), (25, 5), "VALID"),    # kws global average pool
    ((2, 5, 5, 33), (5, 5), (1, 1), "SAME"),        # every window clipped
]


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
def test_pool_edge_cases(op):
    cases = []
    for shape, k, s, padding in EDGE_SHAPES:
        for zp in (-128, 127):
            cases.append(pool_case(op, shape, k, s, padding, "NONE", 0.02, zp))
        cases.append(pool_case(op, shape, k, s, padding, "RELU6", 0.03, -20))
        cases.append(pool_case(op, shape, k, s, padding, "RELU", 0.5, 100))
    check_cases(cases, seed=1)


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
def test_pool_random(op):
    rng = np.random.default_rng(7 if op == "MAX_POOL_2D" else 8)
    check_cases(random_pool_cases(op, rng, 60), seed=2)


def test_avgpool_rounding_ties():
    """Sums that land exactly on .5 round away from zero, both signs."""
    cases = [pool_case("AVERAGE_POOL_2D", (1, 2, 2, 64), (2, 2), (2, 2), zp=0),
             pool_case("AVERAGE_POOL_2D", (1, 2, 1, 64), (2, 1), (1, 1), zp=0)]
    model = batch_model(cases)
    art = kiln_compile(load(model), board="host")
    # Windows of 4 and 2 values whose sums are ±2 (mod 4) and ±1 (mod 2).
    x1 = np.tile(np.array([1, 1, 0, 0, -1, -1, 0, 0, 3, 4, 3, 4, -3, -4, -3, -4],
                          np.int8).reshape(4, 4).T.reshape(1, 2, 2, 4), (1, 1, 1, 16))
    x2 = np.tile(np.array([1, 0, -1, 0, 127, -128, -128, -127], np.int8)
                 .reshape(2, 4).reshape(1, 2, 1, 4), (1, 1, 1, 16))
    want = run_reference(model, [x1, x2])
    got = art.run(x1, x2)
    for g, w, c in zip(got, want, cases):
        assert_equal_exact(g, w, c.label)


def test_avgpool_large_windows_extreme_values():
    """Window counts up to the 65536 limit, inputs at the int8 extremes: the division by
    multiplication must stay exact where the sums are largest."""
    cases = [pool_case("AVERAGE_POOL_2D", (1, 256, 256, 1), (256, 256), (1, 1), zp=0),
             pool_case("AVERAGE_POOL_2D", (1, 255, 257, 1), (255, 257), (1, 1), zp=0),
             pool_case("AVERAGE_POOL_2D", (1, 61, 67, 2), (61, 67), (1, 1), zp=0),
             pool_case("AVERAGE_POOL_2D", (1, 40, 40, 3), (17, 23), (5, 3), "SAME", zp=0)]
    model = batch_model(cases)
    art = kiln_compile(load(model), board="host")
    rng = np.random.default_rng(5)
    for fill in (-128, 127, None, "edges"):
        xs = []
        for c in cases:
            shape = c.inputs[0].shape
            if fill == "edges":
                x = rng.choice(np.array([-128, 127], np.int8), shape)
            elif fill is None:
                x = rand_int(shape, rng)
            else:
                x = np.full(shape, fill, np.int8)
            xs.append(x)
        for g, w, c in zip(art.run(*xs), run_reference(model, xs), cases):
            assert_equal_exact(g, w, f"{c.label} fill {fill}")


def test_global_average_pool_has_its_own_kernel():
    """One window over the whole input (VALID or SAME without padding, a filter as large as
    the input or larger) runs kiln_avgpool_global_s8: batches, a channel count with a tail
    of three past the blocks of four, clamps; any other window keeps kiln_avgpool_s8."""
    glob = [pool_case("AVERAGE_POOL_2D", (2, 5, 5, 35), (5, 5), (1, 1), zp=-128),
            pool_case("AVERAGE_POOL_2D", (1, 3, 4, 7), (3, 5), (3, 5), "SAME", "RELU6"),
            pool_case("AVERAGE_POOL_2D", (1, 1, 1, 5), (1, 2), (2, 2), "SAME", zp=127),
            pool_case("AVERAGE_POOL_2D", (3, 9, 2, 4), (9, 2), (9, 2), "VALID", "RELU")]
    other = [pool_case("AVERAGE_POOL_2D", (1, 5, 5, 8), (3, 3), (3, 3), "SAME"),   # padding
             pool_case("AVERAGE_POOL_2D", (1, 4, 4, 8), (4, 3), (1, 1))]           # 1x2 out
    art = kiln_compile(load(batch_model(glob + other)), board="host")
    kernels = [op["kernel"] for op in art.report["ops"]]
    assert kernels == ["kiln_avgpool_global_s8"] * len(glob) + ["kiln_avgpool_s8"] * len(other)
    check_cases(glob + other, seed=4, runs=3)


@pytest.mark.cross
@pytest.mark.qemu
def test_global_average_pool_dsp_lanes_on_qemu(tmp_path):
    """kiln_avgpool_global_s8's Cortex-M4 loop (four channels in two words of 16-bit lanes,
    KILN_POOL_LANE_PIXELS = 256 pixels a pass) against tflite-micro, in one firmware:
    windows of exactly 256 pixels all -128 and all 127 (the lanes' extremes), 300 pixels
    (a second pass) at -128 and random, batches, a tail of one to three channels."""
    from conftest import require_tool
    from kiln.project_gen import create_project
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    fills = [-128, 127, -128, None, None, None]
    cases = [pool_case("AVERAGE_POOL_2D", (1, 16, 16, 8), (16, 16), (1, 1), zp=0),
             pool_case("AVERAGE_POOL_2D", (1, 16, 16, 8), (16, 16), (1, 1), zp=0),
             pool_case("AVERAGE_POOL_2D", (1, 20, 15, 4), (20, 15), (1, 1), zp=0),
             pool_case("AVERAGE_POOL_2D", (2, 20, 15, 7), (20, 15), (1, 1), zp=-128),
             pool_case("AVERAGE_POOL_2D", (1, 25, 5, 6), (25, 5), (1, 1), act="RELU6", zp=3),
             pool_case("AVERAGE_POOL_2D", (3, 3, 3, 1), (3, 3), (3, 3), "SAME", zp=127)]
    model = batch_model(cases)
    art = kiln_compile(load(model), board="mps2-an386")
    assert [op["kernel"] for op in art.report["ops"]] == ["kiln_avgpool_global_s8"] * 6
    rng = np.random.default_rng(11)
    xs = [rand_int(c.inputs[0].shape, rng) if v is None else
          np.full(c.inputs[0].shape, v, np.int8) for c, v in zip(cases, fills)]
    got = create_project(art, board="mps2-an386", out_dir=tmp_path / "p", inputs=xs).run(
        timeout=120).outputs
    for g, w, c in zip(got, run_reference(model, xs), cases):
        assert_equal_exact(g, w, f"{c.label} on QEMU")


def test_pool_rejects_requantization():
    x = TensorSpec((1, 4, 4, 2), scale=0.1, zero_point=0)
    y = TensorSpec((1, 2, 2, 2), scale=0.2, zero_point=0)
    with pytest.raises(ModelError, match="differs from the output"):
        compile_single("MAX_POOL_2D", [x], [y], {"filter_height": 2, "filter_width": 2,
                                                 "stride_h": 2, "stride_w": 2})


def test_pool_generated_call_reads_well():
    case = pool_case("AVERAGE_POOL_2D", (1, 6, 9, 3), (4, 4), (2, 3), "SAME", "RELU6")
    art = kiln_compile(load(batch_model([case])), board="host")
    c = art.files["model.c"]
    assert "kiln_avgpool_s8(&params, &dims_1x6x9x3, " in c       # shapes named by their dims
    assert ".padding = {1, 0}" in c
    lo, hi = activation_range("RELU6", 0.05, -3)
    assert f".activation = {{{lo}, {hi}}}" in c


def test_pool_clean_under_sanitizers(tmp_path):
    cases = []
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        cases += [pool_case(op, shape, k, s, padding) for shape, k, s, padding in EDGE_SHAPES]
        cases += random_pool_cases(op, np.random.default_rng(17), 10)
    check_sanitized(cases, tmp_path)


@pytest.mark.cross
@pytest.mark.parametrize("target", sorted(ARM_TARGETS))
def test_pool_cross_compiles(target):
    cross_compile(["pool.c"], ARM_TARGETS[target])
