"""Helpers shared by the passes: walking subgraphs, renaming tensors, refreshing captures."""

from __future__ import annotations

from collections.abc import Iterator

from engine.model import Graph, Layer, free_names, subgraph_captures


def subgraphs(layer: Layer) -> list[Graph]:
    """The Graph attributes of a layer (If branches, Loop/Scan bodies...)."""
    out = []
    for v in layer.attributes.values():
        for sub in (v if isinstance(v, list) else [v]):
            if isinstance(sub, Graph):
                out.append(sub)
    return out


def iter_graphs(graph: Graph) -> Iterator[Graph]:
    """``graph`` and every graph nested in it, parents first."""
    yield graph
    for layer in graph.layers:
        for sub in subgraphs(layer):
            yield from iter_graphs(sub)


def refresh_captures(graph: Graph) -> None:
    """Recompute ``outer_names`` of nested graphs and ``captures`` of their layers, bottom-up."""
    for layer in graph.layers:
        subs = subgraphs(layer)
        if not subs:
            continue
        for sub in subs:
            refresh_captures(sub)
            sub.outer_names = free_names(sub)
        layer.captures = sorted(subgraph_captures(layer.attributes))


def defines(graph: Graph, name: str) -> bool:
    """True if ``graph`` or a graph nested in it defines ``name`` locally."""
    for g in iter_graphs(graph):
        if name in g.constants or any(i.name == name for i in g.inputs):
            return True
        if any(name in layer.outputs for layer in g.layers):
            return True
    return False


def can_rename_reads(graph: Graph, old: str, new: str) -> bool:
    """False if renaming reads of ``old`` to ``new`` would hit a subgraph that defines ``new``."""
    for layer in graph.layers:
        for sub in subgraphs(layer):
            if old in sub.outer_names and defines(sub, new):
                return False
    return True


def rename_reads(graph: Graph, old: str, new: str, outputs_too: bool = False) -> None:
    """Make every reader of ``old`` read ``new`` instead, into subgraphs that capture ``old``.

    Graph outputs named ``old`` are renamed only with ``outputs_too`` (a subgraph's outputs
    are positional, a model's are part of its interface). Call ``refresh_captures`` after.
    """
    for layer in graph.layers:
        layer.inputs = [new if n == old else n for n in layer.inputs]
        for sub in subgraphs(layer):
            if old in sub.outer_names:
                rename_reads(sub, old, new, outputs_too=True)
    if outputs_too:
        for spec in graph.outputs:
            if spec.name == old:
                spec.name = new
