"""Normalisations: BatchNormalization, InstanceNormalization, LRN (over channels) and
LayerNormalization (over the trailing axes; statistics pass, then an elementwise pass)."""

from __future__ import annotations

from engine.backends.gpu_pixel.kernels_layernorm_fast import fast_reason, layer_norm_last_axis
from engine.backends.gpu_pixel.layout import MAX_RANK, layout_of
from engine.backends.gpu_pixel.registry import pixel_kernel
from engine.ops.norm import stats_shape


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


def _layer_norm_check(layer, metas):
    x = metas[0]
    if x is None:
        return None
    if len(x.shape) == 0:
        return "LayerNormalization of a scalar is not supported"
    axis = int(layer.attr("axis", -1))
    if not -len(x.shape) <= axis < len(x.shape):
        return f"LayerNormalization axis {axis} is out of range for rank {len(x.shape)}"
    if len(layer.outputs) > 1 and layer.attr("stash_type", 1) != 1:
        return "LayerNormalization statistics in a stash type other than float32"
    return None


@pixel_kernel("LayerNormalization", check=_layer_norm_check, max_outputs=3)
def LayerNormalization(be, layer, inputs, in_metas, out_metas):
    if fast_reason(layer, in_metas) is None:  # last axis: one pass over each row's stats
        return layer_norm_last_axis(be, layer, inputs, in_metas, out_metas)
    shape = tuple(in_metas[0].shape)
    rank = len(shape)
    axis = int(layer.attr("axis", -1)) % rank
    ints = [(axis + MAX_RANK - rank, int(len(inputs) > 2 and inputs[2] is not None))]
    floats = [(float(layer.attr("epsilon", 1e-5)),)]
    stats = stats_shape(shape, axis)
    mean = be.run("layernorm", stats, inputs[:1], n_tex=5, ints=ints, floats=floats, OP="Mean")
    inv = be.run("layernorm", stats, inputs[:1], n_tex=5, ints=ints, floats=floats,
                 OP="InvStdDev")
    texes = [inputs[0], mean, inv, inputs[1]] + ([inputs[2]] if ints[0][1] else [])
    y = be.run("layernorm", shape, texes, n_tex=5, ints=ints, floats=floats, OP="Apply")
    outs = [y]
    for k, t in enumerate((mean, inv), 1):
        wanted = k < len(out_metas) and k < len(layer.outputs) and layer.outputs[k]
        if not wanted:
            be.free(t)
        if k < len(out_metas):
            outs.append(t if wanted else None)
    return outs
