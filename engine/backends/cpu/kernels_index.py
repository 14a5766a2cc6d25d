"""Indexing CPU kernels (NumPy): GatherElements, GatherND, ScatterElements/Scatter,
ScatterND, TensorScatter. Negative indices count from the end, as ONNX allows."""

from __future__ import annotations

import math

import numpy as np

from engine.backends.cpu.kernel_util import axis_of
from engine.backends.cpu.registry import cpu_kernel

_REDUCE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _fix(idx: np.ndarray, dim: int) -> np.ndarray:
    idx = np.asarray(idx).astype(np.int64)
    if np.any((idx < -dim) | (idx >= dim)):
        raise IndexError(f"index out of range for an axis of size {dim}")
    return np.where(idx < 0, idx + dim, idx)


@cpu_kernel("GatherElements")
def GatherElements(layer, inputs):
    data, idx = inputs
    axis = axis_of(layer, data.ndim)
    return np.take_along_axis(data, _fix(idx, data.shape[axis]), axis=axis)


@cpu_kernel("GatherND")
def GatherND(layer, inputs):
    data, idx = inputs
    b = int(layer.attr("batch_dims", 0))
    idx = np.asarray(idx).astype(np.int64)
    k = idx.shape[-1]
    batch = data.shape[:b]
    nb = math.prod(batch)
    d = data.reshape((nb,) + data.shape[b:])
    ix = idx.reshape((nb, -1, k))
    out = []
    for i in range(nb):
        cols = tuple(_fix(ix[i, :, j], d.shape[1 + j]) for j in range(k))
        out.append(d[i][cols])
    out_shape = idx.shape[:-1] + data.shape[b + k:]
    return np.stack(out).reshape(out_shape) if out else np.zeros(out_shape, data.dtype)


def _scatter_elements(layer, inputs):
    data, idx, upd = inputs
    axis = axis_of(layer, data.ndim)
    idx = _fix(idx, data.shape[axis])
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    out = data.copy()
    reduction = layer.attr("reduction", "none")
    if reduction == "none":
        out[tuple(grid)] = upd
    else:
        _REDUCE[reduction].at(out, tuple(grid), upd)
    return out


cpu_kernel("ScatterElements")(_scatter_elements)
cpu_kernel("Scatter")(_scatter_elements)


@cpu_kernel("ScatterND")
def ScatterND(layer, inputs):
    data, idx, upd = inputs
    idx = np.asarray(idx).astype(np.int64)
    k = idx.shape[-1]
    flat_idx = idx.reshape(-1, k)
    flat_upd = upd.reshape((flat_idx.shape[0],) + data.shape[k:])
    cols = tuple(_fix(flat_idx[:, j], data.shape[j]) for j in range(k))
    out = data.copy()
    reduction = layer.attr("reduction", "none")
    if reduction == "none":
        out[cols] = flat_upd
    else:
        _REDUCE[reduction].at(out, cols, flat_upd)
    return out


@cpu_kernel("TensorScatter")
def TensorScatter(layer, inputs):
    past, update = inputs[0], inputs[1]
    write = inputs[2] if len(inputs) > 2 else None
    axis = axis_of(layer, past.ndim, default=-2)
    max_len, seq = past.shape[axis], update.shape[axis]
    out = past.copy()
    circular = layer.attr("mode", "linear") == "circular"
    for b in range(past.shape[0]):
        start = int(write[b]) if write is not None else 0
        pos = start + np.arange(seq)
        if circular:
            pos = pos % max_len
        # a view with the sequence axis first: assigning through it writes into `out`
        view = np.moveaxis(out[b], axis - 1, 0)
        view[pos] = np.moveaxis(update[b], axis - 1, 0)
    return out
