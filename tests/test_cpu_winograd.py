"""The CPU's Winograd convolution (F(2,3) and F(4,3)) against a NumPy float64 direct
convolution on fresh random data: odd sizes, pads, channel counts that are multiples of
nothing, batches, every fused activation and the residual forms; NaN/Inf inputs; and which
layers the selection rule sends to Winograd."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu import kernels_conv as kc
from engine.backends.cpu import kernels_winograd as kw
from engine.backends.cpu.activation import ACT_NONE, ACT_RELU, ACT_SILU, ACT_TANH
from engine.passes.fusion import apply_activation
from tests.test_cpu_kernels import L, ref_conv

#: largest error relative to the output's largest magnitude: F(4,3)'s transforms multiply
#: by up to 8 and 1/24, costing about one decimal digit more than F(2,3) in float32
TOL = {2: 2e-5, 4: 1e-4}


@pytest.fixture(params=[2, 4], ids=["F2", "F4"])
def tile(request, monkeypatch):
    monkeypatch.setattr(kw, "FORCE", request.param)
    return request.param


def rel_err(got, want) -> float:
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-6))


def case(rng, N, C, M, H, W):
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((M, C, 3, 3)) / np.sqrt(9 * C)).astype(np.float32)
    b = rng.standard_normal(M).astype(np.float32)
    return x, w, b


@pytest.mark.parametrize("N,C,M,H,W,pads", [
    (1, 3, 5, 7, 9, [1, 1, 1, 1]),
    (2, 17, 13, 11, 6, [0, 1, 2, 0]),
    (1, 37, 29, 23, 30, [1, 1, 1, 1]),
    (2, 5, 7, 3, 3, [0, 0, 0, 0]),       # one output pixel
    (1, 6, 70, 13, 13, [3, 0, 1, 2]),    # pads beyond the kernel's reach
    (1, 67, 3, 9, 14, [1, 0, 1, 0]),
])
def test_winograd_matches_float64(rng, tile, N, C, M, H, W, pads):
    x, w, b = case(rng, N, C, M, H, W)
    layer = L("Conv", pads=pads)
    got = kc.Conv(layer, [x, w, b])
    assert layer._cpu_conv_plan.kind == "winograd"
    err = rel_err(got, ref_conv(x, w, b, [1, 1], pads, [1, 1], 1))
    assert err < TOL[tile], f"F({tile},3) max relative error {err:.2e}"
    # no bias
    got = kc.Conv(L("Conv", pads=pads), [x, w])
    assert rel_err(got, ref_conv(x, w, None, [1, 1], pads, [1, 1], 1)) < TOL[tile]


@pytest.mark.parametrize("act,params", [("Relu", []), ("LeakyRelu", [0.1]), ("Clip", [-0.5, 0.7]),
                                        ("Sigmoid", []), ("HardSigmoid", [0.3, 0.4]),
                                        ("Tanh", [])])
def test_winograd_fused_activation(rng, tile, act, params):
    x, w, b = case(rng, 2, 11, 9, 10, 13)
    layer = L("Conv", pads=[1, 1, 1, 1], activation=act, activation_params=params)
    got = kc.Conv(layer, [x, w, b])
    assert layer._cpu_conv_plan.kind == "winograd"
    want = apply_activation(ref_conv(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), act, params)
    assert rel_err(got, want) < TOL[tile]


@pytest.mark.parametrize("act,post", [(None, ACT_RELU), (None, ACT_NONE),
                                      ((ACT_TANH, 0.0, 0.0), ACT_RELU),
                                      ((ACT_SILU, 0.0, 0.0), ACT_NONE)])
def test_winograd_residual_and_silu(rng, tile, act, post):
    """The CPU plan's own fusions: ``post(act(conv) + residual)``."""
    x, w, b = case(rng, 2, 9, 12, 15, 8)
    res = rng.standard_normal((2, 12, 15, 8)).astype(np.float32)
    layer = L("Conv", pads=[1, 1, 1, 1])
    got = kc.conv(layer, [x, w, b], act=act, res=res, post=(post, 0.0, 0.0))
    assert layer._cpu_conv_plan.kind == "winograd"
    y = ref_conv(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1)
    if act is not None:
        y = np.tanh(y) if act[0] == ACT_TANH else y / (1 + np.exp(-y))
    y = y + res
    if post == ACT_RELU:
        y = np.maximum(y, 0)
    assert rel_err(got, y) < TOL[tile]


def test_winograd_non_finite_like_direct(rng, tile, monkeypatch):
    """NaN and Inf land where the direct path puts them: in the Winograd domain one would
    spread over its whole tile, so such inputs take the im2col path."""
    x, w, b = case(rng, 2, 7, 6, 12, 11)
    flat = x.reshape(-1)
    pos = rng.permutation(flat.size)[:6]
    flat[pos[:2]], flat[pos[2:4]], flat[pos[4:]] = np.nan, np.inf, -np.inf
    res = rng.standard_normal((2, 6, 12, 11)).astype(np.float32)
    res.reshape(-1)[rng.permutation(res.size)[:3]] = [np.nan, np.inf, -np.inf]
    wino = L("Conv", pads=[1, 1, 1, 1], activation="Relu")
    got = kc.Conv(wino, [x, w, b])
    got_res = kc.conv(wino, [x, w, b], res=res, post=(ACT_RELU, 0.0, 0.0))
    assert wino._cpu_conv_plan.kind == "winograd"
    monkeypatch.setattr(kw, "FORCE", 0)
    direct = L("Conv", pads=[1, 1, 1, 1], activation="Relu")
    want = kc.Conv(direct, [x, w, b])
    want_res = kc.conv(direct, [x, w, b], res=res, post=(ACT_RELU, 0.0, 0.0))
    assert direct._cpu_conv_plan.kind in ("im2col", "shift")
    for g, e in ((got, want), (got_res, want_res)):
        assert np.isnan(e).any()
        np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
        np.testing.assert_array_equal(np.isposinf(g), np.isposinf(e))
        np.testing.assert_array_equal(np.isneginf(g), np.isneginf(e))
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    # a finite residual with a finite input stays on the Winograd path and stays finite
    x2 = case(rng, 2, 7, 6, 12, 11)[0]
    assert np.isfinite(kc.Conv(wino, [x2, w, b])).all()


def test_winograd_non_finite_weights_use_direct(rng, tile):
    x, w, b = case(rng, 1, 4, 5, 9, 9)
    w[2, 1, 0, 2] = np.inf
    layer = L("Conv", pads=[1, 1, 1, 1])
    got = kc.Conv(layer, [x, w, b])
    assert layer._cpu_conv_plan.kind in ("im2col", "shift")
    assert np.isfinite(got[:, :2]).all()


def test_rule_selects_winograd_where_it_pays(rng):
    """With no override, a resnet50 stage-1 3x3 layer (64 -> 64, 56x56) runs Winograd; a
    7x7 one (512 -> 512) and strided or grouped convolutions keep im2col."""
    assert kw.FORCE is None
    x, w, b = case(rng, 1, 64, 64, 56, 56)
    layer = L("Conv", pads=[1, 1, 1, 1], activation="Relu")
    got = kc.Conv(layer, [x, w, b])
    assert layer._cpu_conv_plan.kind == "winograd"
    assert layer._cpu_conv_plan.wino.m == kw.choose(64, 64, 56, 56)
    want = np.maximum(ref_conv(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), 0)
    assert rel_err(got, want) < TOL[4]
    assert kw.choose(512, 512, 7, 7) == 0
    x, w, b = case(rng, 1, 64, 64, 56, 56)
    for attrs in (dict(strides=[2, 2]), dict(dilations=[2, 2]), dict(group=2)):
        wg = w[:, :32] if attrs.get("group") else w
        layer = L("Conv", pads=[1, 1, 1, 1], **attrs)
        kc.Conv(layer, [x, wg, b])
        assert layer._cpu_conv_plan.kind != "winograd", attrs


@pytest.mark.parametrize("k,dil,pads", [
    ((3, 3), [1, 1], [1, 1, 1, 1]), ((5, 5), [1, 1], [2, 2, 2, 2]),
    ((3, 2), [2, 1], [0, 1, 2, 0]), ((1, 3), [1, 3], [0, 3, 0, 3]),
    ((3, 3), [1, 1], [0, 0, 0, 0])])
def test_shift_kind_matches_float64(rng, monkeypatch, k, dil, pads):
    """Small stride-1 convolutions that Winograd does not take build their patch matrix from
    shifted runs of the padded plane (``conv_shift``): any kernel, dilation and pads, with
    the fused activation and the residual forms."""
    monkeypatch.setattr(kw, "FORCE", 0)
    N, C, M, H, W = 2, 7, 11, 9, 12
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((M, C, *k)).astype(np.float32)
    b = rng.standard_normal(M).astype(np.float32)
    layer = L("Conv", pads=pads, dilations=dil, activation="Relu")
    got = kc.Conv(layer, [x, w, b])
    assert layer._cpu_conv_plan.kind == "shift"
    y = ref_conv(x, w, b, [1, 1], pads, dil, 1)
    assert rel_err(got, np.maximum(y, 0)) < 1e-5
    res = rng.standard_normal(y.shape).astype(np.float32)
    plain = L("Conv", pads=pads, dilations=dil)
    got = kc.conv(plain, [x, w, b], act=(ACT_SILU, 0.0, 0.0), res=res, post=(ACT_RELU, 0.0, 0.0))
    assert plain._cpu_conv_plan.kind == "shift"
    assert rel_err(got, np.maximum(y / (1 + np.exp(-y)) + res, 0)) < 1e-5
