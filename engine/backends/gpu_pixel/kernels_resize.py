"""Resize and Upsample: one pass per resized axis, each applying a host-built tap table.

The interpolation weights come from the same host-side functions the CPU kernel uses
(coordinate transforms, nearest rounding, linear/cubic, antialias, exclude_outside), so
every mode behaves alike; the GPU does the gathering and weighting.
"""

from __future__ import annotations

import numpy as np

from engine.backends.gpu_pixel.kernels_reshape import reshape_copy
from engine.backends.gpu_pixel.layout import layout_of
from engine.backends.gpu_pixel.registry import pixel_kernel, value_reason
from engine.ops.resize import axis_weights, resize_plan, source_coords

RANK = 6
MAX_TAPS = 64


class _Legacy:
    """Resize-10 and Upsample: asymmetric coordinates, nearest rounds down."""

    def __init__(self, layer):
        self.layer = layer

    def attr(self, name, default=None):
        return "floor" if name == "nearest_mode" else self.layer.attr(name, default)


def tap_table(attrs, transform, n_in, n_out, scale, roi) -> np.ndarray:
    """[n_out, 2 * taps + 1] float32: source indices, weights, additive constant."""
    coords = source_coords(transform, n_out, n_in, scale, roi)
    w = axis_weights(coords, n_in, scale, attrs)
    taps = max(1, int((w != 0).sum(axis=1).max()))
    if taps > MAX_TAPS:
        raise ValueError(f"Resize needs {taps} taps per output (at most {MAX_TAPS})")
    table = np.zeros((n_out, 2 * taps + 1), np.float32)
    for o in range(n_out):
        idx = np.nonzero(w[o])[0]
        table[o, :len(idx)] = idx
        table[o, taps:taps + len(idx)] = w[o, idx]
    if transform == "tf_crop_and_resize":
        outside = (coords < 0) | (coords > n_in - 1)
        table[outside, taps:2 * taps] = 0.0
        table[outside, 2 * taps] = float(attrs.attr("extrapolation_value", 0.0))
    return table


def _check(layer, metas):
    for i in range(1, len(layer.inputs)):
        if layer.inputs[i]:
            why = value_reason(metas, i, f"{layer.op_type}'s input {i}")
            if why:
                return why
    mode = layer.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear", "cubic", "bicubic"):
        return f"Resize mode {mode!r} is not supported"
    return None


def resize(be, layer, inputs, in_metas, legacy):
    plan = resize_plan(layer, in_metas)
    attrs = _Legacy(layer) if legacy else layer
    transform = "asymmetric" if legacy else layer.attr("coordinate_transformation_mode",
                                                       "half_pixel")
    x, shape = inputs[0], list(in_metas[0].shape)
    rank = len(shape)
    crop = transform == "tf_crop_and_resize"
    for axis in range(rank):
        n_in, n_out = shape[axis], plan.out_shape[axis]
        if n_in == n_out and plan.scales[axis] == 1.0 and not crop:
            continue
        table = tap_table(attrs, transform, n_in, n_out, plan.scales[axis], plan.roi[axis])
        t = be.upload(table)
        shape[axis] = n_out
        y = resize_axis(be, x, t, tuple(shape), axis + RANK - rank, (table.shape[1] - 1) // 2,
                        n_in)
        be.free(t)
        if x is not inputs[0]:
            be.free(x)
        x = y
    if x is inputs[0]:  # nothing resized: a copy, one texel load each
        x = reshape_copy(be, x, tuple(shape))
    return [x]


def resize_axis(be, x, table, shape, k: int, taps: int, n_in: int):
    """One pass resizing padded axis ``k`` to ``shape`` by the tap table: whole texels when
    ``k`` is not the blocked axis (resize_texel.wgsl), else one element per component."""
    lay = layout_of(shape)
    if k == lay.axis:
        return be.run("resize", shape, [x, table], ints=[(k, taps)])
    along_x = k == RANK - 1
    rows = 0 if along_x else lay.row_strides()[k]
    return be.run("resize_texel", shape, [x, table], ints=[(rows, taps, lay.dims[k], n_in)],
                  ALONG_X=str(along_x).lower())


@pixel_kernel("Resize", since=10, check=_check, tensors=(0,))
def Resize_10(be, layer, inputs, in_metas, out_metas):
    return resize(be, layer, inputs, in_metas, legacy=True)


@pixel_kernel("Resize", since=11, check=_check, tensors=(0,))
def Resize_11(be, layer, inputs, in_metas, out_metas):
    return resize(be, layer, inputs, in_metas, legacy=False)


@pixel_kernel("Upsample", check=_check, tensors=(0,))
def Upsample(be, layer, inputs, in_metas, out_metas):
    return resize(be, layer, inputs, in_metas, legacy=True)
