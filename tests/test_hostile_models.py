"""Hostile shapes and parameters: refused with one ModelError, or compiled to C that runs
clean under ASan/UBSan. Never a traceback, a wrapped int32 or an out-of-bounds access.

The classes: shapes whose element count wraps (in int64 or in the kernels' int32),
absurd ranks, window geometry (dilation, stride, padding) whose index arithmetic leaves
int32, zero points outside their type, an arena beyond int32 offsets. The compiler's
side is compiler/codegen/bounds.py and the reader; the kernels' own argument checks
guard direct callers.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from kiln.compiler import compile as kiln_compile
from kiln.compiler import load
from kiln.compiler.errors import ModelError
from kiln.compiler.host_build import build_executable

from conftest import require_tool, run_sanitized_c
from hostile_builders import (fc_model, live_outputs_model, mean_model, pool_model, unary_model,
                              window_model)


def _refused(data: bytes, *phrases: str) -> str:
    """Compile for the host; the ModelError's one line must hold every phrase."""
    with pytest.raises(ModelError) as info:
        kiln_compile(load(data), board="host")
    text = str(info.value)
    assert "\n" not in text
    for phrase in phrases:
        assert phrase in text, text
    return text


# --- shapes ----------------------------------------------------------------------------

@pytest.mark.parametrize("dims", [
    (1 << 16,) * 4,                          # 2^64: wraps to 0 in int64 (numpy's product)
    (1 << 24, 1 << 24, 1 << 24, 1 << 16),    # 2^88: wraps to 0 too
])
def test_max_pool_whose_element_count_wraps_is_refused(dims):
    """The product wrapped to 0 in the reader's int64 check: the model compiled with a
    tiny arena and the kernel wrote gigabytes past it (SIGSEGV)."""
    _refused(pool_model(dims, dims), "tensor 0", "elements")


def test_zero_size_activation_is_refused():
    """A VALID 2x2 average pool over a 1-wide input has a 0-wide output: it compiled and
    the kernel refused it at run time (fuzz finding; every kernel refuses dims < 1)."""
    _refused(pool_model((2, 2, 1, 6), (2, 1, 0, 6), op="AVERAGE_POOL_2D", filter_height=2,
                        filter_width=2, stride_h=3, stride_w=2), "[2, 1, 0, 6] is empty")


def test_absurd_rank_is_refused():
    """Rank 1,000 compiled; `kiln run` then died in numpy (at most 64 dims)."""
    _refused(unary_model((1,) * 1000), "rank 1000", "at most 8")


# --- window geometry -------------------------------------------------------------------

@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
@pytest.mark.parametrize("dilation", [(1 << 30) + 1, (1 << 31) - 1])
def test_dilation_beyond_int32_is_refused(op, dilation):
    """These passed every check and the C crashed (exit 139): (k - 1) * dilation wrapped."""
    _refused(window_model(op, dilation=dilation), op, "dilation_h", "int32_t", "2,147,483,647")


def _run_sanitized(data: bytes, tmp_path: Path) -> np.ndarray:
    """Compile, build with ASan + UBSan, run on one random input; the output bytes."""
    from test_models_host import _SANITIZER_MAIN

    require_tool("cc")
    art = kiln_compile(load(data), board="host")
    sources = {k: v for k, v in art.files.items() if k != "kiln.json"}
    exe = build_executable(sources, _SANITIZER_MAIN, tmp_path / "build", sanitize=True)
    shape = art.report["inputs"][0]["shape"]
    x = np.random.default_rng(3).integers(-128, 128, size=shape).astype(np.int8)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    proc = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "runtime error" not in proc.stderr, proc.stderr[-3000:]
    return np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.int8)


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
def test_dilation_limit_is_exact(op, tmp_path: Path):
    """A 9x9 filter: dilation 2^28 makes the dilated extent 2^31 + 1 (refused); 2^27 keeps
    every index in int32 (SAME padding of ~2^29), and that C runs clean under ASan/UBSan:
    only the centre tap lands in the image."""
    _refused(window_model(op, dilation=1 << 28, k=9), "dilated filter extent")
    out = _run_sanitized(window_model(op, dilation=1 << 27, k=9), tmp_path)
    assert out.size == 5 * 5 * 4


_C_DIRECT = r"""
#include <stdio.h>
#include "kiln_kernels.h"

int main(void)
{
    static int8_t x[100], y[100], patch[4096];
    static int8_t w[4 * 3 * 3 * 4];
    static const int32_t mult[4] = {1 << 30, 1 << 30, 1 << 30, 1 << 30}, shift[4] = {0};
    const kiln_per_channel_requant_t q = {mult, shift};
    const kiln_context_t ctx = {patch, sizeof(patch)};
    const kiln_dims_t in = {1, 5, 5, 4}, out = {1, 5, 5, 4};
    const kiln_dims_t cf = {4, 3, 3, 4}, df = {1, 3, 3, 4};
    const int32_t dils[2] = {(INT32_C(1) << 30) + 1, INT32_MAX};
    for (int i = 0; i < 2; ++i) {
        /* SAME padding of a 3x3 filter dilated this much: about one dilation. */
        const int32_t d = dils[i];
        const kiln_conv_params_t p = {{1, 1}, {d, d}, {d, d}, 0, 0, {-128, 127}};
        const kiln_dwconv_params_t dp = {p, 1};
        printf("%d", (int)kiln_conv2d_s8(&ctx, &p, &q, &in, x, &cf, w, NULL, &out, y));
        printf("%d", (int)kiln_dwconv2d_s8(&dp, &q, &in, x, &df, w, NULL, &out, y));
        /* Stride and padding d: transpose conv forms out + padding and filter + stride. */
        const kiln_conv_params_t t = {{d, d}, {d, d}, {1, 1}, 0, 0, {-128, 127}};
        printf("%d", (int)kiln_transpose_conv_s8(&t, &q, &in, x, &cf, w, NULL, &out, y));
        /* Padding d: pooling forms the origin out * stride - padding and in - origin. */
        const kiln_pool_params_t pp = {{1, 1}, {d, d}, {1, 1}, {-128, 127}};
        printf("%d ", (int)kiln_maxpool_s8(&pp, &in, x, &out, y));
    }
    printf("\n");
    return 0;
}
"""


def test_kernels_refuse_geometry_beyond_int32(tmp_path: Path):
    """Called directly (no compiler in front), the kernels formed origin + k * dilation
    and -origin + dilation - 1 in int32: signed overflow under UBSan in dwconv.c and
    conv2d.c. Now their argument checks refuse such geometry (status 1): conv and
    depthwise conv at both dilations; transpose conv and pooling only at 2^31 - 1, as
    with 2^30 + 1 their arithmetic stays in int32 (and runs clean here: status 0)."""
    out = run_sanitized_c(tmp_path, _C_DIRECT, ["conv2d.c", "dwconv.c", "transpose_conv.c",
                                                "pool.c"])
    assert out.split() == ["1100", "1111"], out


# --- quantization ----------------------------------------------------------------------

@pytest.mark.parametrize("zero_point", [1 << 62, -(1 << 63), 1000])
def test_weight_zero_point_outside_int8_is_refused(zero_point):
    """2^62 and -2^63 raised OverflowError in conv.py; 1000 compiled and the kernel
    refused it at run time (status 1)."""
    _refused(fc_model(zero_point), "tensor 1", f"zero point {zero_point}", "int8")


def test_mean_scale_ratio_beyond_int32_multiplier_is_refused():
    """An output scale of 1.2e-38 makes input/output scale ~2^120: it compiled and the
    kernel refused the shift at run time (fuzz finding)."""
    _refused(mean_model(1.2e-38), "MEAN", "2^30 or more")


# --- the arena -------------------------------------------------------------------------

def test_arena_beyond_int32_is_refused():
    """Nine live tensors of 2^28 bytes: every one is legal, their arena (2^31 + 2^28
    bytes) does not fit the int32 offsets; this compiled."""
    _refused(live_outputs_model(8, (1 << 14, 1 << 14)), "arena size", "int32_t")
