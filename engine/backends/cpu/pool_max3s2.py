"""3x3 max pools with stride 2 (the downsampling pools of SqueezeNet, Inception, ResNet and
DenseNet stems) on the CPU (``kernels_pool`` calls it for float32/float64 without indices).

Per output row one loop takes the maximum of the window's input rows (the last one repeated
when the padding leaves fewer than three: a repeat changes no maximum) split into its even
and odd columns, one loop the maximum of each output's three columns of that, contiguous in
the split. Both use plain vector maxima and test the rows for NaN on the way; a row holding
one is redone with the NaN-propagating maximum. Rows are indexed through the plane's 2-D
view with row numbers that cannot be negative, so Numba's negative-index test and the
reference counts of per-row views stay out of the loops (per-row views, the NaN-propagating
maximum everywhere and reading columns 2t, 2t + 1, 2t + 2 of one row made this kernel 1.8x
(64 planes of 111 x 111) to 2.4x (256 of 27 x 27) slower; the general row kernel's runtime
kernel size, padded buffer and pass per tap another 1.5x). Pools whose windows reach past a
row's edges (padding, or an even row with an end pad) go through ``_with_edges`` instead,
which holds the padding in the row buffer so the edges need no windows of their own.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.pool_same import FAST, _mx
from engine.backends.cpu.spin import claim, helpers_back, open_gate


@njit(nogil=True, cache=True, inline="always")
def _mp(a, b):
    """``max`` as one vector max instruction: ``b`` if either is NaN (callers check)."""
    return a if a > b else b


@njit(nogil=True, cache=True, inline="always")
def _at(ev, od, c):
    """Column ``c`` of a row split into its even (``ev``) and odd (``od``) columns."""
    return ev[c // 2] if c % 2 == 0 else od[c // 2]


@njit(nogil=True, cache=True, inline="always")
def _window_rows(y, ph, H):
    """The input rows of output row ``y``'s window (a0, b0, c0: the last one repeated when the
    padding leaves fewer than three, which changes no maximum) and how many are valid (k)."""
    a0 = max(2 * y - ph, 0)
    k = min(2 * y - ph + 3, H) - a0
    return a0, a0 + max(min(k - 1, 1), 0), a0 + max(k - 1, 0), k


@njit(nogil=True, cache=True, fastmath=FAST)
def _with_edges(x, out, g, r0, r1):
    """``max3s2`` for pools with windows over a row's edges: the window rows' maximum per
    column goes into a buffer that holds the row's padding as -inf, so every output column,
    the edges included, is the same interleaved three-column maximum. The edge windows one
    at a time (below) made Inception's pools with an end pad on even rows 1.3-3.6x slower
    one thread (320 planes of 28 x 28 394 -> 144 us, 576 of 14 x 14 348 -> 96 us); without
    edge windows (SqueezeNet's odd rows) the even/odd split is 1.2-1.5x faster."""
    ph, pw, eh, ew = g
    NC, H, W = x.shape
    _, oh, ow = out.shape
    v = np.full(max(2 * ow + 1, W + pw) + 1, -np.inf, x.dtype)  # v[i]: column i - pw
    for nc in range(r0, r1):
        xp, op = x[nc], out[nc]
        for y in range(oh):
            a0, b0, c0, k = _window_rows(y, ph, H)
            if k <= 0:
                op[y, :] = -np.inf
                continue
            bad = False
            for c in range(W):
                a, b, d = xp[a0, c], xp[b0, c], xp[c0, c]
                bad |= (a != a) | (b != b) | (d != d)
                v[pw + c] = _mp(_mp(a, b), d)
            if bad:
                for c in range(W):
                    v[pw + c] = _mx(_mx(xp[a0, c], xp[b0, c]), xp[c0, c])
                for q in range(ow):
                    op[y, q] = _mx(_mx(v[2 * q], v[2 * q + 1]), v[2 * q + 2])
            else:
                for q in range(ow):
                    op[y, q] = _mp(_mp(v[2 * q], v[2 * q + 1]), v[2 * q + 2])


@njit(nogil=True, cache=True, fastmath=FAST)
def max3s2(x, out, g, r0, r1):
    """3x3/stride-2 max pool of planes r0:r1. x: (NC, H, W); out: (NC, oh, ow); ``g``: ph,
    pw and the explicit end pads eh, ew. A window of padding only gives -inf; a NaN in a
    window gives NaN (IEEE ``maximum``)."""
    ph, pw, eh, ew = g
    NC, H, W = x.shape
    _, oh, ow = out.shape
    # output columns whose window lies inside the row: q0 <= q < q1
    q0 = max(min((pw + 1) // 2, ow), 0)
    q1 = max(min(ow, (W - 3 + pw) // 2 + 1), q0)
    if q0 > 0 or q1 < ow:
        _with_edges(x, out, g, r0, r1)
        return
    W2 = W // 2
    s = 2 * q0 - pw  # the first input column of output q0's window
    j, n = s // 2, q1 - q0
    # the window rows' maximum, split into even and odd columns in one pass over column
    # pairs (LLVM vectorises the pair as an interleaved group), as plain vector maxima with
    # a NaN test; a row holding a NaN is redone with the NaN-propagating max, which in
    # every step ran this pool 1.6x slower. The loops stay in this function over row views
    # (helpers taking views or flat offsets ran 2.5-7x slower: reference counts, index
    # wrap-around tests)
    ev = np.empty(W2 + 2, x.dtype)
    od = np.empty(W2 + 2, x.dtype)
    # output q0 + t takes columns s + 2t, s + 2t + 1, s + 2t + 2
    if s % 2 == 0:
        hp, hq, hr = ev[j:], od[j:], ev[j + 1:]
    else:
        hp, hq, hr = od[j:], ev[j + 1:], od[j + 1:]
    for nc in range(r0, r1):
        xp, op = x[nc], out[nc]
        for y in range(oh):
            a0, b0, c0, k = _window_rows(y, ph, H)
            if k <= 0:
                op[y, :] = -np.inf
                continue
            bad = False
            for t in range(W2):
                a, b, c = xp[a0, 2 * t], xp[b0, 2 * t], xp[c0, 2 * t]
                d, e, f = xp[a0, 2 * t + 1], xp[b0, 2 * t + 1], xp[c0, 2 * t + 1]
                bad |= (a != a) | (b != b) | (c != c) | (d != d) | (e != e) | (f != f)
                ev[t] = _mp(_mp(a, b), c)
                od[t] = _mp(_mp(d, e), f)
            if W % 2 == 1:
                a, b, c = xp[a0, W - 1], xp[b0, W - 1], xp[c0, W - 1]
                bad |= (a != a) | (b != b) | (c != c)
                ev[W2] = _mp(_mp(a, b), c)
            if bad:
                for t in range(W2):
                    ev[t] = _mx(_mx(xp[a0, 2 * t], xp[b0, 2 * t]), xp[c0, 2 * t])
                    od[t] = _mx(_mx(xp[a0, 2 * t + 1], xp[b0, 2 * t + 1]), xp[c0, 2 * t + 1])
                if W % 2 == 1:
                    ev[W2] = _mx(_mx(xp[a0, W - 1], xp[b0, W - 1]), xp[c0, W - 1])
                for t in range(n):
                    op[y, q0 + t] = _mx(_mx(hp[t], hq[t]), hr[t])
            else:
                for t in range(n):
                    op[y, q0 + t] = _mp(_mp(hp[t], hq[t]), hr[t])
            for q in range(q0):  # windows over the left edge, then the right one
                m = _at(ev, od, 0)
                for c in range(1, min(2 * q - pw + 3, W)):
                    m = _mx(m, _at(ev, od, c))
                op[y, q] = m
            for q in range(q1, ow):
                c0 = 2 * q - pw
                m = -np.inf
                for c in range(max(c0, 0), min(c0 + 3, W)):
                    m = _mx(m, _at(ev, od, c))
                op[y, q] = m


@njit(nogil=True, cache=True)
def max3s2_claimed(gate, generation, polls, chunk, x, out, g):
    """``max3s2`` as a gated kernel (``threads.parallel_tasks``) over all planes."""
    open_gate(gate)
    n = x.shape[0]
    while True:
        r0 = claim(gate, generation, chunk, polls == 0)
        if r0 < 0:
            break
        max3s2(x, out, g, r0, min(n, r0 + chunk))
    if polls > 0:
        helpers_back(gate, polls)
