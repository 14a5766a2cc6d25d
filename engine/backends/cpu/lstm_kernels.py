"""LSTM recurrence kernels (Numba, 16-float register blocks) for ``rnn_fast``.

``lstm_recurrence`` runs the steps over input projections computed before; ``lstm_small``
runs a small one-direction layer in one call, its input projection included.

For a streaming speech model's layer (16 steps, 32 hidden units, one row) the product
``rnn_fast`` runs for the input projection of all steps was ~4 us, most of it the call
around it, and the layer's Python around the kernels as much again: ``lstm_small`` does
the projection, the initial state and the recurrence in one call. Used while a direction's
whole input projection stays under ``SMALL_MACS``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.fastmath import sigmoid_f32, tanh_f32
from engine.backends.cpu.simd import vadd, vbcast, vfma, vload, vstore, vzero

#: gate values per register block (4 vectors of 16)
BLOCK = 64
#: largest input projection (steps x rows x input x gates multiply-adds) run inside the
#: recurrence; above it one product for all steps at once is faster
SMALL_MACS = 1 << 20


@njit(inline="always", nogil=True, cache=True)
def _add_rows(a0, a1, a2, a3, b0, b1, b2, b3, v, p, q):
    """Two accumulator sets += v[k] * packed rows, k in the row's units (even and odd
    units into the two sets so consecutive fused multiply-adds do not wait on each other)."""
    n = v.shape[0]
    k = 0
    while k + 1 < n:
        s = vbcast(v, k)
        a0, a1 = vfma(s, vload(p, q), a0), vfma(s, vload(p, q + 16), a1)
        a2, a3 = vfma(s, vload(p, q + 32), a2), vfma(s, vload(p, q + 48), a3)
        s = vbcast(v, k + 1)
        b0, b1 = vfma(s, vload(p, q + 64), b0), vfma(s, vload(p, q + 80), b1)
        b2, b3 = vfma(s, vload(p, q + 96), b2), vfma(s, vload(p, q + 112), b3)
        q += 2 * BLOCK
        k += 2
    if k < n:
        s = vbcast(v, k)
        a0, a1 = vfma(s, vload(p, q), a0), vfma(s, vload(p, q + 16), a1)
        a2, a3 = vfma(s, vload(p, q + 32), a2), vfma(s, vload(p, q + 48), a3)
    return a0, a1, a2, a3, b0, b1, b2, b3


@njit(inline="always", nogil=True, cache=True)
def _block(acc, o, start, x, wp, h, rp):
    """acc[o:o + 64] = start[o:o + 64] + x @ W^T + h @ R^T for one register block of gate
    values, W and R packed as [G / BLOCK][units][BLOCK] (x may be empty)."""
    a0, a1, a2, a3 = vload(start, o), vload(start, o + 16), vload(start, o + 32), \
        vload(start, o + 48)
    b0 = b1 = b2 = b3 = vzero()
    a0, a1, a2, a3, b0, b1, b2, b3 = _add_rows(a0, a1, a2, a3, b0, b1, b2, b3, x, wp,
                                               o * x.shape[0])
    a0, a1, a2, a3, b0, b1, b2, b3 = _add_rows(a0, a1, a2, a3, b0, b1, b2, b3, h, rp,
                                               o * h.shape[0])
    vstore(acc, o, vadd(a0, b0))
    vstore(acc, o + 16, vadd(a1, b1))
    vstore(acc, o + 32, vadd(a2, b2))
    vstore(acc, o + 48, vadd(a3, b3))


@njit(inline="always", nogil=True, cache=True, fastmath={"contract", "arcp", "afn"})
def _gates(acc, cn, hn, yn, H):
    """The step's cell and hidden state from its gate pre-activations ``acc`` (i, o, f, c);
    a loop LLVM vectorises (the activations have no branches)."""
    for j in range(H):
        i = sigmoid_f32(acc[j])
        o = sigmoid_f32(acc[H + j])
        f = sigmoid_f32(acc[2 * H + j])
        cc = tanh_f32(acc[3 * H + j])
        cv = f * cn[j] + i * cc
        cn[j] = cv
        hv = o * tanh_f32(cv)
        hn[j] = hv
        yn[j] = hv


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract", "arcp", "afn"})
def lstm_recurrence(xw, rp, h, c, y, reverse):
    """xw: (seq, batch, G) input projections with both biases; rp: packed recurrent weights
    (``rnn_fast._weights``); h, c: (batch, h) initial state, updated in place; y: (seq, batch, h)
    outputs. Gate order i, o, f, c.

    ``h @ R^T`` runs block by block of 64 gate values held in registers (``simd``), two
    sets of accumulators for even and odd hidden units so the adds do not wait on each
    other: a step of a 48-unit layer went from 0.8 to ~0.3 us. Not a BLAS call: streaming
    models run a few rows per step, where a GEMM call per step costs more than its
    arithmetic."""
    seq, G = xw.shape[0], xw.shape[2]
    H = h.shape[1]
    acc = np.empty(G, np.float32)
    no_input = np.empty(0, np.float32)  # the projections are in xw already
    for s in range(seq):
        t = seq - 1 - s if reverse else s
        for n in range(h.shape[0]):
            xn, hn, cn, yn = xw[t, n], h[n], c[n], y[t, n]
            for o in range(0, G, BLOCK):
                _block(acc, o, xn, no_input, rp, hn, rp)
            _gates(acc, cn, hn, yn, H)


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract", "arcp", "afn"})
def lstm_small(x, wp, bias, rp, h0, c0, y, h, c, reverse):
    """One direction: x (seq, batch, input); wp, rp: input and recurrent weights packed as
    [G / BLOCK][units][BLOCK] (``rnn_fast._weights``); bias (G,) both biases summed; h0, c0
    (batch, hidden) initial state, or empty arrays for zeros; y (seq, batch, hidden) and the
    final state h, c (batch, hidden) are written. Gate order i, o, f, c."""
    seq, batch = x.shape[:2]
    H, G = h.shape[1], bias.shape[0]
    for n in range(batch):
        for j in range(H):
            h[n, j] = h0[n, j] if h0.shape[0] else np.float32(0.0)
            c[n, j] = c0[n, j] if c0.shape[0] else np.float32(0.0)
    acc = np.empty(G, np.float32)
    for s in range(seq):
        t = seq - 1 - s if reverse else s
        for n in range(batch):
            xn, hn, cn, yn = x[t, n], h[n], c[n], y[t, n]
            for o in range(0, G, BLOCK):
                _block(acc, o, bias, xn, wp, hn, rp)
            _gates(acc, cn, hn, yn, H)
