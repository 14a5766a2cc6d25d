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

from numba import njit

from engine.backends.cpu.activation import ACT_NONE, ACT_RELU, _act
from engine.backends.cpu.conv_numba import FAST_FINITE_FREE


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
            src = buf[m, y * Wp:]
            dst = out[m, y]
            if has_res:
                add = res[m, y]
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
