"""Reductions (Reduce*, global pools), ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, gpu_kernel
from engine.backends.gpu_compute.util import arr8, attr_axis, contiguous_strides, size_of, wide_rows
from engine.ops.base import Meta

#: reductions with init_/fold_/finish_<op> functions in shaders/compute/reduce_ops.wgsl
REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def reduce_axes(layer, metas) -> list[int] | None:
    """Normalised reduced axes ([] = identity), or None when they are not known on the CPU."""
    rank = len(metas[0].shape)
    axes = layer.attr("axes")
    if len(metas) > 1 and metas[1] is not None:
        if metas[1].value is None:
            return None
        axes = [int(a) for a in np.asarray(metas[1].value).reshape(-1)]
    if not axes:
        if layer.attr("noop_with_empty_axes", 0):
            return []
        axes = list(range(rank))
    return sorted({a + rank if a < 0 else a for a in axes})


def run_reduce(ctx, x, shape, axes, out_meta, op: str):
    y = ctx.tensor(out_meta)
    n = size_of(out_meta.shape)
    if not n:
        return y
    strides = contiguous_strides(shape)
    kept = [d for d in range(len(shape)) if d not in axes]
    ks, kst = _merge([shape[d] for d in kept], [strides[d] for d in kept])
    rs, rst = _merge([shape[d] for d in axes], [strides[d] for d in axes])
    params = pack(n, size_of([shape[d] for d in axes]), len(ks), len(rs), *arr8(ks),
                  *arr8(kst), *arr8(rs), *arr8(rst))
    ctx.dispatch(Program.of("reduce.wgsl", OP=op), [x, y], params, -(-n // 64))
    return y


def _merge(shape, strides):
    """Merge dims that are contiguous with each other (fewer div/mod per element)."""
    out_s, out_t = [], []
    for s, t in zip(shape, strides):
        if s == 1:
            continue
        if out_s and out_t[-1] == s * t:
            out_s[-1] *= s
            out_t[-1] = t
        else:
            out_s.append(s)
            out_t.append(t)
    return (out_s or [1]), (out_t or [0])


def _reduce_check(layer, metas):
    if metas[0] is not None and reduce_axes(layer, metas) is None:
        return "reduction axes computed on the device are not supported"
    return None


def _register_reduce(op):
    @gpu_kernel(op, dtypes=F32, check=_reduce_check)
    def kernel(ctx, layer, ins, metas, out_metas):
        axes = reduce_axes(layer, metas)
        if not axes:
            return [ctx.view(ins[0], out_metas[0].shape)]
        return [run_reduce(ctx, ins[0], metas[0].shape, axes, out_metas[0], op)]

    kernel.__name__ = op


for _op in REDUCE:
    _register_reduce(_op)


#: a global pool over planes of at least this many values, with few planes, reduces in two
#: passes (reduce_partial.wgsl): one invocation a plane summed MobileNetV3's 16 planes of
#: 56 x 56 one value at a time on 16 invocations (0.52 ms on lavapipe)
SPLIT_PLANE = 1024
#: ... when there are fewer planes than this
SPLIT_MAX_PLANES = 4096
#: values each first-pass invocation folds, about
SPLIT_VALUES = 64


def _global_pool(ctx, x, shape, out_meta, op: str):
    planes, R = shape[0] * shape[1], size_of(shape[2:])
    mean = op == "ReduceMean"
    if planes and wide_rows(ctx, R):  # GPUs: a workgroup per plane (reduce_rows.wgsl)
        y = ctx.tensor(out_meta)
        ctx.dispatch(Program.of("reduce_rows.wgsl", OP="ReduceSum" if mean else op), [x, y],
                     pack(planes, R, 0, 0, 1.0 / R if mean else 1.0), planes)
        return y
    if R < SPLIT_PLANE or planes >= SPLIT_MAX_PLANES:
        return run_reduce(ctx, x, shape, list(range(2, len(shape))), out_meta, op)
    S = -(-R // SPLIT_VALUES)
    partial = ctx.tensor(Meta((planes, S), np.dtype(np.float32)))
    ctx.dispatch(Program.of("reduce_partial.wgsl", OP="ReduceSum" if mean else op),
                 [x, partial], pack(planes, R, S, 0, 1.0 / R if mean else 1.0),
                 -(-planes * S // 64))
    y = run_reduce(ctx, partial, (planes, S), [1], out_meta, "ReduceSum" if mean else op)
    ctx.free(partial)
    return y


@gpu_kernel("GlobalAveragePool", dtypes=F32)
def GlobalAveragePool(ctx, layer, ins, metas, out_metas):
    return [_global_pool(ctx, ins[0], metas[0].shape, out_metas[0], "ReduceMean")]


@gpu_kernel("GlobalMaxPool", dtypes=F32)
def GlobalMaxPool(ctx, layer, ins, metas, out_metas):
    return [_global_pool(ctx, ins[0], metas[0].shape, out_metas[0], "ReduceMax")]


def _arg(op):
    @gpu_kernel(op, dtypes=F32)
    def kernel(ctx, layer, ins, metas, out_metas):
        shape = metas[0].shape
        axis = attr_axis(layer, len(shape))
        y = ctx.tensor(out_metas[0])
        n = size_of(out_metas[0].shape)
        if n and shape[axis]:
            inner = size_of(shape[axis + 1:])
            params = pack(n, shape[axis], max(inner, 1), int(layer.attr("select_last_index", 0)))
            ctx.dispatch(Program.of("argreduce.wgsl", OP=op), [ins[0], y], params,
                         -(-n // 64))
        return [y]

    kernel.__name__ = op


#: ops with a better_<op> comparison in shaders/compute/argreduce.wgsl
ARGREDUCE = ("ArgMax", "ArgMin")
for _op in ARGREDUCE:
    _arg(_op)

#: ops with an out_<op> function in shaders/compute/softmax.wgsl
SOFTMAX = ("Softmax", "LogSoftmax", "Hardmax")


def _register_softmax(op):
    @gpu_kernel(op, dtypes=F32)
    def kernel(ctx, layer, ins, metas, out_metas):
        shape = metas[0].shape
        legacy = bool(layer.opset) and layer.opset < 13
        axis = attr_axis(layer, len(shape), default=1 if legacy else -1)
        y = ctx.tensor(out_metas[0])
        if legacy:  # before opset 13: the input is coerced to 2-D at ``axis``
            length, inner = size_of(shape[axis:]), 1
        else:
            length, inner = shape[axis], size_of(shape[axis + 1:])
        lines = size_of(shape) // max(length, 1)
        if lines and length and inner <= 1 and op != "Hardmax" and wide_rows(ctx, length):
            ctx.dispatch(Program.of("softmax_rows.wgsl", OP=op), [ins[0], y],
                         pack(lines, length, 1, 0), lines)
        elif lines and length:
            ctx.dispatch(Program.of("softmax.wgsl", OP=op), [ins[0], y],
                         pack(lines, length, max(inner, 1), 0), -(-lines // 64))
        return [y]

    kernel.__name__ = op


for _op in SOFTMAX:
    _register_softmax(_op)
