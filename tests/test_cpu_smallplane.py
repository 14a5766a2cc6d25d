"""The CPU's channel-vectorised convolution for small output planes (``conv_smallplane``)
against float64 NumPy: 1x1 (read in place) and larger kernels, strides, padding, channel
counts that leave a partial 64-channel block, planes that leave a partial 6-position tile,
batch 2, fused epilogues, NaN propagation, one to three threads, and the rule picking it."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu import conv_pointwise, conv_smallplane, threads
from engine.backends.cpu import kernels_conv as kc
from engine.backends.cpu.activation import ACT_NONE, ACT_RELU, ACT_SILU
from engine.passes.fusion import apply_activation
from tests.test_cpu_blocked_conv import fused_reference
from tests.test_cpu_depthwise import _layer
from tests.test_cpu_kernels import close, ref_conv


@pytest.fixture(params=[1, 2, 3], ids=["1thread", "2threads", "3threads"])
def nthreads(request):
    before = threads.threads()
    threads.set_threads(request.param)
    yield request.param
    threads.set_threads(before)


@pytest.fixture
def smallplane_everywhere(monkeypatch):
    """Route every ungrouped 2-D float32 Conv to ``conv_smallplane`` (patchify layers
    included, which would otherwise run as 1x1 convolutions of their patches)."""
    monkeypatch.setattr(conv_smallplane, "wanted", lambda *a: True)
    monkeypatch.setattr(conv_pointwise, "PATCHES", False)


SMALL = [  # (C, M, H, W, kernel, strides, pads)
    (40, 64, 7, 7, (1, 1), (1, 1), (0, 0, 0, 0)),      # read in place
    (33, 100, 5, 9, (1, 1), (1, 1), (0, 0, 0, 0)),     # partial channel block, 45 positions
    (24, 70, 7, 7, (3, 3), (1, 1), (1, 1, 1, 1)),
    (17, 64, 13, 13, (3, 3), (1, 1), (1, 1, 1, 1)),    # 169 positions: a partial tile
    (20, 65, 14, 14, (3, 3), (2, 2), (1, 1, 1, 1)),    # stride 2 into 7x7
    (12, 64, 9, 8, (5, 3), (1, 1), (2, 1, 2, 1)),
    (30, 80, 14, 14, (1, 1), (2, 2), (0, 0, 0, 0)),    # strided 1x1 (a downsample)
    (150, 128, 4, 4, (3, 3), (1, 1), (1, 1, 1, 1)),    # several slices of the reduction
    (8, 64, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0)),       # one position
    (150, 96, 7, 7, (3, 3), (1, 1), (1, 1, 1, 1)),     # a 32-channel last block, sliced
    (16, 20, 6, 6, (3, 3), (1, 1), (1, 1, 1, 1)),      # only a 32-channel block
    (40, 160, 11, 3, (1, 1), (1, 1), (0, 0, 0, 0)),    # 33 positions: a partial tile of 8
]


@pytest.mark.parametrize("case", range(len(SMALL)))
def test_smallplane_geometries(rng, smallplane_everywhere, nthreads, case):
    c, m, h, w, k, s, pads = SMALL[case]
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((m, c, *k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    layer = _layer(strides=list(s), pads=list(pads), kernel_shape=list(k))
    close(kc.Conv(layer, [x, wt, b]), ref_conv(x, wt, b, list(s), list(pads), [1, 1], 1))
    assert layer._cpu_conv_plan.kind == "smallplane"
    close(kc.Conv(layer, [x, wt]), ref_conv(x, wt, None, list(s), list(pads), [1, 1], 1))


@pytest.mark.parametrize("name,params", [("Relu", []), ("Clip", [-0.5, 0.7]),
                                         ("HardSwish", []), ("Swish", [1.0])])
def test_smallplane_activations(rng, smallplane_everywhere, name, params):
    x = rng.standard_normal((2, 16, 7, 7)).astype(np.float32)
    wt = rng.standard_normal((72, 16, 3, 3)).astype(np.float32)
    b = rng.standard_normal(72).astype(np.float32)
    layer = _layer(pads=[1, 1, 1, 1], kernel_shape=[3, 3], activation=name,
                   activation_params=params)
    want = apply_activation(ref_conv(x, wt, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), name, params)
    close(kc.Conv(layer, [x, wt, b]), want)
    assert layer._cpu_conv_plan.kind == "smallplane"


@pytest.mark.parametrize("act,post", [(ACT_NONE, ACT_RELU), (ACT_SILU, ACT_NONE),
                                      (ACT_RELU, ACT_SILU)])
def test_smallplane_fused_residual(rng, smallplane_everywhere, nthreads, act, post):
    """The residual and the activation after it, on runs of positions that split planes
    (few channel blocks: each block's positions are spread over the threads)."""
    x = rng.standard_normal((2, 24, 13, 13)).astype(np.float32)
    wt = rng.standard_normal((64, 24, 1, 1)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    res = rng.standard_normal((2, 64, 13, 13)).astype(np.float32)
    layer = _layer(pads=[0, 0, 0, 0], kernel_shape=[1, 1])
    y = fused_reference(ref_conv(x, wt, b, [1, 1], [0, 0, 0, 0], [1, 1], 1), act, res, post)
    got = kc.conv(layer, [x, wt, b], act=None if act == ACT_NONE else (act, 0.0, 0.0), res=res,
                  post=(post, 0.0, 0.0))
    assert layer._cpu_conv_plan.kind == "smallplane"
    close(got, y)


def test_smallplane_nan(rng, smallplane_everywhere):
    x = rng.standard_normal((1, 8, 7, 7)).astype(np.float32)
    wt = rng.standard_normal((64, 8, 3, 3)).astype(np.float32)
    x[0, 3, 2, 5] = np.nan
    layer = _layer(pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    with np.errstate(invalid="ignore"):
        want = ref_conv(x, wt, None, [1, 1], [1, 1, 1, 1], [1, 1], 1)
    got = kc.Conv(layer, [x, wt])
    assert layer._cpu_conv_plan.kind == "smallplane"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    close(np.where(fin, got, 0), np.where(fin, want, 0))


@pytest.mark.parametrize("c,m,side,kernel,kind", [
    (512, 512, 7, 3, "smallplane"),   # resnet50's last stage
    (2048, 512, 7, 1, "smallplane"),
    (256, 256, 14, 3, "smallplane"),
    (256, 1024, 14, 1, "pointwise"),  # 1x1 on 14x14: sgemm
    (128, 32, 14, 3, "blocked"),      # too few output channels for a 14x14 plane
    (128, 32, 28, 3, "smallplane"),   # ... but not for a 28x28 one (densenet's growth)
    (64, 64, 28, 3, "smallplane"),    # 28x28 with enough input channels
    (32, 64, 28, 3, "blocked"),       # ... and with too few
    (48, 64, 40, 3, "blocked"),       # a larger plane
    (1024, 128, 7, 1, "smallplane"),  # 1x1 on 7x7 from 128K weights
    (832, 128, 7, 1, "pointwise"),    # ... fewer: sgemm
    (1024, 1000, 1, 1, "pointwise"),  # one position
])
def test_smallplane_rule(rng, c, m, side, kernel, kind):
    x = rng.standard_normal((1, c, side, side)).astype(np.float32)
    wt = (rng.standard_normal((m, c, kernel, kernel)) / np.sqrt(c * kernel)).astype(np.float32)
    pads = [kernel // 2] * 4
    layer = _layer(pads=pads, kernel_shape=[kernel] * 2)
    got = kc.Conv(layer, [x, wt])
    assert layer._cpu_conv_plan.kind == kind
    close(got, ref_conv(x, wt, None, [1, 1], pads, [1, 1], 1))


def test_smallplane_not_for_long_rows(rng):
    """A plane of few positions but long rows (a text recognizer's 1 x 80 after its pools)
    stays with the row-vector kernel."""
    x = rng.standard_normal((1, 64, 2, 80)).astype(np.float32)
    wt = (rng.standard_normal((64, 64, 2, 3)) / 20).astype(np.float32)
    layer = _layer(pads=[0, 1, 0, 1], kernel_shape=[2, 3])
    got = kc.Conv(layer, [x, wt])
    assert layer._cpu_conv_plan.kind == "blocked"
    close(got, ref_conv(x, wt, None, [1, 1], [0, 1, 0, 1], [1, 1], 1))
