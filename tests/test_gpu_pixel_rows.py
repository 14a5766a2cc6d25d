"""GPU_PIXEL's row statistics (Softmax, LogSoftmax, LayerNormalization, ReduceSum and
ReduceMean over the last axis) in one pass per row (CPU adapters) and in two levels of
chunks (GPUs), each forced with ENGINE_GPU_ROWS, against NumPy in float64 and the ONNX
reference: rows of every rank's layout, long and short, and lines with NaN and infinities."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from engine import ModelLoader, Worker

pytestmark = pytest.mark.usefixtures("require_gpu")
STRATEGIES = ["thread", "workgroup"]
SHAPES = [(3, 1500), (2, 300, 700), (1, 6, 40, 1500), (5, 130), (2, 3, 520)]


def _model(op, x, attrs, weights=(), out_shape=None, opset=18):
    inits = [numpy_helper.from_array(w, f"w{k}") for k, w in enumerate(weights)]
    names = ["x"] + [f"w{k}" for k in range(len(weights))]
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       list(out_shape or x.shape))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run(proto, x, strategy, monkeypatch):
    monkeypatch.setenv("ENGINE_GPU_ROWS", strategy)  # read when the backend is created
    with Worker(ModelLoader.from_proto(proto), "gpu-pixel") as worker:
        got = worker.schedule({"x": x}).peek_output("y").download_to_array()
        assert {t.backend for t in worker.last_profile.layers} == {"gpu-pixel"}
    return got


def _reference(proto, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ReferenceEvaluator(proto).run(None, {"x": x})[0]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_rows(op, shape, strategy, rng, monkeypatch):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x64 = x.astype(np.float64)
    top = x64.max(-1, keepdims=True)
    lse = np.log(np.exp(x64 - top).sum(-1, keepdims=True))
    want = x64 - top - lse if op == "LogSoftmax" else np.exp(x64 - top - lse)
    got = _run(_model(op, x, {"axis": -1}), x, strategy, monkeypatch)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_rows_special_values(op, strategy, rng, monkeypatch):
    """A NaN, a +inf, a row of -inf, a chunk of -inf beside finite values."""
    x = rng.standard_normal((2, 5, 1100)).astype(np.float32)
    x[0, 0, 77] = np.nan
    x[0, 1, 1000] = np.inf
    x[0, 2, :] = -np.inf
    x[0, 3, 300:600] = -np.inf
    x[1, 4, ::3] = -np.inf
    proto = _model(op, x, {"axis": -1})
    got = _run(proto, x, strategy, monkeypatch)
    np.testing.assert_allclose(got, _reference(proto, x), rtol=1e-4, atol=1e-5,
                               equal_nan=True)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("shape", SHAPES)
def test_layernorm_rows(shape, strategy, rng, monkeypatch):
    x = (rng.standard_normal(shape) * 3 + 2.0).astype(np.float32)
    scale = rng.standard_normal(shape[-1:]).astype(np.float32)
    bias = rng.standard_normal(shape[-1:]).astype(np.float32)
    proto = _model("LayerNormalization", x, {"axis": -1, "epsilon": 1e-5}, [scale, bias])
    got = _run(proto, x, strategy, monkeypatch)
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = x64.var(-1, keepdims=True)
    np.testing.assert_allclose(got, (x64 - mean) / np.sqrt(var + 1e-5) * scale + bias,
                               rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("shape", [(2, 300, 700), (1, 6, 40, 1500), (2, 3, 520)])
def test_reduce_last_axis_rows(op, shape, strategy, rng, monkeypatch):
    x = (rng.standard_normal(shape) + 0.5).astype(np.float32)
    axes = np.array([-1], np.int64)
    out = shape[:-1] + (1,)
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out))],
        [numpy_helper.from_array(axes, "axes")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    got = _run(proto, x, strategy, monkeypatch)
    x64 = x.astype(np.float64)
    want = x64.sum(-1, keepdims=True) if op == "ReduceSum" else x64.mean(-1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
