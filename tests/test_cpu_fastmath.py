"""The CPU's vectorised float32 exp/tanh/sigmoid/erf against float64 NumPy/SciPy."""

import numpy as np
import pytest
from numba import njit
from scipy import special

from engine.backends.cpu import fastmath


def _loop(fn):
    @njit(error_model="numpy", fastmath={"contract", "arcp", "afn"})
    def apply(x, out):
        for i in range(x.size):
            out[i] = fn(x[i])
    return apply


CASES = {
    "exp": (fastmath.exp_f32, np.exp),
    "tanh": (fastmath.tanh_f32, np.tanh),
    "sigmoid": (fastmath.sigmoid_f32, special.expit),
    "erf": (fastmath.erf_f32, special.erf),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fast_function_matches_float64(name, rng):
    fast, ref = CASES[name]
    x = np.concatenate([rng.standard_normal(20000) * s for s in (0.05, 0.5, 2, 8, 40)]
                       + [rng.uniform(-110, 95, 20000)]).astype(np.float32)
    special_values = np.array([np.nan, np.inf, -np.inf, 0.0, 88.5, 89.0, -87.5, -103.0],
                              np.float32)
    x = np.concatenate([x, special_values])
    got = np.empty_like(x)
    _loop(fast)(x, got)
    with np.errstate(over="ignore", under="ignore"):
        want = ref(x.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want) & ~np.isnan(got)
    if name == "exp":
        normal = finite & (want > 1.2e-38) & (want < 3.4e38)
        assert np.max(np.abs(got[normal] - want[normal]) / want[normal]) < 2.5e-7
        assert np.array_equal(np.isinf(got), np.isinf(want.astype(np.float32)))
    else:
        assert np.max(np.abs(got[finite] - want[finite])) < 3e-7
        inf = np.isinf(x)
        np.testing.assert_array_equal(got[inf], want[inf])


def test_silu_matches_float64_and_the_two_layers_at_the_edges(rng):
    x = np.concatenate([rng.standard_normal(40000) * s for s in (0.1, 2, 20)]
                       + [rng.uniform(-100, 100, 20000)]).astype(np.float32)
    edges = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.0, -88.0, -87.5, -88.5, -200.0,
                      200.0, 3.4e38, -3.4e38], np.float32)
    x = np.concatenate([x, edges])
    got = np.empty_like(x)
    _loop(fastmath.silu_f32)(x, got)
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
        layers = xd * special.expit(xd)  # Sigmoid then Mul: -inf * 0 is NaN
    np.testing.assert_array_equal(np.isnan(got), np.isnan(layers))
    ok = np.isfinite(layers)
    big = np.abs(layers[ok]) > 1e-30
    rel = np.abs(got[ok][big] - layers[ok][big]) / np.abs(layers[ok][big])
    assert rel.max() < 4e-7
    small = np.abs(got[ok][~big] - layers[ok][~big])
    assert np.all(small < 2e-36 + 4e-7 * np.abs(layers[ok][~big]))  # subnormal: about zero
    assert got[x == np.inf][0] == np.inf
    assert np.all(got[np.abs(x) == np.float32(3.4e38)] == [np.float32(3.4e38), -0.0])


@pytest.mark.parametrize("tanh_form", [False, True])
def test_array_gelu_and_erf(tanh_form, rng):
    x = (rng.standard_normal((3, 70001)) * 3).astype(np.float32)
    xd = x.astype(np.float64)
    if tanh_form:
        want = 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd**3)))
    else:
        want = 0.5 * xd * (1 + special.erf(xd / np.sqrt(2)))
    np.testing.assert_allclose(fastmath.gelu(x, tanh_form), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(fastmath.erf(x), special.erf(xd), rtol=0, atol=3e-7)


@pytest.mark.parametrize("tanh_form", [False, True])
def test_scalar_gelu_forms_match_float64_and_keep_the_edges(tanh_form, rng):
    """``gelu_erf_f32`` (a rational erf) and ``gelu_tanh_f32`` (v * sigmoid) against the
    float64 formulas over a wide range, and the values the two layers (Erf or Tanh, Mul)
    give at the edges: +Inf stays +Inf, -Inf and NaN give NaN."""
    fn = fastmath.gelu_tanh_f32 if tanh_form else fastmath.gelu_erf_f32
    x = np.concatenate([rng.standard_normal(40000) * s for s in (0.01, 0.7, 3, 12)]
                       + [rng.uniform(-200, 200, 20000)]).astype(np.float32)
    edges = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5.65, -5.65, 1e20, -1e20],
                     np.float32)
    x = np.concatenate([x, edges])
    got = np.empty_like(x)
    _loop(fn)(x, got)
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if tanh_form:
            want = 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))
        else:
            want = 0.5 * xd * (1 + special.erf(xd / np.sqrt(2)))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want)
    # (1 + erf) cancels in the negative tail: up to 7e-7 absolute on values of 1e-7 there
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-6, atol=8e-7)
    assert got[x == np.inf][0] == np.inf
