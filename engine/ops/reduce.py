"""Shape logic of reductions, arg-reductions, the softmax family, CumSum and TopK.

``reduce_axes`` and ``topk_params`` resolve the attribute/input forms once; the CPU
kernels and the GPU backends call them instead of re-reading attributes.
"""

from __future__ import annotations

import numpy as np

from engine.model import Layer
from engine.ops.base import Meta, Op, register_op
from engine.ops.shape_ops import norm_axis

INT64 = np.dtype(np.int64)


def reduce_axes(layer: Layer, inputs: list[Meta | None], rank: int) -> tuple[int, ...] | None:
    """Normalised reduction axes, or None when the op is a no-op (empty axes + noop flag).

    Axes come from input 1 when present (ReduceSum-13+, others 18+), else from the
    ``axes`` attribute; missing/empty axes reduce everything unless
    ``noop_with_empty_axes`` is set.
    """
    axes = layer.attr("axes")
    if len(inputs) > 1 and inputs[1] is not None:
        if inputs[1].value is None:
            raise ValueError(f"{layer.op_type}: the axes input must be known on the CPU")
        axes = [int(a) for a in np.asarray(inputs[1].value).reshape(-1)]
    if not axes:
        if layer.attr("noop_with_empty_axes", 0):
            return None
        return tuple(range(rank))
    return tuple(sorted({norm_axis(int(a), rank) for a in axes}))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool
                  ) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


class _Reduce(Op):
    """Reduce over ``axes`` (attribute form); the output keeps the input dtype."""

    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        axes = reduce_axes(layer, inputs, len(x.shape))
        if axes is None:
            return [Meta(x.shape, x.dtype)]
        return [Meta(reduced_shape(x.shape, axes, bool(layer.attr("keepdims", 1))), x.dtype)]


class _ReduceInput(_Reduce):
    """Reduce with ``axes`` as an optional input, which must be known on the CPU."""

    cpu_inputs = (1,)


REDUCE_OPS = ("ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 "
              "ReduceLogSum ReduceLogSumExp ReduceSumSquare").split()

for _name in REDUCE_OPS:
    # ReduceSum took axes as an input from opset 13, the others from opset 18
    _since = 13 if _name == "ReduceSum" else 18
    register_op(type(_name, (_Reduce,), {"op_type": _name, "since_version": 1}))
    register_op(type(f"{_name}_{_since}", (_ReduceInput,), {"op_type": _name}))


class _ArgReduce(Op):
    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        axis = norm_axis(layer.attr("axis", 0), len(x.shape))
        return [Meta(reduced_shape(x.shape, (axis,), bool(layer.attr("keepdims", 1))), INT64)]


@register_op
class ArgMax(_ArgReduce):
    pass


@register_op
class ArgMin(_ArgReduce):
    pass


class _SameShape(Op):
    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        return [Meta(x.shape, x.dtype)]


def softmax_axis(layer: Layer, rank: int) -> int:
    """The softmax axis: before opset 13 the input is coerced to 2-D at ``axis`` (default 1)
    and normalised over everything after it; from 13 on one axis (default -1)."""
    default = -1 if (layer.opset or 13) >= 13 else 1
    return norm_axis(layer.attr("axis", default), max(rank, 1))


for _name in ("Softmax", "LogSoftmax", "Hardmax"):
    register_op(type(_name, (_SameShape,), {"op_type": _name}))


@register_op
class CumSum(_SameShape):
    cpu_inputs = (1,)


@register_op
class CumProd(_SameShape):
    cpu_inputs = (1,)


def topk_params(layer: Layer, inputs: list[Meta | None]) -> tuple[int, int]:
    """(k, axis) of TopK: k from the attribute (opset 1) or input 1 (opset 10+)."""
    x = inputs[0]
    if len(inputs) > 1 and inputs[1] is not None:
        if inputs[1].value is None:
            raise ValueError("TopK: k must be known on the CPU")
        k = int(np.asarray(inputs[1].value).reshape(-1)[0])
    else:
        k = int(layer.attr("k"))
    axis = norm_axis(layer.attr("axis", -1), len(x.shape))
    if not 0 <= k <= x.shape[axis]:
        raise ValueError(f"TopK: k={k} is out of range for axis {axis} of size {x.shape[axis]}")
    return k, axis


@register_op
class TopK(Op):
    def infer(self, layer: Layer, inputs):
        x = inputs[0]
        k, axis = topk_params(layer, inputs)
        shape = tuple(k if i == axis else d for i, d in enumerate(x.shape))
        return [Meta(shape, x.dtype), Meta(shape, INT64)]


@register_op
class TopK_10(TopK):
    cpu_inputs = (1,)
