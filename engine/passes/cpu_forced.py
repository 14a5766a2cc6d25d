"""Find tensors whose values are needed on the CPU to schedule work.

A tensor is CPU-forced if it is an op's planning input (``Op.cpu_inputs``: the
shape of Reshape/Expand/Tile/ConstantOfShape, axes, Slice starts/ends, Resize
scales/sizes, TopK's k, ...) or if it feeds a layer that computes a CPU-forced
tensor. Shape and Size only read their input's shape (the ``shape_only`` trait), so the walk
stops there.
Subgraphs count too: a planning input inside an If/Loop/Scan body that comes from
the enclosing graph forces that outer tensor (and what feeds it).
"""

from __future__ import annotations

from engine.model import Graph, Model
from engine.ops import cpu_input_indices
from engine.ops.traits import op_traits
from engine.passes.graph_utils import subgraphs


def _forced(graph: Graph) -> set[str]:
    """Every name of ``graph``'s scope (outer names included) that must be known on the CPU."""
    stack: list[str] = []
    for layer in graph.layers:
        for i in cpu_input_indices(layer):
            if i < len(layer.inputs) and layer.inputs[i]:
                stack.append(layer.inputs[i])
        for sub in subgraphs(layer):
            stack.extend(_forced(sub) & sub.outer_names)
    producers = graph.producers()
    forced: set[str] = set()
    while stack:
        name = stack.pop()
        if name in forced:
            continue
        forced.add(name)
        layer = producers.get(name)
        if layer is None or op_traits(layer.op_type, layer.domain).shape_only:
            continue
        stack.extend(n for n in layer.all_inputs() if n and n not in forced)
    return forced


def forced_names(graph: Graph) -> set[str]:
    """Names computed in ``graph`` whose values must be known on the CPU (a subgraph's too)."""
    producers = graph.producers()
    return {n for n in _forced(graph) if n in producers}


def mark_cpu_forced(model: Model) -> set[str]:
    """Set and return ``model.cpu_forced``: the computed tensors that must live on the CPU."""
    producers = model.producers()
    # graph inputs and constants are simply read on the CPU; only computed tensors matter
    model.cpu_forced = {n for n in _forced(model) if n in producers}
    return model.cpu_forced
