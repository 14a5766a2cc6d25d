"""If on the GPU backends: the condition read on the CPU, the taken branch run on the GPU."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from engine import BackendType, EngineError, ModelLoader, Worker


def _if_model():
    f = TensorProto.FLOAT
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["x1"], ["t1"]), helper.make_node("Mul", ["t1", "x1"], ["ty"])],
        "then", [], [helper.make_tensor_value_info("ty", f, None)])
    else_g = helper.make_graph(
        [helper.make_node("Sigmoid", ["x1"], ["ey"])],
        "else", [], [helper.make_tensor_value_info("ey", f, None)])
    nodes = [
        helper.make_node("Exp", ["x"], ["x1"], name="exp"),
        helper.make_node("Equal", ["rate", "r16k"], ["is16k"], name="equal"),
        helper.make_node("If", ["is16k"], ["b"], name="branch", then_branch=then_g,
                         else_branch=else_g),
        helper.make_node("Add", ["b", "x"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", f, ["n", 8]),
         helper.make_tensor_value_info("rate", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", f, ["n", 8])],
        [helper.make_tensor("r16k", TensorProto.INT64, [], [16000])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["gpu-compute", "gpu-pixel"])
def test_if_branch_runs_on_the_gpu(backend, require_gpu, rng):
    proto = _if_model()
    model = ModelLoader.load(proto.SerializeToString())
    assert "is16k" in model.cpu_forced  # the condition is needed on the CPU
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    with Worker(model, backend) as worker:
        for rate in (16000, 8000, 16000):
            feeds = {"x": rng.normal(size=(3, 8)).astype(np.float32),
                     "rate": np.array(rate, np.int64)}
            got = worker.schedule(feeds).peek_output().download_to_array()
            np.testing.assert_allclose(got, sess.run(None, feeds)[0], rtol=1e-5, atol=1e-6)
            place = worker.placement["branch"]
            assert place.backend is BackendType.parse(backend), place
            which = "then" if rate == 16000 else "else"
            assert f"took the {which} branch" in place.reason
            ran = {t.op_type: t.backend for t in worker.last_profile.layers}
            branch_ops = ("Relu", "Mul") if rate == 16000 else ("Sigmoid",)
            assert all(ran.get(op) == backend for op in branch_ops), ran


@pytest.mark.parametrize("backend", ["cpu", "gpu-compute"])
def test_if_branch_with_missing_output_is_a_kernel_error(backend, request, rng):
    """A branch making fewer outputs than the If declares is named in the error."""
    if backend != "cpu":
        request.getfixturevalue("require_gpu")
    proto = _if_model()
    else_branch = next(a for a in proto.graph.node[2].attribute if a.name == "else_branch")
    del else_branch.g.output[:]
    model = ModelLoader.load(proto.SerializeToString())
    with Worker(model, backend) as worker:
        feeds = {"x": rng.normal(size=(3, 8)).astype(np.float32), "rate": np.array(8000)}
        with pytest.raises(EngineError, match="else branch makes 0 output"):
            worker.schedule(feeds).peek_output().download_to_array()
