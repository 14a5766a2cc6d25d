"""Index arithmetic shared by the kernels: strides, broadcasting, parameter arrays."""

from __future__ import annotations

import math

import numpy as np

from engine.ops.base import Meta

#: rank of the per-dimension arrays in shader parameters (two vec4<i32>)
MAX_RANK = 8


def contiguous_strides(shape) -> list[int]:
    """Row-major element strides of ``shape``."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= int(d)
    return strides[::-1]


def broadcast_strides(shape, out_shape) -> list[int]:
    """Strides reading ``shape`` broadcast to ``out_shape`` (0 along broadcast dims)."""
    shape = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    strides = contiguous_strides(shape)
    return [0 if s == 1 and o != 1 else st for s, o, st in zip(shape, out_shape, strides)]


def collapse_broadcast(shape, *strides) -> tuple[list[int], list[list[int]]]:
    """``shape`` with its size-1 dims dropped and adjacent dims merged where every operand
    (``strides``, from ``broadcast_strides``) steps over both as over one dim (contiguously,
    or not at all): (sizes, per-operand strides), outermost first, at least one dim."""
    sizes: list[int] = []
    steps: list[list[int]] = [[] for _ in strides]
    for d, size in enumerate(shape):
        size = int(size)
        if size == 1:
            continue
        if sizes and all(st[-1] == s[d] * size for st, s in zip(steps, strides)):
            sizes[-1] *= size
            for st, s in zip(steps, strides):
                st[-1] = s[d]
            continue
        sizes.append(size)
        for st, s in zip(steps, strides):
            st.append(int(s[d]))
    if not sizes:
        return [1], [[0] for _ in strides]
    return sizes, steps


def arr8(values) -> list[int]:
    """A per-dimension list padded to MAX_RANK entries (the shader's two vec4<i32>)."""
    values = [int(v) for v in values]
    if len(values) > MAX_RANK:
        raise ValueError(f"rank {len(values)} exceeds {MAX_RANK}")
    return values + [1] * (MAX_RANK - len(values))


def size_of(shape) -> int:
    return int(math.prod(shape))


def attr_axis(layer, rank: int, name: str = "axis", default: int = 0) -> int:
    axis = int(layer.attr(name, default))
    return axis + rank if axis < 0 else axis


def f32_value(meta: Meta | None, default: float) -> float | None:
    """A scalar CPU-known input as float; ``default`` when the input is omitted."""
    if meta is None:
        return default
    if meta.value is None:
        return None
    return float(np.asarray(meta.value).reshape(-1)[0])


def whole16(tensor) -> bool:
    """Whether ``tensor`` is bound whole (a GpuTensor, not a byte range) with a size that is a
    multiple of 16 bytes: a vec4 array over it then reaches its last elements."""
    alloc = getattr(tensor, "alloc", None)
    return alloc is not None and alloc.size % 16 == 0


#: rows at least this long take a workgroup each where the backend's row_strategy says so
WIDE_ROW = 64


def wide_rows(ctx, length: int) -> bool:
    """Whether rows of ``length`` run one workgroup per row (GPUs) rather than one
    invocation per row (CPU adapters, or short rows)."""
    return ctx.row_strategy == "workgroup" and length >= WIDE_ROW
