"""Graph passes: IR → IR functions, one concern each, run in this order by `optimize`."""

import copy

from ..ir import Graph
from .alias_reshapes import alias_reshapes, alias_reshapes_in_place
from .fold_constants import fold_constants, fold_constants_in_place
from .remove_dead import remove_dead, remove_dead_in_place


def optimize(graph: Graph) -> Graph:
    """The default pipeline: fold shape-only subgraphs, alias reshapes, drop dead ops.
    Returns a new graph; `graph` is copied once (not once per pass: a deep copy of a
    large model costs more than the passes)."""
    graph = copy.deepcopy(graph)
    for step in (fold_constants_in_place, alias_reshapes_in_place, remove_dead_in_place):
        graph = step(graph)
        graph.verify()
    return graph


__all__ = ["optimize", "fold_constants", "alias_reshapes", "remove_dead"]
