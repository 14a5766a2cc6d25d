"""GPU_COMPUTE MatMul epilogues: a scale, a bias Add and an activation after the MatMul recorded
in its dispatch give onnxruntime's results, and are left as their own layers wherever absorbing
them would change what a run shows (a captured product, a layer placed on the CPU, a bias that
is not a row vector, a product with other users)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker
from engine.backends import BackendType
from engine.backends.gpu_common import epilogues
from tests.gpu_compute_util import dispatching_layers

GPU = BackendType.GPU_COMPUTE


def _linear_model(rng, bias_shape=(24,), bias_first=False, act="Gelu", extra_user=False,
                  scale=None):
    """x[batch, 8, 16] -> MatMul W[16, 24] -> (Mul or Div by a scalar) -> Add bias -> act
    (Gelu, Relu or None)."""
    w = rng.standard_normal((16, 24)).astype(np.float32)
    b = rng.standard_normal(bias_shape).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm_layer")]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    product = "mm"
    if scale is not None:  # ("Mul" | "Div", the scalar's shape)
        op, shape = scale
        c = np.full(shape, rng.uniform(0.2, 3.0), np.float32)
        nodes.append(helper.make_node(op, ["mm", "c"], ["scaled"], name="scale_layer"))
        inits.append(numpy_helper.from_array(c, "c"))
        product = "scaled"
    nodes.append(helper.make_node("Add", ["b", product] if bias_first else [product, "b"],
                                  ["biased"], name="add_layer"))
    outs = ["y"]
    if act:
        nodes.append(helper.make_node(act, ["biased"], ["y"], name="act_layer"))
    else:
        nodes[-1].output[0] = "y"
    if extra_user:  # the product is read twice: nothing may be absorbed
        nodes.append(helper.make_node("Neg", ["mm"], ["neg"], name="neg_layer"))
        outs.append("neg")
    graph = helper.make_graph(
        nodes, "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 16])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["batch", 8, 24]) for o in outs],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def _run(proto, feeds, capture=None, **options):
    with Worker(ModelLoader.from_proto(proto), GPU, **options) as worker:
        seen = dispatching_layers(worker)
        worker.schedule(feeds, capture=capture)
        names = [o.name for o in worker.model.outputs] + list(capture or [])
        outs = {n: worker.peek_output(n).download_to_array() for n in names}
        placement = {n: p.backend for n, p in worker.placement.items()}
    return outs, seen, placement


def _reference(proto, feeds):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.mark.usefixtures("require_gpu")
@pytest.mark.parametrize("bias_shape,bias_first,act,scale", [
    ((24,), False, "Gelu", None), ((1, 1, 24), True, "Relu", ("Div", ())),
    ((1,), False, None, ("Mul", (1,))), ((24,), True, "Sigmoid", ("Div", (1, 1, 1)))])
def test_absorbed_chain_matches_onnxruntime(rng, bias_shape, bias_first, act, scale):
    proto = _linear_model(rng, bias_shape, bias_first, act, scale=scale)
    x = rng.standard_normal((3, 8, 16)).astype(np.float32)
    outs, seen, _ = _run(proto, {"x": x})
    np.testing.assert_allclose(outs["y"], _reference(proto, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert seen == ["mm_layer"], seen  # one dispatch: the rest of the chain in it


@pytest.mark.usefixtures("require_gpu")
def test_attention_scores_scale_is_absorbed(rng):
    """MatMul(q, k^T) / sqrt(d) then an Add of a runtime mask: the Div only."""
    q = rng.standard_normal((1, 2, 6, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 8, 6)).astype(np.float32)
    mask = np.where(rng.random((1, 1, 6, 6)) < 0.3, -1e4, 0).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"], name="mm_layer"),
             helper.make_node("Div", ["s", "d"], ["scaled"], name="scale_layer"),
             helper.make_node("Add", ["scaled", "mask"], ["masked"], name="add_layer"),
             helper.make_node("Softmax", ["masked"], ["y"], axis=-1, name="softmax_layer")]
    spec = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape))
            for n, v in (("q", q), ("k", k), ("mask", mask))]
    graph = helper.make_graph(nodes, "scores", spec,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             [1, 2, 6, 6])],
                              [numpy_helper.from_array(np.array(np.sqrt(8.0), np.float32),
                                                       "d")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = {"q": q, "k": k, "mask": mask}
    outs, seen, _ = _run(proto, feeds)
    np.testing.assert_allclose(outs["y"], _reference(proto, feeds)[0], rtol=1e-4, atol=1e-6)
    assert seen == ["mm_layer", "add_layer", "softmax_layer"], seen


@pytest.mark.usefixtures("require_gpu")
def test_captured_product_keeps_its_own_value(rng):
    proto = _linear_model(rng)
    x = rng.standard_normal((2, 8, 16)).astype(np.float32)
    outs, seen, _ = _run(proto, {"x": x}, capture=["mm", "biased"])
    w = numpy_helper.to_array(proto.graph.initializer[0]).astype(np.float64)
    b = numpy_helper.to_array(proto.graph.initializer[1]).astype(np.float64)
    np.testing.assert_allclose(outs["mm"], x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(outs["biased"], x.astype(np.float64) @ w + b, rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(outs["y"], _reference(proto, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert seen.count("add_layer") == 1, seen


@pytest.mark.usefixtures("require_gpu")
def test_layers_placed_on_the_cpu_are_not_absorbed(rng):
    proto = _linear_model(rng)
    x = rng.standard_normal((2, 8, 16)).astype(np.float32)
    outs, seen, placement = _run(proto, {"x": x}, placement_overrides={"act_layer": "cpu"})
    assert placement["act_layer"] is BackendType.CPU
    np.testing.assert_allclose(outs["y"], _reference(proto, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert seen == ["mm_layer"], seen  # the Add still in the MatMul, the Gelu on the CPU

    outs, seen, _ = _run(proto, {"x": x}, placement_overrides={"add_layer": "cpu"})
    np.testing.assert_allclose(outs["y"], _reference(proto, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert "add_layer" not in seen and "act_layer" in seen, seen


@pytest.mark.usefixtures("require_gpu")
@pytest.mark.parametrize("case", ["full_bias", "shared_product"])
def test_other_shapes_run_unfused_and_correct(rng, case):
    proto = _linear_model(rng, bias_shape=(8, 24)) if case == "full_bias" else \
        _linear_model(rng, extra_user=True)
    x = rng.standard_normal((2, 8, 16)).astype(np.float32)
    outs, seen, _ = _run(proto, {"x": x})
    refs = _reference(proto, {"x": x})
    for name, ref in zip([o.name for o in proto.graph.output], refs):
        np.testing.assert_allclose(outs[name], ref, rtol=1e-4, atol=1e-5)
    assert "add_layer" in seen and "act_layer" in seen, seen


def test_find_picks_scalars_row_biases_and_activations_with_a_sole_user(rng):
    """The chains found on the model alone (no adapter needed)."""
    for kwargs, want in [({}, ["add_layer", "act_layer"]),
                         ({"act": "Clip"}, ["add_layer"]),
                         ({"scale": ("Div", ())}, ["scale_layer", "add_layer", "act_layer"]),
                         ({"scale": ("Div", (24,))}, []),  # not a scalar: the chain stops
                         ({"bias_shape": (8, 24)}, []), ({"extra_user": True}, [])]:
        model = ModelLoader.from_proto(_linear_model(rng, **kwargs))
        chains = list(epilogues.find(model).values())
        got = [step.layer.name for step in chains[0]] if chains else []
        assert got == want, (kwargs, got)


def test_model_output_product_is_not_absorbed(rng):
    proto = _linear_model(rng)
    proto.graph.output.append(
        helper.make_tensor_value_info("mm", TensorProto.FLOAT, ["batch", 8, 24]))
    assert not epilogues.find(ModelLoader.from_proto(proto))
