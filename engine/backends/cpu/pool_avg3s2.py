"""3x3 average pools with stride 2 (ShuffleNet's downsampling shortcuts) on the CPU
(``kernels_pool`` calls it for float32/float64).

The row scheme of ``pool_max3s2``: per output row one loop sums the window's valid input rows
split into their even and odd columns (one pass over column pairs), one loop sums each
output's three columns of that, contiguous in the split, and scales by the window's count.
Rows are indexed through the plane's 2-D view with row numbers that cannot be negative, so
no per-row views (reference counts) or negative-index tests sit in the loops. Against the
general row kernel (a padded buffer and a pass per tap), two threads: 24 planes of 56 x 56
76 -> 41 us, 136 of 28 x 28 140 -> 131 us; shorter rows stay there (272 of 14 x 14 ran
1.7x slower here: row loops too short for whole vectors).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.pool_max3s2 import _at
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
    q0 = max(min((pw + 1) // 2, ow), 0)
    q1 = max(min(ow, (W - 3 + pw) // 2 + 1), q0)
    W2 = W // 2
    s = 2 * q0 - pw  # the first input column of output q0's window
    j, n = s // 2, q1 - q0
    ev = np.zeros(W2 + 2, x.dtype)
    od = np.zeros(W2 + 2, x.dtype)
    # output q0 + t takes columns s + 2t, s + 2t + 1, s + 2t + 2
    if s % 2 == 0:
        hp, hq, hr = ev[j:], od[j:], ev[j + 1:]
    else:
        hp, hq, hr = od[j:], ev[j + 1:], od[j + 1:]
    one = x.dtype.type(1)
    zero = x.dtype.type(0)
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
            b0 = a0 + min(k - 1, 1)
            c0 = a0 + max(k - 1, 0)
            if k == 3:
                for t in range(W2):
                    ev[t] = xp[a0, 2 * t] + xp[b0, 2 * t] + xp[c0, 2 * t]
                    od[t] = xp[a0, 2 * t + 1] + xp[b0, 2 * t + 1] + xp[c0, 2 * t + 1]
                if W % 2 == 1:
                    ev[W2] = xp[a0, W - 1] + xp[b0, W - 1] + xp[c0, W - 1]
            elif k == 2:
                for t in range(W2):
                    ev[t] = xp[a0, 2 * t] + xp[b0, 2 * t]
                    od[t] = xp[a0, 2 * t + 1] + xp[b0, 2 * t + 1]
                if W % 2 == 1:
                    ev[W2] = xp[a0, W - 1] + xp[b0, W - 1]
            else:
                for t in range(W2):
                    ev[t] = xp[a0, 2 * t]
                    od[t] = xp[a0, 2 * t + 1]
                if W % 2 == 1:
                    ev[W2] = xp[a0, W - 1]
            scale = one / (3 * rows)
            for t in range(n):
                op[y, q0 + t] = (hp[t] + hq[t] + hr[t]) * scale
            for q in range(q0):  # windows over the left edge, then the right one
                _edge(ev, od, op, y, q, pw, ew, W, rows, count_pad, zero)
            for q in range(q1, ow):
                _edge(ev, od, op, y, q, pw, ew, W, rows, count_pad, zero)


@njit(nogil=True, cache=True, fastmath=FAST, inline="always")
def _edge(ev, od, op, y, q, pw, ew, W, rows, count_pad, zero):
    """Output column ``q`` whose window reaches past the row's first or last column."""
    c0 = 2 * q - pw
    acc = zero
    for c in range(max(c0, 0), min(c0 + 3, W)):
        acc += _at(ev, od, c)
    cols = min(c0 + 3, W + ew) - c0 if count_pad else min(c0 + 3, W) - max(c0, 0)
    op[y, q] = acc / (rows * cols) if cols > 0 else (zero if count_pad else np.nan)


@njit(nogil=True, cache=True)
def avg3s2_claimed(gate, generation, polls, chunk, x, out, g, count_pad):
    """``avg3s2`` as a gated kernel (``threads.parallel_tasks``) over all planes."""
    open_gate(gate)
    n = x.shape[0]
    while True:
        r0 = claim(gate, generation, chunk)
        if r0 < 0:
            break
        avg3s2(x, out, g, count_pad, r0, min(n, r0 + chunk))
    if polls > 0:
        helpers_back(gate, polls)
