"""ONNX -> engine Model.

Parsing, validation (``onnx_check``) and conversion live here; ONNX protobuf objects
never reach the rest of the engine except in ``passes.expand``, which converts ONNX
function bodies with ``convert_nodes``.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from engine.dtypes import onnx_dtype
from engine.errors import ModelLoadError
from engine.model import Graph, Layer, Model, TensorSpec, free_names, subgraph_captures
from engine.onnx_check import MIN_OPSET, check_opsets, parse_model, prepare_proto, validate_graph
from engine.onnx_external import ExternalData, is_external, weightless
from engine.symbols import freshen_anonymous_dims

__all__ = ["MIN_OPSET", "ModelLoader", "convert_graph", "convert_nodes", "onnx_dtype"]


#: sparse tensors are stored densely; refuse sizes that cannot be meant seriously
MAX_DENSE_ELEMENTS = 1 << 28
#: the external data of the model being converted (tensors are mapped from their files)
_EXTERNAL: ContextVar[ExternalData | None] = ContextVar("external_data", default=None)


def type_spec(name: str, type_proto: onnx.TypeProto) -> TensorSpec:
    """TensorSpec of a value's declared type; non-tensors (sequences, maps) get no shape/dtype."""
    if type_proto.HasField("tensor_type"):
        tt = type_proto.tensor_type
        dtype = onnx_dtype(tt.elem_type) if tt.elem_type else None
        shape = None
        if tt.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in tt.shape.dim)
        return TensorSpec(name, shape, dtype)
    return TensorSpec(name, None, None)


def _tensor(t: onnx.TensorProto, what: str) -> np.ndarray:
    try:
        if is_external(t):
            external = _EXTERNAL.get()
            if external is None:
                raise ModelLoadError(f"{what} {t.name!r} keeps its data in an external file; "
                                     "load the model from its path")
            return external.array(t, onnx_dtype(t.data_type))
        return numpy_helper.to_array(t)
    except ModelLoadError:
        raise
    except Exception as exc:
        raise ModelLoadError(f"{what} {t.name!r} is corrupt: {exc}") from exc


def _attribute(attr: onnx.AttributeProto, scope: set[str], opsets: dict[str, int]) -> Any:
    A = onnx.AttributeProto
    if attr.type == A.GRAPH:
        return convert_graph(attr.g, scope, opsets)
    if attr.type == A.GRAPHS:
        return [convert_graph(g, scope, opsets) for g in attr.graphs]
    if attr.type == A.TENSOR:
        return _tensor(attr.t, f"attribute {attr.name!r} tensor")
    if attr.type == A.TENSORS:
        return [_tensor(t, f"attribute {attr.name!r} tensor") for t in attr.tensors]
    if attr.type == A.SPARSE_TENSOR:
        return _sparse_to_dense(attr.sparse_tensor)
    if attr.type == A.SPARSE_TENSORS:
        return [_sparse_to_dense(s) for s in attr.sparse_tensors]
    if attr.type == A.STRING:
        return attr.s.decode("utf-8", "replace")
    if attr.type == A.STRINGS:
        return [s.decode("utf-8", "replace") for s in attr.strings]
    if attr.type == A.UNDEFINED:
        raise ModelLoadError(f"attribute {attr.name!r} has no type")
    value = helper.get_attribute_value(attr)
    return list(value) if isinstance(value, list | tuple) else value


def _sparse_to_dense(sp: onnx.SparseTensorProto) -> np.ndarray:
    values = _tensor(sp.values, "sparse tensor")
    shape = tuple(int(d) for d in sp.dims)
    if any(d < 0 for d in shape) or np.prod(shape, dtype=np.float64) > MAX_DENSE_ELEMENTS:
        raise ModelLoadError(f"sparse tensor {sp.values.name!r} of shape {list(shape)} is too "
                             "large to store densely")
    dense = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=values.dtype)
    idx = _tensor(sp.indices, "sparse tensor indices").astype(np.int64)
    if idx.ndim == 2:
        idx = np.ravel_multi_index(tuple(idx.T), shape)
    dense[idx.reshape(-1)] = values.reshape(-1)
    return dense.reshape(shape)


_DEFAULTS: dict[tuple[str, str, int], dict[str, Any]] = {}


def _schema_defaults(node: onnx.NodeProto, opset: int) -> dict[str, Any]:
    key = (node.domain or "", node.op_type, opset)
    if key not in _DEFAULTS:
        out = {}
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, node.domain or "")
        except Exception:
            schema = None
        for name, a in (schema.attributes.items() if schema else ()):
            if a.default_value is not None and a.default_value.type != 0:
                out[name] = _attribute(a.default_value, set(), {})
        _DEFAULTS[key] = out
    # copies: kernels may not mutate shared defaults, but lists are cheap to copy
    return {k: (list(v) if isinstance(v, list) else v) for k, v in _DEFAULTS[key].items()}


def convert_nodes(nodes, scope: set[str], opsets: dict[str, int], used_names: set[str],
                  name_prefix: str = "") -> list[Layer]:
    """NodeProtos (topologically sorted, validated) -> Layers.

    ``scope`` holds the names visible to the nodes (inputs, constants, outer scope);
    ``used_names`` the layer names already taken (extended here).
    """
    layers = []
    scope = set(scope)
    for index, node in enumerate(nodes):
        domain = "" if node.domain in ("", "ai.onnx") else node.domain
        opset = opsets.get(domain, 0)
        attrs = _schema_defaults(node, opset)
        attrs.update({a.name: _attribute(a, scope, opsets) for a in node.attribute})
        base = name_prefix + (node.name or f"{node.op_type}_{index}")
        name, k = base, 1
        while name in used_names:
            name, k = f"{base}_{k}", k + 1
        used_names.add(name)
        layer = Layer(name, node.op_type, list(node.input), list(node.output), attrs, domain, opset)
        layer.captures = sorted(subgraph_captures(attrs))
        layers.append(layer)
        scope.update(o for o in node.output if o)
    return layers


def convert_graph(g: onnx.GraphProto, outer_scope: set[str], opsets: dict[str, int]) -> Graph:
    """A validated GraphProto (main graph or subgraph) -> Graph."""
    constants = {}
    for init in g.initializer:
        constants[init.name] = _tensor(init, "initializer")
    for sp in g.sparse_initializer:
        constants[sp.values.name] = _sparse_to_dense(sp)
    inputs = [type_spec(i.name, i.type) for i in g.input if i.name not in constants]
    outputs = [type_spec(o.name, o.type) for o in g.output]
    value_info = {v.name: type_spec(v.name, v.type) for v in g.value_info}
    scope = outer_scope | set(constants) | {i.name for i in inputs}
    layers = convert_nodes(g.node, scope, opsets, set())
    graph = Graph(layers, inputs, outputs, constants, value_info, g.name)
    graph.outer_names = free_names(graph)
    return graph


class ModelLoader:
    """Loads ONNX files into engine Models."""

    @staticmethod
    def load(source: str | os.PathLike | bytes, optimize: bool = True) -> Model:
        """Load an ONNX model from a path or bytes; raises ``ModelLoadError`` on any problem.

        With ``optimize`` the import passes run (folding, no-op and dead-code removal,
        function expansion, fusion, shape inference); the CPU-forced analysis always runs.
        """
        if isinstance(source, onnx.ModelProto):
            return ModelLoader.from_proto(source, optimize)
        return _load(lambda: parse_model(source), source, optimize)

    @staticmethod
    def from_proto(proto: onnx.ModelProto, optimize: bool = True) -> Model:
        """Load from an in-memory ``onnx.ModelProto`` (never serialised whole, never changed)."""
        def parse():
            copy = onnx.ModelProto()
            copy.CopyFrom(proto)
            return prepare_proto(copy, None)

        return _load(parse, None, optimize)


def _load(parse, source, optimize: bool) -> Model:
    """Parse, check and convert (``ModelLoader.load``'s body); every failure a ModelLoadError."""
    try:
        model = _model(*parse())
    except ModelLoadError:
        raise
    except RecursionError as exc:
        raise ModelLoadError("the model is nested too deeply to load") from exc
    except MemoryError as exc:
        raise ModelLoadError("the model does not fit in memory") from exc
    except Exception as exc:  # any other failure is still the file's fault
        raise ModelLoadError(f"invalid ONNX model: {type(exc).__name__}: {exc}") from exc
    if isinstance(source, str | os.PathLike):
        model.path = os.fspath(source)
    from engine.passes import run_passes

    try:
        run_passes(model, optimize=optimize)
    except ModelLoadError:
        raise
    except RecursionError as exc:
        raise ModelLoadError("the model is nested too deeply to prepare") from exc
    except Exception as exc:
        raise ModelLoadError(f"cannot prepare the model: {type(exc).__name__}: "
                             f"{exc}") from exc
    return model


def _model(proto: onnx.ModelProto, external: ExternalData | None) -> Model:
    opsets = check_opsets(proto)
    freshen_anonymous_dims(proto.graph)
    validate_graph(proto.graph, set(), opsets)
    skeleton = weightless(proto, external)
    try:
        onnx.checker.check_model(skeleton)
    except Exception as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(f"invalid ONNX graph: {msg}") from exc
    token = _EXTERNAL.set(external)
    try:
        graph = convert_graph(proto.graph, set(), opsets)
    finally:
        _EXTERNAL.reset(token)
    model = Model(graph.layers, graph.inputs, graph.outputs, graph.constants, graph.value_info,
                  graph.name, opsets=opsets, producer=proto.producer_name,
                  ir_version=proto.ir_version,
                  metadata={p.key: p.value for p in proto.metadata_props})
    _static_shapes(skeleton, model)
    return model


#: ONNX data propagation materialises 1-D tensors as lists of dims: only for small ones
DATA_PROP_MAX_DIM = 4096


def _long_vectors(g: onnx.GraphProto) -> bool:
    """True if a declared 1-D tensor of ``g`` (or a subgraph) is longer than DATA_PROP_MAX_DIM."""
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == 1 and dims[0].dim_value > DATA_PROP_MAX_DIM:
            return True
    if any(len(t.dims) == 1 and t.dims[0] > DATA_PROP_MAX_DIM for t in g.initializer):
        return True
    return any(_long_vectors(sub) for node in g.node for a in node.attribute
               for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)))


def _static_shapes(proto: onnx.ModelProto, model: Model) -> None:
    """Symbolic-dim shape inference from the ONNX schemas, for display and planning."""
    try:
        inferred = onnx.shape_inference.infer_shapes(
            proto, strict_mode=False, data_prop=not _long_vectors(proto.graph))
    except Exception:
        return  # best effort: shapes are always known concretely at schedule time
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        try:
            spec = type_spec(vi.name, vi.type)
        except ModelLoadError:
            continue
        if spec.shape is not None or spec.dtype is not None:
            model.value_info.setdefault(vi.name, spec)
