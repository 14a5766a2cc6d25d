"""Recurrent CPU kernels (NumPy, float64 inside): RNN, GRU, LSTM.

All directions, both layouts, per-batch ``sequence_lens`` (shorter sequences stop early,
their later outputs are zero), clipping, peepholes, ``input_forget`` and the optional
activation functions of the spec with their alpha/beta parameters.
"""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.registry import cpu_kernel
from engine.backends.cpu.rnn_fast import call_key, lstm_fast, lstm_fast_ok, lstm_small_again
from engine.ops.conv_pool import causal_activation
from engine.ops.rnn import check_recurrent_inputs


def _sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * x))


# name -> (function(x, alpha, beta), default alpha, default beta, how many params it uses)
_ACTS = {
    "Sigmoid": (lambda x, a, b: _sigmoid(x), None, None, 0),
    "Tanh": (lambda x, a, b: np.tanh(x), None, None, 0),
    "Relu": (lambda x, a, b: np.maximum(x, 0), None, None, 0),
    "Affine": (lambda x, a, b: a * x + b, 1.0, 0.0, 2),
    "LeakyRelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None, 1),
    "ThresholdedRelu": (lambda x, a, b: np.where(x >= a, x, 0), 1.0, None, 1),
    "ScaledTanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0, 2),
    "HardSigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5, 2),
    "Elu": (lambda x, a, b: np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0)) - 1)), 1.0,
            None, 1),
    "Softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None, 0),
    "Softplus": (lambda x, a, b: np.logaddexp(0, x), None, None, 0),
}


def _activations(layer, defaults: list[str], n_dir: int):
    names = layer.attr("activations") or defaults * n_dir
    if len(names) == len(defaults):
        names = list(names) * n_dir
    alphas = list(layer.attr("activation_alpha") or [])
    betas = list(layer.attr("activation_beta") or [])
    fns = []
    for name in names:
        key = next((k for k in _ACTS if k.lower() == name.lower()), None)
        if key is None:
            raise ValueError(f"unsupported recurrent activation {name!r}")
        fn, da, db, uses = _ACTS[key]
        a = alphas.pop(0) if uses >= 1 and alphas else da
        b = betas.pop(0) if uses >= 2 and betas else db
        fns.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    k = len(defaults)
    return [fns[d * k:(d + 1) * k] for d in range(n_dir)]


class _Setup:
    """Inputs of a recurrent op in the (seq, batch, ...) layout, as float64."""

    def __init__(self, layer, inputs, gates: int):
        x = inputs[0]
        self.dtype = x.dtype
        self.layout = int(layer.attr("layout", 0))
        if self.layout:
            x = np.swapaxes(x, 0, 1)
        self.x = x.astype(np.float64)
        self.seq, self.batch = x.shape[:2]
        self.w = inputs[1].astype(np.float64)
        self.r = inputs[2].astype(np.float64)
        self.n_dir = self.w.shape[0]
        self.hidden = int(layer.attr("hidden_size") or self.r.shape[-1])
        h = self.hidden
        b = inputs[3] if len(inputs) > 3 and inputs[3] is not None else None
        self.b = (np.zeros((self.n_dir, 2 * gates * h)) if b is None
                  else b.astype(np.float64))
        lens = inputs[4] if len(inputs) > 4 and inputs[4] is not None else None
        self.lens = (np.full(self.batch, self.seq, np.int64) if lens is None
                     else np.asarray(lens).astype(np.int64))
        self.h0 = self._state(inputs, 5)
        self.clip = layer.attr("clip")
        direction = layer.attr("direction", "forward")
        self.reverse = [direction == "reverse"] if self.n_dir == 1 else [False, True]

    def _state(self, inputs, i):
        s = inputs[i] if len(inputs) > i and inputs[i] is not None else None
        if s is None:
            return np.zeros((self.n_dir, self.batch, self.hidden))
        s = s.astype(np.float64)
        return np.swapaxes(s, 0, 1) if self.layout else s

    def steps(self, reverse: bool):
        """(time index per batch entry, valid mask) for each step of one direction."""
        for s in range(self.seq):
            t = (self.lens - 1 - s) if reverse else np.full(self.batch, s)
            valid = s < self.lens
            yield np.clip(t, 0, self.seq - 1), valid

    def gate_clip(self, v):
        return np.clip(v, -self.clip, self.clip) if self.clip else v

    def finish(self, y: np.ndarray, states: list[np.ndarray]):
        """y: (seq, n_dir, batch, H); states: each (n_dir, batch, H)."""
        if self.layout:
            y = np.transpose(y, (2, 0, 1, 3))
            states = [np.swapaxes(s, 0, 1) for s in states]
        return tuple(a.astype(self.dtype) for a in (y, *states))


def _run(layer, inputs, gates: int, defaults: list[str], cell, extra_state: bool = False):
    st = _Setup(layer, inputs, gates)
    acts = _activations(layer, defaults, st.n_dir)
    h = st.hidden
    y = np.zeros((st.seq, st.n_dir, st.batch, h))
    last_h = np.zeros((st.n_dir, st.batch, h))
    last_c = np.zeros((st.n_dir, st.batch, h))
    c0 = st._state(inputs, 6) if extra_state else None
    rows = np.arange(st.batch)
    for d in range(st.n_dir):
        hs = st.h0[d]
        cs = c0[d] if extra_state else None
        wb, rb = st.b[d, :gates * h], st.b[d, gates * h:]
        for t, valid in st.steps(st.reverse[d]):
            xt = st.x[t, rows]
            xw = xt @ st.w[d].T + wb
            new_h, new_c = cell(st, d, acts[d], xw, hs, cs, rb, inputs)
            v = valid[:, None]
            hs = np.where(v, new_h, hs)
            if extra_state:
                cs = np.where(v, new_c, cs)
            y[t[valid], d, rows[valid]] = new_h[valid]
        last_h[d] = hs
        if extra_state:
            last_c[d] = cs
    return st.finish(y, [last_h, last_c] if extra_state else [last_h])


def _rnn_cell(st, d, acts, xw, hs, cs, rb, inputs):
    return acts[0](st.gate_clip(xw + hs @ st.r[d].T + rb)), None


def _gru_cell(st, d, acts, xw, hs, cs, rb, inputs):
    f, g = acts
    h = st.hidden
    r = st.r[d]
    xz, xr, xh = xw[:, :h], xw[:, h:2 * h], xw[:, 2 * h:]
    z = f(st.gate_clip(xz + hs @ r[:h].T + rb[:h]))
    rt = f(st.gate_clip(xr + hs @ r[h:2 * h].T + rb[h:2 * h]))
    if st.linear_before_reset:
        hh = g(st.gate_clip(xh + rt * (hs @ r[2 * h:].T + rb[2 * h:])))
    else:
        hh = g(st.gate_clip(xh + (rt * hs) @ r[2 * h:].T + rb[2 * h:]))
    return (1 - z) * hh + z * hs, None


def _lstm_cell(st, d, acts, xw, hs, cs, rb, inputs):
    f, g, hf = acts
    h = st.hidden
    pre = xw + hs @ st.r[d].T + rb
    p = st.peep[d]
    i = f(st.gate_clip(pre[:, :h] + p[:h] * cs))
    if st.input_forget:
        fg = 1 - i
    else:
        fg = f(st.gate_clip(pre[:, 2 * h:3 * h] + p[2 * h:] * cs))
    c_new = fg * cs + i * g(st.gate_clip(pre[:, 3 * h:]))
    o = f(st.gate_clip(pre[:, h:2 * h] + p[h:2 * h] * c_new))
    return o * hf(c_new), c_new


@cpu_kernel("RNN", since=7)
def RNN(layer, inputs):
    check_recurrent_inputs(layer, [None if v is None else v.shape for v in inputs])
    return _run(layer, inputs, 1, ["Tanh"], _rnn_cell)


@cpu_kernel("GRU", since=7)
def GRU(layer, inputs):
    check_recurrent_inputs(layer, [None if v is None else v.shape for v in inputs])
    def cell(st, *args):
        st.linear_before_reset = bool(layer.attr("linear_before_reset", 0))
        return _gru_cell(st, *args)

    return _run(layer, inputs, 3, ["Sigmoid", "Tanh"], cell)


@cpu_kernel("LSTM", since=7)
def LSTM(layer, inputs):
    again = lstm_small_again(layer, inputs)
    if again is not None:
        return again
    lens = inputs[4] if len(inputs) > 4 else None
    key = call_key(inputs) if lens is None else None
    if key is not None and layer.__dict__.get("_cpu_lstm_key") == key:
        return lstm_fast(layer, inputs)  # the same call as one already checked and accepted
    check_recurrent_inputs(layer, [None if v is None else v.shape for v in inputs])
    if lstm_fast_ok(layer, inputs):
        result = lstm_fast(layer, inputs)
        # kept after the kernel ran, with the weights it keeps alive (ids stay theirs)
        layer.__dict__["_cpu_lstm_key"] = key
        return result
    n_dir = inputs[1].shape[0]
    hidden = int(layer.attr("hidden_size") or inputs[2].shape[-1])
    p = inputs[7] if len(inputs) > 7 and inputs[7] is not None else None
    peep = np.zeros((n_dir, 3 * hidden)) if p is None else p.astype(np.float64)

    def cell(st, *args):
        st.peep, st.input_forget = peep, bool(layer.attr("input_forget", 0))
        return _lstm_cell(st, *args)

    return _run(layer, inputs, 4, ["Sigmoid", "Tanh", "Tanh"], cell, extra_state=True)


@cpu_kernel("CausalConvWithState")
def CausalConvWithState(layer, inputs):
    """Depthwise causal conv of [past_state, input] (float32 inside for narrower floats, as
    the ONNX reference computes), with the state of the next step."""
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    past = inputs[3] if len(inputs) > 3 else None
    b, c, n = x.shape
    k = w.shape[2]
    if past is None:
        past = np.zeros((b, c, k - 1), x.dtype)
    padded = np.concatenate([past.astype(x.dtype), x], axis=2)
    acc = np.promote_types(x.dtype, np.float32)
    taps = w.reshape(c, k).astype(acc)
    y = np.zeros((b, c, n), acc)
    for j in range(k):  # k is small (a few taps): one vectorised pass per tap
        y += padded[:, :, j:j + n].astype(acc) * taps[None, :, j, None]
    if bias is not None:
        y += bias.astype(acc)[None, :, None]
    if causal_activation(layer) == "Swish":
        with np.errstate(over="ignore"):  # exp(-y) = inf for very negative y: y * 0
            y = y * (1.0 / (1.0 + np.exp(-y)))
    state = padded[:, :, padded.shape[2] - (k - 1):]
    return y.astype(x.dtype), np.ascontiguousarray(state)
