"""The CPU plan's linear-layer fusion (MatMul by a constant + bias [+ GELU | + Sigmoid |
+ residual]):
one step, results as onnxruntime's (unfused graph) on fresh random data, NaN and Inf where
the layers put them, and the layers one by one where the fused kernel declines."""

from __future__ import annotations

import math

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import ModelLoader, Worker
from engine.backends.cpu import linear_fused, threads
from engine.backends.cpu.linear_fused import (
    EPI_BIAS,
    EPI_GELU_ERF,
    EPI_GELU_TANH,
    EPI_SIGMOID,
    linear,
)
from tests.test_nan_propagation import assert_ieee_equal, sprinkle

F = TensorProto.FLOAT


def _model(tail: str, k: int, n: int, rng, bias_first=False, res_shape=None, dtype=np.float32):
    inits = {"w": (rng.normal(size=(k, n)) / math.sqrt(k)).astype(dtype),
             "b": rng.normal(size=(n,)).astype(dtype)}
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]),
             helper.make_node("Add", ["b", "mm"] if bias_first else ["mm", "b"], ["z"])]
    inputs = [helper.make_tensor_value_info("x", elem, ["batch", "s", k])]
    c = {"r2": math.sqrt(2), "one": 1.0, "half": 0.5, "three": 3.0, "c": 0.044715,
         "kk": math.sqrt(2 / math.pi)}
    if tail == "erf":
        nodes += [helper.make_node("Div", ["z", "r2"], ["d"]),
                  helper.make_node("Erf", ["d"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["a"]),
                  helper.make_node("Mul", ["z", "a"], ["m"]),
                  helper.make_node("Mul", ["m", "half"], ["y"])]
    elif tail == "erf_torch":
        nodes += [helper.make_node("Mul", ["z", "half"], ["h"]),
                  helper.make_node("Div", ["z", "r2"], ["d"]),
                  helper.make_node("Erf", ["d"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["a"]),
                  helper.make_node("Mul", ["h", "a"], ["y"])]
    elif tail == "tanh":
        nodes += [helper.make_node("Pow", ["z", "three"], ["p"]),
                  helper.make_node("Mul", ["p", "c"], ["pc"]),
                  helper.make_node("Add", ["z", "pc"], ["s"]),
                  helper.make_node("Mul", ["s", "kk"], ["sk"]),
                  helper.make_node("Tanh", ["sk"], ["t"]),
                  helper.make_node("Add", ["t", "one"], ["a"]),
                  helper.make_node("Mul", ["z", "a"], ["m"]),
                  helper.make_node("Mul", ["m", "half"], ["y"])]
    elif tail == "sigmoid":
        nodes.append(helper.make_node("Sigmoid", ["z"], ["y"]))
    elif tail == "res":
        nodes.append(helper.make_node("Add", ["r", "z"], ["y"]))
        inputs.append(helper.make_tensor_value_info("r", elem, list(res_shape or
                                                                    ["batch", "s", n])))
    else:
        nodes[-1].output[0] = "y"
    for name, v in c.items():
        inits[name] = np.array(v, dtype)
    graph = helper.make_graph(nodes, "linear", inputs,
                              [helper.make_tensor_value_info("y", elem, ["?"] * 3)],
                              [numpy_helper.from_array(v, name) for name, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(proto, feeds, fused: bool):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(proto.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    results = []
    # loaded with the import passes a written-out GELU is already one Gelu layer; without
    # them the CPU plan matches the chain itself: both must fuse into the linear step
    for optimize in (True, False):
        model = ModelLoader.from_proto(proto, optimize=optimize)
        with Worker(model, "cpu") as worker:
            names = [getattr(s[1], "__name__", "") for s in worker._cpu_steps()]
            assert ("fused_linear" in names) == fused
            if fused:
                assert len(names) == 1
            results.append(worker.schedule(feeds).peek_output("y").download_to_array())
            assert [t.name for t in worker.last_profile.layers] == \
                [x.name for x in model.layers]
    np.testing.assert_array_equal(results[0], results[1])
    return results[0], want


@pytest.mark.parametrize("tail", ["none", "erf", "erf_torch", "tanh", "sigmoid", "res"])
@pytest.mark.parametrize("k,n,s", [(37, 53, 11), (64, 300, 130), (32, 1, 16), (13, 7, 5)])
def test_linear_chain_is_one_step(tail, k, n, s, rng):
    feeds = {"x": rng.normal(size=(2, s, k)).astype(np.float32)}
    if tail == "res":
        feeds["r"] = rng.normal(size=(2, s, n)).astype(np.float32)
    got, want = _run(_model(tail, k, n, rng, bias_first=tail == "none"), feeds, True)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("tail", ["none", "erf", "tanh", "sigmoid", "res"])
def test_linear_nan_and_inf_go_where_the_layers_put_them(tail, rng):
    feeds = {"x": sprinkle(rng.normal(size=(2, 9, 16)).astype(np.float32), rng, 0.02)}
    if tail == "res":
        feeds["r"] = sprinkle(rng.normal(size=(2, 9, 24)).astype(np.float32), rng)
    got, want = _run(_model(tail, 16, 24, rng), feeds, True)
    assert np.isnan(got).any()
    assert_ieee_equal(got, want, rtol=2e-5, what=tail)


def test_residual_that_broadcasts_runs_the_layers_one_by_one(rng):
    feeds = {"x": rng.normal(size=(2, 7, 12)).astype(np.float32),
             "r": rng.normal(size=(1, 7, 20)).astype(np.float32)}
    got, want = _run(_model("res", 12, 20, rng, res_shape=[1, "s", 20]), feeds, True)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("tail", ["none", "sigmoid", "res"])
@pytest.mark.parametrize("n", [1, 5, 15])
def test_narrow_product_in_one_call_matches_float64(tail, n, rng):
    """Products with few output columns (``linear_small``: a probability head) against
    float64, K not a multiple of the four partial sums."""
    m, k = 19, 37
    assert n < linear_fused.SMALL_COLUMNS and m * k * n <= linear_fused.SMALL_MACS
    x = rng.normal(size=(m, k)).astype(np.float32)
    w = (rng.normal(size=(k, n)) / math.sqrt(k)).astype(np.float32)
    b = rng.normal(size=(n,)).astype(np.float32)
    res = rng.normal(size=(m, n)).astype(np.float32) if tail == "res" else None
    got = linear(x, w, b, EPI_SIGMOID if tail == "sigmoid" else EPI_BIAS, res)
    z = x.astype(np.float64) @ w + b
    z = 1 / (1 + np.exp(-z)) if tail == "sigmoid" else z if res is None else z + res
    np.testing.assert_allclose(got, z, rtol=1e-5, atol=1e-6)


def test_float64_is_not_fused_and_matches(rng):
    feeds = {"x": rng.normal(size=(2, 5, 12))}
    got, want = _run(_model("none", 12, 20, rng, dtype=np.float64), feeds, False)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("act", [EPI_BIAS, EPI_GELU_ERF, EPI_GELU_TANH])
def test_split_product_epilogue_matches_float64(act, rng):
    """Large enough for threads.matmul to split it: every block gets its epilogue once."""
    m, k, n = 203, 192, 517
    x = rng.normal(size=(m, k)).astype(np.float32)
    w = (rng.normal(size=(k, n)) / math.sqrt(k)).astype(np.float32)
    b = rng.normal(size=(n,)).astype(np.float32)
    res = rng.normal(size=(m, n)).astype(np.float32) if act == EPI_BIAS else None
    assert m * k * n >= threads.SPLIT_MIN_FLOPS
    got = linear(x, w, b, act, res)
    z = x.astype(np.float64) @ w + b
    if act == EPI_GELU_ERF:
        from scipy import special
        z = 0.5 * z * (1 + special.erf(z / math.sqrt(2)))
    elif act == EPI_GELU_TANH:
        z = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
    else:
        z = z + res
    np.testing.assert_allclose(got, z, rtol=1e-4, atol=1e-5)


def test_read_only_weight_is_used_in_place(rng):
    """A read-only weight (memory-mapped external data) is handed to BLAS as it is, not
    copied into the fused step."""
    proto = _model("erf", 24, 40, rng)
    model = ModelLoader.from_proto(proto)
    for value in model.constants.values():
        value.flags.writeable = False
    feeds = {"x": rng.normal(size=(2, 5, 24)).astype(np.float32)}
    with Worker(model, "cpu") as worker:
        step = next(s for s in worker._cpu_steps() if s[1].__name__ == "fused_linear")
        cells = {id(c.cell_contents) for c in step[1].__closure__}
        assert id(model.constants["w"]) in cells
        got = worker.schedule(feeds).peek_output("y").download_to_array()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(proto.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
