"""Dead-code removal: layers none of whose outputs reach a graph output, unused constants."""

from __future__ import annotations

from engine.model import Graph, Model
from engine.passes.graph_utils import refresh_captures, subgraphs


def remove_dead(graph: Graph) -> tuple[int, int]:
    """Remove dead layers and unused constants (also inside subgraphs).

    Returns (layers removed, constants removed). ONNX ops have no side effects, so a
    layer whose outputs nobody reads can go. Model inputs stay (they are the interface).
    """
    layers_removed = constants_removed = 0
    for layer in graph.layers:
        for sub in subgraphs(layer):
            a, b = remove_dead(sub)
            layers_removed += a
            constants_removed += b
    refresh_captures(graph)
    needed = {o.name for o in graph.outputs}
    live = []
    for layer in reversed(graph.layers):
        if any(o and o in needed for o in layer.outputs):
            live.append(layer)
            needed.update(n for n in layer.all_inputs() if n)
    layers_removed += len(graph.layers) - len(live)
    graph.layers = live[::-1]
    for name in [n for n in graph.constants if n not in needed]:
        del graph.constants[name]
        constants_removed += 1
    produced = {o for layer in graph.layers for o in layer.outputs}
    for name in [n for n in graph.value_info if n not in produced]:
        del graph.value_info[name]
    if isinstance(graph, Model):
        graph.cpu_forced &= produced
    return layers_removed, constants_removed
