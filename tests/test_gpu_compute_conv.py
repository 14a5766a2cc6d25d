"""Parity of GPU_COMPUTE's convolutions and pools with the CPU backend on fresh random data:
every conv strategy (implicit GEMM, im2col, direct rows), grouped and depthwise, padding,
strides, dilation, unaligned channel counts and maps, ConvTranspose (including kernel ==
stride as one matmul), and the pools. Split from test_gpu_compute_ops.py."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_compute_util import Const, assert_close, one_node, run_both

pytestmark = pytest.mark.usefixtures("require_gpu")


CONV = [
    ((1, 3, 11, 13), (8, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 8, 9, 7), (12, 8, 1, 1), {}),
    ((1, 16, 10, 9), (16, 1, 3, 3), {"group": 16, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 6, 10, 9), (12, 2, 3, 3), {"group": 3, "pads": [0, 1, 2, 1], "dilations": [2, 1]}),
    ((1, 8, 10, 9), (8, 4, 3, 3), {"group": 2, "strides": [2, 1], "auto_pad": "SAME_UPPER"}),
    ((1, 4, 13), (5, 4, 3), {"pads": [1, 2], "strides": [2]}),
    ((1, 5, 15, 14), (9, 5, 5, 5), {"pads": [2, 2, 2, 2], "strides": [2, 2]}),
    ((1, 6, 7, 7), (7, 6, 1, 1), {"strides": [2, 2]}),
    ((2, 12, 6, 5), (9, 4, 1, 1), {"group": 3}),
    ((2, 6, 7, 6), (6, 2, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    # pointwise, channels (per group) not a multiple of 4: weights padded to vec4 rows
    ((2, 15, 6, 5), (9, 5, 1, 1), {"group": 3}),
    ((1, 6, 5, 7), (10, 6, 1, 1), {}),
    # pointwise over a map whose size is not a multiple of 4: rows padded for vec4 loads
    ((2, 20, 5, 7), (12, 20, 1, 1), {}),
    ((2, 36, 3, 5), (8, 18, 1, 1), {"group": 2}),
    # few output channels (conv_rows.wgsl on CPU adapters): two images, M not a multiple of 4
    ((2, 5, 9, 23), (6, 5, 3, 3), {"pads": [1, 0, 1, 2]}),
    # ... and at stride 2 (a 3-channel stem with 8 outputs: rows under im2col as well)
    ((1, 3, 17, 19), (8, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    # depthwise (conv_depthwise.wgsl): widths not a multiple of its 4-output runs, asymmetric
    # pads, strides, a channel multiplier, 1-D, and a dilation (conv_direct.wgsl)
    ((2, 5, 9, 11), (5, 1, 5, 5), {"group": 5, "pads": [2, 1, 2, 3]}),
    ((1, 3, 13, 6), (6, 1, 7, 3), {"group": 3, "pads": [3, 1, 3, 1], "strides": [1, 2]}),
    ((1, 4, 12, 14), (4, 1, 3, 5), {"group": 4, "pads": [0, 2, 1, 2], "strides": [2, 3]}),
    ((1, 6, 17), (6, 1, 3), {"group": 6, "pads": [1, 1]}),
    ((1, 4, 9, 10), (4, 1, 3, 3), {"group": 4, "pads": [2, 2, 2, 2], "dilations": [2, 2]}),
]


@pytest.mark.parametrize("strategy", ["implicit", "im2col", "rows"])
@pytest.mark.parametrize("xs,ws,attrs", CONV)
def test_conv(xs, ws, attrs, strategy, rng, monkeypatch):
    monkeypatch.setenv("ENGINE_GPU_CONV", strategy)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    assert_close(*run_both(*one_node("Conv", [x, Const(w), Const(b)], attrs)), 2e-4, 2e-5)
    # weights that are not constants go through the GPU re-layout path
    assert_close(*run_both(*one_node("Conv", [x, w], attrs)), 2e-4, 2e-5)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 4, 5, 5), (4, 6, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                  "output_padding": [1, 1]}),
    ((2, 6, 4, 3), (6, 2, 3, 2), {"group": 3, "strides": [2, 3]}),
    ((1, 3, 6), (3, 2, 4), {"strides": [2]}),
    ((1, 6, 9, 7), (6, 5, 2, 2), {"strides": [2, 2]}),  # a decoder's 2x upsampling
    ((2, 4, 5, 6), (4, 3, 3, 3), {"pads": [1, 0, 2, 1]}),  # stride 1, uneven pads
    ((1, 3, 4, 5), (3, 2, 1, 2), {"strides": [3, 2], "output_padding": [2, 1]}),  # k < s
    ((1, 4, 5, 5), (4, 2, 3, 3), {"dilations": [2, 1], "strides": [2, 2]}),  # the gather
    # kernel == strides: a matmul, then the blocks interleaved (two images, 1-D)
    ((2, 5, 4, 6), (5, 3, 3, 3), {"strides": [3, 3]}),
    ((2, 4, 7), (4, 3, 2), {"strides": [2]}),
])
def test_conv_transpose(xs, ws, attrs, rng):
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[1] * attrs.get("group", 1)).astype(np.float32)
    assert_close(*run_both(*one_node("ConvTranspose", [x, Const(w)], attrs)), 2e-4, 2e-5)
    assert_close(*run_both(*one_node("ConvTranspose", [x, Const(w), Const(b)], attrs)),
                 2e-4, 2e-5)
    # weights computed at run time: the phase shader
    assert_close(*run_both(*one_node("ConvTranspose", [x, w], attrs)), 2e-4, 2e-5)


POOL = [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [2, 3], "strides": [2, 1], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER"}),
    ("LpPool", {"kernel_shape": [2, 2], "p": 3}),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {}),
    # pool_rows.wgsl: ceil mode with the padded count, a stride longer than the window, a
    # window sliding over many taps; a dilation (pool2d.wgsl)
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 1],
                     "ceil_mode": 1, "count_include_pad": 1}),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [3, 3], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2]}),
]


@pytest.mark.parametrize("op,attrs", POOL)
def test_pool(op, attrs, rng):
    x = rng.standard_normal((2, 3, int(rng.integers(7, 12)), int(rng.integers(7, 12))))
    assert_close(*run_both(*one_node(op, [x.astype(np.float32)], attrs, opset=18)))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_1d(op, rng):
    x = rng.standard_normal((2, 3, 19)).astype(np.float32)
    attrs = {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}
    assert_close(*run_both(*one_node(op, [x], attrs, opset=18)))
