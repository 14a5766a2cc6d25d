"""GPU_PIXEL MatMul epilogues (``gpu_common/epilogues.py``): a scale, a bias Add and an
activation after a MatMul drawn in its pass give onnxruntime's results on fresh random data,
and stay their own layers wherever absorbing them would change what a run shows."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker
from engine.backends import BackendType
from engine.backends.gpu_pixel import targets

PIXEL = BackendType.GPU_PIXEL
pytestmark = pytest.mark.usefixtures("require_gpu")


def _linear(rng, rows=(2, 8), k=16, n=24, bias_shape=(24,), act="Gelu", scale=None,
            extra_user=False):
    """x[*rows, k] -> MatMul W[k, n] -> (Mul or Div by a scalar) -> Add bias -> act."""
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(bias_shape).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm_layer")]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    product = "mm"
    if scale is not None:
        inits.append(numpy_helper.from_array(np.array(rng.uniform(0.5, 2.0), np.float32),
                                             "c"))
        nodes.append(helper.make_node(scale, ["mm", "c"], ["scaled"], name="scale_layer"))
        product = "scaled"
    nodes.append(helper.make_node("Add", [product, "b"], ["biased" if act else "y"],
                                  name="add_layer"))
    if act:
        nodes.append(helper.make_node(act, ["biased"], ["y"], name="act_layer"))
    outs = ["y"]
    if extra_user:  # the product is read twice: nothing may be absorbed
        nodes.append(helper.make_node("Neg", ["mm"], ["neg"], name="neg_layer"))
        outs.append("neg")
    graph = helper.make_graph(
        nodes, "linear", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [*rows, k])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [*rows, n]) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def _run(proto, x, monkeypatch, capture=None, **options):
    """Outputs (and captures) on GPU_PIXEL, and the layers that drew passes."""
    with Worker(ModelLoader.from_proto(proto), PIXEL, **options) as worker:
        backend, drawn = worker._backend, []
        draw, draw_targets = backend.r.draw, targets.draw_targets
        monkeypatch.setattr(backend.r, "draw",
                            lambda label, *a, **k: (drawn.append(label), draw(label, *a, **k)))
        monkeypatch.setattr(targets, "draw_targets", lambda r, label, *a, **k: (
            drawn.append(label), draw_targets(r, label, *a, **k)))
        outs = {}
        for _ in range(2):  # the second run replays the first
            x = rng_like(x)
            worker.schedule({"x": x}, capture=capture)
            names = [o.name for o in worker.model.outputs] + list(capture or [])
            outs = {n: worker.peek_output(n).download_to_array() for n in names}
    return x, outs, sorted(set(drawn))


def rng_like(x):
    return np.random.default_rng().standard_normal(x.shape).astype(np.float32)


def _reference(proto, x):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in proto.graph.output], sess.run(None, {"x": x})))


@pytest.mark.parametrize("kwargs", [
    {},                                                   # batched: the packed pass
    {"rows": (5,), "act": "Relu"},                        # 2-D: the Gemm pass
    {"bias_shape": (1, 1, 24), "act": "Sigmoid", "scale": "Div"},
    {"bias_shape": (1,), "act": None, "scale": "Mul"},    # one bias for every column
    {"rows": (3, 7), "k": 9, "n": 13, "bias_shape": (13,)},
])
def test_absorbed_chain_matches_onnxruntime(rng, monkeypatch, kwargs):
    proto = _linear(rng, **kwargs)
    x, outs, drawn = _run(proto, np.zeros((*kwargs.get("rows", (2, 8)), kwargs.get("k", 16)),
                                          np.float32), monkeypatch)
    np.testing.assert_allclose(outs["y"], _reference(proto, x)["y"], rtol=1e-4, atol=1e-5)
    assert drawn == ["mm_layer"], drawn  # one pass: the rest of the chain in it


@pytest.mark.parametrize("case", ["captured", "add_on_cpu", "shared_product"])
def test_chains_that_cannot_be_absorbed_run_as_layers(rng, monkeypatch, case):
    proto = _linear(rng, extra_user=case == "shared_product")
    options = {"placement_overrides": {"add_layer": "cpu"}} if case == "add_on_cpu" else {}
    capture = ["mm"] if case == "captured" else None
    x, outs, drawn = _run(proto, np.zeros((2, 8, 16), np.float32), monkeypatch, capture,
                          **options)
    for name, want in _reference(proto, x).items():
        np.testing.assert_allclose(outs[name], want, rtol=1e-4, atol=1e-5)
    if capture:
        w = numpy_helper.to_array(proto.graph.initializer[0]).astype(np.float64)
        np.testing.assert_allclose(outs["mm"], x.astype(np.float64) @ w, rtol=1e-4,
                                   atol=1e-4)
    assert "act_layer" in drawn, drawn
