"""Normalisations on the CPU: BatchNormalization (inference as one fused scale/shift pass;
training statistics in NumPy), LayerNormalization and LRN as parallel Numba kernels.
Softmax and LogSoftmax live in ``kernels_softmax``."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from numba import njit

from engine.backends.cpu.activation import carr
from engine.backends.cpu.registry import cpu_kernel
from engine.backends.cpu.threads import SPLIT_MIN_ELEMENTS, parallel_for, stream_grain
from engine.errors import KernelError

_HALF = {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)}
#: row kernels (a few passes over each row) get chunks of at least this many elements: a
#: smaller chunk costs less than handing it to the pool thread and waiting for it
ROW_CHUNK_ELEMENTS = SPLIT_MIN_ELEMENTS // 4


@njit(nogil=True, cache=True)
def scale_shift(x, out, scale, shift, relu, r0, r1):
    """x, out: (N, C, S); out[n, c] = x[n, c] * scale[c] + shift[c] for rows n*C+c in r0:r1,
    then Relu when ``relu`` (a Relu the CPU plan fused in; NaN stays NaN). Rows are indexed
    from 0 so the loops vectorise."""
    N, C, S = x.shape
    for r in range(r0, r1):
        n = r // C
        c = r % C
        a = scale[c]
        b = shift[c]
        src = x[n, c]
        dst = out[n, c]
        if relu:
            zero = a - a  # a * 0 is float64 in Numba for a float32 a
            for s in range(S):
                v = src[s] * a + b
                dst[s] = zero if v <= zero else v  # NaN fails the test and stays, as in Relu
        else:
            for s in range(S):
                dst[s] = src[s] * a + b


def _float(layer, x):
    if x.dtype.kind != "f":
        raise KernelError(f"layer {layer.name!r}: {layer.op_type} needs float input, got {x.dtype}")


@cpu_kernel("BatchNormalization")
def BatchNormalization(layer, inputs):
    return batch_norm(layer, inputs)


def _scale_shift(gamma, beta, mean, var, eps: float, dtype):
    scale = gamma.astype(np.float64) / np.sqrt(var + eps)
    shift = beta.astype(np.float64) - mean * scale
    return scale.astype(dtype), shift.astype(dtype)


def batch_norm(layer, inputs, relu: bool = False):
    """BatchNormalization, followed by a Relu when ``relu`` (inference form only)."""
    x, gamma, beta, mean, var = inputs[:5]
    _float(layer, x)
    eps = float(layer.attr("epsilon", 1e-5))
    training = bool(layer.attr("training_mode", 0)) and (layer.opset or 99) >= 14
    extra = [o for o in layer.outputs[1:]]
    if relu and (training or extra):
        return None  # the caller runs the Relu itself
    if training:
        axes = (0,) + tuple(range(2, x.ndim))
        momentum = float(layer.attr("momentum", 0.9))
        bmean = x.mean(axis=axes, dtype=np.float64)
        bvar = x.var(axis=axes, dtype=np.float64)
        use_mean, use_var = bmean, bvar
        run_mean = (mean * momentum + bmean * (1 - momentum)).astype(mean.dtype)
        run_var = (var * momentum + bvar * (1 - momentum)).astype(var.dtype)
        sc, sh = _scale_shift(gamma, beta, use_mean, use_var, eps, x.dtype)
    else:  # statistics are model constants: scale and shift are kept on the layer
        known = layer.__dict__.get("_cpu_bn")
        key = (gamma, beta, mean, var, eps, x.dtype)
        if known is None or known[0][4:] != key[4:] or any(
                a is not b for a, b in zip(known[0][:4], key[:4])):
            known = (key, _scale_shift(gamma, beta, mean.astype(np.float64),
                                  var.astype(np.float64), eps, x.dtype))
            layer.__dict__["_cpu_bn"] = known
        sc, sh = known[1]
    N, C = x.shape[:2]
    out = np.empty_like(x, order="C")
    x3, o3 = carr(x).reshape(N, C, -1), out.reshape(N, C, -1)
    parallel_for(lambda lo, hi: scale_shift(x3, o3, sc, sh, relu, lo, hi), N * C,
                 grain=stream_grain(N * C, x3.shape[2]))
    if training:
        return out, run_mean, run_var
    if extra:  # the pre-9 training-form outputs in inference: pass the statistics through
        return (out, mean, var, mean, var)[: 1 + len(extra)]
    return out


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def layer_norm(x, scale, bias, out, mean_out, inv_out, eps, r0, r1, wide=False):
    """Rows r0:r1 of x (R, L) normalised; scale/bias (L,) (bias may be empty). Statistics in
    float64; ``reassoc`` lets the sums vectorise (no "nnan": a NaN still spreads to its row).
    The normalisation runs in float32 (``wide``: float64, for float64 x), with the mean and
    1/deviation rounded once per row: float64 per element made it a 4-wide loop with two
    conversions per value (0.58 -> 0.32 ns a value on BERT's rows)."""
    L = x.shape[1]
    has_bias = bias.shape[0] > 0
    for r in range(r0, r1):
        xr, orow = x[r], out[r]
        s = 0.0
        for i in range(L):
            s += xr[i]
        m = s / L
        v = 0.0
        for i in range(L):
            d = xr[i] - m
            v += d * d
        inv = 1.0 / np.sqrt(v / L + eps)
        mean_out[r] = m
        inv_out[r] = inv
        if wide:
            if has_bias:
                for i in range(L):
                    orow[i] = (xr[i] - m) * inv * scale[i] + bias[i]
            else:
                for i in range(L):
                    orow[i] = (xr[i] - m) * inv * scale[i]
            continue
        mt, it = np.float32(m), np.float32(inv)
        if has_bias:
            for i in range(L):
                orow[i] = (xr[i] - mt) * it * scale[i] + bias[i]
        else:
            for i in range(L):
                orow[i] = (xr[i] - mt) * it * scale[i]


def layer_norm_rows(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, eps: float):
    """x normalised over its last axis (scale and bias (L,), bias may be empty)."""
    L = x.shape[-1]
    rows = x.size // L
    x2 = carr(x).reshape(rows, L)
    out = np.empty((rows, L), x.dtype)
    mean, inv = np.empty(rows, np.float64), np.empty(rows, np.float64)
    wide = x.dtype == np.float64
    parallel_for(lambda lo, hi: layer_norm(x2, carr(scale), carr(bias), out, mean, inv, eps,
                                           lo, hi, wide), rows,
                 grain=stream_grain(rows, L))
    return out.reshape(x.shape)


@cpu_kernel("LayerNormalization", since=17)
def LayerNormalization(layer, inputs):
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    # what the call derives from its shapes and (constant) scale and bias, kept on the layer
    # while they are the same objects: broadcasting and converting them cost ~10 us a call
    known = layer.__dict__.get("_cpu_ln")
    if known is None or known[0] != (x.shape, x.dtype) or known[1] is not scale \
            or known[2] is not bias:
        _float(layer, x)
        axis = int(layer.attr("axis", -1))
        axis = axis + x.ndim if axis < 0 else axis
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        L = x.size // max(rows, 1)
        sc = carr(np.broadcast_to(scale, x.shape[axis:]), x.dtype).reshape(L)
        bi = (np.zeros(0, x.dtype) if bias is None else
              carr(np.broadcast_to(bias, x.shape[axis:]), x.dtype).reshape(L))
        known = ((x.shape, x.dtype), scale, bias, axis, rows, L, sc, bi,
                 float(layer.attr("epsilon", 1e-5)), x.dtype == np.float64,
                 stream_grain(rows, L))
        layer.__dict__["_cpu_ln"] = known
    axis, rows, L, sc, bi, eps, wide, grain = known[3:]
    x2 = carr(x).reshape(rows, L)
    out = np.empty((rows, L), x.dtype)
    mean = np.empty(rows, np.float64)
    inv = np.empty(rows, np.float64)
    parallel_for(lambda lo, hi: layer_norm(x2, sc, bi, out, mean, inv, eps, lo, hi, wide), rows,
                 grain=grain)
    if not any(layer.outputs[1:]):  # mean and inverse deviation not asked for (the usual)
        return out.reshape(x.shape)
    stat_shape = x.shape[:axis] + (1,) * (x.ndim - axis)
    stash = np.float32 if int(layer.attr("stash_type", 1)) == 1 else x.dtype
    return (out.reshape(x.shape), mean.astype(stash).reshape(stat_shape),
            inv.astype(stash).reshape(stat_shape))


@njit(nogil=True, cache=True)
def lrn_sumsq(x, out, size, r0, r1):
    """out[n, c] = sum of x[n, j]**2 over the channel window [c - (size-1)//2, c + size//2],
    for rows (n*C + c) r0:r1 of x, out: (N, C, S); whole contiguous planes, so it vectorises."""
    N, C, S = x.shape
    lo_off = (size - 1) // 2
    hi_off = size - 1 - lo_off
    for r in range(r0, r1):
        n = r // C
        c = r % C
        oc = out[n, c]
        oc[:] = 0
        for j in range(max(0, c - lo_off), min(C - 1, c + hi_off) + 1):
            xj = x[n, j]
            for s in range(S):
                oc[s] += xj[s] * xj[s]


@cpu_kernel("LRN")
def LRN(layer, inputs):
    x = inputs[0]
    _float(layer, x)
    N, C = x.shape[:2]
    out = np.empty_like(x, order="C")
    x3, o3 = carr(x).reshape(N, C, -1), out.reshape(N, C, -1)
    x2, o2 = x3.reshape(N * C, -1), o3.reshape(N * C, -1)
    size = int(layer.attr("size"))
    k = x.dtype.type(float(layer.attr("alpha", 1e-4)) / size)
    beta = float(layer.attr("beta", 0.75))
    bias = x.dtype.type(float(layer.attr("bias", 1.0)))

    def chunk(lo, hi):
        # the power runs in NumPy: its SIMD sqrt/pow loops beat Numba's scalar ones here
        lrn_sumsq(x3, o3, size, lo, hi)
        t = o2[lo:hi]
        t *= k
        t += bias
        if beta == 0.75:  # t ** 0.75 = sqrt(t) * sqrt(sqrt(t))
            r = np.sqrt(t)
            np.sqrt(r, out=t)
            t *= r
            np.divide(x2[lo:hi], t, out=t)
        else:
            np.power(t, -beta, out=t)
            t *= x2[lo:hi]

    parallel_for(chunk, N * C, grain=max(1, 16384 // max(1, x3.shape[2])))
    return out
