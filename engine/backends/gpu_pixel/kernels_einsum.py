"""Einsum forms that are one batched matrix product, on the batched matmul shader.

Operands are copied into the canonical label order (batch, rows, summed label / batch,
summed label, columns) when they are not in it already; the product is copied into the
output's label order when that differs.
"""

from __future__ import annotations

from engine.backends.gpu_pixel.kernels_shape import affine_copy, flat_copy
from engine.backends.gpu_pixel.layout import MAX_RANK
from engine.backends.gpu_pixel.registry import pixel_kernel
from engine.ops.gemm import einsum_matmul


def _plan(layer, metas):
    return einsum_matmul(str(layer.attr("equation")), [m.shape for m in metas])


def _einsum_check(layer, metas):
    if any(m is None for m in metas):
        return None
    plan = _plan(layer, metas)
    if isinstance(plan, str):
        return plan
    if len(plan.canonical(2)) > MAX_RANK:
        return (f"Einsum {plan.out!r} has {len(plan.batch)} batch labels; the pixel matmul "
                f"handles at most {MAX_RANK - 2}")
    return None


def reorder(be, h, shape, term: str, order: str):
    """(tensor with labels ``term`` copied into label order ``order``, whether it is new);
    labels ``term`` lacks become axes of 1."""
    if term == order:
        return h, False
    out_shape = tuple(shape[term.index(c)] if c in term else 1 for c in order)
    if [c for c in order if c in term] == list(term):
        return flat_copy(be, h, out_shape), True
    r = len(term)
    src = [order.index(c) for c in term]
    return affine_copy(be, h, out_shape, src, [0] * r, [1] * r, [0] * r), True


@pixel_kernel("Einsum", check=_einsum_check)
def Einsum(be, layer, inputs, in_metas, out_metas):
    plan = _plan(layer, in_metas)
    M, N, K = plan.mnk()
    ops = []
    for which in (0, 1):
        ops.append(reorder(be, inputs[which], in_metas[which].shape, plan.terms[which],
                           plan.canonical(which)))
    canon = plan.canonical(2)
    shape = tuple(plan.sizes[c] for c in canon)
    y = be.run("matmul", shape, [ops[0][0], ops[1][0]], ints=[(M, N, K)])
    for h, new in ops:
        if new:
            be.free(h)
    if canon == plan.out:
        return [y]
    out, _ = reorder(be, y, shape, canon, plan.out)
    be.free(y)
    return [out]
