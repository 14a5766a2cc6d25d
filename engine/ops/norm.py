"""Shape logic of normalisations: BatchNormalization, InstanceNormalization,
LayerNormalization, GroupNormalization, RMSNormalization, LRN, LpNormalization, MVN."""

from __future__ import annotations

import numpy as np

from engine.model import Layer
from engine.ops.base import Meta, Op, register_op
from engine.ops.shape_ops import norm_axis


@register_op
class BatchNormalization(Op):
    """Y like X; the optional statistics outputs (training mode, or the old 5-output form)
    have the shape and dtype of the ``mean`` input."""

    def infer(self, layer: Layer, inputs):
        x, mean = inputs[0], inputs[3]
        out = [Meta(x.shape, x.dtype)]
        out += [Meta(mean.shape, mean.dtype) for _ in layer.outputs[1:]]
        return out


class _SameShape(Op):
    def infer(self, layer: Layer, inputs):
        return [Meta(inputs[0].shape, inputs[0].dtype)]


for _name in ("InstanceNormalization", "LRN", "LpNormalization", "MeanVarianceNormalization",
              "GroupNormalization"):
    register_op(type(_name, (_SameShape,), {"op_type": _name}))


def stats_shape(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    """Shape of LayerNormalization's Mean/InvStdDev: the normalised axes kept as 1."""
    return tuple(shape[:axis]) + (1,) * (len(shape) - axis)


def _stash_dtype(layer: Layer, x_dtype: np.dtype) -> np.dtype:
    from engine.dtypes import onnx_dtype

    stash = layer.attr("stash_type", 1)
    return onnx_dtype(stash) if stash else x_dtype


@register_op
class LayerNormalization(Op):
    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        axis = norm_axis(layer.attr("axis", -1), len(x.shape))
        out = [Meta(x.shape, x.dtype)]
        stat = Meta(stats_shape(x.shape, axis), _stash_dtype(layer, x.dtype))
        out += [stat for _ in layer.outputs[1:]]
        return out


@register_op
class RMSNormalization(_SameShape):
    pass
