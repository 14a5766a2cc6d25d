"""Shape logic of matrix products: Gemm, MatMul (batched, broadcasting) and Einsum."""

from __future__ import annotations

import numpy as np

from engine.model import Layer
from engine.ops.base import Meta, Op, register_op
from engine.ops.elementwise import broadcast


@register_op
class Gemm(Op):
    def infer(self, layer: Layer, inputs):
        a, b = inputs[0], inputs[1]
        if len(a.shape) != 2 or len(b.shape) != 2:
            raise ValueError(f"Gemm needs 2-D A and B, got {list(a.shape)} and {list(b.shape)}")
        m, ka = a.shape[::-1] if layer.attr("transA", 0) else a.shape
        kb, n = b.shape[::-1] if layer.attr("transB", 0) else b.shape
        if ka != kb:
            raise ValueError(f"Gemm: inner dimensions differ ({ka} vs {kb})")
        if len(inputs) > 2 and inputs[2] is not None:
            broadcast(inputs[2].shape, (m, n))  # C must broadcast to (M, N)
        return [Meta((m, n), a.dtype)]


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy matmul rules: 1-D operands are promoted and the added axis dropped again."""
    if not a or not b:
        raise ValueError("MatMul does not take scalars")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise ValueError(f"MatMul: inner dimensions differ ({list(a)} @ {list(b)})")
    batch = broadcast(a2[:-2], b2[:-2])
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


@register_op
class MatMul(Op):
    def infer(self, layer: Layer, inputs):
        return [Meta(matmul_shape(inputs[0].shape, inputs[1].shape), inputs[0].dtype)]


@register_op
class MatMulInteger(Op):
    def infer(self, layer: Layer, inputs):
        return [Meta(matmul_shape(inputs[0].shape, inputs[1].shape), np.dtype(np.int32))]


@register_op
class QLinearMatMul(Op):
    def infer(self, layer: Layer, inputs):
        return [Meta(matmul_shape(inputs[0].shape, inputs[3].shape), inputs[7].dtype)]


def parse_einsum(equation: str, shapes: list[tuple[int, ...]]
                 ) -> tuple[list[str], str, dict[str, int]]:
    """(input terms, output term, letter -> size) with '...' rewritten as upper-case-free
    private letters so every term is a plain list of labels."""
    eq = equation.replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"Einsum: equation has {len(terms)} operands, got {len(shapes)}")
    spare = [c for c in "αβγδεζηθικλμνξοπρστυφχψω"]
    ell_rank = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes)
                    if "..." in t), default=0)
    ell = "".join(spare[:ell_rank])
    sizes: dict[str, int] = {}
    out_terms = []
    for t, s in zip(terms, shapes):
        if "..." in t:
            n = len(s) - len(t.replace("...", ""))
            t = t.replace("...", ell[ell_rank - n:] if n else "")
        if len(t) != len(s):
            raise ValueError(f"Einsum: term {t!r} does not match an operand of rank {len(s)}")
        for c, d in zip(t, s):
            if sizes.get(c, 1) != 1 and d != 1 and sizes[c] != d:
                raise ValueError(f"Einsum: label {c!r} has sizes {sizes[c]} and {d}")
            sizes[c] = max(sizes.get(c, 1), d) if c in sizes else d
        out_terms.append(t)
    if "->" in eq:
        out = rhs.replace("...", ell)
    else:
        counts = {c: lhs.count(c) for c in set(lhs.replace("...", "").replace(",", ""))}
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1))
    return out_terms, out, sizes


@register_op
class Einsum(Op):
    def infer(self, layer: Layer, inputs):
        _, out, sizes = parse_einsum(layer.attr("equation"), [m.shape for m in inputs])
        return [Meta(tuple(sizes[c] for c in out), inputs[0].dtype)]
