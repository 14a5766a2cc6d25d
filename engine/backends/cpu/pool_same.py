"""Stride-1 2-D pools whose output has the input's size (3x3 with pads 1, the pools of the
Inception branches), computed over whole runs of planes at once (``kernels_pool`` calls it).

Numba loops of a few dozen values (one row of a 7x7 or 14x14 plane) cost more in loop set-up
and scalar remainders than in arithmetic, so the window is reduced in long flat passes over
all planes of a chunk: each vertical tap is one pass over the flat data shifted by whole rows,
each horizontal tap one pass shifted by columns. Values a flat pass takes from a neighbouring
row or plane are then replaced: the first/last rows of each plane by short passes over
their valid rows, the first/last columns of each row one value at a time, both through 2-D
views of the chunk. Max pools use the plain vector max unless the chunk holds a NaN (one
flat scan). On one thread (AMD EPYC), against per-row views and the NaN-propagating max
everywhere: 3x3 max pools of 1024 planes of 7 x 7 79 -> 30 us, 576 of 14 x 14 62 -> 47 us,
192 of 28 x 28 68 -> 53 us; averages 66 -> 30, 80 -> 50, 74 -> 56 us.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.spin import claim, helpers_back, open_gate

#: fast-math without "nnan"/"ninf", which would let LLVM drop the NaN tests of the max
FAST = {"nsz", "arcp", "contract", "afn", "reassoc"}


@njit(nogil=True, cache=True, inline="always")
def _mx(a, b):
    """IEEE 754-2019 ``maximum`` (NaN if either is NaN) as two selects, so loops of it
    vectorise (``a if a > b or a != a else b`` branches)."""
    m = a if a > b else b
    return a if a != a else m


@njit(nogil=True, cache=True, inline="always")
def _mp(a, b):
    """``max`` as one vector instruction: ``b`` if either is NaN (for inputs without NaN)."""
    return a if a > b else b


@njit(nogil=True, cache=True, inline="always")
def _op(a, b, mode):
    """Sum (``mode`` 0), IEEE max (1) or plain max (2)."""
    if mode == 0:
        return a + b
    if mode == 1:
        return _mx(a, b)
    return _mp(a, b)


@njit(nogil=True, cache=True, inline="always")
def _acc(dst, src, n, mode):
    """dst[:n] = dst op src (``_op``), one loop per mode."""
    if mode == 1:
        for t in range(n):
            dst[t] = _mx(dst[t], src[t])
    elif mode == 2:
        for t in range(n):
            dst[t] = _mp(dst[t], src[t])
    else:
        for t in range(n):
            dst[t] += src[t]


@njit(nogil=True, cache=True, inline="always")
def _three(dst, a, b, c, n, mode):
    """dst[:n] = a op b op c: the three taps of a 3-wide window in one pass."""
    if mode == 1:
        for t in range(n):
            dst[t] = _mx(_mx(a[t], b[t]), c[t])
    elif mode == 2:
        for t in range(n):
            dst[t] = _mp(_mp(a[t], b[t]), c[t])
    else:
        for t in range(n):
            dst[t] = a[t] + b[t] + c[t]


@njit(nogil=True, cache=True, fastmath=FAST)
def _has_nan(xf, n):
    bad = False
    for t in range(n):
        bad |= xf[t] != xf[t]
    return bad


@njit(nogil=True, cache=True, fastmath=FAST, error_model="numpy")
def pool_same(x, out, g, is_max, count_pad, r0, r1):
    """Max/average pool of planes r0:r1 with stride 1, dilation 1 and kh = ph + eh + 1,
    kw = pw + ew + 1 (so oh, ow = H, W). x, out: (NC, H, W); ``g``: kh, kw, ph, pw, eh, ew.
    Averages divide by the in-input (or, with ``count_pad``, all) taps of each window (a
    multiply by the reciprocal: a vector divide cost a third of the kernel's time).
    Planes go in blocks of about 8K values, so the vertical pass's scratch stays in L1."""
    kh, kw, ph, pw, eh, ew = g
    NC, H, W = x.shape
    HW = H * W
    B = max(1, 8192 // HW)
    # averages: the reciprocals for a whole block of planes, so the scaling is one flat pass
    # (max pools need none)
    inv = np.empty(0 if is_max else B * HW, x.dtype)
    if not is_max:
        for y in range(H):
            cy = kh if count_pad else min(y + eh, H - 1) - max(y - ph, 0) + 1
            for q in range(W):
                cx = kw if count_pad else min(q + ew, W - 1) - max(q - pw, 0) + 1
                inv[y * W + q] = 1.0 / (cy * cx)
        for p in range(1, B):
            for j in range(HW):
                inv[p * HW + j] = inv[j]
    v = np.empty(B * HW, x.dtype)
    for b0 in range(r0, r1, B):
        _block(x, out, v, g, inv, is_max, b0, min(b0 + B, r1))


@njit(nogil=True, cache=True, fastmath=FAST, error_model="numpy")
def _block(x, out, v, g, inv, is_max, r0, r1):
    """``pool_same`` of planes r0:r1, v: scratch of (r1 - r0) * H * W values. Max pools of
    blocks without NaN use the plain vector max (the NaN-propagating one took twice as
    long); the fix-ups of edge rows and columns index 2-D views (per-row views and their
    reference counts were most of the time on 7 x 7 planes)."""
    kh, kw, ph, pw, eh, ew = g
    NC, H, W = x.shape
    HW = H * W
    n = r1 - r0
    T = n * HW
    xf = x.reshape(NC * HW)[r0 * HW:r1 * HW]
    of = out.reshape(NC * HW)[r0 * HW:r1 * HW]
    vf = v[:T]
    mode = 0
    if is_max:
        mode = 1 if _has_nan(xf, T) else 2
    # vertical taps over the flat chunk: row offset a takes row y + a
    if ph == 1 and eh == 1 and T > 2 * W:
        _three(vf[W:], xf, xf[W:], xf[2 * W:], T - 2 * W, mode)
    else:
        for t in range(T):
            vf[t] = xf[t]
        for a in range(1, ph + 1):
            _acc(vf[a * W:], xf, T - a * W, mode)
        for a in range(1, eh + 1):
            _acc(vf, xf[a * W:], T - a * W, mode)
    # each plane's first ph and last eh rows took rows of the next/previous plane: redo them
    x3, v3 = xf.reshape(n, H, W), vf.reshape(n, H, W)
    if ph == 1 and eh == 1 and H > 1:
        for p in range(n):
            for t in range(W):
                v3[p, 0, t] = _op(x3[p, 0, t], x3[p, 1, t], mode)
            for t in range(W):
                v3[p, H - 1, t] = _op(x3[p, H - 2, t], x3[p, H - 1, t], mode)
        n_fix = 0
    else:
        n_fix = n
    for p in range(n_fix):
        for y in range(H):
            if ph <= y < H - eh:
                continue
            lo, hi = max(y - ph, 0), min(y + eh, H - 1)
            for t in range(W):
                m = x3[p, lo, t]
                for r in range(lo + 1, hi + 1):
                    m = _op(m, x3[p, r, t], mode)
                v3[p, y, t] = m
    # horizontal taps, the same way, into the output
    if pw == 1 and ew == 1 and T > 2:
        _three(of[1:], vf, vf[1:], vf[2:], T - 2, mode)
    else:
        for t in range(T):
            of[t] = vf[t]
        for b in range(1, pw + 1):
            _acc(of[b:], vf, T - b, mode)
        for b in range(1, ew + 1):
            _acc(of, vf[b:], T - b, mode)
    # each row's first pw and last ew columns took values of the neighbouring rows
    v2, o2 = vf.reshape(n * H, W), of.reshape(n * H, W)
    nrows = n * H
    if pw == 1 and ew == 1 and W > 1:
        for r in range(nrows):
            o2[r, 0] = _op(v2[r, 0], v2[r, 1], mode)
            o2[r, W - 1] = _op(v2[r, W - 2], v2[r, W - 1], mode)
        nrows = 0
    for r in range(nrows):
        for q in range(min(pw, W)):
            m = v2[r, 0]
            for c in range(1, min(q + ew, W - 1) + 1):
                m = _op(m, v2[r, c], mode)
            o2[r, q] = m
        for q in range(max(W - ew, min(pw, W)), W):
            lo = max(q - pw, 0)
            m = v2[r, lo]
            for c in range(lo + 1, W):
                m = _op(m, v2[r, c], mode)
            o2[r, q] = m
    if is_max:
        return
    # averages: divide by the window's tap count, the same for every plane
    for j in range(T):
        of[j] = of[j] * inv[j]


@njit(nogil=True, cache=True)
def pool_same_claimed(gate, generation, polls, chunk, x, out, g, is_max, count_pad):
    """``pool_same`` as a gated kernel (``threads.parallel_tasks``) over all planes."""
    open_gate(gate)
    n = x.shape[0]
    while True:
        r0 = claim(gate, generation, chunk, polls == 0)
        if r0 < 0:
            break
        pool_same(x, out, g, is_max, count_pad, r0, min(n, r0 + chunk))
    if polls > 0:
        helpers_back(gate, polls)
