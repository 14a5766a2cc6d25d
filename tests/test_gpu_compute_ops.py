"""Per-op parity of GPU_COMPUTE with the CPU backend on fresh random shapes and values.

Every case checks that the layer really ran on the GPU, then compares with the CPU backend's
result. Shapes are odd on purpose: sizes that are not multiples of 4 (the vec4 paths) nor of
the workgroup sizes (64/256), broadcasting, and edge-clamped tiles.
"""

from __future__ import annotations

import numpy as np
import pytest
from gpu_compute_util import Const, assert_close, one_node, run_both
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.usefixtures("require_gpu")

UNARY = {
    "Abs": None, "Neg": None, "Exp": None, "Log": "pos", "Sqrt": "pos", "Reciprocal": "pos",
    "Sin": None, "Cos": None, "Tan": "small", "Asin": "unit", "Acos": "unit", "Atan": None,
    "Sinh": None, "Cosh": None, "Asinh": None, "Acosh": "ge1", "Atanh": "unit", "Ceil": None,
    "Floor": None, "Round": None, "Erf": None, "Sign": None, "Relu": None, "Sigmoid": None,
    "Tanh": None, "Softplus": None, "Softsign": None, "Mish": None, "HardSwish": None,
    "Elu": None, "Selu": None, "Celu": None, "LeakyRelu": None, "HardSigmoid": None,
    "ThresholdedRelu": None, "Shrink": None, "Gelu": None,
}


def _values(rng, shape, domain):
    x = rng.standard_normal(shape).astype(np.float32) * 2
    if domain == "pos":
        return np.abs(x) + 0.1
    if domain == "unit":
        return np.tanh(x).astype(np.float32) * 0.99
    if domain == "ge1":
        return np.abs(x) + 1.0
    if domain == "small":
        return np.clip(x, -1.4, 1.4)
    return x


def _shape(rng, rank=None):
    rank = rank or int(rng.integers(1, 5))
    return tuple(int(v) for v in rng.integers(1, 9, rank)) + (int(rng.integers(5, 70)),)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op, rng):
    x = _values(rng, _shape(rng), UNARY[op])
    opset = {"Gelu": 20, "Mish": 18}.get(op, 17)
    assert_close(*run_both(*one_node(op, [x], opset=opset)), rtol=2e-4, atol=1e-5)


BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu", "Equal", "Greater",
          "Less", "GreaterOrEqual", "LessOrEqual"]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.data())
def test_binary_broadcasting(shape, data):
    """Hypothesis draws the shape and which dims of the second operand broadcast."""
    op = data.draw(st.sampled_from(BINARY))
    mask = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    drop = data.draw(st.integers(0, len(shape) - 1))
    other = tuple(1 if m else d for d, m in zip(shape, mask))[drop:]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(other).astype(np.float32)
    if op == "Pow":
        a = np.abs(a) + 0.5
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(np.float32)
    if op == "PRelu":  # the slope broadcasts to the input only
        assert_close(*run_both(*one_node(op, [a, b])))
    else:
        assert_close(*run_both(*one_node(op, [b, a] if data.draw(st.booleans()) else [a, b])))


#: broadcasts as models write them: a bias along the last axis, a scalar, per-channel
#: constants, both operands broadcast, a row broadcast whose inner dim is not a multiple of
#: 4, and a pattern that does not collapse to three dims (the general shader)
PATTERNS = [((2, 16, 32), (32,)), ((8, 12), ()), ((2, 8, 4, 4), (8, 1, 1)),
            ((4, 1, 8), (1, 5, 8)), ((3, 1, 4), (1, 6, 1)), ((5, 7), (5, 1)),
            ((2, 1, 3, 1, 4), (1, 3, 1, 2, 1)), ((1, 4, 128, 128), (1, 1, 1, 128))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Equal"])
@pytest.mark.parametrize("sa,sb", PATTERNS)
def test_collapsed_broadcasts(op, sa, sb, rng):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    if op == "Pow":
        a = np.abs(a) + 0.5
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(np.float32)
    if op == "Equal":  # some equal pairs, so both results occur
        a = np.round(a)
        b = np.round(b)
    assert_close(*run_both(*one_node(op, [a, b])))
    assert_close(*run_both(*one_node(op, [b, a])))
    ia = rng.integers(-50, 50, sa).astype(np.int32)
    ib = rng.integers(1, 9, sb).astype(np.int32)
    if op in ("Add", "Mul", "Sub"):
        assert_close(*run_both(*one_node(op, [ia, ib])))


def test_collapse_broadcast_merges_dims_that_step_alike():
    from engine.backends.gpu_compute.util import broadcast_strides, collapse_broadcast

    out = (2, 16, 32)
    sizes, strides = collapse_broadcast(out, broadcast_strides(out, out),
                                        broadcast_strides((32,), out))
    assert sizes == [32, 32] and strides == [[32, 1], [0, 1]]
    out = (2, 8, 4, 4)
    sizes, strides = collapse_broadcast(out, broadcast_strides(out, out),
                                        broadcast_strides((8, 1, 1), out))
    assert sizes == [2, 8, 16] and strides == [[128, 16, 1], [0, 1, 0]]
    sizes, strides = collapse_broadcast((1, 1), [0, 0], [0, 0])
    assert sizes == [1] and strides == [[0], [0]]


@pytest.mark.parametrize("op,dtype", [("Add", np.int32), ("Mul", np.int32), ("Sub", np.int32),
                                      ("Max", np.int32), ("Div", np.int32),
                                      ("BitwiseAnd", np.int32), ("BitwiseXor", np.uint32)])
def test_integer_binary(op, dtype, rng):
    a = rng.integers(-50, 50, (3, 7, 5)).astype(dtype)
    b = rng.integers(1, 9, (7, 1)).astype(dtype)
    assert_close(*run_both(*one_node(op, [a, b], opset=18)))


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op, rng):
    a, b = rng.random((4, 9)) > 0.5, rng.random((9,)) > 0.5
    assert_close(*run_both(*one_node(op, [a, b])))
    assert_close(*run_both(*one_node("Not", [a])))


def test_mod_and_variadics(rng):
    a = rng.integers(-30, 30, (5, 11)).astype(np.int32)
    b = (rng.integers(1, 7, (11,)) * rng.choice([-1, 1], 11)).astype(np.int32)
    assert_close(*run_both(*one_node("Mod", [a, b])))
    x, y, z = (rng.standard_normal(s).astype(np.float32) for s in ((3, 1, 7), (5, 7), (7,)))
    for op in ("Sum", "Mean", "Max", "Min"):
        assert_close(*run_both(*one_node(op, [x, y, z])))


def test_where_clip_cast(rng):
    c = rng.random((6, 1)) > 0.5
    x, y = rng.standard_normal((2, 6, 5)).astype(np.float32), rng.standard_normal(5).astype(
        np.float32)
    assert_close(*run_both(*one_node("Where", [c, x, y])))
    assert_close(*run_both(*one_node("Clip", [x, Const(np.float32(-0.3)),
                                              Const(np.float32(0.7))])))
    assert_close(*run_both(*one_node("Cast", [x * 10], {"to": 6})))
    assert_close(*run_both(*one_node("Cast", [x > 0], {"to": 1})))


@pytest.mark.parametrize("variant", ["blocked", "tiled"])
@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm(trans, variant, rng, monkeypatch):
    monkeypatch.setenv("ENGINE_GPU_MATMUL", variant)
    m, k, n = (int(v) for v in rng.integers(1, 90, 3))
    ta, tb = trans
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    c = rng.standard_normal((n,)).astype(np.float32)
    attrs = {"transA": ta, "transB": tb, "alpha": 0.7, "beta": 1.3}
    assert_close(*run_both(*one_node("Gemm", [a, Const(b), c], attrs)))


@pytest.mark.parametrize("bias_shape", [(12,), (7, 1), (7, 12), (1, 1)])
def test_gemm_vec4_stores(bias_shape, rng):
    """N a multiple of 4 (vec4 stores of C) with M not: each bias broadcast form of the
    epilogue (along the row, along the column, full, scalar)."""
    a = rng.standard_normal((7, 10)).astype(np.float32)
    b = rng.standard_normal((10, 12)).astype(np.float32)
    c = rng.standard_normal(bias_shape).astype(np.float32)
    assert_close(*run_both(*one_node("Gemm", [a, Const(b), c], {"alpha": 0.7, "beta": 1.3})))


@pytest.mark.parametrize("sa,sb", [((1, 5, 3, 6), (6, 8)), ((2, 3, 9, 13), (13, 4)),
                                   ((4, 5, 7), (7, 5))])
def test_matmul_shared_b(sa, sb, rng):
    """A batched, B shared: the batches fold into the rows of one matmul."""
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    assert_close(*run_both(*one_node("MatMul", [a, Const(b)])), rtol=2e-4, atol=2e-5)


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(1, 70), st.integers(1, 37), st.integers(1, 70),
       st.sampled_from([(), (3,), (2, 1)]), st.sampled_from(["a", "b", "both"]),
       st.sampled_from(["blocked", "tiled"]))
def test_matmul_batched(m, k, n, batch, which, variant):
    import os

    os.environ["ENGINE_GPU_MATMUL"] = variant  # read when the worker's backend is created
    rng = np.random.default_rng(m * 10007 + k * 101 + n)
    sa = batch + (m, k) if which in ("a", "both") else (m, k)
    sb = batch + (k, n) if which in ("b", "both") else (k, n)
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    try:
        assert_close(*run_both(*one_node("MatMul", [a, b])), rtol=2e-4, atol=2e-5)
    finally:
        os.environ.pop("ENGINE_GPU_MATMUL", None)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp",
                                "ReduceSumSquare", "ReduceLogSum"])
def test_reduce(op, rng):
    x = rng.standard_normal((3, 5, 7, 9)).astype(np.float32)
    if op == "ReduceLogSum":
        x = np.abs(x) + 0.1
    if op == "ReduceProd":
        x = (1 + 0.1 * x).astype(np.float32)
    axes = Const(np.array(sorted(rng.choice(4, int(rng.integers(1, 4)), replace=False)),
                          np.int64))
    assert_close(*run_both(*one_node(op, [x, axes], {"keepdims": int(rng.integers(0, 2))},
                                     opset=18)), rtol=3e-4)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax", "ArgMax", "ArgMin"])
@pytest.mark.parametrize("opset", [11, 13])
def test_axis_ops(op, opset, rng):
    x = rng.standard_normal((3, 5, 7)).astype(np.float32)
    attrs = {"axis": int(rng.integers(-3, 3))}
    if op.startswith("Arg"):
        attrs["keepdims"] = int(rng.integers(0, 2))
    assert_close(*run_both(*one_node(op, [x], attrs, opset=opset)))


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax", "ArgMax", "ArgMin"])
def test_axis_ops_with_nan_and_inf_match_the_reference(op, rng):
    """Lines holding NaNs (one, two, first place), an infinity, and plain lines, along an
    inner and the last axis: Hardmax and ArgMax/ArgMin pick the first NaN as NumPy (and so
    the ONNX reference) does; Softmax lines with a NaN are NaN."""
    import onnx
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from engine import ModelLoader, Worker

    x = rng.standard_normal((4, 3, 9)).astype(np.float32)
    x[0, 1, 4] = np.nan
    x[1, 2, 0] = np.nan
    x[1, 2, 7] = np.nan
    x[2, 0, 3] = np.inf
    x[3, :, 5] = np.nan  # NaNs across the middle axis too
    for axis in (1, -1):
        node = helper.make_node(op, ["x"], ["y"], axis=axis)
        out_type = TensorProto.INT64 if op.startswith("Arg") else TensorProto.FLOAT
        out_shape = [4, 1, 9] if op.startswith("Arg") and axis == 1 else \
            [4, 3, 1] if op.startswith("Arg") else [4, 3, 9]
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3, 9])],
            [helper.make_tensor_value_info("y", out_type, out_shape)])
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        onnx.checker.check_model(proto)
        want = np.asarray(ReferenceEvaluator(proto).run(None, {"x": x})[0])
        with Worker(ModelLoader.from_proto(proto), "gpu-compute") as worker:
            got = worker.schedule({"x": x}).peek_output("y").download_to_array()
            assert all(t.backend == "gpu-compute" for t in worker.last_profile.layers)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"axis {axis}")
        fin = ~np.isnan(want)
        np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-6,
                                   err_msg=f"axis {axis}")


def test_normalisations(rng):
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    c = [rng.standard_normal(3).astype(np.float32) for _ in range(3)]
    var = (np.abs(rng.standard_normal(3)) + 0.5).astype(np.float32)
    assert_close(*run_both(*one_node("BatchNormalization", [x] + [Const(v) for v in c + [var]],
                                     {"epsilon": 1e-3})))
    assert_close(*run_both(*one_node("InstanceNormalization", [x, Const(c[0]), Const(c[1])])),
                 rtol=3e-4)
    s, b = rng.standard_normal((7, 9)).astype(np.float32), rng.standard_normal((7, 9)).astype(
        np.float32)
    assert_close(*run_both(*one_node("LayerNormalization", [x, Const(s), Const(b)],
                                     {"axis": 2}, n_out=3)), rtol=3e-4, atol=3e-5)
    assert_close(*run_both(*one_node("LRN", [x], {"size": 3, "alpha": 0.01, "beta": 0.75})))


MOVES = [
    ("Transpose", lambda x: [x], {"perm": [0, 2, 3, 1]}),
    ("Slice", lambda x: [x, Const(np.array([1, -1], np.int64)), Const(np.array([99, 0],
     np.int64)), Const(np.array([2, 3], np.int64)), Const(np.array([1, -2], np.int64))], {}),
    ("Concat", lambda x: [x, x[:, :, :, :3] * 2], {"axis": 3}),
    ("Concat", lambda x: [x, x[:1] + 1], {"axis": 0}),
    ("Expand", lambda x: [x[0, :, :1], Const(np.array([2, 1, 7, 9], np.int64))], {}),
    ("Tile", lambda x: [x[0, :, :2], Const(np.array([2, 3, 2], np.int64))], {}),
    ("Pad", lambda x: [x, Const(np.array([0, 1, 2, 1, 0, 0, 1, 3], np.int64)),
                       Const(np.float32(1.5))], {}),
    ("Pad", lambda x: [x, Const(np.array([0, 1, 2, 1, 0, 0, 1, 3], np.int64))],
     {"mode": "reflect"}),
    ("Pad", lambda x: [x, Const(np.array([0, 0, -2, 1, 0, 0, 1, -3], np.int64))],
     {"mode": "edge"}),
    ("Gather", lambda x: [x, Const(np.array([[2, -1], [0, 1]], np.int64))], {"axis": 1}),
    ("Gather", lambda x: [x, np.array([4, 0, 8], np.int64)], {"axis": 3}),
    ("Reshape", lambda x: [x, Const(np.array([6, -1], np.int64))], {}),
    ("Flatten", lambda x: [x], {"axis": 2}),
    ("Squeeze", lambda x: [x[:1], Const(np.array([0], np.int64))], {}),
    ("Unsqueeze", lambda x: [x, Const(np.array([1, -1], np.int64))], {}),
    ("DepthToSpace", lambda x: [x[:, :2].reshape(1, 4, 7, 9)], {"blocksize": 2}),
    ("SpaceToDepth", lambda x: [x[:, :, :6, :8]], {"blocksize": 2}),
]


@pytest.mark.parametrize("op,args,attrs", MOVES, ids=[f"{m[0]}{i}" for i, m in enumerate(MOVES)])
def test_movement(op, args, attrs, rng):
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    assert_close(*run_both(*one_node(op, args(x), attrs)))


def test_movement_of_int64_and_split(rng):
    """64-bit tensors move as word pairs."""
    x = rng.integers(-2**40, 2**40, (3, 5, 7)).astype(np.int64)
    assert_close(*run_both(*one_node("Transpose", [x], {"perm": [2, 0, 1]})))
    assert_close(*run_both(*one_node("Split", [x, Const(np.array([2, 5], np.int64))],
                                     {"axis": 2}, n_out=2)))
    y = rng.standard_normal((4, 10)).astype(np.float32)
    assert_close(*run_both(*one_node("Split", [y], {"axis": 1, "num_outputs": 3}, opset=18,
                                     n_out=3)))


def test_copies_of_aligned_runs(rng):
    """Copies whose runs, strides and offsets are multiples of 4 words move vec4s: a channel
    shuffle, a Concat of such blocks, int64 (word pairs) and an unaligned Slice beside them."""
    x = rng.standard_normal((2, 4, 3, 6, 8)).astype(np.float32)
    assert_close(*run_both(*one_node("Transpose", [x], {"perm": [0, 2, 1, 3, 4]})))
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 2, 4, 4), (2, 3, 4, 4)))
    assert_close(*run_both(*one_node("Concat", [a, b], {"axis": 1})))
    i = rng.integers(-9, 9, (3, 4, 8)).astype(np.int64)
    assert_close(*run_both(*one_node("Transpose", [i], {"perm": [1, 0, 2]})))
    starts, ends = Const(np.array([1, 2], np.int64)), Const(np.array([4, 7], np.int64))
    assert_close(*run_both(*one_node("Slice", [x[0, 0], starts, ends], opset=13)))


@pytest.mark.parametrize("mode,coord,scales", [
    ("linear", "half_pixel", [1, 1, 2.0, 1.5]), ("linear", "align_corners", [1, 1, 0.6, 1.7]),
    ("nearest", "asymmetric", [1, 1, 2.0, 3.0]), ("nearest", "half_pixel", [1, 1, 0.6, 1.7]),
    ("linear", "pytorch_half_pixel", [1, 1, 1.3, 0.5]),
    # integer nearest upsampling that repeats pixels (a strided copy), and one that does not
    ("nearest", "half_pixel", [1, 1, 2.0, 4.0]), ("nearest", "align_corners", [1, 1, 2.0, 2.0]),
])
def test_resize(mode, coord, scales, rng):
    x = rng.standard_normal((1, 3, 7, 9)).astype(np.float32)
    args = [x, None, Const(np.array(scales, np.float32))]
    assert_close(*run_both(*one_node("Resize", args, {"mode": mode,
                                                      "coordinate_transformation_mode": coord})))


def test_fused_activation_on_conv_and_gemm(rng):
    """The fusion pass's ``activation`` attribute is applied in the kernels' epilogue."""
    from engine import ModelLoader, Worker
    from engine.backends import BackendType

    x = rng.standard_normal((1, 4, 9, 7)).astype(np.float32)
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    for act, params, ref in (("Relu", [], lambda v: np.maximum(v, 0)),
                             ("LeakyRelu", [0.2], lambda v: np.where(v > 0, v, 0.2 * v)),
                             ("Clip", [-0.5, 0.5], lambda v: np.clip(v, -0.5, 0.5))):
        proto, feeds = one_node("Conv", [x, Const(w)], {"pads": [1, 1, 1, 1]})
        plain = run_both(proto, feeds)[1][0]
        model = ModelLoader.from_proto(proto)
        for layer in model.layers:
            layer.attributes.update(activation=act, activation_params=params)
        with Worker(model, BackendType.GPU_COMPUTE) as worker:
            assert all(p.backend is BackendType.GPU_COMPUTE for p in worker.placement.values())
            worker.schedule(feeds)
            np.testing.assert_allclose(worker.peek_output().download_to_array(), ref(plain),
                                       rtol=2e-4, atol=2e-5)


def test_vec4_paths(rng):
    """Sizes that are multiples of 4 take the four-per-invocation shaders."""
    x = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
    y = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
    for op in ("Relu", "Sigmoid", "Exp"):
        assert_close(*run_both(*one_node(op, [x])))
    for op in ("Add", "Mul", "Div", "Max"):
        assert_close(*run_both(*one_node(op, [x, y])))
    c = [rng.standard_normal(3).astype(np.float32) for _ in range(3)]
    var = (np.abs(rng.standard_normal(3)) + 0.5).astype(np.float32)
    assert_close(*run_both(*one_node("BatchNormalization", [x] + [Const(v) for v in c + [var]])))


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(1, 16, 56, 56), (2, 3, 41, 33), (1, 5, 1, 2000),
                                   (1, 64, 7, 7)])
def test_global_pools_of_large_planes(op, shape):
    """Planes of >= 1024 values reduce in two passes (partial sums or maxima of interleaved
    values, then per plane); smaller ones in one. Against float64 NumPy, NaN kept."""
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    x.reshape(-1, x.shape[2] * x.shape[3])[-1, 7] = np.nan
    gpu, _ = run_both(*one_node(op, [x]))
    with np.errstate(invalid="ignore"):
        want = (x.astype(np.float64).mean(axis=(2, 3), keepdims=True) if op == "GlobalAveragePool"
                else x.max(axis=(2, 3), keepdims=True))
    np.testing.assert_allclose(gpu[0], want, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert np.isnan(gpu[0]).sum() == 1
