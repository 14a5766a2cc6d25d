"""Activation CPU kernels of the long tail (NumPy): Elu, Selu, Celu, Gelu, Mish, Swish, ..."""

from __future__ import annotations

import numpy as np
from scipy import special

from engine.backends.cpu import fastmath
from engine.backends.cpu.kernel_util import same
from engine.backends.cpu.registry import cpu_kernel


def _act(name):
    def deco(fn):
        def kernel(layer, inputs):
            x = inputs[0]
            return same(x, fn(layer, x))

        kernel.__name__ = name
        cpu_kernel(name)(kernel)
        return fn

    return deco


@_act("Elu")
def _elu(layer, x):
    a = layer.attr("alpha", 1.0)
    return np.where(x > 0, x, a * np.expm1(np.minimum(x, 0)))


@_act("Celu")
def _celu(layer, x):
    a = layer.attr("alpha", 1.0)
    return np.maximum(x, 0) + np.minimum(0, a * np.expm1(np.minimum(x, 0) / a))


@_act("Selu")
def _selu(layer, x):
    a = layer.attr("alpha", 1.67326319217681884765625)
    g = layer.attr("gamma", 1.05070102214813232421875)
    return g * np.where(x > 0, x, a * np.expm1(np.minimum(x, 0)))


@_act("LeakyRelu")
def _leaky(layer, x):
    return np.where(x >= 0, x, x * layer.attr("alpha", 0.01))


@_act("ThresholdedRelu")
def _thresholded(layer, x):
    return np.where(x > layer.attr("alpha", 1.0), x, 0)


@_act("HardSigmoid")
def _hard_sigmoid(layer, x):
    return np.clip(layer.attr("alpha", 0.2) * x + layer.attr("beta", 0.5), 0, 1)


@_act("HardSwish")
def _hard_swish(layer, x):
    return x * np.clip(x / 6.0 + 0.5, 0, 1)


@_act("Softplus")
def _softplus(layer, x):
    return np.logaddexp(0, x.astype(np.float64))


@_act("Softsign")
def _softsign(layer, x):
    return x / (1 + np.abs(x))


@_act("Shrink")
def _shrink(layer, x):
    lambd, bias = layer.attr("lambd", 0.5), layer.attr("bias", 0.0)
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


@_act("Erf")
def _erf(layer, x):
    if x.dtype == np.float32:
        return fastmath.erf(x)
    return special.erf(x)


@_act("Gelu")
def _gelu(layer, x):
    if x.dtype == np.float32:
        return fastmath.gelu(x, layer.attr("approximate", "none") == "tanh")
    xd = x.astype(np.float64)
    if layer.attr("approximate", "none") == "tanh":
        return 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd**3)))
    return 0.5 * xd * (1 + special.erf(xd / np.sqrt(2)))


@_act("Mish")
def _mish(layer, x):
    xd = x.astype(np.float64)
    return xd * np.tanh(np.logaddexp(0, xd))


@_act("Swish")
def _swish(layer, x):
    xd = x.astype(np.float64)
    return xd * special.expit(layer.attr("alpha", 1.0) * xd)
