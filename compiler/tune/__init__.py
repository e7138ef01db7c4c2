"""Auto-tuning: time every layer's kernel variants on the target, keep the fastest.

    from kiln.compiler.tune import Records, TuneOptions, tune
    records = Records.load("kws.jsonl", missing_ok=True)
    summary = tune(graph, "mps2-an386", records, TuneOptions(workers=2))
    art = compile(graph, "mps2-an386", tuning_records=records)

The model's tunable layers are grouped into workloads (workloads.py); each workload's
candidates (codegen/ops/conv.py `candidates`) are chosen round by round (search.py);
a round's candidates are split into batches, one tuning firmware per batch
(firmware.py), which parallel workers build and measure over RPC (measure.py, one QEMU
or board per worker); every result is appended to the records (records.py) as it comes,
so an interrupted run resumes and a rerun measures nothing already measured.
"""

from __future__ import annotations

from .records import Records
from .workloads import knobs_id, workload_key

# The tuning loop imports kiln.compiler.compile, which imports the records from here:
# it is loaded on first use.
_TUNER = ("TuneOptions", "TuneProgress", "TuneSummary", "WorkloadResult", "tune")

__all__ = ["Records", "knobs_id", "workload_key", *_TUNER]


def __getattr__(name: str):
    if name in _TUNER:
        from . import tuner
        return getattr(tuner, name)
    raise AttributeError(name)
