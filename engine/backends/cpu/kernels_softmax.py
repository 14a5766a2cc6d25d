"""Softmax and LogSoftmax on the CPU: parallel Numba row kernels (float32 forms for the last
axis and for a middle axis), NumPy for other dtypes."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from engine.backends.cpu.activation import carr
from engine.backends.cpu.fastmath import exp_any, exp_le0
from engine.backends.cpu.kernels_norm import _HALF, ROW_CHUNK_ELEMENTS, _float
from engine.backends.cpu.registry import cpu_kernel
from engine.backends.cpu.threads import parallel_for


@njit(nogil=True, cache=True, error_model="numpy")
def softmax(x, out, log, r0, r1):
    """x, out: (outer, L, inner), normalised over L, for rows o*inner+i in r0:r1."""
    O, L, I = x.shape
    for r in range(r0, r1):
        o = r // I
        i = r % I
        m = x[o, 0, i]
        for j in range(1, L):
            if x[o, j, i] > m:
                m = x[o, j, i]
        s = 0.0
        for j in range(L):
            s += exp_any(x[o, j, i] - m)
        if log:
            ls = np.log(s)
            for j in range(L):
                out[o, j, i] = x[o, j, i] - m - ls
        else:
            inv = 1.0 / s
            for j in range(L):
                out[o, j, i] = exp_any(x[o, j, i] - m) * inv


@njit(nogil=True, cache=True, error_model="numpy",
      fastmath={"contract", "arcp", "afn", "reassoc"})
def softmax_last_f32(x, out, log, r0, r1):
    """float32 rows of x, out: (rows, L) normalised over L for rows r0:r1, with the
    vectorised exp; each exponential is computed once and kept in ``out``. ``reassoc`` lets
    the max and the sum vectorise; a NaN still reaches every output of its row."""
    L = x.shape[1]
    for r in range(r0, r1):
        xr, orow = x[r], out[r]
        m = xr[0]
        for j in range(1, L):
            m = max(m, xr[j])
        s = np.float32(0.0)
        for j in range(L):
            e = exp_le0(xr[j] - m)
            orow[j] = e
            s += e
        if log:
            ls = np.log(s)
            for j in range(L):
                orow[j] = xr[j] - m - ls
        else:
            inv = np.float32(1.0) / s
            for j in range(L):
                orow[j] *= inv


@njit(nogil=True, cache=True, error_model="numpy",
      fastmath={"contract", "arcp", "afn", "reassoc"})
def softmax_mid_f32(x, out, log, o0, o1):
    """float32 x, out: (outer, L, inner) normalised over L for outer slices o0:o1, looping
    over the contiguous ``inner`` axis innermost so that it vectorises (a detection head's
    Softmax over 16 bins of 8400 anchors)."""
    O, L, I = x.shape
    m = np.empty(I, np.float32)
    s = np.empty(I, np.float32)
    for o in range(o0, o1):
        xo, oo = x[o], out[o]
        m[:] = xo[0]
        for j in range(1, L):
            xj = xo[j]
            for i in range(I):
                m[i] = max(m[i], xj[i])
        s[:] = 0
        for j in range(L):
            xj, oj = xo[j], oo[j]
            for i in range(I):
                e = exp_le0(xj[i] - m[i])
                oj[i] = e
                s[i] += e
        if log:
            for i in range(I):
                s[i] = np.log(s[i])
            for j in range(L):
                xj, oj = xo[j], oo[j]
                for i in range(I):
                    oj[i] = xj[i] - m[i] - s[i]
        else:
            for i in range(I):
                s[i] = np.float32(1.0) / s[i]
            for j in range(L):
                oj = oo[j]
                for i in range(I):
                    oj[i] *= s[i]


def _softmax_numpy(layer, x, log, coerce_2d):
    axis = int(layer.attr("axis", 1 if coerce_2d else -1))
    axis = axis + x.ndim if axis < 0 else axis
    shape = x.shape
    if coerce_2d:
        x = x.reshape(math.prod(shape[:axis]), -1)
        axis = 1
    d = x - x.max(axis=axis, keepdims=True)
    e = np.exp(d)
    s = e.sum(axis=axis, keepdims=True)
    return (d - np.log(s) if log else e / s).reshape(shape)


def _softmax(layer, x, log: bool, coerce_2d: bool):
    if x.dtype in _HALF:
        return _softmax_numpy(layer, x, log, coerce_2d)
    _float(layer, x)
    axis = int(layer.attr("axis", 1 if coerce_2d else -1))
    axis = axis + x.ndim if axis < 0 else axis
    outer = math.prod(x.shape[:axis])
    if coerce_2d:  # opset < 13: flatten to (outer, rest) and normalise rows
        L, inner = x.size // max(outer, 1), 1
    else:
        L, inner = x.shape[axis], math.prod(x.shape[axis + 1:])
    out = np.empty(x.shape, x.dtype)
    if x.size:
        if inner == 1 and x.dtype == np.float32:
            x2, o2 = carr(x).reshape(outer, L), out.reshape(outer, L)
            parallel_for(lambda lo, hi: softmax_last_f32(x2, o2, log, lo, hi), outer,
                         grain=max(1, ROW_CHUNK_ELEMENTS // max(1, L)))
            return out
        x3, o3 = carr(x).reshape(outer, L, inner), out.reshape(outer, L, inner)
        if x.dtype == np.float32 and inner >= 8:
            parallel_for(lambda lo, hi: softmax_mid_f32(x3, o3, log, lo, hi), outer,
                         grain=max(1, ROW_CHUNK_ELEMENTS // max(1, L * inner)))
            return out
        parallel_for(lambda lo, hi: softmax(x3, o3, log, lo, hi), outer * inner,
                     grain=max(1, ROW_CHUNK_ELEMENTS // max(1, L)))
    return out


@cpu_kernel("Softmax")
def Softmax(layer, inputs):
    return _softmax(layer, inputs[0], False, True)


@cpu_kernel("Softmax", since=13)
def Softmax_13(layer, inputs):
    return _softmax(layer, inputs[0], False, False)


@cpu_kernel("LogSoftmax")
def LogSoftmax(layer, inputs):
    return _softmax(layer, inputs[0], True, True)


@cpu_kernel("LogSoftmax", since=13)
def LogSoftmax_13(layer, inputs):
    return _softmax(layer, inputs[0], True, False)
