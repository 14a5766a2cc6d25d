"""GatherND, ScatterND and TopK."""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.encoding import pack
from engine.backends.gpu_compute.kernels_elementwise import WGSL_TYPE
from engine.backends.gpu_compute.memory import words_per_element
from engine.backends.gpu_compute.pipelines import Program
from engine.backends.gpu_compute.registry import F32, concrete, gpu_kernel
from engine.backends.gpu_compute.util import arr8, contiguous_strides, size_of
from engine.ops.reduce import topk_params

WG = 256
INDEX = (np.dtype(np.int32), np.dtype(np.int64))
#: ScatterND reductions that fold (function fold_<name> in shaders/compute/scatter_folds_*.wgsl)
FOLDS = ("add", "mul", "max", "min")
FOLD_DTYPES = (np.dtype(np.float32), np.dtype(np.int32))
#: a folding ScatterND compares every output element with every index row
SCATTER_MAX_WORK = 1 << 28
#: TopK picks k elements by k scans of the line; past this k a sort on the CPU is faster
TOPK_MAX_K = 256


def _gather_nd_check(layer, metas):
    idx = metas[1] if len(metas) > 1 else None
    if idx is not None and np.dtype(idx.dtype) not in INDEX:
        return f"GatherND indices must be int32 or int64, got {np.dtype(idx.dtype).name}"
    return None


@gpu_kernel("GatherND", dtypes=None, inputs=None, check=_gather_nd_check)
def GatherND(ctx, layer, ins, metas, out_metas):
    data, idx = metas[0], metas[1]
    out = out_metas[0]
    y = ctx.tensor(out)
    n = size_of(out.shape)
    if n:
        b, depth = int(layer.attr("batch_dims", 0)), idx.shape[-1]
        slice_size = size_of(data.shape[b + depth:])
        rows = size_of(idx.shape[b:-1])
        strides = contiguous_strides(data.shape)[b:b + depth]
        params = pack(n, max(slice_size, 1), depth, words_per_element(out.dtype),
                      words_per_element(idx.dtype), max(rows, 1), size_of(data.shape[b:]), 0,
                      *arr8(data.shape[b:b + depth]), *arr8(strides))
        ctx.dispatch(Program.of("gather_nd.wgsl"), [ins[0], ins[1], y], params, -(-n // WG))
    return [y]


def _scatter_nd_check(layer, metas):
    reduction = layer.attr("reduction", "none")
    if reduction != "none" and reduction not in FOLDS:
        return f"ScatterND reduction {reduction!r} is not supported"
    data, idx, upd = (metas + [None] * 3)[:3]
    if idx is not None and np.dtype(idx.dtype) not in INDEX:
        return f"ScatterND indices must be int32 or int64, got {np.dtype(idx.dtype).name}"
    if data is not None and upd is not None and np.dtype(data.dtype) != np.dtype(upd.dtype):
        return "ScatterND's data and updates have different dtypes"
    if idx is None or data is None or not idx.shape:
        return None
    depth = idx.shape[-1]
    if isinstance(depth, int) and depth > len(data.shape):
        return f"ScatterND index depth {depth} exceeds the data rank {len(data.shape)}"
    if reduction != "none":
        if np.dtype(data.dtype) not in FOLD_DTYPES:
            return (f"ScatterND with reduction {reduction!r} on {np.dtype(data.dtype).name} "
                    "runs on the CPU (the GPU folds float32 and int32)")
        if concrete(data) and concrete(idx) and data.size * idx.size > SCATTER_MAX_WORK:
            return (f"ScatterND with reduction {reduction!r} of {idx.size // max(depth, 1)} "
                    f"index rows into {data.size} elements is too much work for the GPU "
                    "kernel, which compares every element with every row")
    return None


@gpu_kernel("ScatterND", dtypes=None, inputs=None, check=_scatter_nd_check)
def ScatterND(ctx, layer, ins, metas, out_metas):
    data, idx = metas[0], metas[1]
    out = out_metas[0]
    y = ctx.tensor(out)
    reduction = layer.attr("reduction", "none")
    if reduction != "none":
        return [_scatter_nd_fold(ctx, ins, data, idx, out, y, reduction)]
    words = words_per_element(out.dtype)
    ctx.copy(ins[0], 0, y, 0, size_of(data.shape) * words * 4)
    depth = idx.shape[-1]
    slice_size = size_of(data.shape[depth:])
    n = size_of(idx.shape[:-1]) * slice_size
    if n:
        strides = contiguous_strides(data.shape)[:depth]
        params = pack(n, max(slice_size, 1), depth, words, words_per_element(idx.dtype), 0, 0, 0,
                      *arr8(data.shape[:depth]), *arr8(strides))
        ctx.dispatch(Program.of("scatter_nd.wgsl"), [ins[1], ins[2], y], params, -(-n // WG))
    return [y]


def _scatter_nd_fold(ctx, ins, data, idx, out, y, fold: str):
    n = size_of(data.shape)
    if n:
        depth = idx.shape[-1]
        slice_size = size_of(data.shape[depth:])
        strides = contiguous_strides(data.shape)[:depth]
        params = pack(n, max(slice_size, 1), depth, size_of(idx.shape[:-1]),
                      words_per_element(idx.dtype), 0, 0, 0, *arr8(data.shape[:depth]),
                      *arr8(strides))
        program = Program.of("scatter_nd_fold.wgsl", T=WGSL_TYPE[np.dtype(out.dtype).name],
                             FOLD=fold)
        ctx.dispatch(program, [ins[0], ins[1], ins[2], y], params, -(-n // WG))
    return y


def _topk_check(layer, metas):
    x = metas[0]
    if x is None or not all(isinstance(d, int) for d in x.shape):
        return None
    if len(metas) > 1 and metas[1] is not None and metas[1].value is None:
        return None  # k is CPU-forced: known when the layer is scheduled
    if not x.shape:
        return "TopK of a scalar is invalid"
    try:
        k, axis = topk_params(layer, metas)
    except ValueError as exc:
        return str(exc)
    if k > TOPK_MAX_K:
        return (f"TopK with k={k} runs on the CPU (the GPU kernel selects at most "
                f"{TOPK_MAX_K} elements per line)")
    return None


@gpu_kernel("TopK", dtypes=F32, inputs=(0,), check=_topk_check)
def TopK(ctx, layer, ins, metas, out_metas):
    shape = metas[0].shape
    k, axis = topk_params(layer, metas)
    values, indices = ctx.tensor(out_metas[0]), ctx.tensor(out_metas[1])
    lines = size_of(shape) // max(shape[axis], 1)
    if k and lines:
        inner = size_of(shape[axis + 1:])
        params = pack(lines, shape[axis], max(inner, 1), k, int(layer.attr("largest", 1)),
                      0, 0, 0)
        ctx.dispatch(Program.of("topk.wgsl"), [ins[0], values, indices], params,
                     -(-lines // 64))
    return [values, indices]
