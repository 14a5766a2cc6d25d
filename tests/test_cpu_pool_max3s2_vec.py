"""3x3 / stride-2 max pools on float32 (``pool_max3s2_vec``) against NumPy in float64 and
the float64 kernel: rows of fewer, exactly and more than 16 outputs, split over planes on
two threads, NaN and Inf anywhere (the rows' tails and a plane's last row included), and
padded pools, which take the edge kernel."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu import kernels_pool as kp
from engine.backends.cpu import pool_max3s2_vec
from tests.test_cpu_kernels import L, ref_pool
from tests.test_nan_propagation import assert_ieee_equal

SHAPES = [  # (planes, H, W): SqueezeNet's three pools, rows of 6, 16, 17 and 40 outputs
    (64, 111, 111), (128, 55, 55), (256, 27, 27), (37, 13, 13), (9, 33, 33), (5, 35, 36),
    (3, 81, 81), (1, 7, 5)]


def _pool(x, **attrs):
    return kp.MaxPool(L("MaxPool", kernel_shape=[3, 3], strides=[2, 2], **attrs), [x])


@pytest.mark.parametrize("shape", SHAPES)
def test_matches_float64(rng, nthreads, shape):
    x = rng.standard_normal((1, *shape)).astype(np.float32)
    got = _pool(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ref_pool(x, [3, 3], [2, 2], [0] * 4, [1, 1], 0, "max"))
    np.testing.assert_array_equal(got, _pool(x.astype(np.float64)))


@pytest.mark.parametrize("shape", [(6, 13, 13), (4, 27, 27), (3, 35, 36), (2, 55, 55)])
def test_nan_and_inf_where_the_vectors_and_tails_reach(rng, nthreads, shape):
    x = rng.standard_normal((1, *shape)).astype(np.float32)
    planes, H, W = shape
    x[0, 0, 0, 0] = np.nan
    x[0, 1, H // 2, W - 1] = np.nan  # the last column: a row's tail
    x[0, -1, H - 1, W - 2] = np.nan  # the input's last row, read one value at a time
    x[0, -1, 2, W // 2] = np.inf
    x[0, 0, H - 3, 3] = -np.inf
    got = _pool(x)
    want = _pool(x.astype(np.float64))
    assert np.isnan(got).any() and np.isinf(got).any()
    assert_ieee_equal(got, want.astype(np.float32), rtol=0, what="3x3/2 max pool")


@pytest.mark.parametrize("shape", [(2, 7, 28, 28), (1, 5, 112, 112), (1, 3, 57, 41)])
@pytest.mark.parametrize("pads,ceil", [([1, 1, 1, 1], 0), ([0, 0, 1, 1], 0), ([0, 0, 0, 0], 1)])
def test_pools_over_the_edges(rng, nthreads, shape, pads, ceil):
    x = rng.standard_normal(shape).astype(np.float32)
    got = _pool(x, pads=pads, ceil_mode=ceil)
    np.testing.assert_array_equal(got, ref_pool(x, [3, 3], [2, 2], pads, [1, 1], ceil, "max"))
    x[0, 0, 5, -1] = np.nan  # the last column, in the row's end pad's window
    x[0, -1, -1, 17] = np.nan
    x[0, 1, 0, 0] = -np.inf
    got = _pool(x, pads=pads, ceil_mode=ceil)
    assert_ieee_equal(got, _pool(x.astype(np.float64), pads=pads, ceil_mode=ceil)
                      .astype(np.float32), rtol=0, what="padded 3x3/2 max pool")


def test_the_float32_kernel_runs(rng, monkeypatch):
    calls = []
    kernel = pool_max3s2_vec.max3s2_f32

    def counted(*args):
        calls.append(args[0].shape)
        return kernel(*args)

    monkeypatch.setattr(kp, "max3s2_f32", counted)
    from engine.backends.cpu import threads
    threads.set_serial(True)
    try:
        _pool(rng.standard_normal((1, 4, 27, 27)).astype(np.float32))
    finally:
        threads.set_serial(False)
    assert calls
