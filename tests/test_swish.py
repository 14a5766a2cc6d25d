"""Swish (opset 24) on every backend against NumPy in float64, on fresh random data.

Swish was the first op added through the unary-op records (engine/ops/activations.py) and
the shared shader functions (shaders/common/activations.wgsl); onnxruntime 1.31 does not
implement it, hence the NumPy oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine import BackendType, ModelLoader, Worker
from tests.modelgen import F, model

BACKENDS = [
    pytest.param("cpu"),
    pytest.param("gpu-compute", marks=pytest.mark.gpu),
    pytest.param("gpu-pixel", marks=pytest.mark.gpu),
]


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param != "cpu":
        request.getfixturevalue("require_gpu")
    return request.param


def swish(x: np.ndarray, alpha: float) -> np.ndarray:
    xd = x.astype(np.float64)
    return xd / (1.0 + np.exp(-alpha * xd))


@pytest.mark.parametrize("alpha", [None, 1.702, -0.5])
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (4, 8, 16)])  # odd size, multiple of 4
def test_swish_matches_numpy(backend, rng, alpha, shape):
    attrs = {} if alpha is None else {"alpha": alpha}
    proto = model([helper.make_node("Swish", ["x"], ["y"], **attrs)],
                  [("x", F, list(shape))], [("y", F, list(shape))], opset=24)
    x = (rng.standard_normal(shape) * 6).astype(np.float32)
    x.reshape(-1)[:3] = [0.0, 80.0, -80.0]  # exp overflow on either side
    m = ModelLoader.from_proto(proto)
    with Worker(m, backend) as w:
        w.schedule({"x": x})
        got = w.peek_output().download_to_array()
        placed = {name: p.backend for name, p in w.placement.items()}
    assert all(b is BackendType.parse(backend) for b in placed.values()), placed
    want = swish(x, 1.0 if alpha is None else alpha)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_swish_keeps_nan_and_inf(backend):
    proto = model([helper.make_node("Swish", ["x"], ["y"])], [("x", F, [6])], [("y", F, [6])],
                  opset=24)
    x = np.array([np.nan, np.inf, -np.inf, 0.0, 2.0, -2.0], np.float32)
    m = ModelLoader.from_proto(proto)
    with Worker(m, backend) as w:
        w.schedule({"x": x})
        got = w.peek_output().download_to_array()
    with np.errstate(invalid="ignore", over="ignore"):
        want = x.astype(np.float64) * (1.0 / (1.0 + np.exp(-x.astype(np.float64))))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=2e-6)
