"""Shape logic of tensor-manipulation ops: Split, Slice, Pad, Cast, DepthToSpace, Range, ...

Helpers (``split_sizes``, ``slice_params``, ``pad_amounts``, ``range_length``) resolve
the attribute/input forms once, for the CPU kernels and the GPU backends alike.
"""

from __future__ import annotations

import math

import numpy as np

from engine.model import Layer
from engine.ops.base import Meta, Op, register_op
from engine.ops.shape_ops import norm_axis

INT64 = np.dtype(np.int64)


def _known(meta: Meta | None, what: str) -> np.ndarray | None:
    if meta is None:
        return None
    if meta.value is None:
        raise ValueError(f"{what} must be known on the CPU")
    return np.asarray(meta.value)


def _onnx_dtype(code: int) -> np.dtype:
    from engine.dtypes import onnx_dtype

    return onnx_dtype(int(code))


# -- Split ------------------------------------------------------------------------------
def split_sizes(layer: Layer, inputs: list[Meta | None], n_outputs: int) -> tuple[int, list[int]]:
    """(axis, sizes of the pieces) from the ``split`` input or attribute, ``num_outputs``
    (opset 18: equal pieces of ceil(d/n), the last one smaller) or the output count."""
    x = inputs[0]
    axis = norm_axis(layer.attr("axis", 0), len(x.shape))
    dim = x.shape[axis]
    split = _known(inputs[1], "Split: the split input") if len(inputs) > 1 else None
    if split is not None:
        sizes = [int(s) for s in split.reshape(-1)]
    elif layer.attr("split"):
        sizes = [int(s) for s in layer.attr("split")]
    else:
        n = int(layer.attr("num_outputs") or n_outputs)
        if layer.attr("num_outputs"):
            chunk = -(-dim // n)
            sizes = [min(chunk, max(dim - i * chunk, 0)) for i in range(n)]
        else:
            if dim % n:
                raise ValueError(f"Split: axis of size {dim} does not split into {n} equal parts")
            sizes = [dim // n] * n
    if sum(sizes) != dim or any(s < 0 for s in sizes):
        raise ValueError(f"Split: sizes {sizes} do not add up to the axis size {dim}")
    return axis, sizes


@register_op
class Split(Op):
    cpu_inputs = (1,)

    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        axis, sizes = split_sizes(layer, inputs, len(layer.outputs))
        return [Meta(tuple(s if i == axis else d for i, d in enumerate(x.shape)), x.dtype)
                for s in sizes]


# -- Slice ------------------------------------------------------------------------------
def slice_params(layer: Layer, inputs: list[Meta | None]) -> tuple[slice, ...]:
    """One Python ``slice`` per input axis (ONNX Slice clamps exactly like NumPy slicing)."""
    x = inputs[0]
    rank = len(x.shape)
    if len(inputs) > 1:  # opset 10+: starts, ends, axes, steps are inputs
        starts = _known(inputs[1], "Slice: starts").reshape(-1)
        ends = _known(inputs[2], "Slice: ends").reshape(-1)
        axes = _known(inputs[3] if len(inputs) > 3 else None, "Slice: axes")
        steps = _known(inputs[4] if len(inputs) > 4 else None, "Slice: steps")
    else:
        starts, ends = layer.attr("starts"), layer.attr("ends")
        axes, steps = layer.attr("axes"), None
    axes = list(range(len(starts))) if axes is None else [int(a) for a in np.ravel(axes)]
    steps = [1] * len(starts) if steps is None else [int(s) for s in np.ravel(steps)]
    out = [slice(None)] * rank
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st == 0:
            raise ValueError("Slice: a step of 0 is not allowed")
        # clamp huge int64 sentinels so Python slicing stays exact
        s, e = (int(max(min(int(v), 2**62), -(2**62))) for v in (s, e))
        out[norm_axis(a, rank)] = slice(s, e, st)
    return tuple(out)


def _sliced_shape(shape, slices) -> tuple[int, ...]:
    return tuple(len(range(*sl.indices(d))) for d, sl in zip(shape, slices))


@register_op
class Slice(Op):
    """Opset 1: starts/ends/axes are attributes."""

    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        return [Meta(_sliced_shape(x.shape, slice_params(layer, inputs)), x.dtype)]


@register_op
class Slice_10(Slice):
    cpu_inputs = (1, 2, 3, 4)


# -- Pad --------------------------------------------------------------------------------
def pad_amounts(layer: Layer, inputs: list[Meta | None]) -> list[tuple[int, int]]:
    """(before, after) per axis; negative amounts crop."""
    x = inputs[0]
    rank = len(x.shape)
    if len(inputs) > 1 and inputs[1] is not None:
        pads = [int(p) for p in _known(inputs[1], "Pad: pads").reshape(-1)]
    else:
        pads = list(layer.attr("pads", layer.attr("paddings")) or [])
    axes_in = _known(inputs[3], "Pad: axes") if len(inputs) > 3 else None
    axes = (list(range(rank)) if axes_in is None
            else [norm_axis(int(a), rank) for a in axes_in.reshape(-1)])
    if len(pads) != 2 * len(axes):
        raise ValueError(f"Pad: expected {2 * len(axes)} pad values, got {len(pads)}")
    amounts = [(0, 0)] * rank
    for i, a in enumerate(axes):
        amounts[a] = (pads[i], pads[i + len(axes)])
    return amounts


def pad_value(layer: Layer, inputs: list[Meta | None], dtype: np.dtype):
    """The constant fill value of Pad (attribute ``value`` before opset 11)."""
    v = _known(inputs[2], "Pad: constant_value") if len(inputs) > 2 else None
    if v is not None and v.size:
        return v.reshape(-1)[0]
    return np.asarray(layer.attr("value", 0)).astype(dtype) if dtype.kind != "O" else ""


@register_op
class Pad(Op):
    """Opset 1/2: pads are an attribute."""

    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        amounts = pad_amounts(layer, inputs)
        return [Meta(tuple(d + b + a for d, (b, a) in zip(x.shape, amounts)), x.dtype)]


@register_op
class Pad_11(Pad):
    cpu_inputs = (1, 2, 3)


# -- dtype ops --------------------------------------------------------------------------
@register_op
class Cast(Op):
    def infer(self, layer: Layer, inputs):
        return [Meta(inputs[0].shape, _onnx_dtype(layer.attr("to")))]


@register_op
class BitCast(Cast):
    pass


@register_op
class CastLike(Op):
    def infer(self, layer: Layer, inputs):
        return [Meta(inputs[0].shape, inputs[1].dtype)]


@register_op
class Size(Op):
    def infer(self, layer: Layer, inputs):
        n = np.array(inputs[0].size, dtype=np.int64)
        return [Meta((), INT64, n)]


# -- rearrangements ---------------------------------------------------------------------
@register_op
class DepthToSpace(Op):
    def infer(self, layer: Layer, inputs):
        n, c, h, w = inputs[0].shape
        b = int(layer.attr("blocksize"))
        if c % (b * b):
            raise ValueError(f"DepthToSpace: {c} channels do not divide by blocksize² = {b * b}")
        return [Meta((n, c // (b * b), h * b, w * b), inputs[0].dtype)]


@register_op
class SpaceToDepth(Op):
    def infer(self, layer: Layer, inputs):
        n, c, h, w = inputs[0].shape
        b = int(layer.attr("blocksize"))
        if h % b or w % b:
            raise ValueError(f"SpaceToDepth: {h}x{w} does not divide by blocksize {b}")
        return [Meta((n, c * b * b, h // b, w // b), inputs[0].dtype)]


@register_op
class Trilu(Op):
    cpu_inputs = (1,)

    def infer(self, layer: Layer, inputs):
        return [Meta(inputs[0].shape, inputs[0].dtype)]


@register_op
class OneHot(Op):
    cpu_inputs = (1, 2)

    def infer(self, layer: Layer, inputs):
        idx, depth, values = inputs
        d = int(_known(depth, "OneHot: depth").reshape(-1)[0])
        rank = len(idx.shape) + 1
        axis = norm_axis(layer.attr("axis", -1), rank)
        shape = list(idx.shape)
        shape.insert(axis, d)
        return [Meta(tuple(shape), values.dtype)]


def range_length(start, limit, delta) -> int:
    """Number of elements of Range: max(ceil((limit - start) / delta), 0)."""
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in (start, limit, delta))
    if delta == 0:
        raise ValueError("Range: delta must not be 0")
    return max(int(math.ceil((float(limit) - float(start)) / float(delta))), 0)


@register_op
class Range(Op):
    cpu_inputs = (0, 1, 2)

    def infer(self, layer: Layer, inputs):
        vals = [_known(m, "Range: start/limit/delta") for m in inputs]
        n = range_length(*vals)
        return [Meta((n,), inputs[0].dtype)]


@register_op
class EyeLike(Op):
    def infer(self, layer: Layer, inputs):
        dt = layer.attr("dtype")
        return [Meta(inputs[0].shape, inputs[0].dtype if dt is None else _onnx_dtype(dt))]


# -- Dropout ----------------------------------------------------------------------------
@register_op
class Dropout(Op):
    """Output like the input; the optional mask has the input's dtype before opset 10."""

    mask_dtype: np.dtype | None = None

    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        out = [Meta(x.shape, x.dtype)]
        if len(layer.outputs) > 1 and layer.outputs[1]:
            out.append(Meta(x.shape, self.mask_dtype or x.dtype))
        return out


@register_op
class Dropout_10(Dropout):
    mask_dtype = np.dtype(bool)


@register_op
class Dropout_12(Dropout_10):
    cpu_inputs = (1, 2)


@register_op
class QuantizeLinear(Op):
    """Output like the input, in the zero point's (or ``output_dtype``'s) type."""

    def infer(self, layer: Layer, inputs):
        code = layer.attr("output_dtype", 0)
        if code:
            dtype = _onnx_dtype(code)
        elif len(inputs) > 2 and inputs[2] is not None:
            dtype = inputs[2].dtype
        else:
            dtype = np.dtype(np.uint8)
        return [Meta(inputs[0].shape, dtype)]


@register_op
class DequantizeLinear(Op):
    def infer(self, layer: Layer, inputs):
        code = layer.attr("output_dtype", 0)
        return [Meta(inputs[0].shape, _onnx_dtype(code) if code else inputs[1].dtype)]
