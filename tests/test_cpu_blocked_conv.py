"""The CPU's register-blocked direct convolution (``conv_blocked``) against float64 NumPy:
kernel sizes 2-7, strides 1-3, dilation, asymmetric padding, output widths and channel
counts that leave partial register tiles, batch 2, every fused epilogue (activation,
residual and the activation after it), NaN/Inf propagation, one and two threads, and the
rule that picks it."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu import conv_blocked, conv_plan
from engine.backends.cpu import kernels_conv as kc
from engine.backends.cpu.activation import ACT_NONE, ACT_RELU, ACT_SILU
from engine.passes.fusion import apply_activation
from tests.test_cpu_depthwise import _layer, _silu
from tests.test_cpu_kernels import close, ref_conv


@pytest.fixture
def blocked_everywhere(monkeypatch):
    """Route every ungrouped 2-D float32 Conv larger than 1x1 to ``conv_blocked`` (patchify
    ones too, which otherwise run on the dense kernel: tests/test_cpu_dense_conv.py)."""
    monkeypatch.setattr(conv_blocked, "wanted", lambda *a: True)
    monkeypatch.setattr(conv_plan, "DENSE_PATCHES", False)


BLOCKED = [  # (C, M, H, W, kernel, strides, dilations, pads)
    (3, 16, 15, 17, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    (5, 13, 12, 11, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    (4, 9, 13, 12, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),
    (3, 5, 16, 15, (4, 4), (4, 4), (1, 1), (0, 0, 0, 0)),
    (2, 7, 11, 14, (3, 2), (1, 2), (2, 1), (2, 0, 1, 1)),
    (6, 24, 9, 9, (7, 7), (1, 1), (1, 1), (3, 3, 3, 3)),
    (3, 8, 10, 10, (3, 1), (3, 1), (1, 1), (1, 0, 0, 0)),
    (3, 20, 29, 31, (7, 7), (2, 2), (1, 1), (3, 3, 3, 3)),
    (17, 33, 7, 7, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    (9, 8, 5, 3, (2, 2), (1, 1), (1, 1), (0, 0, 0, 0)),
    (2, 3, 6, 6, (3, 3), (1, 1), (2, 2), (2, 2, 2, 2)),
]


CONV1D = [  # (C, M, L, kernel, stride, dilation, pads): framing, strided, dilated, long
    (1, 32, 512, 32, 16, 1, (8, 8)),
    (32, 20, 32, 3, 2, 1, (1, 1)),
    (5, 9, 41, 5, 1, 2, (4, 1)),
    (8, 16, 300, 3, 1, 1, (1, 1)),
]


@pytest.mark.parametrize("case", range(len(CONV1D)))
def test_blocked_1d(rng, nthreads, case):
    """1-D convolutions run as one row of the 2-D kernel, epilogues included."""
    c, m, n, k, s, d, pads = CONV1D[case]
    x = rng.standard_normal((2, c, n)).astype(np.float32)
    wt = rng.standard_normal((m, c, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    layer = _layer(strides=[s], dilations=[d], pads=list(pads), kernel_shape=[k],
                   activation="Relu")
    want = ref_conv(x, wt, b, [s], list(pads), [d], 1)
    close(kc.Conv(layer, [x, wt, b]), np.maximum(want, 0))
    assert layer._cpu_conv_plan.kind == "blocked"
    res = rng.standard_normal(want.shape).astype(np.float32)
    layer = _layer(strides=[s], dilations=[d], pads=list(pads), kernel_shape=[k])
    got = kc.conv(layer, [x, wt, b], res=res, post=(ACT_RELU, 0.0, 0.0))
    close(got, np.maximum(want + res, 0))


@pytest.mark.parametrize("case", range(len(BLOCKED)))
def test_blocked_geometries(rng, blocked_everywhere, nthreads, case):
    c, m, h, w, k, s, d, pads = BLOCKED[case]
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((m, c, *k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    layer = _layer(strides=list(s), dilations=list(d), pads=list(pads), kernel_shape=list(k))
    close(kc.Conv(layer, [x, wt, b]), ref_conv(x, wt, b, list(s), list(pads), list(d), 1))
    assert layer._cpu_conv_plan.kind == "blocked"
    close(kc.Conv(layer, [x, wt]), ref_conv(x, wt, None, list(s), list(pads), list(d), 1))


def test_blocked_large_layer_splits_over_threads(rng, nthreads):
    """A layer large enough to be split into tasks (row blocks x channel blocks) on two
    threads, with a width that leaves a partial tile in every row block."""
    x = rng.standard_normal((1, 32, 45, 37)).astype(np.float32)
    wt = rng.standard_normal((70, 32, 3, 3)).astype(np.float32)
    b = rng.standard_normal(70).astype(np.float32)
    layer = _layer(pads=[1, 1, 1, 1], kernel_shape=[3, 3], activation="Relu")
    got = kc.Conv(layer, [x, wt, b])
    assert layer._cpu_conv_plan.kind == "blocked"
    close(got, np.maximum(ref_conv(x, wt, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), 0))


@pytest.mark.parametrize("name,params", [
    ("Relu", []), ("LeakyRelu", [0.1]), ("Clip", [-0.5, 0.7]), ("Sigmoid", []),
    ("HardSigmoid", [0.3, 0.4]), ("Tanh", []), ("HardSwish", []), ("Swish", [1.0])])
def test_blocked_activations(rng, blocked_everywhere, nthreads, name, params):
    x = rng.standard_normal((2, 6, 11, 13)).astype(np.float32)
    wt = rng.standard_normal((10, 6, 3, 3)).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    layer = _layer(pads=[1, 1, 1, 1], kernel_shape=[3, 3], strides=[2, 1], activation=name,
                   activation_params=params)
    want = apply_activation(ref_conv(x, wt, b, [2, 1], [1, 1, 1, 1], [1, 1], 1), name, params)
    close(kc.Conv(layer, [x, wt, b]), want)
    assert layer._cpu_conv_plan.kind == "blocked"


def fused_reference(y, act, res, post):
    """float64 ``post(act(y) + res)`` for the activation codes the fused tests use."""
    y = _silu(y) if act == ACT_SILU else np.maximum(y, 0) if act == ACT_RELU else y
    y = y + res
    return np.maximum(y, 0) if post == ACT_RELU else _silu(y) if post == ACT_SILU else y


@pytest.mark.parametrize("act,post", [(ACT_NONE, ACT_RELU), (ACT_SILU, ACT_NONE),
                                      (ACT_RELU, ACT_SILU)])
def test_blocked_fused_residual(rng, blocked_everywhere, nthreads, act, post):
    x = rng.standard_normal((2, 5, 10, 9)).astype(np.float32)
    wt = rng.standard_normal((11, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(11).astype(np.float32)
    res = rng.standard_normal((2, 11, 10, 9)).astype(np.float32)
    layer = _layer(pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    y = fused_reference(ref_conv(x, wt, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), act, res, post)
    got = kc.conv(layer, [x, wt, b], act=None if act == ACT_NONE else (act, 0.0, 0.0), res=res,
                  post=(post, 0.0, 0.0))
    assert layer._cpu_conv_plan.kind == "blocked"
    close(got, y)


def test_blocked_nan_inf(rng, blocked_everywhere):
    x = rng.standard_normal((2, 4, 12, 11)).astype(np.float32)
    wt = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    x[0, 1, 3, 4] = np.nan
    x[1, 2, 0, 10] = np.inf
    layer = _layer(pads=[1, 1, 1, 1], kernel_shape=[3, 3], activation="Relu")
    with np.errstate(invalid="ignore"):
        want = np.maximum(ref_conv(x, wt, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), 0)
    got = kc.Conv(layer, [x, wt, b])
    assert layer._cpu_conv_plan.kind == "blocked"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    close(np.where(fin, got, 0), np.where(fin, want, 0))


@pytest.mark.parametrize("c,m,side,kernel,strides,kind", [
    (16, 64, 55, 3, 1, "blocked"),    # squeezenet's expand 3x3
    (3, 64, 224, 7, 2, "blocked"),    # a 7x7 stride-2 stem
    (128, 32, 14, 3, 1, "blocked"),   # densenet's growth layers at 14x14
    (64, 64, 56, 3, 1, "winograd"),   # F(4,3) with 64 input channels
    (48, 96, 28, 3, 1, "blocked"),    # F(2,3) with few output channels
    (128, 192, 28, 3, 1, "winograd"),
    (64, 128, 28, 1, 2, "im2col"),    # strided 1x1
])
def test_blocked_rule(rng, c, m, side, kernel, strides, kind):
    x = rng.standard_normal((1, c, side, side)).astype(np.float32)
    wt = rng.standard_normal((m, c, kernel, kernel)).astype(np.float32)
    pads = [kernel // 2] * 4
    layer = _layer(pads=pads, kernel_shape=[kernel] * 2, strides=[strides] * 2)
    got = kc.Conv(layer, [x, wt])
    assert layer._cpu_conv_plan.kind == kind
    close(got, ref_conv(x, wt, None, [strides] * 2, pads, [1, 1], 1))
