"""LayerNormalization over the last axis as two render passes (kernels_rows.py): the fast
path of the LayerNormalization kernel in kernels_norm.py."""

from __future__ import annotations

from engine.backends.gpu_pixel.kernels_rows import row_finish, row_stats


def fast_reason(layer, metas):
    """None when the two-pass last-axis path applies (one output, vector scale/bias)."""
    if len([o for o in layer.outputs if o]) > 1:
        return "LayerNormalization with Mean/InvStdDev outputs"
    x = metas[0]
    if x is None:
        return "unknown input"
    rank = len(x.shape)
    if rank == 0:
        return "LayerNormalization of a scalar is not supported"
    if int(layer.attr("axis", -1)) % rank != rank - 1:
        return "LayerNormalization over more than the last axis is not supported"
    if int(layer.attr("stash_type", 1)) != 1:
        return "LayerNormalization stash_type other than float32 is not supported"
    for i in (1, 2):
        m = metas[i] if i < len(metas) else None
        if m is not None and tuple(m.shape) != (x.shape[-1],):
            return "LayerNormalization scale/bias must be vectors over the last axis"
    return None


def layer_norm_last_axis(be, layer, inputs, in_metas, out_metas):
    shape = tuple(in_metas[0].shape)
    eps = float(layer.attr("epsilon", 1e-5))
    stats = row_stats(be, inputs[0], shape, "moments", eps=eps)
    bias = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    out = row_finish(be, inputs[0], stats, shape, "LayerNormalization",
                     scale=be.tex_of(inputs[1]),
                     bias=be.tex_of(bias) if bias is not None else None)
    be.free(stats)
    return [out]
