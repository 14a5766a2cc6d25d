"""The CPU backend: handles are NumPy arrays; kernels are Numba or NumPy code."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.backends.base import Backend, BackendType
from engine.backends.cpu.interpreter import run_layer
from engine.backends.cpu.registry import KERNELS
from engine.model import Layer
from engine.ops.base import Meta


class CpuBackend(Backend):
    type = BackendType.CPU
    kernels = KERNELS
    host_memory = True

    def upload(self, array: np.ndarray) -> Any:
        return array

    def download(self, handle: Any, meta: Meta) -> np.ndarray:
        return handle

    def free(self, handle: Any) -> None:
        pass

    def prepare(self, model, placement, progress=None) -> None:
        """Load (or compile) the Numba kernels the model's CPU layers use, with progress."""
        from engine.backends.cpu.warmup import warm_up

        ops = {layer.op_type for layer in model.layers
               if placement is None or layer.name not in placement
               or placement[layer.name].backend is BackendType.CPU}
        warm_up(ops, progress)

    def run_layer(self, layer: Layer, inputs: list[Any], in_metas: list[Meta | None],
                  out_metas: list[Meta] | None = None) -> list[Any]:
        return run_layer(layer, inputs)
