"""A dense convolution from NCHW to a blocked tensor (``nchw16c``): the stem of a blocked
region (MobileNetV3's 3 -> 16 channels 3x3 at stride 2), which then needs no layout change.

A register tile is 8 outputs along a row x 16 output channels: per input channel and tap,
8 broadcasts of input values at the stride and one weight vector (weights packed once as
[M/16][C*kh*kw][16]). Few input channels make an im2col product short and wide; here every
value is read straight from the input plane. Borders go one output at a time with their
taps inside; the epilogue runs on each row just written (``nchw16c_conv._epilogue``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import threads
from engine.backends.cpu.activation import act_params
from engine.backends.cpu.conv_blocked import pack
from engine.backends.cpu.conv_depthwise import _OPTS
from engine.backends.cpu.nchw16c import L, blocks, pad_lanes
from engine.backends.cpu.nchw16c_conv import _NO_RES, _epilogue, split_grain
from engine.backends.cpu.simd import empty_aligned, vbcast, vfma, vload, vstore, vstore8
from engine.backends.cpu.spin import claim, helpers_back, open_gate

#: most input channels a dense convolution has to join a blocked region (wider ones run
#: faster as the NCHW kernels' products)
MAX_CHANNELS = 8


class Dense:
    """A dense convolution's weights packed as [M/16][C*kh*kw][16] (``nchw16c_dense``)."""

    def __init__(self, w: np.ndarray, b, act):
        m, c, kh, kw = w.shape
        self.wd, self.bias = pack(w, L).reshape(-1), pad_lanes(b, m)
        self.m, self.c, self.kernel = m, c, (kh, kw)
        self.act, self.prm = act[0], act_params(act, np.float32)



@njit(**_OPTS)
def _dense_row(x, xr, C, H, W, wd, wo, kh, kw, sw, pl, ky0, ky1, bb, y, yo, OW, lo, hi):
    """One output row of one output block before its epilogue; ``xr``: flat offset of
    (image, channel 0, input row of tap row 0)."""
    plane = H * W
    ox = 0
    while ox < OW:
        if ox >= lo and ox + 8 <= hi:
            s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = bb
            for c in range(C):
                for ky in range(ky0, ky1):
                    q0 = xr + c * plane + ky * W + ox * sw - pl
                    w0 = wo + ((c * kh + ky) * kw) * L
                    for kx in range(kw):
                        e = vload(wd, w0 + kx * L)
                        q = q0 + kx
                        s0 = vfma(vbcast(x, q), e, s0)
                        s1 = vfma(vbcast(x, q + sw), e, s1)
                        s2 = vfma(vbcast(x, q + 2 * sw), e, s2)
                        s3 = vfma(vbcast(x, q + 3 * sw), e, s3)
                        s4 = vfma(vbcast(x, q + 4 * sw), e, s4)
                        s5 = vfma(vbcast(x, q + 5 * sw), e, s5)
                        s6 = vfma(vbcast(x, q + 6 * sw), e, s6)
                        s7 = vfma(vbcast(x, q + 7 * sw), e, s7)
            o = yo + ox * L
            vstore8(y, o, s0, s1, s2, s3, s4, s5, s6, s7)
            ox += 8
        else:
            s0 = bb
            ix0 = ox * sw - pl
            kx0, kx1 = max(0, -ix0), min(kw, W - ix0)
            for c in range(C):
                for ky in range(ky0, ky1):
                    q0 = xr + c * plane + ky * W + ix0
                    w0 = wo + ((c * kh + ky) * kw) * L
                    for kx in range(kx0, kx1):
                        s0 = vfma(vbcast(x, q0 + kx), vload(wd, w0 + kx * L), s0)
            vstore(y, yo + ox * L, s0)
            ox += 1


@njit(**_OPTS)
def dense_tasks(x, C, H, W, wd, kh, kw, sh, sw, pt, pl, bias, act, prm, y, M, OH, OW, MB, RB,
                t0, t1):
    """Tasks (image, output block, band of RB output rows) of the convolution of flat NCHW
    x (N, C, H, W) into flat blocked y (N, MB, OH, OW, 16)."""
    lo = -(-pl // sw)
    hi = max(lo, (W - kw + pl) // sw + 1)
    bands = -(-OH // RB)
    ckk = C * kh * kw
    for t in range(t0, t1):
        n, band, mb = t // (MB * bands), (t // MB) % bands, t % MB
        bb = vload(bias, mb * L)
        wo = mb * ckk * L
        keep = M - mb * L if mb == MB - 1 else L
        for oy in range(band * RB, min(OH, (band + 1) * RB)):
            iy0 = oy * sh - pt
            ky0, ky1 = max(0, -iy0), min(kh, H - iy0)
            yo = ((n * MB + mb) * OH + oy) * OW * L
            _dense_row(x, n * C * H * W + iy0 * W, C, H, W, wd, wo, kh, kw, sw, pl, ky0, ky1,
                       bb, y, yo, OW, lo, hi)
            _epilogue(y, yo, OW, act, prm, _NO_RES, False, 0, prm, keep)


@njit(**_OPTS)
def dense_claimed(gate, generation, polls, chunk, ntask, x, C, H, W, wd, kh, kw, sh, sw, pt,
                  pl, bias, act, prm, y, M, OH, OW, MB, RB):
    """``dense_tasks`` as a gated kernel (``threads.parallel_tasks``)."""
    open_gate(gate)
    while True:
        t0 = claim(gate, generation, chunk, polls == 0)
        if t0 < 0:
            break
        dense_tasks(x, C, H, W, wd, kh, kw, sh, sw, pt, pl, bias, act, prm, y, M, OH, OW, MB,
                    RB, t0, min(ntask, t0 + chunk))
    if polls > 0:
        helpers_back(gate, polls)


#: fewest tasks a dense layer makes (bands of rows)
BANDS = 16


def dense(x: np.ndarray, dn, geo: tuple, out_hw: tuple[int, int],
          alloc=empty_aligned) -> np.ndarray:
    """The convolution ``dn`` (``blocked_step.Dense``) of NCHW float32 ``x`` as a blocked
    tensor: ``geo`` (kh, kw, sh, sw, pad top, pad left), output planes ``out_hw``;
    ``alloc(shape)`` gives the output."""
    N, C, H, W = x.shape
    OH, OW = out_hw
    y = alloc((N, blocks(dn.m), OH, OW, L))
    MB = y.shape[1]
    RB = max(1, -(-OH // max(1, -(-BANDS // max(1, N * MB)))))
    ntask = N * MB * -(-OH // RB)
    args = (np.ascontiguousarray(x).reshape(-1), C, H, W, dn.wd, *geo, dn.bias, dn.act, dn.prm,
            y.reshape(-1), dn.m, OH, OW, MB, RB)
    task_macs = L * RB * OW * C * geo[0] * geo[1]
    threads.parallel_tasks(
        lambda lo, hi: dense_tasks(*args, lo, hi),
        lambda gate, gen, polls, chunk: dense_claimed(gate, gen, polls, chunk, ntask, *args),
        ntask, grain=split_grain(ntask, task_macs))
    return y
