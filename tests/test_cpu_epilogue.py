"""The CPU's Conv/Gemm row epilogue (``activation.bias_act_rows`` / ``act_row``): every
activation code on fresh random rows with NaN and +-Inf against float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu import activation as A


def _ref(v, code, p0, p1):
    v = v.astype(np.float64)
    with np.errstate(all="ignore"):
        if code == A.ACT_NONE:
            return v
        if code == A.ACT_RELU:
            return np.where(v <= 0, 0, v)
        if code == A.ACT_LEAKY:
            return np.where(v >= 0, v, v * p0)
        if code == A.ACT_CLIP:
            return np.where(v < p0, p0, np.where(v > p1, p1, v))
        if code == A.ACT_SIGMOID:
            return 1 / (1 + np.exp(-v))
        if code == A.ACT_HARDSIGMOID:
            return np.where(np.isnan(v), v, np.clip(v * p0 + p1, 0, 1))
        if code == A.ACT_TANH:
            return np.tanh(v)
        if code == A.ACT_SILU:
            return v / (1 + np.exp(-v))
        if code == A.ACT_XHARDSIGMOID:
            return v * np.clip(v * p0 + p1, 0, 1)
    raise AssertionError(code)


CODES = [A.ACT_NONE, A.ACT_RELU, A.ACT_LEAKY, A.ACT_CLIP, A.ACT_SIGMOID, A.ACT_HARDSIGMOID,
         A.ACT_TANH, A.ACT_SILU, A.ACT_XHARDSIGMOID]
PARAMS = {A.ACT_LEAKY: (0.1, 0.0), A.ACT_CLIP: (-0.5, 0.7), A.ACT_HARDSIGMOID: (0.2, 0.5),
          A.ACT_XHARDSIGMOID: (1 / 6, 0.5)}


@pytest.mark.parametrize("code", CODES)
def test_bias_act_rows_every_activation(rng, code):
    rows, cols = 5, 67  # an odd width: vector loops with a remainder
    y = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    flat = y.reshape(-1)
    flat[rng.choice(flat.size, 12, replace=False)] = [np.nan] * 4 + [np.inf] * 4 + [-np.inf] * 4
    bias = rng.standard_normal(rows).astype(np.float32)
    p0, p1 = PARAMS.get(code, (0.0, 0.0))
    params = np.array([p0, p1], np.float32)
    want = _ref(y + bias[:, None], code, np.float32(p0), np.float32(p1))
    got = y.copy()
    A.bias_act_rows(got, bias, code, params, 0, rows, 0, cols)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-6, atol=2e-6)
    part = y.copy()  # a block leaves the rest alone
    A.bias_act_rows(part, bias, code, params, 1, 3, 5, 40)
    np.testing.assert_array_equal(part[[0, 3, 4]], y[[0, 3, 4]])
    np.testing.assert_array_equal(part[1:3, :5], y[1:3, :5])
    np.testing.assert_array_equal(np.isnan(part[1:3, 5:40]), np.isnan(want[1:3, 5:40]))
