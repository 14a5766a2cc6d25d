"""Constant folding: layers whose inputs are all constants are run once, at load time.

The CPU interpreter computes them with the same kernels a run would use, so results
are unchanged. ``Shape``/``Size`` of a tensor whose shape is fully static fold too.
A folded result may not balloon the model: it must stay under ``FOLD_LIMIT_BYTES``
or under the size of the constants it is made from; the size is estimated before
computing whenever the op's shape logic or the static shapes allow. Which ops never fold
(not ``deterministic``) and which need an estimate (``may_expand``) are op traits
(``engine/ops/traits.py``).
"""

from __future__ import annotations

import warnings

import numpy as np

from engine.model import Graph, Layer
from engine.ops import op_for
from engine.ops.base import Meta
from engine.ops.traits import op_traits

FOLD_LIMIT_BYTES = 1 << 20

def _static_shape(graph: Graph, name: str) -> tuple[int, ...] | None:
    spec = graph.spec(name)
    if spec is None or spec.shape is None or not spec.is_static:
        return None
    return tuple(int(d) for d in spec.shape)


def _shape_only(layer: Layer, graph: Graph) -> np.ndarray | None:
    """Value of Shape/Size on a tensor whose shape is static (no need for its values)."""
    if layer.op_type not in ("Shape", "Size") or layer.domain or not layer.inputs:
        return None
    shape = _static_shape(graph, layer.inputs[0])
    if shape is None:
        return None
    if layer.op_type == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    rank = len(shape)
    start, end = layer.attr("start", 0) or 0, layer.attr("end", rank)
    start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
    return np.array(shape[start:end], dtype=np.int64)


def _estimate_bytes(layer: Layer, graph: Graph, values: list) -> int | None:
    """Bytes of the layer's outputs, from its shape logic or the static shapes; None if unknown."""
    op = op_for(layer)
    if op is not None:
        try:
            metas = [None if v is None else Meta.of(np.asarray(v)) for v in values]
            return sum(m.size * max(1, m.dtype.itemsize) for m in op.infer(layer, metas))
        except Exception:
            pass  # fall back to the static shapes
    total = 0
    for o in layer.outputs:
        if not o:
            continue
        spec = graph.spec(o)
        if spec is None or spec.dtype is None or _static_shape(graph, o) is None:
            return None
        total += int(np.prod(_static_shape(graph, o), dtype=np.int64)) * \
            max(1, np.dtype(spec.dtype).itemsize)
    return total


def fold_constants(graph: Graph, limit: int = FOLD_LIMIT_BYTES) -> int:
    """Fold constant layers of ``graph`` (and of its subgraphs); returns how many were folded."""
    from engine.backends.cpu.interpreter import run_layer
    from engine.passes.graph_utils import subgraphs

    folded = 0
    keep: list[Layer] = []
    for layer in graph.layers:
        for sub in subgraphs(layer):
            folded += fold_constants(sub, limit)
        names = [n for n in layer.all_inputs() if n]
        value = _shape_only(layer, graph)
        if value is not None:
            graph.constants[layer.outputs[0]] = value
            graph.value_info.pop(layer.outputs[0], None)
            folded += 1
            continue
        traits = op_traits(layer.op_type, layer.domain)
        if (not traits.deterministic or layer.domain == "ai.onnx.preview.training"
                or not all(n in graph.constants for n in names)):
            keep.append(layer)
            continue
        args = [graph.constants[n] if n else None for n in layer.inputs]
        args += [graph.constants[n] for n in layer.captures]
        in_bytes = sum(np.asarray(a).nbytes for a in args if isinstance(a, np.ndarray))
        budget = max(limit, in_bytes)
        if layer.op_type == "Constant":
            budget = 1 << 62  # its value is in the file already
        else:
            estimate = _estimate_bytes(layer, graph, args)
            if (estimate is None and traits.may_expand) or (estimate or 0) > budget:
                keep.append(layer)
                continue
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outs = run_layer(layer, args)
        except Exception:
            keep.append(layer)  # leave it to run time, which reports the error with context
            continue
        real = [(n, v) for n, v in zip(layer.outputs, outs) if n]
        if not all(isinstance(v, np.ndarray) for _, v in real) or \
                sum(v.nbytes for _, v in real) > budget:
            keep.append(layer)  # sequences, optionals, or too big
            continue
        for n, v in real:
            graph.constants[n] = v
            graph.value_info.pop(n, None)
        folded += 1
    graph.layers = keep
    return folded
