"""The CPU's nearest upsampling by whole factors on the last two axes (``repeat2d``) against
onnxruntime, and the general per-axis gather it replaces for other ratios."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker

F = TensorProto.FLOAT


def _resize(x: np.ndarray, scales, attrs: dict, opset: int = 13) -> tuple:
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest", **attrs)
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("x", F, list(x.shape))],
        [helper.make_tensor_value_info("y", F, ["?"] * x.ndim)],
        [numpy_helper.from_array(np.asarray(scales, np.float32), "scales")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    model = ModelLoader.load(proto.SerializeToString())
    with Worker(model, "cpu") as w:
        got = w.schedule({"x": x}).peek_output("y").download_to_array()
        got_again = w.schedule({"x": x}).peek_output("y").download_to_array()
        layer = model.layers[0]
    return got, got_again, want, layer


CASES = [  # (shape, scales, attrs, repeats)
    ((1, 6, 10, 12), (1, 1, 2, 2), {}, (2, 2)),
    ((2, 3, 5, 7), (1, 1, 4, 3), {}, (4, 3)),
    ((1, 4, 6, 6), (1, 1, 2, 2), {"coordinate_transformation_mode": "asymmetric",
                                  "nearest_mode": "floor"}, (2, 2)),
    ((3, 8, 9), (1, 1, 2), {}, (1, 2)),
    ((1, 2, 6, 6), (1, 1, 1.5, 2), {}, None),  # not whole: the per-axis gather
    ((1, 2, 5, 5), (1, 1, 4, 4), {"coordinate_transformation_mode": "asymmetric"}, None),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_nearest_whole_factors(rng, case):
    shape, scales, attrs, reps = CASES[case]
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[3] = np.nan
    x.reshape(-1)[-1] = np.inf
    got, again, want, layer = _resize(x, scales, attrs)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(again, want)
    known = layer.__dict__.get("_cpu_repeat2d")
    if reps is None:
        assert known is None or 0 in known[1]
    else:
        assert known[1] == reps
