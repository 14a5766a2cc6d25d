"""CPU memory-bound kernels (Concat growing in place, BatchNormalization + Relu, pools)
against independent references (NumPy, float64 where it computes) on fresh random data,
with one and two threads."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from engine import ModelLoader
from engine.backends.cpu import kernels_norm as kn
from engine.backends.cpu import kernels_pool as kp
from engine.backends.cpu import kernels_shape as ks
from engine.model import Layer
from tests.modelgen import engine_run, ort_run
from tests.modelgen import model as make_model
from tests.test_cpu_kernels import ref_pool

F = TensorProto.FLOAT


def _concat(axis=1):
    return Layer("c", "Concat", ["a", "b"], ["y"], {"axis": axis}, opset=13)


def _dense_chain(rng, layers, x0, grow=8):
    """c_k = Concat(c_{k-1}, y_k) through the kernel, one Layer object per step (as a model
    has); returns every c_k and the pieces, to check against np.concatenate."""
    outs, pieces, x = [], [], x0
    for layer in layers:
        y = rng.standard_normal((1, grow) + x0.shape[2:]).astype(x0.dtype)
        x = ks.Concat(layer, [x, y])
        outs.append(x)
        pieces.append(y)
    return outs, pieces


def test_concat_chain_grows_in_place_and_keeps_every_prefix(rng):
    layers = [_concat() for _ in range(6)]
    for run in range(5):  # the first run learns the capacity, later ones use it
        x0 = rng.standard_normal((1, 5, 41, 43)).astype(np.float32)
        outs, pieces = _dense_chain(rng, layers, x0)
        for k, got in enumerate(outs):
            want = np.concatenate([x0, *pieces[:k + 1]], axis=1)
            assert got.shape == want.shape and got.flags.c_contiguous
            assert np.array_equal(got, want), (run, k)
        if run:
            assert np.shares_memory(outs[0], outs[-1])  # extended, not copied


def test_concat_branch_from_an_extended_prefix_copies(rng):
    a, b, c = _concat(), _concat(), _concat()
    x0 = rng.standard_normal((1, 6, 40, 40)).astype(np.float32)
    y1, y2, z = (rng.standard_normal((1, 4, 40, 40)).astype(np.float32) for _ in range(3))
    for _ in range(2):
        c1 = ks.Concat(a, [x0, y1])
        c2 = ks.Concat(b, [c1, y2])
        c3 = ks.Concat(c, [c1, z])  # c1's buffer already holds y2 behind it
        assert np.array_equal(c2, np.concatenate([x0, y1, y2], 1))
        assert np.array_equal(c3, np.concatenate([x0, y1, z], 1))
        assert np.array_equal(c1, np.concatenate([x0, y1], 1))


@pytest.mark.parametrize("shape,axis", [((2, 3, 70, 90), 1), ((1, 3, 70, 90), -1),
                                        ((1, 1, 200, 97), 2), ((3, 4), 0)])
def test_concat_other_layouts(rng, shape, axis):
    layers = [_concat(axis) for _ in range(3)]
    for _ in range(5):  # past the runs after which a concat heading no chain goes plain
        x = rng.standard_normal(shape).astype(np.float32)
        want = x
        for layer in layers:
            y = rng.standard_normal(shape).astype(np.float32)
            x = ks.Concat(layer, [x, y])
            want = np.concatenate([want, y], axis)
            assert np.array_equal(x, want)


def _dense_block_model(c0=16, grow=8, n=4, hw=24):
    """A DenseNet block: BN -> Relu -> 1x1 Conv on the growing concat, Concat per layer."""
    nodes, inits, cur, c = [], [], "x", c0
    rng = np.random.default_rng(7)
    for k in range(n):
        for nm, v in (("g", rng.uniform(0.5, 1.5, c)), ("b", rng.standard_normal(c)),
                      ("m", rng.standard_normal(c)), ("v", rng.uniform(0.5, 2, c))):
            inits.append((f"{nm}{k}", v.astype(np.float32)))
        inits.append((f"w{k}", (rng.standard_normal((grow, c, 1, 1)) * 0.2).astype(np.float32)))
        nodes += [helper.make_node("BatchNormalization", [cur, f"g{k}", f"b{k}", f"m{k}", f"v{k}"],
                                   [f"bn{k}"], epsilon=1e-5),
                  helper.make_node("Relu", [f"bn{k}"], [f"r{k}"]),
                  helper.make_node("Conv", [f"r{k}", f"w{k}"], [f"y{k}"]),
                  helper.make_node("Concat", [cur, f"y{k}"], [f"c{k}"], axis=1)]
        cur, c = f"c{k}", c + grow
    nodes.append(helper.make_node("MaxPool", [cur], ["out"], kernel_shape=[3, 3],
                                  strides=[2, 2], pads=[1, 1, 1, 1]))
    return make_model(nodes, [("x", F, [1, c0, hw, hw])], [("out", F, [1, c, hw // 2, hw // 2]),
                      ("c1", F, [1, c0 + 2 * grow, hw, hw])],
                      inits)


def test_dense_block_model_matches_onnxruntime(rng, nthreads):
    proto = _dense_block_model()
    m = ModelLoader.load(proto.SerializeToString())
    for _ in range(3):
        x = rng.standard_normal((1, 16, 24, 24)).astype(np.float32)
        got = engine_run(m, {"x": x})
        want = ort_run(proto, {"x": x})
        for name, w in zip(("out", "c1"), want):
            np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 64, 128, 130), (2, 5, 7, 9), (1, 992, 7, 7)])
@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_scale_shift(rng, nthreads, shape, relu):
    C = shape[1]
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[rng.integers(0, x.size, 5)] = np.nan
    g, b, m = (rng.standard_normal(C).astype(np.float32) for _ in range(3))
    v = rng.uniform(0.1, 2.0, C).astype(np.float32)
    layer = Layer("bn", "BatchNormalization", ["x", "g", "b", "m", "v"], ["y"],
                  {"epsilon": 1e-5}, opset=15)
    got = kn.batch_norm(layer, [x, g, b, m, v], relu=relu)
    c = (None, slice(None)) + (None,) * (len(shape) - 2)
    sc = g.astype(np.float64) / np.sqrt(v.astype(np.float64) + 1e-5)
    want = (x - m.astype(np.float64)[c]) * sc[c] + b.astype(np.float64)[c]
    if relu:
        want = np.where(want > 0, want, np.where(np.isnan(want), np.nan, 0.0))
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=1e-5)


def _pool_layer(op, k, s, pads, cp=0, ceil=0):
    attrs = dict(kernel_shape=k, strides=s, pads=pads, ceil_mode=ceil)
    if op == "AveragePool":
        attrs["count_include_pad"] = cp
    return Layer("p", op, ["x"], ["y"], attrs, opset=19)


def _check_pool(rng, op, shape, k, s, pads, cp=0, ceil=0, nans=0):
    x = rng.standard_normal(shape).astype(np.float32)
    if nans:
        x.reshape(-1)[rng.integers(0, x.size, nans)] = np.nan
    layer = _pool_layer(op, k, s, pads, cp, ceil)
    got = (kp.MaxPool if op == "MaxPool" else kp.AveragePool)(layer, [x])
    want = ref_pool(x, k, s, pads, [1, 1], ceil, "max" if op == "MaxPool" else "avg",
                    bool(cp))
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("shape", [(2, 300, 40, 45), (1, 37, 13, 9), (1, 5, 1, 7),
                                   (3, 2, 6, 1)])
def test_same_size_stride1_pools(rng, nthreads, op, shape):
    """Stride 1 with kh = pads + 1 (output of the input's size): the flat-pass kernel; the
    first shape is large enough to be split over two threads."""
    for k, pads in (([3, 3], [1, 1, 1, 1]), ([5, 3], [2, 0, 2, 2]), ([2, 4], [1, 1, 0, 2]),
                    ([1, 3], [0, 1, 0, 1])):
        _check_pool(rng, op, shape, k, [1, 1], pads, cp=int(rng.integers(0, 2)), nans=3)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("shape", [(1, 70, 111, 111), (2, 3, 56, 57), (1, 4, 7, 7),
                                   (1, 80, 112, 120), (2, 3, 6, 4)])
def test_strided_pools(rng, nthreads, op, shape):
    """Strides 2, pads and ceil_mode: the row kernel, and for 2x2 without padding on even
    sizes the pair kernel; the first and fourth shapes are split over two threads."""
    for k, s, pads, ceil in (([3, 3], [2, 2], [0, 0, 0, 0], 0), ([3, 3], [2, 2], [0, 0, 1, 1], 0),
                             ([3, 3], [2, 2], [1, 1, 1, 1], 1), ([2, 2], [2, 2], [0, 0, 0, 0], 1),
                             ([3, 2], [1, 2], [1, 0, 1, 0], 0)):
        _check_pool(rng, op, shape, k, s, pads, cp=int(rng.integers(0, 2)), ceil=ceil, nans=4)


@pytest.mark.parametrize("shape", [(1, 136, 28, 28), (2, 3, 9, 31), (1, 2, 4, 29),
                                   (1, 272, 14, 14), (1, 3, 5, 3), (2, 2, 4, 3)])
@pytest.mark.parametrize("cp", [0, 1])
def test_average_pool_3x3_stride2(rng, nthreads, shape, cp):
    """3x3/stride-2 average pools (``pool_avg3s2``, rows of any length down to three
    columns) against the float64 reference: every pad on each side from 0 to 2 (windows over
    one or two pad rows and columns, the counts with and without the pads) and ceil_mode
    (windows past the explicit end pads)."""
    for pads, ceil in (([1, 1, 1, 1], 0), ([0, 0, 0, 0], 0), ([1, 0, 0, 1], 0),
                       ([2, 2, 2, 2], 0), ([0, 1, 2, 0], 1), ([1, 1, 1, 1], 1)):
        _check_pool(rng, "AveragePool", shape, [3, 3], [2, 2], pads, cp=cp, ceil=ceil, nans=2)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("shape", [(2, 70, 7, 7), (1, 5, 9), (1, 3, 2, 3, 4)])
def test_whole_input_window_pools(rng, op, shape):
    """A window over the whole input without pads (ResNet's closing 7x7 average pool) runs
    as the global pool: against the float64 reference with NaNs, strides and ceil_mode."""
    spatial = list(shape[2:])
    for strides, ceil in (([1] * len(spatial), 0), ([2] * len(spatial), 1)):
        x = rng.standard_normal(shape).astype(np.float32)
        x.reshape(-1)[rng.integers(0, x.size, 3)] = np.nan
        attrs = dict(kernel_shape=spatial, strides=strides, ceil_mode=ceil)
        layer = Layer("p", op, ["x"], ["y"], attrs, opset=19)
        got = (kp.MaxPool if op == "MaxPool" else kp.AveragePool)(layer, [x])
        want = ref_pool(x, spatial, strides, [0] * 2 * len(spatial), [1] * len(spatial), ceil,
                        "max" if op == "MaxPool" else "avg")
        assert got.shape == want.shape == (*shape[:2], *[1] * len(spatial))
        assert np.array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
