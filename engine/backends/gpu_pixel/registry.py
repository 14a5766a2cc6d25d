"""GPU_PIXEL's kernel table and the checks its kernels share (importable without an adapter).

A kernel is ``fn(backend, layer, inputs, in_metas, out_metas) -> list[PixelTensor]``;
it records render passes through ``backend.run``. Its check declines (with the reason
shown in the placement) whatever it cannot do, so that layer falls back to the CPU.
"""

from __future__ import annotations

import numpy as np

from engine.backends.base import KernelTable, SupportCheck
from engine.backends.gpu_pixel.layout import MAX_RANK
from engine.model import Layer
from engine.ops.base import Meta

KERNELS = KernelTable("GPU_PIXEL")


def float_reason(metas: list[Meta | None], indices) -> str | None:
    """Why the inputs at ``indices`` cannot live in textures (None if they can or are unknown)."""
    for i in indices:
        m = metas[i] if i < len(metas) else None
        if m is None:
            continue
        if m.dtype != np.float32:
            return f"input {i} is {np.dtype(m.dtype).name}; textures hold float32 only"
        if len(m.shape) > MAX_RANK:
            return f"input {i} has rank {len(m.shape)} (at most {MAX_RANK})"
        if all(isinstance(d, int) for d in m.shape) and m.size == 0:
            return f"input {i} is empty"  # (symbolic dims are decided when scheduled)
    return None


def value_reason(metas: list[Meta | None], i: int, what: str) -> str | None:
    """Why input ``i`` (a parameter such as axes or pads) is not usable: unknown on the CPU."""
    m = metas[i] if i < len(metas) else None
    if m is not None and m.value is None:
        return f"{what} is computed on the GPU; it must be known on the CPU"
    return None


def outputs_used(layer: Layer) -> int:
    return sum(1 for o in layer.outputs if o)


def pixel_kernel(op_type: str, since: int = 1, check: SupportCheck | None = None,
                 tensors: tuple[int, ...] | None = None, max_outputs: int = 1):
    """Register a kernel; ``tensors`` are the inputs read from textures (default: all)."""

    def full_check(layer: Layer, metas: list[Meta | None]) -> str | None:
        idx = range(len(layer.inputs)) if tensors is None else tensors
        idx = [i for i in idx if i < len(layer.inputs) and layer.inputs[i]]
        why = float_reason(metas, idx)
        if why is None and outputs_used(layer) > max_outputs:
            why = f"{op_type} with {outputs_used(layer)} outputs is not supported"
        if why is None and check is not None:
            why = check(layer, metas)
        return why

    return KERNELS.kernel(op_type, since=since, check=full_check)
