"""3x3 max pools with stride 2 on float32 planes, 16 outputs a step in registers.

``pool_max3s2``'s loops over a row's column pairs and outputs vectorise only for rows of
64 pairs or more (LLVM's vector body): SqueezeNet's pools on 55 x 55, 27 x 27 and 13 x 13
planes ran scalar, 3.2-4.8 ns an output, 2.8-3.8x onnxruntime's time. Here a step takes
the three window rows' maximum over 32 columns (two vectors a row), splits it into its even
and odd columns by lane shuffles, and takes each output's three columns as the even, the
odd and the next even value (``simd.vnext``: the even vector one lane on, the 33rd
column's maximum shifted in). All maxima propagate NaN (``simd.vmax``). A row's last
outputs are the last 16 again (overlapping). A row shorter than 16 outputs loads on into
the plane's next rows (those lanes are unused) and stores all 16 into its output row and on
into the next ones, written after it; a plane's last rows go through a scratch vector, and
where the loads would read past the input, single values are taken. Windows over a row's
edges (padding) go to ``with_edges_f32``: the same steps over a buffer holding the rows'
maximum per column with the padding as -inf (rows of 16 outputs or more: on narrower ones
the buffer's vector stores and the loads across them ran 1.4x slower than the scalar
loops of ``pool_max3s2._with_edges``, which take those).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.pool_max3s2 import _window_rows, _with_edges
from engine.backends.cpu.pool_same import _mx
from engine.backends.cpu.simd import LANES, vevens, vload, vmax, vnext, vpairmax, vstore
from engine.backends.cpu.spin import claim, helpers_back, open_gate


@njit(nogil=True, cache=True, error_model="numpy")
def max3s2_f32(x, out, g, r0, r1):
    """``pool_max3s2.max3s2`` for float32: planes r0:r1 of x (NC, H, W) -> out (NC, oh, ow);
    ``g``: ph, pw and the explicit end pads eh, ew."""
    ph, pw, eh, ew = g
    NC, H, W = x.shape
    _, oh, ow = out.shape
    if pw > 0 or (W - 3 + pw) // 2 + 1 < ow:  # windows over a row's edges
        if ow >= LANES:
            with_edges_f32(x, out, g, r0, r1)
        else:  # (narrower rows: the buffer's stores and loads cost more than they save)
            _with_edges(x, out, g, r0, r1)
        return
    xf, of = x.reshape(-1), out.reshape(-1)
    size = xf.shape[0]
    tmp = np.empty(LANES, np.float32)
    for nc in range(r0, r1):
        base, obase = nc * H * W, nc * oh * ow
        for y in range(oh):
            a0, b0, c0, k = _window_rows(y, ph, H)
            o = obase + y * ow
            if k <= 0:
                for q in range(ow):
                    of[o + q] = -np.inf
                continue
            ra, rb, rc = base + a0 * W, base + b0 * W, base + c0 * W
            far = max(ra, max(rb, rc))
            q = 0
            while q < ow:
                if q + LANES > ow and ow >= LANES:
                    q = ow - LANES  # the row's last 16 outputs, overlapping the step before
                c = 2 * q
                if far + c + 2 * LANES < size:
                    a = vmax(vmax(vload(xf, ra + c), vload(xf, rb + c)), vload(xf, rc + c))
                    c += LANES
                    b = vmax(vmax(vload(xf, ra + c), vload(xf, rb + c)), vload(xf, rc + c))
                    c += LANES
                    e = _mx(_mx(xf[ra + c], xf[rb + c]), xf[rc + c])
                    v = vmax(vpairmax(a, b), vnext(vevens(a, b), e))
                    if q + LANES <= ow or o + q + LANES <= obase + oh * ow:
                        # (past a short row's end into the plane's next output rows, which
                        # are computed after this one)
                        vstore(of, o + q, v)
                    else:
                        vstore(tmp, 0, v)
                        for t in range(ow - q):
                            of[o + q + t] = tmp[t]
                else:  # the input's last values: one output at a time
                    for t in range(q, min(q + LANES, ow)):
                        c = 2 * t
                        m = _mx(_mx(xf[ra + c], xf[rb + c]), xf[rc + c])
                        for d in range(1, 3):
                            m = _mx(m, _mx(_mx(xf[ra + c + d], xf[rb + c + d]),
                                           xf[rc + c + d]))
                        of[o + t] = m
                q += LANES


@njit(nogil=True, cache=True)
def max3s2_f32_claimed(gate, generation, polls, chunk, x, out, g):
    """``max3s2_f32`` as a gated kernel (``threads.parallel_tasks``) over all planes."""
    open_gate(gate)
    n = x.shape[0]
    while True:
        r0 = claim(gate, generation, chunk, polls == 0)
        if r0 < 0:
            break
        max3s2_f32(x, out, g, r0, min(n, r0 + chunk))
    if polls > 0:
        helpers_back(gate, polls)


@njit(nogil=True, cache=True, error_model="numpy")
def with_edges_f32(x, out, g, r0, r1):
    """``pool_max3s2._with_edges`` for float32 with explicit vectors: the window rows'
    maximum per column into a buffer that holds the row's padding as -inf, 16 columns a
    step, then 16 outputs a step as in ``max3s2_f32`` (its interleaved columns ran scalar:
    Inception's pools with an end pad, 2.3-3.9x onnxruntime's time)."""
    ph, pw, eh, ew = g
    NC, H, W = x.shape
    _, oh, ow = out.shape
    # v[i]: column i - pw; room for the last step's 33 columns, -inf past the row
    n = max(2 * max(ow, LANES) + 2, W + pw + 1)
    v = np.full(n, -np.inf, np.float32)
    tmp = np.empty(LANES, np.float32)
    xf, of = x.reshape(-1), out.reshape(-1)
    for nc in range(r0, r1):
        base, obase = nc * H * W, nc * oh * ow
        for y in range(oh):
            a0, b0, c0, k = _window_rows(y, ph, H)
            o = obase + y * ow
            if k <= 0:
                for q in range(ow):
                    of[o + q] = -np.inf
                continue
            ra, rb, rc = base + a0 * W, base + b0 * W, base + c0 * W
            c = 0
            while c + LANES <= W:
                vstore(v, pw + c, vmax(vmax(vload(xf, ra + c), vload(xf, rb + c)),
                                       vload(xf, rc + c)))
                c += LANES
            for t in range(c, W):
                v[pw + t] = _mx(_mx(xf[ra + t], xf[rb + t]), xf[rc + t])
            q = 0
            while q < ow:
                if q + LANES > ow and ow >= LANES:
                    q = ow - LANES
                s = 2 * q
                a, b = vload(v, s), vload(v, s + LANES)
                r = vmax(vpairmax(a, b), vnext(vevens(a, b), v[s + 2 * LANES]))
                if q + LANES <= ow:
                    vstore(of, o + q, r)
                else:
                    vstore(tmp, 0, r)
                    for t in range(ow - q):
                        of[o + q + t] = tmp[t]
                q += LANES
