"""Reductions, Softmax and LogSoftmax (shaders/pixel/reduce.wgsl, softmax_axis.wgsl)."""

from __future__ import annotations

import math

import numpy as np

from engine.backends.gpu_pixel.kernels_rows import row_softmax, row_sum
from engine.backends.gpu_pixel.kernels_shape import flat_copy
from engine.backends.gpu_pixel.layout import layout_of
from engine.backends.gpu_pixel.registry import pixel_kernel, value_reason

RANK = 6
REDUCE = {"ReduceSum": "sum", "ReduceMean": "sum", "ReduceMax": "max", "ReduceMin": "min",
          "ReduceProd": "prod", "ReduceL1": "sum", "ReduceL2": "sum", "ReduceSumSquare": "sum",
          "ReduceLogSum": "sum", "ReduceLogSumExp": "sum"}
NEEDS_MAX = {"ReduceLogSumExp", "Softmax", "LogSoftmax"}


def reduce_pass(be, op, x, in_shape, axes, keepdims, out_shape):
    """One pass reducing ``axes`` of ``x`` (``op`` picks the shader functions)."""
    r_in, r_out = len(in_shape), len(out_shape)
    src = [-1] * RANK
    mask, count, kept = 0, 1, 0
    for j in range(r_in):
        k = j + RANK - r_in
        if j in axes:
            mask |= 1 << k
            count *= in_shape[j]
            if keepdims:
                kept += 1
        else:
            src[k] = kept + RANK - r_out
            kept += 1
    ints = [src[:4], src[4:], (mask, count)]
    softmax = op in ("Softmax", "LogSoftmax")
    return be.run("reduce", out_shape, [x], ints=ints, OP=op, INIT=REDUCE.get(op, "sum"),
                  NEEDS_MAX=str(op in NEEDS_MAX).lower(), NEEDS_SELF=str(softmax).lower())


def reduce_axes(layer, metas) -> list[int] | None:
    """The reduced axes (None: all), from the attribute or the CPU-known input."""
    rank = len(metas[0].shape)
    if len(layer.inputs) > 1 and layer.inputs[1]:
        axes = [int(a) for a in np.asarray(metas[1].value).reshape(-1)]
    else:
        axes = layer.attr("axes")
    if axes is None or len(axes) == 0:
        return None
    return sorted({int(a) % rank for a in axes})


def _reduce_check(layer, metas):
    if len(layer.inputs) > 1 and layer.inputs[1]:
        return value_reason(metas, 1, f"{layer.op_type}'s axes")
    return None


def _register_reduce(op):
    @pixel_kernel(op, check=_reduce_check, tensors=(0,))
    def kernel(be, layer, inputs, in_metas, out_metas):
        shape = in_metas[0].shape
        axes = reduce_axes(layer, in_metas)
        if axes is None:
            if layer.attr("noop_with_empty_axes", 0):
                return [flat_copy(be, inputs[0], out_metas[0].shape)]
            axes = list(range(len(shape)))
        keep = int(layer.attr("keepdims", 1))
        if op in ("ReduceSum", "ReduceMean") and keep and len(shape) >= 3 and \
                axes == [len(shape) - 1]:
            # over the last axis, which runs along x: one fragment per texture row
            return [row_sum(be, inputs[0], shape, 1.0 / shape[-1] if op == "ReduceMean"
                            else 1.0)]
        return [reduce_pass(be, op, inputs[0], shape, set(axes), keep, out_metas[0].shape)]

    kernel.__name__ = op


for _op in REDUCE:
    _register_reduce(_op)


def axis_softmax(be, x, shape, axis: int, op: str):
    """Softmax or LogSoftmax over ``axis`` (not the last) of a rank >= 3 tensor."""
    lay = layout_of(tuple(shape))
    k = axis + len(lay.dims) - len(shape)
    ints = [(lay.row_strides()[k], lay.blocked[k], lay.dims[k])]
    return be.run("softmax_axis", tuple(shape), [x], ints=ints, OP=op,
                  BLOCKED=str(k == lay.axis).lower())


def _register_softmax(op):
    @pixel_kernel(op)
    def kernel(be, layer, inputs, in_metas, out_metas):
        shape = in_metas[0].shape
        rank = len(shape)
        if layer.opset and layer.opset < 13:
            axes = set(range(int(layer.attr("axis", 1)) % rank, rank))
        else:
            axes = {int(layer.attr("axis", -1)) % rank}
        if axes == {rank - 1}:
            # the last axis runs along x: two passes over texture rows
            return [row_softmax(be, inputs[0], shape, op)]
        if len(axes) == 1 and rank >= 3:
            # one axis off x: its entries are texels of one column, a fixed row step apart
            return [axis_softmax(be, inputs[0], shape, min(axes), op)]
        first = min(axes)
        inner = int(math.prod(shape[first:]))
        if axes == set(range(first, rank)) and inner == max(shape[first:]):
            # trailing axes of which at most one is longer than 1: a row-wise softmax on a
            # 2-D view ([1, 1000, 1, 1] -> [1, 1000]) avoids per-element index arithmetic
            flat = flat_copy(be, inputs[0], (int(math.prod(shape[:first])), inner))
            y = row_softmax(be, flat, flat.shape, op)
            be.free(flat)
            out = flat_copy(be, y, shape)
            be.free(y)
            return [out]
        return [reduce_pass(be, op, inputs[0], shape, axes, 1, shape)]

    kernel.__name__ = op


_register_softmax("Softmax")
_register_softmax("LogSoftmax")
