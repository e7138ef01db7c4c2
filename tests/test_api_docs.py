"""docs/api.md stays true: its ```python blocks run, in order, in one namespace, from a
scratch folder laid out like the repository's parent (../shared/models). Each block's
`print` output is checked against the `# ...` comment after it where that comment is a
literal prefix (a `...` in it matches anything; spacing is not compared)."""

from __future__ import annotations

import contextlib
import io
import os
import re

import pytest

from conftest import REPO, models_root, require_tool

DOC = REPO / "docs" / "api.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def _expected(block: str) -> list[re.Pattern]:
    """For each print(...) line with a trailing `# text` comment, a pattern of that text
    (`...` matches anything; the comment is the start of what is printed)."""
    pats = []
    for line in block.splitlines():
        m = re.match(r"\s*print\(.*\)\s+#\s*(.+)$", line)
        if m:
            text = " ".join(m.group(1).split())         # spacing is not checked
            parts = [re.escape(p) for p in text.split("...")]
            pats.append(re.compile(".*?".join(parts)))
    return pats


def test_the_doc_names_the_api():
    text = DOC.read_text()
    for name in ("load(", "quantize(", "compile(", "Artifact", "create_project(", ".build()",
                 ".run(", ".connect(", "s.time(", "s.profile()", "FitError"):
        assert name in text, name
    assert len(_blocks()) >= 8


@pytest.mark.slow
@pytest.mark.qemu
def test_api_doc_examples_run(tmp_path, monkeypatch):
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "models").symlink_to(models_root())
    if not (models_root() / "mlperf_tiny").is_dir():
        pytest.skip(f"the MLPerf Tiny models are not in {models_root()}")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    namespace: dict = {}
    for i, block in enumerate(_blocks()):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, f"docs/api.md block {i}", "exec"), namespace)   # noqa: S102
        printed = [" ".join(line.split()) for line in out.getvalue().splitlines()]
        pats = _expected(block)
        for pat in pats:           # each commented print matches some printed line
            assert any(pat.match(line) for line in printed), (i, pat.pattern, printed)
    assert (work / "fw" / "build" / "firmware.elf").exists() and not (work / "too_big").exists()
    assert os.path.exists(work / "out" / "model.c")


def test_reprs_are_one_short_line(tmp_path):
    """print(artifact) dumped 1.2 MB for VWW (its C sources); Graph 209 KB, Project 37 KB."""
    from conftest import model_path
    from kiln.compiler import compile, load
    from kiln.project_gen import create_project

    art = compile(load(model_path("vww_96_int8")), board="host")
    p = create_project(art, board="host", out_dir=tmp_path / "p", mode="host-driven")
    for obj in (art, art.graph, p):
        text = repr(obj)
        assert len(text) < 300 and "\n" not in text, text[:300]
    assert repr(art).startswith("Artifact(model='vww_96_int8', board='host', layers=30, "
                                f"weights_bytes={art.report['weights_bytes']}, arena_bytes=37248")
