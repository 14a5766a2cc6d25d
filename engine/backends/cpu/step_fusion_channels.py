"""ConvNeXt-style channels-last blocks that the CPU plan runs on the NCHW tensors around them
(called by ``step_fusion.fuse_steps``; kernels in ``layer_norm_channels``):

* Transpose(0, 2, 3, 1) -> LayerNormalization over the last axis [-> Transpose(0, 3, 1, 2)]:
  one LayerNorm over the channels of the NCHW input;
* Mul(y, gamma) -> Transpose(0, 3, 1, 2) -> Add(residual): the layer scale, the Transpose
  back and the residual in one pass; without the Mul (the import pass folds a constant layer
  scale into the MatMul before it, ``passes.fusion_scale``) the Transpose back and the
  residual.
"""

from __future__ import annotations

from engine.backends.cpu.step_fusion_nlp import _Chain

#: make these fusions (False: the layers run as they are; benchmarks)
CHANNEL_LAYER_NORM = True


def match_layer_norm_channels(i, steps, t, only_users, constants):
    """Transpose(0, 2, 3, 1) -> LayerNormalization over the last axis [-> Transpose(0, 3,
    1, 2)]: a LayerNorm over the channels of the NCHW input (``layer_norm_channels``)."""
    chain = _Chain(steps, only_users)
    if not CHANNEL_LAYER_NORM or tuple(steps[i][0].attr("perm") or ()) != (0, 2, 3, 1):
        return None
    ln = chain.next(t, "LayerNormalization")
    if ln is None or steps[ln[0]][2][0] != t or int(ln[1].attr("axis", -1)) not in (-1, 3) \
            or len(ln[1].outputs) != 1:
        return None
    ins = steps[ln[0]][2]
    x, scale = steps[i][2][0], ins[1]
    bias = ins[2] if len(ins) > 2 and ins[2] else None
    eps = float(ln[1].attr("epsilon", 1e-5))
    parts, out_name = [ln[0]], steps[ln[0]][3]
    back = chain.next(out_name, "Transpose")
    back_to_nchw = back is not None and tuple(back[1].attr("perm") or ()) == (0, 3, 1, 2)
    if back_to_nchw:
        parts.append(back[0])
        out_name = steps[back[0]][3]

    def fused_ln_channels(layer, args):
        from engine.backends.cpu.layer_norm_channels import layer_norm_channels

        return layer_norm_channels(args[0], args[1], args[2] if bias else None, eps,
                                   back_to_nchw)

    fused_ln_channels.wants = (x, scale, bias) if bias else (x, scale)
    fused_ln_channels.reports = ln[0]
    return fused_ln_channels, parts, out_name


def _nchw_add(wants: tuple):
    """The fused step of ``scale_to_nchw_add`` reading ``wants``: (y, gamma, residual), or
    (y, residual) without a scale."""

    def fused_scale_to_nchw_add(layer, args):
        from engine.backends.cpu.layer_norm_channels import scale_to_nchw_add

        return scale_to_nchw_add(args[0], args[1] if len(args) == 3 else None, args[-1])

    fused_scale_to_nchw_add.wants = wants
    return fused_scale_to_nchw_add


def _residual_add(chain, name: str):
    """(step, residual name) of the Add(residual, ``name``) that alone reads ``name``."""
    add = chain.next(name, "Add")
    if add is None or not add[2] or not add[2][0]:
        return None
    return add[0], add[2][0]


def match_scale_to_nchw_add(i, steps, t, only_users, constants):
    """Mul(y, gamma) -> Transpose(0, 3, 1, 2) -> Add(residual, .): ConvNeXt's layer scale,
    the Transpose back to NCHW and the residual as one pass (``scale_to_nchw_add``)."""
    chain = _Chain(steps, only_users)
    ins = steps[i][2]
    if not CHANNEL_LAYER_NORM or steps[i][0].op_type != "Mul" or len(ins) != 2:
        return None
    y, gamma = (ins[0], ins[1]) if ins[1] in constants else (ins[1], ins[0])
    if gamma not in constants or y == gamma:
        return None
    tr = chain.next(t, "Transpose")
    if tr is None or tuple(tr[1].attr("perm") or ()) != (0, 3, 1, 2):
        return None
    found = _residual_add(chain, steps[tr[0]][3])
    if found is None:
        return None
    add, res = found
    return _nchw_add((y, gamma, res)), [tr[0], add], steps[add][3]


def match_to_nchw_add(i, steps, t, only_users, constants):
    """Transpose(0, 3, 1, 2) -> Add(residual, .): the Transpose back to NCHW and the residual
    as one pass (``scale_to_nchw_add`` without a scale)."""
    if not CHANNEL_LAYER_NORM or tuple(steps[i][0].attr("perm") or ()) != (0, 3, 1, 2) \
            or len(steps[i][2]) != 1:
        return None
    found = _residual_add(_Chain(steps, only_users), t)
    if found is None:
        return None
    add, res = found
    return _nchw_add((steps[i][2][0], res)), [add], steps[add][3]
