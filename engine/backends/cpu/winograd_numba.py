"""Numba transforms of the Winograd convolution F(m x m, 3 x 3), m = 2 or 4
(``kernels_winograd``): input tiles into the transformed domain, and products back to the
output with the Conv epilogue fused in.

Both transforms are separable (``B^T d B`` is a 1-D transform of the rows, then of the
columns), written out with their constants (Lavin and Gray's points 0, +-1, +-2) so the
zero entries cost nothing. Loops run over the tiles of one tile row (``j``) innermost, so
LLVM vectorises across tiles; slices are indexed from 0 (no wraparound test, see
``conv_numba``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.activation import ACT_NONE, ACT_RELU, _act
from engine.backends.cpu.conv_numba import FAST_FINITE_FREE


@njit(nogil=True, cache=True, fastmath=FAST_FINITE_FREE, error_model="numpy")
def wino_input(x, V, m, pt, pl, i0, i1, tw, buf, tmp):
    """Transformed input tiles of tile rows ``i0:i1`` of one image, all channels.

    x: (C, H, W); V: (a*a, C, (i1 - i0) * tw) with a = m + 2, tile (i, j) in column
    (i - i0) * tw + j; ``pt``/``pl`` the top/left pads; buf: (a, >= tw*m + 2) and
    tmp: (a, a, tw) scratch. Returns a value that is finite if and only if every input
    value read was (NaN/Inf spread over whole tiles in this domain, so such inputs are
    left to the direct path)."""
    C, H, W = x.shape
    a = m + 2
    Wp = buf.shape[1]
    ncopy = min(W, Wp - pl)
    chk = np.zeros(ncopy, np.float32)
    for c in range(C):
        for i in range(i0, i1):
            for r in range(a):
                y = i * m - pt + r
                row = buf[r]
                if y < 0 or y >= H:
                    row[:] = 0
                    continue
                row[:pl] = 0
                row[pl + ncopy:] = 0
                src = x[c, y]
                dst = row[pl:]
                for q in range(ncopy):
                    v = src[q]
                    dst[q] = v
                    chk[q] += v - v  # NaN for NaN and +-Inf, else 0
            # rows: tmp[r, k, j] = (B^T d_r)[k] of tile j
            for r in range(a):
                row = buf[r]
                t = tmp[r]
                t0, t1, t2, t3 = t[0], t[1], t[2], t[3]
                if m == 4:
                    t4, t5 = t[4], t[5]
                    for j in range(tw):
                        d0, d1, d2 = row[4 * j], row[4 * j + 1], row[4 * j + 2]
                        d3, d4, d5 = row[4 * j + 3], row[4 * j + 4], row[4 * j + 5]
                        t0[j] = 4 * d0 - 5 * d2 + d4
                        t1[j] = d3 + d4 - 4 * (d1 + d2)
                        t2[j] = 4 * (d1 - d2) + d4 - d3
                        t3[j] = 2 * (d3 - d1) + d4 - d2
                        t4[j] = 2 * (d1 - d3) + d4 - d2
                        t5[j] = 4 * d1 - 5 * d3 + d5
                else:
                    for j in range(tw):
                        d0, d1, d2, d3 = row[2 * j], row[2 * j + 1], row[2 * j + 2], row[2 * j + 3]
                        t0[j] = d0 - d2
                        t1[j] = d1 + d2
                        t2[j] = d2 - d1
                        t3[j] = d1 - d3
            # columns: V[ky * a + k, c, tile] = (B^T column k)[ky]
            base = (i - i0) * tw
            for k in range(a):
                s0, s1, s2, s3 = tmp[0, k], tmp[1, k], tmp[2, k], tmp[3, k]
                v0, v1 = V[k, c, base:], V[a + k, c, base:]
                v2, v3 = V[2 * a + k, c, base:], V[3 * a + k, c, base:]
                if m == 4:
                    s4, s5 = tmp[4, k], tmp[5, k]
                    v4, v5 = V[4 * a + k, c, base:], V[5 * a + k, c, base:]
                    for j in range(tw):
                        e0, e1, e2, e3, e4, e5 = s0[j], s1[j], s2[j], s3[j], s4[j], s5[j]
                        v0[j] = 4 * e0 - 5 * e2 + e4
                        v1[j] = e3 + e4 - 4 * (e1 + e2)
                        v2[j] = 4 * (e1 - e2) + e4 - e3
                        v3[j] = 2 * (e3 - e1) + e4 - e2
                        v4[j] = 2 * (e1 - e3) + e4 - e2
                        v5[j] = 4 * e1 - 5 * e3 + e5
                else:
                    for j in range(tw):
                        e0, e1, e2, e3 = s0[j], s1[j], s2[j], s3[j]
                        v0[j] = e0 - e2
                        v1[j] = e1 + e2
                        v2[j] = e2 - e1
                        v3[j] = e1 - e3
    return chk.sum()


@njit(nogil=True, cache=True, fastmath=FAST_FINITE_FREE, error_model="numpy")
def wino_output(Y, out, m, i0, i1, tw, m0, bias, act, params, res, post, pparams, s, obuf):
    """Output tiles of tile rows ``i0:i1`` for channels ``m0 : m0 + Y.shape[1]``, with
    ``out = post(act(A^T Y A + bias) + res)`` (no residual when ``res`` is empty).

    Y: (a*a, Mb, (i1 - i0) * tw) products; out and res: (M, oh, ow); s: (a, m, tw) and
    obuf: (m, >= tw*m) scratch; ``params``/``pparams`` the two activations' parameters."""
    M, oh, ow = out.shape
    a = m + 2
    p0, p1 = params[0], params[1]
    q0, q1 = pparams[0], pparams[1]
    zero = p0 - p0
    has_res = res.shape[0] > 0
    for kk in range(Y.shape[1]):
        mo = m0 + kk
        b = bias[mo] if bias.shape[0] > 0 else zero
        for i in range(i0, i1):
            base = (i - i0) * tw
            # rows: s[ry, ox, j] = (A^T Y_ry)[ox]
            for ry in range(a):
                y0, y1 = Y[ry * a, kk, base:], Y[ry * a + 1, kk, base:]
                y2, y3 = Y[ry * a + 2, kk, base:], Y[ry * a + 3, kk, base:]
                sr = s[ry]
                s0, s1 = sr[0], sr[1]
                if m == 4:
                    y4, y5 = Y[ry * a + 4, kk, base:], Y[ry * a + 5, kk, base:]
                    s2, s3 = sr[2], sr[3]
                    for j in range(tw):
                        e1, e2, e3, e4 = y1[j], y2[j], y3[j], y4[j]
                        ps, ms, pt, mt = e1 + e2, e1 - e2, e3 + e4, e3 - e4
                        s0[j] = y0[j] + ps + pt
                        s1[j] = ms + 2 * mt
                        s2[j] = ps + 4 * pt
                        s3[j] = ms + 8 * mt + y5[j]
                else:
                    for j in range(tw):
                        s0[j] = y0[j] + y1[j] + y2[j]
                        s1[j] = y1[j] - y2[j] - y3[j]
            # columns, into whole output rows of this tile row
            if m == 4:
                o0, o1, o2, o3 = obuf[0], obuf[1], obuf[2], obuf[3]
                for j in range(tw):
                    for ox in range(4):
                        e1, e2, e3, e4 = s[1, ox, j], s[2, ox, j], s[3, ox, j], s[4, ox, j]
                        ps, ms, pt, mt = e1 + e2, e1 - e2, e3 + e4, e3 - e4
                        o0[4 * j + ox] = s[0, ox, j] + ps + pt
                        o1[4 * j + ox] = ms + 2 * mt
                        o2[4 * j + ox] = ps + 4 * pt
                        o3[4 * j + ox] = ms + 8 * mt + s[5, ox, j]
            else:
                o0, o1 = obuf[0], obuf[1]
                for j in range(tw):
                    for ox in range(2):
                        e1, e2 = s[1, ox, j], s[2, ox, j]
                        o0[2 * j + ox] = s[0, ox, j] + e1 + e2
                        o1[2 * j + ox] = e1 - e2 - s[3, ox, j]
            for oy in range(min(m, oh - i * m)):
                src = obuf[oy]
                dst = out[mo, i * m + oy]
                if has_res:
                    add = res[mo, i * m + oy]
                    if act == ACT_NONE and post == ACT_RELU:
                        for q in range(ow):
                            v = src[q] + b + add[q]
                            dst[q] = zero if v <= zero else v  # NaN fails the test and stays
                    else:
                        for q in range(ow):
                            dst[q] = _act(_act(src[q] + b, act, p0, p1) + add[q], post, q0, q1)
                elif act == ACT_RELU:
                    for q in range(ow):
                        v = src[q] + b
                        dst[q] = zero if v <= zero else v
                elif act == ACT_NONE:
                    for q in range(ow):
                        dst[q] = src[q] + b
                else:
                    for q in range(ow):
                        dst[q] = _act(src[q] + b, act, p0, p1)
