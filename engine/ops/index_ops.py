"""Shape logic of indexing ops: Gather, GatherElements, GatherND, Scatter*, Compress-free ones."""

from __future__ import annotations

from engine.model import Layer
from engine.ops.base import Meta, Op, register_op
from engine.ops.shape_ops import norm_axis


@register_op
class Gather(Op):
    def infer(self, layer: Layer, inputs):
        data, idx = inputs
        axis = norm_axis(layer.attr("axis", 0), len(data.shape))
        shape = data.shape[:axis] + tuple(idx.shape) + data.shape[axis + 1:]
        return [Meta(shape, data.dtype)]


@register_op
class GatherElements(Op):
    def infer(self, layer: Layer, inputs):
        data, idx = inputs
        if len(idx.shape) != len(data.shape):
            raise ValueError(f"GatherElements: indices rank {len(idx.shape)} != data rank "
                             f"{len(data.shape)}")
        return [Meta(tuple(idx.shape), data.dtype)]


@register_op
class GatherND(Op):
    def infer(self, layer: Layer, inputs):
        data, idx = inputs
        b = int(layer.attr("batch_dims", 0))
        last = idx.shape[-1]
        if b + last > len(data.shape):
            raise ValueError(f"GatherND: index depth {last} + batch_dims {b} exceeds data rank "
                             f"{len(data.shape)}")
        return [Meta(tuple(idx.shape[:-1]) + tuple(data.shape[b + last:]), data.dtype)]


class _LikeData(Op):
    def infer(self, layer: Layer, inputs):
        return [Meta(inputs[0].shape, inputs[0].dtype)]


@register_op
class ScatterElements(_LikeData):
    pass


@register_op
class Scatter(_LikeData):
    pass


@register_op
class ScatterND(_LikeData):
    pass


@register_op
class TensorScatter(_LikeData):
    pass
