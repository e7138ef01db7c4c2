"""int8 SOFTMAX keeps only its exp table's nonzero head in flash (the C reads 0 past it):
outputs stay tflite-micro's for differences that run past the stored entries."""

from __future__ import annotations

import numpy as np

import kiln.compiler as kc
from kiln.compiler.codegen.ops import activation as act
from reference import assert_equal_exact, run_reference
from tflite_builder import TensorSpec, single_op_model


def test_trimmed_exp_table_matches_tflm_past_its_end():
    scale = 0.15                          # exp(-d * 0.15) underflows Q0.31 from d ~ 145
    full = act.softmax_exp_table(1.0, scale)
    entries = int(np.flatnonzero(full)[-1]) + 1
    assert 100 < entries < 256
    model = single_op_model("SOFTMAX", [TensorSpec((3, 256), scale=scale, zero_point=0)],
                            [TensorSpec((3, 256), scale=1 / 256, zero_point=-128)],
                            {"beta": 1.0})
    art = kc.compile(kc.load(model))
    assert art.report["weights_bytes"] == 4 * entries
    assert f"_exp_table, {entries}, " in art.files["model.c"]
    row = np.arange(-128, 128, dtype=np.int8)
    x = np.stack([row, row[::-1], np.roll(row, 77)])       # every difference 0..255
    assert_equal_exact(art.run(x)[0], run_reference(model, [x])[0], "softmax, trimmed table")
