"""Channel-blocked tensors (NCHW16c) for the CPU backend's blocked regions.

A blocked tensor is a float32 array (N, CB, H, W, 16), CB = ceil(C / 16): each pixel's 16
channels of a block are one AVX-512 vector, so a depthwise tap or a pointwise product is
whole-vector arithmetic at any stride, and the layers of a region (``step_fusion_blocked``)
hand these arrays to each other without changing layout. Lanes past C in the last block
hold finite values (zeros, or what zero weights made of them) and are never read into a
real channel: the pointwise products sum real input channels only.

Here: the layout changes at a region's edges (16 x 16 register transposes), the vector
activations of the kernels' epilogues, global average pooling and squeeze-and-excitation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import threads
from engine.backends.cpu.activation import (
    ACT_CLIP,
    ACT_HARDSIGMOID,
    ACT_LEAKY,
    ACT_NONE,
    ACT_RELU,
    ACT_XHARDSIGMOID,
    _act,
)
from engine.backends.cpu.conv_depthwise import _OPTS
from engine.backends.cpu.simd import (
    LANES,
    empty_aligned,
    vadd,
    vfma,
    vle_select,
    vload,
    vlt_select,
    vmul,
    vsplat,
    vstore,
    vtranspose16,
    vzero,
)

L = LANES
#: the fused activations ``vact`` applies to whole vectors (the others, with an exponential,
#: run as a vectorised loop over the values: ``nchw16c_conv._epilogue``)
VECTOR_ACTS = (ACT_NONE, ACT_RELU, ACT_LEAKY, ACT_CLIP, ACT_HARDSIGMOID, ACT_XHARDSIGMOID)
#: fewest values a layout change splits over the threads
SPLIT_VALUES = 400_000


def blocks(c: int) -> int:
    return -(-c // L)


def pad_lanes(b, n: int) -> np.ndarray:
    """A per-channel vector (a bias; None: zeros) padded with zeros to whole blocks."""
    padded = np.zeros(blocks(n) * L, np.float32)
    if b is not None:
        padded[:n] = np.reshape(b, -1)
    return padded


def empty_blocked(n: int, c: int, h: int, w: int) -> np.ndarray:
    """An uninitialised blocked tensor, 64-byte aligned (whole-vector loads never split)."""
    return empty_aligned((n, blocks(c), h, w, L))


@njit(inline="always")
def vact(v, act, a0, a1):
    """The fused activation ``act`` (``activation`` codes in VECTOR_ACTS) of a vector, with
    its parameters as vectors; a NaN lane stays NaN, as in the scalar ``activation._act``."""
    if act == ACT_NONE:
        return v
    zero = vzero()
    if act == ACT_RELU:
        return vle_select(v, zero, zero, v)
    if act == ACT_LEAKY:
        return vlt_select(v, zero, vmul(v, a0), v)
    if act == ACT_CLIP:
        return vlt_select(v, a0, a0, vlt_select(a1, v, a1, v))
    one = vsplat(np.float32(1.0))
    t = vfma(v, a0, a1)
    t = vlt_select(t, zero, zero, vlt_select(one, t, one, t))
    if act == ACT_HARDSIGMOID:
        return t
    return vmul(v, t)


@njit(**_OPTS)
def _to_blocked(x, y, t0, t1):
    """Tasks (image, block) of ``x`` (N, C, P) into ``y`` (N, CB, P, 16), flat views."""
    N, C, P = x.shape
    CB = y.shape[1]
    xf = x.reshape(-1)
    yf = y.reshape(-1)
    for t in range(t0, t1):
        n, cb = t // CB, t % CB
        c0 = cb * L
        nc = min(L, C - c0)
        src = (n * C + c0) * P
        dst = (n * CB + cb) * P * L
        p = 0
        if nc == L:
            while p + L <= P:
                vtranspose16(xf, src + p, P, yf, dst + p * L, L)
                p += L
        for q in range(p, P):
            for ln in range(L):
                yf[dst + q * L + ln] = xf[src + ln * P + q] if ln < nc else 0.0


@njit(**_OPTS)
def _from_blocked(y, x, t0, t1):
    """Tasks (image, block) of ``y`` (N, CB, P, 16) into ``x`` (N, C, P)."""
    N, C, P = x.shape
    CB = y.shape[1]
    xf = x.reshape(-1)
    yf = y.reshape(-1)
    for t in range(t0, t1):
        n, cb = t // CB, t % CB
        c0 = cb * L
        nc = min(L, C - c0)
        src = (n * CB + cb) * P * L
        dst = (n * C + c0) * P
        p = 0
        if nc == L:
            while p + L <= P:
                vtranspose16(yf, src + p * L, L, xf, dst + p, P)
                p += L
        for ln in range(nc):
            for q in range(p, P):
                xf[dst + ln * P + q] = yf[src + q * L + ln]


def to_blocked(x: np.ndarray) -> np.ndarray:
    """NCHW float32 ``x`` (N, C, H, W) as a new blocked tensor."""
    N, C, H, W = x.shape
    y = empty_blocked(N, C, H, W)
    x3 = np.ascontiguousarray(x).reshape(N, C, H * W)
    y4 = y.reshape(N, y.shape[1], H * W, L)
    _split(lambda lo, hi: _to_blocked(x3, y4, lo, hi), N * y.shape[1], x.size)
    return y


def from_blocked(y: np.ndarray, c: int, out: np.ndarray | None = None) -> np.ndarray:
    """The NCHW float32 array of blocked ``y`` with ``c`` real channels (written into
    ``out``, C-contiguous, when given)."""
    N, CB, H, W, _ = y.shape
    x = np.empty((N, c, H, W), np.float32) if out is None else out
    _split(lambda lo, hi: _from_blocked(y.reshape(N, CB, H * W, L), x.reshape(N, c, H * W),
                                        lo, hi), N * CB, x.size)
    return x


def _split(fn, tasks: int, values: int) -> None:
    if values < SPLIT_VALUES:
        fn(0, tasks)
    else:
        threads.parallel_for(fn, tasks, grain=max(1, tasks // (2 * threads.threads())))


@njit(**_OPTS)
def _mean_blocks(y, n, cb, P, inv):
    """The mean over the pixels of block ``cb`` of image ``n`` of ``y`` (N, CB, P, 16)."""
    yf = y.reshape(-1)
    base = (n * y.shape[1] + cb) * P * L
    s0 = s1 = s2 = s3 = vzero()
    p = 0
    while p + 4 <= P:
        o = base + p * L
        s0 = vadd(s0, vload(yf, o))
        s1 = vadd(s1, vload(yf, o + L))
        s2 = vadd(s2, vload(yf, o + 2 * L))
        s3 = vadd(s3, vload(yf, o + 3 * L))
        p += 4
    while p < P:
        s0 = vadd(s0, vload(yf, base + p * L))
        p += 1
    return vmul(vadd(vadd(s0, s1), vadd(s2, s3)), vsplat(inv))


@njit(**_OPTS)
def _global_pool(y, out):
    """``out`` (N, C) = the mean over pixels of blocked ``y`` (N, CB, P, 16)."""
    N, CB, P = y.shape[0], y.shape[1], y.shape[2]
    C = out.shape[1]
    lane = np.empty(L, np.float32)
    for n in range(N):
        for cb in range(CB):
            vstore(lane, 0, _mean_blocks(y, n, cb, P, np.float32(1.0 / P)))
            for ln in range(min(L, C - cb * L)):
                out[n, cb * L + ln] = lane[ln]


def global_average_pool(y: np.ndarray, c: int) -> np.ndarray:
    """GlobalAveragePool of blocked ``y``: an NCHW (N, c, 1, 1) array."""
    N, CB, H, W, _ = y.shape
    out = np.empty((N, c), np.float32)
    _global_pool(y.reshape(N, CB, H * W, L), out)
    return out.reshape(N, c, 1, 1)


@njit(**_OPTS)
def _se_gates(y, C, w1, b1, act1, q1, w2, b2, act2, q2, gates, wp, scaled):
    """``gates[n, :C] = act2(W2 act1(W1 mean(y[n]) + b1) + b2)`` for blocked y (N, CB, P,
    16); w1 (R, C), b1 (R,), w2 (C, R), b2 (C,); q1, q2 the activations' parameters;
    gates (N, CB * 16), the lanes past C left as they are. With one image and a non-empty
    ``wp`` (packed 1x1 weights [MB][CB*16][16]), ``scaled`` = wp times the gates."""
    N, CB, P = y.shape[0], y.shape[1], y.shape[2]
    R = w1.shape[0]
    pooled = np.zeros(CB * L, np.float32)
    hidden = np.empty(R, np.float32)
    inv = np.float32(1.0 / P)
    for n in range(N):
        for cb in range(CB):
            vstore(pooled, cb * L, _mean_blocks(y, n, cb, P, inv))
        for r in range(R):
            acc = b1[r]
            for c in range(C):
                acc += w1[r, c] * pooled[c]
            hidden[r] = _act(acc, act1, q1[0], q1[1])
        for c in range(C):
            acc = b2[c]
            for r in range(R):
                acc += w2[c, r] * hidden[r]
            gates[n, c] = _act(acc, act2, q2[0], q2[1])
    if N == 1 and wp.size:
        C16 = CB * L
        for i in range(wp.size // (C16 * L)):
            for c in range(C16):
                o = (i * C16 + c) * L
                vstore(scaled, o, vmul(vload(wp, o), vsplat(gates[0, c])))


@njit(**_OPTS)
def _scale_channels(y, gates, out):
    """``out = y * gates`` per image and channel, blocked (N, CB, P, 16), gates (N, CB*16)."""
    N, CB, P = y.shape[0], y.shape[1], y.shape[2]
    yf = y.reshape(-1)
    of = out.reshape(-1)
    for n in range(N):
        for cb in range(CB):
            g = vload(gates[n], cb * L)
            base = (n * CB + cb) * P * L
            for p in range(P):
                vstore(of, base + p * L, vmul(vload(yf, base + p * L), g))


_NONE = np.zeros(0, np.float32)


def se_gates(y: np.ndarray, c: int, se: tuple, wp=_NONE, scaled=_NONE) -> np.ndarray:
    """The squeeze-and-excitation gates (N, CB * 16) of blocked ``y`` (``se``: the weights
    and activations as ``_se_gates`` takes them, made by ``step_fusion_blocked``); lanes
    past ``c`` are 0. With one image and packed 1x1 weights ``wp``, also ``scaled`` = the
    weights times the gates (``blocked_step``'s fold)."""
    N, CB, H, W, _ = y.shape
    gates = np.zeros((N, CB * L), np.float32)
    _se_gates(y.reshape(N, CB, H * W, L), c, *se, gates, wp, scaled)
    return gates


def squeeze_excite(y: np.ndarray, c: int, se: tuple, alloc=empty_aligned) -> np.ndarray:
    """Squeeze-and-excitation of blocked ``y`` (see ``se_gates``); ``alloc(shape)`` gives
    the output array."""
    return scale_channels(y, se_gates(y, c, se), alloc)


def scale_channels(y: np.ndarray, gates: np.ndarray, alloc=empty_aligned) -> np.ndarray:
    """Blocked ``y`` times per-image, per-channel ``gates`` (N, CB * 16)."""
    N, CB, H, W, _ = y.shape
    out = alloc(y.shape)
    _scale_channels(y.reshape(N, CB, H * W, L), gates, out.reshape(N, CB, H * W, L))
    return out
