"""Optimiser update kernels of the ai.onnx.preview.training domain: Adagrad, Adam, Momentum.

Several tensors can be updated at once: after R and T the inputs are grouped by kind
(all X, then all G, then the state tensors) and so are the outputs."""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.registry import cpu_kernel

TRAINING = "ai.onnx.preview.training"


def _groups(inputs, kinds: int):
    tensors = inputs[2:]
    n = len(tensors) // kinds
    return float(np.asarray(inputs[0])), int(np.asarray(inputs[1])), \
        [tensors[i * n:(i + 1) * n] for i in range(kinds)]


@cpu_kernel("Adagrad", domain=TRAINING)
def Adagrad(layer, inputs):
    r, t, (xs, gs, hs) = _groups(inputs, 3)
    rate = r / (1 + t * layer.attr("decay_factor", 0.0))
    norm, eps = layer.attr("norm_coefficient", 0.0), layer.attr("epsilon", 0.0)
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        g = norm * x + g
        h2 = h + g * g
        new_x.append((x - rate * g / (np.sqrt(h2) + eps)).astype(x.dtype))
        new_h.append(h2.astype(h.dtype))
    return tuple(new_x + new_h)


@cpu_kernel("Adam", domain=TRAINING)
def Adam(layer, inputs):
    r, t, (xs, gs, vs, hs) = _groups(inputs, 4)
    alpha, beta = layer.attr("alpha", 0.9), layer.attr("beta", 0.999)
    norm, post = layer.attr("norm_coefficient", 0.0), layer.attr("norm_coefficient_post", 0.0)
    eps = layer.attr("epsilon", 0.0)
    rate = r * np.sqrt(1 - beta**t) / (1 - alpha**t) if t > 0 else r
    out_x, out_v, out_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        g = norm * x + g
        v2 = alpha * v + (1 - alpha) * g
        h2 = beta * h + (1 - beta) * g * g
        x2 = (1 - post) * (x - rate * v2 / (np.sqrt(h2) + eps))
        out_x.append(x2.astype(x.dtype))
        out_v.append(v2.astype(v.dtype))
        out_h.append(h2.astype(h.dtype))
    return tuple(out_x + out_v + out_h)


@cpu_kernel("Momentum", domain=TRAINING)
def Momentum(layer, inputs):
    r, t, (xs, gs, vs) = _groups(inputs, 3)
    alpha, beta = layer.attr("alpha"), layer.attr("beta")
    norm = layer.attr("norm_coefficient")
    beta_t = beta if t > 0 else 1.0
    nesterov = layer.attr("mode", "standard") == "nesterov"
    out_x, out_v = [], []
    for x, g, v in zip(xs, gs, vs):
        g = norm * x + g
        v2 = alpha * v + beta_t * g
        x2 = x - r * (g + alpha * v2) if nesterov else x - r * v2
        out_x.append(x2.astype(x.dtype))
        out_v.append(v2.astype(v.dtype))
    return tuple(out_x + out_v)
