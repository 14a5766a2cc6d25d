"""Depthwise 2-D convolution with 16 channels per vector (planes up to 28x28, large kernels,
strided layers).

``conv_depthwise`` vectorises along a channel's output rows: on 7x7 to 28x28 planes its rows
are too short for whole vectors and its per-channel set-up dominates (MobileNetV3's 5x5
depthwise layers on 7x7 planes ran at 5-6 GFLOP/s), and strided layers first copy their
input into stride-phase planes. Here 16 channels are interleaved into one zero-bordered
plane of 16-float pixels (``[Hp][Wp][16]``, padding included), so every tap of every output
is one full-vector multiply-add, at any stride: a tile of 8 outputs along a row keeps 8
accumulators, and per tap loads one weight vector and 8 input vectors. Accumulators start
at the bias; with stride and dilation 1 the 8 input vectors slide along a row, one load a
tap (8 a tap: 5x5 and 7x7 layers 1.2-1.4x slower). The layout changes both ways are
16 x 16 register transposes (``simd.vtranspose16``; one value at a time they were a third
of the layer's time). Each 16-channel block goes to a channel-major scratch, and one call
per block applies the activation (and residual, and the activation after it) into the
output. Only channel multiplier 1 (M == C).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import threads
from engine.backends.cpu.activation import act_plane
from engine.backends.cpu.conv_blocked import add_residual_post
from engine.backends.cpu.conv_blocked import pack as pack_blocks
from engine.backends.cpu.conv_depthwise import _OPTS
from engine.backends.cpu.simd import vfma, vload, vstore, vstore8, vtranspose16
from engine.backends.cpu.spin import claim, helpers_back, open_gate

L = 16
#: outputs along a row per register tile
TW = 8
#: fewest multiply-adds per parallel chunk
CHUNK_MACS = 1_000_000
#: output planes up to this many positions run here whatever the kernel (7x7 to 14x14 planes
#: ran 1.2-1.4x faster than ``conv_depthwise`` before the transposes, 2-3x since; 3x3 on
#: 28x28 1.1-1.2x with the sliding inputs; on 56x56 the row kernel is 5% ahead)
MAX_POSITIONS = 784
#: fewest channels for a strided 3x3 layer on a larger plane to run here
MIN_STRIDED_CHANNELS = 32
#: use this kernel where ``wanted`` says so (False: the other kinds; tests and benchmarks)
ENABLED = True


def wanted(C: int, M: int, out_shape, kernel=(3, 3), strides=(1, 1)) -> bool:
    """Whether a depthwise Conv (M == C) runs here rather than in ``conv_depthwise``.
    Measured one thread against it on MobileNetV3's, ShuffleNet's and ConvNeXt's shapes:
    planes up to 28x28, 5x5 and 7x7 kernels run here (96 channels 5x5/2 on 28x28 70 -> 33
    us, 192 channels 7x7 on 28x28 726 -> 196 us, 240 channels 3x3 on 28x28 127 -> 104 us),
    and strided 3x3 ones with 32 channels or more (64 channels on 56x56 71 -> 65 us);
    stride-1 3x3 layers on larger planes stay (64 channels on 56x56: 104 against 110 us
    here), as do 16 channels 3x3/2 on 112x112 (62 against 89)."""
    if not ENABLED or M != C:
        return False
    if int(np.prod(out_shape)) <= MAX_POSITIONS or int(np.prod(kernel)) >= 25:
        return True
    return max(strides) > 1 and C >= MIN_STRIDED_CHANNELS


def pack(w: np.ndarray, bias) -> tuple[np.ndarray, np.ndarray]:
    """Weights (C, 1, kh, kw) as flat [ceil(C/16)][kh*kw][16] (``conv_blocked.pack`` with
    blocks of 16 channels) and the bias as [ceil(C/16)][16]; zeros pad both."""
    C = w.shape[0]
    bp = np.zeros(-(-C // L) * L, np.float32)
    if bias is not None and bias.size:
        bp[:C] = bias.reshape(-1)
    return pack_blocks(w, L).reshape(-1), bp


@njit(**_OPTS)
def _interleave(x, cb, xi, ph, pw, Wp, flat):
    """Channels ``cb * 16 ...`` of x (C, H, W) into the interior of xi ([Hp][Wp][16]);
    channels past C are written as zeros. Rows of 16 pixels or more go straight into place
    in 16 x 16 register transposes (a row's last 16 pixels overlap the ones before when its
    width is not a multiple of 16); narrower planes go through ``flat`` ([H * W][16]
    scratch), transposed whole, then row by row into place."""
    C, H, W = x.shape
    n = min(L, C - cb * L)
    c0 = cb * L
    HW = H * W
    if n == L:
        xf = x.reshape(-1)
        if W >= L:
            for y in range(H):
                d, s = ((y + ph) * Wp + pw) * L, c0 * HW + y * W
                for t0 in range(0, W - L + 1, L):
                    vtranspose16(xf, s + t0, HW, xi, d + t0 * L, L)
                if W % L:
                    vtranspose16(xf, s + W - L, HW, xi, d + (W - L) * L, L)
            return
        whole = HW - HW % L
        for p0 in range(0, whole, L):
            vtranspose16(xf, c0 * HW + p0, HW, flat, p0 * L, L)
        for p in range(whole, HW):
            for l in range(L):
                flat[p * L + l] = xf[(c0 + l) * HW + p]
        for y in range(H):
            d, f = ((y + ph) * Wp + pw) * L, y * W * L
            for t in range(W):
                vstore(xi, d + t * L, vload(flat, f + t * L))
        return
    for y in range(H):
        row = xi[((y + ph) * Wp + pw) * L:]
        for t in range(W):
            px = row[t * L:t * L + L]
            for l in range(n):
                px[l] = x[c0 + l, y, t]
            for l in range(n, L):
                px[l] = 0


@njit(**_OPTS)
def _zero_border(xi, H, W, ph, pw, Wp):
    """Zero what ``_interleave`` never writes in xi: the rows above and below the interior,
    the columns left and right of it, and the slack after the last row."""
    top, below = ph * Wp * L, (ph + H) * Wp * L
    xi[:top] = 0
    xi[below:] = 0
    for y in range(ph, ph + H):
        r = y * Wp * L
        xi[r:r + pw * L] = 0
        xi[r + (pw + W) * L:r + Wp * L] = 0


@njit(**_OPTS)
def dw16_blocks(x, wp, bp, kh, kw, sh, sw, dh, dw, ph, pw, out, act, params, res, post,
                pparams, b0, b1):
    """Channel blocks ``b0:b1`` of ``out`` (C, oh, ow) from x (C, H, W); wp, bp from
    ``pack``. Epilogue ``post(act(conv + bias) + res)``, or ``act(conv + bias)`` when ``res``
    is empty (shape (0, 1, 1))."""
    C, H, W = x.shape
    oh, ow = out.shape[1], out.shape[2]
    P = oh * ow
    Hp, Wp = max(H + ph, (oh - 1) * sh + (kh - 1) * dh + 1), max(W + pw, (ow - 1) * sw
                                                                  + (kw - 1) * dw + 1)
    T = kh * kw
    # a row's last tile reads up to TW - 1 outputs past the row: junk lanes, dropped
    xi = np.empty((Hp * Wp + TW * sw + 1) * L, np.float32)
    _zero_border(xi, H, W, ph, pw, Wp)
    sc = np.empty(L * P + TW * L, np.float32)
    il = np.empty((P + TW) * L, np.float32)  # a block's outputs as [P][16]
    flat = np.empty(H * W * L if W < L else 0, np.float32)  # a block's input as [H * W][16]
    out2 = out.reshape(C, P)
    has_res = res.shape[0] > 0
    res2 = res.reshape(res.shape[0], -1)
    p0, p1 = params[0], params[1]
    q0, q1 = pparams[0], pparams[1]
    unit = sw == 1 and dw == 1
    for cb in range(b0, b1):
        _interleave(x, cb, xi, ph, pw, Wp, flat)
        bv = vload(bp, cb * L)
        wbase = cb * T * L
        for oy in range(oh):
            for ox0 in range(0, ow, TW):
                a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = bv
                for i in range(kh):
                    rbase = ((oy * sh + i * dh) * Wp + ox0 * sw) * L
                    if unit:
                        # stride and dilation 1: tap j + 1 of output u is tap j of output
                        # u + 1, so the 8 input vectors slide by one (one load a tap, not 8)
                        x0, x1, x2, x3 = vload(xi, rbase), vload(xi, rbase + L), \
                            vload(xi, rbase + 2 * L), vload(xi, rbase + 3 * L)
                        x4, x5, x6, x7 = vload(xi, rbase + 4 * L), vload(xi, rbase + 5 * L), \
                            vload(xi, rbase + 6 * L), vload(xi, rbase + 7 * L)
                        for j in range(kw):
                            wv = vload(wp, wbase + (i * kw + j) * L)
                            a0 = vfma(wv, x0, a0)
                            a1 = vfma(wv, x1, a1)
                            a2 = vfma(wv, x2, a2)
                            a3 = vfma(wv, x3, a3)
                            a4 = vfma(wv, x4, a4)
                            a5 = vfma(wv, x5, a5)
                            a6 = vfma(wv, x6, a6)
                            a7 = vfma(wv, x7, a7)
                            x0, x1, x2, x3, x4, x5, x6 = x1, x2, x3, x4, x5, x6, x7
                            x7 = vload(xi, rbase + (8 + j) * L)
                        continue
                    for j in range(kw):
                        wv = vload(wp, wbase + (i * kw + j) * L)
                        q = rbase + j * dw * L
                        s = sw * L
                        a0 = vfma(wv, vload(xi, q), a0)
                        a1 = vfma(wv, vload(xi, q + s), a1)
                        a2 = vfma(wv, vload(xi, q + 2 * s), a2)
                        a3 = vfma(wv, vload(xi, q + 3 * s), a3)
                        a4 = vfma(wv, vload(xi, q + 4 * s), a4)
                        a5 = vfma(wv, vload(xi, q + 5 * s), a5)
                        a6 = vfma(wv, vload(xi, q + 6 * s), a6)
                        a7 = vfma(wv, vload(xi, q + 7 * s), a7)
                # outputs past the row's end land on the next row's first pixels, which
                # its own tiles write afterwards (the last row's in the slack at the end)
                q = (oy * ow + ox0) * L
                vstore8(il, q, a0, a1, a2, a3, a4, a5, a6, a7)
        # channel-major for the epilogue: 16 x 16 transposes, the last P % 16 one by one
        whole = P - P % L
        for q0 in range(0, whole, L):
            vtranspose16(il, q0 * L, L, sc, q0, P)
        for p in range(whole, P):
            for l in range(L):
                sc[l * P + p] = il[p * L + l]
        c0, n = cb * L, min(L, C - cb * L)
        dst = out2[c0:c0 + n]
        act_plane(sc, P, dst, p0 - p0, act, p0, p1)
        if has_res:
            add_residual_post(dst, res2[c0:c0 + n], post, q0, q1)


@njit(**_OPTS)
def dw16_claimed(gate, generation, polls, chunk, nblocks, x, wp, bp, kh, kw, sh, sw, dh, dw,
                 ph, pw, out, act, params, res, post, pparams):
    """``dw16_blocks`` as a gated kernel (``threads.parallel_tasks``)."""
    open_gate(gate)
    while True:
        b0 = claim(gate, generation, chunk, polls == 0)
        if b0 < 0:
            break
        dw16_blocks(x, wp, bp, kh, kw, sh, sw, dh, dw, ph, pw, out, act, params, res, post,
                    pparams, b0, min(nblocks, b0 + chunk))
    if polls > 0:
        helpers_back(gate, polls)


class DW16Plan:
    """What a depthwise Conv layer keeps for this kernel: geometry and packed weights."""

    __slots__ = ("g", "wp", "bp")

    def __init__(self, g, w: np.ndarray, bias):
        self.g = tuple(int(v) for v in g)  # kh, kw, sh, sw, dh, dw, ph, pw
        self.wp, self.bp = pack(w, bias)


def run(dp: DW16Plan, x, out, act, params, res3, post) -> np.ndarray:
    """``out`` (N, C, oh, ow) of the depthwise convolution of ``x`` (N, C, H, W)."""
    N, C = x.shape[:2]
    oh, ow = out.shape[2:]
    nblocks = -(-C // L)
    kh, kw = dp.g[:2]
    grain = max(1, CHUNK_MACS // max(1, L * kh * kw * oh * ow))
    none = np.zeros((0, 1, 1), x.dtype)
    for n in range(N):
        res = none if res3 is None else res3[n].reshape(out.shape[1:])
        args = (x[n], dp.wp, dp.bp, *dp.g, out[n], act, params, res, post[0], post[1])
        threads.parallel_tasks(
            lambda lo, hi, a=args: dw16_blocks(*a, lo, hi),
            lambda gate, gen, polls, chunk, a=args: dw16_claimed(gate, gen, polls, chunk,
                                                                 nblocks, *a),
            nblocks, grain=grain)
    return out
