"""The CPU's direct convolution for few output channels (``conv_direct``) against float64
NumPy: kernel sizes 1-7, strides 1-4, dilation, asymmetric padding, batch 2, the fused
epilogues (activation, residual and the Relu after it), NaN/Inf propagation, and the rule
that picks it."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu import kernels_conv as kc
from engine.backends.cpu.activation import ACT_NONE, ACT_RELU, ACT_SILU
from engine.passes.fusion import apply_activation
from tests.test_cpu_depthwise import _layer, _silu
from tests.test_cpu_kernels import close, ref_conv


@pytest.fixture
def direct_everywhere(monkeypatch):
    """Route every ungrouped non-pointwise 2-D float32 Conv to ``conv_direct``."""
    from engine.backends.cpu import conv_blocked, conv_direct

    monkeypatch.setattr(conv_blocked, "ENABLED", False)
    monkeypatch.setattr(conv_direct, "wanted", lambda *a: True)
    monkeypatch.setattr(kc.winograd, "choose", lambda *a: 0)


DIRECT = [  # (C, M, H, W, kernel, strides, dilations, pads)
    (3, 16, 15, 17, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    (5, 6, 12, 11, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    (4, 9, 13, 12, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),
    (3, 5, 16, 15, (4, 4), (4, 4), (1, 1), (0, 0, 0, 0)),
    (2, 7, 11, 14, (3, 2), (1, 2), (2, 1), (2, 0, 1, 1)),
    (6, 4, 9, 9, (7, 7), (1, 1), (1, 1), (3, 3, 3, 3)),
    (3, 8, 10, 10, (3, 1), (3, 1), (1, 1), (1, 0, 0, 0)),
]


@pytest.mark.parametrize("case", range(len(DIRECT)))
def test_direct_geometries(rng, direct_everywhere, case):
    c, m, h, w, k, s, d, pads = DIRECT[case]
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((m, c, *k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    layer = _layer(strides=list(s), dilations=list(d), pads=list(pads), kernel_shape=list(k))
    close(kc.Conv(layer, [x, wt, b]), ref_conv(x, wt, b, list(s), list(pads), list(d), 1))
    assert layer._cpu_conv_plan.kind == "direct"
    close(kc.Conv(layer, [x, wt]), ref_conv(x, wt, None, list(s), list(pads), list(d), 1))


@pytest.mark.parametrize("act,post", [(ACT_NONE, ACT_RELU), (ACT_SILU, ACT_NONE)])
def test_direct_fused_epilogue(rng, direct_everywhere, act, post):
    x = rng.standard_normal((2, 5, 10, 9)).astype(np.float32)
    wt = rng.standard_normal((6, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    res = rng.standard_normal((2, 6, 10, 9)).astype(np.float32)
    layer = _layer(pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    y = ref_conv(x, wt, b, [1, 1], [1, 1, 1, 1], [1, 1], 1)
    y = (_silu(y) if act == ACT_SILU else y) + res
    y = np.maximum(y, 0) if post == ACT_RELU else y
    got = kc.conv(layer, [x, wt, b], act=None if act == ACT_NONE else (act, 0.0, 0.0), res=res,
                  post=(post, 0.0, 0.0))
    close(got, y)
    layer = _layer(pads=[1, 1, 1, 1], kernel_shape=[3, 3], activation="HardSigmoid",
                   activation_params=[0.3, 0.4])
    want = apply_activation(ref_conv(x, wt, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), "HardSigmoid",
                            [0.3, 0.4])
    close(kc.Conv(layer, [x, wt, b]), want)


def test_direct_nan_inf(rng, direct_everywhere):
    x = rng.standard_normal((2, 4, 12, 11)).astype(np.float32)
    wt = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    x[0, 1, 3, 4] = np.nan
    x[1, 2, 0, 10] = np.inf
    layer = _layer(pads=[1, 1, 1, 1], kernel_shape=[3, 3], activation="Relu")
    want = np.maximum(ref_conv(x, wt, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), 0)
    got = kc.Conv(layer, [x, wt, b])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    close(np.where(fin, got, 0), np.where(fin, want, 0))


def test_direct_rule(rng, monkeypatch):
    """Without the register-blocked kernel, DB's 24 -> 6 3x3 at 80x80 takes the direct
    kernel; 32 output channels do not."""
    from engine.backends.cpu import conv_blocked

    monkeypatch.setattr(conv_blocked, "ENABLED", False)
    for m, kind in ((6, "direct"), (32, "im2col")):
        x = rng.standard_normal((1, 24, 80, 80)).astype(np.float32)
        wt = rng.standard_normal((m, 24, 3, 3)).astype(np.float32)
        layer = _layer(pads=[1, 1, 1, 1], kernel_shape=[3, 3], strides=[2, 2] if m > 6 else [1, 1])
        got = kc.Conv(layer, [x, wt])
        assert layer._cpu_conv_plan.kind == kind
        strides = [2, 2] if m > 6 else [1, 1]
        close(got, ref_conv(x, wt, None, strides, [1, 1, 1, 1], [1, 1], 1))
