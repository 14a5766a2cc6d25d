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
