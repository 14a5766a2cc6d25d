"""ONNX -> engine Model. The only module that touches ONNX protobuf objects."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from engine.errors import ModelLoadError
from engine.model import Graph, Layer, Model, TensorSpec

#: domains whose ops the engine knows; anything else is rejected at load time
KNOWN_DOMAINS = {"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"}
MIN_OPSET = 7


def onnx_dtype(elem_type: int) -> np.dtype:
    """NumPy dtype of an ONNX TensorProto element type (strings are ``object``)."""
    if elem_type == onnx.TensorProto.STRING:
        return np.dtype(object)
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception as exc:
        raise ModelLoadError(f"unsupported tensor element type {elem_type}") from exc


def _type_spec(name: str, type_proto: onnx.TypeProto) -> TensorSpec:
    if type_proto.HasField("tensor_type"):
        tt = type_proto.tensor_type
        dtype = onnx_dtype(tt.elem_type) if tt.elem_type else None
        shape = None
        if tt.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in tt.shape.dim)
        return TensorSpec(name, shape, dtype)
    # sequences, optionals, maps: no static tensor spec
    return TensorSpec(name, None, None)


def _attribute(attr: onnx.AttributeProto, scope: set[str], opsets: dict[str, int]) -> Any:
    A = onnx.AttributeProto
    if attr.type == A.GRAPH:
        return _graph(attr.g, scope, opsets)
    if attr.type == A.GRAPHS:
        return [_graph(g, scope, opsets) for g in attr.graphs]
    if attr.type == A.TENSOR:
        return numpy_helper.to_array(attr.t)
    if attr.type == A.TENSORS:
        return [numpy_helper.to_array(t) for t in attr.tensors]
    if attr.type == A.SPARSE_TENSOR:
        return _sparse_to_dense(attr.sparse_tensor)
    if attr.type == A.STRING:
        return attr.s.decode("utf-8", "replace")
    if attr.type == A.STRINGS:
        return [s.decode("utf-8", "replace") for s in attr.strings]
    value = helper.get_attribute_value(attr)
    return list(value) if isinstance(value, list | tuple) else value


def _sparse_to_dense(sp: onnx.SparseTensorProto) -> np.ndarray:
    values = numpy_helper.to_array(sp.values)
    dense = np.zeros(int(np.prod(sp.dims)), dtype=values.dtype)
    idx = numpy_helper.to_array(sp.indices)
    if idx.ndim == 2:
        idx = np.ravel_multi_index(idx.T, tuple(sp.dims))
    dense[idx.reshape(-1)] = values.reshape(-1)
    return dense.reshape(tuple(sp.dims))


def _schema_defaults(node: onnx.NodeProto, opset: int) -> dict[str, Any]:
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except Exception:
        return {}
    out = {}
    for name, a in schema.attributes.items():
        if a.default_value is not None and a.default_value.type != 0:
            out[name] = _attribute(a.default_value, set(), {})
    return out


def _check_op_known(node: onnx.NodeProto, opsets: dict[str, int]) -> int:
    domain = node.domain or ""
    if domain not in KNOWN_DOMAINS:
        raise ModelLoadError(f"node {node.name or node.op_type!r} uses unknown domain {domain!r}")
    opset = opsets.get(domain, opsets.get("ai.onnx" if domain == "" else domain, 0))
    if not onnx.defs.has(node.op_type, domain):
        raise ModelLoadError(f"unknown operator {node.op_type!r} (domain {domain or 'ai.onnx'!r}) "
                             f"in node {node.name!r}")
    return opset


def _graph(g: onnx.GraphProto, outer_scope: set[str], opsets: dict[str, int]) -> Graph:
    constants = {}
    for init in g.initializer:
        constants[init.name] = numpy_helper.to_array(init)
    for sp in g.sparse_initializer:
        constants[sp.values.name] = _sparse_to_dense(sp)
    inputs = [_type_spec(i.name, i.type) for i in g.input if i.name not in constants]
    outputs = [_type_spec(o.name, o.type) for o in g.output]
    value_info = {v.name: _type_spec(v.name, v.type) for v in g.value_info}
    defined = set(constants) | {i.name for i in inputs}
    scope = outer_scope | defined
    layers, used_names = [], set()
    for index, node in enumerate(g.node):
        opset = _check_op_known(node, opsets)
        node_scope = scope | {o for n in g.node[:index] for o in n.output}
        attrs = _schema_defaults(node, opset)
        attrs.update({a.name: _attribute(a, node_scope, opsets) for a in node.attribute})
        name = node.name or f"{node.op_type}_{index}"
        while name in used_names:
            name = f"{name}_{index}"
        used_names.add(name)
        layer = Layer(name, node.op_type, list(node.input), list(node.output), attrs,
                      node.domain or "", opset)
        layer.captures = sorted(_subgraph_captures(attrs))
        layers.append(layer)
        defined.update(o for o in node.output if o)
    graph = Graph(layers, inputs, outputs, constants, value_info, g.name)
    graph.outer_names = _free_names(graph)
    return graph


def _subgraph_captures(attrs: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for v in attrs.values():
        for sub in (v if isinstance(v, list) else [v]):
            if isinstance(sub, Graph):
                names |= sub.outer_names
    return names


def _free_names(graph: Graph) -> set[str]:
    defined = set(graph.constants) | {i.name for i in graph.inputs}
    free: set[str] = set()
    for layer in graph.layers:
        free.update(n for n in layer.all_inputs() if n and n not in defined)
        defined.update(o for o in layer.outputs if o)
    free.update(o.name for o in graph.outputs if o.name not in defined)
    return free


class ModelLoader:
    """Loads ONNX files into engine Models."""

    @staticmethod
    def load(source: str | os.PathLike | bytes, optimize: bool = True) -> Model:
        """Load an ONNX model from a path or bytes. Raises ``ModelLoadError`` on any problem."""
        try:
            proto = _parse(source)
            model = _model(proto)
        except ModelLoadError:
            raise
        except RecursionError as exc:
            raise ModelLoadError("the model is nested too deeply to load") from exc
        except Exception as exc:  # any other failure is still the file's fault
            raise ModelLoadError(f"invalid ONNX model: {type(exc).__name__}: {exc}") from exc
        if isinstance(source, str | os.PathLike):
            model.path = os.fspath(source)
        if optimize:
            from engine.passes import run_passes

            try:
                run_passes(model)
            except ModelLoadError:
                raise
            except Exception as exc:
                raise ModelLoadError(f"cannot prepare the model: {type(exc).__name__}: "
                                     f"{exc}") from exc
        else:
            from engine.passes.cpu_forced import mark_cpu_forced

            mark_cpu_forced(model)
        return model

    @staticmethod
    def from_proto(proto: onnx.ModelProto, optimize: bool = True) -> Model:
        """Load from an in-memory ``onnx.ModelProto``."""
        return ModelLoader.load(proto.SerializeToString(), optimize)


def _parse(source) -> onnx.ModelProto:
    from google.protobuf.message import DecodeError

    if isinstance(source, bytes | bytearray):
        data, base_dir = bytes(source), None
    else:
        path = os.fspath(source)
        if not os.path.exists(path):
            raise ModelLoadError(f"no such file: {path}")
        if os.path.isdir(path):
            raise ModelLoadError(f"{path} is a folder, not an ONNX file")
        with open(path, "rb") as f:
            data = f.read()
        base_dir = os.path.dirname(os.path.abspath(path))
    if not data:
        raise ModelLoadError("the file is empty")
    try:
        proto = onnx.ModelProto()
        proto.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise ModelLoadError(f"not an ONNX model, or the file is truncated ({exc})") from exc
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise ModelLoadError("not an ONNX model: no graph or no IR version")
    if base_dir is not None and _uses_external_data(proto):
        try:
            onnx.external_data_helper.load_external_data_for_model(proto, base_dir)
        except Exception as exc:
            raise ModelLoadError(f"cannot read the model's external data: {exc}") from exc
    elif _uses_external_data(proto):
        raise ModelLoadError("the model keeps weights in external files; load it from a path")
    try:
        onnx.checker.check_model(proto)
    except Exception as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(f"invalid ONNX graph: {msg}") from exc
    if proto.functions:
        proto = onnx.inliner.inline_local_functions(proto)
    return proto


def _uses_external_data(proto: onnx.ModelProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL
               for t in onnx.external_data_helper._get_all_tensors(proto))


def _model(proto: onnx.ModelProto) -> Model:
    opsets = {}
    for imp in proto.opset_import:
        domain = "" if imp.domain in ("", "ai.onnx") else imp.domain
        opsets[domain] = imp.version
    default = opsets.get("")
    newest = onnx.defs.onnx_opset_version()
    if default is not None and not MIN_OPSET <= default <= newest:
        raise ModelLoadError(f"default-domain opset {default} is not supported "
                             f"(supported: {MIN_OPSET} to {newest})")
    for domain in opsets:
        if domain not in KNOWN_DOMAINS:
            raise ModelLoadError(f"the model imports unknown operator domain {domain!r}")
    graph = _graph(proto.graph, set(), opsets)
    model = Model(graph.layers, graph.inputs, graph.outputs, graph.constants, graph.value_info,
                  graph.name, opsets=opsets, producer=proto.producer_name,
                  ir_version=proto.ir_version)
    _static_shapes(proto, model)
    return model


def _static_shapes(proto: onnx.ModelProto, model: Model) -> None:
    """Symbolic-dim shape inference from the ONNX schemas, for display and planning."""
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    except Exception:
        return  # best effort: shapes are always known concretely at schedule time
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        spec = _type_spec(vi.name, vi.type)
        if spec.shape is not None or spec.dtype is not None:
            model.value_info.setdefault(vi.name, spec)
