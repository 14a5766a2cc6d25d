"""Text families: a BERT-like encoder and a GPT-like decoder (symbolic batch and seq)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from engine.families.blocks import encoder_layer
from engine.families.builder import FLOAT, INT64, GraphBuilder

VOCAB = 1000
MAX_POS = 512
BERT_HIDDEN, BERT_HEADS, BERT_LAYERS = 256, 4, 4
GPT_HIDDEN, GPT_HEADS, GPT_LAYERS = 256, 4, 4


def _positions(g: GraphBuilder, ids: str, table: str) -> str:
    """Position embeddings [1, S, H]: Range over the Shape-derived sequence length."""
    seq = g.dim(ids, 1)
    pos = g.op("Range", [g.ints(0, scalar=True), seq, g.ints(1, scalar=True)])
    return g.op("Gather", [table, g.unsqueeze(pos, [0])], axis=0)


def build_bert(seed: int = 0) -> onnx.ModelProto:
    """BERT-like encoder: embeddings, padding masks, 4 post-norm layers, pooler."""
    g = GraphBuilder("bert_encoder", seed)
    h = BERT_HIDDEN
    ids = g.input("input_ids", INT64, ["batch", "seq"])
    mask = g.input("attention_mask", INT64, ["batch", "seq"])
    words = g.op("Gather", [g.weight("word_embeddings", [VOCAB, h], 0.5), ids], axis=0)
    # token types are all zero, made the way a traced default buffer is: from the ids' shape
    zero_types = helper.make_tensor("zero", TensorProto.INT64, [1], [0])
    types = g.op("ConstantOfShape", [g.op("Shape", [ids])], value=zero_types)
    type_emb = g.op("Gather", [g.weight("token_type_embeddings", [2, h], 0.5), types], axis=0)
    pos = _positions(g, ids, g.weight("position_embeddings", [MAX_POS, h], 0.5))
    x = g.layer_norm(g.op("Add", [g.op("Add", [words, type_emb]), pos]), h)

    # two additive masks, as different exporters produce them: (1 - m) * -10000 expanded to
    # [B, 1, S, S] from run-time shapes, and Where(m == 0, finfo.min, 0) left to broadcast
    m4 = g.unsqueeze(mask, [1, 2])
    inverted = g.op("Sub", [g.scalar(1.0), g.op("Cast", [m4], to=TensorProto.FLOAT)])
    small = g.op("Mul", [inverted, g.scalar(-10000.0)])
    b, s = g.dim(ids, 0), g.dim(ids, 1)
    expanded = g.op("Expand", [small, g.shape_of([b, 1, s, s])])
    padded = g.op("Equal", [m4, g.ints(0, scalar=True)])
    fmin = g.scalar(float(np.finfo(np.float32).min))
    min_mask = g.op("Where", [padded, fmin, g.scalar(0.0)])
    for i in range(BERT_LAYERS):
        x = encoder_layer(g, x, h, BERT_HEADS, pre_norm=False, decomposed_ln=i % 2 == 1,
                          add_mask=expanded if i % 2 == 0 else min_mask)
    g.output(x, "last_hidden_state", FLOAT, ["batch", "seq", h])
    first = g.op("Gather", [x, g.ints(0, scalar=True)], axis=1)
    pooled = g.op("Tanh", [g.linear(first, h, h)])
    g.output(pooled, "pooler_output", FLOAT, ["batch", h])
    return g.model()


def build_gpt(seed: int = 0) -> onnx.ModelProto:
    """GPT-like decoder: causal mask from Trilu + Where(-inf), tanh-GELU, tied output."""
    g = GraphBuilder("gpt_decoder", seed)
    h = GPT_HIDDEN
    ids = g.input("input_ids", INT64, ["batch", "seq"])
    wte = g.weight("wte", [VOCAB, h], 0.1)
    x = g.op("Add", [g.op("Gather", [wte, ids], axis=0),
                     _positions(g, ids, g.weight("wpe", [MAX_POS, h], 0.05))])
    seq = g.dim(ids, 1)
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    ones = g.op("ConstantOfShape", [g.shape_of([seq, seq])], value=one)
    causal = g.op("Cast", [g.op("Trilu", [ones], upper=0)], to=TensorProto.BOOL)
    for _ in range(GPT_LAYERS):
        x = encoder_layer(g, x, h, GPT_HEADS, pre_norm=True, gelu="tanh", keep_mask=causal)
    x = g.layer_norm(x, h)
    logits = g.op("MatMul", [x, g.op("Transpose", [wte], perm=[1, 0])])
    g.output(logits, "logits", FLOAT, ["batch", "seq", VOCAB])
    return g.model()


def token_inputs(shapes: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Token ids in range; an attention mask (if asked for) with trailing padding zeros."""
    b, s = shapes["input_ids"]
    feeds = {"input_ids": rng.integers(0, VOCAB, (b, s)).astype(np.int64)}
    if "attention_mask" in shapes:
        lengths = rng.integers(max(1, s // 2), s + 1, b)
        lengths[0] = s  # one full row: the unpadded path is checked too
        feeds["attention_mask"] = (np.arange(s)[None, :] < lengths[:, None]).astype(np.int64)
    return feeds
