"""Stride-1 2-D pools whose output has the input's size (3x3 with pads 1, the pools of the
Inception branches), computed over whole runs of planes at once (``kernels_pool`` calls it).

Numba loops of a few dozen values (one row of a 7x7 or 14x14 plane) cost more in loop set-up
and scalar remainders than in arithmetic, so the window is reduced in long flat passes over
all planes of a chunk: each vertical tap is one pass over the flat data shifted by whole rows,
each horizontal tap one pass shifted by columns. Values a flat pass takes from a neighbouring
row or plane are then replaced: the first/last rows of each plane by short passes over
their valid rows, the first/last columns of each row one value at a time.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: fast-math without "nnan"/"ninf", which would let LLVM drop the NaN tests of the max
FAST = {"nsz", "arcp", "contract", "afn", "reassoc"}


@njit(nogil=True, cache=True, inline="always")
def _mx(a, b):
    """IEEE 754-2019 ``maximum`` (NaN if either is NaN) as two selects, so loops of it
    vectorise (``a if a > b or a != a else b`` branches)."""
    m = a if a > b else b
    return a if a != a else m


@njit(nogil=True, cache=True, inline="always")
def _acc(dst, src, n, is_max):
    """dst[:n] = max(dst, src) or dst + src."""
    if is_max:
        for t in range(n):
            dst[t] = _mx(dst[t], src[t])
    else:
        for t in range(n):
            dst[t] += src[t]


@njit(nogil=True, cache=True, inline="always")
def _three(dst, a, b, c, n, is_max):
    """dst[:n] = max (or sum) of a, b and c: the three taps of a 3-wide window in one pass."""
    if is_max:
        for t in range(n):
            dst[t] = _mx(_mx(a[t], b[t]), c[t])
    else:
        for t in range(n):
            dst[t] = a[t] + b[t] + c[t]


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
    inv = np.empty(HW, x.dtype)
    for y in range(H):
        cy = kh if count_pad else min(y + eh, H - 1) - max(y - ph, 0) + 1
        for q in range(W):
            cx = kw if count_pad else min(q + ew, W - 1) - max(q - pw, 0) + 1
            inv[y * W + q] = 1.0 / (cy * cx)
    B = max(1, 8192 // HW)
    v = np.empty(B * HW, x.dtype)
    for b0 in range(r0, r1, B):
        _block(x, out, v, g, inv, is_max, b0, min(b0 + B, r1))


@njit(nogil=True, cache=True, fastmath=FAST, error_model="numpy")
def _block(x, out, v, g, inv, is_max, r0, r1):
    """``pool_same`` of planes r0:r1, v: scratch of (r1 - r0) * H * W values."""
    kh, kw, ph, pw, eh, ew = g
    NC, H, W = x.shape
    HW = H * W
    T = (r1 - r0) * HW
    xf = x.reshape(NC * HW)[r0 * HW:r1 * HW]
    of = out.reshape(NC * HW)[r0 * HW:r1 * HW]
    vf = v[:T]
    # vertical taps over the flat chunk: row offset a takes row y + a
    if ph == 1 and eh == 1 and T > 2 * W:
        _three(vf[W:], xf, xf[W:], xf[2 * W:], T - 2 * W, is_max)
    else:
        for t in range(T):
            vf[t] = xf[t]
        for a in range(1, ph + 1):
            _acc(vf[a * W:], xf, T - a * W, is_max)
        for a in range(1, eh + 1):
            _acc(vf, xf[a * W:], T - a * W, is_max)
    # each plane's first ph and last eh rows took rows of the next/previous plane: redo them
    for p in range(r1 - r0):
        base = p * HW
        for y in range(H):
            if ph <= y < H - eh:
                continue
            row = vf[base + y * W:base + y * W + W]
            lo, hi = max(y - ph, 0), min(y + eh, H - 1)
            src = xf[base + lo * W:]
            for t in range(W):
                row[t] = src[t]
            for r in range(lo + 1, hi + 1):
                _acc(row, xf[base + r * W:], W, is_max)
    # horizontal taps, the same way, into the output
    if pw == 1 and ew == 1 and T > 2:
        _three(of[1:], vf, vf[1:], vf[2:], T - 2, is_max)
    else:
        for t in range(T):
            of[t] = vf[t]
        for b in range(1, pw + 1):
            _acc(of[b:], vf, T - b, is_max)
        for b in range(1, ew + 1):
            _acc(of, vf[b:], T - b, is_max)
    # each row's first pw and last ew columns took values of the neighbouring rows
    nrows = (r1 - r0) * H
    if pw == 1 and ew == 1 and W > 1:
        for r in range(nrows):
            rb = r * W
            a, b = vf[rb], vf[rb + 1]
            of[rb] = _mx(a, b) if is_max else a + b
            a, b = vf[rb + W - 2], vf[rb + W - 1]
            of[rb + W - 1] = _mx(a, b) if is_max else a + b
        nrows = 0
    for r in range(nrows):
        rb = r * W
        for q in range(min(pw, W)):
            m = vf[rb]
            for c in range(1, min(q + ew, W - 1) + 1):
                m = _mx(m, vf[rb + c]) if is_max else m + vf[rb + c]
            of[rb + q] = m
        for q in range(max(W - ew, pw), W):
            lo = max(q - pw, 0)
            m = vf[rb + lo]
            for c in range(lo + 1, W):
                m = _mx(m, vf[rb + c]) if is_max else m + vf[rb + c]
            of[rb + q] = m
    if is_max:
        return
    # averages: divide by the window's tap count, the same for every plane
    for p in range(r1 - r0):
        op = of[p * HW:p * HW + HW]
        for j in range(HW):
            op[j] = op[j] * inv[j]
