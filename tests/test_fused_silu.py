"""SiLU (Sigmoid, then Mul by the same input), HardSwish and both written out (``x * Clip(x +
3, 0, 6) / 6``, ``Clip(x + 3, 0, 6) * (1/6)``) after a Conv or Gemm become the layer's fused
activation at import, on every backend, and still match onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker

F = TensorProto.FLOAT


def _model(tail: str, rng, gemm: bool = False, extra_reader: bool = False):
    if gemm:
        x_shape, w = [5, 12], rng.standard_normal((12, 7)).astype(np.float32)
        first = helper.make_node("Gemm", ["x", "w", "b"], ["t"])
        b = rng.standard_normal(7).astype(np.float32)
    else:
        x_shape, w = [2, 3, 9, 11], rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
        first = helper.make_node("Conv", ["x", "w", "b"], ["t"], pads=[1, 1, 1, 1])
        b = rng.standard_normal(8).astype(np.float32)
    consts = {}
    if tail == "silu":
        nodes = [first, helper.make_node("Sigmoid", ["t"], ["s"]),
                 helper.make_node("Mul", ["t", "s"], ["y"])]
    elif tail in ("hardswish_written", "hardsigmoid_written"):  # as opset < 14 exporters do
        consts = {k: np.array(v, np.float32) for k, v in
                  (("three", 3.0), ("zero", 0.0), ("six", 6.0), ("sixth", 1 / 6))}
        nodes = [first, helper.make_node("Add", ["t", "three"], ["a"]),
                 helper.make_node("Clip", ["a", "zero", "six"], ["c"])]
        if tail == "hardswish_written":
            nodes += [helper.make_node("Mul", ["t", "c"], ["m"]),
                      helper.make_node("Div", ["m", "six"], ["y"])]
        else:
            nodes += [helper.make_node("Mul", ["sixth", "c"], ["y"])]
    else:
        nodes = [first, helper.make_node("HardSwish", ["t"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", F, ["?"] * len(x_shape))]
    if extra_reader:  # the pre-activation value is also read elsewhere: no fusion
        nodes.append(helper.make_node("Relu", ["t"], ["r"]))
        outputs.append(helper.make_tensor_value_info("r", F, ["?"] * len(x_shape)))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, x_shape)],
                              outputs, [numpy_helper.from_array(w, "w"),
                                        numpy_helper.from_array(b, "b")]
                              + [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), x_shape


@pytest.mark.parametrize("backend", ["cpu", "gpu-compute", "gpu-pixel"])
@pytest.mark.parametrize("tail", ["silu", "hardswish", "hardswish_written",
                                  "hardsigmoid_written"])
@pytest.mark.parametrize("gemm", [False, True])
def test_activation_tails_fuse_and_match(backend, tail, gemm, rng, request):
    if backend != "cpu":
        request.getfixturevalue("require_gpu")
    proto, shape = _model(tail, rng, gemm)
    model = ModelLoader.from_proto(proto)
    assert len(model.layers) == 1
    assert model.layers[0].attr("activation") == {
        "silu": "Swish", "hardsigmoid_written": "HardSigmoid"}.get(tail, "HardSwish")
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x.reshape(-1)[:3] = [np.nan, 40.0, -40.0]
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with Worker(model, backend) as w:
        got = w.schedule({"x": x}).peek_output("y").download_to_array()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_pre_activation_read_elsewhere_is_not_fused(rng):
    proto, shape = _model("silu", rng, extra_reader=True)
    model = ModelLoader.from_proto(proto)
    assert [layer.op_type for layer in model.layers] == ["Conv", "Sigmoid", "Mul", "Relu"]
    x = rng.standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    with Worker(model, "cpu") as w:
        w.schedule({"x": x})
        for spec, ref in zip(model.outputs, want):
            # sums of 27 products of unit normals: float32 rounding is ~1e-6 absolute
            np.testing.assert_allclose(w.peek_output(spec.name).numpy(), ref, rtol=1e-4,
                                       atol=1e-5)
