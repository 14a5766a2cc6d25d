"""If with a constant condition (often one folded from static shapes) becomes its branch.

The chosen branch's layers and constants move into the enclosing graph; names that
would clash get fresh ones, and the branch's outputs become the If's output names, so
the rest of the graph, and other backends, never see the If at all.
"""

from __future__ import annotations

import numpy as np

from engine.model import Graph, Layer, free_names, subgraph_captures
from engine.passes.graph_utils import iter_graphs, refresh_captures, rename_reads, subgraphs


class _Names:
    def __init__(self, root: Graph):
        self.taken: set[str] = set()
        self.layers: set[str] = set()
        for g in iter_graphs(root):
            self.taken |= set(g.constants) | {s.name for s in g.inputs + g.outputs}
            for layer in g.layers:
                self.taken.update(layer.outputs)
                self.layers.add(layer.name)

    def fresh(self, base: str, pool: set[str]) -> str:
        name, k = base, 1
        while name in pool:
            name, k = f"{base}_{k}", k + 1
        pool.add(name)
        return name


def inline_constant_ifs(graph: Graph, names: _Names | None = None) -> int:
    """Replace If layers whose condition is a constant by their branch; returns how many."""
    names = names or _Names(graph)
    count = 0
    out: list[Layer] = []
    for layer in graph.layers:
        for sub in subgraphs(layer):
            count += inline_constant_ifs(sub, names)
        cond = graph.constants.get(layer.inputs[0]) if layer.op_type == "If" else None
        if cond is None or np.asarray(cond).size != 1:
            out.append(layer)
            continue
        branch = layer.attr("then_branch" if bool(np.asarray(cond).reshape(-1)[0])
                            else "else_branch")
        if not isinstance(branch, Graph) or len(branch.outputs) != len(layer.outputs):
            out.append(layer)
            continue
        out.extend(_splice(graph, layer, branch, names))
        count += 1
    graph.layers = out
    refresh_captures(graph)
    return count


def _splice(graph: Graph, layer: Layer, branch: Graph, names: _Names) -> list[Layer]:
    # branch-local names move to the parent scope: every one gets a name free there
    local = list(branch.constants) + [o for x in branch.layers for o in x.outputs if o]
    mapping = {n: names.fresh(f"{layer.name}/{n}", names.taken) for n in local}
    for old, new in mapping.items():
        rename_reads(branch, old, new, outputs_too=True)
    for x in branch.layers:
        x.outputs = [mapping.get(o, o) for o in x.outputs]
        x.name = names.fresh(f"{layer.name}/{x.name}", names.layers)
    moved_constants = set()
    for old, value in branch.constants.items():
        graph.constants[mapping[old]] = value
        moved_constants.add(mapping[old])
    for old, spec in branch.value_info.items():
        if old in mapping:
            spec.name = mapping[old]
            graph.value_info.setdefault(spec.name, spec)
    producers = {o: x for x in branch.layers for o in x.outputs if o}
    layers = list(branch.layers)
    claimed: dict[str, str] = {}
    for spec, target in zip(branch.outputs, layer.outputs):
        src = spec.name
        if not target:
            continue
        if src in claimed:  # the branch returns one tensor twice: copy the first
            layers.append(_copy(claimed[src], target, layer, names))
        elif src in producers:
            x = producers[src]
            x.outputs = [target if o == src else o for o in x.outputs]
            for y in layers:
                y.inputs = [target if n == src else n for n in y.inputs]
                for sub in subgraphs(y):
                    if src in sub.outer_names:
                        rename_reads(sub, src, target, outputs_too=True)
            spec_src = graph.value_info.pop(src, None)
            if spec_src is not None and target not in graph.value_info:
                spec_src.name = target
                graph.value_info[target] = spec_src
        elif src in moved_constants:
            graph.constants[target] = graph.constants[src]
        else:  # a tensor of an enclosing scope, returned as is
            layers.append(_copy(src, target, layer, names))
        claimed[src] = target
    for x in layers:
        for sub in subgraphs(x):
            refresh_captures(sub)
            sub.outer_names = free_names(sub)
        x.captures = sorted(subgraph_captures(x.attributes))
    return layers


def _copy(src: str, target: str, layer: Layer, names: _Names) -> Layer:
    return Layer(names.fresh(f"{layer.name}/copy", names.layers), "Identity", [src], [target],
                 {}, "", layer.opset)
