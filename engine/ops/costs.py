"""What a layer costs for its shapes: floating-point operations and bytes moved.

Counts are the usual conventions: a multiply-add is 2 FLOPs (Conv, ConvTranspose, MatMul,
Gemm, attention, RNN gates), a reduction or an elementwise op one per element touched.
They feed GFLOP/s per layer in the workbench and the model totals in ``bench``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.model import Layer
from engine.ops.base import Meta
from engine.ops.traits import op_traits


@dataclass(frozen=True)
class LayerCost:
    """FLOPs of a layer and the bytes it reads and writes."""

    flops: int
    bytes_in: int
    bytes_out: int

    @property
    def bytes_moved(self) -> int:
        return self.bytes_in + self.bytes_out


def nbytes(meta: Meta | None) -> int:
    if meta is None or meta.dtype.kind == "O":
        return 0
    return meta.size * meta.dtype.itemsize


def _conv(layer: Layer, ins: list[Meta | None], outs: list[Meta | None]) -> int:
    w, y = ins[1], outs[0]
    if w is None or y is None:
        return 0
    per_output = math.prod(w.shape[1:])  # (C / group) * kernel
    return 2 * y.size * per_output


def _conv_transpose(layer: Layer, ins: list[Meta | None], outs: list[Meta | None]) -> int:
    x, w = ins[0], ins[1]
    if x is None or w is None:
        return 0
    # every input element scatters into (C_out / group) * kernel outputs
    return 2 * x.size * math.prod(w.shape[1:])


def _matmul(layer: Layer, ins: list[Meta | None], outs: list[Meta | None]) -> int:
    a, y = ins[0], outs[0]
    if a is None or y is None or not a.shape:
        return 0
    k = a.shape[-1] if len(a.shape) > 1 or layer.op_type != "Gemm" else a.shape[0]
    if layer.op_type == "Gemm" and layer.attr("transA", 0):
        k = a.shape[0]
    return 2 * y.size * k


def _rnn(layer: Layer, ins: list[Meta | None], outs: list[Meta | None]) -> int:
    x, w, r = ins[0], ins[1], ins[2]
    if x is None or w is None or r is None:
        return 0
    seq, batch = x.shape[0], x.shape[1]
    if layer.attr("layout", 0):
        seq, batch = x.shape[1], x.shape[0]
    dirs, gates_hidden, inp = w.shape
    hidden = r.shape[2]
    return 2 * dirs * seq * batch * gates_hidden * (inp + hidden)


def _attention(layer: Layer, ins: list[Meta | None], outs: list[Meta | None]) -> int:
    q, k, y = ins[0], ins[1], outs[0]
    if q is None or k is None or y is None:
        return 0
    # Q·Kᵀ then P·V: two products of about the same size
    return 2 * 2 * q.size * (k.shape[-2] if len(k.shape) >= 2 else 1)


_HEAVY = {"Conv": _conv, "ConvInteger": _conv, "QLinearConv": _conv,
          "ConvTranspose": _conv_transpose, "MatMul": _matmul, "MatMulInteger": _matmul,
          "QLinearMatMul": _matmul, "Gemm": _matmul, "LSTM": _rnn, "GRU": _rnn, "RNN": _rnn,
          "Attention": _attention}


def layer_cost(layer: Layer, ins: list[Meta | None], outs: list[Meta | None]) -> LayerCost:
    """FLOPs and bytes of ``layer`` for concrete input and output metadata."""
    b_in = sum(nbytes(m) for m in ins)
    b_out = sum(nbytes(m) for m in outs)
    fn = _HEAVY.get(layer.op_type)
    try:
        if fn is not None:
            flops = fn(layer, ins, outs)
        elif op_traits(layer.op_type, layer.domain).moves_only:
            flops = 0
        else:  # elementwise, normalisation, pooling, reductions: one per element touched
            flops = max(sum(m.size for m in ins if m is not None and m.dtype.kind == "f"),
                        sum(m.size for m in outs if m is not None))
    except (IndexError, TypeError, ValueError):
        flops = 0
    return LayerCost(int(flops), int(b_in), int(b_out))
