"""GPU_COMPUTE's two ways along rows (Softmax, LogSoftmax, Layer-, Instance- and
GroupNormalization, the global pools' planes): one invocation per row (CPU adapters) and
one workgroup per row (GPUs), each forced with ENGINE_GPU_ROWS and checked against NumPy in
float64, rows long and short, of lengths that are and are not multiples of the workgroup,
and lines holding NaN and infinities."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from engine import ModelLoader, Worker

pytestmark = pytest.mark.usefixtures("require_gpu")
STRATEGIES = ["thread", "workgroup"]


def _model(op, x, attrs, weights=()):
    inits = [numpy_helper.from_array(w, f"w{k}") for k, w in enumerate(weights)]
    node = helper.make_node(op, ["x"] + [f"w{k}" for k in range(len(weights))], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _run(proto, x, strategy, monkeypatch):
    monkeypatch.setenv("ENGINE_GPU_ROWS", strategy)  # read when the backend is created
    with Worker(ModelLoader.from_proto(proto), "gpu-compute") as worker:
        got = worker.schedule({"x": x}).peek_output("y").download_to_array()
        assert {t.backend for t in worker.last_profile.layers} == {"gpu-compute"}
    return got


def _softmax64(x, log):
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        top = x.max(axis=-1, keepdims=True)
        e = np.exp(x - top)
        s = e.sum(axis=-1, keepdims=True)
        return x - top - np.log(s) if log else e / s


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(3, 1500), (2, 4, 64), (5, 200), (7, 63), (130, 65), (1, 1)])
def test_softmax_rows(op, shape, strategy, rng, monkeypatch):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    got = _run(_model(op, x, {"axis": -1}), x, strategy, monkeypatch)
    # f32 sums of 1500 exponentials: a few 1e-6 relative, in LogSoftmax an absolute error
    np.testing.assert_allclose(got, _softmax64(x, op == "LogSoftmax"), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_rows_special_values(op, strategy, rng, monkeypatch):
    """Lines with a NaN, a +inf, all -inf, -inf beside finite values, the maximum repeated,
    as the ONNX reference evaluator computes them."""
    x = rng.standard_normal((6, 150)).astype(np.float32)
    x[0, 77] = np.nan
    x[1, 3] = np.inf
    x[2, :] = -np.inf
    x[3, ::7] = -np.inf
    x[4, 10:140:3] = 5.0
    x[5, 149] = np.nan
    proto = _model(op, x, {"axis": -1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = ReferenceEvaluator(proto).run(None, {"x": x})[0]
    got = _run(proto, x, strategy, monkeypatch)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, equal_nan=True)


def _layernorm64(x, axis, scale, bias, eps):
    x = x.astype(np.float64)
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("shape,axis", [((2, 64, 256), -1), ((3, 50, 96), -1), ((4, 7, 9), 1),
                                        ((1, 3, 770), -1), ((65, 40), -1)])
def test_layernorm_rows(shape, axis, strategy, rng, monkeypatch):
    x = (rng.standard_normal(shape) * 3 + 1.5).astype(np.float32)
    norm = shape[axis:] if axis >= 0 else shape[axis:]
    scale = rng.standard_normal(norm).astype(np.float32)
    bias = rng.standard_normal(norm).astype(np.float32)
    proto = _model("LayerNormalization", x, {"axis": axis, "epsilon": 1e-5}, [scale, bias])
    got = _run(proto, x, strategy, monkeypatch)
    want = _layernorm64(x, axis % len(shape), scale, bias, 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_instance_and_group_norm_rows(strategy, rng, monkeypatch):
    x = (rng.standard_normal((2, 6, 9, 11)) * 2 - 0.5).astype(np.float32)
    scale = rng.standard_normal(6).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    got = _run(_model("InstanceNormalization", x, {"epsilon": 1e-5}, [scale, bias]), x,
               strategy, monkeypatch)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(2, 3), keepdims=True)
    var = x64.var(axis=(2, 3), keepdims=True)
    want = (x64 - mean) / np.sqrt(var + 1e-5) * scale[:, None, None] + bias[:, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    proto = helper.make_model(helper.make_graph(
        [helper.make_node("GroupNormalization", ["x", "w0", "w1"], ["y"], num_groups=3,
                          epsilon=1e-5)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))],
        [numpy_helper.from_array(scale, "w0"), numpy_helper.from_array(bias, "w1")]),
        opset_imports=[helper.make_opsetid("", 21)])
    got = _run(proto, x, strategy, monkeypatch)
    g = x64.reshape(2, 3, -1)
    gn = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)
    want = gn.reshape(x.shape) * scale[:, None, None] + bias[:, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 72, 28, 28), (1, 960, 7, 7), (1, 16, 56, 56),
                                   (3, 5, 8, 8), (1, 4, 1, 65), (1, 3, 2, 3)])
def test_global_pool_planes(op, shape, strategy, rng, monkeypatch):
    """Planes shorter and longer than the workgroup, and than the two-pass split's 1024."""
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    node = helper.make_node(op, ["x"], ["y"])
    out = list(shape[:2]) + [1, 1]
    proto = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)]),
        opset_imports=[helper.make_opsetid("", 18)])
    got = _run(proto, x, strategy, monkeypatch)
    x64 = x.astype(np.float64)
    want = x64.mean(axis=(2, 3), keepdims=True) if op == "GlobalAveragePool" \
        else x64.max(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_global_pool_planes_special_values(strategy, rng, monkeypatch):
    """A NaN in a plane makes its mean and maximum NaN; +inf and -inf as NumPy gives them."""
    x = rng.standard_normal((1, 4, 12, 12)).astype(np.float32)
    x[0, 0, 5, 7] = np.nan
    x[0, 1, 0, 0] = np.inf
    x[0, 2, :, :] = -np.inf
    x[0, 3, 11, 11] = np.nan
    for op, ref in (("GlobalAveragePool", np.mean), ("GlobalMaxPool", np.max)):
        proto = helper.make_model(helper.make_graph(
            [helper.make_node(op, ["x"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])]),
            opset_imports=[helper.make_opsetid("", 18)])
        got = _run(proto, x, strategy, monkeypatch)
        with np.errstate(all="ignore"):
            want = ref(x.astype(np.float64), axis=(2, 3), keepdims=True)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
