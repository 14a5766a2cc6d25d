"""The runtime model: a flat list of layers in topological order, plus constants.

Everything here is plain Python and NumPy; the ONNX protobuf objects never leave
``onnx_import``. Subgraphs (If/Loop/Scan bodies) are ``Graph`` objects stored as
layer attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

Dim = int | str | None
Shape = tuple[Dim, ...]


@dataclass
class TensorSpec:
    """Name, shape and dtype of a tensor. Shape items are ints, symbolic names, or None."""

    name: str
    shape: Shape | None
    dtype: np.dtype | None

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def shape_str(self) -> str:
        if self.shape is None:
            return "?"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"

    def __str__(self) -> str:
        dt = "?" if self.dtype is None else np.dtype(self.dtype).name
        return f"{self.name}: {dt}{self.shape_str()}"


@dataclass
class Layer:
    """One node of the graph. ``inputs`` may contain '' for an omitted optional input."""

    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]
    attributes: dict[str, Any] = field(default_factory=dict)
    domain: str = ""
    #: opset version of ``domain`` that the model imports; selects versioned kernels.
    opset: int = 0
    #: names a subgraph attribute reads from enclosing scopes; the worker passes their values
    #: after the regular inputs, so kernels of If/Loop/Scan see them as ``inputs[len(inputs):]``
    captures: list[str] = field(default_factory=list)

    def all_inputs(self) -> list[str]:
        """Regular inputs followed by captured outer-scope names (what the layer depends on)."""
        return self.inputs + self.captures

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attributes.get(name, default)

    def __repr__(self) -> str:
        return f"Layer({self.name!r}, {self.op_type}, in={self.inputs}, out={self.outputs})"


@dataclass
class Graph:
    """A graph: layers in topological order, its inputs/outputs and constant tensors."""

    layers: list[Layer]
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    #: statically inferred specs of intermediate tensors (shape items may be symbolic)
    value_info: dict[str, TensorSpec] = field(default_factory=dict)
    name: str = ""
    #: names that a subgraph reads from its enclosing scope
    outer_names: set[str] = field(default_factory=set)

    def spec(self, name: str) -> TensorSpec | None:
        for s in self.inputs:
            if s.name == name:
                return s
        if name in self.constants:
            c = self.constants[name]
            return TensorSpec(name, tuple(c.shape), c.dtype) if hasattr(c, "shape") else None
        return self.value_info.get(name)

    def producers(self) -> dict[str, Layer]:
        return {o: layer for layer in self.layers for o in layer.outputs if o}

    def consumers(self) -> dict[str, list[Layer]]:
        out: dict[str, list[Layer]] = {}
        for layer in self.layers:
            for i in layer.inputs:
                if i:
                    out.setdefault(i, []).append(layer)
        return out


@dataclass
class Model(Graph):
    """A loaded model. ``cpu_forced`` holds names of tensors that must be computed on the CPU."""

    opsets: dict[str, int] = field(default_factory=dict)
    cpu_forced: set[str] = field(default_factory=set)
    producer: str = ""
    ir_version: int = 0
    path: str | None = None
    #: the file's metadata_props (key -> value), so tools need not re-parse the file
    metadata: dict[str, str] = field(default_factory=dict)
    #: what the import passes did, for ``inspect`` (e.g. {"folded": 12, "fused": 3})
    pass_stats: dict[str, int] = field(default_factory=dict)
    #: tensors that fusion removed -> the name of the fused layer that absorbed them
    fused_away: dict[str, str] = field(default_factory=dict)

    @property
    def opset(self) -> int:
        return self.opsets.get("", self.opsets.get("ai.onnx", 0))


def subgraph_captures(attrs: dict[str, Any]) -> set[str]:
    """Outer-scope names read by the subgraph attributes of one layer."""
    names: set[str] = set()
    for v in attrs.values():
        for sub in (v if isinstance(v, list) else [v]):
            if isinstance(sub, Graph):
                names |= sub.outer_names
    return names


def free_names(graph: Graph) -> set[str]:
    """Names ``graph`` reads without defining them (its outer-scope references)."""
    defined = set(graph.constants) | {i.name for i in graph.inputs}
    free: set[str] = set()
    for layer in graph.layers:
        free.update(n for n in layer.all_inputs() if n and n not in defined)
        defined.update(o for o in layer.outputs if o)
    free.update(o.name for o in graph.outputs if o.name not in defined)
    return free
