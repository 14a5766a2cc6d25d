"""Arithmetic the GPU backends must get exactly (or to f32's precision) whatever the driver's
shortcuts: correctly rounded division, C's and Python's integer remainders of negative
operands, wrapped Pad indices, and functions whose naive formulas lose digits (Softplus,
Mish and Erf of small results). A real GPU driver was seen dividing 2 ulp off and computing
i32 `%` of negative operands as unsigned; the references here are NumPy in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper

from engine import ModelLoader, Worker

pytestmark = pytest.mark.usefixtures("require_gpu")
BACKENDS = ["gpu-compute", "gpu-pixel"]


def _run(op, inputs, backend, elem=TensorProto.FLOAT, opset=18, **attrs):
    names = [f"i{k}" for k in range(len(inputs))]
    out_shape = list(attrs.pop("out_shape", inputs[0].shape))
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)], "g",
        [helper.make_tensor_value_info(n, elem if a.dtype != np.int64 else TensorProto.INT64,
                                       list(a.shape)) for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info("y", elem, out_shape)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    with Worker(ModelLoader.from_proto(proto), backend) as worker:
        got = worker.schedule(dict(zip(names, inputs))).peek_output("y").download_to_array()
        return got, {t.name: t.backend for t in worker.last_profile.layers}


@pytest.mark.parametrize("backend", BACKENDS)
def test_division_is_correctly_rounded(backend, rng):
    """Div's quotients equal NumPy's float32 ones. (Lavapipe divides exactly; an H100
    through Vulkan divides 1 ulp off on a quarter of these, and div_f's correction brings
    them back: see ``common/math.wgsl``.)"""
    # exact quotients (k * b / b), quotients landing on .5, random operands, and signed zeros,
    # infinities and NaN, which must keep the plain quotient (no subnormal quotients: GPUs
    # flush them to zero)
    b = rng.uniform(0.1, 10.0, 4096).astype(np.float32)
    k = rng.integers(-60, 60, 4096).astype(np.float32)
    exact = (k * b).astype(np.float32)
    halves = np.float32(2.5) * np.arange(1, 4097, dtype=np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e38, 1e-30, 3.0, -7.0, 1.0, 5.0,
                        -0.0, 0.0, 2.0, 1e-30, 1e30], np.float32)
    special_b = np.array([1.0, 2.0, 3.0, -np.inf, 1.0, 1e-5, 1e5, 0.0, -0.0, np.inf, np.nan,
                          -3.0, -3.0, 3.0, 1e30, 1e-30], np.float32)
    a = np.concatenate([exact, halves, rng.standard_normal(4096).astype(np.float32) * 100,
                        np.repeat(special, 4)])
    d = np.concatenate([b, np.full(4096, 5.0, np.float32),
                        rng.uniform(0.01, 10, 4096).astype(np.float32), np.repeat(special_b, 4)])
    got, placed = _run("Div", [a, d], backend)
    assert set(placed.values()) == {backend}
    with np.errstate(all="ignore"):
        want = a / d
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    bad = np.flatnonzero(~same)
    assert bad.size == 0, [(float(a[i]), float(d[i]), float(got[i]), float(want[i]))
                           for i in bad[:6]]


@pytest.mark.parametrize("fmod", [0, 1])
def test_int32_remainder_of_negative_operands(fmod):
    a = np.repeat(np.arange(-40, 41, dtype=np.int32), 16)
    b = np.tile(np.array([-9, -7, -4, -3, -2, -1, 1, 2, 3, 4, 5, 7, 8, 11, -2147483647,
                          2147483647], np.int32), 81)
    a[:3] = [-2147483648, -2147483648, 2147483647]
    b[:3] = [3, -5, -6]
    got, placed = _run("Mod", [a, b], "gpu-compute", elem=TensorProto.INT32, fmod=fmod)
    assert set(placed.values()) == {"gpu-compute"}
    want = np.fmod(a, b) if fmod else np.mod(a, b)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(int(a[i]), int(b[i]), int(got[i]), int(want[i])) for i in bad[:6]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_pad_wrap_reaches_back_several_periods(backend, rng):
    x = rng.integers(-100, 100, (2, 3, 4, 5)).astype(np.int32)
    pads = np.array([0, 1, 6, 3, 0, 2, 5, 9], np.int64)
    want = np.pad(x, [(0, 0), (1, 2), (6, 5), (3, 9)], mode="wrap")
    got, _ = _run("Pad", [x, pads], backend, elem=TensorProto.INT32, mode="wrap",
                  out_shape=want.shape)
    np.testing.assert_array_equal(got, want)


def _softplus(x):
    return np.logaddexp(0.0, x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,ref", [
    ("Softplus", _softplus),
    ("Mish", lambda x: x * np.tanh(_softplus(x))),
    ("Erf", np.vectorize(math.erf)),
])
def test_small_results_keep_their_digits(op, ref, backend, rng):
    # Softplus(-17) is 4e-8 and Erf(1e-4) is 1e-4: formulas that go through 1 + e or 1 - e
    # keep only the absolute error of 1's ulp; compilers may also fold (1 + e) - 1 into e
    x = np.concatenate([rng.uniform(-80, -8, 2000), rng.uniform(-1e-3, 1e-3, 2000),
                        rng.uniform(-4, 4, 2000), -np.logspace(-6, 1.9, 500)]).astype(np.float32)
    got, _ = _run(op, [x], backend)
    want = ref(x.astype(np.float64))
    normal = np.abs(want) > 1e-36  # below that GPUs flush to zero
    rel = np.abs(got - want)[normal] / np.abs(want)[normal]
    worst = int(np.argmax(rel))
    assert rel[worst] < 2e-5, (op, float(x[normal][worst]), float(got[normal][worst]),
                               float(want[normal][worst]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("coord", ["half_pixel", "pytorch_half_pixel", "align_corners",
                                   "asymmetric", "half_pixel_symmetric"])
@pytest.mark.parametrize("nearest", ["round_prefer_floor", "round_prefer_ceil", "floor",
                                     "ceil"])
def test_nearest_resize_on_rounding_boundaries(coord, nearest, backend, rng):
    """Output sizes whose source coordinates land exactly on .5 or on integers (7 from 2,
    8 from 4, 7 from 4 align_corners...), against the ONNX reference evaluator."""
    import warnings

    from onnx.reference import ReferenceEvaluator

    for h, w, oh, ow in [(2, 2, 7, 8), (4, 4, 8, 8), (4, 5, 7, 15), (5, 3, 8, 6)]:
        x = rng.standard_normal((1, 2, h, w)).astype(np.float32)
        sizes = np.array([1, 2, oh, ow], np.int64)
        graph = helper.make_graph(
            [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest",
                              coordinate_transformation_mode=coord, nearest_mode=nearest)],
            "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, oh, ow])],
            [helper.make_tensor("sizes", TensorProto.INT64, [4], sizes)])
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = ReferenceEvaluator(proto).run(None, {"x": x})[0]
        with Worker(ModelLoader.from_proto(proto), backend) as worker:
            got = worker.schedule({"x": x}).peek_output("y").download_to_array()
            assert {t.backend for t in worker.last_profile.layers} == {backend}
        np.testing.assert_array_equal(got, want, err_msg=f"{h}x{w} -> {oh}x{ow}")
