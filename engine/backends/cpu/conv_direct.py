"""Direct 2-D convolution for layers with few output channels, where the product of an
im2col patch matrix with a weight matrix of M <= 16 rows is too thin for BLAS (DB's
24 -> 6 3x3 layers ran at 22-25 GFLOP/s through im2col + sgemm).

Each input channel is split once into zero-bordered stride-phase planes
(``conv_depthwise``), so tap (c, i, j) of a block of output rows is one contiguous run of
the flattened planes. Four output channels are computed together: every run value read is
used by the four accumulators, and the taps of one kernel row are summed in the same pass
(3 x 4 multiply-adds per 3 loads and 4 accumulator updates). Blocks of output rows are small
enough that the four accumulators and the phase rows they read stay in the L1 cache, and
they spread over the threads. The epilogue (bias, fused activation, residual and the
activation after it) writes each block's rows from the accumulators.

Which layers run here is a measured rule (``wanted``): with more output channels BLAS,
which keeps many of them in registers, wins.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import threads
from engine.backends.cpu.activation import act_plane, store_row
from engine.backends.cpu.conv_depthwise import (
    _OPTS,
    _fill1,
    _fill2,
    _fill_any,
    _taps_row,
    phase_shape,
)

#: values of one output-row block's accumulator (per output channel)
BLOCK_VALUES = 1024
#: fewest multiply-adds per parallel chunk
CHUNK_MACS = 1_000_000
#: use the direct kernel (False: im2col / Winograd; tests and benchmarks)
ENABLED = True


def wanted(C: int, M: int, kernel, strides, out_shape) -> bool:
    """Whether an ungrouped, non-pointwise 2-D float32 Conv runs here rather than im2col
    (checked after Winograd). Measured on the families' layers against im2col + sgemm:
    few output channels (M <= 16) from C >= 8 at stride 1 on outputs of 40x40 and more
    ran 1.2-1.9x faster (DB's 24 -> 6 at 40x40-160x160, YOLO's 16 -> 16 at 80x80); more
    output channels, stride 2, smaller outputs and C = 3 stems ran 0.35-1.0x."""
    return (ENABLED and C >= 8 and M <= 16 and tuple(strides) == (1, 1)
            and min(out_shape) >= 40)


@njit(**_OPTS)
def fill_phases(x, phases, g, c0, c1):
    """Phase planes of input channels ``c0:c1``: x (C, H, W); phases (C, sh*sw, Hq, Wq),
    zeroed by the caller; ``g`` = (kh, kw, sh, sw, dh, dw, ph, pw)."""
    kh, kw, sh, sw, dh, dw, ph, pw = g
    for c in range(c0, c1):
        if sh == 1 and sw == 1:
            _fill1(x, c, phases[c, 0], ph, pw)
        elif sh == 2 and sw == 2:
            _fill2(x, c, phases[c], ph, pw)
        else:
            _fill_any(x, c, phases[c], ph, pw, sh, sw)


@njit(inline="always", **_OPTS)
def _taps4(a0, a1, a2, a3, fc, w, m, c, C, i, j, k, sh, sw, dh, dw, Wq, L, base):
    """Taps (i, j .. j+k-1), k = 1..3, of input channel c into the accumulators of output
    channels m..m+3 (weights ``w[(m + u) * C + c, i, j]``)."""
    a, ai = (i * dh) % sh, base + (i * dh) // sh
    s0 = fc[a * sw + (j * dw) % sw, ai * Wq + (j * dw) // sw:]
    r0, r1, r2, r3 = m * C + c, (m + 1) * C + c, (m + 2) * C + c, (m + 3) * C + c
    v00, v10, v20, v30 = w[r0, i, j], w[r1, i, j], w[r2, i, j], w[r3, i, j]
    if k == 1:
        for t in range(L):
            x0 = s0[t]
            a0[t] += v00 * x0
            a1[t] += v10 * x0
            a2[t] += v20 * x0
            a3[t] += v30 * x0
        return
    s1 = fc[a * sw + ((j + 1) * dw) % sw, ai * Wq + ((j + 1) * dw) // sw:]
    v01, v11, v21, v31 = w[r0, i, j + 1], w[r1, i, j + 1], w[r2, i, j + 1], w[r3, i, j + 1]
    if k == 2:
        for t in range(L):
            x0, x1 = s0[t], s1[t]
            a0[t] += v00 * x0 + v01 * x1
            a1[t] += v10 * x0 + v11 * x1
            a2[t] += v20 * x0 + v21 * x1
            a3[t] += v30 * x0 + v31 * x1
        return
    s2 = fc[a * sw + ((j + 2) * dw) % sw, ai * Wq + ((j + 2) * dw) // sw:]
    v02, v12, v22, v32 = w[r0, i, j + 2], w[r1, i, j + 2], w[r2, i, j + 2], w[r3, i, j + 2]
    for t in range(L):
        x0, x1, x2 = s0[t], s1[t], s2[t]
        a0[t] += v00 * x0 + v01 * x1 + v02 * x2
        a1[t] += v10 * x0 + v11 * x1 + v12 * x2
        a2[t] += v20 * x0 + v21 * x1 + v22 * x2
        a3[t] += v30 * x0 + v31 * x1 + v32 * x2


@njit(**_OPTS)
def direct_rows(phases, w, out, g, rows, bias, act, params, res, post, pparams, b0, b1):
    """Output-row blocks ``b0:b1`` (``rows`` rows each) of all output channels.
    phases (C, sh*sw, Hq, Wq) from ``fill_phases``; w (M*C, kh, kw); out (M, oh, ow).
    Epilogue ``post(act(conv + bias) + res)`` with ``res`` (M, oh, ow), or
    ``act(conv + bias)`` when ``res`` is empty; an empty ``bias`` adds nothing."""
    kh, kw, sh, sw, dh, dw, ph, pw = g
    C, nph, Hq, Wq = phases.shape
    M, oh, ow = out.shape
    flat = phases.reshape(C, nph, Hq * Wq)
    p0, p1 = params[0], params[1]
    q0, q1 = pparams[0], pparams[1]
    zero = p0 - p0
    has_res = res.shape[0] > 0
    acc = np.empty((4, rows * Wq + Wq), out.dtype)
    for blk in range(b0, b1):
        y0 = blk * rows
        y1 = min(oh, y0 + rows)
        L = (y1 - y0 - 1) * Wq + ow
        m = 0
        while m < M:
            n4 = 4 if M - m >= 4 else 1
            for u in range(4):
                acc[u, :L] = zero
            a0, a1, a2, a3 = acc[0], acc[1], acc[2], acc[3]
            for c in range(C):
                fc = flat[c]
                for i in range(kh):
                    if n4 == 1:
                        _taps_row(a0, fc, w, m * C + c, i, kw, sh, sw, dh, dw, Wq, L, False,
                                  y0)
                        continue
                    j = 0
                    while j < kw:
                        k = min(3, kw - j)
                        if kw - j == 4:
                            k = 2  # 4 = 2 + 2 (not 3 + 1)
                        _taps4(a0, a1, a2, a3, fc, w, m, c, C, i, j, k, sh, sw, dh, dw, Wq, L,
                               y0)
                        j += k
            for u in range(n4):
                b = bias[m + u] if bias.shape[0] > 0 else zero
                au = acc[u]
                if not has_res:
                    act_plane(au, Wq, out[m + u, y0:y1], b, act, p0, p1)
                    continue
                for y in range(y0, y1):
                    add = res[m + u, y] if has_res else out[m + u, y]
                    store_row(au[(y - y0) * Wq:], out[m + u, y], ow, b, add, has_res, act, p0,
                              p1, post, q0, q1)
            m += n4


def run(gd, w3, bias, x, out, act, params, res3, post) -> np.ndarray:
    """``out`` (N, M, oh, ow) of the convolution of ``x`` (N, C, H, W) with ``w3``
    (M*C, kh, kw), geometry ``gd`` = (kh, kw, sh, sw, dh, dw, ph, pw); ``res3`` None or
    (N, M, oh*ow); ``post`` = (code, params) of the activation after the residual."""
    N, C, H, W = x.shape
    M, oh, ow = out.shape[1:]
    nph, Hq, Wq = phase_shape(gd, H, W, oh, ow)
    rows = max(1, min(oh, BLOCK_VALUES // Wq))
    blocks = -(-oh // rows)
    macs_block = M * w3[0].size * C * rows * ow
    none = np.zeros((0, 1, 1), x.dtype)
    for n in range(N):
        phases = np.zeros((C, nph, Hq, Wq), x.dtype)
        xn = x[n]
        threads.parallel_for(lambda lo, hi, xn=xn, ph=phases: fill_phases(xn, ph, gd, lo, hi),
                             C, grain=max(1, threads.SPLIT_MIN_ELEMENTS // (H * W)))
        res = none if res3 is None else res3[n].reshape(out.shape[1:])
        threads.parallel_for(
            lambda lo, hi, o=out[n], res=res, ph=phases: direct_rows(
                ph, w3, o, gd, rows, bias, act, params, res, post[0], post[1], lo, hi),
            blocks, grain=max(1, CHUNK_MACS // max(1, macs_block)))
    return out
