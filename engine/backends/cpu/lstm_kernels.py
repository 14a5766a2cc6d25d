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
def _fma8(a0, a1, a2, a3, b0, b1, b2, b3, s, t, w0, w1, w2, w3, w4, w5, w6, w7):
    """Two units' multiply-adds into the two accumulator sets (vectors only: an array
    passed to an inlined function is reference-counted at each call)."""
    return (vfma(s, w0, a0), vfma(s, w1, a1), vfma(s, w2, a2), vfma(s, w3, a3),
            vfma(t, w4, b0), vfma(t, w5, b1), vfma(t, w6, b2), vfma(t, w7, b3))


@njit(inline="always", nogil=True, cache=True)
def _fma4(a0, a1, a2, a3, s, w0, w1, w2, w3):
    """One unit's multiply-adds into the first accumulator set (an odd unit count's last)."""
    return vfma(s, w0, a0), vfma(s, w1, a1), vfma(s, w2, a2), vfma(s, w3, a3)


@njit(nogil=True, cache=True, fastmath={"contract", "arcp", "afn"})
def _gates(acc, cn, hn, yn, H):
    """The step's cell and hidden state from its gate pre-activations ``acc`` (i, o, f, c);
    a loop LLVM vectorises (the activations have no branches; with offsets into whole
    arrays instead of these views it did not)."""
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
def _steps(start, start_step, x, nx, wp, rp, h, c, y, batch, reverse):
    """Every step of one direction, all arrays flat: the gate pre-activations of step t,
    row n are ``start[(t * batch + n) * start_step:][:G]`` (``start_step`` 0: the same
    values, the bias, for all) + ``x[(t * batch + n) * nx:][:nx] @ W^T`` + ``h[n] @ R^T``,
    W and R packed as [G / BLOCK][units][BLOCK]; h, c (batch, H) are updated, y (seq,
    batch, H) written.

    Block by block of 64 gate values held in registers (``simd``), two sets of accumulators
    for even and odd units so the adds do not wait on each other. One function with no
    array passed to an inlined helper: blocks as helpers taking array views made Numba count
    references around each (ten runtime calls and all 16 vectors spilled per block, 3x
    the block's arithmetic for 32 units)."""
    G = rp.shape[0] // (c.shape[0] // batch)
    H = c.shape[0] // batch
    seq = y.shape[0] // (batch * H)
    acc = np.empty(G, np.float32)
    for s in range(seq):
        t = seq - 1 - s if reverse else s
        for n in range(batch):
            so, xo, ho = (t * batch + n) * start_step, (t * batch + n) * nx, n * H
            for o in range(0, G, BLOCK):
                a0, a1 = vload(start, so + o), vload(start, so + o + 16)
                a2, a3 = vload(start, so + o + 32), vload(start, so + o + 48)
                b0 = b1 = b2 = b3 = vzero()
                # the input's units, then the hidden state's (written out twice: a loop
                # over the two would put the arrays in a tuple, counted per block)
                q, k = o * nx, 0
                while k + 1 < nx:
                    a0, a1, a2, a3, b0, b1, b2, b3 = _fma8(
                        a0, a1, a2, a3, b0, b1, b2, b3, vbcast(x, xo + k),
                        vbcast(x, xo + k + 1), vload(wp, q), vload(wp, q + 16),
                        vload(wp, q + 32), vload(wp, q + 48), vload(wp, q + 64),
                        vload(wp, q + 80), vload(wp, q + 96), vload(wp, q + 112))
                    q += 2 * BLOCK
                    k += 2
                if k < nx:
                    a0, a1, a2, a3 = _fma4(a0, a1, a2, a3, vbcast(x, xo + k), vload(wp, q),
                                           vload(wp, q + 16), vload(wp, q + 32),
                                           vload(wp, q + 48))
                q, k = o * H, 0
                while k + 1 < H:
                    a0, a1, a2, a3, b0, b1, b2, b3 = _fma8(
                        a0, a1, a2, a3, b0, b1, b2, b3, vbcast(h, ho + k),
                        vbcast(h, ho + k + 1), vload(rp, q), vload(rp, q + 16),
                        vload(rp, q + 32), vload(rp, q + 48), vload(rp, q + 64),
                        vload(rp, q + 80), vload(rp, q + 96), vload(rp, q + 112))
                    q += 2 * BLOCK
                    k += 2
                if k < H:
                    a0, a1, a2, a3 = _fma4(a0, a1, a2, a3, vbcast(h, ho + k), vload(rp, q),
                                           vload(rp, q + 16), vload(rp, q + 32),
                                           vload(rp, q + 48))
                vstore(acc, o, vadd(a0, b0))
                vstore(acc, o + 16, vadd(a1, b1))
                vstore(acc, o + 32, vadd(a2, b2))
                vstore(acc, o + 48, vadd(a3, b3))
            yo = (t * batch + n) * H
            _gates(acc, c[ho:ho + H], h[ho:ho + H], y[yo:yo + H], H)


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract", "arcp", "afn"})
def lstm_recurrence(xw, rp, h, c, y, reverse):
    """xw: (seq, batch, G) input projections with both biases; rp: packed recurrent weights
    (``rnn_fast._weights``); h, c: (batch, h) initial state, updated in place; y: (seq, batch, h)
    outputs. Gate order i, o, f, c.

    Not a BLAS call per step: streaming models run a few rows per step, where a GEMM call
    costs more than its arithmetic (a step of a 48-unit layer went from 0.8 to ~0.3 us)."""
    _steps(xw.reshape(-1), xw.shape[2], xw.reshape(-1)[:0], 0, rp, rp, h.reshape(-1),
           c.reshape(-1), y.reshape(-1), h.shape[0], reverse)


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract", "arcp", "afn"})
def lstm_small(x, wp, bias, rp, h0, c0, y, h, c, reverse):
    """One direction, the layer's arrays whole (views made here cost nothing; in Python
    they were eight calls a run): x (seq, batch, input); wp, rp (1, ...): input and
    recurrent weights packed as [G / BLOCK][units][BLOCK] (``rnn_fast._weights``); bias
    (1, G) both biases summed; h0, c0 (1, batch, hidden) initial state, or empty arrays for
    zeros; y (seq, 1, batch, hidden) and the final state h, c (1, batch, hidden) are
    written. Gate order i, o, f, c."""
    batch, H = h.shape[1], h.shape[2]
    for n in range(batch):
        for j in range(H):
            h[0, n, j] = h0[0, n, j] if h0.shape[0] else np.float32(0.0)
            c[0, n, j] = c0[0, n, j] if c0.shape[0] else np.float32(0.0)
    _steps(bias[0], 0, x.reshape(-1), x.shape[2], wp[0], rp[0], h.reshape(-1),
           c.reshape(-1), y.reshape(-1), batch, reverse)
