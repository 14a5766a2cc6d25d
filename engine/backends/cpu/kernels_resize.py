"""Resize and Upsample on the CPU (NumPy), separably: one (out x in) weight matrix per axis.

Every mode (nearest with its four rounding rules, linear, cubic), every coordinate
transform of opsets 10-19, ``exclude_outside``, ``antialias`` (the interpolation kernel
widened by 1/scale when downsampling) and tf_crop_and_resize extrapolation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.backends.cpu.kernel_util import metas
from engine.backends.cpu.registry import cpu_kernel
from engine.ops.resize import axis_weights, resize_plan, source_coords


def resize(layer, x: np.ndarray, out_shape, scales, roi, transform: str) -> np.ndarray:
    if layer.attr("mode", "nearest") == "nearest":
        return _nearest(layer, x, out_shape, scales, roi, transform)
    y = x.astype(np.float64)
    # a NaN or an infinity would reach every output of its line through the zero weights of
    # the dense contraction (0 * inf): such inputs take the sparse one
    finite = bool(np.isfinite(y.sum()))
    extrapolation = float(layer.attr("extrapolation_value", 0.0))
    for axis, (n_out, n_in) in enumerate(zip(out_shape, x.shape)):
        crop = transform == "tf_crop_and_resize"
        if n_out == n_in and scales[axis] == 1.0 and not crop:
            continue
        if n_out == 0 or n_in == 0:
            shape = list(y.shape)
            shape[axis] = n_out
            y = np.zeros(shape)
            continue
        coords = source_coords(transform, n_out, n_in, scales[axis], roi[axis])
        w = axis_weights(coords, n_in, scales[axis], layer)
        y = np.moveaxis(np.tensordot(w, np.moveaxis(y, axis, 0), axes=(1, 0)), 0, axis) \
            if finite else _contract_taps(w, y, axis)
        if crop:
            outside = (coords < 0) | (coords > n_in - 1)
            if outside.any():
                shape = [1] * y.ndim
                shape[axis] = n_out
                y = np.where(outside.reshape(shape), extrapolation, y)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        y = np.clip(np.rint(y), info.min, info.max)
    return y.astype(x.dtype)


def _contract_taps(w: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    """``tensordot`` of the weights ``w`` (n_out, n_in) with ``y`` along ``axis``, each output
    summing only its own taps (nonzero weights)."""
    yt = np.moveaxis(y, axis, 0)
    out = np.zeros((w.shape[0],) + yt.shape[1:])
    for i in range(w.shape[0]):
        taps = np.flatnonzero(w[i])
        if taps.size:
            out[i] = np.tensordot(w[i, taps], yt[taps], axes=(0, 0))
    return np.moveaxis(out, 0, axis)


@njit(nogil=True, cache=True)
def repeat2d(x, out, sh, sw):
    """out (P, H*sh, W*sw) = x (P, H, W) with every value repeated sh x sw times."""
    P, H, W = x.shape
    for p in range(P):
        for y in range(H):
            src = x[p, y]
            first = out[p, y * sh]
            for t in range(sw):
                dst = first[t:]
                for i in range(W):
                    dst[i * sw] = src[i]
            for k in range(1, sh):
                row = out[p, y * sh + k]
                for i in range(W * sw):
                    row[i] = first[i]


def _repeats(idx: np.ndarray, n_in: int) -> int:
    """s when the gather ``idx`` repeats every input index s times in order (0 if not)."""
    s = idx.shape[0] // n_in if n_in else 0
    if s < 1 or idx.shape[0] != s * n_in:
        return 0
    return s if np.array_equal(idx, np.repeat(np.arange(n_in), s)) else 0


def _nearest(layer, x: np.ndarray, out_shape, scales, roi, transform: str) -> np.ndarray:
    """Nearest neighbour as a gather per axis, in the input's dtype: exact, and a copy
    rather than a float64 matrix product (an Inf no longer leaks NaN into its neighbours).
    Upsampling the last two axes by whole factors (a detector's FPN) is one pass that
    writes each value's block (``repeat2d``), found once per shape and kept on the layer."""
    if x.ndim >= 3 and transform != "tf_crop_and_resize" and x.size \
            and tuple(out_shape[:-2]) == x.shape[:-2]:
        key = (x.shape, tuple(out_shape), transform)
        known = layer.__dict__.get("_cpu_repeat2d") if hasattr(layer, "__dict__") else None
        if known is None or known[0] != key:
            reps = []
            for axis in (x.ndim - 2, x.ndim - 1):
                coords = source_coords(transform, out_shape[axis], x.shape[axis],
                                       scales[axis], roi[axis])
                idx = axis_weights(coords, x.shape[axis], scales[axis], layer).argmax(axis=1)
                reps.append(_repeats(idx, x.shape[axis]))
            known = (key, tuple(reps))
            if hasattr(layer, "__dict__"):
                layer.__dict__["_cpu_repeat2d"] = known
        sh, sw = known[1]
        if sh and sw:
            out = np.empty(tuple(out_shape), x.dtype)
            h, w = x.shape[-2:]
            repeat2d(np.ascontiguousarray(x).reshape(-1, h, w), out.reshape(-1, h * sh, w * sw),
                     sh, sw)
            return out
    y = x
    extrapolation = layer.attr("extrapolation_value", 0.0)
    for axis, (n_out, n_in) in enumerate(zip(out_shape, x.shape)):
        crop = transform == "tf_crop_and_resize"
        if n_out == n_in and scales[axis] == 1.0 and not crop:
            continue
        if n_out == 0 or n_in == 0:
            shape = list(y.shape)
            shape[axis] = n_out
            y = np.zeros(shape, x.dtype)
            continue
        coords = source_coords(transform, n_out, n_in, scales[axis], roi[axis])
        idx = axis_weights(coords, n_in, scales[axis], layer).argmax(axis=1)
        y = np.take(y, idx, axis=axis)
        if crop:
            outside = (coords < 0) | (coords > n_in - 1)
            if outside.any():
                shape = [1] * y.ndim
                shape[axis] = n_out
                y = np.where(outside.reshape(shape), np.asarray(extrapolation, x.dtype), y)
    return np.ascontiguousarray(y)


@cpu_kernel("Resize", since=10)
def Resize_10(layer, inputs):
    plan = resize_plan(layer, metas(inputs))
    # opset 10 is Upsample's behaviour: asymmetric coordinates, nearest rounds down
    return _legacy(layer, inputs[0], plan)


@cpu_kernel("Resize", since=11)
def Resize_11(layer, inputs):
    plan = resize_plan(layer, metas(inputs))
    transform = layer.attr("coordinate_transformation_mode", "half_pixel")
    return resize(layer, inputs[0], plan.out_shape, plan.scales, plan.roi, transform)


def _legacy(layer, x, plan):
    class _Attrs:
        def attr(self, name, default=None):
            if name == "nearest_mode":
                return "floor"
            return layer.attr(name, default)

    return resize(_Attrs(), x, plan.out_shape, plan.scales, plan.roi, "asymmetric")


@cpu_kernel("Upsample")
def Upsample(layer, inputs):
    return _legacy(layer, inputs[0], resize_plan(layer, metas(inputs)))
