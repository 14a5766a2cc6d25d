"""A tiny streaming speech model (voice-activity style) with recurrent state in and out.

A sample-rate input picks, through ``If``, whether the chunk is first resampled by a
strided Conv1d (32 kHz) or used as is (16 kHz); a Conv1d front end feeds an LSTM whose
state is passed in (``h_in``, ``c_in``) and out (``h_out``, ``c_out``) between chunks.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from engine.families.builder import FLOAT, INT64, GraphBuilder

HIDDEN = 32
CHUNK_16K = 512  # samples a 16 kHz chunk holds (32 ms)
BENCH_SHAPES = {"audio": (1, 1, CHUNK_16K), "sr": (), "h_in": (1, 1, HIDDEN),
                "c_in": (1, 1, HIDDEN)}
TEST_SHAPES = {"audio": (2, 1, 2 * CHUNK_16K), "sr": (), "h_in": (1, 2, HIDDEN),
               "c_in": (1, 2, HIDDEN)}


def _branch(name: str, node: onnx.NodeProto) -> onnx.GraphProto:
    out = helper.make_tensor_value_info(node.output[0], FLOAT, None)
    return helper.make_graph([node], name, [], [out])


def build_audio(seed: int = 0) -> onnx.ModelProto:
    """Streaming VAD-like model: If-resample, Conv1d front end, stateful LSTM, sigmoid head."""
    g = GraphBuilder("audio_streaming", seed)
    audio = g.input("audio", FLOAT, ["batch", 1, "samples"])
    sr = g.input("sr", INT64, [])
    h_in = g.input("h_in", FLOAT, [1, None, HIDDEN])
    c_in = g.input("c_in", FLOAT, [1, None, HIDDEN])
    # a 4-tap low-pass with stride 2 halves a 32 kHz chunk; branches read outer-scope values
    taps = g.tensor("resample_taps", np.array([[[0.125, 0.375, 0.375, 0.125]]], np.float32))
    keep = _branch("native_rate", helper.make_node("Identity", [audio], ["audio_16k_a"]))
    down = _branch("resample", helper.make_node(
        "Conv", [audio, taps], ["audio_16k_b"], kernel_shape=[4], strides=[2], pads=[1, 1]))
    is_16k = g.op("Equal", [sr, g.ints(16000, scalar=True)])
    x = g.op("If", [is_16k], then_branch=keep, else_branch=down)
    x = g.op("Relu", [g.conv(x, 1, HIDDEN, 32, 16, pad=8, dims=1, gain=40.0)])
    x = g.op("Relu", [g.conv(x, HIDDEN, HIDDEN, 3, 2, dims=1)])
    seq = g.op("Transpose", [x], perm=[2, 0, 1])                              # [T, B, C]
    w = g.weight("lstm_w", [1, 4 * HIDDEN, HIDDEN], 1.0 / np.sqrt(HIDDEN))
    r = g.weight("lstm_r", [1, 4 * HIDDEN, HIDDEN], 1.0 / np.sqrt(HIDDEN))
    b = g.weight("lstm_b", [1, 8 * HIDDEN], 0.1)
    y, h_out, c_out = g.op("LSTM", [seq, w, r, b, "", h_in, c_in], n_out=3,
                           hidden_size=HIDDEN)
    y = g.op("Transpose", [g.op("Squeeze", [y, g.ints([1])])], perm=[1, 0, 2])  # [B, T, H]
    logits = g.linear(y, HIDDEN, 1, gain=8.0)
    probs = g.op("Squeeze", [g.op("Sigmoid", [logits]), g.ints([2])])
    g.output(probs, "output", FLOAT, ["batch", None])
    g.output(h_out, "h_out", FLOAT, [1, None, HIDDEN])
    g.output(c_out, "c_out", FLOAT, [1, None, HIDDEN])
    return g.model()


def make_inputs(shapes: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A noisy tone chunk at the rate its length implies, and state from a previous chunk."""
    batch, _, samples = shapes["audio"]
    sr = 16000 * samples // CHUNK_16K
    t = np.arange(samples) / sr
    freq = rng.uniform(100, 800, (batch, 1, 1))
    wave = 0.3 * np.sin(2 * np.pi * freq * t) + 0.05 * rng.standard_normal((batch, 1, samples))
    return {"audio": wave.astype(np.float32), "sr": np.array(sr, np.int64),
            "h_in": (0.3 * rng.standard_normal(shapes["h_in"])).astype(np.float32),
            "c_in": (0.5 * rng.standard_normal(shapes["c_in"])).astype(np.float32)}
