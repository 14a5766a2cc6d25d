"""Patchify convolutions (kernel = stride: ConvNeXt's and ViT's stems) on the channel-blocked
dense kernel (``conv_plan``'s "dense" kind, small patches) and as patch rows times the
weights (the "patches" kind, deep patches), against onnxruntime on fresh random data: planes
that the stride does not divide, padding, batches, fused activations, NaN and Inf, and a
residual."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker
from engine.backends.cpu import conv_pointwise


@pytest.fixture(autouse=True)
def _kernels_of_this_file(monkeypatch):
    """The small patchify layers here would run as 1x1 convolutions of their patches
    (``test_cpu_conv_pointwise``); these tests are about the dense and register-blocked
    kernels, which take them otherwise."""
    monkeypatch.setattr(conv_pointwise, "PATCHES", False)


def _model(rng, c, m, k, pads=0, act=None, residual=False):
    w = rng.normal(0, 0.3, (m, c, k, k)).astype(np.float32)
    b = rng.normal(0, 0.3, m).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], kernel_shape=[k, k],
                              strides=[k, k], pads=[pads] * 4)]
    y = "t"
    if act:
        nodes.append(helper.make_node(act, [y], ["a"]))
        y = "a"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, "h", "w"])]
    if residual:
        nodes.append(helper.make_node("Add", [y, "r"], ["s"]))
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, ["n", m, "p", "q"]))
        y = "s"
    nodes.append(helper.make_node("Identity", [y], ["y"]))
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", m, "a", "b"])
    graph = helper.make_graph(nodes, "g", inputs, [out],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _check(proto, feeds, kind="dense"):
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    model = ModelLoader.from_proto(proto)
    with Worker(model, "cpu") as worker:
        worker.schedule(feeds)
        got = worker.peek_output("y").download_to_array()
    conv = next(la for la in model.layers if la.op_type == "Conv")
    assert conv.__dict__["_cpu_conv_plan"].kind == kind
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("c,m,k,shape", [(3, 32, 4, (1, 3, 64, 64)), (3, 24, 4, (2, 3, 30, 35)),
                                         (2, 40, 2, (1, 2, 17, 16)), (8, 16, 3, (1, 8, 20, 23)),
                                         (3, 48, 8, (1, 3, 64, 48))])
def test_patchify_matches_onnxruntime(rng, c, m, k, shape):
    proto = _model(rng, c, m, k)
    _check(proto, {"x": rng.standard_normal(shape).astype(np.float32)})


@pytest.mark.parametrize("c,m,k,shape", [(3, 48, 16, (1, 3, 64, 48)), (3, 20, 16, (2, 3, 70, 35)),
                                         (9, 24, 8, (1, 9, 40, 41)), (2, 16, 12, (1, 2, 50, 37))])
def test_deep_patches_as_rows(rng, c, m, k, shape):
    """ViT's 16 x 16 patches: one copy into patch rows, one product (planes the stride does
    not divide drop their last rows and columns, as the convolution does)."""
    _check(_model(rng, c, m, k), {"x": rng.standard_normal(shape).astype(np.float32)},
           "patches")


@pytest.mark.parametrize("act", ["Relu", "Sigmoid", None])
def test_deep_patches_fused_epilogues_and_special_values(rng, act):
    x = rng.standard_normal((2, 3, 32, 48)).astype(np.float32)
    x[0, 1, 3, 4], x[1, 2, 30, 47] = np.nan, np.inf
    _check(_model(rng, 3, 24, 16, act=act), {"x": x}, "patches")
    feeds = {"x": x, "r": rng.standard_normal((2, 24, 2, 3)).astype(np.float32)}
    _check(_model(rng, 3, 24, 16, act=act, residual=True), feeds, "patches")


def test_padded_deep_patches_stay_register_blocked(rng):
    proto = _model(rng, 3, 16, 16, pads=2)
    _check(proto, {"x": rng.standard_normal((1, 3, 60, 44)).astype(np.float32)}, "blocked")


@pytest.mark.parametrize("act", ["Relu", "HardSwish", "LeakyRelu", "Sigmoid", "Tanh"])
def test_fused_activations_and_padding(rng, act):
    proto = _model(rng, 3, 20, 4, pads=1, act=act)
    _check(proto, {"x": (rng.standard_normal((1, 3, 33, 29)) * 3).astype(np.float32)})


def test_nan_and_inf(rng):
    proto = _model(rng, 3, 32, 4)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    x[0, 0, 5, 6], x[0, 2, 20, 30] = np.nan, np.inf
    _check(proto, {"x": x})


def test_fused_residual_runs_on_the_register_blocked_kernel(rng):
    proto = _model(rng, 3, 16, 4, residual=True)
    feeds = {"x": rng.standard_normal((1, 3, 32, 32)).astype(np.float32),
             "r": rng.standard_normal((1, 16, 8, 8)).astype(np.float32)}
    _check(proto, feeds)
