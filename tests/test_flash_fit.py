"""Variants chosen to fit the flash: a model whose fastest kernels' weights exceed the
board's flash compiles to smaller-weight variants, and stays bit-exact."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import model_path, require_tool
from kiln.compiler.compile import weights_budget
from kiln.compiler.tune import Records
from kiln.project_gen.boards import Region, get_board
from reference import assert_equal_exact, run_reference

# Cortex-M55, DSP, 512 KB of code memory: mps3-an547 as one code region (its ITCM) and one
# RAM ("SRAM 2"). kiln's mps3-an547 board file lists its other memories too, which take
# the weights the ITCM cannot hold instead (test_regions.py).
SMALL_FLASH = replace(get_board("mps3-an547"), name="an547-itcm-only", extra_regions=(),
                      ram=Region("RAM", 0x21000000, 0x400000, kind="ram", exec=True))


def _int16_records(g, board: str) -> Records:
    """Records that pick every layer's int16-weight variant (the fastest kernels, as a tuner
    on a roomy board finds): twice the int8 filter bytes."""
    from kiln.compiler.compile import target_for
    from kiln.compiler.codegen.ops.conv import candidates
    from kiln.compiler.tune import workload_key
    from kiln.compiler.tune.workloads import layer_shapes
    target = target_for(board)
    graph = kc.compile(g, board).graph
    entries = []
    for op, shape in layer_shapes(graph, target).values():
        wide = [k for k in candidates(op, shape, target)
                if k.get("weights") == "s16" or k == {"variant": "rows", "row_block": 8}]
        entries.append({"workload": workload_key(op, shape), "board": get_board(board).name,
                        "knobs": wide[0],
                        "status": "ok", "cycles": {"median": 1, "min": 1, "max": 1}})
    return Records(entries=entries)


def test_int8_weights_by_default():
    """The default variants keep filters int8 (channel pairs): AD fits the small flash as
    it is."""
    g = kc.load(model_path("ad01_int8"))
    art = kc.compile(g, SMALL_FLASH)
    assert art.report["flash_fit"] == []
    assert art.report["weights_bytes"] <= weights_budget(SMALL_FLASH)


def test_a_model_too_big_for_the_flash_moves_layers_to_int8_weights():
    g = kc.load(model_path("ad01_int8"))
    roomy = kc.compile(g, "mps2-an386", tuning_records=_int16_records(g, "mps2-an386"))
    assert roomy.report["flash_fit"] == []
    assert roomy.report["weights_bytes"] > weights_budget(SMALL_FLASH)
    art = kc.compile(g, SMALL_FLASH, tuning_records=_int16_records(g, SMALL_FLASH))
    moves = art.report["flash_fit"]
    assert moves and art.report["weights_bytes"] <= weights_budget(SMALL_FLASH)
    assert roomy.report["weights_bytes"] - art.report["weights_bytes"] == \
        sum(m["saved_bytes"] for m in moves)
    for m in moves:
        op = art.report["ops"][m["layer"]]
        assert op["knobs"] == m["to"] and m["saved_bytes"] > 0
    # Only as many layers as needed: undoing the last move would not fit.
    assert art.report["weights_bytes"] + moves[-1]["saved_bytes"] > weights_budget(SMALL_FLASH)
    assert kc.compile(g, SMALL_FLASH, tuning_records=_int16_records(g, SMALL_FLASH)).files == \
        art.files


def test_records_choose_first_and_the_fit_overrides_only_what_it_must(tmp_path):
    g = kc.load(model_path("ad01_int8"))
    art = kc.compile(g, SMALL_FLASH, tuning_records=Records())
    assert art.files == kc.compile(g, SMALL_FLASH).files


def test_fitted_model_runs_bit_exact_on_qemu(tmp_path):
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    from kiln.project_gen import create_project

    path = model_path("ad01_int8")
    records = _int16_records(kc.load(path), SMALL_FLASH)
    project = create_project(path, SMALL_FLASH, tmp_path / "fw", tuning_records=records)
    assert project.manifest["flash_fit"]
    result = project.run()
    [x] = project.sample_inputs()
    want = run_reference(path.read_bytes(), x)[0]
    assert_equal_exact(result.outputs[0].reshape(want.shape), want, "ad01 on an547-itcm-only")
    assert np.asarray(result.outputs[0]).size == want.size
