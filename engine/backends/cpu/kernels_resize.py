"""Resize and Upsample on the CPU (NumPy), separably: one (out x in) weight matrix per axis.

Every mode (nearest with its four rounding rules, linear, cubic), every coordinate
transform of opsets 10-19, ``exclude_outside``, ``antialias`` (the interpolation kernel
widened by 1/scale when downsampling) and tf_crop_and_resize extrapolation.
"""

from __future__ import annotations

import numpy as np

from engine.backends.cpu.kernel_util import metas
from engine.backends.cpu.registry import cpu_kernel
from engine.ops.resize import axis_weights, resize_plan, source_coords


def resize(layer, x: np.ndarray, out_shape, scales, roi, transform: str) -> np.ndarray:
    if layer.attr("mode", "nearest") == "nearest":
        return _nearest(layer, x, out_shape, scales, roi, transform)
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


def _nearest(layer, x: np.ndarray, out_shape, scales, roi, transform: str) -> np.ndarray:
    """Nearest neighbour as a gather per axis, in the input's dtype: exact, and a copy
    rather than a float64 matrix product (an Inf no longer leaks NaN into its neighbours)."""
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
