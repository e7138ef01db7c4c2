"""Whole models on the host: kiln's outputs equal tflite-micro's, bit for bit."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from reference import assert_equal_exact, run_reference

from kiln.compiler import InputError, compile, load
from kiln.compiler.host_build import build_executable

from conftest import MLPERF_INT8, model_path, require_tool

INT8_MODELS = MLPERF_INT8 + ["digits_cnn_int8"]


def _random_inputs(art, rng):
    return [rng.integers(-128, 128, size=s["shape"]).astype(np.int8) for s in art.report["inputs"]]


@pytest.fixture(scope="module", params=INT8_MODELS)
def compiled(request):
    path = model_path(request.param)
    return request.param, path, compile(load(path), board="host")


def test_outputs_identical_to_tflite_micro(compiled):
    name, path, art = compiled
    data = path.read_bytes()
    rng = np.random.default_rng(7)
    for trial in range(5):
        xs = _random_inputs(art, rng)
        want = run_reference(data, xs)
        got = art.run(*xs)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_equal_exact(g, w.reshape(g.shape), f"{name} trial {trial} output {i}")


def test_compile_is_deterministic(compiled):
    name, path, art = compiled
    again = compile(load(path), board="host")
    for fname in art.files:
        assert again.files[fname] == art.files[fname], f"{name}: {fname} differs between compiles"


def test_wrong_input_shape_and_dtype_are_refused(compiled):
    name, _, art = compiled
    spec = art.report["inputs"][0]
    with pytest.raises(InputError, match="wants int8"):
        art.run(np.zeros(spec["shape"], dtype=np.complex64))
    with pytest.raises(InputError, match=r"has shape .*; got an array of shape"):
        art.run(np.zeros([s + 1 for s in spec["shape"]], dtype=np.int8))
    with pytest.raises(InputError, match=r"run\(\) takes one sample, got 2 stacked"):
        art.run(np.zeros([2, *spec["shape"][1:]], dtype=np.int8))
    # float data is quantized with the input's scale and zero point, as on every path
    scale, zp = spec["scale"], spec["zero_point"]
    q = np.random.default_rng(1).integers(-128, 128, spec["shape"]).astype(np.int8)
    real = ((q.astype(np.float32) - zp) * scale).astype(np.float32)
    for got, want in zip(art.run(real), art.run(q)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(InputError, match="takes 1 input"):
        art.run(np.zeros(spec["shape"], dtype=np.int8), np.zeros(spec["shape"], dtype=np.int8))


_SANITIZER_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include "model.h"

static uint8_t arena[KILN_ARENA_BYTES] __attribute__((aligned(16)));

int main(int argc, char **argv)
{
    /* argv[1]: input bytes; argv[2]: where to write output 0's bytes. */
    static int8_t input[KILN_INPUT_0_BYTES];
    static int8_t output[KILN_OUTPUT_0_BYTES];
    if (argc != 3) return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f || fread(input, 1, sizeof input, f) != sizeof input) return 3;
    fclose(f);
    const void *inputs[] = {input};
    void *outputs[] = {output};
    int status = kiln_run(inputs, outputs, arena);
    if (status != 0) return 4;
    f = fopen(argv[2], "wb");
    if (!f || fwrite(output, 1, sizeof output, f) != sizeof output) return 5;
    fclose(f);
    return 0;
}
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", MLPERF_INT8)
def test_runs_clean_under_asan_and_ubsan(name, tmp_path):
    require_tool("cc")
    path = model_path(name)
    art = compile(load(path), board="host")
    sources = {k: v for k, v in art.files.items() if k != "kiln.json"}
    exe = build_executable(sources, _SANITIZER_MAIN, tmp_path / "build", sanitize=True)
    rng = np.random.default_rng(3)
    x = _random_inputs(art, rng)[0]
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    proc = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "runtime error" not in proc.stderr, proc.stderr[-3000:]
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.int8)
    want = run_reference(path.read_bytes(), [x])[0].reshape(-1)
    assert_equal_exact(got, want, f"{name} under sanitizers")
