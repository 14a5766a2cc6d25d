"""Shape logic of matrix products: Gemm, MatMul (batched, broadcasting) and Einsum."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class EinsumMatMul:
    """An Einsum of two operands that is one batched matrix product.

    Labels are grouped as ``batch`` (in the output and both operands, or an ellipsis
    label), ``m`` (output and A only), ``n`` (output and B only) and ``k`` (both operands,
    summed). The canonical layouts are A = batch+m+k, B = batch+k+n, C = batch+m+n; the
    backends reorder operands into them (or read them with strides) and run their matmul.
    """

    terms: tuple[str, str]
    out: str
    batch: str
    m: str
    n: str
    k: str
    sizes: dict

    def canonical(self, which: int) -> str:
        """Canonical label order of operand 0 (A), 1 (B) or 2 (the product)."""
        return self.batch + (self.m + self.k, self.k + self.n, self.m + self.n)[which]

    def perm(self, which: int) -> list[int]:
        """Axes of operand ``which`` in canonical order (labels it lacks are skipped)."""
        term = self.terms[which]
        return [term.index(c) for c in self.canonical(which) if c in term]

    def shape(self, which: int, operand_shape) -> tuple[int, ...]:
        """Canonical shape of an operand: its own sizes, 1 for batch labels it lacks."""
        term = self.terms[which]
        return tuple(operand_shape[term.index(c)] if c in term else 1
                     for c in self.canonical(which))

    def mnk(self) -> tuple[int, int, int]:
        return self.sizes[self.m], self.sizes[self.n], self.sizes[self.k]


def einsum_matmul(equation: str, shapes: list[tuple]) -> EinsumMatMul | str:
    """The matmul form of an Einsum, or a sentence saying why it has none."""
    if len(shapes) != 2:
        return f"Einsum of {len(shapes)} operands is not a matrix product"
    try:
        terms, out, sizes = parse_einsum(equation, [tuple(s) for s in shapes])
    except ValueError as exc:
        return str(exc)
    a, b = terms
    for t in (a, b, out):
        if len(set(t)) != len(t):
            return f"Einsum {equation!r} repeats a label in one term (a diagonal)"
    ell = set("αβγδεζηθικλμνξοπρστυφχψω")
    batch = "".join(c for c in out if (c in a and c in b) or c in ell)
    m = "".join(c for c in out if c in a and c not in b and c not in ell)
    n = "".join(c for c in out if c in b and c not in a and c not in ell)
    k = "".join(c for c in a if c in b and c not in out)
    extra = [c for c in a + b if c not in out and c not in k]
    if extra:
        return f"Einsum {equation!r} sums label {extra[0]!r} of one operand only"
    if len(m) != 1 or len(n) != 1 or len(k) != 1:
        return (f"Einsum {equation!r} is not a matrix product with one row, one column and "
                "one summed label")
    for c in batch:
        da = shapes[0][a.index(c)] if c in a else 1
        db = shapes[1][b.index(c)] if c in b else 1
        if isinstance(da, int) and isinstance(db, int) and 1 not in (da, db) and da != db:
            return f"Einsum {equation!r}: batch label {c!r} has sizes {da} and {db}"
    return EinsumMatMul((a, b), out, batch, m, n, k, sizes)
