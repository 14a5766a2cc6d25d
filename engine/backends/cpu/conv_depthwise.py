"""Direct depthwise 2-D convolution on NCHW planes (one input channel per group).

Each channel is copied once into zero-bordered stride-phase planes
(``phase[a * sw + b][r, t] = padded[r * sh + a, t * sw + b]``), written straight from the
input rows. Then every kernel tap is one contiguous multiply-add over the whole flattened
output plane (``L = (oh - 1) * Wq + ow`` values: ``Wq - ow`` extra columns a row that the
epilogue skips), and the taps of one kernel row are summed in the same pass (3, 5 and 7
wide as written-out sums), so the accumulator is read and written once per kernel row
instead of once per tap. The epilogue (bias, fused activation, residual and the activation
after it) writes the output rows from the accumulator in the loop forms ``store_row`` keeps
vectorised.

Inner loops index slices from 0 (never ``i + offset``): with a runtime offset Numba adds a
negative-index wraparound test that keeps LLVM from vectorising the loop.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.activation import act_plane, store_row
from engine.backends.cpu.conv_numba import FAST_FINITE_FREE
from engine.backends.cpu.spin import claim, helpers_back, open_gate

_OPTS = dict(nogil=True, cache=True, fastmath=FAST_FINITE_FREE, error_model="numpy")


def phase_shape(g, H: int, W: int, oh: int, ow: int) -> tuple[int, int, int]:
    """(phases, Hq, Wq) of the phase planes of geometry ``g`` (``depthwise_nchw``)."""
    kh, kw, sh, sw, dh, dw, ph, pw = g
    Hq = max(oh + ((kh - 1) * dh) // sh + 1, (H + ph + sh - 1) // sh)
    Wq = max(ow + ((kw - 1) * dw) // sw, (W + pw + sw - 1) // sw)
    return sh * sw, Hq, Wq


@njit(**_OPTS)
def _fill1(x, c, plane, ph, pw):
    """Unit strides: ``x[c]`` into the interior of the zero-bordered ``plane``."""
    C, H, W = x.shape
    for r in range(H):
        d = plane[r + ph, pw:]
        s = x[c, r]
        for t in range(W):
            d[t] = s[t]


@njit(**_OPTS)
def _fill2(x, c, phases, ph, pw):
    """Strides 2 x 2: ``x[c]`` into the four phase planes, each input row split into its
    even and odd columns in one pass over pairs (the odd-width last column afterwards:
    written inside the loop it made LLVM emit gathers, slow on this CPU)."""
    C, H, W = x.shape
    W2 = W // 2
    be, bo = pw % 2, (pw + 1) % 2
    ce, co = pw // 2, (pw + 1) // 2
    for r in range(H):
        a = (r + ph) % 2
        rr = (r + ph) // 2
        e = phases[2 * a + be, rr, ce:]
        o = phases[2 * a + bo, rr, co:]
        s = x[c, r]
        for t in range(W2):
            e[t] = s[2 * t]
            o[t] = s[2 * t + 1]
    if W % 2:
        for r in range(H):
            phases[2 * ((r + ph) % 2) + be, (r + ph) // 2, ce + W2] = x[c, r, W - 1]


@njit(**_OPTS)
def _fill_any(x, c, phases, ph, pw, sh, sw):
    """Any strides: ``x[c]`` into the ``sh * sw`` phase planes."""
    C, H, W = x.shape
    for r in range(H):
        rp = r + ph
        a, rr = rp % sh, rp // sh
        for b in range(sw):
            q0 = (b - pw) % sw  # first input column of phase b
            n = (W - q0 + sw - 1) // sw
            if n <= 0:
                continue
            dst = phases[a * sw + b, rr, (q0 + pw) // sw:]
            src = x[c, r, q0:]
            for t in range(n):
                dst[t] = src[t * sw]


@njit(inline="always", **_OPTS)
def _taps_row(acc, flat, w, m, i, kw, sh, sw, dh, dw, Wq, L, first, base):
    """``acc += sum_j w[m, i, j] * tap(i, j)`` over ``L`` values of the flat phase planes
    from phase row ``base`` (``acc =`` if ``first``)."""
    a, ai = (i * dh) % sh, base + (i * dh) // sh
    j = 0
    while j < kw:
        left = kw - j
        k = 3 if left >= 3 else left
        if left == 4:
            k = 2  # 4 = 2 + 2 (not 3 + 1)
        b0, o0 = (j * dw) % sw, (j * dw) // sw
        s0 = flat[a * sw + b0, ai * Wq + o0:]
        w0 = w[m, i, j]
        if k == 1:
            if first and j == 0:
                for t in range(L):
                    acc[t] = w0 * s0[t]
            else:
                for t in range(L):
                    acc[t] += w0 * s0[t]
        else:
            b1, o1 = ((j + 1) * dw) % sw, ((j + 1) * dw) // sw
            s1 = flat[a * sw + b1, ai * Wq + o1:]
            w1 = w[m, i, j + 1]
            if k == 2:
                if first and j == 0:
                    for t in range(L):
                        acc[t] = w0 * s0[t] + w1 * s1[t]
                else:
                    for t in range(L):
                        acc[t] += w0 * s0[t] + w1 * s1[t]
            else:
                b2, o2 = ((j + 2) * dw) % sw, ((j + 2) * dw) // sw
                s2 = flat[a * sw + b2, ai * Wq + o2:]
                w2 = w[m, i, j + 2]
                if first and j == 0:
                    for t in range(L):
                        acc[t] = w0 * s0[t] + w1 * s1[t] + w2 * s2[t]
                else:
                    for t in range(L):
                        acc[t] += w0 * s0[t] + w1 * s1[t] + w2 * s2[t]
        j += k


@njit(**_OPTS)
def depthwise_nchw(x, w, out, g, mult, bias, act, params, res, post, pparams, m0, m1):
    """Output channels ``m0:m1`` of a depthwise conv. x: (C, H, W); w: (M, kh, kw) with
    M = C * mult; out: (M, oh, ow); ``g`` = (kh, kw, sh, sw, dh, dw, ph, pw). Epilogue:
    ``post(act(conv + bias) + res)`` with ``res`` (M, oh, ow), or ``act(conv + bias)`` when
    ``res`` is empty (shape (0, 1, 1)); an empty ``bias`` adds nothing."""
    kh, kw, sh, sw, dh, dw, ph, pw = g
    C, H, W = x.shape
    M, oh, ow = out.shape
    p0, p1 = params[0], params[1]
    q0, q1 = pparams[0], pparams[1]
    zero = p0 - p0
    Hq = max(oh + ((kh - 1) * dh) // sh + 1, (H + ph + sh - 1) // sh)
    Wq = max(ow + ((kw - 1) * dw) // sw, (W + pw + sw - 1) // sw)
    phases = np.zeros((sh * sw, Hq, Wq), x.dtype)
    flat = phases.reshape(sh * sw, Hq * Wq)
    L = (oh - 1) * Wq + ow
    acc = np.empty(L + Wq, x.dtype)
    has_res = res.shape[0] > 0
    cprev = -1
    for m in range(m0, m1):
        c = m // mult
        if c != cprev:
            if sh == 1 and sw == 1:
                _fill1(x, c, phases[0], ph, pw)
            elif sh == 2 and sw == 2:
                _fill2(x, c, phases, ph, pw)
            else:
                _fill_any(x, c, phases, ph, pw, sh, sw)
            cprev = c
        for i in range(kh):
            _taps_row(acc, flat, w, m, i, kw, sh, sw, dh, dw, Wq, L, i == 0, 0)
        b = bias[m] if bias.shape[0] > 0 else zero
        if not has_res:
            act_plane(acc, Wq, out[m], b, act, p0, p1)
            continue
        for y in range(oh):
            store_row(acc[y * Wq:], out[m, y], ow, b, res[m, y], True, act, p0, p1, post, q0,
                      q1)


@njit(**_OPTS)
def depthwise_claimed(gate, generation, polls, chunk, x, w, out, g, mult, bias, act, params,
                      res, post, pparams):
    """``depthwise_nchw`` over output channels as a gated kernel (``threads.parallel_tasks``)."""
    open_gate(gate)
    M = out.shape[0]
    while True:
        m0 = claim(gate, generation, chunk, polls == 0)
        if m0 < 0:
            break
        depthwise_nchw(x, w, out, g, mult, bias, act, params, res, post, pparams, m0,
                       min(M, m0 + chunk))
    if polls > 0:
        helpers_back(gate, polls)
