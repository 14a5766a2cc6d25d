"""Symbolic and anonymous input dims: binding rules, placement per input signature."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import BackendType, InputError, ModelLoader, Worker
from engine.symbols import default_shape, is_fresh


def _classifier(dims) -> onnx.ModelProto:
    """A small CNN head as exporters write it: Conv+Relu, global pool, Flatten, Gemm."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.normal(0, 0.1, 8).astype(np.float32), "b"),
        numpy_helper.from_array(rng.normal(0, 0.3, (8, 4)).astype(np.float32), "fc"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    for d in dims:
        dim = x.type.tensor_type.shape.dim.add()
        if isinstance(d, int):
            dim.dim_value = d
        elif d is not None:
            dim.dim_param = d
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["?", 4])
    graph = helper.make_graph(nodes, "cls", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ort(proto, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


@pytest.mark.parametrize("dims", [
    [-1, 3, "?", "?"], ["unk__12", 3, "", "unk__13"], [None, 3, "?", "?"],
])
def test_anonymous_dims_never_bind(dims, rng):
    proto = _classifier(dims)
    model = ModelLoader.load(proto.SerializeToString())
    shape = model.inputs[0].shape
    assert shape[1] == 3 and all(is_fresh(d) for i, d in enumerate(shape) if i != 1)
    assert len({d for i, d in enumerate(shape) if i != 1}) == 3
    x = rng.normal(size=(2, 3, 48, 192)).astype(np.float32)
    with Worker(model, "cpu") as w:
        got = w.schedule(x).peek_output().download_to_array()
    np.testing.assert_allclose(got, _ort(proto, {"x": x}), rtol=1e-4, atol=1e-5)


def test_named_dims_bind_and_errors_name_the_dims():
    model = ModelLoader.load(_classifier(["batch", 3, "side", "side"]).SerializeToString())
    with Worker(model, "cpu") as w:
        w.schedule(np.zeros((1, 3, 8, 8), np.float32))
        with pytest.raises(InputError) as err:
            w.schedule(np.zeros((1, 3, 8, 9), np.float32))
    msg = str(err.value)
    assert "'side'" in msg and "dimension 2 of the same input" in msg and "9" in msg
    assert "another input" not in msg
    with Worker(model, "cpu") as w, pytest.raises(InputError, match="dimension 1 must be 3"):
        w.schedule(np.zeros((1, 4, 8, 8), np.float32))


def test_inputs_are_copied_at_schedule(rng):
    proto = _classifier(["batch", 3, "h", "w"])
    model = ModelLoader.load(proto.SerializeToString())
    x = rng.normal(size=(1, 3, 16, 16)).astype(np.float32)
    want = _ort(proto, {"x": x})
    with Worker(model, "cpu") as w:
        w.schedule(x)
        x[:] = np.nan  # the caller reuses its buffer at once
        got = w.peek_output().download_to_array()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_default_shapes():
    assert default_shape(("?1", 3, "h", "w"), np.float32) == (1, 3, 224, 224)
    assert default_shape(("batch", "seq"), np.int64) == (1, 16)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["gpu-compute", "gpu-pixel"])
def test_placement_per_signature_on_gpu(backend, require_gpu, rng):
    proto = _classifier(["batch", 3, "height", "width"])
    model = ModelLoader.load(proto.SerializeToString())
    with Worker(model, backend) as w:
        before = dict(w.placement)
        assert not any("cannot check" in p.reason for p in before.values())
        for shape in [(1, 3, 20, 24), (2, 3, 9, 13), (1, 3, 20, 24)]:
            x = rng.normal(size=shape).astype(np.float32)
            got = w.schedule(x).peek_output().download_to_array()
            np.testing.assert_allclose(got, _ort(proto, {"x": x}), rtol=1e-4, atol=1e-5)
            placed = w.placement
            assert all(p.backend is BackendType.parse(backend) and p.reason == "native"
                       for p in placed.values()), placed
        assert len(w._plans) == 3  # declared shapes + two signatures
        summary = w.plan.summary()
        assert summary["native"] == len(model.layers) and summary["fallback"] == 0


@pytest.mark.gpu
def test_plan_for_given_shapes_without_running(require_gpu):
    model = ModelLoader.load(_classifier(["batch", 3, "h", "w"]).SerializeToString())
    with Worker(model, "gpu-pixel") as w:
        plan = w.plan_for({"x": (1, 3, 32, 32)})
        assert plan.summary()["native"] == len(model.layers)
        # a texture side above the adapter's limit is a fallback with a readable reason
        big = w.plan_for({"x": (1, 3, 8, 100000)})
        reasons = [p.reason for p in big.placement.values() if p.is_fallback]
        assert reasons and all("cannot check" not in r for r in reasons)
        assert any("texture" in r or "limit" in r or "max" in r for r in reasons), reasons


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["gpu-compute", "gpu-pixel"])
def test_shape_given_as_an_input_is_decided_by_the_run(backend, require_gpu, rng):
    """Expand's target shape is a graph input: unknown when planning, known when it runs."""
    graph = helper.make_graph(
        [helper.make_node("Expand", ["x", "s"], ["y"], name="expand")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["?", "?"])])
    model = ModelLoader.load(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    with Worker(model, backend) as w:
        assert not w.placement["expand"].is_fallback
        for width in (5, 2):
            x = rng.normal(size=(3, 1)).astype(np.float32)
            got = w.schedule({"x": x, "s": np.array([3, width], np.int64)}).peek_output()
            np.testing.assert_array_equal(got.download_to_array(),
                                          np.broadcast_to(x, (3, width)))
            assert w.placement["expand"].reason == "native"
