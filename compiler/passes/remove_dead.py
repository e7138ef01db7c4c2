"""Drop ops whose outputs nothing reads (and are not model outputs)."""

from __future__ import annotations

import copy

from ..ir import Graph


def remove_dead(graph: Graph) -> Graph:
    graph = copy.deepcopy(graph)
    needed = {graph.storage_root(t) for t in graph.outputs} | set(graph.outputs)
    kept = []
    for op in reversed(graph.ops):
        if any(t in needed or graph.storage_root(t) in needed for t in op.outputs):
            kept.append(op)
            for t in op.inputs:
                if t >= 0:
                    needed.add(t)
                    needed.add(graph.storage_root(t))
        # aliases of a needed tensor keep their root needed
        for t in list(needed):
            needed.add(graph.storage_root(t))
    graph.ops = list(reversed(kept))
    return graph
