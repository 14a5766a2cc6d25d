"""Shape inference pass: fills ``value_info`` for tensors the ONNX inference left unknown.

ONNX's own inference (symbolic dims included) runs at import; passes keep its results
for renamed and new tensors. This pass adds what static propagation through the ops'
shape logic (``engine.ops``) can derive where every input shape is concrete.
"""

from __future__ import annotations

import numpy as np

from engine.model import Graph, TensorSpec
from engine.ops import op_for
from engine.ops.base import Meta


def _meta(graph: Graph, name: str) -> Meta | None:
    if name in graph.constants and isinstance(graph.constants[name], np.ndarray):
        return Meta.of(graph.constants[name])
    spec = graph.spec(name)
    if spec is None or not spec.is_static or spec.dtype is None:
        return None
    return Meta(tuple(int(d) for d in spec.shape), np.dtype(spec.dtype))


def infer_shapes(graph: Graph) -> int:
    """Add static specs for layer outputs that have none; returns how many were added."""
    added = 0
    for layer in graph.layers:
        missing = [o for o in layer.outputs if o and graph.spec(o) is None]
        if not missing:
            continue
        op = op_for(layer)
        metas = [None if not n else _meta(graph, n) for n in layer.inputs]
        if op is None or any(m is None for n, m in zip(layer.inputs, metas) if n):
            continue
        try:
            outs = op.infer(layer, metas)
        except Exception:
            continue  # shape logic that needs input values; known at run time
        for name, m in zip(layer.outputs, outs):
            if name in missing and m is not None:
                graph.value_info[name] = TensorSpec(name, tuple(m.shape), np.dtype(m.dtype))
                added += 1
    return added
