"""Memory regions (issue 15): board files with several memories, the placement of weights,
arena and state across them (kiln.project_gen.regions), the linker script and C that carry
it out, the per-region size report, and a model too large for the ITCM of mps3-an547
running bit-exact spread over its ITCM and DTCM on QEMU."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace

import numpy as np
import pytest

import kiln.compiler as kc
from conftest import model_path, require_tool
from kiln.compiler.errors import BoardError
from kiln.project_gen import create_project, render
from kiln.project_gen.boards import (Region, board_toml, get_board, load_board_file,
                                     parse_board)
from kiln.project_gen.elf import read_elf
from kiln.project_gen.regions import Item, ld_name, place
from reference import assert_equal_exact, run_reference

BASE = {
    "name": "tcmboard", "cpu": "cortex-m55", "fpu": "fpv5-d16", "dsp": True,
    "clock_hz": 32_000_000, "runs_on": "qemu", "qemu": {"machine": "mps3-an547"},
    "uart": {"kind": "cmsdk", "base": 0x49303000}, "timer": {"kind": "systick"},
    "flash": {"name": "ITCM", "origin": 0, "size": 0x1000, "speed": 0},
    "ram": {"name": "DTCM", "origin": 0x20000000, "size": 0x1000, "speed": 0},
    "extra_regions": [
        {"name": "SRAM", "kind": "ram", "origin": 0x21000000, "size": 0x2000, "speed": 1},
        {"name": "QSPI", "kind": "flash", "origin": 0x28000000, "size": 0x4000, "speed": 3},
    ],
}


def board(**changes):
    data = copy.deepcopy(BASE)
    data.update(changes)
    return parse_board(data, source="tcmboard.toml")


def test_region_fields_are_read_and_round_trip(tmp_path):
    b = board()
    assert [(r.name, r.kind, r.speed, r.loaded) for r in b.memories] == [
        ("ITCM", "flash", 0, True), ("DTCM", "ram", 0, False), ("SRAM", "ram", 1, False),
        ("QSPI", "flash", 3, True)]
    assert b.multi_region
    for b in (b, get_board("mps3-an547")):
        path = tmp_path / f"{b.name}.toml"
        path.write_text(board_toml(b))
        assert load_board_file(path) == b


@pytest.mark.parametrize("change,message", [
    ({"extra_regions": [{"name": "A", "kind": "ram", "origin": 0x20000800, "size": 0x100}]},
     r"extra_regions\[0\]: A \[0x20000800, 0x20000900\) overlaps ram DTCM"),
    ({"extra_regions": [{"name": "itcm", "kind": "ram", "origin": 0x30000000, "size": 16}]},
     r"region name ITCM is also flash's"),
    ({"extra_regions": [{"name": "A", "kind": "rom", "origin": 0x30000000, "size": 16}]},
     r"extra_regions\[0\]\.kind: 'rom' is not one of flash, ram"),
    ({"extra_regions": [{"name": "A", "origin": 0x30000000, "size": 16, "speed": 0}]},
     r"extra_regions\[0\]\.kind: a region with speed, loaded or exec needs kind"),
    ({"extra_regions": [{"name": "A", "kind": "flash", "origin": 0x30000000, "size": 16,
                         "loaded": False}]}, r"always holds the image's bytes"),
    ({"extra_regions": [{"name": "A", "kind": "ram", "origin": 0x30000000, "size": 16,
                         "speed": 10}]}, r"extra_regions\[0\]\.speed: 10 is out of range"),
    ({"extra_regions": [{"name": "A;B", "kind": "ram", "origin": 0x30000000, "size": 16}]},
     r"extra_regions\[0\]\.name: must be a letter then"),
    ({"ram": {"origin": 0x20000000, "size": 0x1000, "exec": True}}, r"unknown key 'ram\.exec'"),
    ({"flash": {"origin": 0, "size": 0x1000, "loaded": True}}, r"unknown key 'flash\.loaded'"),
])
def test_bad_regions_are_one_line_errors(change, message):
    with pytest.raises(BoardError) as e:
        board(**change)
    assert "\n" not in str(e.value) and str(e.value).startswith("tcmboard.toml: ")
    assert re.search(message, str(e.value)), str(e.value)


def test_placement_fits_first_then_puts_the_most_read_in_the_fastest():
    b = board(ram={"name": "DTCM", "origin": 0x20000000, "size": 0x1000, "speed": 0,
                   "loaded": True})
    # ITCM 4 KB, DTCM 4 KB (loaded), SRAM 8 KB (not loaded: no weights), QSPI 16 KB, slow.
    hot = Item("hot", "weights", 1024, reads=100 * 1024)
    warm = Item("warm", "weights", 2048, reads=10 * 2048)
    cold = Item("cold", "weights", 12288, reads=12288)
    arena = Item("arena", "arena", 6144, reads=50 * 6144)
    p = place(b, [cold, warm, hot, arena], {"ITCM": 1024, "DTCM": 1024})
    assert p.unplaced == []
    # The arena (RAM only) is larger than the DTCM's room: SRAM. Weights never go to the
    # unloaded SRAM; the densest take the fast regions, the big cold one the QSPI.
    assert p.where == {"hot": "ITCM", "warm": "ITCM", "cold": "QSPI", "arena": "SRAM"}
    too_big = Item("huge", "weights", 64 * 1024, reads=1)
    p = place(b, [too_big], {})
    assert p.unplaced == ["huge"] and p.where["huge"] == "ITCM"   # the catch-all's region


def test_fit_first_beats_greedy():
    """Two regions, fast 4 KB and slow 3 KB: the dense 2 KB item goes to the slow one,
    because the 3.5 KB item fits only in the fast one."""
    b = board(extra_regions=[{"name": "SLOW", "kind": "flash", "origin": 0x28000000,
                              "size": 3072, "speed": 5}])
    dense = Item("dense", "weights", 2048, reads=2048 * 100)
    large = Item("large", "weights", 3584, reads=3584)
    p = place(b, [dense, large], {"ITCM": 512})
    assert p.where == {"dense": "SLOW", "large": "ITCM"} and not p.unplaced


def test_a_board_built_in_python_is_read_as_its_file_would_be():
    """Region(name, origin, size) without the flags (as code before regions built it):
    get_board gives it the kind and flags its `ram`/`flash` table implies."""
    an547 = get_board("mps3-an547")
    b = get_board(replace(an547, name="mine", ram=Region("RAM", 0x30000000, 0x4000)))
    assert (b.ram.kind, b.ram.loaded, b.ram.exec, b.flash.kind) == ("ram", False, True, "flash")
    assert get_board(an547) == an547


def test_linker_names_are_checked():
    assert ld_name(".kiln_weights.l3_filter") == ".kiln_weights.l3_filter"
    for bad in ["", "a b", "x) } > FLASH", ".kiln_weights.*", "a/*", "l0\nFLASH", 7]:
        with pytest.raises(BoardError):
            ld_name(bad)
    # A Board built in Python with a hostile region name: refused by the schema, and
    # the linker script's filter refuses it even when rendered unchecked.
    an547 = get_board("mps3-an547")
    bad = replace(an547, extra_regions=(Region("X) } > ITCM /*", 0x21000000, 16, kind="ram",
                                               loaded=True),))
    with pytest.raises(BoardError, match="extra_regions"):
        get_board(bad)
    art = kc.compile(kc.load(model_path("kws_ref_model")), "mps3-an547")
    with pytest.raises(BoardError, match="not a linker script name"):
        render.project_files(bad, art.report, "standalone", "x", 6)


def test_single_region_boards_keep_their_c_and_linker_script():
    g = kc.load(model_path("kws_ref_model"))
    art = kc.compile(g, "mps2-an386")
    assert "placement" not in art.report
    assert "KILN_WEIGHTS_IN" not in art.files["weights.c"]
    ld = render.project_files(get_board("mps2-an386"), art.report, "standalone", "x", 6)["linker.ld"]
    memory = ld[ld.index("MEMORY"):ld.index("}")]
    assert memory.count("ORIGIN") == 2 and ".kiln_bss_" not in ld and ".kiln_weights_" not in ld


def _ad_int16():
    """AD with every layer on its int16-weight variant (the fastest, as tuning picks):
    555 KB of weights, more than the 512 KB ITCM of mps3-an547."""
    from test_flash_fit import _int16_records
    g = kc.load(model_path("ad01_int8"))
    return kc.compile(g, "mps3-an547", tuning_records=_int16_records(g, "mps3-an547"))


def test_a_model_larger_than_the_itcm_is_spread_over_the_tcms():
    art = _ad_int16()
    r = art.report
    an547 = get_board("mps3-an547")
    assert r["flash_fit"] == [] and r["weights_bytes"] > an547.flash.size   # no variant moved
    pl = r["placement"]
    held = {region for region in pl["weights"].values()}
    assert held == {"ITCM", "DTCM"} and not pl["unplaced"]
    assert (pl["code"], pl["stack"], pl["arena"]) == ("ITCM", "DTCM", "DTCM")
    for name, region in pl["weights"].items():      # each array in its own section
        assert f"KILN_WEIGHTS_IN({name}) const" in art.files["weights.c"]
    ld = render.project_files(an547, r, "standalone", "x", 6, inputs_bytes=640)["linker.ld"]
    for name, region in pl["weights"].items():
        if region == "DTCM":
            block = ld[ld.index(".kiln_weights_DTCM :"):]
            assert f"*(.kiln_weights.{name})" in block[:block.index("} > DTCM")]
    assert "ISRAM (rwx) : ORIGIN = 0x21000000, LENGTH = 0x400000" in ld


@pytest.mark.slow
@pytest.mark.qemu
def test_spread_model_runs_bit_exact_on_qemu_where_kiln_json_says(tmp_path):
    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    art = _ad_int16()
    x = np.random.default_rng(7).integers(-128, 128, (2, 1, 640), dtype=np.int8)
    project = create_project(art, "mps3-an547", tmp_path / "fw", inputs=[x])
    assert project.fit.fits and len(project.fit.regions) == 5
    result = project.run()
    model = model_path("ad01_int8").read_bytes()
    for s in range(2):
        want = run_reference(model, x[s])[0]
        assert_equal_exact(result.outputs[0][s].reshape(want.shape), want, f"AD sample {s}")
    # Every weights array, the arena and the stack sit in the region kiln.json names.
    manifest = json.loads((tmp_path / "fw" / "kiln.json").read_text())
    pl = manifest["placement"]
    regions = {r.name: r for r in get_board("mps3-an547").memories}
    elf = read_elf(project.elf)
    for name, region in pl["weights"].items():
        assert regions[region].contains(elf.symbols[name].value), name
    assert regions[pl["arena"]].contains(elf.symbols["kiln_arena"].value)
    stack = elf.section(".stack")
    assert regions[pl["stack"]].contains(stack.addr)
    # The build's report: one line per region, its figures in kiln.json.
    size = manifest["size"]
    uses = {u["region"]: u for u in size["regions"]}
    assert list(uses) == ["ITCM", "DTCM", "ISRAM", "SRAM", "DDR"]
    weights = {k: c["weights"] for k, c in size["contents"].items()}
    assert weights["ITCM"] > 0 and weights["DTCM"] > 0
    # every array, each 16-byte aligned
    assert 0 <= weights["ITCM"] + weights["DTCM"] - art.report["weights_bytes"] < 16 * len(pl["weights"])
    assert all(u["used"] <= u["size"] for u in uses.values())
    lines = project.size_report().lines()
    assert [ln.split()[0] for ln in lines] == list(uses)


@pytest.mark.slow
@pytest.mark.qemu
def test_arena_and_state_outside_ram_run_on_qemu(tmp_path):
    """A DTCM too small for more than the stack: the arena and an LSTM's state go to the
    ISRAM (NOLOAD: never loaded or zeroed; the first run resets the state) and the
    firmware stays bit-exact; a host-driven build's RPC arena follows the placement too."""
    from conftest import models_root

    require_tool("arm-none-eabi-gcc")
    require_tool("qemu-system-arm")
    path = models_root() / "external" / "tfm_mnist_lstm_int8.tflite"
    if not path.exists():
        pytest.skip(f"{path} not found")
    an547 = get_board("mps3-an547")
    tiny = replace(an547, name="an547-dtcm6k", ram=replace(an547.ram, size=6288))
    art = kc.compile(kc.load(path), tiny)
    pl = art.report["placement"]
    assert (pl["arena"], pl["state"], pl["stack"]) == ("ISRAM", "ISRAM", "DTCM")
    x = np.random.default_rng(3).integers(-128, 128, [1, *art.report["inputs"][0]["shape"][1:]],
                                          dtype=np.int8)
    project = create_project(art, tiny, tmp_path / "fw", inputs=[x])
    result = project.run()
    want = run_reference(path.read_bytes(), x)[0]
    assert_equal_exact(result.outputs[0].reshape(want.shape), want, "LSTM, state in ISRAM")
    elf = read_elf(project.elf)
    isram = tiny.extra_regions[0]
    assert isram.contains(elf.symbols["kiln_arena"].value)
    assert isram.contains(elf.symbols["kiln_state"].value)
    host = create_project(art, tiny, tmp_path / "rpc", mode="host-driven")
    host.build()
    assert isram.contains(read_elf(host.elf).symbols["kiln_rpc_arena_buf"].value)


def test_lower_bound_and_estimate_on_a_multi_region_board():
    """Before any build: check_fits (the compile warning's and create's lower bound)
    counts every loaded region for the constants and every RAM region for the arena;
    the estimate charges each region its placed buffers, so a placement that left
    arrays without room says it may overflow (create then links for the exact bytes)."""
    from kiln.compiler.errors import FitError
    from kiln.project_gen.sizes import check_fits, estimate_fit, may_overflow

    an547 = get_board("mps3-an547")
    tiny = replace(an547, name="an547-tiny", flash=replace(an547.flash, size=128 * 1024),
                   ram=replace(an547.ram, size=64 * 1024),
                   extra_regions=(replace(an547.extra_regions[0], size=32 * 1024),))
    total = (128 + 64 + 32) * 1024
    check_fits("m", tiny, 200 * 1024, 1024)                   # may fit: no error
    with pytest.raises(FitError, match=r"DTCM\+ISRAM overflow by at least 1,024 bytes"):
        check_fits("m", tiny, total - 4096, 1024)   # constants spill into the RAMs
    with pytest.raises(FitError, match=r"the constants overflow ITCM\+DTCM\+ISRAM by at "
                                       r"least 4,096 bytes"):
        check_fits("m", tiny, total + 4096, 1024)
    art = kc.compile(kc.load(model_path("ad01_int8")), tiny)
    placement = art.report["placement"]
    assert placement["unplaced"]                                # 292 KB in 224 KB
    verdict = estimate_fit(art.report, tiny, "standalone")
    assert may_overflow(verdict) and verdict.regions[0].used > tiny.flash.size
    roomy = kc.compile(kc.load(model_path("ad01_int8")), an547)
    v = estimate_fit(roomy.report, an547, "standalone", inputs_bytes=640)
    assert not may_overflow(v) and [u.region for u in v.regions] == \
        ["ITCM", "DTCM", "ISRAM", "SRAM", "DDR"]
    assert v.line().startswith("fits: ITCM at most ") and "ISRAM" not in v.line()
