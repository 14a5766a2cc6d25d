"""``conv_blocked``'s tiles written straight into the output rows, bias and ReLU applied in
the registers.

The plain tiles of ``conv_blocked`` run over the flattened phase planes, junk columns
included, into a scratch block that an epilogue pass then copies into the output with
bias and activation. That pass cost as much as the arithmetic of a 3-channel stem (SqueezeNet's
3 -> 64 3x3/2 on 224x224, one thread: tiles 270 us, with the epilogue 540) and ~300 us of
ResNet's 7x7 stem. Here a tile covers 48, 32 or 16 positions of one output row, the last
one of a row moved back to end at the row's end (its first positions are computed twice,
the same values stored twice), so every store lands in the output.

Used where ``wanted`` says so: no residual, no pool, no activation other than ReLU, whole
8-channel blocks and rows wide enough that the row-aligned tiles waste little.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from engine.backends.cpu.activation import ACT_NONE, ACT_RELU
from engine.backends.cpu.conv_depthwise import _OPTS
from engine.backends.cpu.simd import (
    vadd,
    vbcast,
    vfma,
    vfma3,
    vload,
    vlt_select,
    vsplat,
    vstore,
    vzero,
)

#: output channels per tile (``conv_blocked.R``: the weights are packed in blocks of 8)
R = 8
#: multiply-adds per output value that the epilogue pass costs about as much as (~1 cycle a
#: value; 32 multiply-adds a cycle): the row-aligned tiles are used while the positions
#: they compute past a row's end cost less. SqueezeNet's 16 -> 64 3x3 layers on 55 wide
#: rows (64 computed, 144 multiply-adds each) ran 1-5% slower here, its stem (111 wide, 27)
#: 19-22% faster
WASTE_MACS = 16
#: use these tiles where ``wanted`` says so (False: always the scratch block; tests)
ENABLED = True


@njit(inline="always", **_OPTS)
def _width(left, ow):
    """The next tile's positions with ``left`` of a row of ``ow`` to go."""
    return 48 if left > 32 and ow >= 48 else (32 if left > 16 and ow >= 32 else 16)


@njit(**_OPTS)
def _row_width(ow):
    x = done = 0
    while x < ow:
        n = _width(ow - x, ow)
        x = min(x, ow - n) + n
        done += n
    return done


@functools.lru_cache(maxsize=256)
def row_width(ow: int) -> int:
    """Positions computed for an output row of ``ow`` (``tasks_direct``'s tiles); kept per
    width, since ``wanted`` asks on every run of a layer."""
    return int(_row_width(ow))


def wanted(M: int, ow: int, C: int, T: int, act: int, has_res: bool, pooled: bool) -> bool:
    """Whether ``conv_blocked``'s tasks for M output channels of width ``ow`` from C input
    channels and T taps run here."""
    if not ENABLED or has_res or pooled or M % R or ow < 16:
        return False
    if act != ACT_NONE and act != ACT_RELU:
        return False
    return (row_width(ow) - ow) * C * T <= WASTE_MACS * ow


@njit(**_OPTS)
def _dtile48(xf, q0, cs, toff, C, wf, k, bias, m0, floor, y, o, ldy):
    """y[o + u * ldy:][:48] = max(floor, the tile's sums + bias[m0 + u]), u < 8: the bias
    added last, as the scratch block's epilogue does, so both round alike."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vzero()
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = vzero()
    c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = vzero()
    T = toff.shape[0]
    for c in range(C):
        base = q0 + c * cs
        for t in range(T):
            q = base + toff[t]
            x0, x1, x2 = vload(xf, q), vload(xf, q + 16), vload(xf, q + 32)
            a0, b0, c0 = vfma3(vbcast(wf, k), x0, x1, x2, a0, b0, c0)
            a1, b1, c1 = vfma3(vbcast(wf, k + 1), x0, x1, x2, a1, b1, c1)
            a2, b2, c2 = vfma3(vbcast(wf, k + 2), x0, x1, x2, a2, b2, c2)
            a3, b3, c3 = vfma3(vbcast(wf, k + 3), x0, x1, x2, a3, b3, c3)
            a4, b4, c4 = vfma3(vbcast(wf, k + 4), x0, x1, x2, a4, b4, c4)
            a5, b5, c5 = vfma3(vbcast(wf, k + 5), x0, x1, x2, a5, b5, c5)
            a6, b6, c6 = vfma3(vbcast(wf, k + 6), x0, x1, x2, a6, b6, c6)
            a7, b7, c7 = vfma3(vbcast(wf, k + 7), x0, x1, x2, a7, b7, c7)
            k += R
    lo = vsplat(floor)
    for u, (a, b, c) in enumerate(((a0, b0, c0), (a1, b1, c1), (a2, b2, c2), (a3, b3, c3),
                                   (a4, b4, c4), (a5, b5, c5), (a6, b6, c6), (a7, b7, c7))):
        s = vsplat(bias[m0 + u])
        a, b, c = vadd(a, s), vadd(b, s), vadd(c, s)
        vstore(y, o, vlt_select(a, lo, lo, a))
        vstore(y, o + 16, vlt_select(b, lo, lo, b))
        vstore(y, o + 32, vlt_select(c, lo, lo, c))
        o += ldy


@njit(**_OPTS)
def _dtile16(xf, q0, cs, toff, C, wf, k, bias, m0, floor, y, o, ldy, n):
    """``_dtile48`` for ``n`` (16 or 32) positions."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vzero()
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = vzero()
    T = toff.shape[0]
    two = n > 16
    for c in range(C):
        base = q0 + c * cs
        for t in range(T):
            q = base + toff[t]
            x0 = vload(xf, q)
            a0, a1 = vfma(vbcast(wf, k), x0, a0), vfma(vbcast(wf, k + 1), x0, a1)
            a2, a3 = vfma(vbcast(wf, k + 2), x0, a2), vfma(vbcast(wf, k + 3), x0, a3)
            a4, a5 = vfma(vbcast(wf, k + 4), x0, a4), vfma(vbcast(wf, k + 5), x0, a5)
            a6, a7 = vfma(vbcast(wf, k + 6), x0, a6), vfma(vbcast(wf, k + 7), x0, a7)
            if two:
                x1 = vload(xf, q + 16)
                b0, b1 = vfma(vbcast(wf, k), x1, b0), vfma(vbcast(wf, k + 1), x1, b1)
                b2, b3 = vfma(vbcast(wf, k + 2), x1, b2), vfma(vbcast(wf, k + 3), x1, b3)
                b4, b5 = vfma(vbcast(wf, k + 4), x1, b4), vfma(vbcast(wf, k + 5), x1, b5)
                b6, b7 = vfma(vbcast(wf, k + 6), x1, b6), vfma(vbcast(wf, k + 7), x1, b7)
            k += R
    lo = vsplat(floor)
    for u, (a, b) in enumerate(((a0, b0), (a1, b1), (a2, b2), (a3, b3), (a4, b4), (a5, b5),
                                (a6, b6), (a7, b7))):
        s = vsplat(bias[m0 + u])
        a, b = vadd(a, s), vadd(b, s)
        vstore(y, o, vlt_select(a, lo, lo, a))
        if two:
            vstore(y, o + 16, vlt_select(b, lo, lo, b))
        o += ldy


@njit(**_OPTS)
def tasks_direct(xf, cs, toff, wp, out, oh, ow, Wq, rows, bias, act, t0, t1):
    """``conv_blocked._tasks`` for what ``wanted`` accepted: tasks ``t0:t1`` of (block of
    ``rows`` output rows, 8-channel block), each row's tiles stored into ``out`` (M, oh, ow)."""
    C, T = wp.shape[1], wp.shape[2]
    wf = wp.reshape(-1)
    nmb = wp.shape[0]
    y = out.reshape(-1)
    plane = oh * ow
    floor = np.float32(0.0) if act == ACT_RELU else np.float32(-np.inf)
    b = bias if bias.shape[0] > 0 else np.zeros(nmb * R, np.float32)
    for task in range(t0, t1):
        yb, mb = task // nmb, task % nmb
        k = mb * C * T * R
        m0 = mb * R
        for r in range(yb * rows, min(oh, yb * rows + rows)):
            x = 0
            while x < ow:
                n = _width(ow - x, ow)
                x0 = min(x, ow - n)  # the last tile ends at the row's end
                q, o = r * Wq + x0, m0 * plane + r * ow + x0
                if n == 48:
                    _dtile48(xf, q, cs, toff, C, wf, k, b, m0, floor, y, o, plane)
                else:
                    _dtile16(xf, q, cs, toff, C, wf, k, b, m0, floor, y, o, plane, n)
                x = x0 + n
