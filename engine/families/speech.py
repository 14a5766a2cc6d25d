"""A Whisper-style audio encoder over log-mel frames (symbolic batch and frame count)."""

from __future__ import annotations

import numpy as np
import onnx

from engine.families.blocks import encoder_layer
from engine.families.builder import FLOAT, GraphBuilder

MELS, HIDDEN, HEADS, LAYERS = 80, 128, 4, 2
MAX_POSITIONS = 1500  # Whisper's 30 s window after the stride-2 conv


def build_whisper(seed: int = 0) -> onnx.ModelProto:
    """Two Conv1d+GELU (the second strided), sliced sinusoid positions, pre-norm layers."""
    g = GraphBuilder("whisper_encoder", seed)
    x = g.input("input_features", FLOAT, ["batch", MELS, "frames"])
    x = g.gelu_erf(g.conv(x, MELS, HIDDEN, 3, dims=1, gain=1.0))
    x = g.gelu_erf(g.conv(x, HIDDEN, HIDDEN, 3, 2, dims=1, gain=2.0))
    x = g.op("Transpose", [x], perm=[0, 2, 1])                                # [B, T, C]
    # Whisper's fixed sinusoidal table, sliced to the run-time length T
    pos = np.arange(MAX_POSITIONS)[:, None]
    freq = np.exp(-np.log(10000.0) * np.arange(HIDDEN // 2) / (HIDDEN // 2 - 1))
    table = np.concatenate([np.sin(pos * freq), np.cos(pos * freq)], axis=1)
    length = g.unsqueeze(g.dim(x, 1), [0])
    pos_emb = g.op("Slice", [g.tensor("embed_positions", table.astype(np.float32)),
                             g.ints([0]), length, g.ints([0])])
    x = g.op("Add", [x, pos_emb])
    for _ in range(LAYERS):
        x = encoder_layer(g, x, HIDDEN, HEADS, pre_norm=True)
    g.output(g.layer_norm(x, HIDDEN), "last_hidden_state", FLOAT, ["batch", None, HIDDEN])
    return g.model()


def make_inputs(shapes: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Log-mel-like features: Whisper's normalised log-mel values lie in about [-0.8, 1.5]."""
    mel = rng.normal(0.1, 0.4, shapes["input_features"])
    return {"input_features": np.clip(mel, -0.8, 1.5).astype(np.float32)}
