"""MatMul epilogues on the GPU backends: a scale, a bias Add and an activation after a
MatMul, recorded in the MatMul's own dispatch (GPU_COMPUTE) or pass (GPU_PIXEL).

Exporters write a linear layer on 3-D activations as MatMul, then Add of a bias vector, often
then GELU (the import-time fusion turns only 2-D ones into Gemm), and attention scores as
MatMul then Div by sqrt(head size): each of those layers was a dispatch re-reading and
re-writing the whole product. The chains are found once per model (``find``); when the
MatMul is recorded, ``EpilogueTable.take`` decides how much of its chain this run absorbs
(each absorbed layer placed on this backend and supported by it with these inputs, no
tensor between them captured). The absorbed layers then record no work: their output is a
view of the MatMul's, and their time is in the MatMul's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.backends.base import BackendType
from engine.model import Layer
from engine.ops.activations import UNARY_OPS, layer_params, shader_params
from engine.ops.base import Meta

_ONNX = ("", "ai.onnx")
SCALE, BIAS, ACT = "scale", "bias", "act"


@dataclass(frozen=True)
class Step:
    """One layer of a chain: ``kind`` SCALE (Mul or Div of the product by the scalar constant
    ``const``), BIAS (Add of the row-vector constant ``const``: every dim but the last is 1)
    or ACT (a unary activation, ``const`` empty)."""

    kind: str
    layer: Layer
    const: str = ""


def _activation_ok(layer: Layer) -> bool:
    rec = UNARY_OPS.get(layer.op_type)
    # matmul.wgsl's act() passes two parameters; Clip's bounds come from inputs
    return (rec is not None and rec.shader and len(rec.attrs) <= 2 and layer.op_type != "Clip"
            and layer.domain in _ONNX and len(layer.inputs) == 1
            and rec.unsupported(layer) is None)


def _other(layer: Layer, y: str, ops: tuple[str, ...], constants) -> str | None:
    """The constant operand of binary ``layer`` (one of ``ops``) applied to ``y``, or None.
    A Div must divide ``y`` (y / c), not be divided by it."""
    if layer.op_type not in ops or layer.domain not in _ONNX or len(layer.inputs) != 2 or \
            layer.inputs.count(y) != 1 or (layer.op_type == "Div" and layer.inputs[0] != y):
        return None
    name = layer.inputs[1] if layer.inputs[0] == y else layer.inputs[0]
    value = constants.get(name)
    if not isinstance(value, np.ndarray) or value.dtype != np.float32:
        return None
    return name


def sole_readers(model):
    """``sole_user(name)``: the one layer of ``model`` reading tensor ``name``, or None when
    several or none read it or it is a model output (a chain may absorb it only then)."""
    users: dict[str, list[Layer]] = {}
    for layer in model.layers:
        for name in set(layer.all_inputs()):
            if name:
                users.setdefault(name, []).append(layer)
    outputs = {o.name for o in model.outputs}

    def sole_user(name: str) -> Layer | None:
        found = users.get(name, [])
        return found[0] if len(found) == 1 and name not in outputs else None

    return sole_user


def find(model) -> dict[int, list[Step]]:
    """The epilogue chain of each MatMul of ``model`` that has one, by ``id`` of the MatMul:
    an optional scale, an optional bias, an optional activation, in that order."""
    constants = model.constants
    sole_user = sole_readers(model)

    chains: dict[int, list[Step]] = {}
    for layer in model.layers:
        if layer.op_type != "MatMul" or layer.domain not in _ONNX or len(layer.outputs) != 1:
            continue
        y, steps = layer.outputs[0], []
        nxt = sole_user(y)
        if nxt is not None:
            const = _other(nxt, y, ("Mul", "Div"), constants)
            if const is not None and constants[const].size == 1:
                steps.append(Step(SCALE, nxt, const))
                y, nxt = nxt.outputs[0], sole_user(nxt.outputs[0])
        if nxt is not None:
            const = _other(nxt, y, ("Add",), constants)
            value = constants.get(const) if const else None
            if value is not None and value.ndim and all(d == 1 for d in value.shape[:-1]):
                steps.append(Step(BIAS, nxt, const))
                y, nxt = nxt.outputs[0], sole_user(nxt.outputs[0])
        if nxt is not None and nxt.inputs[0] == y and _activation_ok(nxt):
            steps.append(Step(ACT, nxt))
        if steps:
            chains[id(layer)] = steps
    return chains


@dataclass
class Taken:
    """What a MatMul records of its chain: ``alpha`` scales the product, ``bias`` names the
    constant added to it (or None), ``act`` is the activation layer after them (or None)."""

    alpha: float = 1.0
    bias: str | None = None
    act: Layer | None = None

    def activation(self) -> tuple[str, tuple[float, float, float]]:
        """(op name, shader parameters) of the activation, for matmul.wgsl."""
        if self.act is None:
            return "Identity", (0.0, 0.0, 0.0)
        return self.act.op_type, shader_params(layer_params(self.act))


class EpilogueTable:
    """A backend's epilogue chains for its model, and the layers the run being recorded has
    absorbed so far."""

    def __init__(self):
        self._model = None
        self._chains: dict[int, list[Step]] = {}
        #: id(absorbed layer) -> index of its input that is the MatMul's (scaled...) product
        self.absorbed: dict[int, int] = {}
        #: where each layer of the run being recorded runs, and the tensors it captures
        self.placement: dict | None = None
        self.keep: set[str] = set()

    def use_model(self, model) -> None:
        if model is not self._model:
            self._model, self._chains = model, find(model)

    def begin_run(self, placement, keep) -> None:
        self.absorbed.clear()
        self.placement, self.keep = placement, keep

    def take(self, backend, layer: Layer, y_meta: Meta) -> Taken | None:
        """What to record with ``layer`` (a MatMul whose product has ``y_meta``), its layers
        marked absorbed; None: record the MatMul alone."""
        chain = self._chains.get(id(layer))
        if chain is None or self.placement is None or y_meta.dtype != np.float32:
            return None
        taken, absorbed, y = Taken(), [], layer.outputs[0]
        N = y_meta.shape[-1] if y_meta.shape else 0
        for step in chain:
            value = backend._constants.get(step.const) if step.const else None
            if step.const and value is None:
                break
            if step.kind == BIAS and (value.shape[-1] not in (1, N) or
                                      value.ndim > len(y_meta.shape)):
                break
            metas = [y_meta] if value is None else \
                [y_meta, Meta.of(value)] if step.layer.inputs[0] == y else [Meta.of(value), y_meta]
            place = self.placement.get(step.layer.name)
            if place is None or place.backend is BackendType.CPU or y in self.keep or \
                    backend.supports(step.layer, metas) is not None:
                break
            if step.kind == SCALE:
                c = float(value.reshape(-1)[0])
                if step.layer.op_type == "Div" and c == 0.0:
                    break  # (x / 0 is inf or NaN; 1 / 0 as a factor is not the same)
                taken.alpha = c if step.layer.op_type == "Mul" else 1.0 / c
            elif step.kind == BIAS:
                taken.bias = step.const
            else:
                taken.act = step.layer
            absorbed.append((step.layer, step.layer.inputs.index(y)))
            y = step.layer.outputs[0]
        if not absorbed:
            return None
        for step_layer, index in absorbed:
            self.absorbed[id(step_layer)] = index
        return taken
