"""Removal of layers that only pass their input through: Identity, and Dropout at inference.

A removed layer's readers read its input instead. When its output is a graph output,
the producer of its input is renamed to write the output name directly, so the
model's output names never change; where neither is possible the layer stays.
"""

from __future__ import annotations

import numpy as np

from engine.model import Graph, Layer
from engine.passes.graph_utils import can_rename_reads, refresh_captures, rename_reads, subgraphs


def _passthrough(layer: Layer, graph: Graph, read: set[str]) -> bool:
    if layer.domain or len(layer.inputs) < 1 or not layer.inputs[0] or not layer.outputs[0]:
        return False
    if layer.op_type == "Identity":
        return True
    if layer.op_type != "Dropout":
        return False
    if len(layer.outputs) > 1 and layer.outputs[1] in read:
        return False  # the mask is read: keep the layer that computes it
    if layer.opset < 12:
        return True  # from opset 7 on, Dropout without training_mode is inference-only
    training = layer.inputs[2] if len(layer.inputs) > 2 else ""
    if not training:
        return True
    value = graph.constants.get(training)
    return value is not None and not bool(np.asarray(value).reshape(-1)[0])


def remove_noops(graph: Graph, is_model: bool = True) -> int:
    """Remove pass-through layers from ``graph`` and its subgraphs; returns how many."""
    removed = 0
    for layer in graph.layers:
        for sub in subgraphs(layer):
            removed += remove_noops(sub, is_model=False)
    keep: list[Layer] = []
    producers = graph.producers()
    output_names = {o.name for o in graph.outputs}
    read = output_names | {n for layer in graph.layers for n in layer.all_inputs() if n}
    for layer in graph.layers:
        if _passthrough(layer, graph, read) and _bypass(graph, layer, producers, output_names,
                                                  is_model):
            removed += 1
            continue
        keep.append(layer)
    graph.layers = keep
    refresh_captures(graph)
    return removed


def _bypass(graph: Graph, layer: Layer, producers: dict[str, Layer], output_names: set[str],
            is_model: bool) -> bool:
    src, dst = layer.inputs[0], layer.outputs[0]
    if dst not in output_names:
        if not can_rename_reads(graph, dst, src):
            return False
        rename_reads(graph, dst, src)
        graph.value_info.pop(dst, None)
        return True
    # dst is a graph output; in a subgraph outputs are positional, so renaming them is fine
    if not is_model:
        if not can_rename_reads(graph, dst, src):
            return False
        rename_reads(graph, dst, src, outputs_too=True)
        graph.value_info.pop(dst, None)
        return True
    producer = producers.get(src)
    if producer is None or src in output_names or not can_rename_reads(graph, src, dst):
        return False  # src is an input, a constant or itself an output: keep the copy
    producer.outputs = [dst if o == src else o for o in producer.outputs]
    rename_reads(graph, src, dst)
    spec = graph.value_info.pop(src, None)
    if spec is not None and dst not in graph.value_info:
        spec.name = dst
        graph.value_info[dst] = spec
    producers[dst] = producer
    producers.pop(src, None)
    return True
