"""Patch matrices of small stride-1 2-D convolutions built from whole shifted rows.

For stride 1, tap (a, b) of every output pixel reads the zero-padded plane at
``(y + a*dh) * Wp + x + b*dw``: over output positions ``p = y * Wp + x`` that is one
contiguous run of the flattened padded plane. So each patch-matrix row is a single copy of
``L = oh * Wp`` values, instead of im2col's ``oh`` short runs with their zeroed borders;
the product then has ``Wp - ow`` extra columns per output row, which the epilogue drops
while it writes the output. On small images (densenet's 128 -> 32 3x3 at 7x7 to 14x14)
im2col's row set-up cost more than the product itself.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit

from engine.backends.cpu import threads
from engine.backends.cpu.activation import store_row
from engine.backends.cpu.conv_numba import FAST_FINITE_FREE

#: use the "shift" kind (False: im2col; tests and benchmarks)
ENABLED = True
#: most output channels of a "shift" layer: measured on the zoo's untiled stride-1 layers,
#: M = 32 ran 1.4-1.9x faster (densenet121's 128 -> 32 3x3), the 5x5 ones with M = 32-64
#: 1.15-1.27x, and M >= 128 mostly 0.8-0.95x (the product's extra columns cost more than
#: the cheaper patch matrix saves)
MAX_M = 64


def wanted(M: int) -> bool:
    """Whether an untiled, ungrouped stride-1 2-D Conv with M output channels uses this."""
    return ENABLED and M <= MAX_M


class _Pad(threading.local):
    """A grow-only zero-padded plane per thread."""

    def __init__(self):
        self.buf = np.empty(0, np.float32)

    def get(self, n: int, dtype) -> np.ndarray:
        if self.buf.dtype != dtype or self.buf.size < n:
            self.buf = np.empty(n, dtype)
        return self.buf[:n]


_PAD = _Pad()


def run(sg, w2, bias, x, out, act, params, res3, post, scratch) -> np.ndarray:
    """``out`` (N, M, oh, ow) of the convolution of ``x`` (N, C, H, W) with ``w2`` (M, C*K)
    and geometry ``sg`` (``shift_cols``), with the epilogue of ``shift_epilogue``: bias,
    ``act``, and with ``res3`` (N, M, oh*ow) the residual and ``post`` = (code, params).
    ``scratch`` gives the patch matrix (``kernels_conv._SCRATCH``)."""
    N, C = x.shape[:2]
    M, L, Wp = w2.shape[0], sg[-1], sg[-2]
    K = w2.shape[1] // C
    psize = sg[6] * Wp + (sg[1] - 1) * sg[3]
    none = np.zeros((0, 1, 1), x.dtype)
    for n in range(N):
        cols = scratch.get((C * K, L), x.dtype)
        xn = x[n]
        threads.parallel_for(
            lambda lo, hi, xn=xn, cols=cols: shift_cols(xn, cols, sg,
                                                        _PAD.get(psize, x.dtype), lo, hi),
            C, grain=max(1, threads.SPLIT_MIN_ELEMENTS // (K * L)))
        buf = np.empty((M, L), x.dtype)
        threads.matmul(w2, cols, buf)
        res = none if res3 is None else res3[n].reshape(out.shape[1:])
        threads.parallel_for(
            lambda lo, hi, buf=buf, o=out[n], res=res: shift_epilogue(
                buf, o, Wp, bias, act, params, res, post[0], post[1], lo, hi),
            M, grain=max(1, 16384 // L))
    return out


@njit(nogil=True, cache=True)
def shift_cols(x, cols, g, pad, c0, c1):
    """Rows of channels ``c0:c1`` of the patch matrix. x: (C, H, W); cols: (C*kh*kw, L);
    ``g`` = (kh, kw, dh, dw, pt, pl, Hp, Wp, L); pad: scratch of Hp*Wp + (kw-1)*dw."""
    kh, kw, dh, dw, pt, pl, Hp, Wp, L = g
    C, H, W = x.shape
    pad[:] = 0
    for c in range(c0, c1):
        for y in range(H):
            dst = pad[(y + pt) * Wp + pl:]
            src = x[c, y]
            for q in range(W):
                dst[q] = src[q]
        for a in range(kh):
            for b in range(kw):
                src = pad[a * dh * Wp + b * dw:]
                dst = cols[(c * kh + a) * kw + b]
                for q in range(L):
                    dst[q] = src[q]


@njit(nogil=True, cache=True, fastmath=FAST_FINITE_FREE, error_model="numpy")
def shift_epilogue(buf, out, Wp, bias, act, params, res, post, pparams, m0, m1):
    """``out[m, y, x] = post(act(buf[m, y*Wp + x] + bias[m]) + res[m, y, x])`` for rows
    ``m0:m1`` (no residual when ``res`` is empty, no bias when ``bias`` is)."""
    M, oh, ow = out.shape
    p0, p1 = params[0], params[1]
    q0, q1 = pparams[0], pparams[1]
    zero = p0 - p0
    has_res = res.shape[0] > 0
    for m in range(m0, m1):
        b = bias[m] if bias.shape[0] > 0 else zero
        for y in range(oh):
            add = res[m, y] if has_res else out[m, y]
            store_row(buf[m, y * Wp:], out[m, y], ow, b, add, has_res, act, p0, p1, post,
                      q0, q1)
