"""The CPU's direct depthwise convolutions against float64 NumPy: kernel sizes 1-7, strides
1-3, dilation, asymmetric padding, channel multipliers, batch 2, every fused epilogue
(activation, residual and the Relu after it), and NaN/Inf propagation. Every test runs on
the row kernel (``conv_depthwise``) and on the 16-channel one (``conv_dw16``, which takes
channel multiplier 1)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu import conv_dw16, conv_plan
from engine.backends.cpu import kernels_conv as kc
from engine.backends.cpu.activation import ACT_NONE, ACT_RELU, ACT_SILU, ACT_XHARDSIGMOID
from engine.model import Layer
from engine.passes.fusion import apply_activation
from tests.test_cpu_kernels import close, ref_conv


@pytest.fixture(autouse=True, params=["rows", "dw16"])
def depthwise_kernel(request, monkeypatch):
    """The kernel multiplier-1 layers get, whatever their plane size."""
    if request.param == "rows":
        monkeypatch.setattr(conv_dw16, "ENABLED", False)
    else:
        monkeypatch.setattr(conv_dw16, "MAX_POSITIONS", 1 << 30)
    return request.param


def _layer(**attrs) -> Layer:
    return Layer("dw", "Conv", ["x", "w", "b"], ["y"], attrs, opset=17)


def _case(rng, c, h, w, k, s, d, pads, mult=1, n=1):
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c * mult, 1, *k)).astype(np.float32)
    b = rng.standard_normal(c * mult).astype(np.float32)
    layer = _layer(group=c, strides=list(s), dilations=list(d), pads=list(pads),
                   kernel_shape=list(k))
    return layer, x, wt, b


GEOMETRIES = [  # (C, H, W, kernel, strides, dilations, pads)
    (5, 9, 11, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    (4, 12, 13, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    (3, 13, 12, (3, 3), (2, 2), (1, 1), (0, 1, 1, 0)),
    (6, 14, 14, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),
    (7, 15, 17, (5, 5), (2, 2), (1, 1), (2, 2, 2, 2)),
    (4, 7, 7, (7, 7), (1, 1), (1, 1), (3, 3, 3, 3)),
    (3, 11, 10, (3, 3), (1, 1), (2, 2), (2, 2, 2, 2)),
    (3, 16, 15, (3, 3), (3, 3), (1, 2), (1, 0, 2, 1)),
    (2, 9, 12, (3, 5), (1, 2), (1, 1), (1, 2, 0, 1)),
    (3, 6, 9, (1, 4), (2, 1), (1, 1), (0, 1, 0, 2)),
    (2, 5, 5, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),
    (2, 3, 4, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),   # kernel larger than the input
    (33, 7, 7, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),  # a partial 16-channel block
    (20, 19, 13, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    # whole 16-channel blocks on planes of several 16-pixel transposes and a remainder
    (48, 30, 29, (7, 7), (1, 1), (1, 1), (3, 3, 3, 3)),
    (32, 28, 28, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
]


@pytest.mark.parametrize("geo", range(len(GEOMETRIES)))
@pytest.mark.parametrize("mult,n", [(1, 1), (2, 2)])
def test_depthwise_geometries(rng, depthwise_kernel, geo, mult, n):
    c, h, w, k, s, d, pads = GEOMETRIES[geo]
    layer, x, wt, b = _case(rng, c, h, w, k, s, d, pads, mult, n)
    want = ref_conv(x, wt, b, list(s), list(pads), list(d), c)
    close(kc.Conv(layer, [x, wt, b]), want)
    dw16 = depthwise_kernel == "dw16" and mult == 1
    assert layer._cpu_conv_plan.kind == ("dw16" if dw16 else "depthwise")
    close(kc.Conv(layer, [x, wt]), ref_conv(x, wt, None, list(s), list(pads), list(d), c))


@pytest.mark.parametrize("act,params", [("Relu", []), ("LeakyRelu", [0.1]),
                                        ("Clip", [-0.5, 0.7]), ("Sigmoid", []),
                                        ("HardSigmoid", [0.3, 0.4]), ("Tanh", [])])
def test_depthwise_fused_activation(rng, act, params):
    layer, x, wt, b = _case(rng, 6, 11, 10, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), n=2)
    layer.attributes.update(activation=act, activation_params=params)
    want = apply_activation(ref_conv(x, wt, b, [2, 2], [1, 1, 1, 1], [1, 1], 6), act, params)
    close(kc.Conv(layer, [x, wt, b]), want)


def _silu(v):
    return v / (1 + np.exp(-v))


@pytest.mark.parametrize("act,post", [(ACT_NONE, ACT_NONE), (ACT_NONE, ACT_RELU),
                                      (ACT_SILU, ACT_NONE), (ACT_XHARDSIGMOID, ACT_RELU)])
def test_depthwise_residual_epilogue(rng, act, post):
    layer, x, wt, b = _case(rng, 5, 10, 9, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), n=2)
    res = rng.standard_normal(x.shape).astype(np.float32)
    y = ref_conv(x, wt, b, [1, 1], [2, 2, 2, 2], [1, 1], 5)
    if act == ACT_SILU:
        y = _silu(y)
    elif act == ACT_XHARDSIGMOID:
        y = y * np.clip(y * 0.2 + 0.5, 0, 1)
    y = y + res
    if post == ACT_RELU:
        y = np.maximum(y, 0)
    pa = (act, 0.2, 0.5) if act != ACT_NONE else None
    got = kc.conv(layer, [x, wt, b], act=pa, res=res, post=(post, 0.0, 0.0))
    close(got, y)


@pytest.mark.parametrize("s", [1, 2])
def test_depthwise_nan_inf(rng, s):
    """A NaN or Inf reaches exactly the outputs whose window holds it (through the fused
    Relu too), as in a direct float64 convolution."""
    layer, x, wt, b = _case(rng, 4, 12, 11, (3, 3), (s, s), (1, 1), (1, 1, 1, 1), n=2)
    layer.attributes.update(activation="Relu")
    x[0, 1, 3, 4] = np.nan
    x[1, 2, 0, 10] = np.inf
    x[1, 3, 11, 0] = -np.inf
    want = np.maximum(ref_conv(x.astype(np.float64), wt, b, [s, s], [1, 1, 1, 1], [1, 1], 4), 0)
    got = kc.Conv(layer, [x, wt, b])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    close(np.where(fin, got, 0), np.where(fin, want, 0))


def test_depthwise_rule(rng, monkeypatch):
    """The 16-channel kernel takes multiplier-1 layers with at most MAX_POSITIONS outputs,
    5x5 and larger kernels, and strided ones with MIN_STRIDED_CHANNELS channels or more."""
    monkeypatch.undo()
    for side, c, k, s, mult, kind in ((7, 24, 3, 1, 1, "dw16"), (28, 24, 3, 1, 1, "dw16"),
                                      (40, 24, 3, 1, 1, "depthwise"), (40, 24, 5, 1, 1, "dw16"),
                                      (80, 32, 3, 2, 1, "dw16"), (80, 24, 3, 2, 1, "depthwise"),
                                      (7, 24, 3, 1, 2, "depthwise")):
        p = k // 2
        layer, x, wt, b = _case(rng, c, side, side, (k, k), (s, s), (1, 1), (p, p, p, p),
                                mult)
        got = kc.Conv(layer, [x, wt, b])
        assert layer._cpu_conv_plan.kind == kind, (side, c, k, s, mult)
        close(got, ref_conv(x, wt, b, [s, s], [p, p, p, p], [1, 1], c))


def test_depthwise_many_channels_split_over_threads(rng):
    """Enough work that the channels are split into chunks over the backend's threads."""
    layer, x, wt, b = _case(rng, 96, 30, 30, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1))
    saved = conv_plan.DW_CHUNK_MACS, conv_dw16.CHUNK_MACS
    conv_plan.DW_CHUNK_MACS = conv_dw16.CHUNK_MACS = 20_000
    try:
        got = kc.Conv(layer, [x, wt, b])
    finally:
        conv_plan.DW_CHUNK_MACS, conv_dw16.CHUNK_MACS = saved
    close(got, ref_conv(x, wt, b, [1, 1], [1, 1, 1, 1], [1, 1], 96))

