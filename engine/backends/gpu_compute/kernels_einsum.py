"""Einsum forms that are one batched matrix product, on the matmul kernel.

Operands are read in place with strides when their labels are already batch-first (rows
and the summed label in either order); otherwise they are first copied into the
canonical order. A product whose output order is not batch+rows+columns is transposed.
"""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_compute.kernels_matmul import Operand, matmul
from engine.backends.gpu_compute.kernels_movement import transpose
from engine.backends.gpu_compute.kernels_shape import fill
from engine.backends.gpu_compute.registry import F32, gpu_kernel
from engine.backends.gpu_compute.util import contiguous_strides, size_of
from engine.ops.base import Meta
from engine.ops.gemm import einsum_matmul


def _plan(layer, metas):
    return einsum_matmul(str(layer.attr("equation")), [m.shape for m in metas])


def _batch_count(plan, which, shape) -> int | None:
    """The operand's flattened batch size; None when it broadcasts only partly."""
    canon = plan.shape(which, shape)[:len(plan.batch)]
    full = [plan.sizes[c] for c in plan.batch]
    if list(canon) == full:
        return size_of(full)
    if size_of(canon) == 1:
        return 1
    return None


def _einsum_check(layer, metas):
    if any(m is None for m in metas):
        return None
    plan = _plan(layer, metas)
    if isinstance(plan, str):
        return plan
    if not all(isinstance(d, int) for m in metas for d in m.shape):
        return None
    for which in (0, 1):
        if _batch_count(plan, which, metas[which].shape) is None:
            return (f"Einsum operand {which} broadcasts only some of its batch labels "
                    f"{plan.batch!r}; the GPU kernel needs all or none")
    return None


def _operand(ctx, plan, which, handle, meta) -> tuple[Operand, object | None]:
    """The operand as a matrix view (and a temporary to free afterwards, if one was made)."""
    term = plan.terms[which]
    rows, cols = (plan.m, plan.k) if which == 0 else (plan.k, plan.n)
    present = [c for c in plan.batch if c in term]
    M, K = meta.shape[term.index(rows)], meta.shape[term.index(cols)]
    count = _batch_count(plan, which, meta.shape)
    stride = M * K if count > 1 else 0
    if list(term[:len(present)]) == present:  # batch-first: read the matrix with strides
        st = contiguous_strides(meta.shape)
        return Operand(handle, st[term.index(rows)], st[term.index(cols)], stride), None
    perm = plan.perm(which)
    shape = tuple(meta.shape[p] for p in perm)
    tmp = transpose(ctx, handle, meta.shape, perm, Meta(shape, meta.dtype))
    return Operand(tmp, K, 1, stride), tmp


@gpu_kernel("Einsum", dtypes=F32, inputs=None, check=_einsum_check)
def Einsum(ctx, layer, ins, metas, out_metas):
    plan = _plan(layer, metas)
    out = out_metas[0]
    M, N, K = plan.mnk()
    canon = plan.canonical(2)
    batch = size_of([plan.sizes[c] for c in plan.batch])
    direct = canon == plan.out
    cmeta = Meta(tuple(plan.sizes[c] for c in canon), np.dtype(np.float32))
    y = ctx.tensor(out if direct else cmeta)
    if K == 0:
        fill(ctx, y, cmeta, 0.0)
    else:
        a, ta = _operand(ctx, plan, 0, ins[0], metas[0])
        b, tb = _operand(ctx, plan, 1, ins[1], metas[1])
        matmul(ctx, a, b, y, M, N, K, batch)
        for t in (ta, tb):
            if t is not None:
                ctx.free(t)
    if direct:
        return [y]
    result = transpose(ctx, y, cmeta.shape, [canon.index(c) for c in plan.out], out)
    ctx.free(y)
    return [result]
