"""Float32 global average pools of small planes, 16 values a step in registers.

``kernels_pool.global_pool`` sums a plane in float64 with a loop LLVM vectorises only for
its vector body (32 values a step): the 7 x 7 and 13 x 13 planes closing the zoo's CNNs ran
mostly scalar (ResNet-50's 2048 planes of 49 values 33.5 -> 28.4 us here, SqueezeNet's 1000
of 169 46.9 -> 36.5, one image, the flag alternated in one process). Here a plane is summed
as 16 float32 partial sums, added as a tree at the end (``simd.vsum``), its last values
one at a time. Each lane adds at most ``kernels_pool.VEC_GLOBAL_MAX / 16`` values, so the
float32 sum stays within ~1e-5 of the float64 one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.simd import LANES, vadd, vload, vsum, vzero


@njit(nogil=True, cache=True, error_model="numpy")
def global_avg_f32(xf, S, out, r0, r1):
    """Mean of each plane ``r0:r1`` of ``xf`` (planes of ``S`` values, flat) into ``out``."""
    scale = np.float32(1.0) / np.float32(S)
    for r in range(r0, r1):
        base = r * S
        acc = vzero()
        s = 0
        while s + LANES <= S:
            acc = vadd(acc, vload(xf, base + s))
            s += LANES
        total = vsum(acc)
        for t in range(s, S):
            total += xf[base + t]
        out[r] = total * scale
