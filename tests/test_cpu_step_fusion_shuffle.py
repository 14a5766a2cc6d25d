"""ShuffleNet's grouped 1x1 Conv -> channel shuffle (Reshape, Transpose, Reshape), written
shuffled by the Conv itself (``step_fusion_shuffle``), against onnxruntime on fresh random
data."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.test_cpu_step_fusion import _check, _model


def _shuffle_model(rng, c, side, group=4, shuffle_groups=4, perm=(0, 2, 1, 3, 4), batch=1,
                   then_depthwise=False):
    """Conv (c -> c, 1x1, ``group``; Relu) -> Reshape (N, g, c/g, H, W) -> Transpose
    ``perm`` -> Reshape (N, c, H, W) [-> depthwise 3x3], the Reshapes' shapes written with
    0 and -1 as exporters write them."""
    inits = {"w": rng.normal(0, 0.3, (c, c // group, 1, 1)).astype(np.float32),
             "b": rng.normal(0, 0.3, c).astype(np.float32),
             "split": np.array([0, shuffle_groups, -1, side, side], np.int64),
             "merge": np.array([0, -1, side, side], np.int64),
             "wd": rng.normal(0, 0.3, (c, 1, 3, 3)).astype(np.float32)}
    last = "s" if then_depthwise else "y"
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], kernel_shape=[1, 1],
                              group=group),
             helper.make_node("Relu", ["t"], ["r"]),
             helper.make_node("Reshape", ["r", "split"], ["r5"]),
             helper.make_node("Transpose", ["r5"], ["t5"], perm=list(perm)),
             helper.make_node("Reshape", ["t5", "merge"], [last])]
    if then_depthwise:
        nodes.append(helper.make_node("Conv", ["s", "wd"], ["y"], kernel_shape=[3, 3],
                                      pads=[1, 1, 1, 1], group=c))
    x = rng.normal(0, 1, (batch, c, side, side)).astype(np.float32)
    return _model(nodes, inits, x_shape=x.shape), {"x": x}


@pytest.mark.parametrize("c,side,batch", [(8, 9, 1), (8, 9, 2), (128, 40, 1), (136, 28, 2)])
def test_grouped_conv_writes_the_shuffle(rng, c, side, batch):
    """Small layers (one stacked product) and large ones (products split over the threads),
    one image and two: one fused step, onnxruntime's result."""
    proto, feeds = _shuffle_model(rng, c, side, batch=batch)
    _check(proto, feeds, 1)


def test_shuffle_feeding_a_depthwise_conv(rng):
    proto, feeds = _shuffle_model(rng, 112, 14, then_depthwise=True)
    _check(proto, feeds, 1)


def test_shuffle_of_other_groups_runs_unfused(rng):
    """Two shuffle groups after a 4-group Conv: the step is planned but declines when it
    sees the shapes, and the layers run one by one."""
    proto, feeds = _shuffle_model(rng, 16, 9, shuffle_groups=2)
    _check(proto, feeds, 1)


def test_other_transposes_are_not_fused(rng):
    proto, feeds = _shuffle_model(rng, 16, 9, perm=(0, 1, 2, 4, 3))
    _check(proto, feeds, 0)


def test_ungrouped_conv_is_not_fused(rng):
    proto, feeds = _shuffle_model(rng, 16, 9, group=1)
    _check(proto, feeds, 0)
