"""NaN and Inf propagate as IEEE 754 says, on every backend and in every fused form.

Each case is a one- or two-node model fed random data with NaN, +Inf and -Inf at fresh
random positions. The oracle is onnxruntime, except where onnxruntime (and sometimes the
ONNX reference evaluator) drops NaNs; those cases say why and use a NumPy oracle or
``onnx.reference.ReferenceEvaluator`` instead. NaN positions must match exactly, Inf
positions and signs too; finite values match to a tolerance.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from onnx import helper

from engine import BackendType, ModelLoader, Worker
from tests.modelgen import I64, F, model, ort_run

BACKENDS = [
    pytest.param("cpu"),
    pytest.param("gpu-compute", marks=pytest.mark.gpu),
    pytest.param("gpu-pixel", marks=pytest.mark.gpu),
]


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param != "cpu":
        request.getfixturevalue("require_gpu")
    return request.param


def sprinkle(x: np.ndarray, rng, frac: float = 0.1) -> np.ndarray:
    """``x`` with NaN, +Inf and -Inf at random positions (``frac`` of the elements each,
    at least one of each)."""
    x = x.copy()
    flat = x.reshape(-1)
    k = max(1, int(flat.size * frac))
    pos = rng.permutation(flat.size)
    flat[pos[:k]] = np.nan
    flat[pos[k:2 * k]] = np.inf
    flat[pos[2 * k:3 * k]] = -np.inf
    return x


def engine_outputs(proto, feeds, backend):
    m = ModelLoader.from_proto(proto)
    with Worker(m, backend) as w:
        w.schedule(feeds)
        outs = [w.peek_output(o.name).download_to_array() for o in m.outputs]
        placed = {name: (p.backend, p.reason) for name, p in w.placement.items()}
    return outs, placed


#: (backend, case) pairs that fall back to the CPU by design (their result is still checked)
FALLBACKS = {("gpu-pixel", "ArgMax"), ("gpu-pixel", "ArgMin"), ("gpu-pixel", "MaxPool-3d"),
             ("gpu-compute", "MaxPool-3d")}


def assert_native(placed, backend, case=None):
    """Every layer ran on ``backend``: a silent CPU fallback would test the CPU instead."""
    if (backend, case) in FALLBACKS:
        return
    want = BackendType.parse(backend)
    for name, (where, reason) in placed.items():
        assert where is want, f"{name} ran on {where}: {reason}"


def assert_ieee_equal(got, want, rtol=1e-4, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN positions")
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want),
                                  err_msg=f"{what}: +Inf positions")
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want),
                                  err_msg=f"{what}: -Inf positions")
    finite = np.isfinite(want)
    scale = max(1.0, float(np.abs(want[finite]).max())) if finite.any() else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, equal_nan=True,
                               err_msg=what)


def reference(proto, feeds):
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(proto).run(None, feeds)


def ort_unfused(proto, feeds):
    """onnxruntime's first output with every intermediate also an output: its Sigmoid run
    in place on a Conv's output buffer turns NaN into 1, out of place it keeps NaN."""
    p = onnx.ModelProto()
    p.CopyFrom(proto)
    outs = {o.name for o in p.graph.output}
    for node in p.graph.node:
        p.graph.output.extend(helper.make_tensor_value_info(n, F, None)
                              for n in node.output if n not in outs)
    return ort_run(p, feeds)[0]


def maxpool_numpy(x, k, s, pad):
    """IEEE max pooling (a window holding a NaN gives NaN): onnxruntime and the ONNX
    reference both keep a running ``max`` that skips NaNs after the first element."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    win = sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s]
    return win.max(axis=(-2, -1))


def one_node(op, shapes, attrs=None, consts=(), opset=17, out_type=F):
    ins = [(f"x{i}", F, list(s)) for i, s in enumerate(shapes)]
    names = [f"x{i}" for i in range(len(shapes))] + [n for n, _ in consts]
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    return model([node], ins, [("y", out_type, ["?"])], initializers=consts, opset=opset)


OUT = [("y", F, ["?"])]  # shape left to inference


def f32(v):
    return np.array(v, np.float32)


S4 = (2, 5, 6, 7)
#: id -> (op, input shapes, attrs, constant inputs, opset, oracle); oracle "ort", "ref" or a
#: function of the feeds
CASES = {
    "Relu": ("Relu", [S4], {}, (), 17, "ort"),
    # Clip without bounds: the spec's defaults are the float type's lowest()/max(), so
    # -Inf/+Inf become -FLT_MAX/FLT_MAX (onnxruntime does so; NaN stays NaN)
    "Clip": ("Clip", [S4], {}, (), 17, "ort"),
    "Clip-min-max": ("Clip", [S4], {}, (("lo", f32(-0.5)), ("hi", f32(0.7))), 17, "ort"),
    "Clip-min": ("Clip", [S4], {}, (("lo", f32(0.1)),), 17, "ort"),
    "Clip-6": ("Clip", [S4], {"min": -0.3, "max": 0.4}, (), 7, "ort"),
    "LeakyRelu": ("LeakyRelu", [S4], {"alpha": 0.1}, (), 17, "ort"),
    "Sigmoid": ("Sigmoid", [S4], {}, (), 17, "ort"),
    "Tanh": ("Tanh", [S4], {}, (), 17, "ort"),
    "HardSigmoid": ("HardSigmoid", [S4], {}, (), 17, "ort"),
    "HardSwish": ("HardSwish", [S4], {}, (), 17, "ort"),
    "Elu": ("Elu", [S4], {}, (), 17, "ort"),
    "Selu": ("Selu", [S4], {}, (), 17, "ort"),
    "Celu": ("Celu", [S4], {}, (), 17, "ort"),
    "Softplus": ("Softplus", [S4], {}, (), 17, "ort"),
    "Softsign": ("Softsign", [S4], {}, (), 17, "ort"),
    "Gelu": ("Gelu", [S4], {}, (), 20, "ort"),
    "Exp": ("Exp", [S4], {}, (), 17, "ort"),
    "MaxPool": ("MaxPool", [S4], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, (), 17,
                lambda f: [maxpool_numpy(f["x0"], 3, 1, 1)]),
    "MaxPool-s2": ("MaxPool", [S4], {"kernel_shape": [2, 2], "strides": [2, 2]}, (), 17,
                   lambda f: [maxpool_numpy(f["x0"], 2, 2, 0)]),
    # 3x3 / stride 2 (pool_max3s2): plain vector maxima, rows holding a NaN redone
    "MaxPool-3s2": ("MaxPool", [(2, 5, 9, 11)], {"kernel_shape": [3, 3], "strides": [2, 2]},
                    (), 17, lambda f: [maxpool_numpy(f["x0"], 3, 2, 0)]),
    "MaxPool-3s2-pad": ("MaxPool", [S4], {"kernel_shape": [3, 3], "strides": [2, 2],
                                          "pads": [1, 1, 1, 1]}, (), 17,
                        lambda f: [maxpool_numpy(f["x0"], 3, 2, 1)]),
    "MaxPool-1d": ("MaxPool", [(2, 5, 11)], {"kernel_shape": [3], "strides": [2]}, (), 17,
                   lambda f: [sliding_window_view(f["x0"], 3, axis=2)[:, :, ::2].max(-1)]),
    "MaxPool-3d": ("MaxPool", [(1, 3, 4, 5, 6)], {"kernel_shape": [2, 2, 2]}, (), 17,
                   lambda f: [sliding_window_view(f["x0"], (2, 2, 2), axis=(2, 3, 4))
                              .max(axis=(-3, -2, -1))]),
    "AveragePool": ("AveragePool", [S4], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, (),
                    17, "ort"),
    # onnxruntime's GlobalMaxPool skips NaNs that are not first; the reference is np.max
    "GlobalMaxPool": ("GlobalMaxPool", [S4], {}, (), 17, "ref"),
    "GlobalAveragePool": ("GlobalAveragePool", [S4], {}, (), 17, "ort"),
    # onnxruntime's ReduceMax/Min along an axis skip NaNs that are not first; reference np.max
    "ReduceMax": ("ReduceMax", [S4], {"axes": [3], "keepdims": 1}, (), 13, "ref"),
    "ReduceMin": ("ReduceMin", [S4], {"axes": [1], "keepdims": 0}, (), 13, "ref"),
    "ReduceMax-all": ("ReduceMax", [S4], {"keepdims": 0}, (), 13, "ref"),
    "ReduceMean": ("ReduceMean", [S4], {"axes": [2, 3]}, (), 13, "ort"),
    "ReduceSum": ("ReduceSum", [S4], {}, (("axes", np.array([-1], np.int64)),), 13, "ort"),
    "ReduceLogSumExp": ("ReduceLogSumExp", [S4], {"axes": [3]}, (), 13, "ort"),
    "ReduceL2": ("ReduceL2", [S4], {"axes": [1]}, (), 13, "ort"),
    # onnxruntime's ArgMax takes a NaN only in the first position; the reference (NumPy)
    # takes the first NaN wherever it is, as a NaN-propagating max would
    "ArgMax": ("ArgMax", [S4], {"axis": 3}, (), 13, "ref"),
    "ArgMin": ("ArgMin", [S4], {"axis": 1}, (), 13, "ref"),
    "Max": ("Max", [S4, S4], {}, (), 13, "ort"),
    "Min": ("Min", [S4, (7,)], {}, (), 13, "ort"),
    "Sum": ("Sum", [S4, S4, S4], {}, (), 13, "ort"),
    "Add": ("Add", [S4, (5, 1, 1)], {}, (), 13, "ort"),
    "Mul": ("Mul", [S4, S4], {}, (), 13, "ort"),
    "Softmax": ("Softmax", [S4], {"axis": -1}, (), 13, "ort"),
    "Softmax-axis1": ("Softmax", [S4], {"axis": 1}, (), 13, "ort"),
    "LogSoftmax": ("LogSoftmax", [S4], {"axis": -1}, (), 13, "ort"),
    "MatMul": ("MatMul", [(6, 9), (9, 7)], {}, (), 13, "ort"),
    "Gemm": ("Gemm", [(6, 9)], {"transB": 1},
             (("w", np.linspace(-1, 1, 63, dtype=np.float32).reshape(7, 9)),
              ("c", np.linspace(-2, 2, 7, dtype=np.float32))), 13, "ort"),
    "Conv": ("Conv", [S4], {"pads": [1, 1, 1, 1]},
             (("w", np.linspace(-1, 1, 135, dtype=np.float32).reshape(3, 5, 3, 3)),), 13, "ort"),
    "BatchNormalization": ("BatchNormalization", [S4], {},
                           (("g", f32([1.0, 0.5, 2.0, -1.0, 0.3])),
                            ("b", f32([0.1, -0.2, 0.0, 0.5, 1.0])),
                            ("mu", f32([0.0, 0.1, -0.3, 0.2, 0.0])),
                            ("var", f32([1.0, 0.5, 2.0, 0.1, 3.0]))), 15, "ort"),
}
INT_OUT = {"ArgMax", "ArgMin"}
#: contractions: one NaN or Inf spreads over a whole row/column, so fewer are sprinkled
SPARSE = {"MatMul": 0.03, "Gemm": 0.03, "Conv": 0.01}


@pytest.mark.parametrize("case", list(CASES))
def test_op_nan_inf(case, backend, rng):
    op, shapes, attrs, consts, opset, oracle = CASES[case]
    proto = one_node(op, shapes, attrs, consts, opset, I64 if op in INT_OUT else F)
    feeds = {f"x{i}": sprinkle(rng.standard_normal(s).astype(np.float32) * 3, rng,
                               SPARSE.get(op, 0.1))
             for i, s in enumerate(shapes)}
    if oracle == "ort":
        want = ort_run(proto, feeds)
    elif oracle == "ref":
        want = reference(proto, feeds)
    else:
        want = oracle(feeds)
    got, placed = engine_outputs(proto, feeds, backend)
    assert_native(placed, backend, case)
    for g, e in zip(got, want):
        assert_ieee_equal(g, e, what=f"{case} on {backend}")



@pytest.mark.parametrize("reduction", ["max", "min", "add", "mul"])
def test_scatter_nd_fold_nan_inf(reduction, backend, rng):
    """ScatterND's folds keep a NaN from the data or an update, as np.maximum.at does;
    rows 1 and 3 are named twice, so updates also fold into each other."""
    idx = np.array([[1], [3], [1], [0], [3]], np.int64)
    node = helper.make_node("ScatterND", ["x", "idx", "u"], ["y"], reduction=reduction)
    proto = model([node], [("x", F, [4, 6]), ("u", F, [5, 6])], OUT,
                  initializers=(("idx", idx),), opset=18)
    feeds = {"x": sprinkle(rng.standard_normal((4, 6)).astype(np.float32), rng),
             "u": sprinkle(rng.standard_normal((5, 6)).astype(np.float32), rng)}
    want = feeds["x"].copy()
    fold = {"max": np.maximum, "min": np.minimum, "add": np.add, "mul": np.multiply}
    with np.errstate(invalid="ignore"):  # inf - inf and 0 * inf make NaNs, as intended
        fold[reduction].at(want, (idx[:, 0],), feeds["u"])
    got, placed = engine_outputs(proto, feeds, backend)
    assert_native(placed, backend)
    assert_ieee_equal(got[0], want, what=f"ScatterND {reduction} on {backend}")

def _w(rng, *shape):
    return (rng.standard_normal(shape) * 0.5).astype(np.float32)


def fused_cases(rng):
    """id -> (proto, feeds, fused op, activation): graphs the fusion pass fuses."""
    x = ("x", F, [1, 4, 7, 9])
    cases = {}
    for act, extra, inits in (("Relu", [], ()),
                              ("Clip", ["lo", "hi"], (("lo", f32(0.0)), ("hi", f32(6.0)))),
                              ("Clip", [], ()),
                              ("LeakyRelu", [], ()),
                              ("HardSigmoid", [], ()),
                              ("Sigmoid", [], ())):
        key = f"Conv+{act}" + ("-bounds" if extra else "")
        for kind, w, attrs in (("", _w(rng, 6, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
                               ("-depthwise", _w(rng, 4, 1, 3, 3),
                                {"pads": [1, 1, 1, 1], "group": 4}),
                               ("-pointwise", _w(rng, 6, 4, 1, 1), {})):
            nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs),
                     helper.make_node(act, ["c", *extra], ["y"])]
            b = _w(rng, w.shape[0])
            proto = model(nodes, [x], OUT,
                          initializers=(("w", w), ("b", b), *inits), opset=13)
            cases[key + kind] = (proto, "Conv", act)
    for act in ("Relu", "Clip"):
        nodes = [helper.make_node("Gemm", ["x2", "w", "b"], ["g"], transB=1),
                 helper.make_node(act, ["g"], ["y"])]
        proto = model(nodes, [("x2", F, [5, 12])], OUT,
                      initializers=(("w", _w(rng, 8, 12)), ("b", _w(rng, 8))), opset=13)
        cases[f"Gemm+{act}"] = (proto, "Gemm", act)
    return cases


FUSED = list(fused_cases(np.random.default_rng(0)))


@pytest.mark.parametrize("case", FUSED)
def test_fused_nan_inf(case, backend, rng):
    proto, op, act = fused_cases(rng)[case]
    layers = ModelLoader.from_proto(proto).layers
    assert [(la.op_type, la.attr("activation")) for la in layers] == [(op, act)]
    name = proto.graph.input[0].name
    shape = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    # few specials: each spreads over a whole receptive field
    x = sprinkle(rng.standard_normal(shape).astype(np.float32) * 3, rng, 0.02)
    feeds = {name: x}
    want = ort_unfused(proto, feeds)
    got, placed = engine_outputs(proto, feeds, backend)
    assert_native(placed, backend)
    assert_ieee_equal(got[0], want, what=f"{case} on {backend}")
    # and a NaN input gives NaN out through every activation
    nan_in = {name: np.full(shape, np.nan, np.float32)}
    got, _ = engine_outputs(proto, nan_in, backend)
    assert np.isnan(got[0]).all(), f"{case} on {backend} hides NaN"


def small_cnn():
    r = np.random.default_rng(1)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p1"], ["f"]),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["g"], transB=1),
             helper.make_node("Softmax", ["g"], ["y"], axis=-1)]
    inits = (("w1", _w(r, 8, 3, 3, 3)), ("b1", _w(r, 8)), ("w2", _w(r, 10, 8 * 4 * 4)),
             ("b2", _w(r, 10)))
    return model(nodes, [("x", F, [1, 3, 8, 8])], OUT, initializers=inits,
                 opset=13)


def test_small_cnn_all_nan(backend):
    proto = small_cnn()
    x = np.full((1, 3, 8, 8), np.nan, np.float32)
    assert np.isnan(ort_run(proto, {"x": x})[0]).all()
    got, placed = engine_outputs(proto, {"x": x}, backend)
    assert_native(placed, backend)
    assert got[0].shape == (1, 10)
    assert np.isnan(got[0]).all(), f"{backend} gives {got[0]} for an all-NaN input"


def test_small_cnn_one_nan_pixel(backend, rng):
    """One NaN input pixel reaches the output through Conv+Relu, MaxPool and Gemm."""
    proto = small_cnn()
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    x[0, rng.integers(3), rng.integers(8), rng.integers(8)] = np.nan
    got, _ = engine_outputs(proto, {"x": x}, backend)
    assert np.isnan(got[0]).all()
    x[np.isnan(x)] = 0.5
    want = ort_run(proto, {"x": x})[0]
    got, _ = engine_outputs(proto, {"x": x}, backend)
    assert_ieee_equal(got[0], want)


@pytest.mark.parametrize("form", ["residual+Relu", "residual", "SiLU"])
def test_run_time_fused_forms_keep_nan(form, backend, rng):
    """Forms the CPU backend fuses when it runs (a residual Add after a Conv, SiLU as
    Sigmoid*Mul) propagate NaN and Inf like the unfused graph, on every backend."""
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])
    if form == "SiLU":
        nodes = [conv, helper.make_node("Sigmoid", ["c"], ["s"]),
                 helper.make_node("Mul", ["c", "s"], ["y"])]
    else:
        nodes = [conv, helper.make_node("Add", ["c", "x"], ["a" if "Relu" in form else "y"])]
        if "Relu" in form:
            nodes.append(helper.make_node("Relu", ["a"], ["y"]))
    proto = model(nodes, [("x", F, [1, 4, 7, 9])], OUT,
                  initializers=(("w", _w(rng, 4, 4, 3, 3)), ("b", _w(rng, 4))), opset=13)
    x = sprinkle(rng.standard_normal((1, 4, 7, 9)).astype(np.float32) * 3, rng, 0.02)
    got, _ = engine_outputs(proto, {"x": x}, backend)
    assert_ieee_equal(got[0], ort_unfused(proto, {"x": x}), what=f"{form} on {backend}")
    got, _ = engine_outputs(proto, {"x": np.full(x.shape, np.nan, np.float32)}, backend)
    assert np.isnan(got[0]).all(), f"{form} on {backend} hides NaN"
