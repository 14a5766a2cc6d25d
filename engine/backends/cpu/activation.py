"""Epilogues of the CPU Conv/Gemm kernels: per-row bias plus the fused activation.

A fused layer carries ``activation`` (ONNX op name) and ``activation_params`` (floats),
see ``engine.passes.fusion``. Here the name becomes a small integer code so one compiled
Numba function serves every activation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.fastmath import sigmoid_any, silu_any, tanh_any
from engine.errors import KernelError
from engine.model import Layer
from engine.ops.activations import ACTIVATIONS

ACT_NONE, ACT_RELU, ACT_LEAKY, ACT_CLIP, ACT_SIGMOID, ACT_HARDSIGMOID, ACT_TANH = range(7)
#: only from the CPU plan's own fusions (``step_fusion``): x * sigmoid(x) (SiLU, Sigmoid + Mul)
#: and x * hardsigmoid(x; p0, p1) (HardSwish, or HardSigmoid + Mul)
ACT_SILU, ACT_XHARDSIGMOID = 7, 8
_CODES = {"Relu": ACT_RELU, "LeakyRelu": ACT_LEAKY, "Clip": ACT_CLIP, "Sigmoid": ACT_SIGMOID,
          "HardSigmoid": ACT_HARDSIGMOID, "Tanh": ACT_TANH, "HardSwish": ACT_XHARDSIGMOID,
          "Swish": ACT_SILU}
# every activation the fusion pass may put on a Conv/Gemm has an epilogue code here
assert set(_CODES) == set(ACTIVATIONS), set(ACTIVATIONS) ^ set(_CODES)


def carr(a: np.ndarray, dtype=None) -> np.ndarray:
    """``a`` as a C-contiguous, writable array: the one array type the Numba kernels are
    compiled (and warmed up) for. Read-only constants would otherwise get their own compile."""
    a = np.ascontiguousarray(a, dtype=dtype)
    return a if a.flags.writeable else a.copy()


def activation_of(layer: Layer) -> tuple[int, float, float]:
    """(code, p0, p1) of the layer's fused activation; (ACT_NONE, 0, 0) when there is none."""
    name = layer.attr("activation")
    if not name:
        return ACT_NONE, 0.0, 0.0
    if isinstance(name, bytes):
        name = name.decode()
    if name not in _CODES:
        raise KernelError(f"layer {layer.name!r}: the CPU cannot fuse activation {name!r}")
    params = [float(p) for p in (layer.attr("activation_params") or [])]
    if name == "HardSwish":  # x * HardSigmoid(x) with HardSwish's fixed slope and offset
        return ACT_XHARDSIGMOID, 1.0 / 6.0, 0.5
    if name == "Swish":  # the fusion pass fuses SiLU only (alpha 1)
        if params and params[0] != 1.0:
            raise KernelError(f"layer {layer.name!r}: the CPU fuses Swish with alpha 1 only")
        return ACT_SILU, 0.0, 0.0
    params += [0.0] * (2 - len(params))
    return _CODES[name], params[0], params[1]


def act_params(act: tuple[int, float, float], dtype) -> np.ndarray:
    """The activation's two parameters in ``dtype``. Clip's bounds are limited to the
    type's finite range: an absent bound is ``lowest()``/``max()`` in the ONNX spec, so
    -Inf/+Inf inputs become the type's extremes (as in onnxruntime and the GPU backends)."""
    params = np.array(act[1:], dtype=dtype)
    if act[0] == ACT_CLIP and params.dtype.kind == "f":
        info = np.finfo(params.dtype)
        params = np.clip(params, info.min, info.max)
    return params


@njit(inline="always", nogil=True, cache=True)
def _act(v, act, p0, p1):
    """The activation of one value. Comparisons are written so that a NaN ``v`` fails
    them all and comes out as NaN (IEEE), never as a bound: ``min``/``max`` would drop it.
    The parameters are finite (``act_params``), so ``p0 - p0`` is a zero of v's type where
    ``v * 0`` would be NaN for an infinite ``v`` (and ``p0 * 0`` is float64 in Numba for a
    float32 ``p0``, which sends the whole epilogue through float64 and libm)."""
    zero = p0 - p0
    if act == ACT_RELU:
        return zero if v <= zero else v
    if act == ACT_LEAKY:
        return v if v >= zero else v * p0
    if act == ACT_CLIP:
        return p0 if v < p0 else (p1 if v > p1 else v)
    if act == ACT_SIGMOID:
        return sigmoid_any(v)
    if act == ACT_HARDSIGMOID:
        t = v * p0 + p1
        return zero if t < zero else (zero + 1 if t > zero + 1 else t)
    if act == ACT_TANH:
        return tanh_any(v)
    if act == ACT_SILU:
        return silu_any(v)
    if act == ACT_XHARDSIGMOID:
        return v * min(max(v * p0 + p1, zero), zero + 1)
    return v


@njit(inline="always", nogil=True, cache=True)
def act_row(src, dst, n, b, act, p0, p1):
    """``dst[:n] = act(src[:n] + b)``: one loop per activation, each with the code as a
    constant, so the inlined ``_act`` folds to a branch-free body that LLVM vectorises (a
    single loop testing ``act`` per value ran 10-20x slower for Sigmoid and HardSigmoid)."""
    zero = p0 - p0
    if act == ACT_NONE:
        for q in range(n):
            dst[q] = src[q] + b
    elif act == ACT_RELU:
        for q in range(n):
            v = src[q] + b
            dst[q] = zero if v <= zero else v  # NaN fails the test and stays
    elif act == ACT_LEAKY:
        for q in range(n):
            dst[q] = _act(src[q] + b, ACT_LEAKY, p0, p1)
    elif act == ACT_CLIP:
        for q in range(n):
            dst[q] = _act(src[q] + b, ACT_CLIP, p0, p1)
    elif act == ACT_SIGMOID:
        for q in range(n):
            dst[q] = _act(src[q] + b, ACT_SIGMOID, p0, p1)
    elif act == ACT_HARDSIGMOID:
        for q in range(n):
            dst[q] = _act(src[q] + b, ACT_HARDSIGMOID, p0, p1)
    elif act == ACT_TANH:
        for q in range(n):
            dst[q] = _act(src[q] + b, ACT_TANH, p0, p1)
    elif act == ACT_SILU:
        for q in range(n):
            dst[q] = _act(src[q] + b, ACT_SILU, p0, p1)
    elif act == ACT_XHARDSIGMOID:
        for q in range(n):
            dst[q] = _act(src[q] + b, ACT_XHARDSIGMOID, p0, p1)
    else:
        for q in range(n):
            dst[q] = _act(src[q] + b, act, p0, p1)


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def act_plane(src, stride, dst, b, act, p0, p1):
    """``dst[y, :] = act(src[y * stride:][:ow] + b)`` for every row of a 2-D ``dst``: the
    activation is chosen once per plane, not once per row (with ``act_row`` inlined into a
    row loop, the nine loop forms made small planes of the direct convolutions 2-3x
    slower)."""
    oh, ow = dst.shape
    if act == ACT_NONE:
        for y in range(oh):
            act_row(src[y * stride:], dst[y], ow, b, ACT_NONE, p0, p1)
    elif act == ACT_RELU:
        for y in range(oh):
            act_row(src[y * stride:], dst[y], ow, b, ACT_RELU, p0, p1)
    elif act == ACT_LEAKY:
        for y in range(oh):
            act_row(src[y * stride:], dst[y], ow, b, ACT_LEAKY, p0, p1)
    elif act == ACT_CLIP:
        for y in range(oh):
            act_row(src[y * stride:], dst[y], ow, b, ACT_CLIP, p0, p1)
    elif act == ACT_SIGMOID:
        for y in range(oh):
            act_row(src[y * stride:], dst[y], ow, b, ACT_SIGMOID, p0, p1)
    elif act == ACT_HARDSIGMOID:
        for y in range(oh):
            act_row(src[y * stride:], dst[y], ow, b, ACT_HARDSIGMOID, p0, p1)
    elif act == ACT_TANH:
        for y in range(oh):
            act_row(src[y * stride:], dst[y], ow, b, ACT_TANH, p0, p1)
    elif act == ACT_SILU:
        for y in range(oh):
            act_row(src[y * stride:], dst[y], ow, b, ACT_SILU, p0, p1)
    elif act == ACT_XHARDSIGMOID:
        for y in range(oh):
            act_row(src[y * stride:], dst[y], ow, b, ACT_XHARDSIGMOID, p0, p1)
    else:
        for y in range(oh):
            act_row(src[y * stride:], dst[y], ow, b, act, p0, p1)


@njit(inline="always", nogil=True, cache=True)
def store_row(src, dst, n, b, add, has_res, act, p0, p1, post, q0, q1):
    """``dst[:n] = post(act(src + b) + add)``, or ``act(src + b)`` without a residual: the
    row epilogue of the direct convolutions, common forms as plain loops (they vectorise).
    Kept small: it is inlined into row loops, where ``act_row``'s nine loop forms made small
    planes 2-3x slower; whole planes without a residual go through ``act_plane``."""
    zero = p0 - p0
    if has_res:
        if act == ACT_NONE and post == ACT_RELU:
            for q in range(n):
                v = src[q] + b + add[q]
                dst[q] = zero if v <= zero else v  # NaN fails the test and stays
        elif act == ACT_NONE and post == ACT_NONE:
            for q in range(n):
                dst[q] = src[q] + b + add[q]
        else:
            for q in range(n):
                dst[q] = _act(_act(src[q] + b, act, p0, p1) + add[q], post, q0, q1)
    elif act == ACT_RELU:
        for q in range(n):
            v = src[q] + b
            dst[q] = zero if v <= zero else v
    elif act == ACT_NONE:
        for q in range(n):
            dst[q] = src[q] + b
    else:
        for q in range(n):
            dst[q] = _act(src[q] + b, act, p0, p1)


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def bias_act_rows(y, bias, act, params, r0, r1, c0, c1):
    """In place on block ``r0:r1, c0:c1`` of a 2-D ``y``: ``y[r] = act(y[r] + bias[r])``; an
    empty bias adds nothing. ``params`` holds the activation's two parameters in y's dtype.
    The activation is chosen once, outside the row loop (see ``act_plane``)."""
    p0, p1 = params[0], params[1]
    zero = p0 - p0
    nb = bias.shape[0]
    if act == ACT_NONE:
        for r in range(r0, r1):
            row = y[r, c0:c1]
            act_row(row, row, c1 - c0, bias[r] if nb > 0 else zero, ACT_NONE, p0, p1)
    elif act == ACT_RELU:
        for r in range(r0, r1):
            row = y[r, c0:c1]
            act_row(row, row, c1 - c0, bias[r] if nb > 0 else zero, ACT_RELU, p0, p1)
    elif act == ACT_LEAKY:
        for r in range(r0, r1):
            row = y[r, c0:c1]
            act_row(row, row, c1 - c0, bias[r] if nb > 0 else zero, ACT_LEAKY, p0, p1)
    elif act == ACT_CLIP:
        for r in range(r0, r1):
            row = y[r, c0:c1]
            act_row(row, row, c1 - c0, bias[r] if nb > 0 else zero, ACT_CLIP, p0, p1)
    elif act == ACT_SIGMOID:
        for r in range(r0, r1):
            row = y[r, c0:c1]
            act_row(row, row, c1 - c0, bias[r] if nb > 0 else zero, ACT_SIGMOID, p0, p1)
    elif act == ACT_HARDSIGMOID:
        for r in range(r0, r1):
            row = y[r, c0:c1]
            act_row(row, row, c1 - c0, bias[r] if nb > 0 else zero, ACT_HARDSIGMOID, p0, p1)
    elif act == ACT_TANH:
        for r in range(r0, r1):
            row = y[r, c0:c1]
            act_row(row, row, c1 - c0, bias[r] if nb > 0 else zero, ACT_TANH, p0, p1)
    elif act == ACT_SILU:
        for r in range(r0, r1):
            row = y[r, c0:c1]
            act_row(row, row, c1 - c0, bias[r] if nb > 0 else zero, ACT_SILU, p0, p1)
    elif act == ACT_XHARDSIGMOID:
        for r in range(r0, r1):
            row = y[r, c0:c1]
            act_row(row, row, c1 - c0, bias[r] if nb > 0 else zero, ACT_XHARDSIGMOID, p0, p1)
    else:
        for r in range(r0, r1):
            row = y[r, c0:c1]
            act_row(row, row, c1 - c0, bias[r] if nb > 0 else zero, act, p0, p1)


@njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def bias_res_act_rows(y, bias, act, params, res, post, pparams, r0, r1, c0, c1):
    """``bias_act_rows`` followed by a residual: ``y = post(act(y + bias) + res)`` on block
    ``r0:r1, c0:c1``; ``res`` has y's shape, ``pparams`` holds ``post``'s parameters."""
    p0, p1 = params[0], params[1]
    q0, q1 = pparams[0], pparams[1]
    zero = p0 - p0
    for r in range(r0, r1):
        b = bias[r] if bias.shape[0] > 0 else zero
        row = y[r, c0:c1]
        add = res[r, c0:c1]
        if act == ACT_NONE and post == ACT_RELU:
            for c in range(c1 - c0):
                v = row[c] + b + add[c]
                row[c] = zero if v <= zero else v  # NaN fails the test and stays
        elif act == ACT_NONE and post == ACT_NONE:
            for c in range(c1 - c0):
                row[c] = row[c] + b + add[c]
        else:
            for c in range(c1 - c0):
                row[c] = _act(_act(row[c] + b, act, p0, p1) + add[c], post, q0, q1)


def epilogue_fn(y2d: np.ndarray, bias: np.ndarray | None, act: tuple[int, float, float]):
    """``fn(r0, r1, c0=0, c1=all)`` adding the per-row bias and applying the activation to a
    block of ``y2d`` in place, or None when there is nothing to do."""
    if bias is None and act[0] == ACT_NONE:
        return None
    dt = y2d.dtype
    b = np.zeros(0, dt) if bias is None else carr(bias.reshape(-1), dt)
    params = act_params(act, dt)
    cols = y2d.shape[1]
    return lambda r0, r1, c0=0, c1=cols: bias_act_rows(y2d, b, act[0], params, r0, r1, c0, c1)


def epilogue(y2d: np.ndarray, bias: np.ndarray | None, act: tuple[int, float, float]) -> None:
    """Bias and activation over all rows of ``y2d``, split over the backend's threads."""
    from engine.backends.cpu.threads import parallel_for

    fn = epilogue_fn(y2d, bias, act)
    if fn is not None:
        parallel_for(fn, y2d.shape[0], grain=max(1, 16384 // max(1, y2d.shape[1])))


@njit(nogil=True, cache=True)
def relu_into(x, out):
    """``out = max(x, 0)`` over flat float arrays; NaN stays NaN, as with ``np.maximum``.
    NumPy's maximum runs 4x slower than this loop here."""
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = 0.0 if v <= 0.0 else v
