"""LayerNormalization over the channels of an NCHW tensor, as ConvNeXt-style models export
it: ``Transpose(0, 2, 3, 1)`` to channels-last, ``LayerNormalization`` over the last axis,
and (before a downsampling Conv) ``Transpose(0, 3, 1, 2)`` back.

Both Transposes were full copies with a scattered read (NumPy: 130-230 us for a
32 x 56 x 56 tensor here) around a 30 us normalisation. Here positions go in tiles of 32:
a tile's C x 32 values (in L1) give 32 means and deviations in vectorised passes over the
channel rows, and the normalised values are written either channel-major (NCHW out: the
Transpose back absorbed too) or position-major (NHWC out, read by the MLP's MatMul).
Statistics in float64 per position, the normalisation in float32, as ``kernels_norm``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.threads import parallel_for, stream_grain

#: positions per tile
TILE = 32


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc"})
def ln_channels(x, scale, bias, eps, out, nhwc, p0, p1):
    """Positions p0:p1 of x (C, P) normalised over C; out (C, P), or (P, C) when ``nhwc``."""
    C, P = x.shape
    s = np.empty(TILE, np.float64)
    v = np.empty(TILE, np.float64)
    mt = np.empty(TILE, np.float32)
    it = np.empty(TILE, np.float32)
    for t0 in range(p0, p1, TILE):
        n = min(TILE, p1 - t0)
        for j in range(n):
            s[j] = 0.0
            v[j] = 0.0
        for c in range(C):
            row = x[c, t0:t0 + n]
            for j in range(n):
                s[j] += row[j]
        for j in range(n):
            s[j] /= C
        for c in range(C):
            row = x[c, t0:t0 + n]
            for j in range(n):
                d = row[j] - s[j]
                v[j] += d * d
        for j in range(n):
            mt[j] = np.float32(s[j])
            it[j] = np.float32(1.0 / np.sqrt(v[j] / C + eps))
        if nhwc:
            for j in range(n):
                o = out[t0 + j]
                m, inv = mt[j], it[j]
                for c in range(C):
                    o[c] = (x[c, t0 + j] - m) * inv * scale[c] + bias[c]
        else:
            for c in range(C):
                row, o = x[c, t0:t0 + n], out[c, t0:t0 + n]
                g, b = scale[c], bias[c]
                for j in range(n):
                    o[j] = (row[j] - mt[j]) * it[j] * g + b


def layer_norm_channels(x, scale, bias, eps: float, back_to_nchw: bool):
    """LayerNormalization over axis 1 of a float32 NCHW ``x``: [N, H, W, C] out, or (with
    ``back_to_nchw``) [N, C, H, W]; None for inputs it does not take."""
    if x.dtype != np.float32 or x.ndim != 4:
        return None
    N, C, H, W = x.shape
    sc = np.asarray(scale, np.float32).reshape(-1)
    bi = np.zeros(C, np.float32) if bias is None else np.asarray(bias, np.float32).reshape(-1)
    if sc.size != C or bi.size != C:
        return None
    sc, bi = np.ascontiguousarray(sc), np.ascontiguousarray(bi)
    P = H * W
    xs = np.ascontiguousarray(x).reshape(N, C, P)
    out = np.empty((N, C, H, W) if back_to_nchw else (N, H, W, C), np.float32)
    o3 = out.reshape(N, C, P) if back_to_nchw else out.reshape(N, P, C)
    tiles = -(-P // TILE)
    for n in range(N):
        parallel_for(lambda lo, hi, xn=xs[n], on=o3[n]: ln_channels(
            xn, sc, bi, eps, on, not back_to_nchw, lo * TILE, min(P, hi * TILE)),
            tiles, grain=stream_grain(tiles, TILE * C))
    return out


@njit(nogil=True, cache=True, error_model="numpy")
def scale_t_add(y, g, res, out, p0, p1):
    """out[c, p] = res[c, p] + y[p, c] * g[c] for positions p0:p1 (y (P, C) channels-last,
    res and out (C, P)); the product is rounded before the add, as the two layers do."""
    C = out.shape[0]
    for t0 in range(p0, p1, TILE):
        n = min(TILE, p1 - t0)
        for c in range(C):
            o, r = out[c, t0:t0 + n], res[c, t0:t0 + n]
            gc = g[c]
            for j in range(n):
                o[j] = r[j] + y[t0 + j, c] * gc


def scale_to_nchw_add(y, gamma, res):
    """``res + Transpose(y * gamma, (0, 3, 1, 2))`` for a float32 channels-last ``y`` [N, H,
    W, C], a per-channel ``gamma`` (None: no scale) and an NCHW ``res``: ConvNeXt's layer
    scale, the Transpose back and the residual in one pass; None for inputs it does not
    take."""
    if y.dtype != np.float32 or y.ndim != 4 or res.dtype != np.float32:
        return None
    N, H, W, C = y.shape
    g = np.ones(C, np.float32) if gamma is None else np.asarray(gamma)
    if res.shape != (N, C, H, W) or g.dtype != np.float32 or g.size != C \
            or (g.ndim and g.shape[-1] != C):
        return None
    P = H * W
    ys = np.ascontiguousarray(y).reshape(N, P, C)
    rs = np.ascontiguousarray(res).reshape(N, C, P)
    gs = np.ascontiguousarray(g.reshape(C))
    out = np.empty((N, C, H, W), np.float32)
    o3 = out.reshape(N, C, P)
    tiles = -(-P // TILE)
    for n in range(N):
        parallel_for(lambda lo, hi, yn=ys[n], rn=rs[n], on=o3[n]: scale_t_add(
            yn, gs, rn, on, lo * TILE, min(P, hi * TILE)),
            tiles, grain=stream_grain(tiles, TILE * C))
    return out
