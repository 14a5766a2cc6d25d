"""Normalisation CPU kernels of the long tail (NumPy): InstanceNormalization,
GroupNormalization, RMSNormalization, MeanVarianceNormalization, LpNormalization.
(BatchNormalization, LayerNormalization and LRN are the Numba kernels in kernels_norm.)"""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.kernel_util import axis_of, onnx_dtype
from engine.backends.cpu.registry import cpu_kernel


def _stash(layer, x: np.ndarray) -> np.ndarray:
    """``x`` in the stage-one precision (``stash_type``, float32 by default), at least float32."""
    code = layer.attr("stash_type", 1)
    dt = onnx_dtype(code) if code else x.dtype
    return x.astype(np.promote_types(dt, np.float32) if dt.kind == "f" else np.float32)


def _channel(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (ndim - 2))


@cpu_kernel("InstanceNormalization")
def InstanceNormalization(layer, inputs):
    x, scale, bias = inputs
    xs = x.astype(np.float64)
    axes = tuple(range(2, x.ndim))
    mean = xs.mean(axis=axes, keepdims=True)
    var = xs.var(axis=axes, keepdims=True)
    y = (xs - mean) / np.sqrt(var + layer.attr("epsilon", 1e-5))
    return (y * _channel(scale, x.ndim) + _channel(bias, x.ndim)).astype(x.dtype)


@cpu_kernel("GroupNormalization", since=18)
def GroupNormalization(layer, inputs):
    x, scale, bias = inputs
    g = int(layer.attr("num_groups"))
    n, c = x.shape[:2]
    xs = _stash(layer, x).reshape(n, g, -1)
    mean = xs.mean(axis=2, keepdims=True)
    var = xs.var(axis=2, keepdims=True)
    normed = ((xs - mean) / np.sqrt(var + layer.attr("epsilon", 1e-5))).reshape(x.shape)
    normed = normed.astype(x.dtype)
    if (layer.opset or 21) < 21:  # opset 18: scale and bias per group
        scale, bias = np.repeat(scale, c // g), np.repeat(bias, c // g)
    return (normed * _channel(scale, x.ndim) + _channel(bias, x.ndim)).astype(x.dtype)


@cpu_kernel("RMSNormalization", since=23)
def RMSNormalization(layer, inputs):
    x, scale = inputs
    axis = axis_of(layer, x.ndim, default=-1)
    xs = _stash(layer, x)
    axes = tuple(range(axis, x.ndim))
    rms = np.sqrt(np.mean(xs * xs, axis=axes, keepdims=True) + layer.attr("epsilon", 1e-5))
    return ((xs / rms).astype(x.dtype) * scale).astype(x.dtype)


@cpu_kernel("MeanVarianceNormalization")
def MeanVarianceNormalization(layer, inputs):
    x = inputs[0]
    axes = tuple(layer.attr("axes") or (0, 2, 3))
    xs = x.astype(np.float64)
    mean = xs.mean(axis=axes, keepdims=True)
    std = np.sqrt(np.maximum((xs * xs).mean(axis=axes, keepdims=True) - mean * mean, 0))
    return ((xs - mean) / (std + 1e-9)).astype(x.dtype)


@cpu_kernel("LpNormalization")
def LpNormalization(layer, inputs):
    x = inputs[0]
    axis = axis_of(layer, x.ndim, default=-1)
    p = int(layer.attr("p", 2))
    xs = x.astype(np.float64)
    if p == 1:
        norm = np.abs(xs).sum(axis=axis, keepdims=True)
    elif p == 2:
        norm = np.sqrt((xs * xs).sum(axis=axis, keepdims=True))
    else:
        raise ValueError(f"LpNormalization: p must be 1 or 2, got {p}")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norm == 0, 0, xs / norm).astype(x.dtype)
