"""Tensor-manipulation CPU kernels (NumPy): Split, Slice, Pad, DepthToSpace, Trilu, OneHot,
Range, EyeLike, Size, Dropout, Compress, NonZero, Unique, ReverseSequence, CenterCropPad."""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.kernel_util import axis_of, infer, metas, onnx_dtype
from engine.backends.cpu.registry import cpu_kernel
from engine.ops.tensor_ops import pad_amounts, pad_value, slice_params, split_sizes


@cpu_kernel("Split")
def Split(layer, inputs):
    """Views of ``x`` (outputs are never written in place). The slices are kept on the layer
    per input shape and split sizes: working them out (``split_sizes``, ``np.split``) took
    10 us a call, 30-45 us inside YOLO's runs, for what is a few views."""
    x = inputs[0]
    given = inputs[1] if len(inputs) > 1 else None
    key = (x.shape, None if given is None else tuple(np.asarray(given).reshape(-1).tolist()))
    known = layer.__dict__.get("_cpu_split")
    if known is None or known[0] != key:
        axis, sizes = split_sizes(layer, metas(inputs), len(layer.outputs))
        bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        lead = (slice(None),) * (axis + x.ndim if axis < 0 else axis)
        known = key, [lead + (slice(a, b),) for a, b in zip(bounds[:-1], bounds[1:])]
        layer.__dict__["_cpu_split"] = known
    return tuple(x[s] for s in known[1])


@cpu_kernel("Slice")
def Slice(layer, inputs):
    return np.ascontiguousarray(inputs[0][slice_params(layer, metas(inputs))])


@cpu_kernel("Pad")
def Pad(layer, inputs):
    x = inputs[0]
    amounts = pad_amounts(layer, metas(inputs))
    # negative amounts crop first; the rest is padding
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-a, 0)) for i, (b, a) in enumerate(amounts))
    x = x[crop]
    width = [(max(b, 0), max(a, 0)) for b, a in amounts]
    mode = layer.attr("mode", "constant")
    if mode == "constant":
        value = pad_value(layer, metas(inputs), x.dtype)
        return np.pad(x, width, mode="constant", constant_values=value)
    if mode in ("reflect", "edge", "wrap"):
        return np.pad(x, width, mode=mode)
    raise ValueError(f"Pad: unknown mode {mode!r}")


@cpu_kernel("DepthToSpace")
def DepthToSpace(layer, inputs):
    x = inputs[0]
    n, c, h, w = x.shape
    b = int(layer.attr("blocksize"))
    if layer.attr("mode", "DCR") == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(y.reshape(n, c // (b * b), h * b, w * b))


@cpu_kernel("SpaceToDepth")
def SpaceToDepth(layer, inputs):
    x = inputs[0]
    n, c, h, w = x.shape
    b = int(layer.attr("blocksize"))
    y = x.reshape(n, c, h // b, b, w // b, b)
    if layer.attr("mode", "DCR") == "CRD":  # opset 28: channel-major blocks
        y = y.transpose(0, 1, 3, 5, 2, 4)
    else:
        y = y.transpose(0, 3, 5, 1, 2, 4)
    return np.ascontiguousarray(y.reshape(n, c * b * b, h // b, w // b))


@cpu_kernel("Trilu")
def Trilu(layer, inputs):
    x = inputs[0]
    k = int(np.asarray(inputs[1]).reshape(-1)[0]) if len(inputs) > 1 and inputs[1] is not None \
        else 0
    return np.triu(x, k) if layer.attr("upper", 1) else np.tril(x, k)


@cpu_kernel("OneHot")
def OneHot(layer, inputs):
    idx, depth, values = inputs
    d = int(np.asarray(depth).reshape(-1)[0])
    idx = np.asarray(idx).astype(np.int64)
    idx = np.where(idx < 0, idx + d, idx)
    axis = axis_of(layer, idx.ndim + 1, default=-1)
    hot = np.expand_dims(idx, axis) == np.arange(d).reshape(
        [d if i == axis else 1 for i in range(idx.ndim + 1)])
    off, on = values.reshape(-1)[:2]
    return np.where(hot, on, off).astype(values.dtype)


@cpu_kernel("Range")
def Range(layer, inputs):
    start, limit, delta = (np.asarray(v).reshape(()) for v in inputs)
    n = infer(layer, inputs)[0].shape[0]
    return (start + np.arange(n, dtype=np.float64 if start.dtype.kind == "f" else np.int64)
            * delta).astype(start.dtype)


@cpu_kernel("EyeLike")
def EyeLike(layer, inputs):
    x = inputs[0]
    dt = layer.attr("dtype")
    dtype = x.dtype if dt is None else onnx_dtype(dt)
    return np.eye(x.shape[0], x.shape[1], k=int(layer.attr("k", 0)), dtype=dtype)


@cpu_kernel("Size")
def Size(layer, inputs):
    return np.array(np.asarray(inputs[0]).size, dtype=np.int64)


def _dropout(layer, inputs, ratio, training, seed):
    x = inputs[0]
    want_mask = len(layer.outputs) > 1 and bool(layer.outputs[1])
    mask_dtype = bool if (layer.opset or 12) >= 10 else x.dtype
    if not training or ratio == 0:
        mask = np.ones(x.shape, dtype=mask_dtype)
        return (x, mask) if want_mask else x
    # a seeded Mersenne Twister, so a given seed gives the same mask as other NumPy tools
    rng = np.random.RandomState(seed)
    keep = rng.uniform(0, 1.0, x.shape) >= ratio
    y = (x * keep / (1.0 - ratio)).astype(x.dtype)
    return (y, keep.astype(mask_dtype)) if want_mask else y


@cpu_kernel("Dropout", since=1)
def Dropout_1(layer, inputs):
    return _dropout(layer, inputs, 0.0, False, None)


@cpu_kernel("Dropout", since=12)
def Dropout_12(layer, inputs):
    ratio = float(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else 0.5
    training = bool(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else False
    return _dropout(layer, inputs, ratio, training, layer.attr("seed"))


@cpu_kernel("Compress")
def Compress(layer, inputs):
    x, cond = inputs
    axis = layer.attr("axis")
    return np.compress(np.asarray(cond, bool).reshape(-1), x, axis=axis)


@cpu_kernel("NonZero")
def NonZero(layer, inputs):
    return np.array(np.nonzero(inputs[0]), dtype=np.int64).reshape(inputs[0].ndim, -1)


@cpu_kernel("Unique")
def Unique(layer, inputs):
    x = inputs[0]
    axis = layer.attr("axis")
    if axis is not None:
        axis = axis + x.ndim if axis < 0 else axis
    flat = x.reshape(-1) if axis is None else np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
    keys = [tuple(r) for r in flat] if flat.ndim == 2 else list(flat)
    first: dict = {}
    inverse = np.empty(len(keys), np.int64)
    counts: list[int] = []
    order: list[int] = []
    for i, k in enumerate(keys):
        j = first.get(k)
        if j is None:
            j = first[k] = len(order)
            order.append(i)
            counts.append(0)
        counts[j] += 1
        inverse[i] = j
    order_arr = np.array(order, np.int64)
    if layer.attr("sorted", 1):
        ranks = np.lexsort(np.array([keys[i] for i in order]).reshape(len(order), -1).T[::-1])
        remap = np.empty(len(order), np.int64)
        remap[ranks] = np.arange(len(order))
        order_arr, inverse = order_arr[ranks], remap[inverse]
        counts = [counts[r] for r in ranks]
    if axis is None:
        y = flat[order_arr]
    else:
        y = np.take(x, order_arr, axis=axis)
    return y, order_arr, inverse, np.array(counts, np.int64)


@cpu_kernel("ReverseSequence")
def ReverseSequence(layer, inputs):
    x, lens = inputs
    b_axis, t_axis = layer.attr("batch_axis", 1), layer.attr("time_axis", 0)
    y = x.copy()
    for b, n in enumerate(np.asarray(lens).reshape(-1)):
        n = int(n)
        src = [slice(None)] * x.ndim
        src[b_axis], src[t_axis] = b, slice(0, n)
        dst = list(src)
        y[tuple(dst)] = np.flip(x[tuple(src)], axis=t_axis - (t_axis > b_axis))
    return y


@cpu_kernel("CenterCropPad")
def CenterCropPad(layer, inputs):
    x, shape = inputs
    axes = layer.attr("axes") or list(range(x.ndim))
    axes = [a + x.ndim if a < 0 else a for a in axes]
    for a, target in zip(axes, np.asarray(shape).reshape(-1)):
        target, d = int(target), x.shape[a]
        if target < d:  # crop: centre, extra element removed from the end
            start = (d - target) // 2
            x = np.take(x, np.arange(start, start + target), axis=a)
        elif target > d:  # pad with zeros: centre, extra element added at the end
            before = (target - d) // 2
            width = [(0, 0)] * x.ndim
            width[a] = (before, target - d - before)
            x = np.pad(x, width)
    return x
