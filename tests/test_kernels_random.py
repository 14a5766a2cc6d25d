"""Random kernels: shapes, dtypes, ranges, seeds reproduce, and Bernoulli's certain cases.
(The conformance suite cannot check these: its expected values come from another generator.)"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from engine import ModelLoader, Worker


def _run(node, x, out_type=TensorProto.DOUBLE):
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, x.shape)],
        [helper.make_tensor_value_info("y", out_type, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    with Worker(ModelLoader.from_proto(model), "cpu") as w:
        w.schedule({"x": x})
        return w.peek_output().download_to_array()


def test_uniform_like_range_dtype_and_seed(rng):
    x = rng.standard_normal((50, 40))
    node = helper.make_node("RandomUniformLike", ["x"], ["y"], low=-2.0, high=3.0, seed=7.0,
                            dtype=TensorProto.FLOAT)
    a, b = _run(node, x, TensorProto.FLOAT), _run(node, x, TensorProto.FLOAT)
    assert a.shape == x.shape and a.dtype == np.float32
    assert a.min() >= -2.0 and a.max() < 3.0 and a.std() > 1.0
    np.testing.assert_array_equal(a, b)  # same seed, same tensor


def test_normal_like_moments(rng):
    x = rng.standard_normal((200, 100))
    y = _run(helper.make_node("RandomNormalLike", ["x"], ["y"], mean=1.5, scale=0.5), x)
    assert y.dtype == np.float64
    assert abs(y.mean() - 1.5) < 0.02 and abs(y.std() - 0.5) < 0.02


def test_bernoulli_certain_and_frequency(rng):
    p = rng.integers(0, 2, (30, 30)).astype(np.float64)
    y = _run(helper.make_node("Bernoulli", ["x"], ["y"]), p)
    np.testing.assert_array_equal(y, p)  # probabilities 0 and 1 are certain
    half = np.full((300, 300), 0.3)
    freq = _run(helper.make_node("Bernoulli", ["x"], ["y"], seed=3.0), half).mean()
    assert abs(freq - 0.3) < 0.01
