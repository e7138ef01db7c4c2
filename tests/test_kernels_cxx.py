"""kiln's public kernel headers (kiln_kernels.h and what it includes) carry extern "C"
guards: a C++ program includes them as they are and links with the kernels compiled as C."""

from __future__ import annotations

import subprocess

from conftest import REPO, require_tool

from kiln.compiler.host_build import kernel_library

KERNELS = REPO / "crt" / "kernels"

MAIN_CPP = r"""
#include "kiln_kernels.h"
#include <cstdio>

int main()
{
    static int8_t table[256];
    for (int i = 0; i < 256; ++i) table[i] = static_cast<int8_t>(127 - i);   /* x -> -1 - x */
    const kiln_lut_params_t params = {table};
    const kiln_dims_t dims = {1, 1, 1, 4};
    const int8_t in[4] = {-128, -1, 0, 127};
    int8_t out[4] = {0, 0, 0, 0};
    const kiln_status_t status = kiln_lut_s8(&params, &dims, in, &dims, out);
    std::printf("%d %d %d %d %d\n", static_cast<int>(status), out[0], out[1], out[2], out[3]);
    return status == KILN_OK ? 0 : 1;
}
"""


def test_cxx_program_links_the_c_kernels(tmp_path):
    require_tool("cc")
    gxx = require_tool("g++")
    objs = [str(kernel_library())]        # the C kernels, built by the C compiler (cached)
    main = tmp_path / "main.cpp"
    main.write_text(MAIN_CPP)
    exe = tmp_path / "app"
    done = subprocess.run([gxx, "-std=c++11", "-Wall", "-Wextra", "-pedantic", "-Werror",
                           f"-I{KERNELS}", str(main), *objs, "-lm", "-o", str(exe)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr      # unguarded: undefined _Z11kiln_lut_s8...
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["0", "127", "0", "-1", "-128"]


def test_public_headers_are_guarded():
    """Every header kiln_kernels.h includes (those with declarations) is guarded; the C
    a C compiler sees does not change (the guard is under #ifdef __cplusplus)."""
    top = (KERNELS / "kiln_kernels.h").read_text()
    included = [line.split('"')[1] for line in top.splitlines() if line.startswith('#include "')]
    assert len(included) >= 10
    for name in included:
        text = (KERNELS / name).read_text()
        assert text.count('#ifdef __cplusplus\nextern "C" {\n#endif') == 1, name
        assert text.count('#ifdef __cplusplus\n}\n#endif') == 1, name
