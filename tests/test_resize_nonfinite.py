"""Resize of inputs holding NaN and infinities: a non-finite value reaches only the outputs
that interpolate from it, as in the ONNX reference evaluator.

The CPU contracted each axis with a dense (out x in) weight matrix, so one NaN pixel made
its whole output row and column NaN (0 * NaN); GPU_COMPUTE's bilinear shader mixed in the
zero-weight neighbour at the borders."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from engine import ModelLoader, Worker

F = TensorProto.FLOAT
FLT_MAX = float(np.finfo(np.float32).max)


def _proto(mode: str, out_hw):
    node = helper.make_node("Resize", ["x", "roi", "sc"], ["y"], mode=mode)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", F, [2, 3, 6, 7])],
        [helper.make_tensor_value_info("y", F, [2, 3, *out_hw])],
        [helper.make_tensor("roi", F, [0], []),
         helper.make_tensor("sc", F, [4], [1, 1, out_hw[0] / 6, out_hw[1] / 7])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("backend", ["cpu", "gpu-compute", "gpu-pixel"])
@pytest.mark.parametrize("mode,out_hw", [("linear", (12, 14)), ("linear", (9, 10)),
                                         ("cubic", (12, 14))])
def test_non_finite_values_stay_local(backend, mode, out_hw, rng, request):
    if backend != "cpu":
        request.getfixturevalue("require_gpu")
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    x[0, 0, 2, 3] = np.nan
    x[1, 0, 0, 0] = np.nan  # a corner: the border taps
    x[0, 1, :, 6] = np.inf  # the last column
    x[1, 2, 4, 1] = -np.inf
    proto = _proto(mode, out_hw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.asarray(ReferenceEvaluator(proto).run(None, {"x": x})[0])
    with Worker(ModelLoader.from_proto(proto), backend) as worker:
        got = worker.schedule({"x": x}).peek_output("y").download_to_array()
    # the reference saturates infinities at float32's largest value on its way back
    want = np.where(np.abs(want) >= FLT_MAX, np.sign(want) * np.inf, want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    fin = np.isfinite(want)
    assert fin.sum() > got.size // 2  # most of the output is untouched by the specials
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-4, atol=1e-5)
