"""2x2 pools with stride 2 and no padding over even-sized planes (DenseNet's transition
average pools, VGG/YOLO-style max pools) on the CPU (``kernels_pool`` calls it).

Column pairs are reduced in one flat pass over a block of rows (pairs never straddle a row,
the width being even), a contiguous stride-2 loop that LLVM vectorises with interleaved
loads; then each output row combines two rows of that result. Every window has its four
values, so the average is the sum times 0.25 (exact, as a division by 4 is).
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from engine.backends.cpu.pool_same import FAST, _mx

#: input values per block: the half-size scratch stays in L1/L2 with them
BLOCK = 16384


@njit(nogil=True, cache=True, fastmath=FAST)
def pool_halve(x, out, is_max, r0, r1):
    """2x2/stride-2 max or average of planes r0:r1. x: (NC, H, W) with H, W even; out:
    (NC, H // 2, W // 2). Offsets are unsigned so Numba drops its negative-index test in
    the row loop (with signed offsets the loop ran 4x slower)."""
    NC, H, W = x.shape
    ow = W // 2
    rows = (r1 - r0) * (H // 2)  # output rows of the chunk
    xf = x.reshape(NC * H * W)[r0 * H * W:r1 * H * W]
    of = out.reshape(NC * (H // 2) * ow)[r0 * (H // 2) * ow:r1 * (H // 2) * ow]
    per = max(1, BLOCK // (2 * W))  # output rows per block
    h = np.empty(2 * per * ow, x.dtype)
    q4 = np.full(1, 0.25, x.dtype)  # 0.25 in x's type (a float64 constant would widen)
    quarter = q4[0]
    for b0 in range(0, rows, per):
        nb = min(per, rows - b0)
        src = xf[2 * b0 * W:]
        n = 2 * nb * ow
        if is_max:
            for m in range(n):
                h[m] = _mx(src[2 * m], src[2 * m + 1])
        else:
            for m in range(n):
                h[m] = src[2 * m] + src[2 * m + 1]
        for r in range(nb):
            a = uint64(2 * r * ow)
            b = a + uint64(ow)
            z = uint64((b0 + r) * ow)
            if is_max:
                for q in range(ow):
                    u = uint64(q)
                    of[z + u] = _mx(h[a + u], h[b + u])
            else:
                for q in range(ow):
                    u = uint64(q)
                    of[z + u] = (h[a + u] + h[b + u]) * quarter
