"""Special values through the GPU backends' elementwise shaders, against the ONNX reference
evaluator: NaN, the infinities, signed zeros, values where a naive formula overflows.

Not covered (GPU behaviour, kept as it is): subnormal numbers (flushed to zero by GPUs) and
the trigonometric functions of huge arguments (|x| ~ 1e38, where GPU argument reduction is
not exact)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from engine import ModelLoader, Worker

pytestmark = pytest.mark.usefixtures("require_gpu")
BACKENDS = ["gpu-compute", "gpu-pixel"]
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0,
                     -3.0, 2.5, -2.5, 88.8, -88.8, 89.2, -89.2, 1e20, -1e20, 3.3e38, -3.3e38,
                     0.25], np.float32)


def _check(op, inputs, attrs, backend):
    names = [f"i{k}" for k in range(len(inputs))]
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape))
         for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(inputs[0].shape))])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    feeds = dict(zip(names, inputs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.asarray(ReferenceEvaluator(proto).run(None, feeds)[0])
    with Worker(ModelLoader.from_proto(proto), backend) as worker:
        got = worker.schedule(feeds).peek_output("y").download_to_array()
        assert all(t.backend == backend for t in worker.last_profile.layers)
    where = [tuple(float(a[i]) for a in inputs) for i in range(got.size)
             if not (np.isnan(got[i]) and np.isnan(want[i]) or got[i] == want[i]
                     or np.isclose(got[i], want[i], rtol=2e-5, atol=1e-6))]
    assert not where, f"{op} on {backend}: wrong at {where[:6]}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["Atan", "Sign", "Sinh", "Cosh", "Asinh", "Acosh", "Asin",
                                "Acos", "Abs", "Neg", "Exp", "Tanh", "Sigmoid", "Relu", "Ceil",
                                "Floor", "Sqrt"])
def test_unary_specials(op, backend, rng):
    x = np.concatenate([SPECIALS, rng.standard_normal(16).astype(np.float32)])
    _check(op, [x], {}, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,attrs", [("Pow", {}), ("Mod", {"fmod": 1})])
def test_binary_specials(op, attrs, backend):
    """Every pair of special values: std::pow's and C fmod's special cases."""
    a, b = np.meshgrid(SPECIALS, SPECIALS)
    _check(op, [a.reshape(-1).copy(), b.reshape(-1).copy()], attrs, backend)
