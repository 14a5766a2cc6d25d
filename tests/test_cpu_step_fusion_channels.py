"""ConvNeXt-style channels-last blocks in the CPU plan (``step_fusion_channels``) against
onnxruntime: LayerNorm over the channels between Transposes, and the layer scale, Transpose
back and residual as one pass, with the scale folded into the MatMul at import or not."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker


def _block(rng, c=8, hidden=16):
    """x [1, C, H, W] -> Transpose -> LayerNorm -> MatMul + b -> Relu -> MatMul + b -> * gamma
    -> Transpose back -> + x."""
    n = helper.make_node
    nodes = [n("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
             n("LayerNormalization", ["t", "ln_s", "ln_b"], ["ln"], axis=-1, epsilon=1e-6),
             n("MatMul", ["ln", "w1"], ["m1"]), n("Add", ["m1", "b1"], ["a1"]),
             n("Relu", ["a1"], ["r"]),
             n("MatMul", ["r", "w2"], ["m2"]), n("Add", ["m2", "b2"], ["a2"]),
             n("Mul", ["a2", "gamma"], ["s"]),
             n("Transpose", ["s"], ["back"], perm=[0, 3, 1, 2]),
             n("Add", ["x", "back"], ["y"])]
    inits = {"ln_s": rng.normal(1, 0.2, c), "ln_b": rng.normal(0, 0.2, c),
             "w1": rng.normal(0, 0.4, (c, hidden)), "b1": rng.normal(0, 0.2, hidden),
             "w2": rng.normal(0, 0.4, (hidden, c)), "b2": rng.normal(0, 0.2, c),
             "gamma": rng.normal(0, 0.5, c)}
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 5, 7])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("optimize", [True, False], ids=["scale-folded", "as-written"])
def test_transpose_back_and_residual_are_one_step(rng, optimize):
    proto = _block(rng)
    model = ModelLoader.from_proto(proto, optimize=optimize)
    assert any(la.op_type == "Mul" for la in model.layers) is not optimize
    x = rng.standard_normal((1, 8, 5, 7)).astype(np.float32)
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with Worker(model, "cpu") as worker:
        steps = worker._cpu_steps()
        absorbed = {la.op_type for st in steps for la in (st[6] or ())}
        # the residual Add (after the Transpose back) runs inside another step, and the
        # Transpose back too (inside the layer-scale step or as the step absorbing the Add)
        by_layer = {st[0].name: st for st in steps}
        last_add = next(la for la in model.layers if la.outputs[0] == "y")
        assert last_add.name not in by_layer, [st[0].op_type for st in steps]
        assert "Add" in absorbed
        worker.schedule({"x": x})
        got = worker.peek_output("y").download_to_array()
        worker.schedule({"x": x}, capture="all")  # captures run the unfused plan
        unfused = worker.peek_output("y").download_to_array()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(unfused, want, rtol=1e-4, atol=1e-5)


def test_residual_that_broadcasts_runs_unfused(rng):
    """A residual of another shape (broadcast) is declined by the fused kernel at run time:
    the Transpose and the Add then run one by one, with the same result."""
    proto = _block(rng)
    add = proto.graph.node[-1]
    proto.graph.initializer.append(numpy_helper.from_array(
        rng.standard_normal((1, 8, 1, 1)).astype(np.float32), "bias_only"))
    add.input[0] = "bias_only"
    x = rng.standard_normal((1, 8, 5, 7)).astype(np.float32)
    want = ort.InferenceSession(proto.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with Worker(ModelLoader.from_proto(proto), "cpu") as worker:
        got = worker.schedule({"x": x}).peek_output("y").download_to_array()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
