"""The CPU plan's transformer fusions (attention, Erf-form GELU) against onnxruntime.

Models load without the import-time passes here: those already rewrite a written-out GELU
into one Gelu layer (``engine.passes.patterns``), and the CPU plan's own matchers are what
a model loaded with ``optimize=False`` runs."""

from __future__ import annotations

import math

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from scipy import special

from engine import ModelLoader, Worker

F = TensorProto.FLOAT


def _run(proto, feeds, fused_steps):
    model = ModelLoader.from_proto(proto, optimize=False)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(proto.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    with Worker(model, "cpu") as worker:
        assert sum(1 for s in worker._cpu_steps() if s[6]) == fused_steps
        worker.schedule(feeds)
        got = worker.peek_output("y").download_to_array()
        assert [t.name for t in worker.last_profile.layers] == [x.name for x in model.layers]
        worker.schedule(feeds, capture="all")  # captures run the unfused plan
        unfused = worker.peek_output("y").download_to_array()
    return got, unfused, want


def _attention_model(scale_op, mask, heads=3, seq=37, keys=45, dh=16):
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s0"])]
    inits = {}
    last = "s0"
    if scale_op:
        c = math.sqrt(dh) if scale_op == "Div" else 1 / math.sqrt(dh)
        inits["c"] = np.array(c, np.float32)
        nodes.append(helper.make_node(scale_op, ["s0", "c"], ["s1"]))
        last = "s1"
    inputs = [helper.make_tensor_value_info("q", F, ["b", heads, "s", dh]),
              helper.make_tensor_value_info("k", F, ["b", heads, dh, "m"]),
              helper.make_tensor_value_info("v", F, ["b", heads, "m", 8])]
    if mask == "add":
        inputs.append(helper.make_tensor_value_info("mask", F, ["b", 1, 1, "m"]))
        nodes.append(helper.make_node("Add", [last, "mask"], ["s2"]))
        last = "s2"
    elif mask == "where":
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, ["s", "m"]))
        inits["fill"] = np.array(-np.inf, np.float32)
        nodes.append(helper.make_node("Where", ["mask", last, "fill"], ["s2"]))
        last = "s2"
    nodes += [helper.make_node("Softmax", [last], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "attn", inputs,
                              [helper.make_tensor_value_info("y", F, ["?"] * 4)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _attention_feeds(rng, mask, b=2, h=3, s=37, m=45, dh=16):
    feeds = {"q": rng.normal(size=(b, h, s, dh)).astype(np.float32),
             "k": rng.normal(size=(b, h, dh, m)).astype(np.float32),
             "v": rng.normal(size=(b, h, m, 8)).astype(np.float32)}
    if mask == "add":
        feeds["mask"] = np.where(rng.random((b, 1, 1, m)) < 0.3, -1e4, 0).astype(np.float32)
    elif mask == "where":
        feeds["mask"] = rng.random((s, m)) < 0.8
        feeds["mask"][:, 0] = True  # no fully masked row (that row is NaN everywhere)
    return feeds


@pytest.mark.parametrize("scale_op", [None, "Div", "Mul"])
@pytest.mark.parametrize("mask", [None, "add", "where"])
def test_attention_chain_is_one_step(scale_op, mask, rng):
    feeds = _attention_feeds(rng, mask)
    got, unfused, want = _run(_attention_model(scale_op, mask), feeds, 1)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(unfused, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("mask", ["add", "where"])
@pytest.mark.parametrize("batch", [1, 2])
def test_attention_mask_shared_or_per_image(mask, batch, rng):
    """A mask that every head (and image) shares is read in place; one that differs per
    image is laid out per head: both must match the reference."""
    feeds = _attention_feeds(rng, mask, b=batch)
    if mask == "add":
        assert (feeds["mask"] != 0).any() and (feeds["mask"] == 0).any()
    got, _, want = _run(_attention_model("Mul", mask), feeds, 1)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("mask", [None, "add", "where"])
def test_attention_heads_split_over_threads(mask, rng, monkeypatch):
    """Few short heads run as batched products, one run of heads a thread."""
    from engine.backends.cpu import kernels_attention_fused as kaf
    from engine.backends.cpu import threads

    monkeypatch.setattr(kaf, "CHUNK_MACS", 1)
    before = threads.threads()
    threads.set_threads(2)
    try:
        got, _, want = _run(_attention_model("Mul", mask), _attention_feeds(rng, mask), 1)
    finally:
        threads.set_threads(before)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_attention_with_a_long_sequence_uses_several_blocks(rng):
    feeds = {"q": rng.normal(size=(1, 3, 700, 16)).astype(np.float32),
             "k": rng.normal(size=(1, 3, 16, 700)).astype(np.float32),
             "v": rng.normal(size=(1, 3, 700, 8)).astype(np.float32)}
    got, _, want = _run(_attention_model("Div", None), feeds, 1)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("mask_shape", [(2, 1, 37, 45), (37, 45), (1, 3, 1, 45)])
def test_attention_masks_of_other_shapes(mask_shape, rng):
    """Full per-row masks, masks without leading dims and per-head ones are laid out as
    contiguous rows for the kernel; a NaN in the mask reaches only its own row."""
    b, h, s, m, dh = 2, 3, 37, 45, 16
    feeds = {"q": rng.normal(size=(b, h, s, dh)).astype(np.float32),
             "k": rng.normal(size=(b, h, dh, m)).astype(np.float32),
             "v": rng.normal(size=(b, h, m, 8)).astype(np.float32),
             "mask": rng.normal(scale=3.0, size=mask_shape).astype(np.float32)}
    feeds["mask"].reshape(-1)[7] = np.nan
    proto = _attention_model("Mul", "add")
    proto.graph.input[3].CopyFrom(helper.make_tensor_value_info("mask", F, list(mask_shape)))
    got, _, want = _run(proto, feeds, 1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_attention_nan_reaches_its_row(rng):
    feeds = {"q": rng.normal(size=(1, 3, 37, 16)).astype(np.float32),
             "k": rng.normal(size=(1, 3, 16, 45)).astype(np.float32),
             "v": rng.normal(size=(1, 3, 45, 8)).astype(np.float32)}
    feeds["q"][0, 1, 5, 3] = np.nan
    got, _, want = _run(_attention_model("Div", None), feeds, 1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got).any()


def _gelu_model(torch_form: bool, shape=("n", 64)):
    inits = {"r2": np.array(math.sqrt(2), np.float32), "one": np.array(1, np.float32),
             "half": np.array(0.5, np.float32)}
    e = [helper.make_node("Div", ["x", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
         helper.make_node("Add", ["e", "one"], ["a"])]
    if torch_form:
        nodes = [helper.make_node("Mul", ["x", "half"], ["h"]), *e,
                 helper.make_node("Mul", ["h", "a"], ["y"])]
    else:
        nodes = e + [helper.make_node("Mul", ["x", "a"], ["m"]),
                     helper.make_node("Mul", ["m", "half"], ["y"])]
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", F, shape)],
                              [helper.make_tensor_value_info("y", F, ["?"] * 2)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("torch_form", [False, True])
def test_erf_gelu_chain_is_one_step(torch_form, rng):
    x = (rng.normal(size=(33, 64)) * 3).astype(np.float32)
    x[0, :4] = [np.nan, np.inf, -np.inf, 0.0]
    got, unfused, want = _run(_gelu_model(torch_form), {"x": x}, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(unfused, want, rtol=1e-5, atol=1e-6)


def test_gelu_of_float64_runs_the_layers_one_by_one(rng):
    """The fused kernel declines float64; the layers run one by one (onnxruntime has no
    float64 Erf, so the reference is SciPy in float64)."""
    proto = _gelu_model(False)
    proto.graph.input[0].type.tensor_type.elem_type = TensorProto.DOUBLE
    proto.graph.output[0].type.tensor_type.elem_type = TensorProto.DOUBLE
    for init in proto.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float64),
                                              init.name))
    x = rng.normal(size=(5, 64))
    with Worker(ModelLoader.from_proto(proto, optimize=False), "cpu") as worker:
        assert sum(1 for s in worker._cpu_steps() if s[6]) == 1
        got = worker.schedule({"x": x}).peek_output("y").download_to_array()
    root2 = float(np.float32(math.sqrt(2)))  # the model's constant, made in float32
    np.testing.assert_allclose(got, 0.5 * x * (1 + special.erf(x / root2)), rtol=1e-12)


def test_tanh_gelu_chain_is_one_step(rng):
    """GPT-2's spelling: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    inits = {"three": 3.0, "c": 0.044715, "k": math.sqrt(2 / math.pi), "one": 1.0, "half": 0.5}
    nodes = [helper.make_node("Pow", ["x", "three"], ["p"]),
             helper.make_node("Mul", ["p", "c"], ["pc"]),
             helper.make_node("Add", ["x", "pc"], ["s"]),
             helper.make_node("Mul", ["s", "k"], ["sk"]),
             helper.make_node("Tanh", ["sk"], ["t"]),
             helper.make_node("Add", ["t", "one"], ["a"]),
             helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    graph = helper.make_graph(
        nodes, "gelu_tanh", [helper.make_tensor_value_info("x", F, ["n", 64])],
        [helper.make_tensor_value_info("y", F, ["?"] * 2)],
        [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in inits.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = (rng.normal(size=(33, 64)) * 3).astype(np.float32)
    got, unfused, want = _run(proto, {"x": x}, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(unfused, want, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("affine", [True, False])
def test_decomposed_layer_norm_is_one_step(opset, affine, rng):
    d = 48
    inits = {"two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
             "gamma": rng.uniform(0.5, 1.5, d).astype(np.float32),
             "beta": rng.normal(0, 0.1, d).astype(np.float32)}

    def mean(src, dst):
        if opset >= 18:
            return helper.make_node("ReduceMean", [src, "axes"], [dst], keepdims=1)
        return helper.make_node("ReduceMean", [src], [dst], axes=[-1], keepdims=1)

    if opset >= 18:
        inits["axes"] = np.array([-1], np.int64)
    nodes = [mean("x", "m"), helper.make_node("Sub", ["x", "m"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["p"]), mean("p", "v"),
             helper.make_node("Add", ["v", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n" if affine else "y"])]
    if affine:
        nodes += [helper.make_node("Mul", ["n", "gamma"], ["g"]),
                  helper.make_node("Add", ["g", "beta"], ["y"])]
    graph = helper.make_graph(
        nodes, "ln", [helper.make_tensor_value_info("x", F, ["b", "s", d])],
        [helper.make_tensor_value_info("y", F, ["?"] * 3)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    x = (rng.normal(size=(2, 7, d)) * 3 + 1).astype(np.float32)
    x[1, 3, 5] = np.nan
    got, unfused, want = _run(proto, {"x": x}, 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(unfused, want, rtol=1e-4, atol=1e-5)
    assert np.isnan(got[1, 3]).all() and not np.isnan(got[0]).any()


@pytest.mark.parametrize("seq", [24, 300])  # heads batched / a block of rows at a time
@pytest.mark.parametrize("batch", [1, 2])  # batch 1: the result written heads-last
def test_attention_reads_transposed_qkv_as_views(seq, batch):
    """Q, K^T and V as exporters write them (Transposes of [B, L, H, D], K to [B, H, D, L]),
    and the result transposed back to [B, L, H, D]: the four Transposes are absorbed into
    the attention step, which reads strided views and writes the result in that layout."""
    heads, dh = 3, 16
    nodes = [helper.make_node("Transpose", ["xq"], ["q"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["xk"], ["k"], perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["xv"], ["v"], perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["q", "k"], ["s0"]),
             helper.make_node("Mul", ["s0", "c"], ["s1"]),
             helper.make_node("Softmax", ["s1"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["o"]),
             helper.make_node("Transpose", ["o"], ["y"], perm=[0, 2, 1, 3])]
    inputs = [helper.make_tensor_value_info(n, F, ["b", "s", heads, dh])
              for n in ("xq", "xk", "xv")]
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", F, ["?"] * 4)],
                              [numpy_helper.from_array(np.array(0.25, np.float32), "c")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(5)
    feeds = {n: rng.normal(0, 1, (batch, seq, heads, dh)).astype(np.float32)
             for n in ("xq", "xk", "xv")}
    got, unfused, want = _run(proto, feeds, 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(unfused, want, rtol=1e-4, atol=1e-5)
    model = ModelLoader.from_proto(proto, optimize=False)
    with Worker(model, "cpu") as worker:
        fused = [s for s in worker._cpu_steps() if s[6]]
        assert fused[0][0].op_type == "MatMul"  # the time shows on the Q K product
        assert sorted(layer.op_type for layer in fused[0][6]) == \
            ["MatMul", "Mul", "Softmax", "Transpose", "Transpose", "Transpose", "Transpose"]


def _channels_model(nodes, inits, c):
    x = helper.make_tensor_value_info("x", F, ["n", c, "h", "w"])
    r = helper.make_tensor_value_info("r", F, ["n", c, "h", "w"])
    graph = helper.make_graph(nodes, "g", [x, r], [helper.make_tensor_value_info("y", F,
                                                                               ["?"] * 4)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("back", [False, True])
def test_layer_norm_over_channels_between_transposes(back):
    """ConvNeXt's channels-last LayerNorm: Transpose(0, 2, 3, 1) -> LayerNormalization
    [-> Transpose(0, 3, 1, 2)] as one step over the NCHW input (a residual-free graph: the
    second input is only added at the end so both layouts are checked)."""
    c, rng = 24, np.random.default_rng(8)
    inits = {"g": rng.normal(1, 0.2, c).astype(np.float32),
             "b": rng.normal(0, 0.2, c).astype(np.float32)}
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["t", "g", "b"], ["ln"], axis=-1,
                              epsilon=1e-6)]
    if back:
        nodes += [helper.make_node("Transpose", ["ln"], ["u"], perm=[0, 3, 1, 2]),
                  helper.make_node("Add", ["u", "r"], ["y"])]
    else:
        nodes += [helper.make_node("Transpose", ["r"], ["rt"], perm=[0, 2, 3, 1]),
                  helper.make_node("Add", ["ln", "rt"], ["y"])]
    feeds = {"x": rng.normal(2, 3, (2, c, 9, 7)).astype(np.float32),
             "r": rng.normal(0, 1, (2, c, 9, 7)).astype(np.float32)}
    got, unfused, want = _run(_channels_model(nodes, inits, c), feeds, 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(unfused, want, rtol=1e-4, atol=1e-5)


def test_layer_scale_transpose_back_and_residual():
    """ConvNeXt's block end: Mul(y, gamma) -> Transpose(0, 3, 1, 2) -> Add(residual)."""
    c, rng = 20, np.random.default_rng(9)
    inits = {"gamma": rng.normal(0, 0.5, c).astype(np.float32)}
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 3, 1]),
             helper.make_node("Relu", ["xt"], ["yl"]),
             helper.make_node("Mul", ["yl", "gamma"], ["s"]),
             helper.make_node("Transpose", ["s"], ["st"], perm=[0, 3, 1, 2]),
             helper.make_node("Add", ["r", "st"], ["y"])]
    feeds = {"x": rng.normal(0, 1, (2, c, 6, 11)).astype(np.float32),
             "r": rng.normal(0, 1, (2, c, 6, 11)).astype(np.float32)}
    got, unfused, want = _run(_channels_model(nodes, inits, c), feeds, 1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(unfused, want)
