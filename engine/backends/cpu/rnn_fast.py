"""The common LSTM in float32 with fused gates: default activations, no clip, no peepholes,
no ``input_forget``, full-length sequences, layout 0 (what exported speech and text models
use). The input projection of every step is one GEMM; the recurrence is one Numba call per
direction whose step does ``h @ R^T`` and all four gates in one pass over the hidden units.
Weights are transposed and the two biases summed once per layer (kept while the weight
objects, model constants, stay the same). ``kernels_rnn`` keeps the general float64 path.
"""

from __future__ import annotations

import numpy as np

from engine.backends.cpu import gemm_packed, threads
from engine.backends.cpu.lstm_kernels import BLOCK, SMALL_MACS, lstm_recurrence, lstm_small
from engine.backends.cpu.simd import aligned

#: the initial state when the layer has none (``lstm_kernels.lstm_small`` zeros it)
_NO_STATE = np.zeros((0, 1, 1), np.float32)
_F32 = np.dtype(np.float32)


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


def call_key(inputs) -> tuple:
    """What ``lstm_fast_ok`` and the shape checks of a call depend on, besides the layer's
    attributes: shapes and dtypes of the data inputs, the weights by identity (model
    constants) and which optional inputs are present. A call with no sequence lengths and
    the key of an accepted call skips both checks (~8 us alone, ~20 inside a model run)."""
    x, h0 = inputs[0], inputs[5] if len(inputs) > 5 else None
    c0 = inputs[6] if len(inputs) > 6 else None
    rest = [a is None for a in inputs[3:]]  # compared, never hashed
    return (x.shape, x.dtype, id(inputs[1]), id(inputs[2]), id(inputs[3])
            if len(inputs) > 3 else 0, None if h0 is None else (h0.shape, h0.dtype),
            None if c0 is None else (c0.shape, c0.dtype), rest)


#: fewest multiply-adds of one direction's recurrence for the two directions of a
#: bidirectional layer to run on two threads (the helper starts 10-20 us late)
SPLIT_MACS = 400_000


class _Weights:
    __slots__ = ("w", "r", "b", "wt", "rp", "bias", "wp", "hidden", "reverse")


def _weights(layer, w, r, b, hidden: int) -> _Weights:
    """Per direction: the input weights transposed (input, G), the recurrent weights packed
    as [G / BLOCK][hidden][BLOCK] and both biases summed, G = 4 * hidden rounded up to
    whole blocks (zero columns: their gate values are never read)."""
    known = layer.__dict__.get("_cpu_lstm")
    if known is not None and known.w is w and known.r is r and known.b is b:
        return known
    k = _Weights()
    k.w, k.r, k.b, k.hidden = w, r, b, hidden
    k.reverse = layer.attr("direction", "forward") == "reverse"
    n_dir, g4 = w.shape[0], 4 * hidden
    G = -(-g4 // BLOCK) * BLOCK
    wt = np.zeros((n_dir, w.shape[2], G), np.float32)
    wt[:, :, :g4] = np.transpose(w, (0, 2, 1))
    k.wt = tuple(wt[d] for d in range(n_dir))  # kept objects: the packed product keys on them
    rt = np.zeros((n_dir, hidden, G), np.float32)
    rt[:, :, :g4] = np.transpose(r, (0, 2, 1))
    k.rp = aligned(rt.reshape(n_dir, hidden, G // BLOCK, BLOCK).transpose(0, 2, 1, 3)
                   .reshape(n_dir, -1))
    k.wp = aligned(wt.reshape(n_dir, w.shape[2], G // BLOCK, BLOCK).transpose(0, 2, 1, 3)
                   .reshape(n_dir, -1))
    k.bias = np.zeros((n_dir, G), np.float32)
    if b is not None:
        k.bias[:, :g4] = b[:, :g4] + b[:, g4:]
    layer.__dict__["_cpu_lstm"] = k
    return k


def _projection(x2: np.ndarray, k: _Weights, d: int) -> np.ndarray:
    """x2 @ W[d]^T + both biases for every step of direction d: the packed product with the
    bias in its epilogue (the weights are the layer's kept transposes), else sgemm."""
    w = k.wt[d]
    if x2.dtype == np.float32 and gemm_packed.packable(w, rows=x2.shape[0]):
        out = np.empty((x2.shape[0], w.shape[1]), np.float32)
        return gemm_packed.matmul_packed(np.ascontiguousarray(x2), w, out, k.bias[d])
    xw = x2 @ w
    xw += k.bias[d]
    return xw


def lstm_fast(layer, inputs):
    """LSTM outputs (Y, Y_h, Y_c) for inputs ``lstm_fast_ok`` accepted."""
    x, w, r = inputs[0], inputs[1], inputs[2]
    b = inputs[3] if len(inputs) > 3 else None
    k = layer.__dict__.get("_cpu_lstm")
    if k is None or k.w is not w or k.r is not r or k.b is not b:
        k = _weights(layer, w, r, b, int(layer.attr("hidden_size") or r.shape[-1]))
    n_dir, hidden = w.shape[0], k.hidden
    seq, batch = x.shape[:2]
    h0 = inputs[5] if len(inputs) > 5 else None
    c0 = inputs[6] if len(inputs) > 6 else None
    G = k.bias.shape[1]
    if n_dir == 1 and seq * batch * x.shape[2] * G <= SMALL_MACS:
        # what a later call with the same shapes, weights and state arrays' form checks
        # before ``lstm_small_again`` (``LSTM``'s own checks and this function's Python were
        # ~6 us of a 16-step, 32-unit layer's 13)
        layer.__dict__["_cpu_lstm_small"] = (len(inputs), x.shape, w, r, b, (1, batch, hidden),
                                             h0 is None, c0 is None, k)
        return _small(x, k, h0, c0, seq, batch, hidden)
    y = np.empty((seq, n_dir, batch, hidden), np.float32)
    yh = np.zeros((n_dir, batch, hidden), np.float32) if h0 is None else h0.copy()
    yc = np.zeros((n_dir, batch, hidden), np.float32) if c0 is None else c0.copy()
    x2 = np.ascontiguousarray(x).reshape(seq * batch, -1)
    if n_dir == 1:
        xw = _projection(x2, k, 0).reshape(seq, batch, G)
        lstm_recurrence(xw, k.rp[0], yh[0], yc[0], y.reshape(seq, batch, hidden), k.reverse)
        return y, yh, yc
    yd = np.empty((n_dir, seq, batch, hidden), np.float32)

    def direction(d0, d1):
        for d in range(d0, d1):
            xw = _projection(x2, k, d).reshape(seq, batch, G)
            lstm_recurrence(xw, k.rp[d], yh[d], yc[d], yd[d], d == 1)

    macs = seq * batch * G * (hidden + x2.shape[1])
    threads.parallel_for(direction, n_dir, grain=1 if macs >= SPLIT_MACS else n_dir)
    y[:] = yd.transpose(1, 0, 2, 3)
    return y, yh, yc


def _small(x, k: _Weights, h0, c0, seq: int, batch: int, hidden: int):
    y = np.empty((seq, 1, batch, hidden), np.float32)
    yh = np.empty((1, batch, hidden), np.float32)
    yc = np.empty((1, batch, hidden), np.float32)
    lstm_small(np.ascontiguousarray(x), k.wp, k.bias, k.rp, _NO_STATE if h0 is None else h0,
               _NO_STATE if c0 is None else c0, y, yh, yc, k.reverse)
    return y, yh, yc


def lstm_small_again(layer, inputs):
    """The outputs of a one-direction layer ``lstm_fast`` last ran in one call (no sequence
    lengths, float32), when ``inputs`` have the same shapes, weight objects and optional
    inputs as then; None otherwise (the caller checks them in full)."""
    known = layer.__dict__.get("_cpu_lstm_small")
    if known is None or len(inputs) != known[0]:
        return None
    n, shape, w, r, b, state, no_h, no_c, k = known
    x = inputs[0]
    if x.shape != shape or x.dtype != _F32 or inputs[1] is not w or inputs[2] is not r \
            or n > 3 and inputs[3] is not b or n > 4 and inputs[4] is not None \
            or n > 7 and inputs[7] is not None:
        return None
    h0 = inputs[5] if n > 5 else None
    c0 = inputs[6] if n > 6 else None
    if (h0 is None) is not no_h or (c0 is None) is not no_c:
        return None
    if h0 is not None and (h0.shape != state or h0.dtype != _F32):
        return None
    if c0 is not None and (c0.shape != state or c0.dtype != _F32):
        return None
    return _small(x, k, h0, c0, shape[0], shape[1], state[2])
