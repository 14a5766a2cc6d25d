"""GPU_PIXEL's specialised convolution, ConvTranspose, Softmax and Resize passes against the
CPU backend: odd channel counts, strides, dilations, pads, 1-D, fused activations."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_gpu_pixel_ops import check

pytestmark = pytest.mark.usefixtures("require_gpu")


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 6, 5, 7), (6, 5, 2, 2), {"strides": [2, 2]}),
    ((2, 3, 5, 6), (3, 4, 3, 3), {}),
    ((1, 3, 5, 6), (3, 4, 3, 3), {"strides": [2, 3], "output_padding": [1, 2]}),
    ((1, 9, 5, 6), (9, 7, 3, 3), {"strides": [2, 2], "pads": [1, 0, 2, 1]}),
    ((1, 5, 4, 6), (5, 2, 3, 2), {"dilations": [2, 3], "strides": [2, 1]}),
    ((1, 3, 5, 6), (3, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 7), (3, 2, 4), {"strides": [3], "pads": [1, 2]}),
    ((1, 4, 5, 6), (4, 2, 3, 2), {"group": 2, "dilations": [2, 3]}),
])
def test_conv_transpose(xs, ws, attrs, rng):
    bias = ("b", rng.standard_normal(ws[1] * attrs.get("group", 1)).astype(np.float32))
    w = ("w", rng.standard_normal(ws).astype(np.float32))
    check("ConvTranspose", [xs], rng, attrs, consts=[w, bias])


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape,axis", [((1, 16, 4, 21), 1), ((2, 7, 3, 5), 1), ((2, 6, 5), 1),
                                        ((2, 5, 3, 6), 2), ((3, 5, 6), -3), ((1, 9, 2, 3, 4), 3)])
def test_softmax_off_x(op, shape, axis, rng):
    check(op, [shape], rng, {"axis": axis}, opset=13)
