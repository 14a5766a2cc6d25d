"""Normalisations over channels: BatchNormalization, InstanceNormalization, LRN."""

from __future__ import annotations

from engine.backends.gpu_pixel.layout import layout_of
from engine.backends.gpu_pixel.registry import pixel_kernel


def _rank_check(minimum):
    def check(layer, metas):
        x = metas[0]
        if x is not None and len(x.shape) < minimum:
            return f"{layer.op_type} on a rank {len(x.shape)} input is not supported"
        if layer.op_type == "BatchNormalization":
            if layer.attr("training_mode", 0):
                return "BatchNormalization in training mode is not supported"
            if layer.attr("spatial", 1) != 1:
                return "BatchNormalization with spatial=0 is not supported"
            for m in metas[1:5]:
                if m is not None and len(m.shape) != 1:
                    return "BatchNormalization parameters must be 1-D"
        return None

    return check


@pixel_kernel("BatchNormalization", check=_rank_check(2))
def BatchNormalization(be, layer, inputs, in_metas, out_metas):
    eps = float(layer.attr("epsilon", 1e-5))
    return [be.run("norm", out_metas[0].shape, inputs[:5], floats=[(eps,)],
                   OP="BatchNormalization")]


@pixel_kernel("InstanceNormalization", check=_rank_check(3))
def InstanceNormalization(be, layer, inputs, in_metas, out_metas):
    eps = float(layer.attr("epsilon", 1e-5))
    lay = layout_of(tuple(in_metas[0].shape))
    rows = lay.row_strides()[lay.axis]
    return [be.run("norm", out_metas[0].shape, inputs[:3], n_tex=5, ints=[(rows,)],
                   floats=[(eps,)], OP="InstanceNormalization")]


@pixel_kernel("LRN", check=_rank_check(2))
def LRN(be, layer, inputs, in_metas, out_metas):
    f = (float(layer.attr("alpha", 1e-4)), float(layer.attr("beta", 0.75)),
         float(layer.attr("bias", 1.0)))
    return [be.run("norm", out_metas[0].shape, inputs[:1], n_tex=5,
                   ints=[(0, int(layer.attr("size")))], floats=[f], OP="LRN")]
