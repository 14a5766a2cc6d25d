"""DESIGN §5: find tensors whose values are needed on the CPU to schedule work.

A tensor is CPU-forced if it is an op's planning input (``Op.cpu_inputs``: the
shape of Reshape/Expand/Tile/ConstantOfShape, axes, Slice starts/ends, Resize
scales/sizes, TopK's k, ...) or if it feeds a layer that computes a CPU-forced
tensor. Shape and Size only read their input's shape, so the walk stops there.
"""

from __future__ import annotations

from engine.model import Model
from engine.ops import cpu_input_indices

#: ops whose output depends on their input's shape only, never on its values
SHAPE_ONLY = {"Shape", "Size"}


def mark_cpu_forced(model: Model) -> set[str]:
    producers = model.producers()
    forced: set[str] = set()
    stack: list[str] = []
    for layer in model.layers:
        for i in cpu_input_indices(layer):
            if i < len(layer.inputs) and layer.inputs[i]:
                stack.append(layer.inputs[i])
    while stack:
        name = stack.pop()
        if name in forced:
            continue
        forced.add(name)
        layer = producers.get(name)
        if layer is None or layer.op_type in SHAPE_ONLY:
            continue
        stack.extend(n for n in layer.all_inputs() if n and n not in forced)
    # graph inputs and constants are simply read on the CPU; only computed tensors matter
    model.cpu_forced = {n for n in forced if n in producers}
    return model.cpu_forced
