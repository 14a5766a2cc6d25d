"""Image classifiers: ViT-tiny, ConvNeXt and MobileNetV3, as torchvision/timm export them."""

from __future__ import annotations

import math

import onnx

from engine.families.blocks import encoder_layer
from engine.families.builder import FLOAT, GraphBuilder

CLASSES = 100
VIT_HIDDEN, VIT_HEADS, VIT_LAYERS, VIT_PATCH = 192, 3, 4, 16


def _classifier(g: GraphBuilder, x: str, din: int) -> str:
    """Final linear layer, scaled so logits of unit-variance features have std ~2."""
    return g.linear(x, din, CLASSES, gain=4.0)


# -- ViT ---------------------------------------------------------------------------------------
def build_vit(seed: int = 0) -> onnx.ModelProto:
    """ViT-tiny-like: 16x16 patch conv, cls token expanded to the batch, 4 pre-norm layers."""
    g = GraphBuilder("vit_tiny", seed)
    h = VIT_HIDDEN
    x = g.input("pixel_values", FLOAT, ["batch", 3, 224, 224])
    b = g.dim(x, 0)
    patches = g.conv(x, 3, h, VIT_PATCH, VIT_PATCH, pad=0, gain=1.0)
    tokens = g.op("Transpose", [g.reshape(patches, [b, h, -1])], perm=[0, 2, 1])
    cls = g.op("Expand", [g.weight("cls_token", [1, 1, h], 0.5), g.shape_of([b, 1, h])])
    n_tokens = (224 // VIT_PATCH) ** 2 + 1
    x = g.op("Add", [g.op("Concat", [cls, tokens], axis=1),
                     g.weight("position_embeddings", [1, n_tokens, h], 0.5)])
    for _ in range(VIT_LAYERS):
        x = encoder_layer(g, x, h, VIT_HEADS, pre_norm=True)
    x = g.op("Gather", [g.layer_norm(x, h), g.ints(0, scalar=True)], axis=1)
    g.output(_classifier(g, x, h), "logits", FLOAT, ["batch", CLASSES])
    return g.model()


# -- ConvNeXt ----------------------------------------------------------------------------------
def _ln_channels(g: GraphBuilder, x: str, c: int) -> str:
    """LayerNorm over the channels of an NCHW tensor: to NHWC, LayerNormalization, back."""
    y = g.layer_norm(g.op("Transpose", [x], perm=[0, 2, 3, 1]), c, eps=1e-6)
    return g.op("Transpose", [y], perm=[0, 3, 1, 2])


def _convnext_block(g: GraphBuilder, x: str, c: int) -> str:
    """7x7 depthwise conv, LN, pointwise MLP (4x) with GELU, layer scale, residual."""
    y = g.conv(x, c, c, 7, group=c, gain=1.0)
    y = g.layer_norm(g.op("Transpose", [y], perm=[0, 2, 3, 1]), c, eps=1e-6)
    y = g.linear(g.gelu_erf(g.linear(y, c, 4 * c, gain=2.0)), 4 * c, c)
    y = g.op("Mul", [y, g.uniform("layer_scale", [c], 0.1, 0.3)])
    return g.op("Add", [x, g.op("Transpose", [y], perm=[0, 3, 1, 2])])


def build_convnext(seed: int = 0) -> onnx.ModelProto:
    """ConvNeXt-style classifier: 4x4 stem, four stages of ConvNeXt blocks, LN head."""
    g = GraphBuilder("convnext_cnn", seed)
    x = g.input("images", FLOAT, ["batch", 3, "height", "width"])
    dims, depths = [32, 64, 96, 128], [1, 1, 2, 1]
    x = _ln_channels(g, g.conv(x, 3, dims[0], 4, 4, pad=0, gain=1.0), dims[0])
    for i, (c, depth) in enumerate(zip(dims, depths)):
        if i:
            x = g.conv(_ln_channels(g, x, dims[i - 1]), dims[i - 1], c, 2, 2, pad=0, gain=1.0)
        for _ in range(depth):
            x = _convnext_block(g, x, c)
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    g.output(_classifier(g, g.layer_norm(x, dims[-1], eps=1e-6), dims[-1]), "logits",
             FLOAT, ["batch", CLASSES])
    return g.model()


# -- MobileNetV3 -------------------------------------------------------------------------------
def _hard_sigmoid(g: GraphBuilder, x: str, exported: bool) -> str:
    """HardSigmoid as an op, or as older exporters wrote it: Clip(x + 3, 0, 6) / 6."""
    if not exported:
        return g.op("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)
    clipped = g.op("Clip", [g.op("Add", [x, g.scalar(3.0)]), g.scalar(0.0), g.scalar(6.0)])
    return g.op("Div", [clipped, g.scalar(6.0)])


def _act(g: GraphBuilder, x: str, kind: str) -> str:
    if kind == "relu":
        return g.op("Relu", [x])
    if kind == "hswish":
        return g.op("HardSwish", [x])
    # exported form: x * Clip(x + 3, 0, 6) / 6
    clipped = g.op("Clip", [g.op("Add", [x, g.scalar(3.0)]), g.scalar(0.0), g.scalar(6.0)])
    return g.op("Div", [g.op("Mul", [x, clipped]), g.scalar(6.0)])


def _squeeze_excite(g: GraphBuilder, x: str, c: int, exported: bool) -> str:
    s = g.op("GlobalAveragePool", [x])
    s = g.conv(g.op("Relu", [g.conv(s, c, c // 4, 1)]), c // 4, c, 1, gain=1.0)
    return g.op("Mul", [x, _hard_sigmoid(g, s, exported)])


def _inverted_residual(g: GraphBuilder, x: str, cin: int, exp: int, cout: int, k: int,
                       stride: int, se: bool, act: str) -> str:
    # gains above He's: HardSwish and the SE gate shrink activations block after block
    y = x if exp == cin else _act(g, g.conv(x, cin, exp, 1, gain=2.5), act)
    y = _act(g, g.conv(y, exp, exp, k, stride, group=exp, gain=2.5), act)
    if se:
        y = _squeeze_excite(g, y, exp, exported=act == "hswish_exported")
    y = g.conv(y, exp, cout, 1, gain=1.5)
    return g.op("Add", [x, y]) if stride == 1 and cin == cout else y


# (in, expanded, out, kernel, stride, squeeze-excite, activation)
MOBILENET_BLOCKS = [
    (16, 16, 16, 3, 2, True, "relu"),
    (16, 64, 24, 3, 2, False, "relu"),
    (24, 72, 24, 3, 1, False, "relu"),
    (24, 96, 40, 5, 2, True, "hswish"),
    (40, 120, 40, 5, 1, True, "hswish_exported"),
    (40, 144, 48, 5, 1, True, "hswish"),
    (48, 192, 96, 5, 2, True, "hswish_exported"),
    (96, 288, 96, 5, 1, True, "hswish"),
]


def build_mobilenetv3(seed: int = 0) -> onnx.ModelProto:
    """MobileNetV3-small-like: inverted residuals with SE, HardSwish (op and exported form)."""
    g = GraphBuilder("mobilenetv3_cnn", seed)
    x = g.input("images", FLOAT, ["", 3, "height", "width"])
    x = g.op("HardSwish", [g.conv(x, 3, 16, 3, 2)])
    for block in MOBILENET_BLOCKS:
        x = _inverted_residual(g, x, *block)
    x = g.op("HardSwish", [g.conv(x, 96, 288, 1)])
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    w1 = g.weight("classifier_w", [512, 288], math.sqrt(2.0 / 288))
    x = _act(g, g.op("Gemm", [x, w1, g.weight("classifier_b", [512], 0.02)], transB=1),
             "hswish_exported")
    w2 = g.weight("classifier_w", [CLASSES, 512], math.sqrt(4.0 / 512))
    logits = g.op("Gemm", [x, w2, g.weight("classifier_b", [CLASSES], 0.02)], transB=1)
    g.output(logits, "logits", FLOAT, ["", CLASSES])
    return g.model()
