"""Small transformer/conv benchmark models for GPU_PIXEL vs GPU_COMPUTE (issue 13).

Builds, with onnx.helper and random weights: a BERT-like 2-layer encoder (hidden 128,
64 tokens), a ViT-like block (197 tokens, hidden 192), a ConvNeXt block (7x7 depthwise
at 56x56x96) and a Whisper-like front end (two Conv1d then one attention block). Then,
unless ``--build-only``, runs each on the backends given and prints per-op-type GPU
times (medians over ``--repeat`` runs, from ``worker.last_profile``).

Usage: ``python scripts/pixel_bench_models.py [--models bert,vit] [--backends
gpu-pixel,gpu-compute] [--repeat 3] [--frames 1500] [--out DIR]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Builder:
    """Accumulates nodes and initializers with unique names."""

    def __init__(self, seed: int = 0):
        self.nodes, self.inits, self.n = [], [], 0
        self.rng = np.random.default_rng(seed)

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, array, base="w") -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, *shape, scale=None) -> str:
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op_type: str, inputs, **attrs) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def linear(self, x, d_in, d_out):
        y = self.op("MatMul", [x, self.weight(d_in, d_out)])
        return self.op("Add", [y, self.const(np.zeros(d_out, np.float32) + 0.01, "b")])

    def layer_norm(self, x, d):
        scale = self.const(np.ones(d, np.float32), "g")
        bias = self.const(np.zeros(d, np.float32), "beta")
        return self.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=1e-5)

    def attention(self, x, seq, hidden, heads):
        """Self-attention on x [1, seq, hidden] with the usual reshape/transpose pattern."""
        hd = hidden // heads
        shape4 = self.const(np.array([1, seq, heads, hd], np.int64), "shape")
        q, k, v = (self.op("Reshape", [self.linear(x, hidden, hidden), shape4])
                   for _ in range(3))
        q = self.op("Transpose", [q], perm=[0, 2, 1, 3])
        k = self.op("Transpose", [k], perm=[0, 2, 3, 1])
        v = self.op("Transpose", [v], perm=[0, 2, 1, 3])
        s = self.op("MatMul", [q, k])
        s = self.op("Mul", [s, self.const(np.array(1 / np.sqrt(hd), np.float32), "scale")])
        p = self.op("Softmax", [s], axis=-1)
        o = self.op("MatMul", [p, v])
        o = self.op("Transpose", [o], perm=[0, 2, 1, 3])
        o = self.op("Reshape", [o, self.const(np.array([1, seq, hidden], np.int64), "shape")])
        return self.linear(o, hidden, hidden)

    def encoder_layer(self, x, seq, hidden, heads, ffn, pre_norm=False):
        if pre_norm:  # ViT / Whisper
            h = self.op("Add", [x, self.attention(self.layer_norm(x, hidden), seq, hidden,
                                                  heads)])
            f = self.op("Gelu", [self.linear(self.layer_norm(h, hidden), hidden, ffn)])
            return self.op("Add", [h, self.linear(f, ffn, hidden)])
        h = self.layer_norm(self.op("Add", [x, self.attention(x, seq, hidden, heads)]), hidden)
        f = self.op("Gelu", [self.linear(h, hidden, ffn)])
        return self.layer_norm(self.op("Add", [h, self.linear(f, ffn, hidden)]), hidden)

    def model(self, name, x_name, x_shape, y, y_shape=None):
        y_shape = x_shape if y_shape is None else y_shape
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(x_name, TensorProto.FLOAT, list(x_shape))],
            [helper.make_tensor_value_info(y, TensorProto.FLOAT, list(y_shape))], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
        m.ir_version = 9
        onnx.checker.check_model(m)
        return m


def bert(seq=64, hidden=128, heads=2, layers=2):
    b = Builder(1)
    x = "x"
    for _ in range(layers):
        x = b.encoder_layer(x, seq, hidden, heads, 4 * hidden)
    return b.model("bert_tiny", "x", (1, seq, hidden), x), (1, seq, hidden)


def vit(seq=197, hidden=192, heads=3):
    b = Builder(2)
    y = b.encoder_layer("x", seq, hidden, heads, 4 * hidden, pre_norm=True)
    return b.model("vit_block", "x", (1, seq, hidden), y), (1, seq, hidden)


def convnext(size=56, channels=96):
    b = Builder(3)
    h = b.op("Conv", ["x", b.weight(channels, 1, 7, 7, scale=0.1),
                      b.const(np.zeros(channels, np.float32), "b")],
             group=channels, kernel_shape=[7, 7], pads=[3, 3, 3, 3])
    h = b.op("Transpose", [h], perm=[0, 2, 3, 1])
    h = b.layer_norm(h, channels)
    h = b.op("Gelu", [b.linear(h, channels, 4 * channels)])
    h = b.linear(h, 4 * channels, channels)
    h = b.op("Transpose", [h], perm=[0, 3, 1, 2])
    y = b.op("Add", ["x", h])
    return b.model("convnext_block", "x", (1, channels, size, size), y), \
        (1, channels, size, size)


def whisper(frames=1500, mels=80, hidden=128, heads=2):
    b = Builder(4)
    h = b.op("Gelu", [b.op("Conv", ["x", b.weight(hidden, mels, 3, scale=0.05),
                                    b.const(np.zeros(hidden, np.float32), "b")],
                           kernel_shape=[3], pads=[1, 1])])
    h = b.op("Gelu", [b.op("Conv", [h, b.weight(hidden, hidden, 3, scale=0.05),
                                    b.const(np.zeros(hidden, np.float32), "b")],
                           kernel_shape=[3], pads=[1, 1], strides=[2])])
    h = b.op("Transpose", [h], perm=[0, 2, 1])
    seq = frames // 2
    y = b.encoder_layer(h, seq, hidden, heads, 4 * hidden, pre_norm=True)
    return b.model("whisper_front", "x", (1, mels, frames), y, (1, seq, hidden)), \
        (1, mels, frames)


MODELS = {"bert": bert, "vit": vit, "convnext": convnext, "whisper": whisper}


def measure(path, shape, backend_name, repeat):
    from engine import BackendType, ModelLoader, Worker

    backend = {"gpu-pixel": BackendType.GPU_PIXEL, "gpu-compute": BackendType.GPU_COMPUTE,
               "cpu": BackendType.CPU}[backend_name]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    model = ModelLoader.load(path)
    totals, per_op, wall = [], {}, []
    with Worker(model, backend) as worker:
        worker.schedule(x)
        worker.peek_output().download_to_array()  # warm-up: pipelines compile
        for _ in range(repeat):
            t0 = time.perf_counter()
            worker.schedule(x)
            worker.peek_output().download_to_array()
            wall.append((time.perf_counter() - t0) * 1e3)
            prof = worker.last_profile
            totals.append(prof.layer_ms())
            for op, ms in prof.by_op_type().items():
                per_op.setdefault(op, []).append(ms)
        fallbacks = [n for n, p in worker.placement.items() if p.backend != backend]
    return (statistics.median(totals), statistics.median(wall),
            {op: statistics.median(v) for op, v in per_op.items()}, fallbacks)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="bert,vit,convnext,whisper")
    ap.add_argument("--backends", default="gpu-pixel,gpu-compute")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--frames", type=int, default=1500)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "pixel_bench"))
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    sys.path.insert(0, ROOT)
    for name in args.models.split(","):
        model, shape = whisper(args.frames) if name == "whisper" else MODELS[name]()
        path = os.path.join(args.out, f"{name}.onnx")
        onnx.save(model, path)
        if args.build_only:
            print(path)
            continue
        results = {}
        for be in args.backends.split(","):
            results[be] = measure(path, shape, be, args.repeat)
            total, wall, _, fb = results[be]
            print(f"{name:9s} {be:12s} GPU {total:9.1f} ms  wall {wall:9.1f} ms"
                  + (f"  fallbacks {len(fb)}: {fb[:4]}" if fb else ""), flush=True)
        ops = sorted({op for r in results.values() for op in r[2]},
                     key=lambda op: -max(r[2].get(op, 0) for r in results.values()))
        for op in ops:
            cells = "  ".join(f"{results[be][2].get(op, 0):9.2f}" for be in results)
            print(f"    {op:22s} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
