"""Shape logic of data-movement ops whose output shape depends on CPU-known values."""

from __future__ import annotations

import math

import numpy as np

from engine.model import Layer
from engine.ops.base import Meta, Op, register_op


def norm_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


@register_op
class Shape(Op):
    def infer(self, layer: Layer, inputs):
        rank = len(inputs[0].shape)
        start = layer.attr("start", 0)
        end = layer.attr("end", rank)
        start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
        dims = np.array(inputs[0].shape[start:end], dtype=np.int64)
        return [Meta(dims.shape, np.dtype(np.int64), dims)]


@register_op
class Reshape(Op):
    cpu_inputs = (1,)

    def infer(self, layer: Layer, inputs):
        x, shape = inputs
        target = [int(v) for v in shape.value]
        allowzero = layer.attr("allowzero", 0)
        if not allowzero:
            target = [x.shape[i] if v == 0 else v for i, v in enumerate(target)]
        if -1 in target:
            known = math.prod(v for v in target if v != -1)
            target[target.index(-1)] = x.size // known if known else 0
        if math.prod(target) != x.size:
            raise ValueError(f"cannot reshape {list(x.shape)} to {list(shape.value)}")
        return [Meta(tuple(target), x.dtype)]


@register_op
class Flatten(Op):
    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        rank = len(x.shape)
        axis = layer.attr("axis", 1)
        if not -rank <= axis <= rank:
            raise ValueError(f"Flatten: axis {axis} out of range for rank {rank}")
        axis = axis + rank if axis < 0 else axis
        outer = int(math.prod(x.shape[:axis]))
        return [Meta((outer, x.size // outer if outer else 0), x.dtype)]


@register_op
class Squeeze(Op):
    cpu_inputs = (1,)

    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        axes = layer.attr("axes")
        if len(inputs) > 1 and inputs[1] is not None:
            axes = [int(a) for a in np.asarray(inputs[1].value).reshape(-1)]
        rank = len(x.shape)
        if axes is None:
            axes = [i for i, d in enumerate(x.shape) if d == 1]
        axes = {norm_axis(a, rank) for a in axes}
        return [Meta(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)]


@register_op
class Unsqueeze(Op):
    cpu_inputs = (1,)

    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        axes = layer.attr("axes")
        if len(inputs) > 1 and inputs[1] is not None:
            axes = [int(a) for a in np.asarray(inputs[1].value).reshape(-1)]
        rank = len(x.shape) + len(axes)
        axes = sorted(norm_axis(a, rank) for a in axes)
        shape = list(x.shape)
        for a in axes:
            shape.insert(a, 1)
        return [Meta(tuple(shape), x.dtype)]


@register_op
class Concat(Op):
    def infer(self, layer: Layer, inputs):
        present = [m for m in inputs if m is not None]
        axis = norm_axis(layer.attr("axis"), len(present[0].shape))
        shape = list(present[0].shape)
        shape[axis] = sum(m.shape[axis] for m in present)
        return [Meta(tuple(shape), present[0].dtype)]


@register_op
class Transpose(Op):
    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        perm = layer.attr("perm") or list(range(len(x.shape)))[::-1]
        return [Meta(tuple(x.shape[p] for p in perm), x.dtype)]


@register_op
class Expand(Op):
    cpu_inputs = (1,)

    def infer(self, layer: Layer, inputs):
        x, shape = inputs
        return [Meta(tuple(np.broadcast_shapes(x.shape, tuple(int(v) for v in shape.value))),
                     x.dtype)]


@register_op
class ConstantOfShape(Op):
    cpu_inputs = (0,)

    def infer(self, layer: Layer, inputs):
        value = layer.attr("value")
        dtype = value.dtype if value is not None else np.dtype(np.float32)
        return [Meta(tuple(int(v) for v in inputs[0].value), dtype)]


@register_op
class Tile(Op):
    cpu_inputs = (1,)

    def infer(self, layer: Layer, inputs):
        x, reps = inputs
        return [Meta(tuple(d * int(r) for d, r in zip(x.shape, reps.value)), x.dtype)]
