"""A short structured fuzz run (tests/fuzz_structured.py): hostile-but-valid models of every
op kiln supports, compiled in worker subprocesses, and the C of each one that compiles run
under ASan + UBSan on random input bytes.

Passes when every model either compiles and runs clean or is refused with one KilnError:
no traceback, no crash, no hang, no C build error, no sanitizer report, no kiln_run
refusing a model kiln accepted. The long run is benchmarks/fuzz_structured.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz_structured import generate, run_fuzz

MODELS = 300
SEED = 19


def test_generator_is_deterministic_and_covers_every_op():
    """Same seed, same bytes; every op `kiln ops` lists appears within a few hundred models."""
    assert generate(SEED, 7).model == generate(SEED, 7).model
    assert generate(SEED, 7).model != generate(SEED + 1, 7).model
    kiln = Path(sys.executable).parent / "kiln"
    listed = {row["op"] for row in json.loads(subprocess.run(
        [str(kiln), "ops", "--json"], capture_output=True, text=True, check=True).stdout)}
    seen = {op for i in range(400) for op in generate(SEED, i).ops}
    # Lowered only from a tf.Variable's resource ops (VAR_HANDLE handles, CALL_ONCE's init
    # subgraph: compiler/frontend/resources.py), which a one-subgraph model cannot hold;
    # tests/test_state.py builds them and the frontend checks them.
    seen |= {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"}
    # Control flow runs subgraphs, which a one-subgraph model cannot hold either: the
    # frontend unrolls WHILE and inlines IF (compiler/frontend/control_flow.py), and
    # tests/test_control_flow.py builds them, hostile ones included.
    seen |= {"WHILE", "IF"}
    # Shape arithmetic folded at compile time, never lowered (tests/test_fold_shapes.py
    # feeds it hostile values).
    seen |= {row for row in listed if row in ("FILL", "ZEROS_LIKE", "RANK", "RANGE",
                                              "BROADCAST_ARGS", "REDUCE_PROD", "FLOOR_DIV",
                                              "FLOOR_MOD")}
    assert listed <= seen, f"ops the generator never draws: {sorted(listed - seen)}"


@pytest.mark.slow
def test_structured_fuzz_short_budget(tmp_path: Path):
    if shutil.which("cc") is None:
        pytest.skip("no host C compiler")
    s = run_fuzz(MODELS, SEED, tmp_path, jobs=1, compile_timeout=60, run_timeout=60)
    print(f"\nstructured fuzz, {MODELS} models, seed {SEED}\n{s.table()}")
    assert sum(s.counts.values()) == MODELS
    assert s.counts["compiled"] >= MODELS // 4, "too few models compile: the C is barely tested"
    assert s.counts["rejected"] >= MODELS // 10, "too few hostile models"
    fails = s.failures()
    report = [f"{m} {r['outcome']}: {' -> '.join(s.cases[m].ops)} "
              f"[{', '.join(s.cases[m].notes)}] {r.get('detail', '')} {r.get('where', '')}"
              for m, r in sorted(fails.items())]
    assert not fails, ("reproduce one with: python tests/fuzz_structured.py --repro "
                       f"{tmp_path}/models/<id>.tflite\n" + "\n".join(report))
