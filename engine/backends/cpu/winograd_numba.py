"""Numba transforms of the Winograd convolution F(m x m, 3 x 3), m = 2 or 4
(``kernels_winograd``): input tiles into the transformed domain, and products back to the
output with the Conv epilogue fused in.

Both transforms are separable (``B^T d B`` is a 1-D transform of the tile's rows, then of
its columns), written out with their constants (Lavin and Gray's points 0, +-1, +-2) so the
zero entries cost nothing. Arithmetic loops run over all tiles of a block (hundreds), so
LLVM vectorises them; the strided gathers and scatters between image rows and tiles are
plain copies. ``m`` reaches the bodies as a constant (inlined per tile size): as a runtime
value it kept LLVM from specialising the loops and the input transform ran 5x slower.
Slices are indexed from 0 (no wraparound test, see ``conv_numba``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.activation import store_row
from engine.backends.cpu.conv_numba import FAST_FINITE_FREE
from engine.backends.cpu.simd import vadd, vfma, vload, vsplat, vstore

_OPTS = dict(nogil=True, cache=True, fastmath=FAST_FINITE_FREE, error_model="numpy")
#: the transforms' constants as float32: an int literal times a float32 is float64 in
#: Numba, which sent the whole transform through float64 (2x slower)
F1, F2, F4, F5, F8 = np.float32(1), np.float32(2), np.float32(4), np.float32(5), np.float32(8)
FMAX = np.finfo(np.float32).max


@njit(inline="always", **_OPTS)
def _bt(m, src, sb, ss, dst, db, ds, n):
    """Rows ``db + k*ds`` of ``dst`` = (B^T x)[k], x the rows ``sb + k*ss`` of ``src``
    (2-D C-contiguous arrays: every row a contiguous slice, so the loops vectorise)."""
    if m == 4:
        d0, d1, d2, d3, d4, d5 = (src[sb], src[sb + ss], src[sb + 2 * ss], src[sb + 3 * ss],
                                  src[sb + 4 * ss], src[sb + 5 * ss])
        t0, t1, t2, t3, t4, t5 = (dst[db], dst[db + ds], dst[db + 2 * ds], dst[db + 3 * ds],
                                  dst[db + 4 * ds], dst[db + 5 * ds])
        for p in range(n):
            e1, e2, e3, e4 = d1[p], d2[p], d3[p], d4[p]
            t0[p] = F4 * d0[p] - F5 * e2 + e4
            t1[p] = e3 + e4 - F4 * (e1 + e2)
            t2[p] = F4 * (e1 - e2) + e4 - e3
            t3[p] = F2 * (e3 - e1) + e4 - e2
            t4[p] = F2 * (e1 - e3) + e4 - e2
            t5[p] = F4 * e1 - F5 * e3 + d5[p]
    else:
        d0, d1, d2, d3 = src[sb], src[sb + ss], src[sb + 2 * ss], src[sb + 3 * ss]
        t0, t1, t2, t3 = dst[db], dst[db + ds], dst[db + 2 * ds], dst[db + 3 * ds]
        for p in range(n):
            e1, e2 = d1[p], d2[p]
            t0[p] = d0[p] - e2
            t1[p] = e1 + e2
            t2[p] = e2 - e1
            t3[p] = e1 - d3[p]


@njit(inline="always", **_OPTS)
def _at(m, src, sb, ss, dst, db, ds, n):
    """Rows ``db + k*ds`` of ``dst`` = (A^T y)[k], y the rows ``sb + k*ss`` of ``src``."""
    if m == 4:
        y0, y1, y2, y3, y4, y5 = (src[sb], src[sb + ss], src[sb + 2 * ss], src[sb + 3 * ss],
                                  src[sb + 4 * ss], src[sb + 5 * ss])
        o0, o1, o2, o3 = dst[db], dst[db + ds], dst[db + 2 * ds], dst[db + 3 * ds]
        for p in range(n):
            ps, ms = y1[p] + y2[p], y1[p] - y2[p]
            pt, mt = y3[p] + y4[p], y3[p] - y4[p]
            o0[p] = y0[p] + ps + pt
            o1[p] = ms + F2 * mt
            o2[p] = ps + F4 * pt
            o3[p] = ms + F8 * mt + y5[p]
    else:
        y0, y1, y2, y3 = src[sb], src[sb + ss], src[sb + 2 * ss], src[sb + 3 * ss]
        o0, o1 = dst[db], dst[db + ds]
        for p in range(n):
            o0[p] = y0[p] + y1[p] + y2[p]
            o1[p] = y1[p] - y2[p] - y3[p]


@njit(**_OPTS)
def _bt4_rows(src, sb, ss, dst, db, ds, n):
    """``_bt`` for m = 4 between rows of flat arrays (row k at ``sb + k*ss``, ``db + k*ds``),
    16 columns a step in registers. The loop over row views did not vectorise (six rows in,
    six out: more pointers than LLVM checks for overlap) and took 45% of the input
    transform of DenseNet's 128 -> 32 layers at 56 x 56."""
    c4, cm4, c2, cm1, cm5 = vsplat(F4), vsplat(-F4), vsplat(F2), vsplat(-F1), vsplat(-F5)
    p = 0
    while p + 16 <= n:
        d0, e1, e2 = vload(src, sb + p), vload(src, sb + ss + p), vload(src, sb + 2 * ss + p)
        e3, e4 = vload(src, sb + 3 * ss + p), vload(src, sb + 4 * ss + p)
        d5 = vload(src, sb + 5 * ss + p)
        vstore(dst, db + p, vfma(c4, d0, vfma(cm5, e2, e4)))
        vstore(dst, db + ds + p, vfma(cm4, vadd(e1, e2), vadd(e3, e4)))
        vstore(dst, db + 2 * ds + p, vfma(c4, vfma(cm1, e2, e1), vfma(cm1, e3, e4)))
        vstore(dst, db + 3 * ds + p, vfma(c2, vfma(cm1, e1, e3), vfma(cm1, e2, e4)))
        vstore(dst, db + 4 * ds + p, vfma(c2, vfma(cm1, e3, e1), vfma(cm1, e2, e4)))
        vstore(dst, db + 5 * ds + p, vfma(c4, e1, vfma(cm5, e3, d5)))
        p += 16
    for q in range(p, n):
        d0, e1, e2 = src[sb + q], src[sb + ss + q], src[sb + 2 * ss + q]
        e3, e4, d5 = src[sb + 3 * ss + q], src[sb + 4 * ss + q], src[sb + 5 * ss + q]
        dst[db + q] = F4 * d0 - F5 * e2 + e4
        dst[db + ds + q] = e3 + e4 - F4 * (e1 + e2)
        dst[db + 2 * ds + q] = F4 * (e1 - e2) + e4 - e3
        dst[db + 3 * ds + q] = F2 * (e3 - e1) + e4 - e2
        dst[db + 4 * ds + q] = F2 * (e1 - e3) + e4 - e2
        dst[db + 5 * ds + q] = F4 * e1 - F5 * e3 + d5


@njit(**_OPTS)
def _bt2_rows(src, sb, ss, dst, db, ds, n):
    """``_bt4_rows`` for m = 2."""
    cm1 = vsplat(-F1)
    p = 0
    while p + 16 <= n:
        d0, e1 = vload(src, sb + p), vload(src, sb + ss + p)
        e2, d3 = vload(src, sb + 2 * ss + p), vload(src, sb + 3 * ss + p)
        vstore(dst, db + p, vfma(cm1, e2, d0))
        vstore(dst, db + ds + p, vadd(e1, e2))
        vstore(dst, db + 2 * ds + p, vfma(cm1, e1, e2))
        vstore(dst, db + 3 * ds + p, vfma(cm1, d3, e1))
        p += 16
    for q in range(p, n):
        d0, e1, e2, d3 = src[sb + q], src[sb + ss + q], src[sb + 2 * ss + q], \
            src[sb + 3 * ss + q]
        dst[db + q] = d0 - e2
        dst[db + ds + q] = e1 + e2
        dst[db + 2 * ds + q] = e2 - e1
        dst[db + 3 * ds + q] = e1 - d3


@njit(inline="always", **_OPTS)
def _input(m, x, V, pt, pl, i0, i1, tw, buf, er, E):
    C, H, W = x.shape
    a = m + 2
    Wp = buf.shape[1]
    nb = (i1 - i0) * tw
    Ef, Vf, nbe = E.reshape(-1), V.reshape(-1), E.shape[1]
    bad = 0
    for c in range(C):
        for i in range(i0, i1):
            # the tile row's a input rows, zero-padded, then their column transform
            for r in range(a):
                y = i * m - pt + r
                row = buf[r]
                if y < 0 or y >= H:
                    row[:] = 0
                    continue
                row[:pl] = 0
                row[pl + W:] = 0
                src = x[c, y]
                dst = row[pl:]
                for q in range(W):
                    v = src[q]
                    dst[q] = v
                    # a comparison, not v - v: fast-math's reassociation folds
                    # (s + v) - v to s and lost the NaN
                    bad += 0 if abs(v) <= FMAX else 1
            _bt(m, buf, 0, 1, er, 0, 1, Wp)
            # gather: E[ky, q, tile] = er[ky, m * j + q]
            t0 = (i - i0) * tw
            # (one loop of a loads an iteration, as in the output's scatter)
            for ky in range(a):
                src = er[ky]
                e0, e1 = E[ky * a, t0:], E[ky * a + 1, t0:]
                e2, e3 = E[ky * a + 2, t0:], E[ky * a + 3, t0:]
                if m == 4:
                    e4, e5 = E[ky * a + 4, t0:], E[ky * a + 5, t0:]
                    for j in range(tw):
                        e0[j], e1[j], e2[j] = src[4 * j], src[4 * j + 1], src[4 * j + 2]
                        e3[j], e4[j], e5[j] = src[4 * j + 3], src[4 * j + 4], src[4 * j + 5]
                else:
                    for j in range(tw):
                        e0[j], e1[j] = src[2 * j], src[2 * j + 1]
                        e2[j], e3[j] = src[2 * j + 2], src[2 * j + 3]
        # row transform of every tile of the block at once
        for ky in range(a):
            if m == 4:
                _bt4_rows(Ef, ky * a * nbe, nbe, Vf, (ky * a * C + c) * nb, C * nb, nb)
            else:
                _bt2_rows(Ef, ky * a * nbe, nbe, Vf, (ky * a * C + c) * nb, C * nb, nb)
    return bad


@njit(**_OPTS)
def wino_input(x, V, m, pt, pl, i0, i1, tw, buf, er, E):
    """Transformed input tiles of tile rows ``i0:i1`` of one image, all channels.

    x: (C, H, W); V: (a*a, C, (i1 - i0) * tw) with a = m + 2, tile (i, j) in column
    (i - i0) * tw + j; ``pt``/``pl`` the top/left pads; scratch buf, er: (a, tw*m + 2),
    E: (a*a, >= (i1 - i0) * tw). Returns how many input values read were NaN or +-Inf (in
    this domain they spread over whole tiles, so such inputs are left to the direct path)."""
    if m == 4:
        return _input(4, x, V, pt, pl, i0, i1, tw, buf, er, E)
    return _input(2, x, V, pt, pl, i0, i1, tw, buf, er, E)


@njit(inline="always", **_OPTS)
def _output(m, Y, out, i0, i1, tw, m0, bias, act, params, res, post, pparams, S, O, obuf):
    M, oh, ow = out.shape
    a = m + 2
    nb = (i1 - i0) * tw
    p0, p1 = params[0], params[1]
    q0, q1 = pparams[0], pparams[1]
    zero = p0 - p0
    has_res = res.shape[0] > 0
    Mb = Y.shape[1]
    Y2 = Y.reshape((a * a * Mb, nb))
    for kk in range(Y.shape[1]):
        mo = m0 + kk
        b = bias[mo] if bias.shape[0] > 0 else zero
        for ry in range(a):  # S[ry * m + ox, tile] = (A^T Y_ry)[ox]
            _at(m, Y2, ry * a * Mb + kk, Mb, S, ry * m, 1, nb)
        for ox in range(m):  # O[oy * m + ox, tile]
            _at(m, S, ox, m, O, ox, m, nb)
        for i in range(i0, i1):
            t0 = (i - i0) * tw
            for oy in range(min(m, oh - i * m)):
                # the tiles' pixels into one output row: m interleaved stores an iteration
                # (one loop of m-wide steps ran 2x faster than m strided loops)
                r0, r1 = O[oy * m, t0:], O[oy * m + 1, t0:]
                if m == 4:
                    r2, r3 = O[oy * m + 2, t0:], O[oy * m + 3, t0:]
                    for j in range(tw):
                        obuf[4 * j] = r0[j]
                        obuf[4 * j + 1] = r1[j]
                        obuf[4 * j + 2] = r2[j]
                        obuf[4 * j + 3] = r3[j]
                else:
                    for j in range(tw):
                        obuf[2 * j] = r0[j]
                        obuf[2 * j + 1] = r1[j]
                row = i * m + oy
                add = res[mo, row] if has_res else out[mo, row]
                store_row(obuf, out[mo, row], ow, b, add, has_res, act, p0, p1, post, q0, q1)


@njit(**_OPTS)
def wino_output(Y, out, m, i0, i1, tw, m0, bias, act, params, res, post, pparams, S, O, obuf):
    """Output tiles of tile rows ``i0:i1`` for channels ``m0 : m0 + Y.shape[1]``, with
    ``out = post(act(A^T Y A + bias) + res)`` (no residual when ``res`` is empty).

    Y: (a*a, Mb, (i1 - i0) * tw) products; out and res: (M, oh, ow); scratch S: (a*m, nb),
    O: (m*m, nb) with nb >= (i1 - i0) * tw, obuf: (tw * m,); ``params``/``pparams`` the two
    activations' parameters."""
    if m == 4:
        _output(4, Y, out, i0, i1, tw, m0, bias, act, params, res, post, pparams, S, O, obuf)
    else:
        _output(2, Y, out, i0, i1, tw, m0, bias, act, params, res, post, pparams, S, O, obuf)
