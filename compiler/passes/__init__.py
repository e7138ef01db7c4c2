"""Graph passes: IR → IR functions, one concern each, run in this order by `optimize`."""

import copy

from ..ir import Graph
from .alias_reshapes import alias_reshapes, alias_reshapes_in_place
from .dead_filters import dead_filters, dead_filters_in_place
from .fold_constants import fold_constants, fold_constants_in_place
from .fold_dilated import fold_dilated, fold_dilated_in_place
from .remove_dead import remove_dead, remove_dead_in_place


def optimize(graph: Graph, dilated: bool = True, dead_filters: bool = True) -> Graph:
    """The default pipeline: fold shape-only subgraphs, fold TF's space-to-batch
    emulation of dilated convolutions (unless `dilated` is False), alias reshapes, remove
    the channels of all-zero filters (unless `dead_filters` is False), drop dead ops.
    Returns a new graph; `graph` is copied once (not once per pass: a deep copy
    of a large model costs more than the passes)."""
    graph = copy.deepcopy(graph)
    steps = [fold_constants_in_place] + ([fold_dilated_in_place] if dilated else []) + \
        [alias_reshapes_in_place] + ([dead_filters_in_place] if dead_filters else []) + \
        [remove_dead_in_place]
    for step in steps:
        graph = step(graph)
        graph.verify()
    return graph


__all__ = ["optimize", "fold_constants", "fold_dilated", "alias_reshapes", "dead_filters",
           "remove_dead"]
