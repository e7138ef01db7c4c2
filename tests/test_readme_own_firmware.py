"""README's "Use kiln in your own firmware" commands, run as written (with the MLPerf
models for kws.tflite and ad.tflite), write the folders the text says they write; the
CMake/Make builds of such folders are tests/test_export.py's (docs/own_firmware.md)."""
from __future__ import annotations

import re
import shlex

from conftest import REPO, model_path, run_kiln

MODELS = {"kws.tflite": "kws_ref_model", "ad.tflite": "ad01_int8"}


def _commands() -> list[list[str]]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Use kiln in your own firmware", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    return [shlex.split(line[2:].split("#", 1)[0])
            for line in block.splitlines() if line.startswith("$ kiln ")]


def test_readme_own_firmware_commands_write_what_it_says(tmp_path, capsys, monkeypatch):
    commands = _commands()
    assert len(commands) >= 2, "the section's commands were not found"
    monkeypatch.chdir(tmp_path)
    for argv in commands:
        argv = [str(model_path(MODELS[a])) if a in MODELS else a for a in argv[1:]]
        code, _, err = run_kiln(capsys, *argv)
        assert code == 0, (argv, err)
        prefix = argv[argv.index("--prefix") + 1]
        out = tmp_path / argv[argv.index("-o") + 1]
        for name in (f"{prefix}.h", f"{prefix}.c", "CMakeLists.txt", f"{prefix}.mk"):
            assert (out / name).is_file(), (out, name)
        assert (out / "kernels").is_dir()
        header = (out / f"{prefix}.h").read_text()
        assert 'extern "C"' in header and f"int {prefix}_run(" in header
