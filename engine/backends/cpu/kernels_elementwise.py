"""Elementwise CPU kernels (NumPy; broadcasting as ONNX defines it)."""

from __future__ import annotations

import numpy as np
from scipy import special

from engine.backends.cpu import fastmath
from engine.backends.cpu.activation import relu_into
from engine.backends.cpu.registry import cpu_kernel


def _same(x: np.ndarray, y) -> np.ndarray:
    """Keep the input dtype (NumPy may promote float32 math on Python scalars)."""
    return np.asarray(y).astype(x.dtype, copy=False)


_UNARY = {
    "Abs": np.abs, "Neg": np.negative, "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt,
    "Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos,
    "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Tanh": np.tanh,
    "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh, "Floor": np.floor,
    "Ceil": np.ceil, "Reciprocal": np.reciprocal, "Sign": np.sign, "Round": np.round,
    "Not": np.logical_not,
}


def _register_unary(name, fn):
    @cpu_kernel(name)
    def kernel(layer, inputs):
        return _same(inputs[0], fn(inputs[0]))

    kernel.__name__ = name


for _name, _fn in _UNARY.items():
    _register_unary(_name, _fn)


#: below this many elements a NumPy ufunc call is cheaper than a Numba dispatch
SMALL = 4096


@cpu_kernel("Relu")
def Relu(layer, inputs):
    x = inputs[0]
    if x.size >= SMALL and x.dtype in (np.float32, np.float64) and x.flags.c_contiguous:
        out = np.empty_like(x)
        relu_into(x.reshape(-1), out.reshape(-1))
        return out
    return np.maximum(x, x.dtype.type(0))


@cpu_kernel("Sigmoid")
def Sigmoid(layer, inputs):
    x = inputs[0]
    if x.dtype == np.float32 and x.size >= SMALL:
        return fastmath.sigmoid(x)
    if x.dtype in (np.float32, np.float64):
        return special.expit(x)  # one ufunc pass, exact for large |x|
    return _same(x, 1.0 / (1.0 + np.exp(-x)))


_BINARY = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
    "Equal": np.equal, "Greater": np.greater, "Less": np.less,
    "GreaterOrEqual": np.greater_equal, "LessOrEqual": np.less_equal,
    "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor,
}


def _register_binary(name, fn):
    @cpu_kernel(name)
    def kernel(layer, inputs):
        return fn(inputs[0], inputs[1])

    kernel.__name__ = name


for _name, _fn in _BINARY.items():
    _register_binary(_name, _fn)


@cpu_kernel("Div")
def Div(layer, inputs):
    a, b = inputs
    if np.issubdtype(a.dtype, np.integer):
        return _same(a, np.trunc(a / b))
    return np.divide(a, b)


@cpu_kernel("Pow")
def Pow(layer, inputs):
    a, b = inputs
    if a.dtype.kind == "f" and b.size == 1 and b.ndim <= a.ndim:
        # exporters' x**2 (variance) and x**3 (tanh GELU): products, not the general power
        e = float(b.reshape(-1)[0])
        if e == 2.0:
            return _same(a, np.multiply(a, a).reshape(np.broadcast_shapes(a.shape, b.shape)))
        if e == 3.0:
            y = np.multiply(a, a)
            y *= a
            return _same(a, y.reshape(np.broadcast_shapes(a.shape, b.shape)))
    return _same(a, np.power(a, b.astype(a.dtype) if a.dtype.kind == "f" else b))


@cpu_kernel("Where")
def Where(layer, inputs):
    c, x, y = inputs
    return np.where(c, x, y)
