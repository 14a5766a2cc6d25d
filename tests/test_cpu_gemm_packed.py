"""The packed-weight product of linear layers (``gemm_packed``) against NumPy in float64, on
fresh random data: partial row tiles and column panels, several row blocks, both thread
splits, each epilogue; and the weights packed once per array."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.backends.cpu import gemm_packed, threads
from engine.backends.cpu.linear_fused import EPI_BIAS, EPI_GELU_ERF, EPI_GELU_TANH, linear


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
    key = id(w)
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
