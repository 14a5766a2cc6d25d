"""GPU_COMPUTE attention in one dispatch (``gpu_compute/attention.py``): MatMul(Q, K^T), an
optional scale and mask (Add, or Where with a fill), Softmax and MatMul(P, V) give
onnxruntime's results on fresh random data, only the last MatMul records work, and the chain
runs as its own layers wherever fusing would change what a run shows or cannot hold."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker
from engine.backends import BackendType
from engine.backends.gpu_compute import attention
from tests.gpu_compute_util import dispatching_layers

GPU = BackendType.GPU_COMPUTE


@pytest.fixture(autouse=True)
def fused_attention(monkeypatch):
    """Fusing is the default on CPU adapters only (``attention_strategy``): forced here, so
    that these tests check it on any adapter."""
    monkeypatch.setenv("ENGINE_GPU_ATTENTION", "fused")  # read when the backend is created


def _attention(rng, batch=(2, 3), L=7, M=9, dk=5, dv=8, scale="Div", mask=None,
               mask_shape=None, fill=-1e9, axis=-1, extra_user=False):
    """(model, feeds): q [*batch, L, dk], kt [*batch, dk, M], v [*batch, M, dv] -> MatMul ->
    scale ("Div", "Mul" or None) -> mask ("add": + a float input, "keep": Where(bool input,
    ., fill), None) -> Softmax(axis) -> MatMul with v."""
    feeds = {"q": rng.standard_normal((*batch, L, dk)).astype(np.float32),
             "kt": rng.standard_normal((*batch, dk, M)).astype(np.float32),
             "v": rng.standard_normal((*batch, M, dv)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["scores"], name="scores_layer")]
    inits, y = [], "scores"
    if scale:
        c = np.array(np.sqrt(dk) if scale == "Div" else 1 / np.sqrt(dk), np.float32)
        inits.append(numpy_helper.from_array(c, "c"))
        nodes.append(helper.make_node(scale, [y, "c"], ["scaled"], name="scale_layer"))
        y = "scaled"
    shape = mask_shape or (*batch, L, M)
    if mask == "add":
        feeds["mask"] = np.where(rng.random(shape) < 0.3, -1e4, rng.standard_normal(shape))
        feeds["mask"] = feeds["mask"].astype(np.float32)
        nodes.append(helper.make_node("Add", ["mask", y], ["masked"], name="mask_layer"))
        y = "masked"
    elif mask == "keep":
        feeds["mask"] = rng.random(shape) < 0.7
        inits.append(numpy_helper.from_array(np.array(fill, np.float32), "fill"))
        nodes.append(helper.make_node("Where", ["mask", y, "fill"], ["masked"],
                                      name="mask_layer"))
        y = "masked"
    nodes.append(helper.make_node("Softmax", [y], ["probs"], axis=axis, name="softmax_layer"))
    nodes.append(helper.make_node("MatMul", ["probs", "v"], ["y"], name="out_layer"))
    outs = ["y"]
    if extra_user:
        nodes.append(helper.make_node("Neg", ["probs"], ["neg"], name="neg_layer"))
        outs.append("neg")
    types = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(bool): TensorProto.BOOL}
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info(n, types[a.dtype], list(a.shape))
         for n, a in feeds.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*batch, L, dv])]
        + [helper.make_tensor_value_info(o, TensorProto.FLOAT, [*batch, L, M])
           for o in outs[1:]], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return proto, feeds


def _reference(proto, feeds):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in proto.graph.output], sess.run(None, feeds)))


def _run(proto, feeds, capture=None, **options):
    with Worker(ModelLoader.from_proto(proto), GPU, **options) as worker:
        seen = dispatching_layers(worker)
        worker.schedule(feeds, capture=capture)
        names = [o.name for o in worker.model.outputs] + list(capture or [])
        outs = {n: worker.peek_output(n).download_to_array() for n in names}
    return outs, seen


def _check(outs, proto, feeds):
    for name, want in _reference(proto, feeds).items():
        np.testing.assert_allclose(outs[name], want, rtol=1e-4, atol=2e-5, equal_nan=True)


@pytest.mark.usefixtures("require_gpu")
@pytest.mark.parametrize("kwargs", [
    {},                                                       # Div, no mask, 7 x 9 keys
    {"scale": "Mul", "batch": (6,), "dk": 8, "dv": 4},        # 3-D, Mul
    {"scale": None, "batch": (), "L": 5, "M": 4},             # 2-D, no scale
    {"mask": "add", "mask_shape": (2, 1, 1, 9)},              # padding mask, broadcast
    {"mask": "add", "mask_shape": (7, 9)},                    # one mask for every head
    {"mask": "keep", "mask_shape": (1, 1, 7, 9)},             # Where, bool mask
    {"mask": "keep", "batch": (3,), "mask_shape": (3, 1, 9)},
    {"batch": (1, 2), "L": 130, "M": 67, "dk": 64, "dv": 64},  # several workgroups, key tail
])
def test_fused_attention_matches_onnxruntime(rng, kwargs):
    proto, feeds = _attention(rng, **kwargs)
    outs, seen = _run(proto, feeds)
    _check(outs, proto, feeds)
    assert seen == ["out_layer"], seen  # the whole chain in the last MatMul's dispatch


@pytest.mark.usefixtures("require_gpu")
def test_rows_with_every_key_masked_are_nan_as_in_onnxruntime(rng):
    proto, feeds = _attention(rng, mask="keep", fill=float("-inf"))
    feeds["mask"][0, 1, 3, :] = False
    outs, seen = _run(proto, feeds)
    assert np.isnan(outs["y"][0, 1, 3]).all() and not np.isnan(outs["y"][0, 1, 2]).any()
    _check(outs, proto, feeds)
    assert seen == ["out_layer"], seen


@pytest.mark.usefixtures("require_gpu")
def test_replayed_runs_read_their_own_inputs(rng):
    proto, feeds = _attention(rng, mask="add", mask_shape=(2, 1, 1, 9))
    with Worker(ModelLoader.from_proto(proto), GPU) as worker:
        # the planning walk fuses as runs do, so the shader is compiled before the first run
        worker.plan_for({n: a.shape for n, a in feeds.items()})
        assert any(p.path == "attention.wgsl" for p in worker._backend.pipelines.warmed)
        for _ in range(3):
            fresh = {n: rng.standard_normal(a.shape).astype(np.float32)
                     for n, a in feeds.items()}
            worker.schedule(fresh)
            _check({"y": worker.peek_output("y").download_to_array()}, proto, fresh)
        assert list(worker._backend.replay_status.values()) == ["replayed"]


@pytest.mark.usefixtures("require_gpu")
@pytest.mark.parametrize("case", ["odd_value_width", "captured_scores", "softmax_on_cpu",
                                  "other_axis", "probabilities_read_twice"])
def test_chains_that_cannot_fuse_run_as_layers(rng, case):
    kwargs, options, capture = {"mask": "add", "mask_shape": (2, 1, 1, 9)}, {}, None
    if case == "odd_value_width":
        kwargs["dv"] = 6
    elif case == "captured_scores":
        capture = ["scaled"]
    elif case == "softmax_on_cpu":
        options["placement_overrides"] = {"softmax_layer": "cpu"}
    elif case == "other_axis":
        kwargs.update(axis=-2, L=9)
    else:
        kwargs["extra_user"] = True
    proto, feeds = _attention(rng, **kwargs)
    outs, seen = _run(proto, feeds, capture=capture, **options)
    _check(outs, proto, feeds)
    if capture:
        s = feeds["q"].astype(np.float64) @ feeds["kt"] / np.sqrt(5)
        np.testing.assert_allclose(outs["scaled"], s, rtol=1e-4, atol=1e-5)
    assert "scores_layer" in seen and "out_layer" in seen, seen


@pytest.mark.usefixtures("require_gpu")
def test_unfused_strategy_runs_the_chain_as_layers(rng, monkeypatch):
    """The GPUs' default: the same results from the chain's own dispatches."""
    monkeypatch.setenv("ENGINE_GPU_ATTENTION", "unfused")
    proto, feeds = _attention(rng, mask="add", mask_shape=(2, 1, 1, 9))
    outs, seen = _run(proto, feeds)
    _check(outs, proto, feeds)
    assert "scores_layer" in seen and "softmax_layer" in seen and "out_layer" in seen, seen


def test_find_takes_the_exported_forms_only(rng):
    """The chains found on the model alone (no adapter needed)."""
    def chain_of(**kwargs):
        found = attention.find(ModelLoader.from_proto(_attention(rng, **kwargs)[0]))
        return next(iter(found.values()), None)

    for kwargs, mode in [({}, attention.MASK_NONE), ({"mask": "add"}, attention.MASK_ADD),
                         ({"mask": "keep"}, attention.MASK_KEEP),
                         ({"scale": None, "mask": "keep"}, attention.MASK_KEEP)]:
        chain = chain_of(**kwargs)
        assert chain is not None and chain.mode == mode, kwargs
        assert chain.softmax.name == "softmax_layer" and chain.out.name == "out_layer"
        assert (chain.scale is None) == (kwargs.get("scale", "Div") is None)
    assert chain_of(extra_user=True) is None
    proto, _ = _attention(rng)
    div = next(n for n in proto.graph.node if n.op_type == "Div")
    div.input[:] = ["c", "scores"]  # c / scores is no scale
    assert not attention.find(ModelLoader.from_proto(proto))
