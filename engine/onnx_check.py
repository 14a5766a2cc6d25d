"""Reading and validating ONNX files, with errors a user can act on.

``parse_model`` turns bytes or a path into a ModelProto (external data left in its files);
``check_opsets`` and ``validate_graph`` reject what the engine cannot load, naming the
node and the tensor at fault. ``validate_graph`` also puts nodes in topological order.
"""

from __future__ import annotations

import os

import onnx
import onnx.inliner
from onnx.external_data_helper import _get_all_tensors

from engine.errors import ModelLoadError
from engine.onnx_external import ExternalData, is_external

#: domains whose ops the engine knows; nodes of any other domain are rejected at load time
KNOWN_DOMAINS = {"", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training"}
MIN_OPSET = 7


def parse_model(source) -> tuple[onnx.ModelProto, ExternalData | None]:
    """Bytes or a path -> (ModelProto with local functions inlined, its external data).

    External tensors stay external in the proto: ``ExternalData`` maps them from their
    files when the model is converted (their locations are checked here).
    """
    from google.protobuf.message import DecodeError

    if isinstance(source, bytes | bytearray | memoryview):
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
        raise ModelLoadError("the file is empty (0 bytes): not an ONNX model")
    hint = _foreign_format(data)
    if hint:
        raise ModelLoadError(f"not an ONNX model: the data looks like {hint}")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise ModelLoadError(f"not an ONNX model, or the file is truncated ({len(data)} bytes "
                             f"could not be decoded: {exc})") from exc
    return prepare_proto(proto, base_dir)


def prepare_proto(proto: onnx.ModelProto, base_dir: str | None
                  ) -> tuple[onnx.ModelProto, ExternalData | None]:
    """Check a decoded proto's basics and its external data; inline local functions."""
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise ModelLoadError("not an ONNX model: the data decodes, but has no graph or no IR "
                             "version (is the file truncated or of another format?)")
    external = None
    tensors = [t for t in _get_all_tensors(proto) if is_external(t)]
    if tensors:
        if base_dir is None:
            raise ModelLoadError("the model keeps weights in external files; load it from its "
                                 "path so that they can be found")
        external = ExternalData(base_dir)
        for t in tensors:
            external.locate(t)
    if proto.functions:
        try:
            proto = onnx.inliner.inline_local_functions(proto)
        except Exception as exc:
            raise ModelLoadError(f"cannot inline the model's local functions: {exc}") from exc
    return proto, external


def _foreign_format(data: bytes) -> str | None:
    head = data[:16]
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive (a PyTorch checkpoint?); export it to ONNX first"
    if head.startswith(b"\x89HDF"):
        return "an HDF5 file (a Keras model?); convert it to ONNX first"
    if head.startswith(b"TFL3", 4):
        return "a TensorFlow Lite model; convert it to ONNX first"
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"[", b"<") or stripped.startswith(b"ir_version"):
        return "text (JSON, XML/HTML or a text-format model), not the binary ONNX format"
    return None


def check_opsets(proto: onnx.ModelProto) -> dict[str, int]:
    """The model's opset imports by domain ("" for the default), after checking them."""
    opsets: dict[str, int] = {}
    for imp in proto.opset_import:
        domain = "" if imp.domain in ("", "ai.onnx") else imp.domain
        opsets[domain] = int(imp.version)
    newest = onnx.defs.onnx_opset_version()
    default = opsets.get("")
    if default is not None and not MIN_OPSET <= default <= newest:
        raise ModelLoadError(f"default-domain opset {default} is not supported (supported: "
                             f"{MIN_OPSET} to {newest}); convert the model with "
                             "onnx.version_converter")
    return opsets


def _label(node: onnx.NodeProto, index: int) -> str:
    return f"node {node.name!r} ({node.op_type})" if node.name else \
        f"{node.op_type} node #{index}"


def _check_node(node: onnx.NodeProto, index: int, opsets: dict[str, int]) -> None:
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    where = _label(node, index)
    if domain not in KNOWN_DOMAINS:
        raise ModelLoadError(f"{where} uses the unknown operator domain {domain!r}; this engine "
                             "runs standard ONNX operators only (ai.onnx, ai.onnx.ml)")
    if domain not in opsets:
        # the opset list is the last field an exporter writes: none at all is most often a
        # file cut short after its graph
        hint = "" if opsets else (": the model imports no opset at all (is the file "
                                  "truncated or incomplete?)")
        raise ModelLoadError(f"{where} uses domain {domain or 'ai.onnx'!r}, which the model "
                             f"does not import (opset_import){hint}")
    if not onnx.defs.has(node.op_type, domain):
        raise ModelLoadError(f"{where}: unknown operator {node.op_type!r} in domain "
                             f"{domain or 'ai.onnx'!r}")
    try:
        onnx.defs.get_schema(node.op_type, opsets[domain], domain)
    except Exception:
        raise ModelLoadError(f"{where}: operator {node.op_type!r} does not exist at opset "
                             f"{opsets[domain]} of {domain or 'ai.onnx'!r}; it needs a newer "
                             "opset") from None


def proto_free_names(g: onnx.GraphProto) -> set[str]:
    """Names a GraphProto reads from enclosing scopes."""
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    defined |= {s.values.name for s in g.sparse_initializer}
    free: set[str] = set()
    for node in g.node:
        free.update(n for n in _node_reads(node) if n not in defined)
        defined.update(node.output)
    free.update(o.name for o in g.output if o.name not in defined)
    return free


def _node_reads(node: onnx.NodeProto) -> set[str]:
    reads = {n for n in node.input if n}
    for a in node.attribute:
        for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
            reads |= proto_free_names(g)
    return reads


def validate_graph(g: onnx.GraphProto, outer: set[str], opsets: dict[str, int]) -> None:
    """Check ops, tensor definitions and acyclicity; reorder ``g.node`` topologically."""
    if len(g.output) == 0 and not outer:
        raise ModelLoadError("the graph has no outputs, so there is nothing to compute")
    available = set(outer) | {i.name for i in g.input} | {t.name for t in g.initializer}
    available |= {s.values.name for s in g.sparse_initializer}
    producer: dict[str, int] = {}
    for i, node in enumerate(g.node):
        _check_node(node, i, opsets)
        for o in node.output:
            if not o:
                continue
            if o in producer:
                raise ModelLoadError(f"tensor {o!r} is produced twice, by "
                                     f"{_label(g.node[producer[o]], producer[o])} and "
                                     f"{_label(node, i)}; ONNX requires one producer per tensor")
            if o in available and o not in outer:
                raise ModelLoadError(f"{_label(node, i)} writes {o!r}, which is already a graph "
                                     "input or initializer")
            producer[o] = i
    deps: list[set[int]] = []
    for i, node in enumerate(g.node):
        d = set()
        for name in _node_reads(node):
            if name in producer:
                d.add(producer[name])
            elif name not in available:
                raise ModelLoadError(f"{_label(node, i)} reads tensor {name!r}, which no node, "
                                     "graph input or initializer defines")
        deps.append(d)
    for o in g.output:
        if o.name not in producer and o.name not in available:
            raise ModelLoadError(f"graph output {o.name!r} is not computed by any node")
    order = _toposort(g, deps)
    if order != list(range(len(g.node))):
        nodes = [g.node[i] for i in order]
        copies = [onnx.NodeProto() for _ in nodes]
        for c, n in zip(copies, nodes):
            c.CopyFrom(n)
        del g.node[:]
        g.node.extend(copies)
    scope = available | set(producer)
    for node in g.node:
        for a in node.attribute:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                validate_graph(sub, scope, opsets)


def _toposort(g: onnx.GraphProto, deps: list[set[int]]) -> list[int]:
    """Kahn's algorithm, stable (keeps the file's order where it is already valid)."""
    import heapq

    users: list[list[int]] = [[] for _ in deps]
    missing = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    ready = [i for i, m in enumerate(missing) if m == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, u)
    if len(order) < len(deps):
        stuck = [i for i, m in enumerate(missing) if m > 0]
        names = ", ".join(_label(g.node[i], i) for i in stuck[:4])
        more = f" and {len(stuck) - 4} more" if len(stuck) > 4 else ""
        raise ModelLoadError(f"the graph has a cycle: {names}{more} depend on each other")
    return order
