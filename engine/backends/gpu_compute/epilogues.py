"""MatMul epilogues on GPU_COMPUTE: a bias Add, and an activation after it, recorded in the
MatMul's own dispatch.

Exporters write a linear layer on 3-D activations as MatMul, then Add of a bias vector, often
then GELU (the import-time fusion turns only 2-D ones into Gemm): each of those layers was a
dispatch re-reading and re-writing the whole product. The chains are found once per model
(``find``); when the MatMul is recorded, ``EpilogueTable.take`` decides whether this run may
absorb them (each absorbed layer placed on this backend and supported by it with these
inputs, no absorbed tensor captured). The absorbed layers then record no work: their output
is a view of the MatMul's, and their time is in the MatMul's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.backends.base import BackendType
from engine.model import Layer
from engine.ops.activations import UNARY_OPS, layer_params, shader_params
from engine.ops.base import Meta

_ONNX = ("", "ai.onnx")


@dataclass(frozen=True)
class Epilogue:
    """What follows a MatMul: ``add`` with the constant ``bias`` (a row vector: every dim but
    the last is 1), then optionally the unary activation ``act``."""

    add: Layer
    bias: str
    act: Layer | None


def _activation_ok(layer: Layer) -> bool:
    rec = UNARY_OPS.get(layer.op_type)
    # matmul.wgsl's act() passes two parameters; Clip's bounds come from inputs
    return (rec is not None and rec.shader and len(rec.attrs) <= 2 and layer.op_type != "Clip"
            and layer.domain in _ONNX and rec.unsupported(layer) is None)


def find(model) -> dict[int, Epilogue]:
    """The epilogue chain of each MatMul of ``model`` that has one, by ``id`` of the MatMul."""
    users: dict[str, list[Layer]] = {}
    for layer in model.layers:
        for name in set(layer.all_inputs()):
            if name:
                users.setdefault(name, []).append(layer)
    outputs = {o.name for o in model.outputs}

    def sole_user(name: str) -> Layer | None:
        found = users.get(name, [])
        return found[0] if len(found) == 1 and name not in outputs else None

    chains: dict[int, Epilogue] = {}
    for layer in model.layers:
        if layer.op_type != "MatMul" or layer.domain not in _ONNX or len(layer.outputs) != 1:
            continue
        y = layer.outputs[0]
        add = sole_user(y)
        if add is None or add.op_type != "Add" or add.domain not in _ONNX or \
                len(add.inputs) != 2 or add.inputs.count(y) != 1:
            continue
        bias = add.inputs[1] if add.inputs[0] == y else add.inputs[0]
        value = model.constants.get(bias)
        if not isinstance(value, np.ndarray) or value.dtype != np.float32 or value.ndim == 0 \
                or any(d != 1 for d in value.shape[:-1]):
            continue
        act = sole_user(add.outputs[0])
        if act is not None and (len(act.inputs) != 1 or not _activation_ok(act)):
            act = None
        chains[id(layer)] = Epilogue(add, bias, act)
    return chains


class EpilogueTable:
    """A backend's epilogue chains for its model, and the layers the run being recorded has
    absorbed so far."""

    def __init__(self):
        self._model = None
        self._chains: dict[int, Epilogue] = {}
        #: id(absorbed layer) -> index of its input that is the MatMul's (biased) product
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

    def take(self, backend, layer: Layer, y_meta: Meta):
        """The chain to record with ``layer`` (a MatMul whose product has ``y_meta``) as
        (the bias constant's name, the activation layer or None), its layers marked
        absorbed; None: record the MatMul alone."""
        chain = self._chains.get(id(layer))
        if chain is None or self.placement is None:
            return None
        bias = backend._constants.get(chain.bias)
        N = y_meta.shape[-1] if y_meta.shape else 0
        if bias is None or bias.shape[-1] not in (1, N) or \
                bias.ndim > len(y_meta.shape) or y_meta.dtype != np.float32:
            return None
        steps = [(chain.add, [y_meta, Meta.of(bias)] if chain.add.inputs[0] == layer.outputs[0]
                  else [Meta.of(bias), y_meta])]
        if chain.act is not None:
            steps.append((chain.act, [y_meta]))
        taken = []
        for step, metas in steps:
            place = self.placement.get(step.name)
            if place is None or place.backend is BackendType.CPU or \
                    backend.supports(step, metas) is not None or \
                    any(o in self.keep for o in step.inputs if o):
                break
            taken.append(step)
        if not taken:
            return None
        for step in taken:
            self.absorbed[id(step)] = step.inputs.index(layer.outputs[0]) \
                if step is chain.add else 0
        act = taken[1] if len(taken) > 1 else None
        return chain.bias, act

    @staticmethod
    def activation(act: Layer | None) -> tuple[str, tuple[float, float, float]]:
        """(op name, shader parameters) of an absorbed activation, for matmul.wgsl."""
        if act is None:
            return "Identity", (0.0, 0.0, 0.0)
        return act.op_type, shader_params(layer_params(act))
