"""Shape logic of elementwise ops: unary ones keep the shape, n-ary ones broadcast."""

from __future__ import annotations

import numpy as np

from engine.model import Layer
from engine.ops.activations import UNARY_OPS
from engine.ops.base import Meta, Op, register_op


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError as exc:
        raise ValueError(f"shapes {list(shapes)} do not broadcast") from exc


class Unary(Op):
    """Output has the input's shape and dtype."""

    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        x = inputs[0]
        return [Meta(x.shape, x.dtype)]


class Binary(Op):
    """Numpy-style broadcasting of all inputs; dtype of the first input."""

    out_dtype: np.dtype | None = None

    def infer(self, layer: Layer, inputs: list[Meta | None]) -> list[Meta]:
        present = [m for m in inputs if m is not None]
        shape = broadcast(*[m.shape for m in present])
        return [Meta(shape, self.out_dtype or present[0].dtype)]


#: same shape and dtype: Identity and every unary op of engine.ops.activations but the
#: predicates (IsNaN, IsInf: bool results, below)
UNARY = ["Identity"] + [n for n in UNARY_OPS if n not in ("IsNaN", "IsInf")]
BINARY = "Add Sub Mul Div Pow Mod Max Min Sum Mean PRelu BitShift BitwiseAnd BitwiseOr BitwiseXor"
COMPARE = "Equal Greater Less GreaterOrEqual LessOrEqual And Or Xor"

for _name in UNARY:
    register_op(type(_name, (Unary,), {"op_type": _name}))
for _name in BINARY.split():
    register_op(type(_name, (Binary,), {"op_type": _name}))
for _name in COMPARE.split():
    register_op(type(_name, (Binary,), {"op_type": _name, "out_dtype": np.dtype(bool)}))


@register_op
class Where(Op):
    def infer(self, layer, inputs):
        c, x, y = inputs
        return [Meta(broadcast(c.shape, x.shape, y.shape), x.dtype)]


@register_op
class IsNaN(Unary):
    def infer(self, layer, inputs):
        return [Meta(inputs[0].shape, np.dtype(bool))]


@register_op
class IsInf(IsNaN):
    pass
