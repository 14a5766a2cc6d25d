"""``engine.backends.cpu.simd``'s register transpose against NumPy."""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.simd import vtranspose16


@njit(cache=False)
def _transpose(src, s0, ss, dst, d0, ds):
    vtranspose16(src, s0, ss, dst, d0, ds)


def test_transpose16_strided_blocks(rng):
    """A 16 x 16 block read at any offset and row pitch lands transposed at another, and
    nothing outside the destination block is touched."""
    src = rng.standard_normal(41 * 37).astype(np.float32)
    for s0, ss, d0, ds in ((0, 16, 0, 16), (5, 37, 3, 20), (7, 41, 0, 33)):
        dst = np.full(40 * 40, np.nan, np.float32)
        _transpose(src, s0, ss, dst, d0, ds)
        block = np.stack([src[s0 + r * ss:s0 + r * ss + 16] for r in range(16)])
        got = np.stack([dst[d0 + u * ds:d0 + u * ds + 16] for u in range(16)])
        np.testing.assert_array_equal(got, block.T)
        touched = np.zeros(dst.size, bool)
        for u in range(16):
            touched[d0 + u * ds:d0 + u * ds + 16] = True
        assert np.isnan(dst[~touched]).all()

