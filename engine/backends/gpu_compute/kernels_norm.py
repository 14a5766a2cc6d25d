"""Normalisations: BatchNormalization (inference), Instance-, Layer-, GroupNormalization, LRN."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, gpu_kernel
from engine.backends.gpu_compute.util import attr_axis, size_of, wide_rows
from engine.ops.base import Meta


def _bn_check(layer, metas):
    if layer.attr("training_mode", 0) or len([o for o in layer.outputs if o]) > 1:
        return "BatchNormalization in training mode runs on the CPU"
    x = metas[0]
    if x is not None and len(x.shape) < 2:
        return "BatchNormalization needs a channel axis"
    return None


@gpu_kernel("BatchNormalization", dtypes=F32, inputs=(0, 1, 2, 3, 4), check=_bn_check)
def BatchNormalization(ctx, layer, ins, metas, out_metas):
    shape = metas[0].shape
    y = ctx.tensor(out_metas[0])
    n = size_of(shape)
    if n:
        inner = max(size_of(shape[2:]), 1)
        params = pack(n, shape[1], inner, float(layer.attr("epsilon", 1e-5)))
        vec = inner % 4 == 0
        ctx.dispatch(Program.of("batchnorm_vec4.wgsl" if vec else "batchnorm.wgsl"),
                     [ins[0], ins[1], ins[2], ins[3], ins[4], y], params,
                     -(-n // 256))
    return [y]


def rownorm(ctx, x, scale, shift, y, rows, length, sm, sd, eps, stats=None):
    """Normalise ``rows`` rows of ``length``; optionally write (mean, inv_std) pairs."""
    if not rows or not length:
        return
    temp = None
    if stats is None:
        temp = stats = ctx.tensor(Meta((2,), np.dtype(np.float32)))
    params = pack(rows, length, sm, sd, float(eps), int(temp is None), 0, 0)
    if wide_rows(ctx, length):
        ctx.dispatch(Program.of("rownorm_rows.wgsl"), [x, scale, shift, y, stats], params, rows)
    else:
        ctx.dispatch(Program.of("rownorm.wgsl"), [x, scale, shift, y, stats], params,
                     -(-rows // 64))
    if temp is not None:
        ctx.free(temp)


@gpu_kernel("InstanceNormalization", dtypes=F32, inputs=(0, 1, 2))
def InstanceNormalization(ctx, layer, ins, metas, out_metas):
    shape = metas[0].shape
    y = ctx.tensor(out_metas[0])
    spatial = size_of(shape[2:])
    rownorm(ctx, ins[0], ins[1], ins[2], y, shape[0] * shape[1], spatial, shape[1], spatial,
            layer.attr("epsilon", 1e-5))
    return [y]


def _ln_check(layer, metas):
    x, s = metas[0], metas[1]
    if x is None or s is None:
        return None
    axis = attr_axis(layer, len(x.shape), default=-1)
    norm = tuple(x.shape[axis:])
    for m in metas[1:3]:
        if m is not None and (1,) * (len(norm) - len(m.shape)) + tuple(m.shape) != norm:
            return "LayerNormalization with broadcast scale/bias runs on the CPU"
    if len(metas) < 3 or metas[2] is None:
        return "LayerNormalization without bias runs on the CPU"
    if layer.attr("stash_type", 1) != 1:
        return "LayerNormalization stash_type other than float32"
    return None


@gpu_kernel("LayerNormalization", dtypes=F32, inputs=(0, 1, 2), check=_ln_check)
def LayerNormalization(ctx, layer, ins, metas, out_metas):
    shape = metas[0].shape
    axis = attr_axis(layer, len(shape), default=-1)
    length = size_of(shape[axis:])
    rows = size_of(shape[:axis])
    y = ctx.tensor(out_metas[0])
    outs = [y]
    stats = None
    if len(out_metas) > 1:
        stats = ctx.tensor(Meta((rows, 2), np.dtype(np.float32)))
    rownorm(ctx, ins[0], ins[1], ins[2], y, rows, length, 1, 1, layer.attr("epsilon", 1e-5),
            stats)
    if stats is not None:
        from engine.backends.gpu_compute.kernels_movement import strided_copy

        for k, meta in enumerate(out_metas[1:3]):
            part = ctx.tensor(meta)
            strided_copy(ctx, stats, part, [rows], [2], in_base=k)
            outs.append(part)
        ctx.free(stats)
    return outs


def _gn_check(layer, metas):
    x, s = metas[0], metas[1]
    if x is None or s is None:
        return None
    if s.shape and s.shape[0] != x.shape[1]:
        return "GroupNormalization with per-group scale (opset 18) runs on the CPU"
    return None


@gpu_kernel("GroupNormalization", 21, dtypes=F32, inputs=(0, 1, 2), check=_gn_check)
def GroupNormalization(ctx, layer, ins, metas, out_metas):
    shape = metas[0].shape
    groups = int(layer.attr("num_groups"))
    spatial = size_of(shape[2:])
    length = shape[1] // groups * spatial
    y = ctx.tensor(out_metas[0])
    rownorm(ctx, ins[0], ins[1], ins[2], y, shape[0] * groups, length, groups, spatial,
            layer.attr("epsilon", 1e-5))
    return [y]


@gpu_kernel("LRN", dtypes=F32)
def LRN(ctx, layer, ins, metas, out_metas):
    shape = metas[0].shape
    y = ctx.tensor(out_metas[0])
    n = size_of(shape)
    if n:
        params = pack(n, shape[1], max(size_of(shape[2:]), 1), int(layer.attr("size")),
                      float(layer.attr("alpha", 1e-4)), float(layer.attr("beta", 0.75)),
                      float(layer.attr("bias", 1.0)), 0)
        ctx.dispatch(Program.of("lrn.wgsl"), [ins[0], y], params, -(-n // 256))
    return [y]
