"""Random-number CPU kernels: RandomUniform(Like), RandomNormal(Like), Bernoulli, Multinomial.

With a ``seed`` attribute the values come from NumPy's seeded Mersenne Twister, so a
seed reproduces the same tensor on every run (and as NumPy-based tools produce it);
without one, from a fresh generator."""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.kernel_util import onnx_dtype
from engine.backends.cpu.registry import cpu_kernel


def _rng(layer):
    seed = layer.attr("seed")
    if seed is None or np.isnan(seed):
        return np.random.RandomState()
    return np.random.RandomState(int(seed))


def _dtype(layer, like: np.ndarray | None) -> np.dtype:
    code = layer.attr("dtype")
    if code is not None:
        return onnx_dtype(code)
    return like.dtype if like is not None else np.dtype(np.float32)


def _uniform(layer, shape, dtype):
    lo, hi = layer.attr("low", 0.0), layer.attr("high", 1.0)
    return _rng(layer).uniform(lo, hi, shape).astype(dtype)


def _normal(layer, shape, dtype):
    mean, scale = layer.attr("mean", 0.0), layer.attr("scale", 1.0)
    return _rng(layer).normal(mean, scale, shape).astype(dtype)


@cpu_kernel("RandomUniform")
def RandomUniform(layer, inputs):
    return _uniform(layer, tuple(layer.attr("shape")), _dtype(layer, None))


@cpu_kernel("RandomNormal")
def RandomNormal(layer, inputs):
    return _normal(layer, tuple(layer.attr("shape")), _dtype(layer, None))


@cpu_kernel("RandomUniformLike")
def RandomUniformLike(layer, inputs):
    return _uniform(layer, inputs[0].shape, _dtype(layer, inputs[0]))


@cpu_kernel("RandomNormalLike")
def RandomNormalLike(layer, inputs):
    return _normal(layer, inputs[0].shape, _dtype(layer, inputs[0]))


@cpu_kernel("Bernoulli", since=15)
def Bernoulli(layer, inputs):
    x = inputs[0]
    return _rng(layer).binomial(1, p=x.astype(np.float64)).astype(_dtype(layer, x))


@cpu_kernel("Multinomial", since=7)
def Multinomial(layer, inputs):
    logits = inputs[0].astype(np.float64)
    n = int(layer.attr("sample_size", 1))
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    rng = _rng(layer)
    out = np.stack([rng.choice(p.shape[1], size=n, p=row) for row in p])
    return out.astype(onnx_dtype(layer.attr("dtype", 6)))
