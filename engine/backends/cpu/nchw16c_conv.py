"""Pointwise and depthwise convolutions on channel-blocked tensors (``nchw16c``).

Pointwise: a register tile is 8 pixels x 32 output channels (two blocks): per input channel
one broadcast of each pixel's value and two weight vectors, 16 fused multiply-adds, with the
weights packed once as [M/16][C16][16]. The epilogue (bias as the accumulators' start, the
fused activation, a residual and the activation after it) runs on the registers before the
one store. Depthwise: 8 outputs along a row in registers, per tap one weight vector and 8
input vectors at the stride, borders one output at a time with their valid taps only. Both
split their tasks over the threads as gated kernels (``threads.parallel_tasks``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import threads
from engine.backends.cpu.activation import ACT_NONE, act_row
from engine.backends.cpu.conv_depthwise import _OPTS
from engine.backends.cpu.nchw16c import VECTOR_ACTS, L, blocks, vact
from engine.backends.cpu.simd import (
    empty_aligned,
    vadd,
    vbcast,
    vfma,
    vload,
    vlt_select,
    vsplat,
    vstore,
    vstore8,
    vzero,
)
from engine.backends.cpu.spin import claim, helpers_back, open_gate

#: pixels of a pointwise task (8 register tiles); output blocks of a task
PIXELS, GROUP = 64, 4
#: fewest multiply-adds per parallel chunk (a gated split costs ~8 us)
CHUNK_MACS = 300_000
#: fewest depthwise tasks a layer makes (bands of rows where it has few blocks)
BANDS_PER_LAYER = 8
_NO_RES = np.zeros(L, np.float32)
#: the lane numbers 0..15, for the epilogue's mask of padding lanes
_LANES = np.arange(L, dtype=np.float32)
#: each thread takes one run of a region kernel's tasks (``split_grain``)
AFFINE_SPLIT = True


def split_grain(ntask: int, task_macs: int) -> int:
    """The grain of a region kernel's split: tasks run in order of their pixels, and with
    AFFINE_SPLIT each thread takes one run of them (the caller the first): the next layer's
    share then reads mostly what its own core wrote, not the other core's cache."""
    grain = max(1, CHUNK_MACS // max(1, task_macs))
    return max(grain, ntask // threads.threads()) if AFFINE_SPLIT else grain


@njit(**_OPTS)
def _epilogue(y, o, count, act, prm, res, has_res, post, pprm, keep):
    """The epilogue of ``count`` consecutive output vectors from flat offset ``o``, run on
    a chunk the product has just written (in cache): the activation, the residual and the
    activation after it; lanes at or past ``keep`` (the real channels of the block) are
    stored as 0. (In the product's own loop it ran the 8 x 32 tiles 1.5-3x slower.)
    Activations with an exponential (Sigmoid, SiLU, Tanh) run first as ``act_row``'s loop
    over the chunk's values, which LLVM vectorises."""
    if act not in VECTOR_ACTS:
        seg = y[o:o + count * L]
        act_row(seg, seg, count * L, prm[0] - prm[0], act, prm[0], prm[1])
        act = ACT_NONE
    a0, a1, b0, b1 = vsplat(prm[0]), vsplat(prm[1]), vsplat(pprm[0]), vsplat(pprm[1])
    lanes, lim, zero = vload(_LANES, 0), vsplat(np.float32(keep)), vzero()
    for i in range(count):
        q = o + i * L
        v = vact(vload(y, q), act, a0, a1)
        if has_res:
            v = vact(vadd(v, vload(res, q)), post, b0, b1)
        vstore(y, q, vlt_select(lanes, lim, v, zero))


@njit(**_OPTS)
def _tile(x, xo, P, CB, wp, w0, w1, bias, m0, m1, y, o0, o1):
    """Bias plus product of 8 pixels (from flat offset ``xo`` of block 0) x output blocks
    m0 and m1, weights from w0 and w1."""
    c0, c1 = vload(bias, m0 * L), vload(bias, m1 * L)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = c0
    u0 = u1 = u2 = u3 = u4 = u5 = u6 = u7 = c1
    for cb in range(CB):
        xc = xo + cb * P * L
        wc = cb * L * L
        for cl in range(L):
            e0, e1 = vload(wp, w0 + wc + cl * L), vload(wp, w1 + wc + cl * L)
            q = xc + cl
            v = vbcast(x, q)
            s0, u0 = vfma(v, e0, s0), vfma(v, e1, u0)
            v = vbcast(x, q + L)
            s1, u1 = vfma(v, e0, s1), vfma(v, e1, u1)
            v = vbcast(x, q + 2 * L)
            s2, u2 = vfma(v, e0, s2), vfma(v, e1, u2)
            v = vbcast(x, q + 3 * L)
            s3, u3 = vfma(v, e0, s3), vfma(v, e1, u3)
            v = vbcast(x, q + 4 * L)
            s4, u4 = vfma(v, e0, s4), vfma(v, e1, u4)
            v = vbcast(x, q + 5 * L)
            s5, u5 = vfma(v, e0, s5), vfma(v, e1, u5)
            v = vbcast(x, q + 6 * L)
            s6, u6 = vfma(v, e0, s6), vfma(v, e1, u6)
            v = vbcast(x, q + 7 * L)
            s7, u7 = vfma(v, e0, s7), vfma(v, e1, u7)
    vstore8(y, o0, s0, s1, s2, s3, s4, s5, s6, s7)
    vstore8(y, o1, u0, u1, u2, u3, u4, u5, u6, u7)


@njit(**_OPTS)
def _tile1(x, xo, P, CB, wp, w0, bias, m0, y, o0):
    """``_tile`` for one output block (a layer's last of an odd count): 8 broadcasts feed 8
    multiply-adds instead of 16, but no block is computed twice."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = vload(bias, m0 * L)
    for cb in range(CB):
        xc = xo + cb * P * L
        wc = w0 + cb * L * L
        for cl in range(L):
            e0 = vload(wp, wc + cl * L)
            q = xc + cl
            s0 = vfma(vbcast(x, q), e0, s0)
            s1 = vfma(vbcast(x, q + L), e0, s1)
            s2 = vfma(vbcast(x, q + 2 * L), e0, s2)
            s3 = vfma(vbcast(x, q + 3 * L), e0, s3)
            s4 = vfma(vbcast(x, q + 4 * L), e0, s4)
            s5 = vfma(vbcast(x, q + 5 * L), e0, s5)
            s6 = vfma(vbcast(x, q + 6 * L), e0, s6)
            s7 = vfma(vbcast(x, q + 7 * L), e0, s7)
    vstore8(y, o0, s0, s1, s2, s3, s4, s5, s6, s7)


@njit(**_OPTS)
def _pixel(x, xo, P, CB, wp, w0, w1, bias, m0, m1, y, o0, o1):
    """``_tile`` for one pixel."""
    s0, u0 = vload(bias, m0 * L), vload(bias, m1 * L)
    for cb in range(CB):
        xc = xo + cb * P * L
        wc = cb * L * L
        for cl in range(L):
            v = vbcast(x, xc + cl)
            s0 = vfma(v, vload(wp, w0 + wc + cl * L), s0)
            u0 = vfma(v, vload(wp, w1 + wc + cl * L), u0)
    vstore(y, o0, s0)
    if m1 != m0:
        vstore(y, o1, u0)


@njit(**_OPTS)
def pw_tasks(x, P, M, CB, wp, MB, bias, act, prm, res, has_res, post, pprm, y, t0, t1):
    """Tasks ``t0:t1`` of y = epilogue(W x) on flat blocked x (N, CB, P, 16), y and res
    (N, MB, P, 16); a task is (image, 64-pixel chunk, group of 4 output blocks). Every
    input lane is summed, the padding ones too (whole blocks unroll; their weights are 0),
    so lanes past the last output channel are written as exact zeros: 0 times an infinite
    value there would be NaN in every channel of the next product."""
    nchunk = -(-P // PIXELS)
    ngroup = -(-MB // GROUP)
    C16 = CB * L
    for t in range(t0, t1):
        n = t // (nchunk * ngroup)
        k = (t // ngroup) % nchunk
        g = t % ngroup
        p_lo, p_hi = k * PIXELS, min(P, (k + 1) * PIXELS)
        mb, m_hi = g * GROUP, min(MB, (g + 1) * GROUP)
        xn = n * CB * P * L
        while mb < m_hi:
            m1 = mb + 1 if mb + 1 < m_hi else mb
            keep0 = M - mb * L if mb == MB - 1 else L
            keep1 = M - m1 * L if m1 == MB - 1 else L
            y0, y1 = (n * MB + mb) * P * L, (n * MB + m1) * P * L
            w0, w1 = mb * C16 * L, m1 * C16 * L
            p = p_lo
            while p + 8 <= p_hi:
                if m1 != mb:
                    _tile(x, xn + p * L, P, CB, wp, w0, w1, bias, mb, m1, y, y0 + p * L,
                          y1 + p * L)
                else:
                    _tile1(x, xn + p * L, P, CB, wp, w0, bias, mb, y, y0 + p * L)
                p += 8
            while p < p_hi:  # the chunk's last pixels, one at a time
                _pixel(x, xn + p * L, P, CB, wp, w0, w1, bias, mb, m1, y, y0 + p * L,
                       y1 + p * L)
                p += 1
            _epilogue(y, y0 + p_lo * L, p_hi - p_lo, act, prm, res, has_res, post, pprm,
                      keep0)
            if m1 != mb:
                _epilogue(y, y1 + p_lo * L, p_hi - p_lo, act, prm, res, has_res, post, pprm,
                          keep1)
            mb = m1 + 1


@njit(**_OPTS)
def pw_claimed(gate, generation, polls, chunk, ntask, x, P, M, CB, wp, MB, bias, act, prm,
               res, has_res, post, pprm, y):
    """``pw_tasks`` as a gated kernel (``threads.parallel_tasks``)."""
    open_gate(gate)
    while True:
        t0 = claim(gate, generation, chunk, polls == 0)
        if t0 < 0:
            break
        pw_tasks(x, P, M, CB, wp, MB, bias, act, prm, res, has_res, post, pprm, y, t0,
                 min(ntask, t0 + chunk))
    if polls > 0:
        helpers_back(gate, polls)




def pointwise(x: np.ndarray, c: int, pw, res: np.ndarray | None,
              alloc=empty_aligned) -> np.ndarray:
    """The 1x1 convolution ``pw`` (``blocked_step.Pointwise``) of blocked ``x`` with ``c``
    real channels, plus blocked ``res`` when given; ``alloc(shape)`` gives the output."""
    N, CB, H, W, _ = x.shape
    P = H * W
    y = alloc((N, blocks(pw.m), H, W, L))
    MB = y.shape[1]
    ntask = N * -(-P // PIXELS) * -(-MB // GROUP)
    has_res = res is not None
    args = (x.reshape(-1), P, pw.m, CB, pw.wp, MB, pw.bias, pw.act, pw.prm,
            res.reshape(-1) if has_res else _NO_RES, has_res, pw.post, pw.pprm, y.reshape(-1))
    task_macs = PIXELS * GROUP * L * c
    threads.parallel_tasks(
        lambda lo, hi: pw_tasks(*args, lo, hi),
        lambda gate, gen, polls, chunk: pw_claimed(gate, gen, polls, chunk, ntask, *args),
        ntask, grain=split_grain(ntask, task_macs))
    return y


@njit(**_OPTS)
def _dw_row(x, xr, W, wd, wo, kh, kw, sw, pl, ky0, ky1, rs, bb, y, yo, OW, lo, hi):
    """One output row of a depthwise block, before its epilogue: 8 outputs at a time where
    every tap is inside the row (columns [lo, hi)), the border ones alone with their taps
    inside. ``xr``: flat offset of input row 0 of the block, ``rs``: its row stride."""
    st = sw * L
    ox = 0
    while ox < OW:
        if ox >= lo and ox + 8 <= hi:
            s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = bb
            for ky in range(ky0, ky1):
                q0 = xr + ky * rs + (ox * sw - pl) * L
                for kx in range(kw):
                    e = vload(wd, wo + (ky * kw + kx) * L)
                    q = q0 + kx * L
                    s0 = vfma(vload(x, q), e, s0)
                    s1 = vfma(vload(x, q + st), e, s1)
                    s2 = vfma(vload(x, q + 2 * st), e, s2)
                    s3 = vfma(vload(x, q + 3 * st), e, s3)
                    s4 = vfma(vload(x, q + 4 * st), e, s4)
                    s5 = vfma(vload(x, q + 5 * st), e, s5)
                    s6 = vfma(vload(x, q + 6 * st), e, s6)
                    s7 = vfma(vload(x, q + 7 * st), e, s7)
            o = yo + ox * L
            vstore8(y, o, s0, s1, s2, s3, s4, s5, s6, s7)
            ox += 8
        else:
            s0 = bb
            ix0 = ox * sw - pl
            kx0, kx1 = max(0, -ix0), min(kw, W - ix0)
            for ky in range(ky0, ky1):
                q0 = xr + ky * rs + ix0 * L
                for kx in range(kx0, kx1):
                    s0 = vfma(vload(x, q0 + kx * L), vload(wd, wo + (ky * kw + kx) * L), s0)
            vstore(y, yo + ox * L, s0)
            ox += 1


@njit(**_OPTS)
def dw_tasks(x, H, W, wd, kh, kw, sh, sw, pt, pl, bias, act, prm, y, OH, OW, CB, RB, t0, t1):
    """Tasks (image, block, band of RB output rows) of the depthwise convolution of flat
    blocked x (N, CB, H, W, 16) into y (N, CB, OH, OW, 16); wd [CB][kh*kw][16]."""
    lo = -(-pl // sw)  # outputs whose taps all fall inside the row: [lo, hi)
    hi = max(lo, (W - kw + pl) // sw + 1)
    bands = -(-OH // RB)
    for t in range(t0, t1):
        n, band, cb = t // (CB * bands), (t // CB) % bands, t % CB
        bb = vload(bias, cb * L)
        wo = cb * kh * kw * L
        xb = (n * CB + cb) * H * W * L
        for oy in range(band * RB, min(OH, (band + 1) * RB)):
            iy0 = oy * sh - pt
            ky0, ky1 = max(0, -iy0), min(kh, H - iy0)
            yo = ((n * CB + cb) * OH + oy) * OW * L
            _dw_row(x, xb + iy0 * W * L, W, wd, wo, kh, kw, sw, pl, ky0, ky1, W * L, bb, y, yo,
                    OW, lo, hi)
            _epilogue(y, yo, OW, act, prm, _NO_RES, False, 0, prm, L)


@njit(**_OPTS)
def dw_claimed(gate, generation, polls, chunk, ntask, x, H, W, wd, kh, kw, sh, sw, pt, pl,
               bias, act, prm, y, OH, OW, CB, RB):
    """``dw_tasks`` as a gated kernel (``threads.parallel_tasks``)."""
    open_gate(gate)
    while True:
        t0 = claim(gate, generation, chunk, polls == 0)
        if t0 < 0:
            break
        dw_tasks(x, H, W, wd, kh, kw, sh, sw, pt, pl, bias, act, prm, y, OH, OW, CB, RB, t0,
                 min(ntask, t0 + chunk))
    if polls > 0:
        helpers_back(gate, polls)


def depthwise(x: np.ndarray, dw, geo: tuple, out_hw: tuple[int, int],
              alloc=empty_aligned) -> np.ndarray:
    """The depthwise convolution ``dw`` (``blocked_step.Depthwise``) of blocked ``x``:
    ``geo`` (kh, kw, sh, sw, pad top, pad left), output planes ``out_hw``; ``alloc(shape)``
    gives the output."""
    N, CB, H, W, _ = x.shape
    OH, OW = out_hw
    y = alloc((N, CB, OH, OW, L))
    # bands of rows so that even one block of one image splits over the threads
    RB = max(1, -(-OH // max(1, -(-BANDS_PER_LAYER // max(1, N * CB)))))
    ntask = N * CB * -(-OH // RB)
    args = (x.reshape(-1), H, W, dw.wd, *geo, dw.bias, dw.act, dw.prm, y.reshape(-1), OH,
            OW, CB, RB)
    task_macs = L * RB * OW * geo[0] * geo[1]
    threads.parallel_tasks(
        lambda lo, hi: dw_tasks(*args, lo, hi),
        lambda gate, gen, polls, chunk: dw_claimed(gate, gen, polls, chunk, ntask, *args),
        ntask, grain=split_grain(ntask, task_macs))
    return y
