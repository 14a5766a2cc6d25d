"""Max pools with 16 planes per vector (``pool16``) against NumPy in float64 and the row
kernels: 5 x 5 and 3 x 3 windows, strides 1 and 2, pads and ceil mode, plane counts that
leave a partial block, batches, NaN and Inf, one and two threads."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu import kernels_pool as kp
from engine.backends.cpu import pool16
from tests.test_cpu_kernels import L, ref_pool
from tests.test_nan_propagation import assert_ieee_equal

CASES = [  # (N, C, H, W), kernel, strides, pads, ceil
    ((1, 32, 20, 20), [5, 5], [1, 1], [2, 2, 2, 2], 0),   # YOLO's SPPF pool
    ((1, 40, 28, 28), [3, 3], [2, 2], [0, 0, 1, 1], 0),   # Inception's, a partial block
    ((2, 24, 14, 14), [3, 3], [2, 2], [0, 0, 1, 1], 0),
    ((1, 48, 7, 7), [3, 3], [1, 1], [1, 1, 1, 1], 0),
    ((1, 17, 9, 11), [3, 3], [2, 2], [1, 1, 1, 1], 1),    # ceil mode, 16 + 1 planes
    ((1, 16, 6, 5), [2, 3], [1, 2], [0, 1, 1, 0], 0),     # rows narrower than a vector
]


def _layer(k, s, pads, ceil):
    return L("MaxPool", kernel_shape=k, strides=s, pads=pads, ceil_mode=ceil)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_float64_and_the_row_kernels(rng, nthreads, case, monkeypatch):
    shape, k, s, pads, ceil = CASES[case]
    x = rng.standard_normal(shape).astype(np.float32)
    layer = _layer(k, s, pads, ceil)
    want = ref_pool(x, k, s, pads, [1, 1], ceil, "max")
    calls = []
    blocks = pool16.pool16_blocks

    def counted(*args):
        calls.append(args[-1] - args[-2])
        return blocks(*args)

    monkeypatch.setattr(pool16, "pool16_blocks", counted)
    monkeypatch.setattr(pool16, "wanted", lambda *a: True)
    with monkeypatch.context() as m:
        m.setattr(kp, "POOL16", True)
        got = kp.MaxPool(layer, [x])
    np.testing.assert_array_equal(got, want)
    if nthreads == 1:
        assert sum(calls) == -(-shape[0] * shape[1] // 16)  # every block, once
    monkeypatch.setattr(kp, "POOL16", False)
    np.testing.assert_array_equal(kp.MaxPool(layer, [x]), got)


@pytest.mark.parametrize("case", [0, 1, 4])
def test_nan_and_inf(rng, nthreads, case, monkeypatch):
    shape, k, s, pads, ceil = CASES[case]
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    x[0, -1, -1, -1] = np.nan  # the partial block's last plane, its corner
    x[0, 3, shape[2] // 2, 1] = np.inf
    x[0, 5, 1, shape[3] // 2] = -np.inf
    monkeypatch.setattr(pool16, "wanted", lambda *a: True)
    got = kp.MaxPool(_layer(k, s, pads, ceil), [x])
    want = kp.MaxPool(_layer(k, s, pads, ceil), [x.astype(np.float64)])
    assert np.isnan(got).any() and np.isinf(got).any()
    assert_ieee_equal(got, want.astype(np.float32), rtol=0, what="pool16")


def test_the_shapes_it_takes():
    assert pool16.wanted(256, (5, 5), (1, 1), True, (20, 20))
    assert pool16.wanted(320, (3, 3), (2, 2), True, (14, 14))
    assert pool16.wanted(832, (3, 3), (1, 1), True, (7, 7))
    assert not pool16.wanted(256, (3, 3), (1, 1), True, (28, 28))
    assert not pool16.wanted(256, (3, 3), (2, 2), False, (13, 13))
    assert not pool16.wanted(8, (5, 5), (1, 1), True, (20, 20))  # under one block
    assert not pool16.wanted(64, (3, 3), (2, 2), True, (56, 56))


def test_overhanging_windows_are_seen():
    # ceil mode without pads: the last window reaches one column and row past 28 x 28
    assert kp._overhangs(3, 3, 2, 2, 0, 0, (480, 28, 28), (480, 14, 14))
    assert kp._overhangs(3, 3, 2, 2, 1, 1, (8, 28, 28), (8, 14, 14))
    assert not kp._overhangs(3, 3, 2, 2, 0, 0, (256, 27, 27), (256, 13, 13))


def test_a_ceil_mode_pool_runs_here(rng, monkeypatch):
    calls = []
    blocks = pool16.pool16_blocks
    monkeypatch.setattr(pool16, "pool16_blocks", lambda *a: calls.append(1) or blocks(*a))
    from engine.backends.cpu import threads
    threads.set_serial(True)
    try:
        x = rng.standard_normal((1, 48, 28, 28)).astype(np.float32)
        got = kp.MaxPool(_layer([3, 3], [2, 2], [0, 0, 0, 0], 1), [x])
    finally:
        threads.set_serial(False)
    assert calls
    np.testing.assert_array_equal(got, ref_pool(x, [3, 3], [2, 2], [0] * 4, [1, 1], 1, "max"))


@pytest.mark.parametrize("count_pad", [0, 1])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_average_pools_match_float64_and_the_row_kernels(rng, nthreads, case, count_pad,
                                                        monkeypatch):
    shape, k, s, pads, ceil = CASES[case]
    x = rng.standard_normal(shape).astype(np.float32)
    layer = L("AveragePool", kernel_shape=k, strides=s, pads=pads, ceil_mode=ceil,
              count_include_pad=count_pad)
    monkeypatch.setattr(pool16, "wanted", lambda *a: True)
    got = kp.AveragePool(layer, [x])
    want = ref_pool(x, k, s, pads, [1, 1], ceil, "avg", bool(count_pad))
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-7)
    monkeypatch.setattr(kp, "POOL16", False)
    np.testing.assert_allclose(kp.AveragePool(layer, [x]), got, rtol=2e-6, atol=2e-7)


def test_an_average_of_nan_and_inf(rng, monkeypatch):
    shape, k, s, pads, ceil = CASES[1]
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 0, 4, 4] = np.nan
    x[0, 1, 0, 0] = np.inf
    x[0, 2, 9, 9] = -np.inf
    layer = L("AveragePool", kernel_shape=k, strides=s, pads=pads, ceil_mode=ceil)
    monkeypatch.setattr(pool16, "wanted", lambda *a: True)
    got = kp.AveragePool(layer, [x])
    monkeypatch.setattr(kp, "POOL16", False)
    want = kp.AveragePool(layer, [x])
    assert np.isnan(got).any() and np.isinf(got).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=2e-6, atol=2e-7)
