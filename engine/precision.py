"""A float64 copy of a model: the reference a comparison measures float32 backends against.

Every float32 (and float16) tensor of the model becomes float64: inputs, constants, the specs
of intermediates and outputs, and the ops that name a float type (``Cast``'s ``to``, the
``dtype`` of random and EyeLike ops, ``ConstantOfShape``'s value). Run on the CPU backend,
whose kernels are generic in their dtype, the copy computes the same graph in double
precision with the same tensor names, so each of its tensors can stand beside the float32
one a backend produced. The reference is the exact maths: a deliberate float16 rounding in a
float32 model is widened too, so it shows as error at the layer that rounds.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import numpy as np

from engine.model import Graph, Layer, Model, TensorSpec

#: ONNX TensorProto codes: FLOAT, FLOAT16, DOUBLE
_NARROW_CODES = (1, 10)
_DOUBLE = 11
#: attributes that hold an ONNX element type
_TYPE_ATTRS = ("to", "dtype")


def _is_narrow(dtype) -> bool:
    return dtype is not None and np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float16))


def _widen_array(value: Any) -> Any:
    if isinstance(value, np.ndarray) and _is_narrow(value.dtype):
        return value.astype(np.float64)
    return value


def _widen_spec(spec: TensorSpec) -> TensorSpec:
    return replace(spec, dtype=np.dtype(np.float64)) if _is_narrow(spec.dtype) else spec


def _widen_attr(name: str, value: Any) -> Any:
    if isinstance(value, Graph):
        return _widen_graph(value)
    if isinstance(value, list):
        return [_widen_attr(name, v) for v in value]
    if name in _TYPE_ATTRS and isinstance(value, int) and value in _NARROW_CODES:
        return _DOUBLE
    return _widen_array(value)


def _widen_layer(layer: Layer) -> Layer:
    attrs = {k: _widen_attr(k, v) for k, v in layer.attributes.items()}
    return replace(layer, attributes=attrs, inputs=list(layer.inputs),
                   outputs=list(layer.outputs), captures=list(layer.captures))


def _widen_graph(graph: Graph) -> Graph:
    out = copy.copy(graph)
    out.layers = [_widen_layer(layer) for layer in graph.layers]
    out.inputs = [_widen_spec(s) for s in graph.inputs]
    out.outputs = [_widen_spec(s) for s in graph.outputs]
    out.constants = {k: _widen_array(v) for k, v in graph.constants.items()}
    out.value_info = {k: _widen_spec(s) for k, s in graph.value_info.items()}
    return out


def widened_to_float64(model: Model) -> Model:
    """A copy of ``model`` computing in float64 wherever it computes in float32 or float16
    (the original is not changed; integer and bool tensors keep their types)."""
    out = _widen_graph(model)
    assert isinstance(out, Model)
    out.cpu_forced = set(model.cpu_forced)
    out.fused_away = dict(model.fused_away)
    out.pass_stats = dict(model.pass_stats)
    return out


def widened_feeds(feeds: dict[str, Any]) -> dict[str, Any]:
    """``feeds`` with float32/float16 arrays as float64 (other values as given)."""
    return {k: _widen_array(np.asarray(v)) if hasattr(v, "dtype") else v
            for k, v in feeds.items()}
