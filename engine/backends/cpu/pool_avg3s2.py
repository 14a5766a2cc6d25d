"""3x3 average pools with stride 2 (ShuffleNet's downsampling shortcuts) on the CPU
(``kernels_pool`` calls it for float32/float64).

Per output row one contiguous loop sums the window's valid input rows into a buffer that
holds the row's padding as zeros, one interleaved loop sums each output's three columns of
it, and one scales by the window's count (per row times per column). Every output column,
the edges included, goes through the same vector loops: the scheme of ``pool_max3s2`` (an
even/odd split and the edge windows one at a time) ran ShuffleNet's pools with padding 1
3-3.5x slower one thread (136 planes of 28 x 28 360 -> 117 us, 272 of 14 x 14 329 -> 98),
as fast without padding. Rows are indexed through the plane's 2-D view with row numbers that
cannot be negative, so no per-row views (reference counts) or negative-index tests sit in
the loops.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.pool_same import FAST
from engine.backends.cpu.spin import claim, helpers_back, open_gate


@njit(nogil=True, cache=True, fastmath=FAST)
def avg3s2(x, out, g, count_pad, r0, r1):
    """3x3/stride-2 average pool of planes r0:r1. x: (NC, H, W); out: (NC, oh, ow); ``g``:
    ph, pw and the explicit end pads eh, ew. The count is the window's positions inside the
    input, or with ``count_pad`` inside the input and its explicit pads (as onnxruntime: not
    the positions ``ceil_mode`` adds)."""
    ph, pw, eh, ew = g
    NC, H, W = x.shape
    _, oh, ow = out.shape
    zero, one = x.dtype.type(0), x.dtype.type(1)
    # column sums of the window rows, padded: v[i] holds column i - pw, zeros outside the
    # row, so output q is v[2q] + v[2q + 1] + v[2q + 2] for every q, edges included (one
    # contiguous pass down, one interleaved pass across)
    v = np.zeros(max(2 * ow + 1, W + pw) + 1, x.dtype)
    # 1 / columns of each output's window (NaN for a window of padding only, as 0 / 0)
    cinv = np.empty(ow, x.dtype)
    for q in range(ow):
        c0 = 2 * q - pw
        cols = min(c0 + 3, W + ew) - c0 if count_pad else min(c0 + 3, W) - max(c0, 0)
        cinv[q] = one / x.dtype.type(cols) if cols > 0 else (zero if count_pad else np.nan)
    for nc in range(r0, r1):
        xp, op = x[nc], out[nc]
        for y in range(oh):
            top = 2 * y - ph
            a0 = max(top, 0)
            k = min(top + 3, H) - a0  # valid input rows a0, a0 + 1, ...
            rows = min(top + 3, H + eh) - top if count_pad else k
            if k <= 0:  # a window of padding only (pads of 3): 0 / 0, or 0 / 9
                op[y, :] = zero if count_pad else np.nan
                continue
            if k == 3:
                for c in range(W):
                    v[pw + c] = xp[a0, c] + xp[a0 + 1, c] + xp[a0 + 2, c]
            elif k == 2:
                for c in range(W):
                    v[pw + c] = xp[a0, c] + xp[a0 + 1, c]
            else:
                for c in range(W):
                    v[pw + c] = xp[a0, c]
            rs = one / x.dtype.type(rows)  # (an int divisor would make it float64)
            # sums, then scales: in one loop the per-column scale kept LLVM from vectorising
            # the interleaved sums (2x slower)
            for q in range(ow):
                op[y, q] = v[2 * q] + v[2 * q + 1] + v[2 * q + 2]
            for q in range(ow):
                op[y, q] *= rs * cinv[q]


@njit(nogil=True, cache=True)
def avg3s2_claimed(gate, generation, polls, chunk, x, out, g, count_pad):
    """``avg3s2`` as a gated kernel (``threads.parallel_tasks``) over all planes."""
    open_gate(gate)
    n = x.shape[0]
    while True:
        r0 = claim(gate, generation, chunk, polls == 0)
        if r0 < 0:
            break
        avg3s2(x, out, g, count_pad, r0, min(n, r0 + chunk))
    if polls > 0:
        helpers_back(gate, polls)
