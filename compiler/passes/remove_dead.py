"""Drop ops whose outputs nothing reads (and are not model outputs).

An op that touches model state (reads a variable tensor, which the ops that take one may
write in place, or has no outputs at all, as ASSIGN_VARIABLE) is kept: its effect
outlives the run."""

from __future__ import annotations

import copy

from ..ir import Graph


def remove_dead(graph: Graph) -> Graph:
    """A copy of `graph` with this pass applied (the graph itself is unchanged)."""
    return remove_dead_in_place(copy.deepcopy(graph))


def remove_dead_in_place(graph: Graph) -> Graph:
    # Every tensor enters `needed` together with its storage root (an alias keeps the
    # tensor it views alive), so the set stays closed under storage_root as it grows:
    # one pass, linear in the number of ops.
    needed = {graph.storage_root(t) for t in graph.outputs} | set(graph.outputs)
    kept = []
    for op in reversed(graph.ops):
        stateful = not op.outputs or any(t >= 0 and graph.tensor(t).is_variable
                                         for t in op.inputs)
        if stateful or any(t in needed or graph.storage_root(t) in needed for t in op.outputs):
            kept.append(op)
            for t in op.inputs:
                if t >= 0:
                    needed.add(t)
                    needed.add(graph.storage_root(t))
    graph.ops = list(reversed(kept))
    return graph
