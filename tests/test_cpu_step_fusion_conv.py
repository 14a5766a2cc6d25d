"""Exported HardSwish / HardSigmoid chains after a Conv, fused into its epilogue by the CPU
plan (``step_fusion_conv``), against onnxruntime on fresh random data, NaN and Inf included."""

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
    _check(_model(_hswish_nodes(k, group, bias), inits), {"x": _x(rng)}, 1)


def test_exported_hardsigmoid_clip_div_fused(rng):
    """Conv -> Add 3 -> Clip(0, 6) -> Div 6: the import pass folds the Add into the bias
    and fuses the Clip; the CPU plan then takes the Div into the epilogue."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["t", "three"], ["a"]),
             helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
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
    with Worker(ModelLoader.from_proto(proto), "cpu") as worker:
        assert sum(1 for s in worker._cpu_steps() if s[6]) == 1
        worker.schedule({"x": x})
        got = worker.peek_output("y").download_to_array()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])

