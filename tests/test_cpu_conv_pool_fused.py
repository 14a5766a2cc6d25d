"""Conv -> non-overlapping MaxPool run as one CPU step (``conv_pool_fused``), against
onnxruntime on fresh random data, and against the unfused layers with NaN and Inf."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker
from engine.backends.cpu import kernels_conv


def _model(x_shape, m, act, pool_attrs, k=3):
    c = x_shape[1]
    rng = np.random.default_rng(sum(x_shape) + m)
    inits = [numpy_helper.from_array(rng.normal(0, 0.4, (m, c, k, k)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(0, 0.4, m).astype(np.float32), "b"),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], kernel_shape=[k, k],
                              pads=[k // 2] * 4)]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["t"], ["a"]))
    elif act == "Clip":
        nodes.append(helper.make_node("Clip", ["t", "lo", "hi"], ["a"]))
    elif act == "LeakyRelu":
        nodes.append(helper.make_node("LeakyRelu", ["t"], ["a"], alpha=0.1))
    elif act == "SiLU":
        nodes += [helper.make_node("Sigmoid", ["t"], ["s"]),
                  helper.make_node("Mul", ["t", "s"], ["a"])]
    src = "t" if act is None else "a"
    nodes.append(helper.make_node("MaxPool", [src], ["y"], **pool_attrs))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(proto, feeds, monkeypatch):
    """(fused output, unfused output, whether the pooled kernel ran)."""
    pooled = []
    real = kernels_conv._conv_pooled

    def spy(*args):
        result = real(*args)
        pooled.append(result is not None)
        return result

    monkeypatch.setattr(kernels_conv, "_conv_pooled", spy)
    with Worker(ModelLoader.from_proto(proto), "cpu") as worker:
        worker.schedule(feeds)
        fused = worker.peek_output("y").download_to_array()
        worker.schedule(feeds, capture="all")  # captures run the unfused plan
        unfused = worker.peek_output("y").download_to_array()
    return fused, unfused, any(pooled)


@pytest.mark.parametrize("x_shape,m,act,window", [
    ((1, 6, 9, 9), 8, "Relu", 2),         # odd plane: the last row and column dropped
    ((1, 6, 40, 36), 20, "Relu", 2),      # several row blocks, a partial channel block
    ((2, 3, 24, 30), 16, "Clip", 2),      # batch 2, a 3-channel stem with Relu6
    ((1, 5, 14, 22), 12, "LeakyRelu", 2),
    ((1, 4, 18, 20), 8, None, 3),          # 3x3 windows, no activation
    ((1, 8, 12, 10), 16, "Relu", (2, 1)),  # a recognizer's 2x1 pool
    # rows of 16 pooled values or more take the vector path, with a tail of single values
    ((1, 6, 8, 70), 16, None, 2),
    ((1, 8, 12, 40), 16, "Relu", (2, 1)),
    ((1, 3, 10, 128), 8, "Relu", 2),
])
def test_fused_conv_maxpool_matches_onnxruntime(x_shape, m, act, window, monkeypatch):
    kh, kw = (window, window) if isinstance(window, int) else window
    proto = _model(x_shape, m, act, {"kernel_shape": [kh, kw], "strides": [kh, kw]})
    x = np.random.default_rng(7).normal(0, 1, x_shape).astype(np.float32)
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    fused, unfused, ran = _run(proto, {"x": x}, monkeypatch)
    assert ran, "the pooled convolution kernel did not run"
    np.testing.assert_allclose(fused, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(unfused, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("width,window,act", [(16, (2, 2), "Relu"), (72, (2, 2), "Relu"),
                                              (72, (2, 1), None), (40, (2, 1), "Relu")])
def test_nan_and_inf_pool_as_the_layers_do(width, window, act, monkeypatch):
    proto = _model((1, 4, 16, width), 8, act, {"kernel_shape": list(window),
                                               "strides": list(window)})
    x = np.random.default_rng(8).normal(0, 1, (1, 4, 16, width)).astype(np.float32)
    x[0, 1, 3, 5] = np.nan
    x[0, 2, 9, 1] = np.inf
    x[0, 0, 12, 12] = -np.inf
    x[0, 3, 6, width - 2] = np.nan  # in the row's tail of single values
    fused, unfused, ran = _run(proto, {"x": x}, monkeypatch)
    assert ran
    assert np.isnan(fused).any() and np.array_equal(np.isnan(fused), np.isnan(unfused))
    np.testing.assert_array_equal(fused[~np.isnan(fused)], unfused[~np.isnan(unfused)])


@pytest.mark.parametrize("act,pool_attrs", [
    ("SiLU", {"kernel_shape": [2, 2], "strides": [2, 2]}),  # not monotone: declined
    ("Relu", {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("Relu", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("Relu", {"kernel_shape": [3, 3], "strides": [2, 2]}),  # overlapping windows
])
def test_pools_the_kernel_cannot_take_run_as_layers(act, pool_attrs, monkeypatch):
    proto = _model((1, 6, 11, 13), 8, act, pool_attrs)
    x = np.random.default_rng(9).normal(0, 1, (1, 6, 11, 13)).astype(np.float32)
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    fused, unfused, ran = _run(proto, {"x": x}, monkeypatch)
    assert not ran
    np.testing.assert_allclose(fused, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(unfused, want, rtol=1e-4, atol=1e-5)
