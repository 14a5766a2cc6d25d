"""Arithmetic CPU kernels beyond the basic elementwise set: Mod, bit ops, variadic
Max/Min/Sum/Mean, Clip, PRelu, Einsum, Det, IsInf/IsNaN (NumPy)."""

from __future__ import annotations

from functools import reduce

import numpy as np

from engine.backends.cpu.kernel_util import same
from engine.backends.cpu.registry import cpu_kernel
from engine.ops.gemm import parse_einsum


@cpu_kernel("Mod")
def Mod(layer, inputs):
    a, b = inputs
    if layer.attr("fmod", 0):
        return same(a, np.fmod(a, b))
    if a.dtype.kind == "f":  # fmod=0 is only defined for integers; follow the divisor's sign
        return same(a, np.mod(a, b))
    with np.errstate(divide="ignore"):
        return same(a, np.mod(a, b))


@cpu_kernel("BitShift")
def BitShift(layer, inputs):
    a, b = inputs
    fn = np.left_shift if layer.attr("direction") == "LEFT" else np.right_shift
    return same(a, fn(a, b.astype(a.dtype)))


for _name, _fn in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                   ("BitwiseXor", np.bitwise_xor)):
    cpu_kernel(_name)(lambda layer, inputs, _fn=_fn: _fn(inputs[0], inputs[1]))


@cpu_kernel("BitwiseNot")
def BitwiseNot(layer, inputs):
    return np.bitwise_not(inputs[0])


def _variadic(fn):
    def kernel(layer, inputs):
        xs = [x for x in inputs if x is not None]
        return same(xs[0], reduce(fn, xs))

    return kernel


cpu_kernel("Max")(_variadic(np.maximum))
cpu_kernel("Min")(_variadic(np.minimum))
cpu_kernel("Sum")(_variadic(np.add))


@cpu_kernel("Mean")
def Mean(layer, inputs):
    xs = [x for x in inputs if x is not None]
    return same(xs[0], reduce(np.add, xs) / len(xs))


def _clip(x: np.ndarray, lo, hi) -> np.ndarray:
    """``x`` limited to [lo, hi]; an absent bound (None) is the type's lowest()/max() as the
    ONNX spec defines it, so -Inf/+Inf become the type's extremes. NaN stays NaN."""
    if x.dtype.kind == "f":
        info = np.finfo(x.dtype)
        lo = info.min if lo is None else max(float(lo), float(info.min))
        hi = info.max if hi is None else min(float(hi), float(info.max))
    out = x if lo is None else np.maximum(x, x.dtype.type(lo))
    return same(x, out if hi is None else np.minimum(out, x.dtype.type(hi)))


@cpu_kernel("Clip", since=1)
def Clip_1(layer, inputs):
    return _clip(inputs[0], layer.attr("min"), layer.attr("max"))


@cpu_kernel("Clip", since=11)
def Clip_11(layer, inputs):
    x = inputs[0]
    lo = inputs[1] if len(inputs) > 1 else None
    hi = inputs[2] if len(inputs) > 2 else None
    lo = lo.reshape(()).astype(x.dtype) if lo is not None and lo.size else None
    hi = hi.reshape(()).astype(x.dtype) if hi is not None and hi.size else None
    return _clip(x, lo, hi)


@cpu_kernel("PRelu")
def PRelu(layer, inputs):
    x, slope = inputs
    return same(x, np.where(x < 0, x * slope, x))


@cpu_kernel("Einsum")
def Einsum(layer, inputs):
    terms, out, _ = parse_einsum(layer.attr("equation"), [x.shape for x in inputs])
    # rewrite the private ellipsis labels to ASCII letters NumPy accepts
    used = set("".join(terms) + out)
    free = iter(c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in used)
    mapping = {c: next(free) for c in sorted(used) if not c.isascii()}
    fix = lambda t: "".join(mapping.get(c, c) for c in t)
    eq = ",".join(fix(t) for t in terms) + "->" + fix(out)
    # NumPy's einsum has no loops for ml_dtypes types (bfloat16): compute in float32
    args = [x.astype(np.float32) if x.dtype.kind == "V" else x for x in inputs]
    return same(inputs[0], np.einsum(eq, *args))


@cpu_kernel("Det")
def Det(layer, inputs):
    x = inputs[0]
    return same(x, np.linalg.det(x))


@cpu_kernel("IsNaN")
def IsNaN(layer, inputs):
    return np.isnan(inputs[0])


@cpu_kernel("IsInf")
def IsInf(layer, inputs):
    x = inputs[0]
    pos = x == np.inf if layer.attr("detect_positive", 1) else np.zeros(x.shape, bool)
    neg = x == -np.inf if layer.attr("detect_negative", 1) else np.zeros(x.shape, bool)
    return pos | neg
