"""Helpers shared by the NumPy CPU kernels: shape logic on concrete arrays, dtype codes."""

from __future__ import annotations

import numpy as np

from engine.model import Layer
from engine.ops import find_op
from engine.ops.base import Meta


def metas(inputs) -> list[Meta | None]:
    """Metadata (with values) of concrete kernel inputs."""
    return [None if x is None else Meta.of(np.asarray(x)) for x in inputs]


def infer(layer: Layer, inputs) -> list[Meta]:
    """The op's shape logic applied to concrete inputs (every value known)."""
    op = find_op(layer.op_type, layer.domain, layer.opset or 10**9)
    return op.infer(layer, metas(inputs))


def onnx_dtype(code: int) -> np.dtype:
    from engine.dtypes import onnx_dtype as _dt

    return _dt(int(code))


def same(x: np.ndarray, y) -> np.ndarray:
    """``y`` with ``x``'s dtype (NumPy promotes float16/int math on Python scalars)."""
    return np.asarray(y).astype(x.dtype, copy=False)


def axis_of(layer: Layer, rank: int, name: str = "axis", default: int = 0) -> int:
    a = int(layer.attr(name, default))
    return a + rank if a < 0 else a
