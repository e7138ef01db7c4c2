"""The per-layer schedule (kiln.compiler.schedule): each layer's kernel variant is decided
in one stage, and kiln.json says why (ops[i].schedule = {kernel, knobs, why})."""

from __future__ import annotations

import json

import kiln.compiler as kc
from conftest import REPO, model_path
from kiln.compiler.tune import Records
from kiln.compiler.tune.workloads import knobs_id
from test_flash_fit import SMALL_FLASH, _int16_records

RECORDS = REPO / "benchmarks" / "records" / "mps2-an386.jsonl"


def _schedules(art) -> list[dict]:
    """ops[i].schedule as kiln.json carries it (the file, not only the report)."""
    ops = json.loads(art.files["kiln.json"])["ops"]
    assert [o["schedule"] for o in ops] == [o["schedule"] for o in art.report["ops"]]
    for o in ops:      # what the schedule says is what codegen emitted
        assert o["schedule"]["kernel"] == o["kernel"]
        assert o["schedule"]["knobs"] == o.get("knobs", {})
    return [o["schedule"] for o in ops]


def test_default_and_fixed_layers():
    art = kc.compile(kc.load(model_path("kws_ref_model")), "mps2-an386", optimize="balanced")
    ops, sched = art.report["ops"], _schedules(art)
    moved = {m["layer"] for m in art.report["shared_code"]}
    for o, s in zip(ops, sched):
        if "workload" not in o:
            assert s["why"] == "fixed: no tunable variants"
        elif o["index"] not in moved:
            assert s["why"] == "default", o
    assert any(s["why"] == "default" for s in sched)
    assert sched[-1]["why"].startswith("fixed")         # the softmax


def test_shared_code_layer():
    art = kc.compile(kc.load(model_path("kws_ref_model")), "mps2-an386", optimize="balanced")
    sched = _schedules(art)
    shared = art.report["shared_code"]
    assert shared
    for m in shared:
        assert sched[m["layer"]]["why"] == f"shared code: {m['why']}"
        assert sched[m["layer"]]["kernel"].startswith("kiln_conv2d_gemm_p8")


def test_tuned_layer_names_its_record_line():
    art = kc.compile(kc.load(model_path("kws_ref_model")), "mps2-an386",
                     tuning_records=str(RECORDS))
    lines = RECORDS.read_text().split("\n")
    tuned = [o for o in art.report["ops"] if o.get("tuned")]
    assert tuned
    for o in tuned:
        why = o["schedule"]["why"]
        assert why.startswith(f"tuning record {RECORDS}:"), why
        record = json.loads(lines[int(why.rsplit(":", 1)[1]) - 1])
        assert record["workload"] == o["workload"] and record["board"] == "mps2-an386"
        assert knobs_id(record["knobs"]) == knobs_id(o["schedule"]["knobs"])


def test_speed_widened_layer():
    art = kc.compile(kc.load(model_path("kws_ref_model")), "mps2-an386", optimize="speed")
    sched = _schedules(art)
    widened = art.report["speed_widen"]
    assert widened
    for m in widened:
        assert sched[m["layer"]]["why"].startswith("speed: widened to int16-pair filters (+")
        assert sched[m["layer"]]["knobs"]["weights"] == "s16"


def test_flash_budget_layer_on_a_small_flash_board():
    """AD on the LM3S6965 (256 KB of flash, no DSP): its default generic kernels' weights
    do not fit, so layers move to int8-pair weights, and the schedule says so."""
    art = kc.compile(kc.load(model_path("ad01_int8")), "lm3s6965evb")
    sched = _schedules(art)
    moves = art.report["flash_fit"]
    assert moves
    for m in moves:
        assert sched[m["layer"]]["why"] == \
            f"flash budget: int8 weights ({m['saved_bytes']:,} B saved)"
        assert sched[m["layer"]]["knobs"]["weights"] == "p8"


def test_reasons_accumulate_in_order():
    """A tuned layer the flash budget then moves keeps both reasons, records first."""
    g = kc.load(model_path("ad01_int8"))
    art = kc.compile(g, SMALL_FLASH, tuning_records=_int16_records(g, SMALL_FLASH))
    sched = _schedules(art)
    moved = {m["layer"] for m in art.report["flash_fit"]}
    assert moved
    for i, s in enumerate(sched):
        if i in moved:
            assert s["why"].startswith("tuning record (in memory); then flash budget: "), s
        elif art.report["ops"][i].get("tuned"):
            assert s["why"] == "tuning record (in memory)"


def test_record_lines_count_every_line(tmp_path):
    """line_of counts blank and unreadable lines, so the line named is the record's."""
    rec = {"workload": "W", "board": "b", "knobs": {"variant": "x"}, "status": "ok",
           "cycles": {"median": 1, "min": 1, "max": 1}}
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(["", "not json", json.dumps(rec), "", json.dumps(rec)]) + "\n")
    r = Records.load(path)
    assert [r.line_of(e) for e in r.entries] == [3, 5]
    r.append(dict(rec))
    assert r.line_of(r.entries[-1]) is None


def test_add_tables_in_scratch_say_why():
    """ResNet-8's three residual ADDs build their tables at run time in scratch (balanced):
    kiln.json lists the moves and each layer says why; the arena is the one with the
    tables in flash (speed keeps them there)."""
    path = model_path("pretrainedResnet_quant")
    art = kc.compile(kc.load(path), "mps2-an386", optimize="balanced")
    adds = [o["index"] for o in art.report["ops"] if o["type"] == "ADD"]
    assert [m["layer"] for m in art.report["scratch_tables"]] == adds and len(adds) == 3
    sched = _schedules(art)
    for i in adds:
        assert sched[i]["knobs"] == {"table": "scratch"}
        assert sched[i]["why"].startswith("flash: its table built at run time"), sched[i]
    assert "input_table" not in art.files["weights.c"]
    speed = kc.compile(kc.load(path), "mps2-an386", optimize="speed")
    assert speed.report["scratch_tables"] == []
    assert speed.files["weights.c"].count("input_table[256]") == 3
    # What `kiln compile` and `kiln project create` print about it.
    from kiln.compiler.compile import scratch_tables_note
    assert scratch_tables_note(art.report) == (
        f"layer(s) {', '.join(map(str, adds))} build their ADD/SUB table at run time in "
        "scratch (3,072 B of flash saved, the arena unchanged; --optimize speed keeps them in "
        "flash)")
    assert scratch_tables_note(speed.report) is None
