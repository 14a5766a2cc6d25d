"""Transformer blocks shared by the BERT, GPT, ViT and Whisper families.

Attention is spelled out the way ``torch.onnx.export`` traces ``nn.MultiheadAttention``-style
code: per-head reshapes whose targets come from ``Shape``/``Gather``/``Concat`` of the
activation (so batch and sequence stay symbolic), explicit transposes, a scaled
``MatMul``, an additive or ``Where`` mask, ``Softmax`` and a final ``[B, S, -1]`` reshape.
"""

from __future__ import annotations

import math

from engine.families.builder import GraphBuilder


def attention(g: GraphBuilder, x: str, hidden: int, heads: int, add_mask: str | None = None,
              keep_mask: str | None = None) -> str:
    """Multi-head self-attention on ``x`` [B, S, hidden].

    ``add_mask`` is added to the scores (0 / large negative); ``keep_mask`` is a bool tensor
    and masked scores become -inf through ``Where`` (GPT-2's formulation).
    """
    dh = hidden // heads
    b, s = g.dim(x, 0), g.dim(x, 1)

    def heads_of(t: str, perm: list[int]) -> str:
        return g.op("Transpose", [g.reshape(t, [b, s, heads, dh])], perm=perm)

    q = heads_of(g.linear(x, hidden, hidden), [0, 2, 1, 3])
    k = heads_of(g.linear(x, hidden, hidden), [0, 2, 3, 1])
    v = heads_of(g.linear(x, hidden, hidden), [0, 2, 1, 3])
    scores = g.op("Div", [g.op("MatMul", [q, k]), g.scalar(math.sqrt(dh))])
    if add_mask is not None:
        scores = g.op("Add", [scores, add_mask])
    if keep_mask is not None:
        scores = g.op("Where", [keep_mask, scores, g.scalar(float("-inf"))])
    probs = g.op("Softmax", [scores], axis=-1)
    ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    return g.linear(g.reshape(ctx, [b, s, -1]), hidden, hidden)


def mlp(g: GraphBuilder, x: str, hidden: int, ratio: int = 4, gelu: str = "erf") -> str:
    """Linear -> GELU (exact or tanh form) -> Linear."""
    h = g.linear(x, hidden, hidden * ratio, gain=2.0)
    h = g.gelu_erf(h) if gelu == "erf" else g.gelu_tanh(h)
    return g.linear(h, hidden * ratio, hidden)


def encoder_layer(g: GraphBuilder, x: str, hidden: int, heads: int, *, pre_norm: bool,
                  decomposed_ln: bool = False, gelu: str = "erf", add_mask: str | None = None,
                  keep_mask: str | None = None) -> str:
    """One transformer layer; pre-norm (GPT/ViT/Whisper) or post-norm (BERT)."""
    def norm(t: str) -> str:
        return g.layer_norm(t, hidden, decomposed=decomposed_ln)

    if pre_norm:
        x = g.op("Add", [x, attention(g, norm(x), hidden, heads, add_mask, keep_mask)])
        return g.op("Add", [x, mlp(g, norm(x), hidden, gelu=gelu)])
    x = norm(g.op("Add", [x, attention(g, x, hidden, heads, add_mask, keep_mask)]))
    return norm(g.op("Add", [x, mlp(g, x, hidden, gelu=gelu)]))
