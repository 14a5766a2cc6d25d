"""Numba versions of the elementwise ops that are hot in CNNs (residual Sum, Relu, Add, Mul).

``add_relu``-style helpers take same-shape float arrays; anything that needs broadcasting
goes to NumPy, which is as fast for the small per-channel operands seen in practice.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from engine.backends.cpu.registry import cpu_kernel

#: below this many elements a single thread beats waking the pool
_PARALLEL_MIN = 1 << 16


@njit(nogil=True, cache=True)
def _sum2(a, b, out):
    for i in range(out.shape[0]):
        out[i] = a[i] + b[i]


@njit(parallel=True, nogil=True, cache=True)
def _sum2_par(a, b, out):
    n = out.shape[0]
    chunk = 16384
    for c in prange((n + chunk - 1) // chunk):
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            out[i] = a[i] + b[i]


@njit(nogil=True, cache=True)
def _relu(a, out):
    for i in range(out.shape[0]):
        v = a[i]
        out[i] = v if v > 0 else v * 0


def add_same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b for same-shape, same-dtype float arrays (Numba; parallel when large)."""
    out = np.empty(a.shape, a.dtype)
    fa, fb = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
    (_sum2_par if a.size >= _PARALLEL_MIN else _sum2)(fa, fb, out.reshape(-1))
    return out


def relu(x: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape, x.dtype)
    _relu(np.ascontiguousarray(x).reshape(-1), out.reshape(-1))
    return out


@cpu_kernel("Sum")
def Sum(layer, inputs):
    xs = [x for x in inputs if x is not None]
    first = xs[0]
    if (len(xs) >= 2 and first.dtype.kind == "f"
            and all(x.shape == first.shape and x.dtype == first.dtype for x in xs)):
        out = add_same(xs[0], xs[1])
        for x in xs[2:]:
            out = add_same(out, x)
        return out
    out = np.array(first, copy=True)
    for x in xs[1:]:
        out = out + x
    return out.astype(first.dtype, copy=False)
