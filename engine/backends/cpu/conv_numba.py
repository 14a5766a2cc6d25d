"""Numba kernels of the CPU Conv/ConvTranspose (``kernels_conv``): im2col and col2im (the
direct depthwise convolution is ``conv_depthwise``).

Inner loops index slices from 0 (never ``i + offset``): with a runtime offset Numba adds a
negative-index wraparound test that keeps LLVM from vectorising the loop.
"""

from __future__ import annotations

from numba import njit


@njit(nogil=True, cache=True, inline="always")
def _rows_unit(x, row, c, a, b, off, q0, q1, g, s0, s1):
    """One patch-matrix row for unit strides and ow == W: output rows that read input rows
    y + b*dh - ph of one plane are one contiguous run of the flattened plane, so they are
    copied as one long run; then the few columns that wrapped into a neighbouring row (or
    fell off the plane) are zeroed."""
    kd, kh, kw, sd, sh, sw, dd, dh, dw, pd, ph, pw, od, oh, ow = g
    C, D, H, W = x.shape
    s = s0
    while s < s1:
        z = s // oh
        iz = z * sd - pd + a * dd
        z_end = min(s1, (z + 1) * oh)
        dst = row[(s - s0) * ow:(z_end - s0) * ow]
        if iz < 0 or iz >= D:
            dst[:] = 0
            s = z_end
            continue
        # valid output rows: 0 <= y - ph + b*dh < H
        y_lo, y_hi = s - z * oh, z_end - z * oh
        ya = min(max(y_lo, ph - b * dh), y_hi)
        yb = max(min(y_hi, H + ph - b * dh), ya)
        dst[:(ya - y_lo) * ow] = 0
        dst[(yb - y_lo) * ow:] = 0
        if yb > ya:
            plane = x[c, iz].reshape(-1)
            run = dst[(ya - y_lo) * ow:(yb - y_lo) * ow]
            start = (ya - ph + b * dh) * W + off
            t0 = max(0, -start)
            t1 = min(run.shape[0], H * W - start)
            run[:t0] = 0
            run[t1:] = 0
            if t1 > t0:
                src = plane[start + t0:start + t1]
                mid = run[t0:t1]
                for t in range(t1 - t0):
                    mid[t] = src[t]
            for y in range(yb - ya):
                rr = run[y * ow:(y + 1) * ow]
                for q in range(q0):
                    rr[q] = 0
                for q in range(q1, ow):
                    rr[q] = 0
        s = z_end


@njit(nogil=True, cache=True)
def im2col(x, cols, g, r0, r1, s0, s1):
    """Rows ``r0:r1`` of the patch matrix of output rows ``s0:s1`` (row index z * oh + y).
    x: (C, D, H, W); cols: (C*kd*kh*kw, (s1 - s0) * ow). ``g`` = kernel, strides, dilations,
    pads_begin and output size, 3 values each (15 ints). Copies index slices from 0 (never
    ``q + off``), so Numba adds no negative-index wraparound and unit-stride copies vectorise."""
    kd, kh, kw, sd, sh, sw, dd, dh, dw, pd, ph, pw, od, oh, ow = g
    C, D, H, W = x.shape
    K = kd * kh * kw
    for r in range(r0, r1):
        c = r // K
        t = r % K
        a = t // (kh * kw)
        b = (t // kw) % kh
        e = t % kw
        off = e * dw - pw
        q0 = min(ow, max(0, (-off + sw - 1) // sw))
        q1 = max(q0, min(ow, (W - 1 - off) // sw + 1))
        row = cols[r]
        if sh == 1 and sw == 1 and ow == W:
            _rows_unit(x, row, c, a, b, off, q0, q1, g, s0, s1)
            continue
        for s in range(s0, s1):
            z = s // oh
            y = s % oh
            iz = z * sd - pd + a * dd
            iy = y * sh - ph + b * dh
            dst = row[(s - s0) * ow:]
            if iz < 0 or iz >= D or iy < 0 or iy >= H:
                for q in range(ow):
                    dst[q] = 0
                continue
            for q in range(q0):
                dst[q] = 0
            if q1 > q0:
                src = x[c, iz, iy, q0 * sw + off::sw]
                mid = dst[q0:]
                for q in range(q1 - q0):
                    mid[q] = src[q]
            for q in range(q1, ow):
                dst[q] = 0


@njit(nogil=True, cache=True)
def col2im(cols, out, g, m0, m1):
    """Scatter-add of ConvTranspose columns. cols: (M*K, id*ih*iw); out: (M, OD, OH, OW), zeroed.
    ``g`` = kernel, strides, dilations, pads_begin and the *input* spatial size."""
    kd, kh, kw, sd, sh, sw, dd, dh, dw, pd, ph, pw, idd, ih, iw = g
    M, OD, OH, OW = out.shape
    K = kd * kh * kw
    for m in range(m0, m1):
        for t in range(K):
            a = t // (kh * kw)
            b = (t // kw) % kh
            e = t % kw
            r = m * K + t
            for z in range(idd):
                oz = z * sd - pd + a * dd
                if oz < 0 or oz >= OD:
                    continue
                for y in range(ih):
                    oy = y * sh - ph + b * dh
                    if oy < 0 or oy >= OH:
                        continue
                    base = (z * ih + y) * iw
                    for q in range(iw):
                        ox = q * sw - pw + e * dw
                        if 0 <= ox < OW:
                            out[m, oz, oy, ox] += cols[r, base + q]


#: fast-math without "nnan"/"ninf": those let LLVM assume no NaN or Inf ever occurs, which
#: drops the NaN tests of the fused activations (and broke their division checks)
FAST_FINITE_FREE = {"nsz", "arcp", "contract", "afn", "reassoc"}
