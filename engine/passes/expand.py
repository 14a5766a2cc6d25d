"""Expansion of ops that the CPU has no kernel for but ONNX defines as a function.

Many ONNX ops (LayerNormalization, Elu, Range, the losses...) come with a function
body in their schema, either fixed or built from the node and its input types
("context-dependent"). When ``KERNELS.lookup(layer)`` is None, the layer is replaced
by the body's layers, with the body's tensors renamed to fresh names, attribute
references resolved, and shapes inferred for the new tensors (symbolic dims kept).
A layer is expanded only if everything it expands to can run on the CPU.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from engine.backends.cpu.registry import KERNELS
from engine.model import Graph, Layer, TensorSpec
from engine.onnx_import import convert_nodes, type_spec
from engine.passes.graph_utils import iter_graphs, refresh_captures, subgraphs

MAX_DEPTH = 6


class Expander:
    """Expands function ops in one model; keeps the sets of taken names across graphs."""

    def __init__(self, root: Graph):
        self.names: set[str] = set()
        self.layer_names: set[str] = set()
        for g in iter_graphs(root):
            self.names |= set(g.constants) | {s.name for s in g.inputs + g.outputs}
            for layer in g.layers:
                self.names.update(layer.outputs)
                self.layer_names.add(layer.name)
        self.count = 0

    def graph(self, graph: Graph, depth: int = 0) -> bool:
        """Expand inside ``graph``; True if every layer then has a CPU kernel."""
        out: list[Layer] = []
        ok = True
        for layer in graph.layers:
            for sub in subgraphs(layer):
                ok &= self.graph(sub, depth)
            if KERNELS.lookup(layer) is not None:
                out.append(layer)
                continue
            replaced = self.layer(layer, graph, depth)
            if replaced is None:
                out.append(layer)
                ok = False
            else:
                out.extend(replaced)
                self.count += 1
        graph.layers = out
        refresh_captures(graph)
        return ok

    def layer(self, layer: Layer, graph: Graph, depth: int) -> list[Layer] | None:
        if depth >= MAX_DEPTH or layer.domain not in ("", "ai.onnx.ml", "ai.onnx.preview"):
            return None
        try:
            body = function_body(layer, graph)
        except Exception:
            return None  # no usable body: the layer stays and reports its missing kernel
        if body is None:
            return None
        layers, value_info = self.instantiate(layer, body, graph)
        # the scratch graph sees the parent's specs, for the input types of nested bodies
        scratch = Graph(layers, graph.inputs, [], graph.constants, dict(graph.value_info))
        scratch.value_info.update(value_info)
        count = self.count
        if not self.graph(scratch, depth + 1):
            self.count = count  # nested expansions were thrown away with this one
            return None
        for name, spec in scratch.value_info.items():
            if name not in graph.value_info:
                graph.value_info[name] = spec
        return scratch.layers

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def instantiate(self, layer: Layer, body: onnx.FunctionProto, graph: Graph
                    ) -> tuple[list[Layer], dict[str, TensorSpec]]:
        mapping: dict[str, str] = {"": ""}
        for k, formal in enumerate(body.input):
            mapping[formal] = layer.inputs[k] if k < len(layer.inputs) else ""
        for k, formal in enumerate(body.output):
            actual = layer.outputs[k] if k < len(layer.outputs) else ""
            mapping[formal] = actual or self.fresh(f"{layer.name}/{formal}")

        def rename(name: str) -> str:
            if name not in mapping:
                mapping[name] = self.fresh(f"{layer.name}/{name}")
            return mapping[name]

        defaults = {a.name: a for a in body.attribute_proto}
        nodes = []
        for node in body.node:
            n = onnx.NodeProto()
            n.CopyFrom(node)
            _rewrite_node(n, rename, layer, defaults)
            nodes.append(n)
        opsets = {("" if o.domain == "ai.onnx" else o.domain): int(o.version)
                  for o in body.opset_import}
        opsets.setdefault("", layer.opset)
        layers = convert_nodes(nodes, set(), opsets, self.layer_names,
                               name_prefix=f"{layer.name}/")
        return layers, _infer(nodes, layer, graph, opsets)


def function_body(layer: Layer, graph: Graph) -> onnx.FunctionProto | None:
    """The ONNX function that defines ``layer``'s op at its opset, if the schema has one."""
    schema = onnx.defs.get_schema(layer.op_type, layer.opset, layer.domain)
    if schema.has_function:
        versions = list(schema.function_opset_versions)
        if not versions:
            return schema.function_body
        # every version implements this schema; prefer the one written for the model's opset
        older = [v for v in versions if v <= layer.opset]
        data = schema.get_function_with_opset_version(max(older) if older else min(versions))
    elif schema.has_context_dependent_function:
        versions = list(schema.context_dependent_function_opset_versions) or [layer.opset]
        older = [v for v in versions if v <= layer.opset]
        types = []
        for n in layer.inputs:
            if not n:
                types.append(onnx.TypeProto().SerializeToString())
                continue
            tp = type_proto(graph.spec(n))
            if tp is None:
                return None  # the body depends on input types we do not know
            types.append(tp.SerializeToString())
        node = node_proto(layer, schema)
        data = schema.get_context_dependent_function_with_opset_version(
            max(older) if older else min(versions), node.SerializeToString(), types)
    else:
        return None
    if not data:
        return None
    fn = onnx.FunctionProto()
    fn.ParseFromString(data)
    return fn if len(fn.node) else None


def type_proto(spec: TensorSpec | None) -> onnx.TypeProto | None:
    if spec is None or spec.dtype is None:
        return None
    dt = np.dtype(spec.dtype)
    elem = onnx.TensorProto.STRING if dt.kind == "O" else helper.np_dtype_to_tensor_dtype(dt)
    shape = None if spec.shape is None else list(spec.shape)
    return helper.make_tensor_type_proto(elem, shape)


def attribute_proto(name: str, value, attr_type: int) -> onnx.AttributeProto | None:
    """An AttributeProto of ``attr_type`` from a converted Python value (None if impossible)."""
    A = onnx.AttributeProto
    if value is None:
        return None
    conv = {A.FLOAT: float, A.INT: int, A.STRING: str,
            A.TENSOR: lambda v: numpy_helper.from_array(np.asarray(v)),
            A.FLOATS: lambda v: [float(x) for x in v], A.INTS: lambda v: [int(x) for x in v],
            A.STRINGS: lambda v: [str(x) for x in v],
            A.TENSORS: lambda v: [numpy_helper.from_array(np.asarray(x)) for x in v],
            A.GRAPH: graph_proto, A.GRAPHS: lambda v: [graph_proto(g) for g in v]}
    if attr_type not in conv:
        return None
    return helper.make_attribute(name, conv[attr_type](value), attr_type=attr_type)


def node_proto(layer: Layer, schema=None) -> onnx.NodeProto:
    """A NodeProto of ``layer``; attribute types come from the op's schema."""
    if schema is None:
        schema = onnx.defs.get_schema(layer.op_type, layer.opset, layer.domain)
    node = helper.make_node(layer.op_type, layer.inputs, layer.outputs, domain=layer.domain)
    for name, value in layer.attributes.items():
        if name in schema.attributes:
            a = attribute_proto(name, value, int(schema.attributes[name].type))
            if a is not None:
                node.attribute.append(a)
    return node


def graph_proto(graph: Graph) -> onnx.GraphProto:
    """A GraphProto of a (sub)graph, for function builders that take graph attributes."""
    def info(spec: TensorSpec) -> onnx.ValueInfoProto:
        tp = type_proto(spec)
        return helper.make_value_info(spec.name, tp) if tp is not None else \
            helper.make_empty_tensor_value_info(spec.name)

    return helper.make_graph(
        [node_proto(layer) for layer in graph.layers], graph.name or "subgraph",
        [info(s) for s in graph.inputs], [info(s) for s in graph.outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in graph.constants.items()])


def _rewrite_node(node: onnx.NodeProto, rename, layer: Layer, defaults: dict) -> None:
    """Rename every tensor of ``node`` (subgraphs included) and resolve attribute references."""
    node.input[:] = [rename(n) for n in node.input]
    node.output[:] = [rename(n) for n in node.output]
    attrs = []
    for a in node.attribute:
        if a.ref_attr_name:
            value = layer.attributes.get(a.ref_attr_name)
            resolved = attribute_proto(a.name, value, a.type) if value is not None else None
            if resolved is None and a.ref_attr_name in defaults:
                resolved = onnx.AttributeProto()
                resolved.CopyFrom(defaults[a.ref_attr_name])
                resolved.name = a.name
            if resolved is not None:
                attrs.append(resolved)
            continue
        for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
            _rewrite_graph(g, rename, layer, defaults)
        attrs.append(a)
    copies = []
    for a in attrs:
        c = onnx.AttributeProto()
        c.CopyFrom(a)
        copies.append(c)
    del node.attribute[:]
    node.attribute.extend(copies)


def _rewrite_graph(g: onnx.GraphProto, rename, layer: Layer, defaults: dict) -> None:
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        vi.name = rename(vi.name)
    for t in g.initializer:
        t.name = rename(t.name)
    for node in g.node:
        _rewrite_node(node, rename, layer, defaults)


def _infer(nodes: list[onnx.NodeProto], layer: Layer, graph: Graph,
           opsets: dict[str, int]) -> dict[str, TensorSpec]:
    """Shapes of the expansion's tensors by ONNX inference, from the layer's input specs."""
    inputs = []
    for n in dict.fromkeys(x for x in layer.inputs if x):
        tp = type_proto(graph.spec(n))
        if tp is not None:
            inputs.append(helper.make_value_info(n, tp))
    g = helper.make_graph(nodes, "expansion", inputs, [])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v)
                                                for d, v in opsets.items()])
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:
        return {}
    out = {}
    for vi in inferred.graph.value_info:
        spec = type_spec(vi.name, vi.type)
        if spec.dtype is not None or spec.shape is not None:
            out[vi.name] = spec
    return out


def expand_functions(graph: Graph) -> int:
    """Expand function ops without a CPU kernel in ``graph``; returns how many were expanded."""
    ex = Expander(graph)
    ex.graph(graph)
    return ex.count
