"""GPU_PIXEL per-op parity with the CPU backend on fresh random data.

Shapes use odd channel counts and sizes that are not multiples of 4, so the padded texels
of the channel-blocked texture layout are exercised. Every case asserts that the layer
really ran on GPU_PIXEL (a silent CPU fallback would make the comparison meaningless).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from engine import BackendType, ModelLoader, Worker
from tests.modelgen import I64, F, model

pytestmark = pytest.mark.usefixtures("require_gpu")


def run_both(proto, feeds):
    """(GPU_PIXEL outputs, CPU outputs); asserts every layer ran natively on GPU_PIXEL."""
    m = ModelLoader.from_proto(proto)
    with Worker(m, BackendType.GPU_PIXEL) as w:
        w.schedule(feeds)
        gpu = [w.peek_output(o.name).download_to_array() for o in m.outputs]
        placed = {name: (p.backend, p.reason) for name, p in w.placement.items()}
    for name, (backend, reason) in placed.items():
        assert backend is BackendType.GPU_PIXEL, f"{name} fell back: {reason}"
    with Worker(m, BackendType.CPU) as w:
        w.schedule(feeds)
        cpu = [w.peek_output(o.name).download_to_array() for o in m.outputs]
    return gpu, cpu


def one_node(op, shapes, attrs=None, consts=(), opset=17, n_out=1, rng=None):
    """A one-node model: float inputs x0.. of ``shapes``, then constant inputs ``consts``."""
    ins = [(f"x{i}", F, list(s)) for i, s in enumerate(shapes)]
    names = [f"x{i}" for i in range(len(shapes))] + [n for n, _ in consts]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    proto = model([node], ins, [(o, F, ["?"]) for o in outs], initializers=consts, opset=opset)
    feeds = {f"x{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    return proto, feeds


def check(op, shapes, rng, attrs=None, consts=(), opset=17, n_out=1, rtol=1e-4, feeds=None):
    proto, f = one_node(op, shapes, attrs, consts, opset, n_out, rng)
    if feeds:
        f.update(feeds)
    gpu, cpu = run_both(proto, f)
    for g, c in zip(gpu, cpu):
        assert g.shape == c.shape and g.dtype == c.dtype
        scale = max(1.0, float(np.abs(c).max()))
        np.testing.assert_allclose(g, c, rtol=rtol, atol=rtol * scale)


UNARY = ["Abs", "Neg", "Floor", "Ceil", "Round", "Sign", "Exp", "Sin", "Cos", "Tan", "Atan",
         "Sinh", "Cosh", "Asinh", "Reciprocal", "Relu", "Tanh", "Sigmoid", "Softplus",
         "Softsign", "Mish", "HardSwish", "Erf", "Identity", "LeakyRelu", "Elu", "Selu",
         "Celu", "HardSigmoid", "ThresholdedRelu", "Shrink", "Gelu"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op, rng):
    check(op, [(2, 5, 3, 7)], rng, opset=20)


@pytest.mark.parametrize("op", ["Sqrt", "Log", "Acosh"])
def test_unary_positive_domain(op, rng):
    x = (np.abs(rng.standard_normal((3, 7))) + 1.1).astype(np.float32)
    check(op, [(3, 7)], rng, feeds={"x0": x})


def test_clip_with_bounds(rng):
    consts = [("lo", np.array(-0.3, np.float32)), ("hi", np.array(0.4, np.float32))]
    check("Clip", [(2, 7, 5)], rng, consts=consts)


@pytest.mark.parametrize("op,shapes", [
    ("Add", [(2, 5, 3, 7), (5, 1, 1)]), ("Sub", [(3, 1), (1, 6)]), ("Mul", [(7,), (2, 3, 7)]),
    ("Div", [(2, 5, 3), (2, 5, 3)]), ("Max", [(2, 5, 3), (3,), (5, 1)]),
    ("Min", [(4, 5), (4, 5)]), ("Sum", [(2, 3, 5), (3, 5), (1,), (2, 1, 1)]),
    ("Mean", [(6, 9), (9,)]), ("PRelu", [(2, 5, 3, 3), (5, 1, 1)])])
def test_broadcasting_binary(op, shapes, rng):
    check(op, shapes, rng)


def test_pow_negative_base_integer_exponent(rng):
    y = rng.integers(-3, 4, (3, 5)).astype(np.float32)
    check("Pow", [(3, 5), (3, 5)], rng, feeds={"x1": y})


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 3, 9, 8), (5, 3, 3, 3), {}),
    ((2, 5, 7, 6), (6, 5, 3, 2), {"pads": [1, 0, 1, 2], "strides": [2, 1]}),
    ((1, 8, 7, 6), (8, 2, 3, 3), {"group": 4, "dilations": [2, 1]}),
    ((1, 16, 6, 6), (8, 4, 3, 3), {"group": 4}),
    ((1, 7, 7, 6), (7, 1, 3, 3), {"group": 7, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 6, 7, 6), (9, 2, 3, 3), {"group": 3}),
    ((1, 12, 6, 5), (12, 3, 1, 1), {"group": 4}),           # groups across texel blocks
    ((2, 10, 5, 5), (6, 5, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ((1, 5, 9), (3, 5, 3), {"strides": [2], "pads": [1, 1]}),
])
def test_conv(xs, ws, attrs, rng):
    bias = ("b", rng.standard_normal(ws[0]).astype(np.float32))
    w = ("w", rng.standard_normal(ws).astype(np.float32))
    check("Conv", [xs], rng, attrs, consts=[w, bias])


def test_grouped_conv_keeps_a_nan_in_its_own_group(rng):
    """Groups of 3 channels share texels; a NaN in channel 0 (group 0) must reach group 0's
    outputs only."""
    w = ("w", rng.standard_normal((12, 3, 1, 1)).astype(np.float32))
    proto, feeds = one_node("Conv", [(1, 12, 4, 5)], {"group": 4}, consts=[w], rng=rng)
    feeds["x0"][0, 0, 1, 2] = np.nan
    gpu, cpu = run_both(proto, feeds)
    np.testing.assert_allclose(gpu[0], cpu[0], rtol=1e-4, atol=1e-4)
    nan = np.isnan(gpu[0])
    assert nan[0, :3, 1, 2].all() and nan.sum() == 3


def test_conv_with_fused_relu_runs_natively(rng):
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    proto = model(nodes, [("x", F, [1, 3, 6, 5])], [("y", F, ["?"])], initializers=[("w", w)])
    gpu, cpu = run_both(proto, {"x": rng.standard_normal((1, 3, 6, 5)).astype(np.float32)})
    np.testing.assert_allclose(gpu[0], cpu[0], rtol=1e-4, atol=1e-4)
    assert (gpu[0] >= 0).all() and (gpu[0] > 0).any()


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [2, 3], "ceil_mode": 1, "strides": [2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "count_include_pad": 1}),
    ("LpPool", {"kernel_shape": [2, 2], "p": 3}),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {})])
def test_pool(op, attrs, rng):
    check(op, [(2, 5, 7, 6)], rng, attrs)


@pytest.mark.parametrize("a,b,attrs", [
    ((3, 7), (5, 7), {"transB": 1, "alpha": 0.5, "beta": 2.0}),
    ((3, 9), (9, 6), {}), ((7, 3), (7, 5), {"transA": 1})])
def test_gemm(a, b, attrs, rng):
    c = ("c", rng.standard_normal((b[0] if attrs.get("transB") else b[1],)).astype(np.float32))
    check("Gemm", [a, b], rng, attrs, consts=[c])


@pytest.mark.parametrize("a,b", [((3, 7), (7, 6)), ((2, 3, 7), (7, 5)), ((2, 1, 3, 5), (3, 5, 2))])
def test_matmul(a, b, rng):
    check("MatMul", [a, b], rng)


def test_batchnorm(rng):
    c = 7
    consts = [("s", rng.standard_normal(c).astype(np.float32)),
              ("b", rng.standard_normal(c).astype(np.float32)),
              ("m", rng.standard_normal(c).astype(np.float32)),
              ("v", rng.uniform(0.5, 2, c).astype(np.float32))]
    check("BatchNormalization", [(2, c, 3, 5)], rng, {"epsilon": 1e-3}, consts=consts)


def test_instance_norm_and_lrn(rng):
    consts = [("s", rng.standard_normal(5).astype(np.float32)),
              ("b", rng.standard_normal(5).astype(np.float32))]
    check("InstanceNormalization", [(2, 5, 3, 4)], rng, consts=consts)
    check("LRN", [(1, 7, 3, 4)], rng, {"size": 5, "alpha": 0.01, "beta": 0.75, "bias": 1.0})


@pytest.mark.parametrize("op,axis", [("Softmax", 1), ("Softmax", -1), ("LogSoftmax", 2)])
def test_softmax(op, axis, rng):
    check(op, [(2, 7, 5)], rng, {"axis": axis})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"])
def test_reduce(op, rng):
    check(op, [(2, 7, 3, 5)], rng, {"keepdims": 0}, consts=[("axes", np.array([1, 3]))],
          opset=18)


@pytest.mark.parametrize("shapes,axis", [
    ([(2, 7, 3), (2, 5, 3), (2, 1, 3)], 1), ([(2, 8, 3), (2, 4, 3), (2, 5, 3)], 1),
    ([(2, 7, 3), (2, 7, 4)], 2), ([(3,), (5,)], 0), ([(1, 3, 2)] * 10, 1)])
def test_concat(shapes, axis, rng):
    check("Concat", shapes, rng, {"axis": axis})


def test_reshape_family(rng):
    check("Reshape", [(2, 7, 3, 5)], rng, consts=[("s", np.array([7, -1, 5]))])
    check("Flatten", [(2, 7, 3, 5)], rng, {"axis": 2})
    check("Squeeze", [(2, 1, 3, 1)], rng, consts=[("a", np.array([1, 3]))])
    check("Unsqueeze", [(2, 7)], rng, consts=[("a", np.array([0, 3]))])


def test_transpose_slice_pad_tile_expand(rng):
    check("Transpose", [(2, 7, 3, 5)], rng, {"perm": [0, 2, 3, 1]})
    check("Slice", [(5, 7, 6)], rng, consts=[("st", np.array([1, -1, 0])),
                                             ("en", np.array([4, -8, 6])),
                                             ("ax", np.array([0, 1, 2])),
                                             ("sp", np.array([1, -2, 3]))])
    for mode in ("constant", "reflect", "edge"):
        check("Pad", [(2, 5, 3, 4)], rng, {"mode": mode},
              consts=[("p", np.array([0, 1, 2, 1, 0, 2, 1, 3]))])
    check("Tile", [(2, 5, 3)], rng, consts=[("r", np.array([2, 1, 3]))])
    check("Expand", [(5, 1)], rng, consts=[("s", np.array([2, 5, 3]))])


def test_split(rng):
    check("Split", [(2, 9, 3)], rng, {"axis": 1}, consts=[("s", np.array([2, 7]))], n_out=2)


@pytest.mark.parametrize("mode,extra", [("nearest", {}), ("linear", {}),
                                        ("cubic", {"coordinate_transformation_mode":
                                                   "align_corners"})])
def test_resize(mode, extra, rng):
    consts = [("roi", np.array([], np.float32)),
              ("sc", np.array([1, 1, 2, 1.5], np.float32))]
    check("Resize", [(1, 3, 4, 5)], rng, {"mode": mode, **extra}, consts=consts, opset=19)


def test_int_and_oversized_tensors_fall_back_with_reasons(rng):
    node = helper.make_node("Relu", ["x"], ["y"])
    big = model([node], [("x", F, [70000])], [("y", F, ["?"])])
    ints = model([helper.make_node("Neg", ["x"], ["y"])], [("x", I64, [3])], [("y", I64, ["?"])])
    with Worker(ModelLoader.from_proto(big), BackendType.GPU_PIXEL) as w:
        p = next(iter(w.placement.values()))
        assert p.backend is BackendType.CPU and "texture" in p.reason
        x = rng.standard_normal(70000).astype(np.float32)
        w.schedule(x)
        np.testing.assert_array_equal(w.peek_output().download_to_array(), np.maximum(x, 0))
    with Worker(ModelLoader.from_proto(ints), BackendType.GPU_PIXEL) as w:
        p = next(iter(w.placement.values()))
        assert p.backend is BackendType.CPU and "float32" in p.reason
