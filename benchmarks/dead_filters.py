#!/usr/bin/env python3
"""Dead filters per MLPerf Tiny model: where an all-zero filter costs MACs and flash.

    python benchmarks/dead_filters.py [--models DIR] [--all-layers] [--notes]

A filter (a CONV_2D / FULLY_CONNECTED output channel's weights, a DEPTHWISE_CONV_2D
channel's taps) whose int8 weights are all zero, with zero point 0, computes a constant:
requantize(bias), clamped by the activation, at every position. Printed per model and per
layer that has any (every layer with --all-layers): its filters, the dead ones, the MACs
they cost in that layer and their share of the model's MACs, their weight bytes (int8)
and share of the model's int8 weight bytes, and how many of them output the zero point
("real 0": a consumer reads them like padding). Then what kiln's dead-filter pass
(kiln.compiler.passes.dead_filters) removes: MACs and weight bytes of the compiled model
(host board, default variants) without and with the pass, and with --notes what each
changed layer's C comment says about it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from kiln.compiler.codegen import generate, weights_bytes
from kiln.compiler.codegen.lowering import Target
from kiln.compiler.compile import KILN_VERSION
from kiln.compiler.frontend import as_graph
from kiln.compiler.ir import Graph
from kiln.compiler.numerics import activation_range, requantize
from kiln.compiler.codegen.lowering import per_channel_multipliers
from kiln.compiler.passes import optimize

from _common import MLPERF, models_root

_FILTER_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def _filters(op, w: np.ndarray) -> np.ndarray:
    """(filters, taps) view of a layer's weights: one row per output channel."""
    if op.type == "DEPTHWISE_CONV_2D":
        return w.reshape(-1, w.shape[-1]).T
    return w.reshape(w.shape[0], -1)


def _out_positions(g: Graph, op) -> int:
    y = g.tensor(op.outputs[0])
    return y.size // int(y.shape[-1])


def _constants(g: Graph, op, dead: np.ndarray) -> np.ndarray:
    """The int8 value each dead filter's channel outputs."""
    x, w, y = (g.tensor(t) for t in op.inputs[:2] + op.outputs[:1])
    bias = (g.tensor(op.inputs[2]).data.astype(np.int64) if len(op.inputs) > 2
            and op.inputs[2] >= 0 else np.zeros(dead.size, np.int64))
    y_scale, y_zp = y.quant.single()
    mult, shift = per_channel_multipliers(x.quant.single()[0], w.quant.scale, y_scale,
                                          dead.size)
    lo, hi = activation_range(op.options.get("fused_activation_function", "NONE"),
                              y_scale, y_zp)
    out = requantize(bias, mult, shift) + y_zp
    return np.clip(out, lo, hi)[dead]


def measure(g: Graph) -> list[dict]:
    rows = []
    for i, op in enumerate(g.ops):
        if op.type not in _FILTER_OPS or len(op.inputs) < 2:
            continue
        w = g.tensor(op.inputs[1])
        if w.data is None or w.dtype != "int8" or g.tensor(op.inputs[0]).dtype != "int8":
            continue
        rows_w = _filters(op, w.data)
        dead = ~rows_w.any(axis=1)
        if np.any(w.quant.zero_point != 0):
            dead[:] = False
        per_filter_macs = rows_w.shape[1] * _out_positions(g, op)
        y_zp = g.tensor(op.outputs[0]).quant.single()[1]
        consts = _constants(g, op, dead) if dead.any() else np.zeros(0)
        rows.append({"layer": i, "type": op.type, "filters": int(dead.size),
                     "dead": int(dead.sum()), "dead_macs": int(dead.sum()) * per_filter_macs,
                     "macs": int(dead.size) * per_filter_macs,
                     "dead_bytes": int(dead.sum()) * rows_w.shape[1],
                     "bytes": int(w.data.size), "real_zero": int((consts == y_zp).sum())})
    return rows


def compiled(g: Graph, dead_filters: bool) -> tuple[int, int, list]:
    """(MACs, weight bytes, ops) of the host build with or without the pass."""
    opt = optimize(g, dead_filters=dead_filters)
    _, _, layers, consts = generate(opt, KILN_VERSION, Target())
    return sum(e.code.macs for e in layers), weights_bytes(consts), opt.ops


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=str(models_root()))
    parser.add_argument("--all-layers", action="store_true")
    parser.add_argument("--notes", action="store_true")
    args = parser.parse_args()
    root = Path(args.models) / "mlperf_tiny"
    for label, stem in MLPERF.items():
        path = root / f"{stem}.tflite"
        if not path.exists():
            print(f"{label}: missing {path}")
            continue
        g = optimize(as_graph(str(path)), dead_filters=False)
        rows = measure(g)
        total_macs = sum(r["macs"] for r in rows)
        total_bytes = sum(r["bytes"] for r in rows)
        dead = sum(r["dead"] for r in rows)
        print(f"\n{label} ({stem}): {dead} of {sum(r['filters'] for r in rows)} filters all zero; "
              f"{sum(r['dead_macs'] for r in rows) / total_macs:.1%} of {total_macs:,} MACs, "
              f"{sum(r['dead_bytes'] for r in rows) / total_bytes:.1%} of {total_bytes:,} "
              f"int8 weight bytes")
        print(f"{'layer':>5} {'op':<18}{'filters':>8}{'dead':>6}{'real0':>6}{'dead MACs':>11}"
              f"{'% model':>8}{'dead B':>8}{'% model':>8}")
        for r in rows:
            if r["dead"] or args.all_layers:
                print(f"{r['layer']:>5} {r['type']:<18}{r['filters']:>8}{r['dead']:>6}"
                      f"{r['real_zero']:>6}{r['dead_macs']:>11,}{r['dead_macs'] / total_macs:>8.1%}"
                      f"{r['dead_bytes']:>8,}{r['dead_bytes'] / total_bytes:>8.1%}")
        before = compiled(g, False)
        after = compiled(g, True)
        filters = sum(len(op.removed.get("outputs", ())) for op in after[2]
                      if op.type in ("CONV_2D", "FULLY_CONNECTED"))
        print(f"the pass removes {filters} conv/FC output channels ({dead} dead filters)")
        print(f"compiled (host, default variants): MACs {before[0]:,} -> {after[0]:,} "
              f"({1 - after[0] / before[0]:.1%} fewer); weights {before[1]:,} -> {after[1]:,} B "
              f"({before[1] - after[1]:,} B less)")
        for i, op in enumerate(after[2] if args.notes else []):
            for note in op.notes:
                print(f"  layer {i} {op.type}: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
