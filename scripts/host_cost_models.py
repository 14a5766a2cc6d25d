"""Small models whose latency on a GPU backend is dominated by host cost.

``python scripts/host_cost_models.py OUTDIR`` writes ``mobilenet_small.onnx`` (a
MobileNetV3-style CNN at 64x64: inverted residual blocks with depthwise convolutions,
hard-swish, squeeze-excite) and ``encoder_small.onnx`` (a 2-layer transformer encoder,
sequence 32, hidden 64, 4 heads, with a Shape->Gather->Concat chain feeding a Reshape).
Weights are seeded random values scaled to keep activations in range.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Graph:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, value: np.ndarray, stem: str = "w") -> str:
        n = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(value), n))
        return n

    def weight(self, *shape: int, fan_in: int) -> str:
        w = (self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        return self.const(w)

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out


def _conv(g: _Graph, x: str, cin: int, cout: int, k: int, stride: int = 1,
          groups: int = 1, act: str | None = None) -> str:
    w = g.weight(cout, cin // groups, k, k, fan_in=cin // groups * k * k)
    b = g.const(np.zeros(cout, np.float32))
    y = g.node("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride],
               pads=[k // 2] * 4, group=groups)
    if act == "relu":
        y = g.node("Relu", [y])
    elif act == "hswish":
        y = g.node("HardSwish", [y])
    return y


def _block(g: _Graph, x: str, cin: int, cexp: int, cout: int, k: int, stride: int,
           se: bool, act: str) -> str:
    y = _conv(g, x, cin, cexp, 1, act=act)
    y = _conv(g, y, cexp, cexp, k, stride, groups=cexp, act=act)
    if se:
        s = g.node("GlobalAveragePool", [y])
        s = _conv(g, s, cexp, max(8, cexp // 4), 1, act="relu")
        s = _conv(g, s, max(8, cexp // 4), cexp, 1)
        s = g.node("HardSigmoid", [s], alpha=1.0 / 6, beta=0.5)
        y = g.node("Mul", [y, s])
    y = _conv(g, y, cexp, cout, 1)
    if stride == 1 and cin == cout:
        y = g.node("Add", [x, y])
    return y


def mobilenet_small(size: int = 64, seed: int = 0) -> onnx.ModelProto:
    """A MobileNetV3-small-style CNN (about 90 layers after import-time fusion: fewer)."""
    g = _Graph(seed)
    y = _conv(g, "input", 3, 16, 3, 2, act="hswish")
    cfg = [(16, 16, 16, 3, 2, True, "relu"), (16, 72, 24, 3, 2, False, "relu"),
           (24, 88, 24, 3, 1, False, "relu"), (24, 96, 40, 5, 2, True, "hswish"),
           (40, 240, 40, 5, 1, True, "hswish"), (40, 120, 48, 5, 1, True, "hswish"),
           (48, 144, 48, 5, 1, True, "hswish"), (48, 288, 96, 5, 2, True, "hswish")]
    for cin, cexp, cout, k, stride, se, act in cfg:
        y = _block(g, y, cin, cexp, cout, k, stride, se, act)
    y = _conv(g, y, 96, 288, 1, act="hswish")
    y = g.node("GlobalAveragePool", [y])
    y = g.node("Flatten", [y], axis=1)
    w = g.weight(288, 100, fan_in=288)
    y = g.node("Gemm", [y, w, g.const(np.zeros(100, np.float32))])
    y = g.node("Softmax", [y], axis=1)
    graph = helper.make_graph(
        g.nodes, "mobilenet_small",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 100])], g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _encoder_layer(g: _Graph, x: str, hidden: int, heads: int) -> str:
    d = hidden // heads
    # [1, S, H] -> per-head shape from a Shape chain (CPU-forced, computed per signature)
    shape = g.node("Shape", [x])
    seq = g.node("Gather", [shape, g.const(np.array([1], np.int64), "i")], axis=0)
    head_shape = g.node("Concat", [g.const(np.array([1], np.int64), "i"), seq,
                                   g.const(np.array([heads, d], np.int64), "i")], axis=0)
    qkv = []
    for _ in range(3):
        t = g.node("MatMul", [x, g.weight(hidden, hidden, fan_in=hidden)])
        t = g.node("Add", [t, g.const(np.zeros(hidden, np.float32))])
        t = g.node("Reshape", [t, head_shape])
        qkv.append(g.node("Transpose", [t], perm=[0, 2, 1, 3]))
    q, k, v = qkv
    kt = g.node("Transpose", [k], perm=[0, 1, 3, 2])
    s = g.node("MatMul", [q, kt])
    s = g.node("Mul", [s, g.const(np.array(1.0 / np.sqrt(d), np.float32))])
    p = g.node("Softmax", [s], axis=-1)
    a = g.node("MatMul", [p, v])
    a = g.node("Transpose", [a], perm=[0, 2, 1, 3])
    a = g.node("Reshape", [a, g.const(np.array([1, -1, hidden], np.int64), "i")])
    a = g.node("MatMul", [a, g.weight(hidden, hidden, fan_in=hidden)])
    x = g.node("Add", [x, a])
    ones, zeros = np.ones(hidden, np.float32), np.zeros(hidden, np.float32)
    x = g.node("LayerNormalization", [x, g.const(ones), g.const(zeros)], axis=-1)
    f = g.node("MatMul", [x, g.weight(hidden, 4 * hidden, fan_in=hidden)])
    f = g.node("Add", [f, g.const(np.zeros(4 * hidden, np.float32))])
    f = g.node("Relu", [f])
    f = g.node("MatMul", [f, g.weight(4 * hidden, hidden, fan_in=4 * hidden)])
    x = g.node("Add", [x, f])
    return g.node("LayerNormalization", [x, g.const(ones), g.const(zeros)], axis=-1)


def encoder_small(seq: int | str = 32, hidden: int = 64, heads: int = 4, layers: int = 2,
                  seed: int = 1) -> onnx.ModelProto:
    """A post-norm transformer encoder; ``seq`` may be a symbolic dim name."""
    g = _Graph(seed)
    x = "input"
    for _ in range(layers):
        x = _encoder_layer(g, x, hidden, heads)
    graph = helper.make_graph(
        g.nodes, "encoder_small",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, seq, hidden])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, seq, hidden])], g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main(argv: list[str]) -> int:
    out = argv[0] if argv else "."
    os.makedirs(out, exist_ok=True)
    for name, proto in (("mobilenet_small", mobilenet_small()),
                        ("encoder_small", encoder_small())):
        onnx.checker.check_model(proto)
        path = os.path.join(out, f"{name}.onnx")
        onnx.save(proto, path)
        print(path, len(proto.graph.node), "nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
