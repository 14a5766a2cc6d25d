"""Reductions, arg-reductions, TopK, cumulative ops and Hardmax (NumPy).

Axes are resolved by the shared shape logic (``engine.ops.reduce``)."""

from __future__ import annotations

import math

import numpy as np

from engine.backends.cpu.kernel_util import axis_of, metas, same
from engine.backends.cpu.registry import cpu_kernel
from engine.ops.reduce import REDUCE_OPS, reduce_axes, softmax_axis, topk_params


def _identity(x: np.ndarray, low: bool) -> object:
    """The value an empty max (low=True) or min reduction yields."""
    if x.dtype.kind == "f" or x.dtype.kind == "V":  # "V": ml_dtypes floats (bfloat16, ...)
        return -np.inf if low else np.inf
    if x.dtype.kind == "b":
        return not low
    info = np.iinfo(x.dtype)
    return info.min if low else info.max


def _logsumexp(x, axes, keep):
    x = x.astype(np.float64)
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=axes, keepdims=keep))
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return s if keep else np.squeeze(s, axis=axes)


_REDUCERS = {
    "ReduceSum": lambda x, a, k: np.sum(x, axis=a, keepdims=k, dtype=x.dtype),
    "ReduceMean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: np.max(x, axis=a, keepdims=k, initial=_identity(x, True)),
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k, initial=_identity(x, False)),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k, dtype=x.dtype),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k, dtype=x.dtype),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(np.square(x.astype(np.float64)), axis=a,
                                               keepdims=k)),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x.astype(np.float64), axis=a, keepdims=k)),
    "ReduceLogSumExp": _logsumexp,
    "ReduceSumSquare": lambda x, a, k: np.sum(np.square(x), axis=a, keepdims=k, dtype=x.dtype),
}


def _reduce_kernel(name):
    fn = _REDUCERS[name]

    def kernel(layer, inputs):
        x = inputs[0]
        axes = reduce_axes(layer, metas(inputs), x.ndim)
        if axes is None:
            return x
        keep = bool(layer.attr("keepdims", 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            return same(x, fn(x, axes, keep))

    kernel.__name__ = name
    return kernel


for _name in REDUCE_OPS:
    cpu_kernel(_name)(_reduce_kernel(_name))


def _arg(fn):
    def kernel(layer, inputs):
        x = inputs[0]
        axis = axis_of(layer, x.ndim)
        if layer.attr("select_last_index", 0):
            idx = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis)
        else:
            idx = fn(x, axis=axis)
        if layer.attr("keepdims", 1):
            idx = np.expand_dims(idx, axis)
        return idx.astype(np.int64)

    return kernel


cpu_kernel("ArgMax")(_arg(np.argmax))
cpu_kernel("ArgMin")(_arg(np.argmin))


@cpu_kernel("TopK")
def TopK(layer, inputs):
    x = inputs[0]
    k, axis = topk_params(layer, metas(inputs))
    if layer.attr("largest", 1):
        # descending by value, ties by ascending index: stable sort of the flipped axis, reversed
        n = x.shape[axis]
        order = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
        order = n - 1 - order
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


def _cumulative(fn):
    def kernel(layer, inputs):
        x, axis = inputs
        axis = int(np.asarray(axis).reshape(-1)[0])
        axis = axis + x.ndim if axis < 0 else axis
        y = np.flip(x, axis) if layer.attr("reverse", 0) else x
        out = fn(y, axis=axis, dtype=x.dtype)
        if layer.attr("exclusive", 0):
            # shift by one along the axis, filling with the operation's identity
            ident = np.ones_like if fn is np.cumprod else np.zeros_like
            first = ident(np.take(out, [0], axis=axis))
            out = np.concatenate([first, np.take(out, np.arange(out.shape[axis] - 1),
                                                 axis=axis)], axis=axis)
        return np.flip(out, axis) if layer.attr("reverse", 0) else out

    return kernel


cpu_kernel("CumSum")(_cumulative(np.cumsum))
cpu_kernel("CumProd")(_cumulative(np.cumprod))


@cpu_kernel("Hardmax")
def Hardmax(layer, inputs):
    """One-hot of the first maximum along the softmax axis (softmax's 2-D coercion before
    opset 13). Softmax and LogSoftmax are the Numba kernels in kernels_norm.py."""
    x = inputs[0]
    axis = softmax_axis(layer, x.ndim)
    shape = x.shape
    if (layer.opset or 13) < 13:
        x = x.reshape(math.prod(shape[:axis]), -1)
        axis = 1
    out = np.zeros_like(x)
    np.put_along_axis(out, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
    return out.reshape(shape)
