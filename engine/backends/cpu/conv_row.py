"""Small 1-D convolutions in one Numba call, vectorised over output channels.

A streaming speech model frames its audio with 1-D convolutions of a few dozen
multiply-adds per output (1 -> 32 channels, 32 taps, stride 16; 32 -> 32 channels, 3 taps,
stride 2) on 16-32 output steps. ``conv_blocked`` vectorises along the output row: a row of
16-32 steps fills one or two vectors, and a stride of 16 needs 16 phase planes filled first
(~4-5 us a layer, a fifth of it arithmetic). Here a vector holds 16 output channels at one
step instead: a tile of 16 channels x 8 steps keeps 8 zmm accumulators started from the
bias; per input channel and tap it loads one weight vector (packed contiguous) and
broadcasts 8 input values from a zero-padded copy of the input into 8 fused multiply-adds.
Each tile's 8 x 16 values are then written to the channel-major output and the activation
is applied to the whole output in place. Used for one image (``plan.alone``) while the
layer stays under ``MAX_MACS``; larger layers split over the threads in ``conv_blocked``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.activation import act_plane
from engine.backends.cpu.simd import LANES, aligned, vbcast, vfma, vload, vstore

#: output steps a tile computes at once (its accumulators)
STEPS = 8
#: most multiply-adds (channels x taps x outputs) a layer run here has
MAX_MACS = 1 << 19


def wanted(group: int, macs: int, n: int) -> bool:
    """Whether a float32 1-D convolution runs here: one group, one image, few multiply-adds."""
    return group == 1 and n == 1 and macs <= MAX_MACS


def pack_weights(w: np.ndarray) -> np.ndarray:
    """[M, C, K] weights as [ceil(M / 16)][C * K][16] (zero channels past M), aligned."""
    M, C, K = w.shape
    mb = -(-M // LANES)
    wp = np.zeros((mb * LANES, C * K), np.float32)
    wp[:M] = w.reshape(M, C * K)
    return aligned(wp.reshape(mb, LANES, C * K).transpose(0, 2, 1).reshape(-1))


def row_call(w: np.ndarray, bias: np.ndarray, act: int, params: np.ndarray, strides,
             dilations, pads_begin, pads_end, x_shape, out_len: int):
    """``conv_blocked.run_alone``'s tuple for this kernel: (kernel, output shape, input
    shape as 2-D, output shape as 2-D, arguments before the output, arguments after)."""
    M = w.shape[0]
    bp = np.zeros(-(-M // LANES) * LANES, np.float32)
    if bias.size:
        bp[:M] = bias
    before = (pack_weights(w.reshape(M, w.shape[1], -1)), bp, int(w.shape[-1]),
              int(strides[0]), int(dilations[0]), int(pads_begin[0]), int(pads_end[0]))
    return (conv_row, (1, M, out_len), tuple(x_shape[1:]), (M, out_len), before,
            (act, params))


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def conv_row(x, wp, bias, K, s, d, pb, pe, y, act, params):
    """y (M, T) = act(conv1d(x (C, L)) + bias) with the packed weights ``wp``
    (``pack_weights``) and bias padded to whole vectors; stride s, dilation d, pads pb, pe."""
    C, L = x.shape
    M, T = y.shape
    Lp = L + pb + pe
    xp = np.zeros(C * Lp, np.float32)
    for c in range(C):
        for i in range(L):
            xp[c * Lp + pb + i] = x[c, i]
    CK = C * K
    st = np.empty(STEPS * LANES, np.float32)
    for mb in range(-(-M // LANES)):
        m0 = mb * LANES
        bv = vload(bias, m0)
        t = 0
        while t < T:
            if t + STEPS <= T:
                a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = bv
                q = mb * CK * LANES
                for c in range(C):
                    for k in range(K):
                        wv = vload(wp, q)
                        q += LANES
                        p = c * Lp + t * s + k * d
                        a0 = vfma(vbcast(xp, p), wv, a0)
                        a1 = vfma(vbcast(xp, p + s), wv, a1)
                        a2 = vfma(vbcast(xp, p + 2 * s), wv, a2)
                        a3 = vfma(vbcast(xp, p + 3 * s), wv, a3)
                        a4 = vfma(vbcast(xp, p + 4 * s), wv, a4)
                        a5 = vfma(vbcast(xp, p + 5 * s), wv, a5)
                        a6 = vfma(vbcast(xp, p + 6 * s), wv, a6)
                        a7 = vfma(vbcast(xp, p + 7 * s), wv, a7)
                vstore(st, 0, a0)
                vstore(st, 16, a1)
                vstore(st, 32, a2)
                vstore(st, 48, a3)
                vstore(st, 64, a4)
                vstore(st, 80, a5)
                vstore(st, 96, a6)
                vstore(st, 112, a7)
                n = STEPS
            else:  # the last steps, one at a time
                a0 = bv
                q = mb * CK * LANES
                for c in range(C):
                    for k in range(K):
                        a0 = vfma(vbcast(xp, c * Lp + t * s + k * d), vload(wp, q), a0)
                        q += LANES
                vstore(st, 0, a0)
                n = 1
            for m in range(min(LANES, M - m0)):
                for j in range(n):
                    y[m0 + m, t + j] = st[j * LANES + m]
            t += n
    act_plane(y.reshape(-1), T, y, np.float32(0.0), act, params[0], params[1])
