"""Exported HardSwish / HardSigmoid chains after a Conv, fused into its epilogue (written out
with ``+ 3``: by the import pass, ``passes.fusion_hswish``; ``Clip(0, c) / c``: by the CPU
plan, ``step_fusion_conv``), against onnxruntime on fresh random data, NaN and Inf
included."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from engine import ModelLoader, Worker
from tests.test_cpu_step_fusion import _check, _model


def _scalar(v):
    return np.array(v, np.float32)


def _inits(rng, m=8, c=6, k=3, group=1):
    return {"w": rng.normal(0, 0.5, (m, c // group, k, k)).astype(np.float32),
            "b": rng.normal(0, 0.5, m).astype(np.float32),
            "three": _scalar(3.0), "zero": _scalar(0.0), "six": _scalar(6.0)}


def _hswish_nodes(k=3, group=1, bias=True):
    return [helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["t"],
                             kernel_shape=[k, k], pads=[k // 2] * 4, group=group),
            helper.make_node("Add", ["t", "three"], ["a"]),
            helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
            helper.make_node("Mul", ["t", "c"], ["m"]),
            helper.make_node("Div", ["m", "six"], ["y"])]


def _x(rng, scale=4.0):
    return (rng.standard_normal((1, 6, 9, 9)) * scale).astype(np.float32)


@pytest.mark.parametrize("k,group,bias", [(3, 1, True), (1, 1, True), (3, 6, True),
                                          (3, 1, False)])
def test_exported_hardswish_fused(rng, k, group, bias):
    m = 6 if group > 1 else 8
    inits = _inits(rng, m=m, k=k, group=group)
    if not bias:
        del inits["b"]
    proto = _model(_hswish_nodes(k, group, bias), inits)
    layers = ModelLoader.from_proto(proto).layers
    assert [(la.op_type, la.attr("activation")) for la in layers] == [("Conv", "HardSwish")]
    _check(proto, {"x": _x(rng)}, 0)
    _check(proto, {"x": _x(rng)}, 0, optimize=False)  # as written, layer by layer


def test_exported_hardsigmoid_fused_at_import(rng):
    """Conv -> Add 3 -> Clip(0, 6) -> Div 6: the import pass makes it the Conv's
    HardSigmoid(1/6, 1/2)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["t", "three"], ["a"]),
             helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
             helper.make_node("Div", ["c", "six"], ["y"])]
    proto = _model(nodes, _inits(rng, k=1))
    layers = ModelLoader.from_proto(proto).layers
    assert [(la.op_type, la.attr("activation")) for la in layers] == [("Conv", "HardSigmoid")]
    _check(proto, {"x": _x(rng)}, 0)


def test_clip_div_fused_by_the_cpu_plan(rng):
    """Conv -> Clip(0, 6) -> Div 6 (no + 3): the import pass fuses the Clip; the CPU plan
    then takes the Div into the epilogue as HardSigmoid(1/6, 0)."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], kernel_shape=[1, 1]),
             helper.make_node("Clip", ["t", "zero", "six"], ["c"]),
             helper.make_node("Div", ["c", "six"], ["y"])]
    proto = _model(nodes, _inits(rng, k=1))
    layers = ModelLoader.from_proto(proto).layers
    assert [(la.op_type, la.attr("activation")) for la in layers] == [("Conv", "Clip"),
                                                                    ("Div", None)]
    _check(proto, {"x": _x(rng)}, 1)


def test_other_constants_are_not_fused(rng):
    inits = _inits(rng)
    inits["six"] = _scalar(5.0)
    _check(_model(_hswish_nodes(), inits), {"x": _x(rng)}, 0)


def test_conv_output_read_elsewhere_is_not_fused(rng):
    nodes = _hswish_nodes()[:-1] + [helper.make_node("Div", ["m", "six"], ["d"]),
                                    helper.make_node("Add", ["d", "t"], ["y"])]
    _check(_model(nodes, _inits(rng)), {"x": _x(rng)}, 0)


def test_exported_hardswish_nan_inf(rng):
    """Specials reach the same outputs as in the unfused graph (onnxruntime): NaN where
    onnxruntime has NaN (-Inf * 0 included), the same infinities elsewhere."""
    proto = _model(_hswish_nodes(k=1), _inits(rng, k=1))
    x = _x(rng)
    flat = x.reshape(-1)
    idx = rng.choice(flat.size, 9, replace=False)
    flat[idx] = [np.nan] * 3 + [np.inf] * 3 + [-np.inf] * 3
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    model = ModelLoader.from_proto(proto)
    assert [la.attr("activation") for la in model.layers] == ["HardSwish"]
    with Worker(model, "cpu") as worker:
        worker.schedule({"x": x})
        got = worker.peek_output("y").download_to_array()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])



# -- squeeze-and-excitation ------------------------------------------------------------------
def _se_model(rng, exported: bool, n: int = 2, c: int = 6, relu_x: bool = True):
    from onnx import TensorProto, numpy_helper

    r = c // 2
    inits = {"w1": rng.normal(0, 0.5, (r, c, 1, 1)).astype(np.float32),
             "b1": rng.normal(0, 0.5, r).astype(np.float32),
             "w2": rng.normal(0, 0.5, (c, r, 1, 1)).astype(np.float32),
             "b2": rng.normal(0, 0.5, c).astype(np.float32),
             "three": _scalar(3.0), "zero": _scalar(0.0), "six": _scalar(6.0)}
    if not exported:
        del inits["three"], inits["zero"], inits["six"]
    nodes = [helper.make_node("Relu" if relu_x else "Identity", ["x"], ["xr"]),
             helper.make_node("GlobalAveragePool", ["xr"], ["g"]),
             helper.make_node("Conv", ["g", "w1", "b1"], ["h0"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["h0"], ["h"]),
             helper.make_node("Conv", ["h", "w2", "b2"], ["s0"], kernel_shape=[1, 1])]
    if exported:
        nodes += [helper.make_node("Add", ["s0", "three"], ["s1"]),
                  helper.make_node("Clip", ["s1", "zero", "six"], ["s2"]),
                  helper.make_node("Div", ["s2", "six"], ["s"])]
    else:
        nodes.append(helper.make_node("HardSigmoid", ["s0"], ["s"], alpha=1 / 6, beta=0.5))
    nodes.append(helper.make_node("Mul", ["xr", "s"], ["y"]))
    graph = helper.make_graph(
        nodes, "se", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, 7, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run_both(proto, x):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    with Worker(ModelLoader.from_proto(proto), "cpu") as worker:
        fused = [s for s in worker._cpu_steps() if s[6]]
        worker.schedule({"x": x})
        got = worker.peek_output("y").download_to_array()
        worker.schedule({"x": x}, capture="all")  # captures run the unfused plan
        unfused = worker.peek_output("y").download_to_array()
    return got, unfused, want, fused


@pytest.mark.parametrize("exported", [False, True])
def test_squeeze_excite_fused(rng, exported):
    x = (rng.standard_normal((2, 6, 7, 5)) * 2).astype(np.float32)
    got, unfused, want, fused = _run_both(_se_model(rng, exported), x)
    assert [s[0].op_type for s in fused] == ["GlobalAveragePool"]
    # the written-out gate is the second Conv's fused HardSigmoid after import, as the
    # HardSigmoid layer is
    assert len(fused[0][6]) == 3
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(unfused, want, rtol=1e-5, atol=1e-6)


def test_squeeze_excite_nan_inf(rng):
    """A NaN or Inf in a channel makes its mean, and through the 1x1 products every gate,
    non-finite, as in the unfused graph."""
    x = rng.standard_normal((2, 6, 7, 5)).astype(np.float32)
    x[0, 2, 3, 1] = np.nan
    x[1, 4, 0, 0] = np.inf
    got, _, want, fused = _run_both(_se_model(rng, False, relu_x=False), x)
    assert len(fused) == 1
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-6)


def test_squeeze_excite_gate_on_another_tensor_is_not_fused(rng):
    proto = _se_model(rng, False)
    proto.graph.node[-1].input[0] = "x"  # Mul(x, gate) while the pool read Relu(x)
    x = rng.standard_normal((2, 6, 7, 5)).astype(np.float32)
    got, _, want, fused = _run_both(proto, x)
    assert not any(s[0].op_type == "GlobalAveragePool" for s in fused)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
