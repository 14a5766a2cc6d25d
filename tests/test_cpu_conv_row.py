"""Small 1-D convolutions in one call (``conv_row``) against float64 NumPy: a speech model's
framing layers, output channels that leave a partial vector, output lengths that leave
steps past the last whole tile, dilation, asymmetric padding, every activation, NaN and
Inf, and the rule that sends larger layers and batches to ``conv_blocked``."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu import conv_blocked, conv_row
from engine.backends.cpu import kernels_conv as kc
from engine.passes.fusion import apply_activation
from tests.test_cpu_depthwise import _layer
from tests.test_cpu_kernels import close, ref_conv
from tests.test_nan_propagation import assert_ieee_equal

ROWS = [  # (C, M, L, kernel, stride, dilation, pads)
    (1, 32, 512, 32, 16, 1, (8, 8)),   # framing: 32 taps, stride 16
    (32, 32, 32, 3, 2, 1, (1, 1)),
    (3, 20, 37, 5, 1, 2, (3, 1)),      # 20 channels: a partial vector
    (7, 17, 50, 4, 3, 1, (0, 2)),      # 17 steps: 2 tiles and one step alone
    (4, 5, 9, 2, 1, 1, (0, 0)),        # fewer steps than a tile
]


def _run(rng, case, name="Relu", params=()):
    c, m, n, k, s, d, pads = case
    x = rng.standard_normal((1, c, n)).astype(np.float32)
    wt = rng.standard_normal((m, c, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    layer = _layer(strides=[s], dilations=[d], pads=list(pads), kernel_shape=[k],
                   activation=name, activation_params=list(params))
    want = apply_activation(ref_conv(x, wt, b, [s], list(pads), [d], 1), name, list(params))
    return layer, x, wt, b, want


@pytest.mark.parametrize("case", range(len(ROWS)))
def test_row_conv_matches_float64(rng, case):
    layer, x, wt, b, want = _run(rng, ROWS[case])
    for _ in range(2):  # the second call takes the kept plan
        close(kc.Conv(layer, [x, wt, b]), want)
    assert layer._cpu_conv_plan.alone[0] is conv_row.conv_row


@pytest.mark.parametrize("name,params", [
    ("Relu", []), ("LeakyRelu", [0.1]), ("Clip", [-0.5, 0.7]), ("Sigmoid", []),
    ("HardSigmoid", [0.3, 0.4]), ("Tanh", []), ("HardSwish", []), ("Swish", [1.0])])
def test_row_conv_activations(rng, name, params):
    layer, x, wt, b, want = _run(rng, ROWS[2], name, params)
    close(kc.Conv(layer, [x, wt, b]), want)
    assert layer._cpu_conv_plan.alone[0] is conv_row.conv_row


def test_row_conv_without_bias(rng):
    c, m, n, k, s, d, pads = ROWS[3]
    x = rng.standard_normal((1, c, n)).astype(np.float32)
    wt = rng.standard_normal((m, c, k)).astype(np.float32)
    layer = _layer(strides=[s], dilations=[d], pads=list(pads), kernel_shape=[k])
    close(kc.Conv(layer, [x, wt]), ref_conv(x, wt, np.zeros(m), [s], list(pads), [d], 1))
    assert layer._cpu_conv_plan.alone[0] is conv_row.conv_row


def test_row_conv_nan_and_inf(rng):
    c, m, n, k, s, d, pads = ROWS[3]
    x = rng.standard_normal((1, c, n)).astype(np.float32)
    wt = rng.standard_normal((m, c, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    x[0, 1, 5], x[0, 3, 20], wt[4, 2, 1] = np.nan, np.inf, -np.inf
    layer = _layer(strides=[s], dilations=[d], pads=list(pads), kernel_shape=[k])
    got = kc.Conv(layer, [x, wt, b])
    assert layer._cpu_conv_plan.alone[0] is conv_row.conv_row
    with np.errstate(invalid="ignore"):
        want = ref_conv(x, wt, b, [s], list(pads), [d], 1)
    assert np.isnan(got).any() and np.isinf(got).any()
    assert_ieee_equal(got, want.astype(np.float32), rtol=1e-4, what="row conv")


def test_larger_layers_and_batches_stay_blocked(rng):
    c, m, n, k = 16, 64, 200, 7
    assert c * m * k * n > conv_row.MAX_MACS
    for batch, length in ((1, n), (2, 30)):
        x = rng.standard_normal((batch, c, length)).astype(np.float32)
        wt = rng.standard_normal((m, c, k)).astype(np.float32)
        b = rng.standard_normal(m).astype(np.float32)
        layer = _layer(strides=[1], dilations=[1], pads=[3, 3], kernel_shape=[k])
        close(kc.Conv(layer, [x, wt, b]), ref_conv(x, wt, b, [1], [3, 3], [1], 1))
        alone = layer._cpu_conv_plan.alone
        assert alone is None or alone[0] is conv_blocked.blocked_alone


def test_kept_plan_is_taken_only_for_the_same_call(rng):
    """``Conv``'s shortcut to a kept one-call plan: other weights, no bias, a strided input
    or another length each get their own result, not the kept plan's."""
    layer, x, wt, b, want = _run(rng, ROWS[1])
    close(kc.Conv(layer, [x, wt, b]), want)
    close(kc.Conv(layer, [x * 2, wt, b]), _run_ref(x * 2, wt, b, layer))
    wt2 = rng.standard_normal(wt.shape).astype(np.float32)
    close(kc.Conv(layer, [x, wt2, b]), _run_ref(x, wt2, b, layer))
    close(kc.Conv(layer, [x, wt2]), _run_ref(x, wt2, np.zeros(len(b)), layer))
    wide = rng.standard_normal((1, x.shape[1], 2 * x.shape[2])).astype(np.float32)
    strided = wide[:, :, ::2]
    close(kc.Conv(layer, [strided, wt2, b]), _run_ref(strided, wt2, b, layer))
    close(kc.Conv(layer, [wide, wt2, b]), _run_ref(wide, wt2, b, layer))


def _run_ref(x, wt, b, layer):
    s, d, pads = layer.attr("strides"), layer.attr("dilations"), layer.attr("pads")
    return apply_activation(ref_conv(x, wt, b, s, pads, d, 1), "Relu", [])
