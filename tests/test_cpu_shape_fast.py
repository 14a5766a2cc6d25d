"""The CPU Shape kernel's direct path agrees with the generic shape inference for every
start/end the spec allows (negative, out of range, empty), and for scalars."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu.kernels_shape import Shape, _infer
from engine.model import Layer


@pytest.mark.parametrize("shape", [(), (7,), (2, 3, 4, 5)])
def test_shape_kernel_matches_shape_inference(shape):
    x = np.zeros(shape, np.float32)
    for start in (None, -10, -3, -1, 0, 1, 3, 4, 9):
        for end in (None, -10, -2, 0, 2, 4, 8):
            attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
            layer = Layer("s", "Shape", ["x"], ["y"], attrs, opset=21)
            got, want = Shape(layer, [x]), _infer(layer, [x]).value
            assert got.dtype == want.dtype == np.int64
            assert got.shape == want.shape and np.array_equal(got, want), (start, end)
