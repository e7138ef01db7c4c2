"""The C fixed-point helpers (crt/kernels/kiln_math.h) and their numpy twins agree bit for bit."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kiln.compiler import numerics
from kiln.compiler.paths import crt_dir

_WRAPPER = r"""
#include "kiln_math.h"
void requantize_array(const int32_t *x, const int32_t *m, const int32_t *s, int32_t *out, int n) {
    for (int i = 0; i < n; ++i) out[i] = kiln_requantize(x[i], m[i], s[i]);
}
void srdhm_array(const int32_t *a, const int32_t *b, int32_t *out, int n) {
    for (int i = 0; i < n; ++i) out[i] = kiln_sat_rounding_doubling_high_mul(a[i], b[i]);
}
"""


@pytest.fixture(scope="module")
def cmath(tmp_path_factory):
    import cffi

    d: Path = tmp_path_factory.mktemp("cmath")
    (d / "w.c").write_text(_WRAPPER)
    lib = d / "libw.so"
    subprocess.run(["cc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
                    "-fsanitize=undefined", "-fno-sanitize-recover=all",
                    "-I", str(crt_dir() / "kernels"), "-o", str(lib), str(d / "w.c")], check=True)
    ffi = cffi.FFI()
    ffi.cdef("void requantize_array(const int32_t *, const int32_t *, const int32_t *, int32_t *, int);"
             "void srdhm_array(const int32_t *, const int32_t *, int32_t *, int);")
    return ffi, ffi.dlopen(str(lib))


def _c_requantize(cmath, x, m, s):
    ffi, lib = cmath
    x, m, s = (np.ascontiguousarray(v, dtype=np.int32) for v in (x, m, s))
    out = np.zeros_like(x)
    lib.requantize_array(ffi.from_buffer("int32_t[]", x), ffi.from_buffer("int32_t[]", m),
                         ffi.from_buffer("int32_t[]", s), ffi.from_buffer("int32_t[]", out), x.size)
    return out


def _edge_values():
    return np.array([0, 1, -1, 2, -2, 127, -128, 255, -256, 1 << 20, -(1 << 20),
                     (1 << 31) - 1, -(1 << 31), (1 << 30), -(1 << 30), 12345678, -87654321],
                    dtype=np.int64)


def test_requantize_c_matches_numpy_random_and_edges(cmath):
    rng = np.random.default_rng(0)
    n = 200_000
    x = rng.integers(-(1 << 31), (1 << 31) - 1, size=n, endpoint=True)
    x[: n // 2] = rng.integers(-(1 << 20), 1 << 20, size=n // 2)     # accumulator-sized values
    m = rng.integers(1 << 30, (1 << 31) - 1, size=n, endpoint=True)
    s = rng.integers(-31, 0, size=n, endpoint=True)
    # positive shifts only with values that cannot overflow int32 when shifted
    small = rng.random(n) < 0.1
    s[small] = rng.integers(1, 8, size=small.sum())
    x[small] = rng.integers(-(1 << 20), 1 << 20, size=small.sum())
    edges = _edge_values()
    ex, em, es = np.meshgrid(edges, np.array([0, 1, 1 << 30, (1 << 31) - 1, -(1 << 31)]),
                             np.array([-31, -16, -1, 0]), indexing="ij")
    x = np.concatenate([x, ex.ravel()])
    m = np.concatenate([m, em.ravel()])
    s = np.concatenate([s, es.ravel()])
    got = _c_requantize(cmath, x, m, s)
    want = numerics.requantize(x, m, s).astype(np.int32)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{bad.size} differ, first: " + ", ".join(
        f"x={x[i]} m={m[i]} s={s[i]} c={got[i]} np={want[i]}" for i in bad[:10])


def test_saturating_high_mul_overflow_case(cmath):
    ffi, lib = cmath
    a = np.array([-(1 << 31), -(1 << 31), (1 << 31) - 1], dtype=np.int32)
    b = np.array([-(1 << 31), (1 << 31) - 1, (1 << 31) - 1], dtype=np.int32)
    out = np.zeros(3, dtype=np.int32)
    lib.srdhm_array(ffi.from_buffer("int32_t[]", a), ffi.from_buffer("int32_t[]", b),
                    ffi.from_buffer("int32_t[]", out), 3)
    assert out[0] == (1 << 31) - 1
    assert list(out) == list(numerics.sat_rounding_doubling_high_mul(a, b))


@pytest.mark.parametrize("real", [1e-12, 2 ** -32, 2 ** -31, 1e-6, 0.0039062, 0.25, 0.5,
                                  0.99999999999, 1.0, 1.5, 3.999999, 1000.0])
def test_quantize_multiplier_represents_the_real_value(real):
    m, s = numerics.quantize_multiplier(real)
    if m == 0:
        assert real < 2 ** -31 and s == 0        # flushed to zero, as TFLite does
        return
    assert (1 << 30) <= m < (1 << 31)
    assert math.isclose(m * 2.0 ** (s - 31), real, rel_tol=2 ** -30)


def test_quantize_multiplier_rounds_up_into_next_power():
    # q rounds to exactly 2^31: TFLite halves it and bumps the shift.
    real = 1.0 - 2 ** -40
    m, s = numerics.quantize_multiplier(real)
    assert (m, s) == (1 << 30, 1)


def test_activation_range_relu6():
    lo, hi = numerics.activation_range("RELU6", 6.0 / 255, -128)
    assert (lo, hi) == (-128, 127)
    lo, hi = numerics.activation_range("RELU", 0.1, 10)
    assert (lo, hi) == (10, 127)
    assert numerics.activation_range("NONE", 0.1, 0) == (-128, 127)
