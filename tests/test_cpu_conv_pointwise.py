"""1x1 convolutions on the pixel-vectorised kernel (``conv_pointwise``) against onnxruntime
and float64 NumPy on fresh random data: pixel counts that 48 does not divide (the padded
last run), batches, no bias, the ReLU in the registers, other activations and a residual in
the epilogue, NaN, one thread and two, and the layers it leaves to sgemm."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker, executor
from engine.backends.cpu import conv_pointwise, threads
from engine.backends.cpu.activation import ACT_NONE, ACT_RELU


def _model(rng, c, m, act=None, bias=True, residual=False):
    w = rng.normal(0, 0.3, (m, c, 1, 1)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    names = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.normal(0, 0.3, m).astype(np.float32), "b"))
        names.append("b")
    nodes = [helper.make_node("Conv", names, ["t"], kernel_shape=[1, 1])]
    y = "t"
    if act == "LeakyRelu":
        nodes.append(helper.make_node(act, [y], ["a"], alpha=0.1))
        y = "a"
    elif act:
        nodes.append(helper.make_node(act, [y], ["a"]))
        y = "a"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, "h", "w"])]
    if residual:
        nodes.append(helper.make_node("Add", [y, "r"], ["s"]))
        nodes.append(helper.make_node("Relu", ["s"], ["u"]))
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, ["n", m, "h", "w"]))
        y = "u"
    nodes.append(helper.make_node("Identity", [y], ["y"]))
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", m, "a", "b"])
    graph = helper.make_graph(nodes, "g", inputs, [out], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _check(proto, feeds, here=True):
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    model = ModelLoader.from_proto(proto)
    with Worker(model, "cpu") as worker:
        for _ in range(2):  # (the second run reuses the plan and its packed weights)
            worker.schedule(feeds)
            got = worker.peek_output("y").download_to_array()
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    conv = next(la for la in model.layers if la.op_type == "Conv")
    assert (conv.__dict__["_cpu_conv_plan"].pwp is not None) == here


@pytest.mark.parametrize("c,m,shape", [(64, 16, (1, 64, 55, 55)), (16, 64, (1, 16, 13, 13)),
                                       (32, 24, (2, 32, 7, 9)), (200, 48, (1, 200, 9, 11)),
                                       (24, 256, (1, 24, 20, 20)), (8, 8, (3, 8, 4, 12))])
@pytest.mark.parametrize("act", [None, "Relu", "LeakyRelu", "Sigmoid"])
def test_pointwise_matches_onnxruntime(rng, c, m, shape, act):
    proto = _model(rng, c, m, act)
    _check(proto, {"x": rng.standard_normal(shape).astype(np.float32)})


def test_pointwise_without_bias_and_with_a_residual(rng):
    x = rng.standard_normal((2, 40, 10, 13)).astype(np.float32)
    _check(_model(rng, 40, 32, "Relu", bias=False), {"x": x})
    r = rng.standard_normal((2, 32, 10, 13)).astype(np.float32)
    _check(_model(rng, 40, 32, residual=True), {"x": x, "r": r})


def test_pointwise_keeps_nan_and_inf(rng):
    x = rng.standard_normal((1, 16, 12, 12)).astype(np.float32)
    x[0, 3, 5, 7] = np.nan
    x[0, 5, 0, 2] = np.inf
    x[0, 2, 11, 11] = np.nan  # in the padded last run of pixels
    _check(_model(rng, 16, 16, "Relu"), {"x": x})


def test_wide_and_deep_products_stay_with_sgemm(rng):
    assert not conv_pointwise.wanted(512, 128, 784)  # deep and wide
    assert not conv_pointwise.wanted(64, 20, 784)  # not a multiple of 8 channels
    assert not conv_pointwise.wanted(64, 64, 40)  # fewer pixels than one register tile
    _check(_model(rng, 300, 72, "Relu"), {"x": rng.standard_normal((1, 300, 9, 9))
                                          .astype(np.float32)}, here=False)


@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("act", [ACT_NONE, ACT_RELU])
def test_run_against_float64(rng, nt, act):
    """The kernel itself, split over the threads or not, against float64 NumPy on a layer
    large enough to be split (4.7M multiply-adds)."""
    C, M, P = 96, 40, 1223
    w = rng.standard_normal((M, C)).astype(np.float32)
    x = rng.standard_normal((C, P)).astype(np.float32)
    b = rng.standard_normal(M).astype(np.float32)
    params = np.zeros(2, np.float32)
    y = np.full((M, P), np.nan, np.float32)

    def run():
        before = threads.threads()
        threads.set_threads(nt)
        try:
            conv_pointwise.run(conv_pointwise.pack(w), x, y, b, act, params)
        finally:
            threads.set_threads(before)

    executor.call(run)
    want = w.astype(np.float64) @ x + b[:, None]
    if act == ACT_RELU:
        want = np.maximum(want, 0.0)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)


def _patchify(rng, c, m, k, act=None):
    w = rng.normal(0, 0.3, (m, c, k, k)).astype(np.float32)
    b = rng.normal(0, 0.3, m).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], kernel_shape=[k, k],
                              strides=[k, k])]
    y = "t"
    if act:
        nodes.append(helper.make_node(act, [y], ["a"]))
        y = "a"
    nodes.append(helper.make_node("Identity", [y], ["y"]))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", m, "a", "b"])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("c,m,k,shape", [(12, 32, 4, (1, 12, 64, 64)),
                                         (32, 64, 2, (1, 32, 28, 28)),
                                         (64, 96, 2, (2, 64, 15, 17)),
                                         (16, 24, 3, (1, 16, 37, 40))])
@pytest.mark.parametrize("act", [None, "Relu", "Sigmoid"])
def test_patchify_as_pointwise_matches_onnxruntime(rng, c, m, k, shape, act):
    """ConvNeXt's downsampling layers (kernel = stride) as a 1x1 convolution of their
    patches, planes the stride does not divide included."""
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    proto = _patchify(rng, c, m, k, act)
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    model = ModelLoader.from_proto(proto)
    with Worker(model, "cpu") as worker:
        worker.schedule({"x": x})
        got = worker.peek_output("y").download_to_array()
    assert model.layers[0].__dict__["_cpu_conv_plan"].kind == "patch_rows"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
