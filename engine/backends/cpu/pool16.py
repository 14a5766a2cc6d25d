"""2-D max and average pools of small planes with 16 channels per vector (float32).

The row kernels (``pool_same``, ``pool_max3s2``, ``pool_rows``) vectorise along a plane's
rows; on 7 x 7 to 28 x 28 planes a row is shorter than a vector or two, and per-row set-up
dominates: Inception's pools ran 3-8x onnxruntime's time, whose blocked layout has 16
channels in each vector. Here, as for ``conv_dw16``'s depthwise layers, 16 planes are
interleaved into one bordered plane of 16-float pixels (``[Hp][Wp][16]``, the padding and
any ceil-mode overhang held as -inf, or 0 for an average) by 16 x 16 register transposes;
the maximum (NaN-propagating, ``simd.vmax``) or sum of each window's columns along every
row, then of those over the window's rows, is taken with full vectors at any kernel and
stride (a sum then scaled by 1 / the window's count), and the outputs go back to their
planes by transposes again. Planes past the last
whole block of 16 are padded lanes, dropped.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.conv_depthwise import _OPTS
from engine.backends.cpu.conv_dw16 import _interleave
from engine.backends.cpu.simd import vadd, vload, vmax, vmul, vsplat, vstore, vtranspose16
from engine.backends.cpu.spin import claim, helpers_back, open_gate

L = 16
#: output planes up to this many positions pool here (larger planes keep the row kernels,
#: whose rows are then long enough for whole vectors)
MAX_POSITIONS = 784
#: stride-1 pools up to this many output positions (the row kernel's separable passes,
#: ``pool_same``, are as fast from 14 x 14 on)
MAX_SAME_POSITIONS = 64


def wanted(planes: int, kernel, strides, padded: bool, out_hw) -> bool:
    """Whether a float32 2-D max or average pool of ``planes`` planes runs here. Against the row
    kernels (two threads, alternated): 5 x 5 windows (YOLO's 256 x 20 x 20, stride 1: 322
    -> 125 us), padded strided pools with rows of fewer than 16 outputs (Inception's 320 x
    28 x 28 and 576 x 14 x 14, 3 x 3 / 2 with an end pad: 184 -> 112, 248 -> 91 us) and
    stride-1 pools on 7 x 7 planes (832 planes: 82 -> 45 us); the rest stays (256 x 28 x 28
    at stride 1: 130 here 205; 256 x 27 x 27, 3 x 3 / 2 unpadded: 131 here 142)."""
    positions = out_hw[0] * out_hw[1]
    if planes < L or positions > MAX_POSITIONS:
        return False
    if kernel[0] * kernel[1] >= 25:
        return True
    if max(strides) == 1:
        return positions <= MAX_SAME_POSITIONS
    return padded and out_hw[1] < L


@njit(**_OPTS)
def _fill_border(xi, H, W, ph, pw, Wp, value):
    """``value`` everywhere in xi ([Hp][Wp][16] and slack) that ``_interleave`` leaves."""
    xi[:ph * Wp * L] = value
    xi[(ph + H) * Wp * L:] = value
    for y in range(ph, ph + H):
        r = y * Wp * L
        xi[r:r + pw * L] = value
        xi[r + (pw + W) * L:r + Wp * L] = value


@njit(**_OPTS)
def _scales(n, size, stride, k, pad, end_pad, count_pad):
    """1 / the positions of each output's window along one axis: inside the input, or with
    ``count_pad`` inside the input and its explicit pads (``pool_avg3s2``'s counts). A
    window of padding only gets 0 (its sum is 0: the output 0) with ``count_pad``, else NaN
    (0 / 0)."""
    out = np.empty(n, np.float32)
    for i in range(n):
        lo = i * stride - pad
        inside = min(lo + k, size) - max(lo, 0)
        counted = min(lo + k, size + end_pad) - lo if count_pad else inside
        if inside <= 0:
            out[i] = np.float32(0.0) if count_pad else np.float32(np.nan)
        else:
            out[i] = np.float32(1.0) / np.float32(counted)
    return out


@njit(**_OPTS)
def pool16_blocks(x, out, kh, kw, sh, sw, ph, pw, eh, ew, is_max, count_pad, b0, b1):
    """Blocks ``b0:b1`` of 16 planes of out (NC, oh, ow) = the max (``is_max``) or average
    pool of x (NC, H, W) with kernel kh x kw, strides sh, sw, top/left pads ph, pw and
    explicit end pads eh, ew (the windows' other overhang reads the border: -inf, or 0 for
    the average, whose counts are ``_scales``')."""
    C, H, W = x.shape
    oh, ow = out.shape[1], out.shape[2]
    P = oh * ow
    Hp = max(H + ph, (oh - 1) * sh + kh)
    Wp = max(W + pw, (ow - 1) * sw + kw)
    xi = np.empty(Hp * Wp * L, np.float32)
    _fill_border(xi, H, W, ph, pw, Wp, np.float32(-np.inf) if is_max else np.float32(0.0))
    rs = _scales(oh, H, sh, kh, ph, eh, count_pad)
    cs = _scales(ow, W, sw, kw, pw, ew, count_pad)
    il = np.empty(P * L, np.float32)  # a block's outputs as [P][16]
    hm = np.empty(Hp * ow * L, np.float32)  # each row's maximum (sum) over windows' columns
    flat = np.empty(H * W * L if W < L else 0, np.float32)
    of = out.reshape(-1)
    whole = P - P % L
    for cb in range(b0, b1):
        _interleave(x, cb, xi, ph, pw, Wp, flat)
        # separable: the columns' maximum along each row, then the rows' (a chain of the
        # window's nine maxima per output ran 2x slower than the row kernels at stride 1)
        for y in range((oh - 1) * sh + kh):
            for ox in range(ow):
                q = (y * Wp + ox * sw) * L
                m = vload(xi, q)
                if is_max:
                    for j in range(1, kw):
                        m = vmax(m, vload(xi, q + j * L))
                else:
                    for j in range(1, kw):
                        m = vadd(m, vload(xi, q + j * L))
                vstore(hm, (y * ow + ox) * L, m)
        for oy in range(oh):
            for ox in range(ow):
                q = (oy * sh * ow + ox) * L
                m = vload(hm, q)
                if is_max:
                    for i in range(1, kh):
                        m = vmax(m, vload(hm, q + i * ow * L))
                else:
                    for i in range(1, kh):
                        m = vadd(m, vload(hm, q + i * ow * L))
                    m = vmul(m, vsplat(rs[oy] * cs[ox]))
                vstore(il, (oy * ow + ox) * L, m)
        c0, n = cb * L, min(L, C - cb * L)
        if n == L:
            for p0 in range(0, whole, L):
                vtranspose16(il, p0 * L, L, of, c0 * P + p0, P)
            for p in range(whole, P):
                for c in range(L):
                    of[(c0 + c) * P + p] = il[p * L + c]
        else:
            for c in range(n):
                for p in range(P):
                    of[(c0 + c) * P + p] = il[p * L + c]


@njit(nogil=True, cache=True)
def pool16_claimed(gate, generation, polls, chunk, nblocks, x, out, kh, kw, sh, sw, ph, pw,
                   eh, ew, is_max, count_pad):
    """``pool16_blocks`` as a gated kernel (``threads.parallel_tasks``)."""
    open_gate(gate)
    while True:
        b0 = claim(gate, generation, chunk, polls == 0)
        if b0 < 0:
            break
        pool16_blocks(x, out, kh, kw, sh, sw, ph, pw, eh, ew, is_max, count_pad, b0,
                      min(nblocks, b0 + chunk))
    if polls > 0:
        helpers_back(gate, polls)
