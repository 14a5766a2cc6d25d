"""Activation CPU kernels of the long tail (NumPy): Elu, Selu, Celu, Gelu, Mish, Swish, ..."""

from __future__ import annotations

import numpy as np
from scipy import special

from engine.backends.cpu import fastmath
from engine.backends.cpu.kernel_util import same
from engine.backends.cpu.registry import cpu_kernel
from engine.ops.activations import UNARY_OPS


def _act(name):
    """Register ``fn(x, *attributes)``: the attributes of the op's record, defaults filled in
    (engine.ops.activations)."""
    rec = UNARY_OPS[name]

    def deco(fn):
        def kernel(layer, inputs):
            x = inputs[0]
            return same(x, fn(x, *rec.attr_values(layer)))

        kernel.__name__ = name
        cpu_kernel(name)(kernel)
        return fn

    return deco


@_act("Elu")
def _elu(x, a):
    return np.where(x > 0, x, a * np.expm1(np.minimum(x, 0)))


@_act("Celu")
def _celu(x, a):
    return np.maximum(x, 0) + np.minimum(0, a * np.expm1(np.minimum(x, 0) / a))


@_act("Selu")
def _selu(x, a, g):
    return g * np.where(x > 0, x, a * np.expm1(np.minimum(x, 0)))


@_act("LeakyRelu")
def _leaky(x, a):
    return np.where(x >= 0, x, x * a)


@_act("ThresholdedRelu")
def _thresholded(x, a):
    return np.where(x > a, x, 0)


@_act("HardSigmoid")
def _hard_sigmoid(x, a, b):
    return np.clip(a * x + b, 0, 1)


@_act("HardSwish")
def _hard_swish(x):
    return x * np.clip(x / 6.0 + 0.5, 0, 1)


@_act("Softplus")
def _softplus(x):
    return np.logaddexp(0, x.astype(np.float64))


@_act("Softsign")
def _softsign(x):
    return x / (1 + np.abs(x))


@_act("Shrink")
def _shrink(x, bias, lambd):
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


@_act("Erf")
def _erf(x):
    if x.dtype == np.float32:
        return fastmath.erf(x)
    return special.erf(x)


@_act("Gelu")
def _gelu(x, approximate):
    if x.dtype == np.float32:
        return fastmath.gelu(x, approximate == "tanh")
    xd = x.astype(np.float64)
    if approximate == "tanh":
        return 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd**3)))
    return 0.5 * xd * (1 + special.erf(xd / np.sqrt(2)))


@_act("Mish")
def _mish(x):
    xd = x.astype(np.float64)
    return xd * np.tanh(np.logaddexp(0, xd))


@_act("Swish")
def _swish(x, alpha):
    xd = x.astype(np.float64)
    return xd * special.expit(alpha * xd)
