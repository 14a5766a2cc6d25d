"""Shape logic of Resize and Upsample; ``resize_plan`` resolves scales/sizes/axes once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.model import Layer
from engine.ops.base import Meta, Op, register_op
from engine.ops.shape_ops import norm_axis


@dataclass
class ResizePlan:
    """Per input axis: output size and the scale used for coordinate transforms; and the
    region of interest (start, end) per axis in normalised coordinates."""

    out_shape: tuple[int, ...]
    scales: tuple[float, ...]
    roi: tuple[tuple[float, float], ...]


def _value(meta: Meta | None) -> np.ndarray | None:
    if meta is None:
        return None
    if meta.value is None:
        raise ValueError("Resize: roi/scales/sizes must be known on the CPU")
    v = np.asarray(meta.value).reshape(-1)
    return v if v.size else None


def resize_plan(layer: Layer, inputs: list[Meta | None]) -> ResizePlan:
    x = inputs[0]
    shape = x.shape
    rank = len(shape)
    if layer.op_type == "Upsample":
        scales = _value(inputs[1]) if len(inputs) > 1 else np.asarray(layer.attr("scales"))
        roi = sizes = None
    elif (layer.opset or 11) < 11:  # Resize-10: X, scales
        roi, scales, sizes = None, _value(inputs[1]), None
    else:
        roi, scales, sizes = (_value(inputs[i]) if len(inputs) > i else None for i in (1, 2, 3))
    axes_attr = layer.attr("axes")
    axes = list(range(rank)) if not axes_attr else [norm_axis(a, rank) for a in axes_attr]
    full_scale = [1.0] * rank
    out = list(shape)
    if sizes is not None:
        if len(sizes) != len(axes):
            raise ValueError(f"Resize: {len(sizes)} sizes for {len(axes)} axes")
        ratio = [int(s) / shape[a] for s, a in zip(sizes, axes)]
        policy = layer.attr("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            for a, s, r in zip(axes, sizes, ratio):
                out[a], full_scale[a] = int(s), r
        else:
            r = min(ratio) if policy == "not_larger" else max(ratio)
            for a in axes:
                out[a] = int(np.floor(r * shape[a] + 0.5))
                full_scale[a] = r
    elif scales is not None:
        if len(scales) != len(axes):
            raise ValueError(f"Resize: {len(scales)} scales for {len(axes)} axes")
        for a, s in zip(axes, scales):
            if s <= 0:
                raise ValueError(f"Resize: scale {s} must be positive")
            full_scale[a] = float(s)
            out[a] = int(np.floor(shape[a] * float(s)))
    else:
        raise ValueError("Resize needs either scales or sizes")
    full_roi = [(0.0, 1.0)] * rank
    if roi is not None and layer.attr("coordinate_transformation_mode") == "tf_crop_and_resize":
        n = len(axes)
        for i, a in enumerate(axes):
            full_roi[a] = (float(roi[i]), float(roi[n + i]))
    return ResizePlan(tuple(out), tuple(full_scale), tuple(full_roi))


@register_op
class Resize(Op):
    """Opset 10: inputs X, scales."""

    cpu_inputs = (1,)

    def infer(self, layer: Layer, inputs):
        return [Meta(resize_plan(layer, inputs).out_shape, inputs[0].dtype)]


@register_op
class Resize_11(Resize):
    cpu_inputs = (1, 2, 3)


@register_op
class Upsample(Resize):
    """Opset 7: scales attribute; opset 9: scales input."""

    op_type = "Upsample"
    cpu_inputs = ()


@register_op
class Upsample_9(Upsample):
    cpu_inputs = (1,)


# -- sampling geometry shared by the backends' kernels -----------------------------------
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
