"""Resize and Upsample on the CPU (NumPy), separably: one (out x in) weight matrix per axis.

Every mode (nearest with its four rounding rules, linear, cubic), every coordinate
transform of opsets 10-19, ``exclude_outside``, ``antialias`` (the interpolation kernel
widened by 1/scale when downsampling) and tf_crop_and_resize extrapolation.
"""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.kernel_util import metas
from engine.backends.cpu.registry import cpu_kernel
from engine.ops.resize import resize_plan


def source_coords(mode: str, n_out: int, n_in: int, scale: float,
                  roi: tuple[float, float]) -> np.ndarray:
    """Input coordinate of each output index under a coordinate transformation mode."""
    y = np.arange(n_out, dtype=np.float64)
    out_len = scale * n_in  # the real-valued output length
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / out_len)
        return offset + (y + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if out_len > 1 else np.full(n_out, -0.5)
    if mode == "align_corners":
        return y * (n_in - 1) / (out_len - 1) if out_len != 1 else np.zeros(n_out)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    if mode == "tf_crop_and_resize":
        start, end = roi
        if out_len == 1:
            return np.full(n_out, (end - start) * (n_in - 1) / 2 + start * (n_in - 1))
        return start * (n_in - 1) + y * (end - start) * (n_in - 1) / (out_len - 1)
    raise ValueError(f"Resize: unknown coordinate_transformation_mode {mode!r}")


def _round(x: np.ndarray, how: str) -> np.ndarray:
    if how == "round_prefer_floor":
        return np.ceil(x - 0.5)
    if how == "round_prefer_ceil":
        return np.floor(x + 0.5)
    if how == "floor":
        return np.floor(x)
    if how == "ceil":
        return np.ceil(x)
    raise ValueError(f"Resize: unknown nearest_mode {how!r}")


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def axis_weights(x: np.ndarray, n_in: int, scale: float, layer) -> np.ndarray:
    """Dense (len(x), n_in) interpolation weights for source coordinates ``x``."""
    mode = layer.attr("mode", "nearest")
    n_out = len(x)
    w = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    if mode == "nearest":
        how = layer.attr("nearest_mode", "round_prefer_floor")
        idx = np.clip(_round(x, how), 0, n_in - 1).astype(np.int64)
        w[rows, idx] = 1.0
        return w
    if mode in ("linear", "bilinear", "trilinear"):
        support, kern = 1.0, lambda d: np.clip(1 - np.abs(d), 0, 1)
    elif mode in ("cubic", "bicubic"):
        a = float(layer.attr("cubic_coeff_a", -0.75))
        support, kern = 2.0, lambda d: _cubic(d, a)
    else:
        raise ValueError(f"Resize: unknown mode {mode!r}")
    s = min(scale, 1.0) if layer.attr("antialias", 0) else 1.0
    reach = int(np.ceil(support / s))
    taps = np.floor(x)[:, None] + np.arange(-reach + 1, reach + 1)[None, :]
    coef = kern((taps - x[:, None]) * s)
    coef = coef / coef.sum(axis=1, keepdims=True)
    if layer.attr("exclude_outside", 0):
        coef = np.where((taps < 0) | (taps > n_in - 1), 0.0, coef)
        total = coef.sum(axis=1, keepdims=True)
        coef = coef / np.where(total == 0, 1.0, total)
    idx = np.clip(taps, 0, n_in - 1).astype(np.int64)
    np.add.at(w, (np.broadcast_to(rows[:, None], idx.shape), idx), coef)
    return w


def resize(layer, x: np.ndarray, out_shape, scales, roi, transform: str) -> np.ndarray:
    y = x.astype(np.float64)
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
        y = np.moveaxis(np.tensordot(w, np.moveaxis(y, axis, 0), axes=(1, 0)), 0, axis)
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
