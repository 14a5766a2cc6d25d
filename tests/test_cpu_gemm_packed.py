"""The packed-weight product of linear layers (``gemm_packed``) against NumPy in float64, on
fresh random data: partial row tiles and column panels, several row blocks, both thread
splits, each epilogue; and the weights packed once per array."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.backends.cpu import gemm_packed, threads
from engine.backends.cpu.linear_fused import EPI_BIAS, EPI_GELU_ERF, EPI_GELU_TANH, linear


@pytest.fixture(autouse=True)
def _pack_small_products(monkeypatch):
    """These products are small; the size floor is tested on its own."""
    monkeypatch.setattr(gemm_packed, "MIN_MACS", 0)


def _reference(x, w, b, act, res):
    y = x.astype(np.float64) @ w.astype(np.float64) + b
    if act == EPI_GELU_ERF:
        y = 0.5 * y * (1 + np.vectorize(math.erf)(y / math.sqrt(2)))
    elif act == EPI_GELU_TANH:
        y = 0.5 * y * (1 + np.tanh(0.7978845608028654 * (y + 0.044715 * y ** 3)))
    return y if res is None else y + res


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("m,k,n", [(1, 7, 33), (5, 64, 32), (8, 1, 1), (64, 96, 100),
                                   (65, 40, 64), (197, 48, 96), (300, 33, 31)])
def test_packed_product_matches_float64(m, k, n, nthreads, monkeypatch):
    monkeypatch.setattr(threads, "SPLIT_MIN_FLOPS", 1)  # split even these small products
    threads.set_threads(nthreads)
    try:
        rng = np.random.default_rng(m * 1000 + k * 10 + n)
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((k, n)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        res = rng.standard_normal((m, n)).astype(np.float32)
        for act, r in ((EPI_BIAS, None), (EPI_GELU_ERF, None), (EPI_GELU_TANH, None),
                       (EPI_BIAS, res)):
            got = linear(x, w, b, act, r)
            want = _reference(x, w, b, act, r)
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * math.sqrt(k))
    finally:
        threads.set_threads(0)


def test_leading_dims_and_the_packed_weights_are_kept():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 9, 24)).astype(np.float32)
    w = rng.standard_normal((24, 40)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    first = gemm_packed.packed(w)
    assert gemm_packed.packed(w) is first  # one packing per weight array
    got = linear(x, w, b)
    np.testing.assert_allclose(got, _reference(x.reshape(-1, 24), w, b, EPI_BIAS, None)
                               .reshape(2, 9, 40), rtol=2e-5, atol=1e-4)
    key = (id(w), False)
    assert key in gemm_packed._packed
    del w
    assert key not in gemm_packed._packed  # freed with its weights


def test_nan_and_inf_reach_the_output_as_in_the_product():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.standard_normal((8, 40)).astype(np.float32)
    x[3, 2] = np.nan
    x[7, 1] = np.inf
    b = np.zeros(40, np.float32)
    got = linear(x, w, b)
    want = x @ w
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))


def test_weights_above_the_packing_limit_use_the_unpacked_product(monkeypatch):
    monkeypatch.setattr(gemm_packed, "MAX_WEIGHT_BYTES", 1000)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((12, 30)).astype(np.float32)
    w = rng.standard_normal((30, 20)).astype(np.float32)  # 2400 bytes
    b = rng.standard_normal(20).astype(np.float32)
    got = linear(x, w, b, EPI_GELU_TANH)
    assert id(w) not in gemm_packed._packed
    np.testing.assert_allclose(got, _reference(x, w, b, EPI_GELU_TANH, None), rtol=2e-5,
                               atol=1e-4)


def _run_model(nodes, inits, feeds_list, outputs=("y",), monkeypatch=None):
    """Runs on the engine and onnxruntime compared; returns how many products were packed."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from engine import ModelLoader, Worker

    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, f, list(v.shape))
                     for n, v in feeds_list[0].items()],
        [helper.make_tensor_value_info(o, f, [None, None]) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    model = ModelLoader.from_proto(proto)
    calls = []
    real = gemm_packed.matmul_packed

    def spy(*args, **kwargs):
        calls.append(args[1].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(gemm_packed, "matmul_packed", spy)
    with Worker(model, "cpu") as worker:
        for feeds in feeds_list:  # the second and later runs take the packed product
            worker.schedule(feeds)
            for name, want in zip(outputs, session.run(list(outputs), feeds)):
                got = worker.peek_output(name).download_to_array()
                np.testing.assert_allclose(got, want, rtol=3e-5, atol=3e-5)
    return len(calls)


@pytest.mark.parametrize("trans_b,c_shape,beta,relu", [
    (1, (40,), 1.0, True), (0, (1, 40), 0.5, False), (1, (), 1.0, False),
    (0, None, 1.0, True), (1, (6, 40), 1.0, False)])  # last: a full C, not packed
def test_gemm_by_constant_weights(trans_b, c_shape, beta, relu, monkeypatch):
    from onnx import helper

    rng = np.random.default_rng(11)
    w = rng.standard_normal((40, 50) if trans_b else (50, 40)).astype(np.float32)
    inits = {"w": w}
    ins = ["x", "w"]
    if c_shape is not None:
        inits["c"] = rng.standard_normal(c_shape).astype(np.float32)
        ins.append("c")
    nodes = [helper.make_node("Gemm", ins, ["g"], transB=trans_b, beta=beta)]
    nodes.append(helper.make_node("Relu" if relu else "Identity", ["g"], ["y"]))
    feeds = [{"x": rng.standard_normal((6, 50)).astype(np.float32)} for _ in range(3)]
    packed_calls = _run_model(nodes, inits, feeds, monkeypatch=monkeypatch)
    # the first run multiplies unpacked and notes the weight; the next two pack it
    assert packed_calls == (0 if c_shape == (6, 40) else 2)


def test_matmul_packs_a_repeated_weight_not_a_fresh_one(monkeypatch):
    from onnx import helper

    rng = np.random.default_rng(12)
    w = rng.standard_normal((24, 36)).astype(np.float32)
    # y = x @ w (constant); z = x @ (x^T x) (a fresh operand every run)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]),
             helper.make_node("Transpose", ["x"], ["xt"]),
             helper.make_node("MatMul", ["xt", "x"], ["gram"]),
             helper.make_node("MatMul", ["x", "gram"], ["z"])]
    feeds = [{"x": rng.standard_normal((10, 24)).astype(np.float32)} for _ in range(3)]
    assert _run_model(nodes, {"w": w}, feeds, outputs=("y", "z"), monkeypatch=monkeypatch) == 2


def test_no_packing_past_the_total_budget(monkeypatch):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((9, 16)).astype(np.float32)
    b = np.zeros(24, np.float32)
    w1, w2 = (rng.standard_normal((16, 24)).astype(np.float32) for _ in range(2))
    monkeypatch.setattr(gemm_packed, "_packed", {})
    monkeypatch.setattr(gemm_packed, "_held", [0])
    monkeypatch.setattr(gemm_packed, "MAX_PACKED_BYTES", w1.nbytes + 8 * 16 * 4)
    for w in (w1, w2):
        np.testing.assert_allclose(linear(x, w, b), x @ w, rtol=2e-5, atol=1e-4)
    assert [k[0] for k in gemm_packed._packed] == [id(w1)]  # the second did not fit
    held = gemm_packed._held[0]
    assert held == gemm_packed._packed[(id(w1), False)][1].nbytes
    del w1
    assert gemm_packed._held[0] == 0 and not gemm_packed._packed


def test_products_below_the_size_floor_stay_unpacked(monkeypatch):
    monkeypatch.setattr(gemm_packed, "MIN_MACS", 10_000)
    rng = np.random.default_rng(14)
    w = rng.standard_normal((32, 40)).astype(np.float32)
    b = np.zeros(40, np.float32)
    for rows, packs in ((7, False), (8, True)):  # 7 * 1280 < 10000 <= 8 * 1280
        x = rng.standard_normal((rows, 32)).astype(np.float32)
        np.testing.assert_allclose(linear(x, w, b), x @ w, rtol=2e-5, atol=1e-4)
        assert ((id(w), False) in gemm_packed._packed) == packs


@pytest.mark.parametrize("m", [1, 3, 13])
@pytest.mark.parametrize("packed", [True, False])
def test_gemm_repeated_calls_with_rows_past_whole_tiles(m, packed, monkeypatch):
    """A classifier head's Gemm (one row, or rows past a multiple of 8: ``_row``) called
    again with the same weights takes the kept path (``_gemm_again``), packed or not."""
    from engine.backends.cpu import kernels_gemm
    from engine.model import Layer

    if not packed:
        monkeypatch.setattr(gemm_packed, "MIN_MACS", 1 << 40)
    rng = np.random.default_rng(m)
    w = rng.standard_normal((70, 45)).astype(np.float32)
    c = rng.standard_normal(70).astype(np.float32)
    layer = Layer("g", "Gemm", ["a", "w", "c"], ["y"],
                  dict(transB=1, alpha=1.0, beta=1.0, activation="Relu"), opset=13)
    for _ in range(4):
        a = rng.standard_normal((m, 45)).astype(np.float32)
        got = kernels_gemm.Gemm(layer, [a, w, c])
        want = np.maximum(a.astype(np.float64) @ w.T.astype(np.float64) + c, 0)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    kept = layer.__dict__["_cpu_gemm"]
    assert kept[0] is w and kept[2] is packed
