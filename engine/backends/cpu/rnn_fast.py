"""The common LSTM in float32 with fused gates: default activations, no clip, no peepholes,
no ``input_forget``, full-length sequences, layout 0 (what exported speech and text models
use). The input projection of every step is one GEMM; the recurrence is one Numba call per
direction whose step does ``h @ R^T`` and all four gates in one pass over the hidden units.
Weights are transposed and the two biases summed once per layer (kept while the weight
objects, model constants, stay the same). ``kernels_rnn`` keeps the general float64 path.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.fastmath import sigmoid_f32, tanh_f32


def lstm_fast_ok(layer, inputs) -> bool:
    x = inputs[0]
    if x.dtype != np.float32 or any(a is not None and a.dtype != np.float32
                                    for a in inputs[1:4] + inputs[5:8] if a is not None):
        return False
    if layer.attr("activations") or layer.attr("clip") or layer.attr("input_forget", 0):
        return False
    if int(layer.attr("layout", 0)) or (len(inputs) > 7 and inputs[7] is not None):
        return False
    lens = inputs[4] if len(inputs) > 4 else None
    return lens is None or bool(np.all(np.asarray(lens) == x.shape[0]))


class _Weights:
    __slots__ = ("w", "r", "b", "wt", "rt", "bias")


def _weights(layer, w, r, b, hidden: int) -> _Weights:
    known = layer.__dict__.get("_cpu_lstm")
    if known is not None and known.w is w and known.r is r and known.b is b:
        return known
    k = _Weights()
    k.w, k.r, k.b = w, r, b
    k.wt = np.ascontiguousarray(np.transpose(w, (0, 2, 1)))  # (dirs, input, 4h)
    k.rt = np.ascontiguousarray(np.transpose(r, (0, 2, 1)))  # (dirs, h, 4h)
    n_dir = w.shape[0]
    k.bias = (np.zeros((n_dir, 4 * hidden), np.float32) if b is None
              else np.ascontiguousarray(b[:, :4 * hidden] + b[:, 4 * hidden:]))
    layer.__dict__["_cpu_lstm"] = k
    return k


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract", "arcp", "afn"})
def lstm_recurrence(xw, rt, h, c, y, reverse):
    """xw: (seq, batch, 4h) input projections with both biases; rt: (h, 4h); h, c: (batch, h)
    initial state, updated in place; y: (seq, batch, h) outputs. Gate order i, o, f, c.

    ``h @ R^T`` is a hand loop into the gate accumulator, not a BLAS call: streaming models
    run a few rows per step, where a GEMM call per step costs more than its arithmetic."""
    seq = xw.shape[0]
    H = h.shape[1]
    acc = np.empty(4 * H, np.float32)
    for s in range(seq):
        t = seq - 1 - s if reverse else s
        xt = xw[t]
        yt = y[t]
        for n in range(h.shape[0]):
            xn, hn, cn, yn = xt[n], h[n], c[n], yt[n]
            acc[:] = xn
            for k in range(H):
                hk = hn[k]
                rk = rt[k]
                for j in range(4 * H):
                    acc[j] += hk * rk[j]
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


def lstm_fast(layer, inputs):
    """LSTM outputs (Y, Y_h, Y_c) for inputs ``lstm_fast_ok`` accepted."""
    x, w, r = inputs[0], inputs[1], inputs[2]
    b = inputs[3] if len(inputs) > 3 else None
    n_dir = w.shape[0]
    hidden = int(layer.attr("hidden_size") or r.shape[-1])
    k = _weights(layer, w, r, b, hidden)
    seq, batch = x.shape[:2]
    h0 = inputs[5] if len(inputs) > 5 else None
    c0 = inputs[6] if len(inputs) > 6 else None
    y = np.empty((seq, n_dir, batch, hidden), np.float32)
    yh = np.zeros((n_dir, batch, hidden), np.float32) if h0 is None else h0.copy()
    yc = np.zeros((n_dir, batch, hidden), np.float32) if c0 is None else c0.copy()
    x2 = np.ascontiguousarray(x).reshape(seq * batch, -1)
    reverse = [layer.attr("direction", "forward") == "reverse"] if n_dir == 1 else [False, True]
    yd = np.empty((seq, batch, hidden), np.float32) if n_dir > 1 else y.reshape(seq, batch,
                                                                               hidden)
    for d in range(n_dir):
        xw = (x2 @ k.wt[d]).reshape(seq, batch, 4 * hidden)
        xw += k.bias[d]
        lstm_recurrence(xw, k.rt[d], yh[d], yc[d], yd, reverse[d])
        if n_dir > 1:
            y[:, d] = yd
    return y, yh, yc
