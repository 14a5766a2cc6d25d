"""GPU_PIXEL's global pools over large planes, which reduce rows first and then the column
of row results, against NumPy in float64 (and a NaN anywhere in a plane reaching its
output)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from engine import ModelLoader, Worker

pytestmark = pytest.mark.usefixtures("require_gpu")


def _run(op, x, **attrs):
    out = list(x.shape[:2]) + [1] * (x.ndim - 2)
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with Worker(ModelLoader.from_proto(proto), "gpu-pixel") as worker:
        got = worker.schedule({"x": x}).peek_output("y").download_to_array()
        assert {t.backend for t in worker.last_profile.layers} == {"gpu-pixel"}
    return got


@pytest.mark.parametrize("shape", [(2, 6, 40, 30), (1, 5, 112, 112), (1, 3, 17, 16),
                                   (1, 4, 300, 1)])
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
def test_global_pools(op, shape, rng):
    x = (rng.standard_normal(shape) * 2 + 0.3).astype(np.float32)
    got = _run(op, x, **({"p": 3} if op == "GlobalLpPool" else {}))
    x64 = x.astype(np.float64)
    if op == "GlobalAveragePool":
        want = x64.mean(axis=(2, 3), keepdims=True)
    elif op == "GlobalMaxPool":
        want = x64.max(axis=(2, 3), keepdims=True)
    else:
        want = (np.abs(x64) ** 3).sum(axis=(2, 3), keepdims=True) ** (1 / 3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_nan_reaches_its_plane_only(op, rng):
    x = rng.standard_normal((1, 6, 30, 20)).astype(np.float32)
    x[0, 2, 17, 5] = np.nan
    got = _run(op, x).reshape(-1)
    assert np.isnan(got[2]) and not np.isnan(np.delete(got, 2)).any()
