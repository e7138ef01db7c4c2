"""`kiln ops`: the list a user checks a model against before compiling it."""

from __future__ import annotations

import json

from kiln.compiler.cli import main
from kiln.compiler.codegen.lowering import LOWERINGS


def test_ops_lists_every_lowering_and_the_graph_level_ops(capsys):
    assert main(["ops", "--json"]) == 0
    rows = {r["op"]: r["lowered_by"] for r in json.loads(capsys.readouterr().out)}
    assert set(LOWERINGS) <= set(rows)
    assert rows["CONV_2D"] == "conv" and rows["RESHAPE"] == "view"
    assert main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith(f"{len(rows)} op types")
    assert [line.split()[0] for line in lines[:-1]] == sorted(rows)
