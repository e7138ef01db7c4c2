"""`kiln compile -o DIR --prefix P`: a library folder that builds with nothing else from
kiln, and two of them in one C++ program (CMake add_subdirectory and Make fragments),
on the host and cross for Cortex-M4 with softfp and hard float ABIs
(docs/own_firmware.md is the user's side of this).

Cross builds link a whole program with newlib's --specs=nosys.specs (its crt0 and the
default linker script) and are checked with nm; the two-model firmware on QEMU uses
kiln's own startup, UART and linker script from a rendered project.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, model_path, one_error, require_tool, run_kiln

from kiln.compiler import compile, load
from kiln.compiler.errors import InputError
from kiln.compiler.export import check_prefix

M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16"]
ABIS = ["softfp", "hard"]


# --- the names: fast, pure Python ----------------------------------------------------

@pytest.mark.parametrize("bad", ["", "9kws", "kws-1", "a b", "kws_", "a__b", "kiln", "KILN_x",
                                 "x" * 33, "kws;rm", "é", "pool", "Conv"])
def test_bad_prefix_is_one_line(bad, capsys, tmp_path):
    with pytest.raises(InputError):
        check_prefix(bad)
    code, _, err = run_kiln(capsys, "compile", REPO / "examples/digits/digits_int8.tflite",
                            "-o", tmp_path / "out", "--prefix", bad)
    assert code == 2 and "--prefix" in one_error(err)
    assert not (tmp_path / "out").exists()


def test_without_prefix_the_sources_are_unchanged(tmp_path):
    art = compile(load(REPO / "examples/digits/digits_int8.tflite"))
    art.save(tmp_path / "out")
    for name in ("model.h", "model.c", "weights.h", "weights.c", "kiln.json"):
        assert (tmp_path / "out" / name).read_text() == art.files[name]
    assert 'extern "C"' in art.files["model.h"]
    assert "add_library(kiln_model STATIC model.c weights.c)" in \
        (tmp_path / "out/CMakeLists.txt").read_text()
    kernels = sorted(p.name for p in (REPO / "crt/kernels").iterdir() if p.suffix in (".c", ".h"))
    assert sorted(p.name for p in (tmp_path / "out/kernels").iterdir()) == kernels
    # compiled again into its own output: allowed, and the kernels are replaced, not kept
    art.save(tmp_path / "out")


def test_prefixed_sources_name_everything_with_the_prefix():
    art = compile(load(REPO / "examples/digits/digits_int8.tflite"))
    src = art.sources("digits")
    assert sorted(src) == ["digits.c", "digits.h"]
    h, c = src["digits.h"], src["digits.c"]
    macros = re.findall(r"#define (\w+)", h)
    assert macros and all(m.startswith("DIGITS_") for m in macros), macros
    assert "int digits_run(const void *const *inputs, void *const *outputs, uint8_t *arena);" in h
    assert "int digits_run_layer(int32_t layer, uint8_t *arena);" in h
    assert "extern const char *const digits_layer_names[];" in h
    assert "void digits_reset(void);" in h and "#define DIGITS_STATE_BYTES 0" in h
    assert "kiln_run" not in h + c and "KILN_ARENA" not in h + c
    # at file scope, every definition in the .c is static but the four exported ones
    file_scope = [ln for ln in c.splitlines()
                  if ln and not ln.startswith(("static ", "typedef ", "#", "/*", " ", "}", "{"))]
    assert len(file_scope) == 4, file_scope
    assert file_scope[0] == "void digits_reset(void)"
    assert file_scope[1].startswith("const char *const digits_layer_names[")
    assert file_scope[2:] == ["int digits_run_layer(int32_t layer, uint8_t *arena)",
                              "int digits_run(const void *const *inputs, void *const *outputs, "
                              "uint8_t *arena)"]


# --- building: helpers ------------------------------------------------------------------

def _run(cmd, cwd=None, env=None) -> str:
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


MAIN_CPP = r"""// Two kiln models in one C++ program: run each once on fixed inputs, print the outputs.
#include <cstdio>
#include <cstdint>
#include "{a}.h"
#include "{b}.h"
#include "inputs.h"
#ifdef KILN_FIRMWARE
extern "C" {{
#include "platform.h"      // kiln's startup, UART and exit (crt/platform), on QEMU
}}
#endif

alignas(16) static uint8_t {a}_arena[{A}_ARENA_BYTES];
alignas(16) static uint8_t {b}_arena[{B}_ARENA_BYTES];
static int8_t {a}_out[{A}_OUTPUT_0_BYTES];
static int8_t {b}_out[{B}_OUTPUT_0_BYTES];

static void print(const char *name, const int8_t *data, int n) {{
    std::printf("%s", name);
    for (int i = 0; i < n; ++i) std::printf(" %d", data[i]);
    std::printf("\n");
}}

int main() {{
#ifdef KILN_FIRMWARE
    kiln_platform_init();
#endif
    const void *{a}_in[] = {{{a}_input}};
    void *{a}_outs[] = {{{a}_out}};
    const void *{b}_in[] = {{{b}_input}};
    void *{b}_outs[] = {{{b}_out}};
    if ({a}_run({a}_in, {a}_outs, {a}_arena) != 0 || {b}_run({b}_in, {b}_outs, {b}_arena) != 0) {{
        std::printf("FAILED\n");
        return 1;
    }}
    print("{a}", {a}_out, {A}_OUTPUT_0_BYTES);
    print("{b}", {b}_out, {B}_OUTPUT_0_BYTES);
    std::printf("DONE\n");
    return 0;
}}
"""

DOC = REPO / "docs/own_firmware.md"


def doc_block(heading: str, lang: str, a: str, b: str) -> str:
    """The first ```lang block under `## heading` of docs/own_firmware.md, its models
    kws and ad renamed a and b: the test builds what the doc shows."""
    text = DOC.read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    block = section.split(f"```{lang}\n", 1)[1].split("```", 1)[0]
    names = {"kws": a, "ad": b, "KWS": a.upper(), "AD": b.upper()}
    return re.sub(r"(?<![A-Za-z0-9_])(kws|ad|KWS|AD)(?![A-Za-z0-9])", lambda m: names[m[1]],
                  block)


class Pair:
    """Two models exported with prefixes a and b into `root`, their inputs and the
    outputs `Artifact.run` gives for them (what `kiln run --board host` prints)."""

    def __init__(self, root: Path, models: dict[str, Path], board: str):
        self.root, self.names = root, list(models)
        self.inputs, self.expected = {}, {}
        rng = np.random.default_rng(7)
        lines = ["#include <stdint.h>"]
        for prefix, path in models.items():
            art = compile(load(path), board=board)
            art.save(root / "app/models" / prefix, prefix=prefix)
            spec = art.report["inputs"][0]
            x = rng.integers(-128, 128, size=spec["shape"]).astype(np.int8)
            self.inputs[prefix] = x
            self.expected[prefix] = art.run(x)[0].reshape(-1)
            host = compile(load(path), board="host").run(x)[0].reshape(-1)
            np.testing.assert_array_equal(self.expected[prefix], host)
            lines.append(f"static const int8_t {prefix}_input[{x.size}] = {{"
                         + ", ".join(str(int(v)) for v in x.reshape(-1)) + "};")
        a, b = self.names
        app = self.app = root / "app"
        (app / "inputs.h").write_text("\n".join(lines) + "\n")
        (app / "main.cpp").write_text(MAIN_CPP.format(a=a, b=b, A=a.upper(), B=b.upper()))
        (app / "CMakeLists.txt").write_text(doc_block("CMake", "cmake", a, b))
        (app / "Makefile").write_text(doc_block("Make", "make", a, b))

    def check_printed(self, out: str) -> None:
        lines = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines() if ln.strip()}
        assert "DONE" in lines, out
        for prefix in self.names:
            got = np.array([int(v) for v in lines[prefix]], dtype=np.int8)
            np.testing.assert_array_equal(got, self.expected[prefix], err_msg=prefix)

    def cmake(self, build: Path, toolchain: list[str]) -> Path:
        _run(["cmake", "-S", self.app, "-B", build, *toolchain])
        _run(["cmake", "--build", build, "-j", "2"])
        return build / "app"


def _cross_cmake(abi: str) -> list[str]:
    flags = " ".join(M4 + [f"-mfloat-abi={abi}"])
    return ["-DCMAKE_SYSTEM_NAME=Generic", "-DCMAKE_SYSTEM_PROCESSOR=arm",
            "-DCMAKE_C_COMPILER=arm-none-eabi-gcc", "-DCMAKE_CXX_COMPILER=arm-none-eabi-g++",
            "-DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY",
            f"-DCMAKE_C_FLAGS={flags} -O2", f"-DCMAKE_CXX_FLAGS={flags} -O2 -fno-exceptions",
            "-DCMAKE_EXE_LINKER_FLAGS=--specs=nosys.specs"]


def _globals(nm: str, path: Path) -> set[str]:
    """Names of the global symbols `path` defines."""
    out = _run([nm, "-g", "--defined-only", path])
    return {ln.split()[-1] for ln in out.splitlines() if len(ln.split()) == 3}


def _check_symbols(pair: Pair, nm: str, model_objects: dict[str, Path], image: Path) -> None:
    """Each model's objects define P_* globals only; the image holds each kiln_* kernel
    symbol once and every model's entry points."""
    for prefix, obj in model_objects.items():
        names = _globals(nm, obj)
        assert names >= {f"{prefix}_run", f"{prefix}_run_layer", f"{prefix}_layer_names"}
        assert all(n.startswith(prefix + "_") for n in names), (prefix, sorted(names))
    out = _run([nm, image])
    symbols = [ln.split()[-1] for ln in out.splitlines() if len(ln.split()) == 3]
    kernels = [s for s in symbols if s.startswith("kiln_")]
    assert kernels and len(kernels) == len(set(kernels)), sorted(kernels)
    assert "kiln_run" not in symbols


def _pair(tmp_path: Path, kind: str, board: str) -> Pair:
    if kind == "mlperf":
        models = {"kws": model_path("kws_ref_model"), "ad": model_path("ad01_int8")}
    else:
        models = {"digits": REPO / "examples/digits/digits_int8.tflite",
                  "digits2": REPO / "examples/digits/digits_int8.tflite"}
    return Pair(tmp_path, models, board)


def _kind_params():
    return [pytest.param("digits", id="digits-x2", marks=pytest.mark.slow),
            pytest.param("mlperf", id="kws+ad", marks=pytest.mark.slow)]


# --- host --------------------------------------------------------------------------------

def test_prefixed_objects_define_prefixed_symbols_only(tmp_path):
    """Fast tier: the same model twice, under two prefixes, compiled and linked together
    without the kernels: the objects define P_* globals only, so nothing clashes but the
    kernels they both call (left undefined here)."""
    require_tool("gcc")
    require_tool("nm")
    art = compile(load(REPO / "examples/digits/digits_int8.tflite"))
    objects = {}
    for prefix in ("one", "two"):
        folder = tmp_path / prefix
        art.save(folder, prefix=prefix)
        objects[prefix] = tmp_path / f"{prefix}.o"
        _run(["gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-I", folder,
              "-I", folder / "kernels", "-c", folder / f"{prefix}.c", "-o", objects[prefix]])
        names = _globals("nm", objects[prefix])
        assert names == {f"{prefix}_run", f"{prefix}_run_layer", f"{prefix}_layer_names",
                         f"{prefix}_reset"}
    _run(["ld", "-r", *objects.values(), "-o", tmp_path / "both.o"])    # no duplicate symbol

@pytest.mark.parametrize("kind", _kind_params())
def test_two_models_in_one_cpp_program_host(tmp_path, kind):
    for tool in ("cmake", "g++", "make", "nm"):
        require_tool(tool)
    pair = _pair(tmp_path, kind, "host")
    exe = pair.cmake(tmp_path / "build-cmake", ["-DCMAKE_C_FLAGS=-O1", "-DCMAKE_CXX_FLAGS=-O1"])
    pair.check_printed(_run([exe]))
    build = tmp_path / "build-cmake"
    libs = sorted(p.name for p in build.rglob("*.a"))
    assert libs.count("libkiln_kernels.a") == 1, libs
    _check_symbols(pair, "nm", {p: next(build.rglob(f"lib{p}.a")) for p in pair.names}, exe)

    # the doc's C snippet compiles as C and as C++ against the first model's header
    a = pair.names[0]
    (pair.app / "classify.c").write_text(doc_block("The interface, from C or C++", "c", a, a))
    for cc, std in (("gcc", "-std=c99"), ("g++", "-std=c++11")):
        _run([cc, std, "-Wall", "-Wextra", "-Werror", "-I", pair.app / "models" / a, "-c",
              "-x", "c" if cc == "gcc" else "c++", pair.app / "classify.c", "-o",
              tmp_path / "classify.o"])

    # the Make fragments: the kernels compiled once, outputs the same
    _run(["make", "-C", pair.app, "CC=gcc", "CXX=g++", "CFLAGS=-O2", "CXXFLAGS=-O2"])
    objects = sorted(p.name for p in (pair.app / "build").glob("*.o"))
    kernel_sources = sorted(p.stem for p in (REPO / "crt/kernels").glob("*.c"))
    assert objects == sorted([f"{s}.o" for s in kernel_sources + pair.names + ["main"]])
    pair.check_printed(_run([pair.app / "build/app"]))
    _check_symbols(pair, "nm", {p: pair.app / f"build/{p}.o" for p in pair.names},
                   pair.app / "build/app")


# --- cross, Cortex-M4 ----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("abi", ABIS)
def test_two_models_cross_cortex_m4(tmp_path, abi):
    for tool in ("cmake", "arm-none-eabi-g++", "arm-none-eabi-nm", "make"):
        require_tool(tool)
    pair = _pair(tmp_path, "mlperf", "mps2-an386")
    build = tmp_path / "build-cmake"
    exe = pair.cmake(build, _cross_cmake(abi))
    _check_symbols(pair, "arm-none-eabi-nm",
                   {p: next(build.rglob(f"lib{p}.a")) for p in pair.names}, exe)
    attrs = _run(["arm-none-eabi-readelf", "-A", exe])
    assert ("Tag_ABI_VFP_args: VFP registers" in attrs) == (abi == "hard"), attrs

    flags = " ".join(M4 + [f"-mfloat-abi={abi}", "-O2"])
    _run(["make", "-C", pair.app, "CC=arm-none-eabi-gcc", "CXX=arm-none-eabi-g++",
          f"CFLAGS={flags}", f"CXXFLAGS={flags} -fno-exceptions",
          "LDFLAGS=--specs=nosys.specs"])
    _check_symbols(pair, "arm-none-eabi-nm", {p: pair.app / f"build/{p}.o" for p in pair.names},
                   pair.app / "build/app")


# --- QEMU: both models in one firmware ------------------------------------------------------

FIRMWARE_MAKE = """# Both models, kiln's platform code (startup, UART, exit) and linker script of a rendered
# mps2-an386 project, main.cpp: built with the Make fragments.
include {a_dir}/{a}.mk
include {b_dir}/{b}.mk
FW := {fw}
CROSS_FLAGS := -mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard -O2
SRCS := $({a}_SRCS) $({b}_SRCS) $(KILN_KERNELS_SRCS) $(wildcard $(FW)/crt/platform/*.c) $(FW)/src/kiln_board.c
OBJS := $(patsubst %.c,fwbuild/%.o,$(notdir $(SRCS))) fwbuild/main.o
vpath %.c $(sort $(dir $(SRCS)))
INCLUDES := $({a}_CFLAGS) $({b}_CFLAGS) -I$(FW)/crt -I$(FW)/crt/platform -I$(FW)/src -I.

fwbuild/firmware.elf: $(OBJS)
\tarm-none-eabi-g++ $(CROSS_FLAGS) -T $(FW)/linker.ld -nostartfiles --specs=nano.specs \\
\t    -Wl,--gc-sections $^ -lm -o $@
fwbuild/%.o: %.c
\t@mkdir -p fwbuild
\tarm-none-eabi-gcc $(CROSS_FLAGS) -std=c99 -ffunction-sections -fdata-sections $(INCLUDES) -c $< -o $@
fwbuild/main.o: main.cpp
\t@mkdir -p fwbuild
\tarm-none-eabi-g++ $(CROSS_FLAGS) -fno-exceptions -fno-rtti -DKILN_FIRMWARE $(INCLUDES) -c $< -o $@
"""


@pytest.mark.slow
@pytest.mark.qemu
def test_two_models_firmware_on_qemu_bit_exact(tmp_path):
    for tool in ("arm-none-eabi-g++", "qemu-system-arm", "make"):
        require_tool(tool)
    from kiln.project_gen.boards import get_board
    from kiln.project_gen.project import create_project
    from kiln.project_gen.qemu import run_elf

    pair = _pair(tmp_path, "mlperf", "mps2-an386")
    fw = tmp_path / "platform"
    create_project(REPO / "examples/digits/digits_int8.tflite", "mps2-an386", fw)
    a, b = pair.names
    (pair.app / "fw.mk").write_text(FIRMWARE_MAKE.format(a=a, b=b, a_dir=f"models/{a}",
                                                         b_dir=f"models/{b}", fw=fw))
    _run(["make", "-C", pair.app, "-f", "fw.mk", "-j", "2"])
    elf = pair.app / "fwbuild/firmware.elf"
    symbols = [ln.split()[-1] for ln in _run(["arm-none-eabi-nm", elf]).splitlines()
               if len(ln.split()) == 3]
    kernels = [n for n in symbols if n.startswith("kiln_") and not n.startswith("kiln_platform")]
    assert kernels and len(kernels) == len(set(kernels))
    run = run_elf(get_board("mps2-an386"), elf, timeout=300)
    assert run.exit_code == 0, run.stdout + run.stderr
    pair.check_printed(run.stdout)


@pytest.mark.slow
def test_folder_builds_on_its_own(tmp_path):
    """`cmake -S DIR`: the host folder with the host's compiler; a board's folder cross,
    with the board's CPU flags (the only place they are used)."""
    for tool in ("cmake", "arm-none-eabi-gcc", "arm-none-eabi-readelf"):
        require_tool(tool)
    model = REPO / "examples/digits/digits_int8.tflite"
    for board in ("host", "mps2-an386"):
        folder = tmp_path / board
        compile(load(model), board=board).save(folder, prefix="digits")
        _run(["cmake", "-S", folder, "-B", tmp_path / f"build-{board}"])
        _run(["cmake", "--build", tmp_path / f"build-{board}", "-j", "2"])
    attrs = _run(["arm-none-eabi-readelf", "-A", tmp_path / "build-mps2-an386/libdigits.a"])
    assert "Tag_CPU_name: \"7E-M\"" in attrs and "Tag_ABI_VFP_args: VFP registers" in attrs


# --- where the folder goes ---------------------------------------------------------------

def test_force_never_replaces_a_users_build_files(tmp_path, capsys):
    """--force into a folder kiln did not write replaces model.c & co as before, but not
    a CMakeLists.txt, kernels/ or Make fragment of the user's (new names since the
    library export: a script passing --force must not start losing them)."""
    digits = REPO / "examples/digits/digits_int8.tflite"
    for mine in ("CMakeLists.txt", "kernels", "kws.mk"):
        d = tmp_path / mine.replace(".", "_")
        d.mkdir()
        (d / "main.c").write_text("mine\n")
        if mine == "kernels":
            (d / mine).mkdir()
            (d / mine / "fft.c").write_text("mine\n")
        else:
            (d / mine).write_text("mine\n")
        code, _, err = run_kiln(capsys, "compile", digits, "-o", d, "--force", "--prefix", "kws")
        assert code == 2 and mine in one_error(err) and "folder of its own" in err
        assert sorted(p.name for p in d.iterdir()) == sorted(["main.c", mine])
    d = tmp_path / "plain"                       # a folder without them: --force as before
    d.mkdir()
    (d / "main.c").write_text("mine\n")
    assert run_kiln(capsys, "compile", digits, "-o", d, "--force", "--prefix", "kws")[0] == 0
    assert (d / "main.c").read_text() == "mine\n" and (d / "kws.mk").is_file()


def test_a_projects_model_folder_gets_the_model_files_only(tmp_path, capsys):
    digits = REPO / "examples/digits/digits_int8.tflite"
    pk = tmp_path / "pk"
    assert run_kiln(capsys, "project", "create", digits, "--board", "host", "-o", pk)[0] == 0
    code, out, _ = run_kiln(capsys, "compile", digits, "-o", pk / "model", "--force")
    assert code == 0 and "kernels/" not in out
    assert sorted(p.name for p in (pk / "model").iterdir()) == \
        ["kiln.json", "model.c", "model.h", "weights.c", "weights.h"]
    code, _, err = run_kiln(capsys, "compile", digits, "-o", pk / "model", "--force",
                            "--prefix", "kws")
    assert code == 2 and "without --prefix" in one_error(err)


def test_a_hostile_model_name_stays_in_comments():
    art = compile(load(REPO / "examples/digits/digits_int8.tflite"))
    art.graph.name = "x\nmessage(FATAL_ERROR pwned)\r\n$(shell touch pwned) */ int pwned;"
    files = art.library("kws")
    for name in ("CMakeLists.txt", "kws.mk"):
        hits = [ln for ln in files[name].splitlines() if "pwned" in ln]
        assert hits and all(ln.startswith("#") for ln in hits), (name, hits)
    for name in ("kws.c", "kws.h"):
        hits = [ln for ln in files[name].splitlines() if "pwned" in ln]
        assert hits and all(ln.startswith(("/* ", '#define KWS_MODEL_NAME "')) for ln in hits)
        assert not any("*/ int pwned" in ln for ln in hits if ln.startswith("/*")), hits


def test_models_of_different_kernels_are_refused_by_cmake_and_make(tmp_path):
    """Folders share the first one's kiln_kernels: one made by another kiln (other
    kernels, other parameter structs) is an error at configure time, not wrong outputs."""
    require_tool("cmake")
    require_tool("make")
    art = compile(load(REPO / "examples/digits/digits_int8.tflite"))
    for prefix in ("one", "two"):
        art.save(tmp_path / prefix, prefix=prefix)
    for name in ("CMakeLists.txt", "two.mk"):       # "two" as another kiln would write it
        f = tmp_path / "two" / name
        f.write_text(re.sub(r"\b[0-9a-f]{16}\b", "0123456789abcdef", f.read_text()))
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(app C)\n"
        "add_subdirectory(one)\nadd_subdirectory(two)\n")
    p = subprocess.run(["cmake", "-S", tmp_path, "-B", tmp_path / "build"], capture_output=True,
                       text=True)
    assert p.returncode != 0 and "compile all models with the same kiln" in \
        " ".join(p.stderr.split()), p.stderr
    (tmp_path / "Makefile").write_text("include one/one.mk\ninclude two/two.mk\nall:\n\t@true\n")
    p = subprocess.run(["make", "-C", tmp_path], capture_output=True, text=True)
    assert p.returncode != 0 and "compile all models with the same kiln" in p.stderr, p.stderr
    # the same kiln's folders: fine
    art.save(tmp_path / "two", prefix="two")
    _run(["make", "-C", tmp_path])
    _run(["cmake", "-S", tmp_path, "-B", tmp_path / "build2"])
