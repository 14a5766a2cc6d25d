"""3x3 max pools with stride 2 (the downsampling pools of SqueezeNet, Inception, ResNet and
DenseNet stems) on the CPU (``kernels_pool`` calls it for float32/float64 without indices).

Per output row one loop takes the maximum of the window's input rows (the last one repeated
when the padding leaves fewer than three: a repeat changes no maximum), one loop the maximum
of each output's three columns of that. Both index row views by their loop variable only, so
Numba's negative-index test drops out of the loop; the general row kernel's runtime kernel
size, padded buffer and pass per tap made these pools about 1.5x slower.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.pool_same import FAST, _mx


@njit(nogil=True, cache=True, fastmath=FAST)
def max3s2(x, out, g, r0, r1):
    """3x3/stride-2 max pool of planes r0:r1. x: (NC, H, W); out: (NC, oh, ow); ``g``: ph,
    pw and the explicit end pads eh, ew. A window of padding only gives -inf."""
    ph, pw, eh, ew = g
    NC, H, W = x.shape
    _, oh, ow = out.shape
    # output columns whose window lies inside the row: q0 <= q < q1
    q0 = min((pw + 1) // 2, ow)
    q1 = max(min(ow, (W - 3 + pw) // 2 + 1), q0)
    v = np.empty(W, x.dtype)
    for nc in range(r0, r1):
        for y in range(oh):
            a0 = max(2 * y - ph, 0)
            n = min(2 * y - ph + 3, H) - a0  # valid input rows a0, a0 + 1, ...
            o = out[nc, y]
            if n <= 0:
                o[:] = -np.inf
                continue
            ra = x[nc, a0]
            rb = x[nc, a0 + min(n - 1, 1)]
            rc = x[nc, a0 + n - 1]
            for t in range(W):
                v[t] = _mx(_mx(ra[t], rb[t]), rc[t])
            vs = v[2 * q0 - pw:]
            oc = o[q0:]
            for t in range(q1 - q0):
                oc[t] = _mx(_mx(vs[2 * t], vs[2 * t + 1]), vs[2 * t + 2])
            for q in range(q0):  # windows over the left edge, then the right one
                m = v[0]
                for c in range(1, min(2 * q - pw + 3, W)):
                    m = _mx(m, v[c])
                o[q] = m
            for q in range(q1, ow):
                c0 = 2 * q - pw
                m = -np.inf
                for c in range(max(c0, 0), min(c0 + 3, W)):
                    m = _mx(m, v[c])
                o[q] = m
