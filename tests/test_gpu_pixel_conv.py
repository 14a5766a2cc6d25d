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


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 13, 6, 7), (10, 13, 1, 1), {}),                                   # no pads: no checks
    ((2, 16, 9, 9), (16, 8, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),    # aligned groups
    ((1, 8, 9, 10), (24, 4, 1, 1), {"group": 2, "strides": [2, 2]}),
    ((1, 5, 12, 11), (6, 5, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ((1, 6, 8, 9), (7, 6, 3, 3), {"pads": [0, 0, 2, 1]}),                  # end pads only
    ((1, 6, 9, 9), (5, 6, 3, 2), {"dilations": [2, 3], "strides": [1, 2]}),
    ((1, 7, 10), (9, 7, 3), {"dilations": [2], "pads": [2, 2]}),
])
@pytest.mark.parametrize("act", [None, "Relu"])
def test_conv_specialised(xs, ws, attrs, act, rng):
    from onnx import helper

    from tests.modelgen import F, model
    from tests.test_gpu_pixel_ops import run_both

    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if act else "y"], **attrs)]
    if act:
        nodes.append(helper.make_node(act, ["c"], ["y"]))
    proto = model(nodes, [("x", F, list(xs))], [("y", F, ["?"])],
                  initializers=[("w", w), ("b", b)])
    gpu, cpu = run_both(proto, {"x": rng.standard_normal(xs).astype(np.float32)})
    scale = max(1.0, float(np.abs(cpu[0]).max()))
    np.testing.assert_allclose(gpu[0], cpu[0], rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 8, 5, 37), (12, 8, 3, 3), {"pads": [1, 1, 1, 1]}),       # 8 pixels a fragment, ragged
    ((1, 4, 3, 13), (4, 4, 3, 3), {"pads": [1, 1, 1, 1]}),        # 4 pixels a fragment
    ((2, 4, 3, 9), (4, 4, 1, 3), {"strides": [1, 2], "pads": [0, 2, 0, 1]}),
    ((1, 5, 33), (6, 5, 5), {"pads": [2, 2], "dilations": [2]}),
    ((1, 4, 2, 5), (8, 4, 1, 1), {}),                                # 2 pixels a fragment
])
def test_conv_several_pixels_a_fragment(xs, ws, attrs, rng):
    bias = ("b", rng.standard_normal(ws[0]).astype(np.float32))
    w = ("w", rng.standard_normal(ws).astype(np.float32))
    check("Conv", [xs], rng, attrs, consts=[w, bias])


@pytest.mark.parametrize("shape,scales,attrs", [
    ((1, 6, 5, 7), (1, 1, 2, 2), {"mode": "nearest"}),
    ((1, 24, 20, 20), (1, 1, 8, 8), {"mode": "nearest"}),
    ((2, 5, 4, 6), (1, 1, 1.5, 0.5), {"mode": "linear"}),
    ((1, 3, 5, 6), (1, 2, 2, 1), {"mode": "linear"}),                 # the blocked axis too
    ((2, 3, 4), (1, 1, 2.5), {"mode": "cubic"}),
    ((2, 3, 4, 5), (2, 1, 1, 3), {"mode": "nearest"}),                # the batch axis
])
def test_resize_whole_texels(shape, scales, attrs, rng):
    s = ("scales", np.array(scales, np.float32))
    r = ("roi", np.zeros(0, np.float32))
    check("Resize", [shape], rng, attrs, consts=[r, s], opset=13)


@pytest.mark.parametrize("shapes", [
    [(1, 6, 5, 7), (1, 6, 5, 7), (1, 6, 5, 7), (1, 6, 5, 7)],
    [(2, 3, 4, 5), (2, 1, 4, 5), (2, 7, 4, 5)],
    [(1, 5, 9), (1, 2, 9)],
    [(1, 3, 2, 2, 3)] * 9,                                     # more than 8 inputs: two passes
])
def test_channel_concat_unaligned(shapes, rng):
    check("Concat", shapes, rng, {"axis": 1})


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 136, 6, 9), (136, 34, 1, 1), {"group": 4}),                 # shufflenet's 1x1
    ((1, 12, 7, 10), (20, 3, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ((2, 10, 5, 11), (6, 5, 3, 3), {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 9, 6, 8), (6, 3, 1, 1), {"group": 3}),
    ((1, 6, 9), (12, 2, 3), {"group": 3, "pads": [1, 1]}),
])
def test_grouped_conv_as_taps(xs, ws, attrs, rng):
    bias = ("b", rng.standard_normal(ws[0]).astype(np.float32))
    w = ("w", rng.standard_normal(ws).astype(np.float32))
    check("Conv", [xs], rng, attrs, consts=[w, bias])


@pytest.mark.parametrize("xs,k,attrs", [
    ((1, 13, 9, 21), 3, {"pads": [1, 1, 1, 1]}),
    ((2, 8, 11, 10), 5, {"pads": [2, 2, 2, 2], "strides": [2, 2]}),
    ((1, 6, 7, 30), 7, {"pads": [3, 3, 3, 3]}),
    ((1, 5, 6, 6), 3, {}),
    ((1, 7, 25), 3, {"pads": [2, 2], "dilations": [2]}),
])
def test_depthwise_as_taps(xs, k, attrs, rng):
    c = xs[1]
    ws = (c, 1, k, k) if len(xs) == 4 else (c, 1, k)
    bias = ("b", rng.standard_normal(c).astype(np.float32))
    w = ("w", rng.standard_normal(ws).astype(np.float32))
    check("Conv", [xs], rng, {"group": c, **attrs}, consts=[w, bias])


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 6, 9, 13), (6, 6, 2, 2), {"strides": [2, 2]}),              # db's deconvolution
    ((1, 5, 6, 11), (5, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                   "output_padding": [1, 1]}),
    ((2, 4, 5, 9), (4, 7, 4, 3), {"strides": [3, 2], "pads": [0, 2, 1, 0]}),
    ((1, 3, 19), (3, 5, 4), {"strides": [2], "pads": [1, 2]}),
])
def test_conv_transpose_several_pixels(xs, ws, attrs, rng):
    bias = ("b", rng.standard_normal(ws[1]).astype(np.float32))
    w = ("w", rng.standard_normal(ws).astype(np.float32))
    check("ConvTranspose", [xs], rng, attrs, consts=[w, bias])


@pytest.mark.parametrize("op,shapes,attrs", [
    ("Conv", [(1, 5, 9, 40), (6, 5, 3, 3)], {"pads": [1, 1, 1, 1]}),
    ("Conv", [(1, 4, 6, 33), (4, 1, 3, 3)], {"group": 4}),
    ("MatMul", [(2, 9, 20), (2, 20, 36)], {}),
])
def test_one_target_per_pass(op, shapes, attrs, rng, monkeypatch):
    """ENGINE_GPU_PIXEL_TARGETS=one: every pass writes one target (no column copies), with
    the results of the multi-target passes (rows wide enough for several targets)."""
    monkeypatch.setenv("ENGINE_GPU_PIXEL_TARGETS", "one")  # read when the backend is created
    from engine.backends.gpu_pixel import targets

    copies = []
    monkeypatch.setattr(targets, "copy_columns", lambda *a: copies.append(a))
    if op == "Conv":
        w = ("w", rng.standard_normal(shapes[1]).astype(np.float32))
        check(op, shapes[:1], rng, attrs, consts=[w])
    else:
        check(op, shapes, rng, attrs)
    assert not copies
