"""Turn RESHAPE / SQUEEZE / EXPAND_DIMS into views: no copy, no op at run time.

The output tensor becomes an alias of the input's memory (int8 layouts are
row-major, so the bytes are identical). Only applies when the quantization is
unchanged, which TFLite requires of these ops anyway.
"""

from __future__ import annotations

import copy

from ..ir import Graph, same_quant

_VIEW_OPS = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")


def alias_reshapes(graph: Graph) -> Graph:
    """A copy of `graph` with this pass applied (the graph itself is unchanged)."""
    return alias_reshapes_in_place(copy.deepcopy(graph))


def alias_reshapes_in_place(graph: Graph) -> Graph:
    kept = []
    for op in graph.ops:
        if op.type in _VIEW_OPS and op.inputs and op.inputs[0] >= 0:
            src, dst = graph.tensor(op.inputs[0]), graph.tensor(op.outputs[0])
            # Not a variable's view: later layers may update the state under it.
            if (not src.is_const and not src.is_variable and src.dtype == dst.dtype
                    and src.size == dst.size
                    and same_quant(src.quant, dst.quant)):
                dst.alias_of = src.id
                continue
        kept.append(op)
    graph.ops = kept
    return graph
