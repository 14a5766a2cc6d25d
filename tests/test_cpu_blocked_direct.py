"""``conv_blocked``'s tiles stored straight into the output rows (``conv_blocked_direct``)
against float64 NumPy: row widths that end on each tile width and between them (the last
tile of a row moved back), strides, 1-D rows, no bias, ReLU and none, one and two threads,
and the rule that picks these tiles over the scratch block."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu import conv_blocked_direct as direct
from engine.backends.cpu import kernels_conv as kc
from engine.backends.cpu.activation import ACT_NONE, ACT_RELU, ACT_SILU
from tests.test_cpu_depthwise import _layer
from tests.test_cpu_kernels import close, ref_conv

CASES = [  # (C, M, H, W, kernel, stride, pad, activation): output widths 16 to 112
    (3, 16, 12, 16, 3, 1, 1, "Relu"),      # one 16-wide tile per row
    (3, 8, 10, 40, 3, 1, 1, None),         # 32 + 16 moved back by 8
    (2, 24, 7, 33, 3, 1, 1, "Relu"),       # 32 + 16 moved back by 15
    (4, 16, 9, 48, 3, 1, 1, None),         # one 48
    (2, 8, 6, 50, 5, 1, 2, "Relu"),        # 48 + 16 moved back by 14
    (3, 32, 40, 224, 3, 2, 0, "Relu"),     # a stem's 111: 48 + 48 + 16 moved back by 1
    (3, 16, 20, 223, 7, 2, 3, None),       # 112 from 223 columns, 7x7
    (2, 40, 11, 97, 3, 1, 1, "Relu"),      # 48 + 48 + 16 moved back by 15
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_direct_tiles_match_float64(rng, nthreads, case):
    c, m, h, w, k, s, p, act = CASES[case]
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((m, c, k, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    extra = {"activation": act} if act else {}
    layer = _layer(pads=[p] * 4, kernel_shape=[k, k], strides=[s, s], **extra)
    want = ref_conv(x, wt, b, [s, s], [p] * 4, [1, 1], 1)
    got = kc.Conv(layer, [x, wt, b])
    assert layer._cpu_conv_plan.kind == "blocked"
    assert direct.wanted(m, want.shape[3], c, k * k, ACT_RELU if act else ACT_NONE,
                         False, False)
    close(got, np.maximum(want, 0) if act else want)
    close(kc.Conv(layer, [x, wt]), np.maximum(want - b[:, None, None], 0) if act
          else want - b[:, None, None])


def test_direct_tiles_round_as_the_scratch_block(rng, monkeypatch):
    """The bias is added after the sums, as the scratch block's epilogue does: both paths
    give the same bits (a fused conv + pool and the unfused pair agree exactly)."""
    x = rng.standard_normal((1, 5, 30, 61)).astype(np.float32)
    wt = rng.standard_normal((16, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    runs = []
    for enabled in (True, False):
        monkeypatch.setattr(direct, "ENABLED", enabled)
        layer = _layer(pads=[1] * 4, kernel_shape=[3, 3], activation="Relu")
        runs.append(kc.Conv(layer, [x, wt, b]))
    np.testing.assert_array_equal(runs[0], runs[1])
    close(runs[0], np.maximum(ref_conv(x, wt, b, [1, 1], [1] * 4, [1, 1], 1), 0))


def test_direct_tiles_1d(rng, nthreads):
    """A speech model's framing convolution: one output row of 32."""
    x = rng.standard_normal((1, 1, 512)).astype(np.float32)
    wt = rng.standard_normal((32, 1, 32)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    layer = _layer(strides=[16], pads=[8, 8], kernel_shape=[32], activation="Relu")
    close(kc.Conv(layer, [x, wt, b]), np.maximum(ref_conv(x, wt, b, [16], [8, 8], [1], 1), 0))


def test_direct_tiles_nan_propagates(rng):
    x = rng.standard_normal((1, 3, 8, 40)).astype(np.float32)
    x[0, 1, 4, 20] = np.nan
    wt = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    layer = _layer(pads=[1] * 4, kernel_shape=[3, 3], activation="Relu")
    got = kc.Conv(layer, [x, wt])
    with np.errstate(invalid="ignore"):
        want = np.maximum(ref_conv(x, wt, None, [1, 1], [1] * 4, [1, 1], 1), 0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got).sum() == 9 * 8  # every channel, the 3x3 neighbourhood
    close(np.nan_to_num(got), np.nan_to_num(want))


@pytest.mark.parametrize("M,ow,C,T,act,res,pool,want", [
    (64, 111, 3, 9, ACT_RELU, False, False, True),    # stem
    (64, 112, 3, 49, ACT_NONE, False, False, True),   # 7x7 stem
    (64, 55, 3, 9, ACT_RELU, False, False, True),     # few taps: 9 wasted of 55 cost little
    (64, 55, 16, 9, ACT_RELU, False, False, False),   # more taps: they cost the scratch's pass
    (64, 111, 64, 9, ACT_RELU, False, False, True),   # one wasted of 111
    (64, 56, 64, 9, ACT_RELU, False, False, False),   # 64 computed for 56: scratch
    (64, 112, 512, 9, ACT_RELU, False, False, True),  # rows that end on whole tiles
    (60, 111, 3, 9, ACT_RELU, False, False, False),   # a partial channel block
    (64, 12, 3, 9, ACT_RELU, False, False, False),    # narrower than a tile
    (64, 111, 3, 9, ACT_SILU, False, False, False),   # other activations: the epilogue
    (64, 111, 3, 9, ACT_RELU, True, False, False),    # residual
    (64, 111, 3, 9, ACT_RELU, False, True, False),    # fused pool
])
def test_direct_rule(M, ow, C, T, act, res, pool, want):
    assert direct.wanted(M, ow, C, T, act, res, pool) is want


def test_row_width():
    assert [direct.row_width(w) for w in (16, 17, 32, 33, 40, 48, 50, 96, 111, 112)] == \
        [16, 32, 32, 48, 48, 48, 64, 96, 112, 112]
