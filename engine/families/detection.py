"""Detection/OCR families: a YOLOv8n-style detector, a DB text detector and a CRNN."""

from __future__ import annotations

import numpy as np
import onnx

from engine.families.builder import FLOAT, GraphBuilder

YOLO_CLASSES = 8
REG_MAX = 16  # DFL bins per box side, as in YOLOv8
# Weight gains (He's 2 for ReLU). SiLU's slope at 0 is 1/2, so a gain below 4 shrinks small
# signals and above 2 grows large ones: 3 settles activations near unit scale. Residual
# branches are kept small so sums do not grow, and the head's last 1x1 convs, which see
# features of about 0.1-0.3, get a large gain so box bins and class logits are not flat.
CBS_GAIN = 3.0
RESIDUAL_GAIN = 1.0
HEAD_GAIN = 50.0
CRNN_CLASSES = 37
CRNN_HIDDEN = 48


# -- YOLOv8n-style ---------------------------------------------------------------------------
def _cbs(g: GraphBuilder, x: str, cin: int, cout: int, k: int = 3, s: int = 1,
         gain: float | None = None) -> str:
    """Conv + SiLU, exported as Conv -> Sigmoid -> Mul."""
    return g.silu(g.conv(x, cin, cout, k, s, gain=CBS_GAIN if gain is None else gain))


def _c2f(g: GraphBuilder, x: str, cin: int, cout: int, n: int, shortcut: bool = True) -> str:
    """C2f: 1x1 conv, Split in two, ``n`` bottlenecks on the second half, Concat all."""
    hidden = cout // 2
    a, b = g.op("Split", [_cbs(g, x, cin, 2 * hidden, 1), g.ints([hidden, hidden])], n_out=2,
                axis=1)
    parts = [a, b]
    for _ in range(n):
        # a small residual branch keeps the sum from growing block after block
        y = _cbs(g, _cbs(g, parts[-1], hidden, hidden), hidden, hidden,
                 gain=RESIDUAL_GAIN if shortcut else None)
        parts.append(g.op("Add", [parts[-1], y]) if shortcut else y)
    return _cbs(g, g.op("Concat", parts, axis=1), (2 + n) * hidden, cout, 1)


def _sppf(g: GraphBuilder, x: str, c: int) -> str:
    """SPPF: three chained 5x5 max pools concatenated with their input."""
    y = [_cbs(g, x, c, c // 2, 1)]
    for _ in range(3):
        y.append(g.op("MaxPool", [y[-1]], kernel_shape=[5, 5], strides=[1, 1],
                      pads=[2, 2, 2, 2]))
    return _cbs(g, g.op("Concat", y, axis=1), 2 * c, c, 1)


def _up(g: GraphBuilder, x: str, factor: float = 2.0) -> str:
    """nn.Upsample(scale_factor, 'nearest') as exported: Resize with scales, empty roi."""
    scales = g.tensor("scales", np.array([1, 1, factor, factor], np.float32))
    return g.op("Resize", [x, "", scales], mode="nearest")


def _head_level(g: GraphBuilder, x: str, c: int, b: str) -> str:
    """Box (4 x REG_MAX) and class branches of one level, flattened to [B, C, H*W]."""
    box = g.conv(_cbs(g, _cbs(g, x, c, 32), 32, 32), 32, 4 * REG_MAX, 1, gain=HEAD_GAIN)
    cls = g.conv(_cbs(g, _cbs(g, x, c, 32), 32, 32), 32, YOLO_CLASSES, 1, gain=HEAD_GAIN)
    return g.reshape(g.op("Concat", [box, cls], axis=1), [b, 4 * REG_MAX + YOLO_CLASSES, -1])


def build_yolo(seed: int = 0) -> onnx.ModelProto:
    """YOLOv8n-like detector; output [B, 4 + classes, anchors] (DFL distances, class probs)."""
    g = GraphBuilder("yolo_detector", seed)
    x = g.input("images", FLOAT, ["batch", 3, "height", "width"])
    x = _cbs(g, x, 3, 16, 3, 2)
    x = _c2f(g, _cbs(g, x, 16, 32, 3, 2), 32, 32, 1)
    p3 = _c2f(g, _cbs(g, x, 32, 48, 3, 2), 48, 48, 2)
    p4 = _c2f(g, _cbs(g, p3, 48, 64, 3, 2), 64, 64, 2)
    p5 = _sppf(g, _c2f(g, _cbs(g, p4, 64, 64, 3, 2), 64, 64, 1), 64)
    n4 = _c2f(g, g.op("Concat", [_up(g, p5), p4], axis=1), 128, 64, 1, shortcut=False)
    n3 = _c2f(g, g.op("Concat", [_up(g, n4), p3], axis=1), 112, 48, 1, shortcut=False)
    m4 = _c2f(g, g.op("Concat", [_cbs(g, n3, 48, 48, 3, 2), n4], axis=1), 112, 64, 1, False)
    m5 = _c2f(g, g.op("Concat", [_cbs(g, m4, 64, 64, 3, 2), p5], axis=1), 128, 64, 1, False)
    b = g.dim(x, 0)
    levels = [_head_level(g, n3, 48, b), _head_level(g, m4, 64, b), _head_level(g, m5, 64, b)]
    feats = g.op("Concat", levels, axis=2)
    box, cls = g.op("Split", [feats, g.ints([4 * REG_MAX, YOLO_CLASSES])], n_out=2, axis=1)
    # DFL: softmax over the bins of each side, expectation by a fixed 1x1 conv (arange)
    bins = g.op("Transpose", [g.reshape(box, [b, 4, REG_MAX, -1])], perm=[0, 2, 1, 3])
    dfl_w = g.tensor("dfl_w", np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1))
    dist = g.op("Conv", [g.op("Softmax", [bins], axis=1), dfl_w], kernel_shape=[1, 1])
    dist = g.reshape(dist, [b, 4, -1])
    out = g.op("Concat", [dist, g.op("Sigmoid", [cls])], axis=1)
    g.output(out, "output0", FLOAT, ["batch", 4 + YOLO_CLASSES, "anchors"])
    return g.model()


# -- DB text detector --------------------------------------------------------------------------
def build_db(seed: int = 0) -> onnx.ModelProto:
    """DB (differentiable binarisation) text detector: conv backbone, FPN, deconv head."""
    g = GraphBuilder("db_text_detector", seed)
    x = g.input("x", FLOAT, ["?", 3, "?", "?"])
    widths = [8, 16, 24, 32, 48]
    feats, c = [], 3
    for i, w in enumerate(widths):
        x = g.op("Relu", [g.conv(x, c, w, 3, 2)])
        if i > 1:  # a second conv in the deeper stages (cheap there, costly at 1/4 scale)
            x = g.op("Relu", [g.conv(x, w, w, 3)])
        if i > 0:
            feats.append(x)
        c = w
    lat = [g.conv(f, w, 24, 1, bias=False, gain=1.0) for f, w in zip(feats, widths[1:])]
    top = lat[-1]
    merged = [top]
    for lateral in reversed(lat[:-1]):  # top-down: upsample x2 and add
        top = g.op("Add", [lateral, _up(g, top)])
        merged.insert(0, top)
    outs = []
    for i, m in enumerate(merged):
        y = g.conv(m, 24, 6, 3, bias=False, gain=1.0)
        outs.append(_up(g, y, 2.0 ** i) if i else y)
    fuse = g.op("Concat", outs, axis=1)
    y = g.op("Relu", [g.conv(fuse, 24, 6, 3)])
    w1 = g.weight("deconv_w", [6, 6, 2, 2], np.sqrt(2.0 / 24))
    y = g.op("Relu", [g.op("ConvTranspose", [y, w1, g.weight("deconv_b", [6], 0.05)],
                           kernel_shape=[2, 2], strides=[2, 2])])
    w2 = g.weight("deconv_w", [6, 1, 2, 2], np.sqrt(1.0 / 24))
    y = g.op("ConvTranspose", [y, w2, g.weight("deconv_b", [1], 0.05)], kernel_shape=[2, 2],
             strides=[2, 2])
    g.output(g.op("Sigmoid", [y]), "sigmoid_0.tmp_0", FLOAT, ["?", 1, "?", "?"])
    return g.model()


# -- CRNN --------------------------------------------------------------------------------------
def build_crnn(seed: int = 0) -> onnx.ModelProto:
    """CRNN text recogniser: conv stack to height 1, a bidirectional LSTM, class softmax."""
    g = GraphBuilder("crnn_recognizer", seed)
    x = g.input("x", FLOAT, ["unk__12", 3, 48, "width"])
    x = g.op("Relu", [g.conv(x, 3, 16, 3)])
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])            # 24 x W/2
    x = g.op("Relu", [g.conv(x, 16, 32, 3)])
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])            # 12 x W/4
    x = g.op("Relu", [g.conv(x, 32, 48, 3)])
    x = g.op("MaxPool", [x], kernel_shape=[2, 1], strides=[2, 1])            # 6 x W/4
    x = g.op("Relu", [g.conv(x, 48, 64, 3)])
    x = g.op("MaxPool", [x], kernel_shape=[2, 1], strides=[2, 1])            # 3 x W/4
    x = g.op("Relu", [g.conv(x, 64, 64, (3, 1), pad=0)])                     # 1 x W/4
    seq = g.op("Transpose", [g.op("Squeeze", [x, g.ints([2])])], perm=[2, 0, 1])  # [T, N, C]
    hid = CRNN_HIDDEN
    w = g.weight("lstm_w", [2, 4 * hid, 64], 1.0 / np.sqrt(64))
    r = g.weight("lstm_r", [2, 4 * hid, hid], 1.0 / np.sqrt(hid))
    bias = g.weight("lstm_b", [2, 8 * hid], 0.1)
    y = g.op("LSTM", [seq, w, r, bias], n_out=3, direction="bidirectional",
             hidden_size=hid)[0]                                              # [T, 2, N, H]
    y = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 2, 1, 3]), g.ints([0, 0, -1])])
    y = g.op("Transpose", [y], perm=[1, 0, 2])                                # [N, T, 2H]
    probs = g.op("Softmax", [g.linear(y, 2 * hid, CRNN_CLASSES, gain=40.0)], axis=2)
    g.output(probs, "softmax_out", FLOAT, ["unk__12", "T", CRNN_CLASSES])
    return g.model()
