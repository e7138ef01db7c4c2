"""Issue 19, code injection: nothing a model, a model's file name or a board file holds
changes what kiln writes or runs.

The attacks: tensor names that end a C comment and add `#define memcpy(...) memset(...)`
or `#error`, trigraphs and line splices; model file names holding newlines and Make,
CMake and shell syntax; board names and descriptions doing the same in kiln_board.h,
Makefile and linker.ld; and error text from a model forging a second "kiln: error:" line
or reaching the terminal with ANSI escapes. The defence is kiln.compiler.escape (one
escaper per language, each with a stated guarantee, checked here on hostile text) and
render.py's template environment, which refuses outside text no filter escaped.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, require_tool
from reference import assert_equal_exact, run_reference
from test_snapshot import tiny_cnn
from tflite_builder import OpSpec, TensorSpec, build_model

from kiln.compiler import compile, escape, load
from kiln.compiler.errors import BoardError
from kiln.project_gen import render
from kiln.project_gen.boards import Qemu, Uart, get_board

KILN = [sys.executable, "-m", "kiln.compiler.cli"]
DIGITS = REPO / "examples" / "digits" / "digits_int8.tflite"

# Each one attacks a different rule of a different language; together they hold every
# ASCII control character, the C1 CSI, Unicode separators, a bidi override, a non-UTF-8
# byte (as Python decodes it from a file name) and the syntax of C, Make, CMake and sh.
HOSTILE = [
    "a */\n#define memcpy(d, s, n) memset(d, 85, n)\n/* b",
    "c */\n#error injected\n/*",
    "d ??/\n#error trigraph splice",
    "e \\\n#error backslash splice",
    "f /* nested */ g *",
    "x\nall:\n\ttouch PWNED\n#",
    "h ) ; \" ' ` ${HOME} $(shell touch PWNED) $$(touch PWNED) #[[ ]] \\",
    "i\x1b[31mred\x1b[0m\r\x9b2J\u2028\u2029\u202e\x00\x7f\b",
    "j" + "".join(map(chr, range(32))),
    "k\udcff\udc80é²",
]
FORGED = ("#define memcpy", "#error", "touch PWNED")
# What a .tflite can hold as a name: UTF-8 (lone surrogates come only from file names).
TENSOR_NAMES = [h.encode("utf-8", "replace").decode("utf-8") for h in HOSTILE]


def _assert_inert(text: str, what: str, plain: str | None = None) -> None:
    """Generated text holds only printable ASCII lines (a tab only as a Makefile recipe's
    first character) and no line an attacker wrote; with `plain` (the same file made from
    plain names), exactly as many lines and line continuations, and for C the same code."""
    if plain is not None:
        assert text.count("\n") == plain.count("\n"), f"{what}: lines added"
        assert text.count("\\\n") == plain.count("\\\n"), f"{what}: a line continued"
        if what.endswith((".c", ".h", ".ld")):
            assert _c_skeleton(text) == _c_skeleton(plain), f"{what}: the code changed"
    for n, line in enumerate(text.split("\n"), 1):
        bad = [c for c in line.removeprefix("\t") if not " " <= c <= "~"]
        assert not bad, f"{what}:{n}: non-printable {bad!r} in {line!r}"
        assert not line.lstrip().startswith(FORGED) and line != "all:", \
            f"{what}:{n}: forged line {line!r}"


def _c_skeleton(text: str) -> str:
    """C (or ld script) with comments and string literals emptied and tensor identifiers
    reduced to their id: what must not change when only names change. A name that ended
    a comment or a string early leaves code behind and shows up here."""
    text = re.sub(r'/\*.*?\*/|"(?:\\.|[^"\\\n])*"',
                  lambda m: "/**/" if m.group().startswith("/*") else '""', text, flags=re.S)
    return re.sub(r"\bt(\d+)_\w*", r"t\1", text)


# --- the escapers' guarantees ------------------------------------------------------------

def _corpus() -> list[str]:
    rng = np.random.default_rng(19)
    alphabet = [chr(c) for c in range(0x100)] + ["\u2028", "\u202e", "\udcff", "é", "€", "😀"]
    random = ["".join(rng.choice(alphabet, size=rng.integers(0, 24))) for _ in range(300)]
    pairs = ["*/", "/*", "??/", "\\", "\\\n", "/", "*", "?", "??", "", "int", "9x", "__a", "_A"]
    return HOSTILE + pairs + random


@pytest.mark.parametrize("text", _corpus())
def test_escapers_keep_their_guarantees(text):
    printable = re.compile(r"[ -~]*")
    for fn in (escape.printable, escape.c_comment, escape.c_string, escape.make_comment,
               escape.cmake_comment, escape.ld_comment, escape.markdown_text,
               escape.markdown_code, escape.make_recipe_word):
        out = fn(text)
        assert printable.fullmatch(out), (fn.__name__, out)
        # A backslash only ever starts an escape: never last, never before a newline.
        assert not out.endswith("\\"), (fn.__name__, out)
        assert "\\" not in out.replace("\\x", "").replace("\\u", "").replace("\\U", "") \
            or fn in (escape.markdown_text, escape.c_string), (fn.__name__, out)
    comment = escape.c_comment(text)
    for pair in ("*/", "/*", "??"):
        assert pair not in comment, (pair, comment)
    assert not comment.startswith("/") and not comment.endswith("*")
    # C string: the literal is one token whose value is the text's bytes.
    literal = escape.c_string(text)
    assert literal[0] == literal[-1] == '"' and "??" not in literal
    assert re.fullmatch(r'"([ !#-\[\]-~]|\\[\\"?]|\\[0-7]{3})*"', literal), literal
    ident = escape.c_identifier(text)
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,62}", ident) and ident not in ("int", "main")
    assert escape.project_name(text) == escape.c_identifier(text, fallback="model")
    term = escape.terminal(text)
    assert term.isprintable() and "\x1b" not in term
    term.encode("utf-8")                     # never a UnicodeEncodeError
    assert shlex.split(escape.shell_word(text)) == [text]


def test_c_string_reads_back_as_the_text(tmp_path):
    """The C compiler itself decodes escape.c_string to the text's bytes."""
    cc = require_tool("cc")
    texts = HOSTILE + ["??=??(??/??)??'??<??!??>??-", "0\x01" "2 \\x41"]
    src = tmp_path / "s.c"
    lines = ["#include <stdio.h>", "static const char *const s[] = {"]
    lines += [f"    {escape.c_string(t)}," for t in texts] + ["};", "int main(void) {",
              f"    for (int i = 0; i < {len(texts)}; i++) {{ fputs(s[i], stdout); putchar(0); }}",
              "    return 0;", "}"]
    src.write_text("\n".join(lines))
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", tmp_path / "s", src],
                   check=True)
    out = subprocess.run([tmp_path / "s"], capture_output=True, check=True).stdout
    want = b"".join(t.encode("utf-8", "surrogateescape").split(b"\0")[0] + b"\0" for t in texts)
    assert out == want


def test_c_identifier_of_plain_names_is_unchanged():
    for name in ("conv", "mobilenet_v1", "t12_conv_out", "digits_int8"):
        assert escape.c_identifier(name) == name
    assert escape.project_name("mobilenet_v1-0.25") == "mobilenet_v1_0_25"
    assert escape.c_identifier("") == "x" and escape.c_identifier("9lives") == "x_9lives"
    assert escape.c_identifier("__init") == "init" and escape.c_identifier("while") == "while_"


# --- tensor names in the generated C -----------------------------------------------------

def _tiny_cnn(names: list[str]) -> bytes:
    """tests/test_snapshot.py's tiny CNN with the given tensor names (one per tensor;
    constants included, so weights.c's comments quote them too)."""
    return tiny_cnn(names, description="desc */\n#error from the description")


def test_hostile_tensor_names_change_no_code():
    """Today's failure: `*/` + newline in a tensor name put `#define memcpy(...)
    memset(d, 85, n)` into model.h and every output read 85."""
    hostile = _tiny_cnn(TENSOR_NAMES + [f"{HOSTILE[0]} {i}" for i in range(11 - len(HOSTILE))])
    plain = _tiny_cnn([f"t{i}" for i in range(11)])
    art, plain_art = compile(load(hostile)), compile(load(plain))
    for name, text in art.files.items():
        if name != "kiln.json":
            _assert_inert(text, name, plain_art.files[name])
    # c_name is an identifier, unique per tensor, whatever the name
    c_names = [t.c_name for t in art.graph.tensors]
    assert len(set(c_names)) == len(c_names)
    assert all(re.fullmatch(r"t\d+(_[a-z0-9_]*)?", n) for n in c_names), c_names
    x = np.random.default_rng(0).integers(-128, 128, size=(1, 8, 8, 1)).astype(np.int8)
    got = art.run(x)[0]          # built with -std=c99 -Wall -Wextra -Werror
    assert_equal_exact(got, plain_art.run(x)[0], "hostile names vs plain")
    assert_equal_exact(got, run_reference(hostile, [x])[0], "hostile names vs tflite-micro")


def test_non_ascii_tensor_names_give_ascii_identifiers():
    """str.isalnum() accepts é and ², which are no C identifier characters."""
    art = compile(load(_tiny_cnn(["é²", "ü", "b", "ç", "p", "s", "f", "w", "fb", "l", "π"])))
    assert [t.c_name for t in art.graph.tensors][:2] == ["t0", "t1"]
    for name, text in art.files.items():
        if name != "kiln.json":
            _assert_inert(text, name)


# --- the terminal --------------------------------------------------------------------------

FORGE = "n\nkiln: error: forged\x1b[31m\r\x9b2J"


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8")  # strict encoding
    return subprocess.run([*KILN, *args], capture_output=True, env=env, timeout=120)


def test_error_from_a_model_is_one_clean_line(tmp_path):
    """Graph.verify names the tensor an op reads before it is written: a ModelError whose
    text is the model's."""
    relu = build_model([OpSpec("RELU", [0], [1])],
                       [TensorSpec((1, 4), scale=0.1, zero_point=0, name=FORGE),
                        TensorSpec((1, 4), scale=0.1, zero_point=0, name="out")],
                       inputs=[], outputs=[1])
    model = tmp_path / "m.tflite"
    model.write_bytes(relu)
    r = _run_cli("info", str(model))
    err = r.stderr.decode("utf-8")
    assert r.returncode == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("kiln: error: "), err
    assert "\x1b" not in err and "\r" not in err and "\x9b" not in err
    assert "\\x0akiln: error: forged\\x1b[31m" in err      # still says what the name is


def test_info_prints_names_escaped_and_non_utf8_file_names(tmp_path):
    """`kiln info` printed tensor names raw (ANSI, newlines), and a non-UTF-8 model file
    name raised UnicodeEncodeError."""
    names = [FORGE] + [f"t{i}" for i in range(1, 10)] + [FORGE + " out"]
    model = Path(os.fsdecode(bytes(tmp_path) + b"/m\xff\x1b[2J.tflite"))
    model.write_bytes(_tiny_cnn(names))
    r = _run_cli("info", str(model))
    out = r.stdout.decode("utf-8")
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert "\x1b" not in out and "\r" not in out and "forged" in out
    assert not any(line.startswith("kiln: error") for line in out.splitlines())
    # the byte shows escaped, or as U+FFFD if the reader decoded it so
    assert re.match(r"model m(\\xff|\ufffd)\\x1b\[2J  sha256", out), out


def test_warning_naming_a_model_input_is_one_clean_line(tmp_path):
    """Float inputs clamped to an int8 input's range: the warning quotes the input's name."""
    names = [FORGE] + [f"t{i}" for i in range(1, 11)]
    model = tmp_path / "m.tflite"
    model.write_bytes(_tiny_cnn(names))
    np.save(tmp_path / "x.npy", np.full((1, 8, 8, 1), 1e6, np.float32))
    r = _run_cli("run", str(model), "--input", str(tmp_path / "x.npy"))
    err = r.stderr.decode("utf-8")
    assert r.returncode == 0, err
    assert err.count("\n") == 1 and err.startswith("kiln: warning: input 'n\\x0akiln: error"), err
    assert "\x1b" not in err and "\r" not in err


# --- templates: fail closed, and hostile boards --------------------------------------------

def _report(name: str) -> dict:
    return {"model": {"name": name}, "outputs": [0], "tuning_variants": 0}


def test_templates_refuse_unescaped_outside_text():
    """render.py's environment fails closed: outside text printed without a filter raises,
    so no template can forget one for long."""
    env = render._env()
    with pytest.raises(TypeError, match="unescaped"):
        env.from_string("{{ name }}").render(name=render._guard("x"))
    with pytest.raises(TypeError, match="unescaped"):
        env.from_string("{{ board.description }}").render(
            board=render._guard(get_board("host")))
    assert env.from_string("{{ board.description | c_comment }}").render(
        board=render._guard(get_board("host"))) == get_board("host").description
    for template in sorted(render.templates_dir().glob("*.j2")):
        text = template.read_text()
        # no expression that concatenates or formats before escaping (`~`, `%`, join):
        # a composed string no longer carries its mark
        for expr in re.findall(r"{{(.*?)}}", text):
            if re.search(r"\b(model_name|origin|board\.(name|description)|qemu_args|run_help)\b",
                         expr):
                assert "|" in expr and "join" not in expr, (template.name, expr)


@pytest.mark.parametrize("board_name", ["mps2-an386", "nucleo-f746zg", "host"])
@pytest.mark.parametrize("mode", ["standalone", "host-driven"])
def test_hostile_board_and_model_names_render_inert(board_name, mode):
    board = get_board(board_name)
    plain = render.project_files(board, _report("m"), mode, "0.1.0", 6, "0123abcd")
    plain.update(render.inputs_files("m", [[np.zeros(4, np.int8)]], "m"))
    for text in HOSTILE:
        hostile = dataclasses.replace(board, name=text, description=text)
        files = render.project_files(hostile, _report(text), mode, "0.1.0", 6, "0123abcd")
        files.update(render.inputs_files(text, [[np.zeros(4, np.int8)]], text))
        for path, content in files.items():
            _assert_inert(content, path, plain[path])
        cmake = files["CMakeLists.txt"]
        assert re.search(r"^project\(kiln_[A-Za-z][A-Za-z0-9_]* C\)$", cmake, re.M), cmake


def test_board_values_that_become_code_are_refused():
    board = get_board("mps2-an386")
    for args in (("-x;touch PWNED",), ("$(shell touch PWNED)",), ("a b",), ("a\nb",)):
        bad = dataclasses.replace(board, qemu=Qemu(machine="mps2-an386", args=args))
        with pytest.raises(BoardError):
            render.project_files(bad, _report("m"), "standalone", "0.1.0", 6)
    for uart in (Uart(kind="cmsdk", base=0x40004000, baud=-5),
                 Uart(kind="cmsdk", base=-1)):
        with pytest.raises(BoardError):
            render.project_files(dataclasses.replace(board, uart=uart), _report("m"),
                                 "standalone", "0.1.0", 6)
    nrf = get_board("nrf52840dk")
    bad = dataclasses.replace(nrf, uart=dataclasses.replace(nrf.uart, tx_pin="6u\n#error x"))
    with pytest.raises((BoardError, TypeError)):
        render.project_files(bad, _report("m"), "standalone", "0.1.0", 6)


def test_hostile_board_name_compiles_and_runs_nothing(tmp_path):
    """kiln_board.h compiles under -Werror whatever the board is called, and `make run`
    of a real board (which echoes its name) creates no file."""
    cc = require_tool("cc")
    require_tool("make")
    for i, text in enumerate(HOSTILE):
        board = dataclasses.replace(get_board("nucleo-f746zg"), name=text, description=text)
        files = render.project_files(board, _report(text), "standalone", "0.1.0", 6)
        d = tmp_path / str(i)
        d.mkdir()
        (d / "kiln_board.h").write_text(files["src/kiln_board.h"])
        (d / "main.c").write_text('#include <stdio.h>\n#include "kiln_board.h"\n'
                                  "int main(void) { fputs(KILN_BOARD_NAME, stdout); return 0; }\n")
        subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", d / "main",
                        d / "main.c"], check=True)
        shown = subprocess.run([d / "main"], capture_output=True, check=True).stdout
        assert shown.decode("ascii") == escape.printable(text)     # one line, no escapes
        (d / "Makefile").write_text(files["Makefile"])
        (d / "linker.ld").write_text(files["linker.ld"])
        # `make run` with the firmware taken as built (-o): only the echo recipe runs
        r = subprocess.run(["make", "-s", "run", "ELF=main", "-o", "main"], cwd=d,
                           capture_output=True, env=dict(os.environ, HOME=str(d)))
        assert r.returncode != 0 and b" is a real board" in r.stdout, r
        assert sorted(p.name for p in d.iterdir()) == ["Makefile", "kiln_board.h",
                                                       "linker.ld", "main", "main.c"]


# --- a model file name through `project create`, make and cmake -----------------------------

FILE_NAME = (b"x\nall:\n\ttouch PWNED\n# ) ; \" ' ${HOME} $(shell touch PWNED2) "
             b"`touch PWNED3` \xff\x1b[31m")


@pytest.mark.slow
def test_hostile_model_file_name_builds_and_creates_nothing(tmp_path):
    """A model file name holding a newline and Make syntax created a file when `project
    build` ran, and `)`/`;`/`"`/`${}`/spaces broke or escaped project(kiln_<name> C)."""
    require_tool("cc")
    require_tool("make")
    work = tmp_path / "work"
    work.mkdir()
    model = Path(os.fsdecode(bytes(work) + b"/" + FILE_NAME + b".tflite"))
    shutil.copyfile(DIGITS, model)
    out = work / "p"
    r = _run_cli("project", "create", str(model), "--board", "host", "-o", str(out))
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    for path in (out / "Makefile", out / "CMakeLists.txt", out / "README.md",
                 out / "src" / "kiln_inputs.c", out / "src" / "main.c", out / "model" / "model.h",
                 out / "model" / "model.c"):
        _assert_inert(path.read_text(), str(path.relative_to(out)))
    r = _run_cli("project", "build", str(out))
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert (out / "build" / "firmware").is_file()
    assert not list(tmp_path.rglob("PWNED*")) and not list(REPO.glob("PWNED*"))
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed: the CMakeLists.txt was checked as text only")
    r = subprocess.run([cmake, "-S", out, "-B", tmp_path / "cm"], capture_output=True,
                       env=dict(os.environ, HOME=str(tmp_path)), timeout=120)
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert not list(tmp_path.rglob("PWNED*"))


def test_flash_command_gets_quoted_paths_and_port(tmp_path):
    """`kiln tune --flash-command`: kiln substitutes paths and the port into the user's
    shell line; a space, `;` or `$(...)` in them stays part of one argument."""
    from types import SimpleNamespace

    from kiln.compiler.tune.measure import _flash

    project = tmp_path / "a b; touch PWNED; $(touch PWNED2) '"
    (project / "build").mkdir(parents=True)
    (project / "build" / "firmware.elf").write_bytes(b"")
    port = "/dev/tty; touch PWNED3"
    _flash(f'test -f {{elf}} && test {{port}} = "{port}"', SimpleNamespace(path=project), port)
    assert sorted(p.name for p in tmp_path.iterdir()) == [project.name]
