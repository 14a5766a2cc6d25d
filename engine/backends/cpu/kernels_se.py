"""Squeeze-and-excitation as one CPU step (``step_fusion_conv.match_squeeze_excite``):
``x * act2(W2 act1(W1 mean_hw(x) + b1) + b2)`` on NCHW ``x``, one Numba call.

The unfused chain is five or six layers (GlobalAveragePool, two 1x1 Convs on a [N, C, 1, 1]
tensor, maybe a Div, and the Mul), each a kernel call and a run-loop dispatch for a few
hundred values, then a full pass over ``x`` for the Mul. Written with NumPy calls instead
of one kernel, the fused form was slower than the layers it replaced (0.40 against 0.31 ms
for mobilenetv3_cnn's six blocks).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.activation import _act, act_params, activation_of, carr
from engine.backends.cpu.conv_numba import FAST_FINITE_FREE


@njit(nogil=True, cache=True, fastmath=FAST_FINITE_FREE, error_model="numpy")
def se_nchw(x, w1, b1, act1, prm1, w2, b2, act2, prm2, out):
    """x, out (N, C, P); w1 (R, C), b1 (R,) or empty; w2 (C, R), b2 (C,) or empty; the
    activations as codes with their two parameters (``activation._act``)."""
    N, C, P = x.shape
    R = w1.shape[0]
    zero = prm1[0] - prm1[0]
    pooled = np.empty(C, x.dtype)
    hidden = np.empty(R, x.dtype)
    inv = (zero + 1) / P
    for n in range(N):
        for c in range(C):
            row = x[n, c]
            s = zero
            for p in range(P):
                s += row[p]
            pooled[c] = s * inv
        for r in range(R):
            acc = b1[r] if b1.shape[0] > 0 else zero
            wr = w1[r]
            for c in range(C):
                acc += wr[c] * pooled[c]
            hidden[r] = _act(acc, act1, prm1[0], prm1[1])
        for c in range(C):
            acc = b2[c] if b2.shape[0] > 0 else zero
            wc = w2[c]
            for r in range(R):
                acc += wc[r] * hidden[r]
            g = _act(acc, act2, prm2[0], prm2[1])
            src = x[n, c]
            dst = out[n, c]
            for p in range(P):
                dst[p] = src[p] * g


def squeeze_excite(x, l1, w1, b1, l2, w2, b2, act2=None):
    """The fused chain, or None (the layers then run one by one) for inputs it does not
    take: other dtypes or ranks, a gate whose channels differ from x's."""
    if x.dtype != np.float32 or x.ndim != 4 or w1.dtype != x.dtype or w2.dtype != x.dtype \
            or w1.ndim != 4 or w2.ndim != 4 or w1.shape[1] != x.shape[1] \
            or w2.shape[1] != w1.shape[0] or w2.shape[0] != x.shape[1]:
        return None
    N, C = x.shape[:2]
    key = (id(w1), id(b1), id(w2), id(b2), act2)
    prep = l1.__dict__.get("_cpu_se")
    if prep is None or prep[0] != key:  # weights as the kernel takes them, kept on the layer
        a1, a2 = activation_of(l1), act2 or activation_of(l2)
        empty = np.zeros(0, x.dtype)
        prep = (key, (w1, b1, w2, b2), carr(w1.reshape(w1.shape[0], C)),
                empty if b1 is None else carr(b1.reshape(-1)), a1[0], act_params(a1, x.dtype),
                carr(w2.reshape(C, -1)), empty if b2 is None else carr(b2.reshape(-1)), a2[0],
                act_params(a2, x.dtype))
        l1.__dict__["_cpu_se"] = prep
    out = np.empty_like(x)
    P = int(np.prod(x.shape[2:]))  # (not -1: an empty batch has no size to infer it from)
    se_nchw(carr(x).reshape(N, C, P), *prep[2:], out.reshape(N, C, P))
    return out
