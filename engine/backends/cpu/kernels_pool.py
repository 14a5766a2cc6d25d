"""Pooling on the CPU: one parallel Numba kernel for windowed max/average/Lp pools over
1-D, 2-D and 3-D inputs (run as 3-D), one for the global pools, a separable row kernel for
2-D max/average pools, and for the common 2-D shapes the kernels of ``pool_same`` (stride 1,
output of the input's size), ``pool_halve`` (2x2/stride 2), ``pool_max3s2`` and
``pool_avg3s2``."""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu import pool16, threads
from engine.backends.cpu.activation import carr
from engine.backends.cpu.pool_avg3s2 import avg3s2, avg3s2_claimed
from engine.backends.cpu.pool_global_vec import global_avg_f32
from engine.backends.cpu.pool_halve import pool_halve
from engine.backends.cpu.pool_max3s2 import max3s2, max3s2_claimed
from engine.backends.cpu.pool_max3s2_vec import max3s2_f32, max3s2_f32_claimed
from engine.backends.cpu.pool_same import pool_same, pool_same_claimed
from engine.backends.cpu.registry import cpu_kernel
from engine.backends.cpu.threads import SPLIT_MIN_ELEMENTS, parallel_for, stream_grain
from engine.errors import KernelError
from engine.ops.conv_pool import conv_geometry

MAX, AVG, LP = 0, 1, 2
#: the row kernel does ~3x a scale/shift's work per input element: it pays for the pool
#: thread's hand-off from about half as many elements
ROWS_SPLIT_ELEMENTS = 500_000
#: float32 max and average pools of many small planes take ``pool16`` (False: the row
#: kernels; tests, benchmarks)
POOL16 = True
#: ``pool_same`` makes four passes over each value (~0.55 ns a value on one core): it pays
#: for the hand-off from 100K values (inception_v2's 256 x 28 x 28 pool: 111 -> 65 us)
SAME_SPLIT_ELEMENTS = 100_000
#: float32 global average pools of planes up to this many values take ``pool_global_vec``'s
#: 16-lane float32 sums; larger planes keep the float64 sum (0: every plane does; tests, benchmarks)
VEC_GLOBAL_MAX = 4096
#: fast-math without "nnan"/"ninf", which would let LLVM drop the NaN tests of the max
FAST = {"nsz", "arcp", "contract", "afn", "reassoc"}


@njit(nogil=True, cache=True, inline="always")
def nan_max(a, b):
    """IEEE 754-2019 ``maximum``: NaN if either is NaN (Python's ``max`` keeps a number)."""
    return a if a > b or a != a else b


@njit(nogil=True, cache=True)
def pool3d(x, out, idx, g, mode, count_pad, p, col_major, r0, r1):
    """x: (NC, D, H, W); out, idx: (NC, od, oh, ow). ``g``: kernel, strides, dilations,
    pads_begin, pads_end (explicit ones, without the ceil_mode extra), 3 values each.
    ``idx`` gets flattened input offsets for MAX when it is not empty."""
    kd, kh, kw, sd, sh, sw, dd, dh, dw, pd, ph, pw, ed, eh, ew = g
    NC, D, H, W = x.shape
    _, od, oh, ow = out.shape
    want_idx = idx.size > 0
    for nc in range(r0, r1):
        for z in range(od):
            for y in range(oh):
                for q in range(ow):
                    acc = x[nc, 0, 0, 0] * 0
                    best = -np.inf
                    arg = -1
                    valid = 0
                    padded = 0
                    for a in range(kd):
                        iz = z * sd - pd + a * dd
                        if iz < -pd or iz >= D + ed:
                            continue
                        for b in range(kh):
                            iy = y * sh - ph + b * dh
                            if iy < -ph or iy >= H + eh:
                                continue
                            for e in range(kw):
                                ix = q * sw - pw + e * dw
                                if ix < -pw or ix >= W + ew:
                                    continue
                                padded += 1
                                if iz < 0 or iz >= D or iy < 0 or iy >= H or ix < 0 or ix >= W:
                                    continue
                                v = x[nc, iz, iy, ix]
                                valid += 1
                                if mode == 0:
                                    # the first NaN wins and stays (no number is > NaN)
                                    if v > best or arg < 0 or (v != v and best == best):
                                        best = v
                                        if col_major:
                                            arg = iz + D * (iy + H * ix)
                                        else:
                                            arg = (iz * H + iy) * W + ix
                                elif mode == 1:
                                    acc += v
                                else:
                                    acc += abs(v) ** p
                    if mode == 0:
                        out[nc, z, y, q] = best
                        if want_idx:
                            idx[nc, z, y, q] = nc * D * H * W + arg
                    elif mode == 1:
                        n = padded if count_pad else valid
                        out[nc, z, y, q] = acc / max(n, 1)
                    else:
                        out[nc, z, y, q] = acc ** (1.0 / p)


@njit(nogil=True, cache=True, fastmath=FAST)
def pool2d_planes(x, out, g, is_max, count_pad, r0, r1):
    """Max/average 2-D pooling. x: (NC, H, W); out: (NC, oh, ow); ``g``: kernel, strides,
    dilations, pads_begin and explicit pads_end, 2 values each.

    Separable, so every inner loop is contiguous and vectorises: per output row, the valid
    input rows of its window are reduced into a padded row buffer (border of -inf or 0),
    that row is reduced over the kernel width at stride 1, and the output takes every
    ``sw``-th value. Averages divide by the valid (or, with ``count_pad``, in-pad) rows
    times columns.
    """
    kh, kw, sh, sw, dh, dw, ph, pw, eh, ew = g
    NC, H, W = x.shape
    _, oh, ow = out.shape
    lo_y, hi_y = (-ph, H + eh) if count_pad else (0, H)
    lo_x, hi_x = (-pw, W + ew) if count_pad else (0, W)
    cw = np.zeros(ow, np.float64)
    for q in range(ow):
        for j in range(kw):
            if lo_x <= q * sw - pw + j * dw < hi_x:
                cw[q] += 1
    cy = np.zeros(oh, np.float64)
    for y in range(oh):
        for i in range(kh):
            if lo_y <= y * sh - ph + i * dh < hi_y:
                cy[y] += 1
    span = (kw - 1) * dw
    Wp = max(pw + W, (ow - 1) * sw + span + 1)
    L = (ow - 1) * sw + 1
    fill = -np.inf if is_max else 0.0
    row = np.full(Wp, fill, x.dtype)
    red = np.empty(L, x.dtype)
    vals = row[pw:pw + W]
    for nc in range(r0, r1):
        for y in range(oh):
            first = True
            for i in range(kh):
                r = y * sh - ph + i * dh
                if r < 0 or r >= H:
                    continue
                src = x[nc, r]
                if first:
                    for t in range(W):
                        vals[t] = src[t]
                    first = False
                elif is_max:
                    for t in range(W):
                        vals[t] = nan_max(vals[t], src[t])
                else:
                    for t in range(W):
                        vals[t] += src[t]
            if first:
                for t in range(W):
                    vals[t] = fill
            for t in range(L):
                red[t] = row[t]
            for j in range(1, kw):
                sj = row[j * dw:]
                if is_max:
                    for t in range(L):
                        red[t] = nan_max(red[t], sj[t])
                else:
                    for t in range(L):
                        red[t] += sj[t]
            o = out[nc, y]
            if is_max:
                for q in range(ow):
                    o[q] = red[q * sw]
            else:
                for q in range(ow):
                    o[q] = red[q * sw] / max(cy[y] * cw[q], 1.0)


@njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})
def global_pool(x, out, mode, p, r0, r1):
    """x: (NC, S) -> out: (NC,), rows r0:r1. One loop per mode and reassociation allowed, so
    the sums vectorise instead of waiting on one add after another."""
    S = x.shape[1]
    for r in range(r0, r1):
        row = x[r]
        if mode == 0:
            # a plain max (vectorised) and a separate NaN scan: a NaN-propagating max in
            # the one loop does not vectorise and runs 2x slower
            m = row[0]
            nans = 0
            for s in range(1, S):
                if row[s] > m:
                    m = row[s]
            for s in range(S):
                nans += row[s] != row[s]
            out[r] = np.nan if nans else m
        elif mode == 1:
            acc = 0.0
            for s in range(S):
                acc += row[s]
            out[r] = acc / S
        else:
            acc = 0.0
            for s in range(S):
                acc += abs(row[s]) ** p
            out[r] = acc ** (1.0 / p)


def _as3d(v, fill):
    return (fill,) * (3 - len(v)) + tuple(int(i) for i in v)


def _g2(gt: tuple[int, ...]) -> tuple[int, ...]:
    """The 2-D (last two axes) values of a 15-int 3-D geometry tuple."""
    return tuple(v for i, v in enumerate(gt) if i % 3)


def _overhangs(kh, kw, sh, sw, ph, pw, in_shape, out_shape) -> bool:
    """Whether some window of a 2-D pool reaches past the input (pads, ceil mode)."""
    (H, W), (oh, ow) = in_shape[1:], out_shape[1:]
    return bool(ph or pw or (oh - 1) * sh + kh > H + ph or (ow - 1) * sw + kw > W + pw)


def _pool(layer, x: np.ndarray, mode: int, p: float = 2.0, want_idx: bool = False):
    if x.ndim < 3 or x.ndim > 5:
        raise KernelError(f"layer {layer.name!r}: the CPU pools 1-D, 2-D and 3-D inputs only "
                          f"(got rank {x.ndim})")
    if x.dtype.kind != "f" and not (mode == MAX and x.dtype.kind in "iu"):
        raise KernelError(f"layer {layer.name!r}: {layer.op_type} does not take {x.dtype}")
    known = layer.__dict__.get("_cpu_pool")  # geometry per input shape, kept on the layer
    if known is None or known[0] != x.shape:
        g = conv_geometry(layer, x.shape)
        explicit_end = tuple(e - c for e, c in zip(g.pads_end, g.ceil_extra))
        known = x.shape, g, (*_as3d(g.kernel, 1), *_as3d(g.strides, 1), *_as3d(
            g.dilations, 1), *_as3d(g.pads_begin, 0), *_as3d(explicit_end, 0))
        layer.__dict__["_cpu_pool"] = known
    g, gt = known[1], known[2]
    N, C = x.shape[:2]
    if mode in (MAX, AVG) and not want_idx and x.dtype.kind == "f" and \
            tuple(g.kernel) == x.shape[2:] and not any(g.pads_begin) and \
            not any(g.pads_end) and all(d == 1 for d in g.dilations):
        # one window over the whole input (the 7x7 average pool closing ResNet, Inception,
        # DenseNet): the global pool's flat loops, not the windowed kernel's (ResNet-50's
        # 2048 planes: 110 -> 34 us)
        return _global(layer, x, mode)
    out = np.empty((N, C, *g.out_shape), x.dtype)
    if g.rank == 2 and mode in (MAX, AVG) and not want_idx and x.dtype.kind == "f":
        xs, os_ = carr(x).reshape(N * C, *x.shape[2:]), out.reshape(
            N * C, *g.out_shape)
        g2, cp = _g2(gt), bool(layer.attr("count_include_pad", 0))
        kh, kw, sh, sw, dh, dw, ph, pw, eh, ew = g2
        plane = xs[0].size
        if mode in (MAX, AVG) and dh == dw == 1 and x.dtype == np.float32 and POOL16 and \
                pool16.wanted(N * C, (kh, kw), (sh, sw), _overhangs(kh, kw, sh, sw, ph, pw,
                                                                    xs.shape, os_.shape),
                              os_.shape[1:]):
            nb = -(-(N * C) // pool16.L)
            is_max = mode == MAX
            threads.parallel_tasks(
                lambda lo, hi: pool16.pool16_blocks(xs, os_, kh, kw, sh, sw, ph, pw, eh, ew,
                                                    is_max, cp, lo, hi),
                lambda gate, gen, polls, chunk: pool16.pool16_claimed(
                    gate, gen, polls, chunk, nb, xs, os_, kh, kw, sh, sw, ph, pw, eh, ew,
                    is_max, cp),
                nb, stream_grain(nb, plane * pool16.L, ROWS_SPLIT_ELEMENTS))
            return out
        if sh == sw == dh == dw == 1 and kh == ph + eh + 1 and kw == pw + ew + 1 and \
                x.dtype in (np.float32, np.float64):  # stride 1, output of the input's size
            gs = (kh, kw, ph, pw, eh, ew)
            is_max = mode == MAX
            threads.parallel_tasks(
                lambda lo, hi: pool_same(xs, os_, gs, is_max, cp, lo, hi),
                lambda gate, gen, polls, chunk: pool_same_claimed(gate, gen, polls, chunk, xs,
                                                                  os_, gs, is_max, cp),
                N * C, stream_grain(N * C, plane, SAME_SPLIT_ELEMENTS))
            return out
        if (kh, kw, sh, sw, dh, dw, ph, pw, eh, ew) == (2, 2, 2, 2, 1, 1, 0, 0, 0, 0) and \
                xs.shape[1] % 2 == 0 and xs.shape[2] % 2 == 0 and \
                x.dtype in (np.float32, np.float64):
            parallel_for(lambda lo, hi: pool_halve(xs, os_, mode == MAX, lo, hi),
                         N * C, grain=stream_grain(N * C, plane))
            return out
        grain = stream_grain(N * C, plane, ROWS_SPLIT_ELEMENTS)
        if mode == MAX and (kh, kw, sh, sw, dh, dw) == (3, 3, 2, 2, 1, 1) and \
                x.dtype in (np.float32, np.float64):
            g4 = (ph, pw, eh, ew)
            one, gated = (max3s2_f32, max3s2_f32_claimed) if x.dtype == np.float32 \
                else (max3s2, max3s2_claimed)
            # gated (helpers start in microseconds, no GIL hand-off): SqueezeNet's first pool
            # 150 -> 124 us against parallel_for, one thread alone 150
            threads.parallel_tasks(
                lambda lo, hi: one(xs, os_, g4, lo, hi),
                lambda gate, gen, polls, chunk: gated(gate, gen, polls, chunk, xs, os_, g4),
                N * C, grain)
            return out
        if mode == AVG and (kh, kw, sh, sw, dh, dw) == (3, 3, 2, 2, 1, 1) and \
                x.dtype in (np.float32, np.float64):
            g4 = (ph, pw, eh, ew)
            threads.parallel_tasks(
                lambda lo, hi: avg3s2(xs, os_, g4, cp, lo, hi),
                lambda gate, gen, polls, chunk: avg3s2_claimed(gate, gen, polls, chunk, xs,
                                                               os_, g4, cp), N * C, grain)
            return out
        parallel_for(lambda lo, hi: pool2d_planes(xs, os_, g2, mode == MAX, cp, lo, hi),
                     N * C, grain=grain)
        return out
    xs = carr(x).reshape(N * C, *_as3d(x.shape[2:], 1))
    idx = np.empty(out.shape if want_idx else (0,), np.int64)
    o4 = out.reshape(N * C, *_as3d(g.out_shape, 1))
    i4 = idx.reshape(o4.shape) if want_idx else np.empty((0, 0, 0, 0), np.int64)
    cp, col = bool(layer.attr("count_include_pad", 0)), bool(layer.attr("storage_order", 0))
    parallel_for(lambda lo, hi: pool3d(xs, o4, i4, gt, mode, cp, float(p), col, lo, hi), N * C,
                 grain=max(1, SPLIT_MIN_ELEMENTS // max(1, xs[0].size)))
    return (out, idx) if want_idx else out


@cpu_kernel("MaxPool")
def MaxPool(layer, inputs):
    want = len(layer.outputs) > 1 and bool(layer.outputs[1])
    return _pool(layer, inputs[0], MAX, want_idx=want)


@cpu_kernel("AveragePool")
def AveragePool(layer, inputs):
    return _pool(layer, inputs[0], AVG)


@cpu_kernel("LpPool")
def LpPool(layer, inputs):
    return _pool(layer, inputs[0], LP, p=float(layer.attr("p", 2)))


def _global(layer, x: np.ndarray, mode: int, p: float = 2.0):
    if x.ndim < 3 or x.dtype.kind != "f":
        raise KernelError(f"layer {layer.name!r}: {layer.op_type} needs a float N, C, spatial... "
                          f"input, got {x.dtype}{list(x.shape)}")
    N, C = x.shape[:2]
    out = np.empty((N, C) + (1,) * (x.ndim - 2), x.dtype)
    # (the plane's size, not -1: an empty batch has no size to infer it from)
    x2, o1 = carr(x).reshape(N * C, int(np.prod(x.shape[2:]))), out.reshape(-1)
    S = x2.shape[1]
    if mode == AVG and x.dtype == np.float32 and 0 < S <= VEC_GLOBAL_MAX:
        xf = x2.reshape(-1)
        parallel_for(lambda lo, hi: global_avg_f32(xf, S, o1, lo, hi), N * C,
                     grain=max(1, SPLIT_MIN_ELEMENTS // S))
        return out
    parallel_for(lambda lo, hi: global_pool(x2, o1, mode, float(p), lo, hi), N * C,
                 grain=max(1, SPLIT_MIN_ELEMENTS // max(1, x2.shape[1])))
    return out


@cpu_kernel("GlobalMaxPool")
def GlobalMaxPool(layer, inputs):
    return _global(layer, inputs[0], MAX)


@cpu_kernel("GlobalAveragePool")
def GlobalAveragePool(layer, inputs):
    return _global(layer, inputs[0], AVG)


@cpu_kernel("GlobalLpPool")
def GlobalLpPool(layer, inputs):
    return _global(layer, inputs[0], LP, float(layer.attr("p", 2)))
