"""Graph passes: IR → IR functions, one concern each, run in this order by `optimize`."""

from ..ir import Graph
from .alias_reshapes import alias_reshapes
from .fold_constants import fold_constants
from .remove_dead import remove_dead


def optimize(graph: Graph) -> Graph:
    """The default pipeline: fold shape-only subgraphs, alias reshapes, drop dead ops."""
    for step in (fold_constants, alias_reshapes, remove_dead):
        graph = step(graph)
        graph.verify()
    return graph


__all__ = ["optimize", "fold_constants", "alias_reshapes", "remove_dead"]
