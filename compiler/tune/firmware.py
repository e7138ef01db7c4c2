"""The C of a tuning build: many candidate kernels of many workloads in one firmware.

A batch is a list of (workload, knobs). Its "model" has one layer per candidate, lowered
with the candidate's knobs by the ordinary code generator (so a candidate is exactly the
code a tuned compile would emit), and a hand-made arena: every candidate of a workload
reads the same input buffer and writes the same output buffer, and the workloads share
the arena (they run one at a time). kiln_tune.c lists the layers as the RPC server's
tuning variants (crt/rpc/kiln_rpc_tune.h): the host uploads an input, runs a variant,
reads its output and times it. It is not a dataflow graph: kiln_run would merely run
every candidate in turn.
"""

from __future__ import annotations

import hashlib
from copy import deepcopy
from dataclasses import dataclass

from ..artifact import Artifact
from ..codegen import emit_sources, lower, weights_bytes
from ..codegen.lowering import Target
from ..ir import Graph, Op, Tensor
from ..memory_plan import Buffer, Plan
from .workloads import Workload, knobs_id

_ALIGN = 16


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


@dataclass
class Variant:
    """One entry of the firmware's tuning table."""

    index: int                  # variant id on the device (= layer index)
    workload: Workload
    knobs: dict
    input_bytes: int
    output_bytes: int


def _short(knobs: dict) -> str:
    return " ".join([str(knobs.get("variant", "?"))] +
                    [f"{k}={v}" for k, v in sorted(knobs.items()) if k != "variant"])


def _copy_tensor(t: Tensor, new_id: int, prefix: str) -> Tensor:
    return Tensor(id=new_id, name=f"{prefix}_{t.name.split('/')[-1].split(';')[0]}",
                  shape=tuple(t.shape), dtype=t.dtype, quant=deepcopy(t.quant),
                  data=t.data)


def tuning_graph(batch: list[tuple[Workload, dict]]) -> tuple[Graph, list[Variant]]:
    """One layer per candidate; per workload one input and one output tensor, shared by
    its candidates, plus the layer's constants."""
    tensors: list[Tensor] = []
    ops: list[Op] = []
    inputs: list[int] = []
    outputs: list[int] = []
    variants: list[Variant] = []
    io: dict[str, tuple[list[int], int]] = {}
    order = {key: i for i, key in enumerate(dict.fromkeys(w.key for w, _ in batch))}
    for w, knobs in batch:
        if w.key not in io:
            prefix = f"w{order[w.key]}"
            ids = []
            for tid in w.op.inputs:
                if tid < 0:
                    ids.append(-1)
                    continue
                tensors.append(_copy_tensor(w.graph.tensor(tid), len(tensors), prefix))
                ids.append(len(tensors) - 1)
            y = w.graph.tensor(w.op.outputs[0])
            tensors.append(_copy_tensor(y, len(tensors), prefix))
            io[w.key] = (ids, len(tensors) - 1)
            if not inputs:
                # The RPC server serves at most 8 model inputs: the "model" declares the
                # first workload's only; the host reaches every buffer as a variant's.
                inputs.append(ids[0])
                outputs.append(len(tensors) - 1)
        ids, y_id = io[w.key]
        ops.append(Op(type=w.op.type, inputs=list(ids), outputs=[y_id],
                      options=dict(w.op.options), version=w.op.version, index=w.op.index))
        variants.append(Variant(index=len(ops) - 1, workload=w, knobs=knobs,
                                input_bytes=tensors[ids[0]].nbytes,
                                output_bytes=tensors[y_id].nbytes))
    digest = hashlib.sha256("\n".join(f"{w.key}|{knobs_id(k)}" for w, k in batch).encode())
    graph = Graph(name="kiln_tuning", tensors=tensors, ops=ops, inputs=inputs,
                  outputs=outputs, sha256=digest.hexdigest())
    return graph, variants


def _plan(graph: Graph, layers: list, variants: list[Variant]) -> Plan:
    """Each workload's input at 0, its output after it, each candidate's scratch after
    that; workloads overlap each other (they never run at the same time)."""
    buffers: list[Buffer] = []
    steps: dict[int, list[int]] = {}
    for v in variants:
        steps.setdefault(graph.ops[v.index].inputs[0], []).append(v.index)
    for v in variants:
        x_id, y_id = graph.ops[v.index].inputs[0], graph.ops[v.index].outputs[0]
        first, last = min(steps[x_id]), max(steps[x_id])
        if v.index == first:
            buffers.append(Buffer(graph.tensor(x_id).c_name, v.input_bytes, first, last,
                                  offset=0))
            buffers.append(Buffer(graph.tensor(y_id).c_name, v.output_bytes, first, last,
                                  offset=_align(v.input_bytes)))
        scratch = layers[v.index].code.scratch_bytes
        if scratch:
            buffers.append(Buffer(f"l{v.index}_scratch", scratch, v.index, v.index,
                                  kind="scratch",
                                  offset=_align(v.input_bytes) + _align(v.output_bytes)))
    arena = max((b.offset + b.size for b in buffers), default=16)
    return Plan(buffers=buffers, arena_bytes=_align(arena), order="tuning",
                lower_bound=_align(arena))


def tune_table_c(graph: Graph, variants: list[Variant], plan: Plan, version: str) -> str:
    """kiln_tune.c: per workload its two buffers (input, output), per candidate a table
    entry that runs its layer."""
    out = [f"/* kiln_tune.c - the {len(variants)} kernel variants of this tuning build, run",
           " * one at a time over RPC (crt/rpc/kiln_rpc_tune.h). Generated by kiln "
           f"{version}. */",
           '#include "kiln_rpc_tune.h"', '#include "model.h"', ""]
    first_of: dict[int, Variant] = {}          # workload input tensor → its first variant
    for v in variants:
        first_of.setdefault(graph.ops[v.index].inputs[0], v)
    for x_id, v in first_of.items():
        y_id = graph.ops[v.index].outputs[0]
        x, y = plan.by_name[graph.tensor(x_id).c_name], plan.by_name[graph.tensor(y_id).c_name]
        out += [f"/* {v.workload.key} */",
                f"static const kiln_tune_buffer_t buffers_{x_id}[] = {{",
                f"    {{{x.offset}u, {x.size}u, 0u}},",
                f"    {{{y.offset}u, {y.size}u, KILN_TUNE_BUFFER_OUTPUT}},", "};", ""]
    for v in variants:
        out.append(f"static int run_{v.index}(uint8_t *arena) "
                   f"{{ return kiln_run_layer({v.index}, arena); }}")
    out += ["", "const kiln_tune_variant_t kiln_tune_variants[] = {"]
    number = {x_id: i for i, x_id in enumerate(first_of)}
    for v in variants:
        x_id = graph.ops[v.index].inputs[0]
        name = f"w{number[x_id]} {_short(v.knobs)}"[:48]     # the protocol's name limit
        out.append(f'    {{"{name}", run_{v.index}, buffers_{x_id}, 2u}},')
    out += ["};", f"const uint16_t kiln_tune_num_variants = {len(variants)}u;", ""]
    return "\n".join(out)


def tuning_artifact(batch: list[tuple[Workload, dict]], target: Target, version: str
                    ) -> tuple[Artifact, list[Variant]]:
    """The sources of one tuning build for `target` (files for create_project)."""
    graph, variants = tuning_graph(batch)
    layers, consts = lower(graph, target, {v.index: v.knobs for v in variants})
    plan = _plan(graph, layers, variants)
    files = emit_sources(graph, layers, consts, plan, version)
    files["kiln_tune.c"] = tune_table_c(graph, variants, plan, version)

    def io(tid: int) -> dict:
        t = graph.tensor(tid)
        scale, zp = t.quant.single() if t.quant is not None else (None, None)
        return {"name": t.name, "id": tid, "shape": list(t.shape), "dtype": t.dtype,
                "scale": scale, "zero_point": zp}

    report = {
        "kiln_version": version, "model": {"name": graph.name, "sha256": graph.sha256},
        "board": target.board, "inputs": [io(t) for t in graph.inputs],
        "outputs": [io(t) for t in graph.outputs], "arena_bytes": plan.arena_bytes,
        "weights_bytes": weights_bytes(consts), "tuning_variants": len(variants),
        "ops": [{"index": i, "type": e.op.type, "kernel": e.code.kernel, "knobs": e.code.knobs,
                 "macs": e.code.macs} for i, e in enumerate(layers)],
    }
    return Artifact(graph=graph, board=target.board, files=files, plan=plan,
                    report=report), variants
